//! Sync against a scripted Compute API (wiremock): the exact calls each path makes. What
//! exists comes from one list per collection (the state cache); item GETs happen only where
//! the module docs say (409, 412, a fingerprint this operator does not know, an address IP the
//! API chose, a forwarding rule being checked).

use std::collections::BTreeSet;

use google_cloud_compute_v1::model;
use serde_json::{json, Value};
use wiremock::matchers::{body_partial_json, method, path, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::test_support::{list, other_lists_empty, G};
use super::*;
use crate::compute::test_support::{compute_for, done_op, not_found};
use crate::translate::{DesiredNeg, NegEndpoint};

mod answers_tests;
mod forwarding_rule_tests;
mod frontend_tests;
mod gate_window_tests;
mod gc_tests;
mod graph_tests;
mod iap_tests;
mod neg_tests;
mod regional_tests;

const UM: &str = "/compute/v1/projects/p1/global/urlMaps";

fn desired_url_map() -> model::UrlMap {
    model::UrlMap::new()
        .set_name("um1")
        .set_default_service("projects/p1/global/backendServices/b1")
}

/// Matches requests that change something: POST, PUT, PATCH, DELETE, except the reading POSTs
/// (`listNetworkEndpoints`, `getHealth`, Operation `wait`).
struct Mutating;

impl wiremock::Match for Mutating {
    fn matches(&self, request: &wiremock::Request) -> bool {
        let path = request.url.path();
        let reading = ["/listNetworkEndpoints", "/getHealth", "/wait"]
            .iter()
            .any(|s| path.ends_with(s));
        matches!(request.method.as_str(), "POST" | "PUT" | "PATCH" | "DELETE") && !reading
    }
}

/// Fails the test if anything that changes something reaches the server.
pub(super) async fn forbid_mutations(server: &MockServer) {
    Mock::given(Mutating)
        .respond_with(ResponseTemplate::new(500))
        .with_priority(1)
        .expect(0)
        .named("a mutating call")
        .mount(server)
        .await;
}

/// How many requests reached the server with `verb` on a path matching `pattern`.
pub(super) async fn count(server: &MockServer, verb: &str, pattern: &str) -> usize {
    let re = regex::Regex::new(pattern).unwrap();
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.method.as_str() == verb && re.is_match(r.url.path()))
        .count()
}

/// Backend service `b1` as translation might want it: HTTP, 30 s timeout.
pub(super) fn desired_b1() -> model::BackendService {
    model::BackendService::new()
        .set_name("b1")
        .set_protocol(model::backend_service::Protocol::Http)
        .set_timeout_sec(30)
}

/// The backend services list answers `b1` once: [`desired_b1`] as the API serves it
/// (fingerprint `YWJj`, `portName` defaulted) with the fields of `more`.
pub(super) async fn list_b1(server: &MockServer, more: Value) {
    let mut b1 = json!({"name": "b1", "fingerprint": "YWJj", "protocol": "HTTP",
        "portName": "http", "timeoutSec": 30});
    if let (Some(b1), Value::Object(more)) = (b1.as_object_mut(), more) {
        b1.extend(more);
    }
    list(
        server,
        &format!("{G}/backendServices"),
        json!([b1]),
        Some(1),
    )
    .await;
}

/// A new URL map costs one list and one insert; syncing it again costs nothing (the insert was
/// recorded: no read back).
#[tokio::test]
async fn a_new_url_map_is_inserted_after_one_list_and_not_read_back() {
    let server = MockServer::start().await;
    list(&server, UM, json!([]), Some(1)).await;
    Mock::given(method("GET"))
        .and(path(format!("{UM}/um1")))
        .respond_with(not_found())
        .expect(0)
        .named("get um1")
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(UM))
        .and(body_partial_json(
            json!({"name": "um1", "defaultService": "projects/p1/global/backendServices/b1"}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-1")))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    url_maps::ensure(&compute, &desired_url_map(), &mut changes)
        .await
        .unwrap();
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].to_string(), "UrlMap \"um1\" created");
    let mut again = Changes::new();
    url_maps::ensure(&compute, &desired_url_map(), &mut again)
        .await
        .unwrap();
    assert!(again.is_empty(), "{again:?}");
}

#[tokio::test]
async fn no_op_sends_no_mutation_and_no_get() {
    let server = MockServer::start().await;
    forbid_mutations(&server).await;
    list(
        &server,
        UM,
        json!([{
            "kind": "compute#urlMap", "id": "12", "name": "um1", "fingerprint": "YWJj",
            "selfLink": "http://127.0.0.1:1/compute/v1/projects/p1/global/urlMaps/um1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "defaultService": "https://compute.googleapis.com/compute/v1/projects/p1/global/backendServices/b1"
        }]),
        Some(1),
    )
    .await;
    let compute = compute_for(&server).await;
    for _ in 0..3 {
        let mut changes = Changes::new();
        url_maps::ensure(&compute, &desired_url_map(), &mut changes)
            .await
            .unwrap();
        assert!(changes.is_empty(), "{changes:?}");
    }
    assert_eq!(count(&server, "GET", "/urlMaps/um1$").await, 0);
}

/// The listed fingerprint goes with the update; a 412 refetches it and retries. A later update
/// of what this operator wrote (its fingerprint unknown) gets the resource first.
#[tokio::test]
async fn update_sends_fingerprint_refetches_after_412_and_before_updating_its_own_write() {
    let server = MockServer::start().await;
    list(
        &server,
        UM,
        json!([{"name": "um1", "fingerprint": "YWJj",
                "defaultService": "projects/p1/global/backendServices/old"}]),
        Some(1),
    )
    .await;
    Mock::given(method("GET"))
        .and(path(format!("{UM}/um1")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": "um1", "fingerprint": "bmV3",
            "defaultService": "projects/p1/global/backendServices/old"
        })))
        .up_to_n_times(1)
        .with_priority(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{UM}/um1")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": "um1", "fingerprint": "dGhk",
            "defaultService": "projects/p1/global/backendServices/b1"
        })))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(format!("{UM}/um1")))
        .and(body_partial_json(json!({"fingerprint": "YWJj"})))
        .respond_with(ResponseTemplate::new(412).set_body_json(json!({"error": {
            "code": 412, "message": "fingerprint mismatch", "status": "FAILED_PRECONDITION",
            "errors": [{"reason": "conditionNotMet", "message": "fingerprint mismatch"}]}})))
        .expect(1)
        .mount(&server)
        .await;
    for (fingerprint, op) in [("bmV3", "op-2"), ("dGhk", "op-3")] {
        Mock::given(method("PUT"))
            .and(path(format!("{UM}/um1")))
            .and(body_partial_json(json!({"fingerprint": fingerprint})))
            .respond_with(ResponseTemplate::new(200).set_body_json(done_op(op)))
            .expect(1)
            .mount(&server)
            .await;
    }
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    url_maps::ensure(&compute, &desired_url_map(), &mut changes)
        .await
        .unwrap();
    assert_eq!(changes[0].to_string(), "UrlMap \"um1\" updated");
    let second = desired_url_map().set_default_service("projects/p1/global/backendServices/b2");
    let mut changes = Changes::new();
    url_maps::ensure(&compute, &second, &mut changes)
        .await
        .unwrap();
    assert_eq!(changes.len(), 1, "{changes:?}");
}

#[tokio::test]
async fn forbidden_firewall_insert_is_an_xpn_outcome() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{G}/firewalls/k8s-fw-l7--uid")))
        .respond_with(not_found())
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{G}/firewalls")))
        .respond_with(ResponseTemplate::new(403).set_body_json(json!({"error": {
            "code": 403, "message": "Required 'compute.firewalls.create' permission",
            "status": "PERMISSION_DENIED"}})))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let fw = model::Firewall::new()
        .set_name("k8s-fw-l7--uid")
        .set_source_ranges(["130.211.0.0/22"]);
    let mut changes = Changes::new();
    let mut state = firewalls::RuleState::default();
    let outcome = firewalls::ensure(&compute, "p1", &fw, &mut state, &mut changes)
        .await
        .unwrap();
    assert_eq!(
        outcome,
        firewalls::FirewallOutcome::Forbidden { exists: false }
    );
    assert!(changes.is_empty());
}

/// The backend service comes from the list; only `getHealth` is asked, per group.
#[tokio::test]
async fn backends_annotation_state_prefers_healthy_across_groups() {
    let server = MockServer::start().await;
    let bs = format!("{G}/backendServices/b1");
    list(
        &server,
        &format!("{G}/backendServices"),
        json!([{"name": "b1", "backends": [
            {"group": "https://x/compute/v1/projects/p1/zones/z1/networkEndpointGroups/n1"},
            {"group": "https://x/compute/v1/projects/p1/zones/z2/networkEndpointGroups/n1"}
        ]}]),
        Some(1),
    )
    .await;
    for (zone, ip, state) in [
        ("z1", "127.64.0.1", "UNHEALTHY"),
        ("z2", "127.64.0.2", "HEALTHY"),
    ] {
        Mock::given(method("POST"))
            .and(path(format!("{bs}/getHealth")))
            .and(body_partial_json(json!({"group": format!("https://x/compute/v1/projects/p1/zones/{zone}/networkEndpointGroups/n1")})))
            .respond_with(ResponseTemplate::new(200).set_body_json(
                json!({"healthStatus": [{"ipAddress": ip, "port": 80, "healthState": state}]}),
            ))
            .expect(1)
            .mount(&server)
            .await;
    }
    let compute = compute_for(&server).await;
    assert_eq!(backend_services::health(&compute, "b1").await, "HEALTHY");
    assert_eq!(
        backend_services::health(&compute, "missing").await,
        "Unknown"
    );
}

#[tokio::test]
async fn forbidden_firewall_update_asks_for_an_update() {
    let server = MockServer::start().await;
    let fw = "/compute/v1/projects/p1/global/firewalls/k8s-fw-l7--uid";
    Mock::given(method("GET"))
        .and(path(fw))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": "k8s-fw-l7--uid", "sourceRanges": ["130.211.0.0/22"],
            "allowed": [{"IPProtocol": "tcp", "ports": ["8080"]}]
        })))
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(fw))
        .and(body_partial_json(
            json!({"allowed": [{"IPProtocol": "tcp", "ports": ["8080", "9090"]}]}),
        ))
        .respond_with(ResponseTemplate::new(403).set_body_json(json!({"error": {
            "code": 403, "message": "Required 'compute.firewalls.update' permission",
            "status": "PERMISSION_DENIED"}})))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut allowed = model::firewall::Allowed::default();
    allowed.ip_protocol = Some("tcp".into());
    allowed.ports = vec!["8080".into(), "9090".into()];
    let desired = model::Firewall::new()
        .set_name("k8s-fw-l7--uid")
        .set_source_ranges(["130.211.0.0/22"])
        .set_allowed([allowed]);
    let mut changes = Changes::new();
    let mut state = firewalls::RuleState::default();
    let outcome = firewalls::ensure(&compute, "p1", &desired, &mut state, &mut changes)
        .await
        .unwrap();
    assert_eq!(
        outcome,
        firewalls::FirewallOutcome::Forbidden { exists: true }
    );
}

#[tokio::test]
async fn insert_race_with_409_refetches_and_compares() {
    let server = MockServer::start().await;
    let hc = format!("{G}/healthChecks");
    list(&server, &hc, json!([]), Some(1)).await;
    Mock::given(method("GET"))
        .and(path(format!("{hc}/hc1")))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"name": "hc1", "checkIntervalSec": 15, "kind": "compute#healthCheck"}),
        ))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(hc.as_str()))
        .respond_with(ResponseTemplate::new(409).set_body_json(json!({"error": {
            "code": 409, "message": "already exists", "status": "ALREADY_EXISTS"}})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .respond_with(ResponseTemplate::new(500))
        .expect(0)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let desired = model::HealthCheck::new()
        .set_name("hc1")
        .set_check_interval_sec(15);
    let mut changes = Changes::new();
    health_checks::ensure(&compute, &desired, &mut changes)
        .await
        .unwrap();
    assert!(
        changes.is_empty(),
        "another writer created it as wanted: {changes:?}"
    );
}

const ADDR: &str = "/compute/v1/projects/p1/global/addresses";

/// `securityPolicy: None` means no policy: an attached one is removed through
/// `setSecurityPolicy` (no PUT), and emulator/server defaults (`portName: http`) cause no update.
#[tokio::test]
async fn backend_service_without_policy_detaches_the_observed_one_only() {
    let server = MockServer::start().await;
    list_b1(
        &server,
        json!({"securityPolicy": "https://compute.googleapis.com/compute/v1/projects/p1/global/securityPolicies/sp"}),
    )
    .await;
    Mock::given(method("POST"))
        .and(path(format!("{G}/backendServices/b1/setSecurityPolicy")))
        .and(wiremock::matchers::body_json(json!({})))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-sp")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{G}/backendServices/b1/setSecurityPolicy")))
        .and(body_partial_json(
            json!({"securityPolicy": "projects/p1/global/securityPolicies/sp"}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-sp2")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .respond_with(ResponseTemplate::new(500))
        .expect(0)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let desired = desired_b1();
    let mut changes = Changes::new();
    backend_services::ensure(&compute, &desired, &mut changes)
        .await
        .unwrap();
    assert_eq!(changes.len(), 1, "{changes:?}");
    // Detached (recorded): asking for no policy again sends nothing; asking for it sets it.
    let mut changes = Changes::new();
    backend_services::ensure(&compute, &desired, &mut changes)
        .await
        .unwrap();
    assert!(changes.is_empty(), "{changes:?}");
    let desired = desired.set_security_policy("projects/p1/global/securityPolicies/sp");
    let mut changes = Changes::new();
    backend_services::ensure(&compute, &desired, &mut changes)
        .await
        .unwrap();
    assert_eq!(changes.len(), 1, "{changes:?}");
}

/// `sslPolicy` on the HTTPS proxy: `None` leaves the observed policy alone, `Some("")`
/// removes it (an empty `setSslPolicy` body), a name sets it.
#[tokio::test]
async fn https_proxy_ssl_policy_is_left_alone_removed_or_set() {
    let server = MockServer::start().await;
    let full = "https://compute.googleapis.com/compute/v1/projects/p1/global";
    list(
        &server,
        &format!("{G}/targetHttpsProxies"),
        json!([{
            "name": "ts1", "urlMap": format!("{full}/urlMaps/um1"),
            "sslCertificates": [format!("{full}/sslCertificates/c1")],
            "sslPolicy": format!("{full}/sslPolicies/old")
        }]),
        Some(1),
    )
    .await;
    Mock::given(method("POST"))
        .and(path_regex("/targetHttpsProxies/ts1/setSslPolicy$"))
        .and(wiremock::matchers::body_json(json!({})))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-rm")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path_regex("/targetHttpsProxies/ts1/setSslPolicy$"))
        .and(body_partial_json(
            json!({"sslPolicy": "projects/p1/global/sslPolicies/new"}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-set")))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let base = model::TargetHttpsProxy::new()
        .set_name("ts1")
        .set_url_map("projects/p1/global/urlMaps/um1")
        .set_ssl_certificates(["projects/p1/global/sslCertificates/c1"]);
    let mut changes = Changes::new();
    target_https_proxies::ensure(&compute, &base, &mut changes)
        .await
        .unwrap();
    assert!(
        changes.is_empty(),
        "None leaves the policy alone: {changes:?}"
    );
    for policy in ["", "projects/p1/global/sslPolicies/new"] {
        let desired = base.clone().set_ssl_policy(policy);
        let mut changes = Changes::new();
        target_https_proxies::ensure(&compute, &desired, &mut changes)
            .await
            .unwrap();
        assert_eq!(changes.len(), 1, "{policy:?}: {changes:?}");
    }
}
