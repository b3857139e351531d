use super::*;
use serde_json::json;

fn req<'a>(ip: &str, path: &'a str, query: &'a str, headers: &'a http::HeaderMap) -> Request<'a> {
    Request {
        client: (ip.parse().unwrap(), 4000),
        method: "GET",
        path,
        query,
        scheme: "http",
        headers,
        sni: "",
    }
}

fn policy(rules: Value) -> SecurityPolicy {
    SecurityPolicy::compile(
        "projects/p/global/securityPolicies/sp",
        &json!({"name": "sp", "rules": rules}),
    )
}

#[test]
fn src_ip_rules_by_priority() {
    let p = policy(json!([
        {"priority": 2147483647, "action": "allow", "match": {"versionedExpr": "SRC_IPS_V1", "config": {"srcIpRanges": ["*"]}}},
        {"priority": 100, "action": "deny(404)", "match": {"versionedExpr": "SRC_IPS_V1", "config": {"srcIpRanges": ["127.0.0.2/32"]}}},
        {"priority": 50, "action": "allow", "match": {"versionedExpr": "SRC_IPS_V1", "config": {"srcIpRanges": ["127.0.0.2"]}}},
        {"priority": 200, "action": "deny(403)", "match": {"versionedExpr": "SRC_IPS_V1", "config": {"srcIpRanges": ["127.1.0.0/16"]}}},
    ]));
    let h = http::HeaderMap::new();
    let s = State::default();
    let now = Instant::now();
    let d = p.evaluate(&req("127.0.0.2", "/", "", &h), &s, now);
    assert_eq!(d.verdict, Verdict::Allow(vec![]));
    assert_eq!(d.enforced.priority, 50);
    let d = p.evaluate(&req("127.1.2.3", "/", "", &h), &s, now);
    assert_eq!(
        d.verdict,
        Verdict::Respond {
            status: 403,
            location: None
        }
    );
    assert_eq!(
        (d.enforced.configured_action, d.enforced.outcome),
        ("DENY", "DENY")
    );
    let d = p.evaluate(&req("127.0.0.9", "/", "", &h), &s, now);
    assert_eq!(d.enforced.priority, 2147483647);
}

#[test]
fn expressions_preview_redirect_and_header_action() {
    let p = policy(json!([
        {"priority": 10, "action": "deny(404)", "preview": true, "match": {"expr": {"expression": "request.path.startsWith('/preview')"}}},
        {"priority": 20, "action": "deny(502)", "match": {"expr": {"expression": "request.headers['x-attack'] == 'yes'"}}},
        {"priority": 30, "action": "redirect", "redirectOptions": {"type": "EXTERNAL_302", "target": "https://example.com/blocked"}, "match": {"expr": {"expression": "request.query.contains('go=away')"}}},
        {"priority": 40, "action": "allow", "headerAction": {"requestHeadersToAdds": [{"headerName": "x-armor", "headerValue": "checked"}]}, "match": {"expr": {"expression": "request.path == '/tagged'"}}},
        {"priority": 50, "action": "deny(403)", "match": {"expr": {"expression": "this is not CEL"}}},
    ]));
    let s = State::default();
    let now = Instant::now();
    let mut h = http::HeaderMap::new();
    let d = p.evaluate(&req("127.0.0.1", "/preview/x", "", &h), &s, now);
    // Preview: logged, not enforced.
    assert_eq!(d.verdict, Verdict::Allow(vec![]));
    let pv = d.preview.expect("preview logged");
    assert_eq!((pv.priority, pv.outcome), (10, "DENY"));
    h.insert("x-attack", "yes".parse().unwrap());
    let d = p.evaluate(&req("127.0.0.1", "/", "", &h), &s, now);
    assert_eq!(
        d.verdict,
        Verdict::Respond {
            status: 502,
            location: None
        }
    );
    let h = http::HeaderMap::new();
    let d = p.evaluate(&req("127.0.0.1", "/", "go=away", &h), &s, now);
    assert_eq!(
        d.verdict,
        Verdict::Respond {
            status: 302,
            location: Some("https://example.com/blocked".into())
        }
    );
    let d = p.evaluate(&req("127.0.0.1", "/tagged", "", &h), &s, now);
    assert_eq!(
        d.verdict,
        Verdict::Allow(vec![(
            http::HeaderName::from_static("x-armor"),
            http::HeaderValue::from_static("checked")
        )])
    );
    // The rule that does not compile is skipped: nothing else matches, the request is allowed.
    let d = p.evaluate(&req("127.0.0.1", "/other", "", &h), &s, now);
    assert_eq!(d.verdict, Verdict::Allow(vec![]));
    assert_eq!(d.enforced.priority, i64::from(i32::MAX));
}

#[test]
fn throttle_counts_per_key() {
    let p = policy(json!([
        {"priority": 5, "action": "throttle", "match": {"versionedExpr": "SRC_IPS_V1", "config": {"srcIpRanges": ["*"]}},
         "rateLimitOptions": {"rateLimitThreshold": {"count": 1, "intervalSec": 10}, "conformAction": "allow", "exceedAction": "deny(429)", "enforceOnKey": "IP"}},
    ]));
    let s = State::default();
    let now = Instant::now();
    let h = http::HeaderMap::new();
    let d = p.evaluate(&req("127.0.0.1", "/", "", &h), &s, now);
    assert_eq!(d.verdict, Verdict::Allow(vec![]));
    let d = p.evaluate(&req("127.0.0.1", "/", "", &h), &s, now);
    assert_eq!(
        d.verdict,
        Verdict::Respond {
            status: 429,
            location: None
        }
    );
    let rl = d.enforced.rate_limit_action.unwrap();
    assert_eq!(
        (rl.key.as_str(), rl.outcome),
        ("127.0.0.1", "RATE_LIMIT_THRESHOLD_EXCEED")
    );
    assert_eq!(d.enforced.configured_action, "THROTTLE");
    let d = p.evaluate(&req("127.0.0.2", "/", "", &h), &s, now);
    assert_eq!(d.verdict, Verdict::Allow(vec![]));
}

#[test]
fn region_map_feeds_region_code() {
    let s = State::default();
    s.set_regions(vec![
        ("127.0.0.0/8".parse().unwrap(), "US".into()),
        ("127.44.0.0/16".parse().unwrap(), "DE".into()),
    ]);
    let p = policy(json!([
        {"priority": 1, "action": "deny(403)", "match": {"expr": {"expression": "origin.region_code == 'DE'"}}},
    ]));
    let h = http::HeaderMap::new();
    let now = Instant::now();
    let d = p.evaluate(&req("127.44.1.1", "/", "", &h), &s, now);
    assert_eq!(
        d.verdict,
        Verdict::Respond {
            status: 403,
            location: None
        }
    );
    let d = p.evaluate(&req("127.45.1.1", "/", "", &h), &s, now);
    assert_eq!(d.verdict, Verdict::Allow(vec![]));
}

#[test]
fn sqli_signatures_from_the_core_rule_set() {
    let p = policy(json!([
        {"priority": 1, "action": "deny(403)", "match": {"expr": {"expression": "evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 1})"}}},
    ]));
    let s = State::default();
    let now = Instant::now();
    let mut h = http::HeaderMap::new();
    h.insert("host", "shop.example".parse().unwrap());
    h.insert("user-agent", "test".parse().unwrap());
    h.insert("accept", "*/*".parse().unwrap());
    let d = p.evaluate(
        &req("127.0.0.1", "/item", "id=1%27%20OR%20%271%27%3D%271", &h),
        &s,
        now,
    );
    assert_eq!(
        d.verdict,
        Verdict::Respond {
            status: 403,
            location: None
        },
        "{d:?}"
    );
    assert!(
        d.enforced
            .preconfigured_expr_ids
            .iter()
            .all(|id| id.starts_with("owasp-crs-v030301-id942") && id.ends_with("-sqli")),
        "{:?}",
        d.enforced.preconfigured_expr_ids
    );
    assert!(!d.enforced.preconfigured_expr_ids.is_empty());
    let d = p.evaluate(&req("127.0.0.1", "/item", "id=42&sort=name", &h), &s, now);
    assert_eq!(d.verdict, Verdict::Allow(vec![]), "{d:?}");
    // Opting out of every signature that matched lets the attack through.
    let ids: Vec<String> = {
        let d = p.evaluate(
            &req("127.0.0.1", "/item", "id=1%27%20OR%20%271%27%3D%271", &h),
            &s,
            now,
        );
        d.enforced.preconfigured_expr_ids
    };
    let opt_out = ids
        .iter()
        .map(|i| format!("'{i}'"))
        .collect::<Vec<_>>()
        .join(",");
    let p2 = policy(json!([
        {"priority": 1, "action": "deny(403)", "match": {"expr": {"expression": format!("evaluatePreconfiguredWaf('sqli-v33-stable', {{'sensitivity': 1, 'opt_out_rule_ids': [{opt_out}]}})")}}},
    ]));
    let d = p2.evaluate(
        &req("127.0.0.1", "/item", "id=1%27%20OR%20%271%27%3D%271", &h),
        &s,
        now,
    );
    assert_eq!(d.verdict, Verdict::Allow(vec![]), "{d:?}");
}
