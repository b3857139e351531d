//! Cloud CDN in the data plane, in process: a backend that counts requests and sets caching
//! headers, real HTTP through the listener.

mod dataplane_support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use dataplane_support::*;
use serde_json::json;

/// Answers `/PATH?cc=...&cookie=1&ct=...` with that Cache-Control, a Set-Cookie, that type;
/// the body names the request number.
struct Origin {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
}

async fn origin(State(hits): State<Arc<AtomicUsize>>, req: Request) -> Response {
    let n = hits.fetch_add(1, Ordering::SeqCst) + 1;
    let q: Vec<(String, String)> =
        url::form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let get = |k: &str| q.iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
    let mut r = format!("response {n} for {}\n", req.uri()).into_response();
    let h = r.headers_mut();
    h.insert(
        "content-type",
        get("ct").unwrap_or("text/plain".into()).parse().unwrap(),
    );
    if let Some(cc) = get("cc") {
        h.insert("cache-control", cc.parse().unwrap());
    }
    if get("cookie").is_some() {
        h.insert("set-cookie", "session=abc; Path=/".parse().unwrap());
    }
    r
}

impl Origin {
    async fn start() -> Origin {
        let hits = Arc::new(AtomicUsize::new(0));
        let app = axum::Router::new()
            .fallback(origin)
            .with_state(hits.clone());
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(tcp, app).await.unwrap() });
        Origin { addr, hits }
    }
    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

async fn fetch(c: &reqwest::Client, port: u16, path: &str) -> (u16, Option<String>, String) {
    let r = c
        .get(format!("http://cdn.example:{port}{path}"))
        .send()
        .await
        .expect("request through the LB");
    let s = r.status().as_u16();
    let age = r
        .headers()
        .get("age")
        .map(|v| v.to_str().unwrap().to_string());
    (s, age, r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caches_with_age_never_set_cookie_and_invalidates() {
    let o = Origin::start().await;
    let mut w = World::start();
    w.service(
        "bs",
        None,
        &[o.addr],
        json!({"enableCDN": true, "cdnPolicy": {"cacheMode": "CACHE_ALL_STATIC", "defaultTtl": 3600, "maxTtl": 86400},
               "logConfig": {"enable": true}}),
    );
    w.http_lb(
        "lb",
        lb_ip(),
        json!({"defaultService": url("global/backendServices/bs")}),
    );
    w.publish();
    let l = w.listener("lb").await;
    let port = l.local_addr.port();
    let c = client(&l, &["cdn.example"]);

    // A cacheable object: the second request is served from the cache, with Age.
    let p = "/logo.png?ct=image/png";
    let (s1, age1, body1) = fetch(&c, port, p).await;
    assert_eq!((s1, age1), (200, None));
    let (s2, age2, body2) = fetch(&c, port, p).await;
    assert_eq!(s2, 200);
    assert!(age2.is_some(), "a cache hit carries Age");
    assert_eq!(body2, body1);
    assert_eq!(o.hits(), 1, "the backend saw one request");

    // Not static and no directive: not cached.
    fetch(&c, port, "/page.html?ct=text/html").await;
    fetch(&c, port, "/page.html?ct=text/html").await;
    assert_eq!(o.hits(), 3);

    // Set-Cookie is never cached, even with a public max-age.
    let sc = "/c.png?ct=image/png&cc=public,max-age%3D600&cookie=1";
    fetch(&c, port, sc).await;
    let (_, age, _) = fetch(&c, port, sc).await;
    assert_eq!(age, None);
    assert_eq!(o.hits(), 5);
    // private and no-store neither.
    for cc in ["private,max-age%3D600", "no-store"] {
        let p = format!("/x.png?ct=image/png&cc={cc}");
        fetch(&c, port, &p).await;
        fetch(&c, port, &p).await;
    }
    assert_eq!(o.hits(), 9);

    // Invalidation (what urlMaps.invalidateCache does) sends the next request to the backend.
    let removed =
        w.dp.cdn()
            .invalidate(&[key("global/backendServices/bs")], None, "/logo.png");
    assert_eq!(removed, 1);
    let (_, age, body3) = fetch(&c, port, p).await;
    assert_eq!(age, None);
    assert_ne!(body3, body1);
    assert_eq!(o.hits(), 10);

    // The cache fields reach the request log.
    let log =
        w.dp.logs()
            .query(&["projects/p".into()], "httpRequest.cacheHit=true", false)
            .unwrap();
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(
        log[0]["jsonPayload"]["statusDetails"],
        "response_from_cache"
    );
    let fills =
        w.dp.logs()
            .query(
                &["projects/p".into()],
                "jsonPayload.cacheDecision:RESPONSE_HAS_SET_COOKIE",
                false,
            )
            .unwrap();
    assert_eq!(fills.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_urls_with_a_bad_signature_are_refused() {
    let o = Origin::start().await;
    let mut w = World::start();
    let key_bytes = *b"0123456789abcdef";
    let b64 = base64::engine::general_purpose::URL_SAFE;
    w.snap.private_keys.insert(
        key("global/backendServices/bs/signedUrlKeys/k1"),
        b64.encode(key_bytes),
    );
    w.service(
        "bs",
        None,
        &[o.addr],
        json!({"enableCDN": true, "cdnPolicy": {"cacheMode": "FORCE_CACHE_ALL", "signedUrlKeyNames": ["k1"]}}),
    );
    w.http_lb(
        "lb",
        lb_ip(),
        json!({"defaultService": url("global/backendServices/bs")}),
    );
    w.publish();
    let l = w.listener("lb").await;
    let port = l.local_addr.port();
    let c = client(&l, &["cdn.example"]);
    let expires = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    let signed = format!("http://cdn.example:{port}/video.mp4?Expires={expires}&KeyName=k1");
    let sig = {
        let k = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, &key_bytes);
        b64.encode(ring::hmac::sign(&k, signed.as_bytes()).as_ref())
    };
    let path = |s: &str| format!("/video.mp4?Expires={expires}&KeyName=k1&Signature={s}");
    let (ok, _, _) = fetch(&c, port, &path(&sig)).await;
    assert_eq!(ok, 200);
    let mut bad = sig.clone().into_bytes();
    bad[0] = if bad[0] == b'A' { b'B' } else { b'A' };
    let (refused, _, body) = fetch(&c, port, &path(std::str::from_utf8(&bad).unwrap())).await;
    assert_eq!(refused, 403, "{body}");
    let (unsigned, _, _) = fetch(&c, port, "/video.mp4").await;
    assert_eq!(unsigned, 403);
    assert_eq!(o.hits(), 1);
}

/// A backend service's `securityPolicy` is a backend security policy: it filters the requests
/// that go to the backend, so a cache hit is served whatever the policy says, and a miss is
/// filtered (Compute API reference, `SecurityPolicy.type` `CLOUD_ARMOR`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_security_policy_sees_cache_misses_only() {
    let o = Origin::start().await;
    let mut w = World::start();
    w.put(
        "global/securityPolicies/p",
        json!({"rules": [
            {"priority": 100, "action": "deny(403)", "match": {"expr": {"expression": "request.headers['x-block'] == 'yes'"}}},
            {"priority": 2147483647, "action": "allow", "match": {"versionedExpr": "SRC_IPS_V1", "config": {"srcIpRanges": ["*"]}}},
        ]}),
    );
    w.service(
        "bs",
        None,
        &[o.addr],
        json!({"enableCDN": true, "cdnPolicy": {"cacheMode": "FORCE_CACHE_ALL", "defaultTtl": 3600},
               "securityPolicy": url("global/securityPolicies/p")}),
    );
    w.http_lb(
        "lb",
        lb_ip(),
        json!({"defaultService": url("global/backendServices/bs")}),
    );
    w.publish();
    let l = w.listener("lb").await;
    let port = l.local_addr.port();
    let c = client(&l, &["cdn.example"]);
    let get = |path: &'static str| {
        c.get(format!("http://cdn.example:{port}{path}"))
            .header("x-block", "yes")
            .send()
    };
    // A miss goes through the policy: denied, nothing cached, the backend not reached.
    assert_eq!(get("/a.js").await.unwrap().status().as_u16(), 403);
    assert_eq!(o.hits(), 0);
    // Cached by an allowed request, the object is then served to the blocked client too.
    let (s, _, _) = fetch(&c, port, "/a.js").await;
    assert_eq!((s, o.hits()), (200, 1));
    let hit = get("/a.js").await.unwrap();
    assert_eq!(hit.status().as_u16(), 200);
    assert!(hit.headers().contains_key("age"), "not a cache hit");
    assert_eq!(o.hits(), 1);
}
