//! Cloud Armor in the data plane, in process: a policy with CEL rules, a preview rule, the
//! OWASP CRS sqli rule set and a throttle rule on a backend service, real HTTP through the
//! listener, the decisions read back from the request log.

mod dataplane_support;

use std::sync::atomic::Ordering;

use dataplane_support::*;
use serde_json::{json, Value};

fn bs(name: &str) -> String {
    url(&format!("global/backendServices/{name}"))
}

async fn status(c: &reqwest::Client, port: u16, path: &str, headers: &[(&str, &str)]) -> u16 {
    let mut r = c.get(format!("http://armor.example:{port}{path}"));
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.send()
        .await
        .expect("request through the LB")
        .status()
        .as_u16()
}

fn entries(w: &World) -> Vec<Value> {
    w.dp.logs()
        .query(&["projects/p".to_string()], "", false)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cel_rules_preview_preconfigured_waf_and_throttle() {
    let a = Backend::start("a").await;
    let mut w = World::start();
    w.put(
        "global/securityPolicies/edge",
        json!({"rules": [
            {"priority": 100, "action": "deny(404)", "match": {"expr": {"expression": "request.headers['x-block'] == 'yes'"}}},
            {"priority": 200, "action": "deny(403)", "preview": true, "match": {"expr": {"expression": "request.path.startsWith('/preview')"}}},
            {"priority": 300, "action": "deny(403)", "match": {"expr": {"expression": "evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 1})"}}},
            {"priority": 400, "action": "throttle", "match": {"expr": {"expression": "request.path == '/limited'"}},
             "rateLimitOptions": {"rateLimitThreshold": {"count": 3, "intervalSec": 60}, "conformAction": "allow", "exceedAction": "deny(429)", "enforceOnKey": "IP"}},
            {"priority": 500, "action": "allow", "headerAction": {"requestHeadersToAdds": [{"headerName": "x-armor-rule", "headerValue": "500"}]},
             "match": {"expr": {"expression": "request.path == '/tagged'"}}},
            {"priority": 2147483647, "action": "allow", "match": {"versionedExpr": "SRC_IPS_V1", "config": {"srcIpRanges": ["*"]}}},
        ]}),
    );
    w.service(
        "bs",
        None,
        &[a.addr],
        json!({"securityPolicy": url("global/securityPolicies/edge"), "logConfig": {"enable": true, "sampleRate": 1.0}}),
    );
    w.http_lb("lb", lb_ip(), json!({"defaultService": bs("bs")}));
    w.publish();
    let l = w.listener("lb").await;
    let port = l.local_addr.port();
    let c = client(&l, &["armor.example"]);

    // A CEL rule on a header denies with its configured status; the backend never sees it.
    assert_eq!(status(&c, port, "/", &[("x-block", "no")]).await, 200);
    let seen = a.state.requests.load(Ordering::SeqCst);
    assert_eq!(status(&c, port, "/", &[("x-block", "yes")]).await, 404);
    assert_eq!(a.state.requests.load(Ordering::SeqCst), seen);

    // A preview rule matches, is logged, and does not block.
    assert_eq!(status(&c, port, "/preview/page", &[]).await, 200);

    // The CRS 3.3 sqli rules block the classic injection and pass a normal request.
    assert_eq!(
        status(&c, port, "/item?id=1'%20OR%20'1'='1", &[]).await,
        403
    );
    assert_eq!(status(&c, port, "/item?id=42&sort=name", &[]).await, 200);

    // Throttle: three requests per minute from one address, then 429.
    for _ in 0..3 {
        assert_eq!(status(&c, port, "/limited", &[]).await, 200);
    }
    assert_eq!(status(&c, port, "/limited", &[]).await, 429);

    // headerAction reaches the backend.
    let (s, _, v, _) = get(&c, &l, "armor.example", "/tagged").await;
    assert_eq!(s, 200);
    assert_eq!(v["headers"]["x-armor-rule"], "500");

    // Every decision is in the request log.
    let log = entries(&w);
    let by = |path: &str| -> Vec<&Value> {
        log.iter()
            .filter(|e| {
                e["httpRequest"]["requestUrl"]
                    .as_str()
                    .unwrap_or("")
                    .split_once(&format!(":{port}"))
                    .is_some_and(|(_, p)| p == path)
            })
            .collect()
    };
    let blocked = by("/")
        .into_iter()
        .find(|e| e["httpRequest"]["status"] == 404)
        .expect("the header denial is logged");
    assert_eq!(
        blocked["jsonPayload"]["enforcedSecurityPolicy"],
        json!({"name": "edge", "priority": 100, "configuredAction": "DENY", "outcome": "DENY"})
    );
    assert_eq!(
        blocked["jsonPayload"]["statusDetails"],
        "denied_by_security_policy"
    );
    let preview = by("/preview/page")[0];
    assert_eq!(
        preview["jsonPayload"]["previewSecurityPolicy"]["priority"],
        200
    );
    assert_eq!(
        preview["jsonPayload"]["previewSecurityPolicy"]["outcome"],
        "DENY"
    );
    assert_eq!(
        preview["jsonPayload"]["enforcedSecurityPolicy"]["outcome"],
        "ACCEPT"
    );
    let sqli = log
        .iter()
        .find(|e| {
            e["httpRequest"]["requestUrl"]
                .as_str()
                .unwrap_or("")
                .contains("OR")
        })
        .expect("the injection is logged");
    assert_eq!(sqli["httpRequest"]["status"], 403);
    let ids = sqli["jsonPayload"]["enforcedSecurityPolicy"]["preconfiguredExprIds"]
        .as_array()
        .expect("signature ids logged");
    assert!(!ids.is_empty());
    assert!(
        ids.iter()
            .all(|i| i.as_str().unwrap().starts_with("owasp-crs-v030301-id942")),
        "{ids:?}"
    );
    let limited = by("/limited");
    assert_eq!(limited.len(), 4);
    assert_eq!(
        limited[3]["jsonPayload"]["enforcedSecurityPolicy"]["rateLimitAction"]["outcome"],
        "RATE_LIMIT_THRESHOLD_EXCEED"
    );
    assert_eq!(
        limited[0]["jsonPayload"]["enforcedSecurityPolicy"]["rateLimitAction"]["outcome"],
        "RATE_LIMIT_THRESHOLD_CONFORM"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirect_and_region_code_rules() {
    let a = Backend::start("a").await;
    let mut w = World::start();
    w.dp.armor()
        .set_regions(vec![("127.0.0.0/8".parse().unwrap(), "DE".into())]);
    w.put(
        "global/securityPolicies/geo",
        json!({"rules": [
            {"priority": 10, "action": "redirect", "redirectOptions": {"type": "EXTERNAL_302", "target": "https://blocked.example/"},
             "match": {"expr": {"expression": "origin.region_code == 'DE' && request.path.startsWith('/eu-only')"}}},
            {"priority": 20, "action": "deny(502)", "match": {"expr": {"expression": "inIpRange(origin.ip, '127.0.0.0/8') && request.query.contains('deny')"}}},
        ]}),
    );
    w.service(
        "bs",
        None,
        &[a.addr],
        json!({"securityPolicy": url("global/securityPolicies/geo")}),
    );
    w.http_lb("lb", lb_ip(), json!({"defaultService": bs("bs")}));
    w.publish();
    let l = w.listener("lb").await;
    let c = client(&l, &["armor.example"]);
    let r = c
        .get(format!(
            "http://armor.example:{}/eu-only/x",
            l.local_addr.port()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 302);
    assert_eq!(r.headers()["location"], "https://blocked.example/");
    assert_eq!(status(&c, l.local_addr.port(), "/x?deny=1", &[]).await, 502);
    assert_eq!(status(&c, l.local_addr.port(), "/x", &[]).await, 200);
    // Another region: the redirect rule no longer matches.
    w.dp.armor()
        .set_regions(vec![("127.0.0.0/8".parse().unwrap(), "US".into())]);
    assert_eq!(
        status(&c, l.local_addr.port(), "/eu-only/x", &[]).await,
        200
    );
}
