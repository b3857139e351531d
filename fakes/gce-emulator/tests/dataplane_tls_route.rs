//! Proxy Network Load Balancers in process: target TCP proxies with Network Services tlsRoutes
//! (SNI passthrough: the client's TLS session ends at the backend, whose certificate it sees),
//! weighted destinations, wildcard SNI hosts, unknown SNI refused, and target SSL proxies
//! (TLS terminated with the proxy's certificate, plain TCP to the backend).

mod dataplane_support;

use std::net::SocketAddr;
use std::sync::Arc;

use dataplane_support::*;
use gce_emulator::dataplane::ListenerInfo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Accepts any certificate: the tests read which certificate was presented.
#[derive(Debug)]
struct AnyCert;

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

fn san(der: &[u8]) -> String {
    let (_, c) = x509_parser::parse_x509_certificate(der).unwrap();
    let san = c.subject_alternative_name().unwrap().unwrap();
    san.value.general_names[0].to_string()
}

/// Connects with TLS and SNI `sni`; returns (SAN of the certificate presented, the line the
/// server wrote), or `None` when the connection closes before a TLS session exists.
async fn tls_hello(l: &ListenerInfo, sni: &str) -> Option<(String, String)> {
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .dangerous()
    .with_custom_certificate_verifier(Arc::new(AnyCert))
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(cfg));
    let tcp = tokio::net::TcpStream::connect(l.local_addr).await.unwrap();
    let mut tls = connector
        .connect(ServerName::try_from(sni.to_string()).unwrap(), tcp)
        .await
        .ok()?;
    let cert = tls.get_ref().1.peer_certificates()?[0].to_vec();
    tls.write_all(b"hello\n").await.ok()?;
    let mut line = String::new();
    tls.read_to_string(&mut line).await.ok()?;
    Some((san(&cert), line))
}

/// A TLS server whose certificate names `name`; it answers every connection with
/// `{name}:{first line received}` and closes.
async fn tls_server(name: &str) -> SocketAddr {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec![name.to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let der_key = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap();
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert.der().clone()], der_key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let name = name.to_string();
    tokio::spawn(async move {
        while let Ok((s, _)) = tcp.accept().await {
            let (acceptor, name) = (acceptor.clone(), name.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(s).await else {
                    return;
                };
                let mut buf = [0u8; 64];
                let n = tls.read(&mut buf).await.unwrap_or(0);
                let line = String::from_utf8_lossy(&buf[..n]).trim().to_string();
                let _ = tls.write_all(format!("{name}:{line}").as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    addr
}

/// A plain TCP server answering `{name}:{first line}`.
async fn tcp_server(name: &str) -> SocketAddr {
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let name = name.to_string();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = tcp.accept().await {
            let name = name.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let line = String::from_utf8_lossy(&buf[..n]).trim().to_string();
                let _ = s.write_all(format!("{name}:{line}").as_bytes()).await;
            });
        }
    });
    addr
}

fn tcp_service(w: &mut World, name: &str, eps: &[SocketAddr]) {
    w.service(name, None, eps, json!({"protocol": "TCP", "loadBalancingScheme": "EXTERNAL_MANAGED",
        "backends": if eps.is_empty() { json!([]) } else { json!([{"group": url(&format!("zones/{ZONE}/networkEndpointGroups/neg-{name}")), "balancingMode": "CONNECTION"}]) }}));
}

fn ns_route(w: &mut World, name: &str, hosts: &[&str], dests: &[(&str, u32)]) {
    let destinations: Vec<_> = dests
        .iter()
        .map(|(s, wt)| json!({"serviceName": format!("projects/{PROJECT}/locations/global/backendServices/{s}"), "weight": wt}))
        .collect();
    w.put(
        &format!("locations/global/tlsRoutes/{name}"),
        json!({"targetProxies": [format!("projects/{PROJECT}/locations/global/targetTcpProxies/tp")],
               "rules": [{"matches": [{"sniHost": hosts}], "action": {"destinations": destinations}}]}),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sni_routes_pass_tls_through_to_weighted_backends_and_refuse_unknown_names() {
    let (a, b, c) = (
        tls_server("a.backend").await,
        tls_server("b.backend").await,
        tls_server("c.backend").await,
    );
    let mut w = World::start();
    tcp_service(&mut w, "nomatch", &[]);
    tcp_service(&mut w, "bs-a", &[a]);
    tcp_service(&mut w, "bs-b", &[b]);
    tcp_service(&mut w, "bs-c", &[c]);
    w.put(
        "global/targetTcpProxies/tp",
        json!({"service": url("global/backendServices/nomatch"), "proxyHeader": "NONE"}),
    );
    w.put(
        "global/forwardingRules/fr",
        json!({"IPAddress": lb_ip().to_string(), "portRange": "443-443", "loadBalancingScheme": "EXTERNAL_MANAGED",
               "target": url("global/targetTcpProxies/tp")}),
    );
    ns_route(
        &mut w,
        "split",
        &["a.example.com", "b.example.com"],
        &[("bs-a", 3), ("bs-b", 1)],
    );
    ns_route(&mut w, "wild", &["*.w.example.com"], &[("bs-c", 1)]);
    w.publish();
    let l = w.listener("fr").await;

    // Each name reaches a backend whose own certificate the client sees: never decrypted by
    // the proxy (the backend read the client's plaintext line).
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..24 {
        let host = if i % 2 == 0 {
            "a.example.com"
        } else {
            "b.example.com"
        };
        let (cert, line) = tls_hello(&l, host)
            .await
            .expect("a TLS session with a backend");
        let backend = cert
            .trim_start_matches("DNSName(")
            .trim_end_matches(')')
            .to_string();
        assert_eq!(
            line,
            format!("{backend}:hello"),
            "the backend that answered holds the certificate"
        );
        assert!(
            backend == "a.backend" || backend == "b.backend",
            "{host} reached {backend}"
        );
        seen.insert(backend);
    }
    assert_eq!(
        seen.len(),
        2,
        "both weighted destinations take connections: {seen:?}"
    );
    let (cert, _) = tls_hello(&l, "x.w.example.com")
        .await
        .expect("wildcard route");
    assert_eq!(cert, "DNSName(c.backend)");
    // No route for the name, and the proxy's service has no backends: refused.
    assert_eq!(tls_hello(&l, "unknown.example.com").await, None);
    assert_eq!(
        tls_hello(&l, "w.example.com").await,
        None,
        "*.w.example.com does not cover w.example.com"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssl_proxy_terminates_with_its_certificate_and_sends_plain_tcp() {
    let plain = tcp_server("plain").await;
    let mut w = World::start();
    tcp_service(&mut w, "bs", &[plain]);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["term.example.com".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    w.put(
        "global/sslCertificates/c",
        json!({"type": "SELF_MANAGED", "certificate": cert.pem()}),
    );
    w.snap.private_keys.insert(
        dataplane_support::key("global/sslCertificates/c"),
        key.serialize_pem(),
    );
    w.put(
        "global/targetSslProxies/sp",
        json!({"service": url("global/backendServices/bs"), "sslCertificates": [url("global/sslCertificates/c")]}),
    );
    w.put(
        "global/forwardingRules/fr",
        json!({"IPAddress": lb_ip().to_string(), "portRange": "443-443", "loadBalancingScheme": "EXTERNAL_MANAGED",
               "target": url("global/targetSslProxies/sp")}),
    );
    w.publish();
    let l = w.listener("fr").await;
    let (cert, line) = tls_hello(&l, "term.example.com")
        .await
        .expect("TLS with the proxy");
    assert_eq!(cert, "DNSName(term.example.com)");
    assert_eq!(
        line, "plain:hello",
        "the backend got the decrypted bytes over plain TCP"
    );
}
