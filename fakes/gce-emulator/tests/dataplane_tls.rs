//! HTTPS through target HTTPS proxies, in process: SNI certificate selection, sslPolicy, ALPN,
//! MANAGED certificates issued by the local CA.

mod dataplane_support;

use std::net::IpAddr;

use dataplane_support::*;
use gce_emulator::ca::LocalCa;
use gce_emulator::dataplane::ListenerInfo;
use serde_json::json;

/// A self-signed certificate for `names`, stored as a SELF_MANAGED sslCertificate `name`.
fn self_managed(w: &mut World, name: &str, names: &[&str]) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert =
        rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap()
            .self_signed(&key)
            .unwrap();
    let path = format!("global/sslCertificates/{name}");
    w.put(&path, json!({"kind": "compute#sslCertificate", "type": "SELF_MANAGED", "certificate": cert.pem()}));
    w.snap
        .private_keys
        .insert(key_of(&path), key.serialize_pem());
    cert.pem()
}

fn key_of(path: &str) -> String {
    format!("projects/{PROJECT}/{path}")
}

fn https_lb(w: &mut World, name: &str, ip: IpAddr, certs: &[&str], policy: Option<&str>) {
    w.put(
        &format!("global/urlMaps/{name}"),
        json!({"defaultService": url("global/backendServices/bs")}),
    );
    let mut proxy = json!({"urlMap": url(&format!("global/urlMaps/{name}")),
        "sslCertificates": certs.iter().map(|c| url(&format!("global/sslCertificates/{c}"))).collect::<Vec<_>>()});
    if let Some(p) = policy {
        proxy["sslPolicy"] = json!(url(&format!("global/sslPolicies/{p}")));
    }
    w.put(&format!("global/targetHttpsProxies/{name}"), proxy);
    w.put(
        &format!("global/forwardingRules/{name}"),
        json!({"IPAddress": ip.to_string(), "portRange": "443-443", "target": url(&format!("global/targetHttpsProxies/{name}"))}),
    );
}

fn cert_names(der: &[u8]) -> Vec<String> {
    let (_, c) = x509_parser::parse_x509_certificate(der).unwrap();
    let san = c.subject_alternative_name().unwrap().unwrap();
    san.value
        .general_names
        .iter()
        .map(|g| g.to_string())
        .collect()
}

async fn presented(
    l: &ListenerInfo,
    host: &str,
) -> (Vec<String>, reqwest::Version, serde_json::Value) {
    let c = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .tls_info(true)
        .resolve(host, l.local_addr)
        .build()
        .unwrap();
    let r = c
        .get(format!("https://{host}:{}/", l.local_addr.port()))
        .send()
        .await
        .unwrap();
    let info = r
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .unwrap()
        .peer_certificate()
        .unwrap()
        .to_vec();
    let version = r.version();
    (cert_names(&info), version, r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sni_selects_the_closest_certificate_else_the_first() {
    let a = Backend::start("a").await;
    let mut w = World::start();
    w.service("bs", None, &[a.addr], json!({}));
    self_managed(&mut w, "c-default", &["default.example"]);
    self_managed(&mut w, "c-shop", &["shop.example"]);
    self_managed(&mut w, "c-wild", &["*.api.example"]);
    https_lb(
        &mut w,
        "lb",
        lb_ip(),
        &["c-default", "c-shop", "c-wild"],
        None,
    );
    w.publish();
    let l = w.listener("lb").await;
    let (names, version, v) = presented(&l, "shop.example").await;
    assert_eq!(names, vec!["DNSName(shop.example)"]);
    assert_eq!(version, reqwest::Version::HTTP_2, "ALPN negotiates h2");
    assert_eq!(v["headers"]["x-forwarded-proto"], "https");
    assert_eq!(
        presented(&l, "v1.api.example").await.0,
        vec!["DNSName(*.api.example)"]
    );
    assert_eq!(
        presented(&l, "unknown.example").await.0,
        vec!["DNSName(default.example)"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssl_policy_min_tls_version_is_enforced() {
    let a = Backend::start("a").await;
    let mut w = World::start();
    w.service("bs", None, &[a.addr], json!({}));
    self_managed(&mut w, "c", &["t.example"]);
    w.put(
        "global/sslPolicies/tls12",
        json!({"minTlsVersion": "TLS_1_2", "profile": "MODERN"}),
    );
    w.put(
        "global/sslPolicies/tls13",
        json!({"minTlsVersion": "TLS_1_3", "profile": "RESTRICTED"}),
    );
    https_lb(&mut w, "p12", lb_ip(), &["c"], Some("tls12"));
    https_lb(&mut w, "p13", lb_ip(), &["c"], Some("tls13"));
    w.publish();
    let (l12, l13) = (w.listener("p12").await, w.listener("p13").await);

    let tls12_only = |l: &ListenerInfo| {
        reqwest::Client::builder()
            .danger_accept_invalid_certs(true)
            .max_tls_version(reqwest::tls::Version::TLS_1_2)
            .resolve("t.example", l.local_addr)
            .build()
            .unwrap()
    };
    let ok = tls12_only(&l12)
        .get(format!("https://t.example:{}/", l12.local_addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status().as_u16(), 200, "TLS 1.2 accepted under TLS_1_2");
    let refused = tls12_only(&l13)
        .get(format!("https://t.example:{}/", l13.local_addr.port()))
        .send()
        .await;
    assert!(refused.is_err(), "TLS 1.2 refused under TLS_1_3");

    // TLS 1.0 and 1.1 are refused (openssl is the only client here that still offers them).
    for flag in ["-tls1", "-tls1_1"] {
        let out = tokio::process::Command::new("openssl")
            .args([
                "s_client",
                "-connect",
                &l12.local_addr.to_string(),
                "-servername",
                "t.example",
                flag,
            ])
            .stdin(std::process::Stdio::null())
            .output()
            .await;
        let Ok(out) = out else {
            eprintln!("openssl not installed: TLS 1.0/1.1 part skipped");
            return;
        };
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            !out.status.success() || !text.contains("BEGIN CERTIFICATE"),
            "{flag} must fail: {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_certificate_from_the_local_ca_is_trusted() {
    let a = Backend::start("a").await;
    let mut w = World::start();
    w.service("bs", None, &[a.addr], json!({}));
    let ca = LocalCa::generate().unwrap();
    let issued = ca.issue(&["managed.example".to_string()]).unwrap();
    let path = "global/sslCertificates/m";
    w.put(
        path,
        json!({"type": "MANAGED", "managed": {"domains": ["managed.example"], "status": "ACTIVE", "domainStatus": {"managed.example": "ACTIVE"}},
               "certificate": issued.cert_pem, "expireTime": issued.expire_time}),
    );
    w.snap
        .private_keys
        .insert(key_of(path), issued.key_pem.clone());
    https_lb(&mut w, "lb", lb_ip(), &["m"], None);
    w.publish();
    let l = w.listener("lb").await;
    let root = reqwest::Certificate::from_pem(ca.ca_pem().as_bytes()).unwrap();
    let c = reqwest::Client::builder()
        .add_root_certificate(root)
        .resolve("managed.example", l.local_addr)
        .build()
        .unwrap();
    let r = c
        .get(format!("https://managed.example:{}/", l.local_addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "verified against the local CA");
}

/// A TLS backend (self-signed, ALPN h2 and http/1.1) answering JSON with its HTTP version;
/// `/healthz` answers 200.
async fn tls_backend(name: &'static str) -> std::net::SocketAddr {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["backend.internal".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let der_key = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap();
    let mut cfg = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert.der().clone()], der_key)
    .unwrap();
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(cfg));
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((s, _)) = tcp.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(s).await else {
                    return;
                };
                let svc = hyper::service::service_fn(
                    |req: hyper::Request<hyper::body::Incoming>| async move {
                        let body = json!({"backend": name, "version": format!("{:?}", req.version()), "uri": req.uri().path()});
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(
                            http_body_util::Full::new(bytes::Bytes::from(body.to_string())),
                        ))
                    },
                );
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_protocols_https_and_http2_with_matching_health_checks() {
    let (h1, h2, plain) = (
        tls_backend("tls-h1").await,
        tls_backend("tls-h2").await,
        Backend::start("plain").await,
    );
    let mut w = World::start();
    for (name, ty, block) in [
        ("hc-https", "HTTPS", "httpsHealthCheck"),
        ("hc-h2", "HTTP2", "http2HealthCheck"),
    ] {
        w.put(
            &format!("global/healthChecks/{name}"),
            json!({"type": ty, "checkIntervalSec": 1, "timeoutSec": 1, "healthyThreshold": 1, "unhealthyThreshold": 2,
                   block: {"portSpecification": "USE_SERVING_PORT", "requestPath": "/healthz"}}),
        );
    }
    w.put(
        "global/healthChecks/hc-tcp",
        json!({"type": "TCP", "checkIntervalSec": 1, "timeoutSec": 1, "healthyThreshold": 1, "tcpHealthCheck": {"port": plain.addr.port()}}),
    );
    w.service(
        "bs-https",
        Some("hc-https"),
        &[h1],
        json!({"protocol": "HTTPS"}),
    );
    w.service("bs-h2", Some("hc-h2"), &[h2], json!({"protocol": "HTTP2"}));
    w.service("bs-plain", Some("hc-tcp"), &[plain.addr], json!({}));
    w.http_lb(
        "lb",
        lb_ip(),
        json!({"defaultService": url("global/backendServices/bs-plain"),
               "hostRules": [{"hosts": ["*"], "pathMatcher": "m"}],
               "pathMatchers": [{"name": "m", "defaultService": url("global/backendServices/bs-plain"), "pathRules": [
                   {"paths": ["/h1/*"], "service": url("global/backendServices/bs-https")},
                   {"paths": ["/h2/*"], "service": url("global/backendServices/bs-h2")}]}]}),
    );
    w.publish();
    let l = w.listener("lb").await;
    w.wait_state(
        "bs-https",
        h1,
        gce_emulator::health_state::HealthState::Healthy,
    )
    .await;
    w.wait_state(
        "bs-h2",
        h2,
        gce_emulator::health_state::HealthState::Healthy,
    )
    .await;
    w.wait_state(
        "bs-plain",
        plain.addr,
        gce_emulator::health_state::HealthState::Healthy,
    )
    .await;
    let c = client(&l, &["p.example"]);
    let (s1, _, v1, t1) = get(&c, &l, "p.example", "/h1/x").await;
    assert_eq!(
        (s1, v1["backend"].as_str(), v1["version"].as_str()),
        (200, Some("tls-h1"), Some("HTTP/1.1")),
        "{t1}"
    );
    let (s2, _, v2, t2) = get(&c, &l, "p.example", "/h2/x").await;
    assert_eq!(
        (s2, v2["backend"].as_str(), v2["version"].as_str()),
        (200, Some("tls-h2"), Some("HTTP/2.0")),
        "{t2}"
    );
    assert_eq!(backend_of(&get(&c, &l, "p.example", "/").await.2), "plain");
}
