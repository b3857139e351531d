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
mod frontend_tests;
mod gate_window_tests;
mod gc_tests;
mod graph_tests;
mod iap_tests;
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

fn neg_with(ips: &[&str]) -> DesiredNeg {
    DesiredNeg {
        zone: "z1".into(),
        neg: model::NetworkEndpointGroup::new().set_name("neg1"),
        endpoints: ips
            .iter()
            .map(|ip| NegEndpoint {
                ip_address: (*ip).to_string(),
                port: 8080,
                instance: None,
            })
            .collect(),
    }
}

/// Backends sync in parallel under per-object locks: a NEG's lock is its own (collection, zone,
/// name), so the NEGs of one backend in two zones, or two NEGs, never wait on each other, while
/// two Ingresses sharing a NEG do.
#[test]
fn each_neg_has_its_own_lock_per_collection() {
    let a = neg_with(&[]);
    let mut other_zone = neg_with(&[]);
    other_zone.zone = "z2".into();
    let mut other_name = neg_with(&[]);
    other_name.neg = model::NetworkEndpointGroup::new().set_name("neg2");
    assert_eq!(
        ingress::neg_key("networkEndpointGroups", &a),
        "networkEndpointGroups/z1/neg1"
    );
    assert_eq!(
        ingress::neg_key("networkEndpoints", &a),
        "networkEndpoints/z1/neg1"
    );
    let keys: BTreeSet<String> = [&a, &other_zone, &other_name]
        .into_iter()
        .map(|n| ingress::neg_key("networkEndpointGroups", n))
        .collect();
    assert_eq!(keys.len(), 3, "{keys:?}");
}

/// Attach and detach by set difference from one `listNetworkEndpoints`; what they did is
/// recorded, so the next sync of the same endpoints sends nothing and a change sends only the
/// difference.
#[tokio::test]
async fn neg_endpoints_attach_and_detach_by_set_difference_and_are_remembered() {
    let server = MockServer::start().await;
    let neg_path = "/compute/v1/projects/p1/zones/z1/networkEndpointGroups/neg1";
    Mock::given(method("POST"))
        .and(path(format!("{neg_path}/listNetworkEndpoints")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": [
            {"networkEndpoint": {"ipAddress": "127.64.0.1", "port": 8080, "instance": "n1"}},
            {"networkEndpoint": {"ipAddress": "127.64.0.2", "port": 8080}}
        ]})))
        .expect(1)
        .mount(&server)
        .await;
    for verb in ["attachNetworkEndpoints", "detachNetworkEndpoints"] {
        Mock::given(method("POST"))
            .and(path(format!("{neg_path}/{verb}")))
            .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-a")))
            .mount(&server)
            .await;
    }
    let compute = compute_for(&server).await;
    let neg = neg_with(&["127.64.0.1", "127.64.0.3"]);
    let done = network_endpoint_groups::sync_endpoints(&compute, &neg)
        .await
        .unwrap();
    assert_eq!(done, (1, 1));
    assert_eq!(
        network_endpoint_groups::sync_endpoints(&compute, &neg)
            .await
            .unwrap(),
        (0, 0)
    );
    let fewer = neg_with(&["127.64.0.3"]);
    assert_eq!(
        network_endpoint_groups::sync_endpoints(&compute, &fewer)
            .await
            .unwrap(),
        (0, 1)
    );
    let mut carried = Vec::new();
    for req in server.received_requests().await.unwrap() {
        let verb = req.url.path().rsplit('/').next().unwrap().to_string();
        if verb.ends_with("NetworkEndpoints") && verb != "listNetworkEndpoints" {
            let body: Value = serde_json::from_slice(&req.body).unwrap();
            let ips: Vec<String> = body["networkEndpoints"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["ipAddress"].as_str().unwrap().to_string())
                .collect();
            carried.push((verb, ips));
        }
    }
    let want = |v: &str, ip: &str| (v.to_string(), vec![ip.to_string()]);
    assert_eq!(
        carried,
        [
            want("attachNetworkEndpoints", "127.64.0.3"),
            want("detachNetworkEndpoints", "127.64.0.2"),
            want("detachNetworkEndpoints", "127.64.0.1"),
        ]
    );
}

/// `sync_endpoints` against a NEG holding 700 stale endpoints while 1201 are desired: every
/// attach and detach call carries at most 500 endpoints (the API's limit per call), and the calls
/// together carry each endpoint exactly once.
#[tokio::test]
async fn endpoint_batches_hold_at_most_500() {
    let server = MockServer::start().await;
    let neg_path = "/compute/v1/projects/p1/zones/z1/networkEndpointGroups/neg1";
    let ip = |net: u32, i: u32| format!("127.{net}.{}.{}", i / 250, i % 250);
    let stale: Vec<Value> = (0..700)
        .map(|i| json!({"networkEndpoint": {"ipAddress": ip(65, i), "port": 80}}))
        .collect();
    Mock::given(method("POST"))
        .and(path(format!("{neg_path}/listNetworkEndpoints")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({ "items": stale })))
        .expect(1)
        .mount(&server)
        .await;
    for verb in ["attachNetworkEndpoints", "detachNetworkEndpoints"] {
        Mock::given(method("POST"))
            .and(path(format!("{neg_path}/{verb}")))
            .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-batch")))
            .mount(&server)
            .await;
    }
    let compute = compute_for(&server).await;
    let endpoints: BTreeSet<NegEndpoint> = (0..1201)
        .map(|i| NegEndpoint {
            ip_address: ip(64, i),
            port: 80,
            instance: None,
        })
        .collect();
    let neg = DesiredNeg {
        zone: "z1".into(),
        neg: model::NetworkEndpointGroup::new().set_name("neg1"),
        endpoints,
    };
    let (attached, detached) = network_endpoint_groups::sync_endpoints(&compute, &neg)
        .await
        .unwrap();
    assert_eq!((attached, detached), (1201, 700));

    // The endpoints each call carried, in call order, per verb.
    let mut batches: std::collections::BTreeMap<&str, Vec<Vec<String>>> = Default::default();
    for req in server.received_requests().await.unwrap() {
        let verb = req.url.path().rsplit('/').next().unwrap().to_string();
        let verb = match verb.as_str() {
            "attachNetworkEndpoints" => "attach",
            "detachNetworkEndpoints" => "detach",
            _ => continue,
        };
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        let ips = body["networkEndpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["ipAddress"].as_str().unwrap().to_string())
            .collect();
        batches.entry(verb).or_default().push(ips);
    }
    let sizes = |verb: &str| -> Vec<usize> { batches[verb].iter().map(Vec::len).collect() };
    assert_eq!(sizes("attach"), [500, 500, 201]);
    assert_eq!(sizes("detach"), [500, 200]);
    let carried =
        |verb: &str| -> BTreeSet<String> { batches[verb].iter().flatten().cloned().collect() };
    assert_eq!(carried("attach"), (0..1201).map(|i| ip(64, i)).collect());
    assert_eq!(carried("detach"), (0..700).map(|i| ip(65, i)).collect());
}

#[tokio::test]
async fn forwarding_rule_target_change_uses_set_target_and_keeps_ip() {
    let server = MockServer::start().await;
    list(
        &server,
        &format!("{G}/forwardingRules"),
        json!([{
            "name": "fr1", "IPAddress": "127.130.0.5", "portRange": "80-80",
            "target": "https://x/compute/v1/projects/p1/global/targetHttpProxies/old"
        }]),
        Some(1),
    )
    .await;
    Mock::given(method("POST"))
        .and(path(format!("{G}/forwardingRules/fr1/setTarget")))
        .and(body_partial_json(
            json!({"target": "projects/p1/global/targetHttpProxies/tp1"}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-t")))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let desired = model::ForwardingRule::new()
        .set_name("fr1")
        .set_port_range("80")
        .set_target("projects/p1/global/targetHttpProxies/tp1");
    let mut changes = Changes::new();
    let ip = forwarding_rules::ensure(&compute, &desired, &mut changes)
        .await
        .unwrap();
    assert_eq!(ip.as_deref(), Some("127.130.0.5"));
    assert_eq!(changes[0].to_string(), "ForwardingRule \"fr1\" updated");
    // Recorded: in sync now, nothing sent.
    let mut changes = Changes::new();
    forwarding_rules::ensure(&compute, &desired, &mut changes)
        .await
        .unwrap();
    assert!(changes.is_empty(), "{changes:?}");
}

/// A rule on another port is deleted and inserted again (a port range cannot be changed in
/// place, inventory §4); `80` and `80-80` are the same range and change nothing.
#[tokio::test]
async fn a_forwarding_rule_on_another_port_is_recreated() {
    let server = MockServer::start().await;
    list(
        &server,
        &format!("{G}/forwardingRules"),
        json!([{
            "name": "fr1", "IPAddress": "127.130.0.5", "portRange": "443-443",
            "target": "https://x/compute/v1/projects/p1/global/targetHttpProxies/tp1"
        }]),
        Some(1),
    )
    .await;
    Mock::given(method("DELETE"))
        .and(path(format!("{G}/forwardingRules/fr1")))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-d")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{G}/forwardingRules")))
        .and(body_partial_json(json!({"name": "fr1", "portRange": "80"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-i")))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let desired = model::ForwardingRule::new()
        .set_name("fr1")
        .set_ip_address("127.130.0.5")
        .set_port_range("80")
        .set_target("projects/p1/global/targetHttpProxies/tp1");
    let mut changes = Changes::new();
    let ip = forwarding_rules::ensure(&compute, &desired, &mut changes)
        .await
        .unwrap();
    assert_eq!(ip.as_deref(), Some("127.130.0.5"));
    let said: Vec<String> = changes.iter().map(ToString::to_string).collect();
    assert_eq!(
        said,
        [
            "ForwardingRule \"fr1\" deleted",
            "ForwardingRule \"fr1\" created"
        ]
    );
    for (a, b, same) in [
        ("80", "80-80", true),
        ("80-80", "80-80", true),
        ("80", "443", false),
        ("80-443", "80-443", true),
        ("80-443", "80", false),
    ] {
        assert_eq!(
            forwarding_rules::port_range(Some(a)) == forwarding_rules::port_range(Some(b)),
            same,
            "{a} vs {b}"
        );
    }
    assert_eq!(forwarding_rules::port_range(Some("8080-8080")), "8080");
    assert_eq!(forwarding_rules::port_range(None), "");
}

/// An insert that loses a race (409: another writer made the rule between the list and the
/// insert) reads the rule back and takes its IP; any other insert error is the sync's error.
#[tokio::test]
async fn a_forwarding_rule_insert_that_loses_a_race_reads_the_winner_and_other_errors_fail() {
    let server = MockServer::start().await;
    list(&server, &format!("{G}/forwardingRules"), json!([]), Some(1)).await;
    Mock::given(method("POST"))
        .and(path(format!("{G}/forwardingRules")))
        .and(body_partial_json(json!({"name": "fr1"})))
        .respond_with(ResponseTemplate::new(409).set_body_json(json!({"error": {
            "code": 409, "status": "ALREADY_EXISTS",
            "message": "The resource 'projects/p1/global/forwardingRules/fr1' already exists"}})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{G}/forwardingRules/fr1")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": "fr1", "IPAddress": "127.130.0.7", "portRange": "80-80",
            "target": "https://x/compute/v1/projects/p1/global/targetHttpProxies/tp1"})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{G}/forwardingRules")))
        .and(body_partial_json(json!({"name": "fr2"})))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": {
            "code": 400, "status": "INVALID_ARGUMENT",
            "message": "Invalid value for field 'resource.portRange': '0'"}})))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let on = |name: &str| {
        model::ForwardingRule::new()
            .set_name(name)
            .set_port_range("80")
            .set_target("projects/p1/global/targetHttpProxies/tp1")
    };
    let mut changes = Changes::new();
    let ip = forwarding_rules::ensure(&compute, &on("fr1"), &mut changes)
        .await
        .unwrap();
    assert_eq!(ip.as_deref(), Some("127.130.0.7"), "the winner's IP");
    assert!(changes.is_empty(), "this sync created nothing: {changes:?}");
    let err = forwarding_rules::ensure(&compute, &on("fr2"), &mut changes)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Invalid value for field 'resource.portRange'"),
        "the API's error, not a conflict: {err}"
    );
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

/// Without a static IP name the IP a rule already has is promoted to a reserved address named
/// like the HTTP rule (inventory §4), so the IP the Ingress shows does not change. The IP is
/// known from the insert: nothing is read back.
#[tokio::test]
async fn managed_static_ip_promotes_the_rules_ephemeral_ip() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(ADDR))
        .and(body_partial_json(
            json!({"name": "k8s2-fr-x", "address": "127.200.0.7"}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-a")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{ADDR}/k8s2-fr-x")))
        .respond_with(not_found())
        .expect(0)
        .named("get the address")
        .mount(&server)
        .await;
    // The first read of the collection, after the insert: the list.
    list(
        &server,
        ADDR,
        json!([{"name": "k8s2-fr-x", "address": "127.200.0.7"}]),
        Some(1),
    )
    .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    let ip = addresses::ensure_managed(&compute, "k8s2-fr-x", Some("127.200.0.7"), &mut changes)
        .await
        .unwrap();
    assert_eq!(ip, "127.200.0.7");
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(
        addresses::get_ip(&compute, "k8s2-fr-x")
            .await
            .unwrap()
            .as_deref(),
        Some("127.200.0.7"),
        "known without a GET"
    );
}

/// An IP that Compute refuses to promote (another address reserves it, as after a user's
/// static IP annotation was removed) gets a fresh reservation, whose IP is read back.
#[tokio::test]
async fn managed_static_ip_is_freshly_reserved_when_promotion_is_refused() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{ADDR}/k8s2-fr-new")))
        .respond_with(not_found())
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{ADDR}/k8s2-fr-new")))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"name": "k8s2-fr-new", "address": "127.200.0.2"})),
        )
        .with_priority(2)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(ADDR))
        .and(body_partial_json(json!({"address": "127.200.0.9"})))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": {
            "code": 400, "message": "The IP address is already reserved", "status": "INVALID_ARGUMENT",
            "errors": [{"domain": "global", "reason": "invalid", "message": "reserved"}]}})))
        .with_priority(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(ADDR))
        .and(body_partial_json(json!({"name": "k8s2-fr-new"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-b")))
        .with_priority(2)
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    let fresh =
        addresses::ensure_managed(&compute, "k8s2-fr-new", Some("127.200.0.9"), &mut changes)
            .await
            .unwrap();
    assert_eq!(fresh, "127.200.0.2");
    assert_eq!(changes.len(), 1, "{changes:?}");
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
