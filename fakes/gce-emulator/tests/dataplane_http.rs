//! Data plane over real sockets, in process: snapshots in, real HTTP requests through the
//! forwarding rule's listener to real backends.

mod dataplane_support;

use std::sync::atomic::Ordering;

use dataplane_support::*;
use gce_emulator::health_state::HealthState;
use serde_json::json;

fn bs(name: &str) -> String {
    url(&format!("global/backendServices/{name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_and_path_routing_with_forwarding_headers() {
    let (a, b, c, d) = (
        Backend::start("a").await,
        Backend::start("b").await,
        Backend::start("c").await,
        Backend::start("d").await,
    );
    let mut w = World::start();
    w.health_check("hc", 1, 2);
    w.service("bs-a", Some("hc"), &[a.addr], json!({}));
    w.service("bs-b", Some("hc"), &[b.addr], json!({}));
    w.service("bs-c", Some("hc"), &[c.addr], json!({}));
    w.service("bs-d", Some("hc"), &[d.addr], json!({}));
    let ip = lb_ip();
    w.http_lb(
        "lb",
        ip,
        json!({"kind": "compute#urlMap", "defaultService": bs("bs-d"),
        "hostRules": [
            {"hosts": ["shop.example"], "pathMatcher": "shop"},
            {"hosts": ["*.wild.example"], "pathMatcher": "wild"},
        ],
        "pathMatchers": [
            {"name": "shop", "defaultService": bs("bs-a"), "pathRules": [
                {"paths": ["/cart/*"], "service": bs("bs-b")},
                {"paths": ["/cart/checkout/*"], "service": bs("bs-c")},
            ]},
            {"name": "wild", "defaultService": bs("bs-c")},
        ]}),
    );
    w.publish();
    let l = w.listener("lb").await;
    assert_eq!(l.local_addr.ip(), ip);
    for (name, addr) in [
        ("bs-a", a.addr),
        ("bs-b", b.addr),
        ("bs-c", c.addr),
        ("bs-d", d.addr),
    ] {
        w.wait_state(name, addr, HealthState::Healthy).await;
    }
    let cl = client(&l, &["shop.example", "x.wild.example", "other.example"]);
    let cases = [
        ("shop.example", "/", "a"),
        ("shop.example", "/cart/items", "b"),
        ("shop.example", "/cart/checkout/pay", "c"),
        ("shop.example", "/cart", "a"),
        ("x.wild.example", "/anything", "c"),
        ("other.example", "/", "d"),
    ];
    for (host, path, want) in cases {
        let (status, headers, v, text) = get(&cl, &l, host, path).await;
        assert_eq!(status, 200, "{host}{path}: {text}");
        assert_eq!(backend_of(&v), want, "{host}{path}");
        let url = format!("http://{host}{path}");
        let (explained, _) = w.explained_backend("lb", &url, &[]);
        assert_eq!(explained, backend_of(&v), "explain {url}");
        assert_eq!(
            v["headers"]["host"],
            format!("{host}:{}", l.local_addr.port()),
            "Host preserved"
        );
        assert_eq!(v["headers"]["x-forwarded-for"], format!("127.0.0.1, {ip}"));
        assert_eq!(v["headers"]["x-forwarded-proto"], "http");
        assert_eq!(v["headers"]["via"], "1.1 google");
        assert_eq!(headers["via"], "1.1 google");
    }
    // A default decided: explain names the rule that came closest and why it did not match.
    let ex = w.explain("lb", "http://shop.example/cart", &[]);
    assert_eq!(ex.routing.matched, "pathMatchers[shop].defaultService");
    let closest = ex.routing.closest.expect("a closest rule");
    assert_eq!(closest.rule, "pathMatchers[shop].pathRules[0] \"/cart/*\"");
    assert!(closest.why_not.contains("/cart/"), "{closest:?}");
    let ex = w.explain("lb", "http://shop.example/cart/checkout/pay", &[]);
    assert_eq!(ex.endpoint.map(|e| e.address), Some(c.addr.to_string()));
    assert_eq!(
        ex.routing.host_rule,
        "hostRules[0] host \"shop.example\" (exact)"
    );
    // A client-supplied X-Forwarded-For is kept, then the client and LB addresses appended.
    let r = cl
        .get(format!("http://shop.example:{}/", l.local_addr.port()))
        .header("x-forwarded-for", "10.1.1.1")
        .send()
        .await
        .unwrap();
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(
        v["headers"]["x-forwarded-for"],
        format!("10.1.1.1, 127.0.0.1, {ip}")
    );

    let m = w.dp.metrics_text();
    assert!(m.contains("dataplane_requests_total{forwarding_rule=\"projects/p/global/forwardingRules/lb\",code_class=\"2xx\"} 7"), "{m}");
    assert!(m.contains("dataplane_backend_requests_total{backend_service=\"projects/p/global/backendServices/bs-a\",code_class=\"2xx\"}"), "{m}");
    assert!(
        m.contains("dataplane_request_duration_seconds_bucket"),
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_rules_regex_header_query_and_rewrite() {
    let (a, b, c) = (
        Backend::start("a").await,
        Backend::start("b").await,
        Backend::start("c").await,
    );
    let mut w = World::start();
    w.service("bs-a", None, &[a.addr], json!({}));
    w.service("bs-b", None, &[b.addr], json!({}));
    w.service("bs-c", None, &[c.addr], json!({}));
    w.http_lb(
        "lb",
        lb_ip(),
        json!({"defaultService": bs("bs-a"),
            "hostRules": [{"hosts": ["*"], "pathMatcher": "m"}],
            "pathMatchers": [{"name": "m", "defaultService": bs("bs-a"), "routeRules": [
                {"priority": 1, "matchRules": [{"prefixMatch": "/", "headerMatches": [{"headerName": "x-canary", "exactMatch": "yes"}]}], "service": bs("bs-b")},
                {"priority": 2, "matchRules": [{"regexMatch": "/items/[0-9]+"}], "service": bs("bs-c")},
                {"priority": 3, "matchRules": [{"prefixMatch": "/api/", "queryParameterMatches": [{"name": "v", "exactMatch": "2"}]}],
                 "service": bs("bs-b"), "routeAction": {"urlRewrite": {"pathPrefixRewrite": "/v2/", "hostRewrite": "backend.internal"}}},
            ]}]}),
    );
    w.publish();
    let l = w.listener("lb").await;
    let cl = client(&l, &["h.example"]);
    let port = l.local_addr.port();
    let canary = cl
        .get(format!("http://h.example:{port}/items/5"))
        .header("x-canary", "yes")
        .send()
        .await
        .unwrap();
    let v: serde_json::Value = canary.json().await.unwrap();
    assert_eq!(backend_of(&v), "b", "header match has the higher priority");
    let canary_header = [("x-canary", "yes")];
    let (explained, _) = w.explained_backend("lb", "http://h.example/items/5", &canary_header);
    assert_eq!(explained, "b", "explain with the canary header");
    // (path, the backend a real request reaches, the rule explain names as closest)
    let rows = [
        ("/items/42", "c", None),
        ("/items/x", "a", Some("routeRules[0]")),
        ("/api/list?v=2", "b", None),
        ("/api/list?v=1", "a", Some("routeRules[2]")),
    ];
    for (path, want, closest) in rows {
        let (_, _, v, _) = get(&cl, &l, "h.example", path).await;
        assert_eq!(backend_of(&v), want, "{path}");
        let (explained, near) = w.explained_backend("lb", &format!("http://h.example{path}"), &[]);
        assert_eq!(explained, want, "explain {path}");
        if let Some(c) = closest {
            let near = near.unwrap_or_default();
            assert!(
                near.starts_with(&format!("pathMatchers[m].{c}")),
                "{path}: {near}"
            );
        }
    }
    let ex = w.explain("lb", "http://h.example/api/list?v=2", &[]);
    assert_eq!(ex.rewritten_path.as_deref(), Some("/v2/list"));
    assert_eq!(ex.rewritten_host.as_deref(), Some("backend.internal"));
    let (_, _, v, _) = get(&cl, &l, "h.example", "/api/list?v=2").await;
    assert_eq!(v["uri"], "/v2/list?v=2");
    assert_eq!(v["headers"]["host"], "backend.internal");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_with_each_response_code() {
    let a = Backend::start("a").await;
    let mut w = World::start();
    w.service("bs-a", None, &[a.addr], json!({}));
    let codes = [
        ("MOVED_PERMANENTLY_DEFAULT", 301),
        ("FOUND", 302),
        ("SEE_OTHER", 303),
        ("TEMPORARY_REDIRECT", 307),
        ("PERMANENT_REDIRECT", 308),
    ];
    let mut rules: Vec<serde_json::Value> = codes
        .iter()
        .enumerate()
        .map(|(i, (code, _))| json!({"paths": [format!("/r{i}/*")], "urlRedirect": {"prefixRedirect": "/new/", "redirectResponseCode": code, "stripQuery": i % 2 == 0}}))
        .collect();
    rules.push(json!({"paths": ["/secure"], "urlRedirect": {"httpsRedirect": true, "hostRedirect": "secure.example", "pathRedirect": "/login"}}));
    w.http_lb(
        "lb",
        lb_ip(),
        json!({"defaultService": bs("bs-a"), "hostRules": [{"hosts": ["r.example"], "pathMatcher": "m"}],
               "pathMatchers": [{"name": "m", "defaultService": bs("bs-a"), "pathRules": rules}]}),
    );
    w.publish();
    let l = w.listener("lb").await;
    let cl = client(&l, &["r.example"]);
    let port = l.local_addr.port();
    for (i, (_, want)) in codes.iter().enumerate() {
        let (status, headers, _, _) = get(&cl, &l, "r.example", &format!("/r{i}/a/b?q=1")).await;
        assert_eq!(status, *want);
        let query = if i % 2 == 0 { "" } else { "?q=1" };
        assert_eq!(
            headers["location"],
            format!("http://r.example:{port}/new/a/b{query}")
        );
        let ex = w.explain("lb", &format!("http://r.example:{port}/r{i}/a/b?q=1"), &[]);
        assert_eq!(ex.status, Some(*want));
        assert_eq!(
            ex.redirect_location.as_deref(),
            headers["location"].to_str().ok()
        );
    }
    let (status, headers, _, _) = get(&cl, &l, "r.example", "/secure?x=1").await;
    assert_eq!(status, 301);
    assert_eq!(headers["location"], "https://secure.example/login?x=1");
    assert_eq!(
        a.state.requests.load(Ordering::SeqCst),
        0,
        "redirects never reach the backend"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_headers_and_security_policy() {
    let a = Backend::start("a").await;
    let mut w = World::start();
    w.put(
        "global/securityPolicies/sp",
        json!({"rules": [
            {"priority": 100, "action": "deny(403)", "match": {"versionedExpr": "SRC_IPS_V1", "config": {"srcIpRanges": ["127.0.0.2/32"]}}},
            {"priority": 2147483647, "action": "allow", "match": {"versionedExpr": "SRC_IPS_V1", "config": {"srcIpRanges": ["*"]}}},
        ]}),
    );
    w.service(
        "bs",
        None,
        &[a.addr],
        json!({"customRequestHeaders": ["X-Client-Region: {client_region}", "X-Encrypted: {client_encrypted}", "X-Static: yes"],
               "customResponseHeaders": ["X-Cache-Policy: none", "X-Proto: {client_protocol}"],
               "securityPolicy": url("global/securityPolicies/sp")}),
    );
    w.http_lb("lb", lb_ip(), json!({"defaultService": bs("bs")}));
    w.publish();
    let l = w.listener("lb").await;
    let cl = client(&l, &["h.example"]);
    let (status, headers, v, _) = get(&cl, &l, "h.example", "/").await;
    assert_eq!(status, 200);
    assert_eq!(v["headers"]["x-client-region"], "");
    assert_eq!(v["headers"]["x-encrypted"], "false");
    assert_eq!(v["headers"]["x-static"], "yes");
    assert_eq!(headers["x-cache-policy"], "none");
    assert_eq!(headers["x-proto"], "HTTP/1.1");
    // From 127.0.0.2 the policy denies with 403.
    let denied = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .resolve("h.example", l.local_addr)
        .build()
        .unwrap();
    let r = denied
        .get(format!("http://h.example:{}/", l.local_addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listeners_follow_forwarding_rules_and_config_changes_apply_live() {
    let (a, b) = (Backend::start("a").await, Backend::start("b").await);
    let mut w = World::start();
    w.service("bs-a", None, &[a.addr], json!({}));
    w.service("bs-b", None, &[b.addr], json!({}));
    w.http_lb("one", lb_ip(), json!({"defaultService": bs("bs-a")}));
    w.http_lb("two", lb_ip(), json!({"defaultService": bs("bs-a")}));
    w.publish();
    let (l1, l2) = (w.listener("one").await, w.listener("two").await);
    let c1 = client(&l1, &["h.example"]);
    let c2 = client(&l2, &["h.example"]);
    assert_eq!(backend_of(&get(&c1, &l1, "h.example", "/").await.2), "a");
    // URL map change on a kept-alive connection.
    w.put("global/urlMaps/one", json!({"defaultService": bs("bs-b")}));
    w.publish();
    poll("url map change applied", 30, async || {
        (backend_of(&get(&c1, &l1, "h.example", "/").await.2) == "b").then_some(())
    })
    .await;
    // Deleting rule one closes its listener; rule two keeps serving.
    w.remove("global/forwardingRules/one");
    w.publish();
    poll("listener one closed", 30, async || {
        w.dp.listeners()
            .iter()
            .all(|l| !l.forwarding_rule.ends_with("/one"))
            .then_some(())
    })
    .await;
    poll("listener one refuses connections", 30, async || {
        tokio::net::TcpStream::connect(l1.local_addr)
            .await
            .is_err()
            .then_some(())
    })
    .await;
    assert_eq!(get(&c2, &l2, "h.example", "/").await.0, 200);
}

/// A backend that accepts any upgrade and echoes the upgraded bytes.
async fn echo_upgrade_backend() -> std::net::SocketAddr {
    use http_body_util::Empty;
    use hyper_util::rt::TokioIo;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((s, _)) = tcp.accept().await {
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(
                    |mut req: hyper::Request<hyper::body::Incoming>| async move {
                        let up = hyper::upgrade::on(&mut req);
                        tokio::spawn(async move {
                            let Ok(u) = up.await else { return };
                            let mut io = TokioIo::new(u);
                            let mut buf = [0u8; 256];
                            while let Ok(n) = io.read(&mut buf).await {
                                if n == 0 || io.write_all(&buf[..n]).await.is_err() {
                                    break;
                                }
                            }
                        });
                        hyper::Response::builder()
                            .status(101)
                            .header("connection", "upgrade")
                            .header("upgrade", "websocket")
                            .body(Empty::<bytes::Bytes>::new())
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .with_upgrades()
                    .await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_upgrade_passes_through() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let backend = echo_upgrade_backend().await;
    let mut w = World::start();
    w.service("bs", None, &[backend], json!({"timeoutSec": 30}));
    w.http_lb("lb", lb_ip(), json!({"defaultService": bs("bs")}));
    w.publish();
    let l = w.listener("lb").await;
    let mut s = tokio::net::TcpStream::connect(l.local_addr).await.unwrap();
    s.write_all(b"GET /chat HTTP/1.1\r\nHost: h.example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            s.read(&mut byte).await.unwrap(),
            1,
            "connection closed in the response head: {:?}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(head.contains("upgrade: websocket"), "{head}");
    s.write_all(b"ping-through-the-lb").await.unwrap();
    let mut echo = [0u8; 19];
    s.read_exact(&mut echo).await.unwrap();
    assert_eq!(&echo, b"ping-through-the-lb");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_log_names_rule_and_backend() {
    let a = Backend::start("a").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.jsonl");
    let mut w = World::start_with(gce_emulator::dataplane::DataPlaneConfig {
        port_map: [(80, 0)].into_iter().collect(),
        access_log: Some(path.clone()),
        ..Default::default()
    });
    w.service("bs", None, &[a.addr], json!({}));
    w.http_lb(
        "lb",
        lb_ip(),
        json!({"defaultService": bs("bs"), "hostRules": [{"hosts": ["log.example"], "pathMatcher": "web"}],
               "pathMatchers": [{"name": "web", "defaultService": bs("bs"), "pathRules": [{"paths": ["/x/*"], "service": bs("bs")}]}]}),
    );
    w.publish();
    let l = w.listener("lb").await;
    let c = client(&l, &["log.example"]);
    assert_eq!(get(&c, &l, "log.example", "/x/1?q=2").await.0, 200);
    let line = poll("access log line", 30, async || {
        std::fs::read_to_string(&path)
            .ok()?
            .lines()
            .next()
            .map(str::to_string)
    })
    .await;
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["forwardingRule"], "projects/p/global/forwardingRules/lb");
    assert_eq!(v["urlMapRule"], "pathMatchers[web].pathRules[0]");
    assert_eq!(v["backendService"], "projects/p/global/backendServices/bs");
    assert_eq!(v["endpoint"], a.addr.to_string());
    assert_eq!(v["path"], "/x/1?q=2");
    assert_eq!(v["status"], 200);
}
