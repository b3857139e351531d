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

    // TLS 1.0 and 1.1 are refused. rustls cannot offer them, so the client is `openssl s_client`
    // at security level 0 (OpenSSL 3 refuses TLS 1.0/1.1 by itself at its default level, which
    // would make a refusal prove nothing). The control: the same client completes a TLS 1.0 and
    // a TLS 1.1 handshake with `openssl s_server`, so a refusal below is the emulator's.
    let control = LegacyTlsServer::start().await;
    for version in [LegacyTls::V1_0, LegacyTls::V1_1] {
        assert_eq!(
            legacy_handshake(control.addr, version).await.as_deref(),
            Some(version.protocol_line()),
            "control: openssl s_client must complete a {version:?} handshake with a server that \
             allows it"
        );
        for l in [&l12, &l13] {
            assert_eq!(
                legacy_handshake(l.local_addr, version).await,
                None,
                "{version:?} must be refused by {}",
                l.forwarding_rule
            );
        }
    }
}

/// A TLS version rustls does not implement, offered through `openssl s_client`.
#[derive(Clone, Copy, Debug)]
enum LegacyTls {
    V1_0,
    V1_1,
}

impl LegacyTls {
    fn flag(self) -> &'static str {
        match self {
            LegacyTls::V1_0 => "-tls1",
            LegacyTls::V1_1 => "-tls1_1",
        }
    }

    /// The `Protocol  : ...` value `s_client` prints for a session of this version.
    fn protocol_line(self) -> &'static str {
        match self {
            LegacyTls::V1_0 => "TLSv1",
            LegacyTls::V1_1 => "TLSv1.1",
        }
    }
}

const OPENSSL_MISSING: &str = "the TLS 1.0/1.1 checks need the `openssl` command line tool \
     (rustls cannot offer those versions): install it with `apt-get install openssl` \
     (`.ci/run` and `make deps` do)";

/// Offers only `version` to `addr` with `openssl s_client` at security level 0 (so OpenSSL's own
/// policy does not refuse first). Returns the negotiated protocol (`TLSv1`, `TLSv1.1`) when the
/// handshake completed, `None` when it was refused. Panics when openssl is not installed.
async fn legacy_handshake(addr: std::net::SocketAddr, version: LegacyTls) -> Option<String> {
    let out = tokio::process::Command::new("openssl")
        .args(["s_client", "-connect", &addr.to_string()])
        .args(["-servername", "t.example", version.flag()])
        .args(["-cipher", "DEFAULT@SECLEVEL=0"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap_or_else(|e| panic!("{OPENSSL_MISSING}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    // `New, TLSv1.0, Cipher is ECDHE-...` for a session, `New, (NONE), Cipher is (NONE)` without.
    let established = text
        .lines()
        .any(|l| l.starts_with("New, ") && !l.contains("(NONE)"));
    if !established {
        return None;
    }
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Protocol  : "))
        .map(|p| p.trim().to_string())
}

/// `openssl s_server` on an ephemeral loopback port allowing TLS 1.0 and up at security level 0
/// (the control for [`legacy_handshake`]); killed on drop.
struct LegacyTlsServer {
    addr: std::net::SocketAddr,
    _child: tokio::process::Child,
    _dir: tempfile::TempDir,
}

impl LegacyTlsServer {
    async fn start() -> LegacyTlsServer {
        use tokio::io::AsyncBufReadExt;
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["t.example".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        let mut child = tokio::process::Command::new("openssl")
            .args(["s_server", "-accept", "127.0.0.1:0", "-cert"])
            .arg(&cert_path)
            .arg("-key")
            .arg(&key_path)
            .args(["-min_protocol", "TLSv1", "-cipher", "DEFAULT@SECLEVEL=0"])
            // s_server stops at the end of its standard input: keep it open.
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("{OPENSSL_MISSING}: {e}"));
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let addr = loop {
            let line = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
                .await
                .expect("openssl s_server printed its ACCEPT line")
                .unwrap()
                .expect("openssl s_server exited before accepting");
            if let Some(a) = line.strip_prefix("ACCEPT ") {
                break a.trim().parse().unwrap();
            }
        };
        // Keep reading its output so it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        LegacyTlsServer {
            addr,
            _child: child,
            _dir: dir,
        }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_protocols_https_and_http2_with_matching_health_checks() {
    let (h1, h2, plain) = (
        tls_backend("tls-h1").await.addr,
        tls_backend("tls-h2").await.addr,
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
