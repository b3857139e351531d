//! HTTP/3 through a target HTTPS proxy, in process, with a real HTTP/3 client (the `h3` crate
//! over `quinn`): served and advertised (`Alt-Svc`) with `quicOverride: ENABLE`, neither with
//! `DISABLE` or `NONE`.

mod dataplane_support;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Buf;
use dataplane_support::*;
use fake_kube_apiserver::local::annotations::PodControls;
use fake_kube_apiserver::local::echo::{EchoServer, PodIdentity};
use fake_kube_apiserver::local::images::App;
use gce_emulator::dataplane::upstream::insecure_client_config;
use gce_emulator::dataplane::ListenerInfo;
use serde_json::{json, Value};
use tokio::sync::watch;

const HOST: &str = "shop.example";

/// Target HTTPS proxy `web` (certificate for HOST, `quicOverride` = `quic`) in front of
/// backend service `web`.
fn proxy(w: &mut World, quic: &str) {
    w.put(
        "global/targetHttpsProxies/web",
        json!({"urlMap": url("global/urlMaps/web"),
        "sslCertificates": [url("global/sslCertificates/web")], "quicOverride": quic}),
    );
    w.publish();
}

async fn https_lb(w: &mut World, backend: SocketAddr, quic: &str) -> ListenerInfo {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec![HOST.to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    w.put("global/sslCertificates/web", json!({"kind": "compute#sslCertificate", "type": "SELF_MANAGED", "certificate": cert.pem()}));
    w.snap.private_keys.insert(
        dataplane_support::key("global/sslCertificates/web"),
        key.serialize_pem(),
    );
    w.service("web", None, &[backend], json!({}));
    w.put(
        "global/urlMaps/web",
        json!({"defaultService": url("global/backendServices/web")}),
    );
    w.put(
        "global/forwardingRules/web",
        json!({"IPAddress": lb_ip().to_string(), "portRange": "443-443",
        "target": url("global/targetHttpsProxies/web")}),
    );
    proxy(w, quic);
    w.listener("web").await
}

/// The `Alt-Svc` header of a GET over TCP (HTTP/1.1 or HTTP/2 by ALPN), if any.
async fn alt_svc(l: &ListenerInfo) -> Option<String> {
    let c = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .resolve(HOST, l.local_addr)
        .no_proxy()
        .build()
        .unwrap();
    let r = c
        .get(format!("https://{HOST}:{}/", l.local_addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.headers()
        .get("alt-svc")
        .map(|v| v.to_str().unwrap().to_string())
}

/// An HTTP/3 request with the `h3` crate over a new QUIC connection to `addr`; `Err` when no
/// QUIC connection can be made (the client gives up after 2 s without an answer).
async fn h3_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &'static [u8],
) -> Result<(u16, Value), String> {
    let tls = insecure_client_config(&[b"h3"]);
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    transport.max_idle_timeout(Some(Duration::from_secs(2).try_into().unwrap()));
    config.transport_config(Arc::new(transport));
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(config);
    let conn = endpoint
        .connect(addr, HOST)
        .map_err(|e| e.to_string())?
        .await
        .map_err(|e| format!("QUIC connection: {e}"))?;
    let (mut driver, mut send_request) = h3::client::new(h3_quinn::Connection::new(conn))
        .await
        .map_err(|e| e.to_string())?;
    let drive = tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    let req = http::Request::builder()
        .method(method)
        .uri(format!("https://{HOST}{path}"))
        .body(())
        .unwrap();
    let mut stream = send_request
        .send_request(req)
        .await
        .map_err(|e| e.to_string())?;
    if !body.is_empty() {
        stream
            .send_data(bytes::Bytes::from_static(body))
            .await
            .map_err(|e| e.to_string())?;
    }
    stream.finish().await.map_err(|e| e.to_string())?;
    let resp = stream.recv_response().await.map_err(|e| e.to_string())?;
    let mut text = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
        text.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
    }
    drop(send_request);
    drive.abort();
    let v = serde_json::from_slice(&text).unwrap_or(Value::Null);
    Ok((resp.status().as_u16(), v))
}

#[tokio::test]
async fn quic_override_enable_serves_http3_and_disable_refuses_it() {
    // The local echo workload: its JSON names the Pod, path, headers and body size.
    let identity = Arc::new(PodIdentity {
        name: "web-1".to_string(),
        namespace: "shop".to_string(),
        pod_ip: Ipv4Addr::LOCALHOST,
        app: App::Echo,
        container: "echo".to_string(),
        image: "echo".to_string(),
        node: "local-node-1".to_string(),
        zone: "us-central1-a".to_string(),
        service_account: "default".to_string(),
    });
    let (_controls, rx) = watch::channel(PodControls::default());
    let backend = EchoServer::start(identity, 0, None, rx).unwrap();
    let mut w = World::start();
    let l = https_lb(&mut w, backend.addr(), "ENABLE").await;

    let port = l.local_addr.port();
    assert_eq!(
        alt_svc(&l).await.as_deref(),
        Some(format!("h3=\":{port}\"; ma=2592000").as_str())
    );
    let (status, v) = poll("an HTTP/3 answer", 30, async || {
        h3_request(l.local_addr, "GET", "/cart?x=1", b"").await.ok()
    })
    .await;
    assert_eq!((status, v["pod"].as_str()), (200, Some("web-1")), "{v}");
    assert_eq!(v["path"], "/cart");
    assert!(
        v["headers"]["via"].as_str().unwrap().contains("1.1 google"),
        "{v}"
    );
    // A request body streams through too.
    let (status, v) = h3_request(l.local_addr, "POST", "/orders", b"{\"qty\":2}")
        .await
        .unwrap();
    assert_eq!((status, v["bodyBytes"].as_u64()), (200, Some(9)), "{v}");

    proxy(&mut w, "DISABLE");
    poll("Alt-Svc withdrawn", 30, async || {
        alt_svc(&l).await.is_none().then_some(())
    })
    .await;
    let refused = h3_request(l.local_addr, "GET", "/", b"").await;
    let why = refused.expect_err("HTTP/3 answered under DISABLE");
    assert!(why.starts_with("QUIC connection"), "{why}");

    // NONE: Google decides; the emulator does not offer QUIC.
    proxy(&mut w, "NONE");
    assert_eq!(alt_svc(&l).await, None);
    let why = h3_request(l.local_addr, "GET", "/", b"").await.unwrap_err();
    assert!(why.starts_with("QUIC connection"), "{why}");
}
