//! Sync against a scripted Compute API (wiremock): the exact calls each path makes.

use std::collections::BTreeSet;

use google_cloud_compute_v1::model;
use serde_json::json;
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;
use crate::compute::tests::{compute_for, done_op, not_found};
use crate::translate::{DesiredNeg, NegEndpoint};

const UM: &str = "/compute/v1/projects/p1/global/urlMaps";

fn desired_url_map() -> model::UrlMap {
    model::UrlMap::new()
        .set_name("um1")
        .set_default_service("projects/p1/global/backendServices/b1")
}

/// Fails the test if anything but GET/list reaches the server.
async fn forbid_mutations(server: &MockServer) {
    for verb in ["POST", "PUT", "PATCH", "DELETE"] {
        Mock::given(method(verb))
            .respond_with(ResponseTemplate::new(500))
            .with_priority(10)
            .expect(0)
            .named(format!("no {verb}"))
            .mount(server)
            .await;
    }
}

#[tokio::test]
async fn create_path_inserts_missing_url_map() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{UM}/um1")))
        .respond_with(not_found())
        .expect(1)
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
}

#[tokio::test]
async fn no_op_sends_no_mutation() {
    let server = MockServer::start().await;
    forbid_mutations(&server).await;
    Mock::given(method("GET"))
        .and(path(format!("{UM}/um1")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "kind": "compute#urlMap", "id": "12", "name": "um1", "fingerprint": "YWJj",
            "selfLink": "http://127.0.0.1:1/compute/v1/projects/p1/global/urlMaps/um1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "defaultService": "https://compute.googleapis.com/compute/v1/projects/p1/global/backendServices/b1"
        })))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    url_maps::ensure(&compute, &desired_url_map(), &mut changes)
        .await
        .unwrap();
    assert!(changes.is_empty(), "{changes:?}");
}

#[tokio::test]
async fn update_sends_fingerprint_and_refetches_after_412() {
    let server = MockServer::start().await;
    // First GET sees fingerprint "old" (YWJj), the second "new" (bmV3).
    Mock::given(method("GET"))
        .and(path(format!("{UM}/um1")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": "um1", "fingerprint": "YWJj",
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
            "name": "um1", "fingerprint": "bmV3",
            "defaultService": "projects/p1/global/backendServices/old"
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
    Mock::given(method("PUT"))
        .and(path(format!("{UM}/um1")))
        .and(body_partial_json(json!({
            "fingerprint": "bmV3",
            "defaultService": "projects/p1/global/backendServices/b1"
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-2")))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    url_maps::ensure(&compute, &desired_url_map(), &mut changes)
        .await
        .unwrap();
    assert_eq!(changes[0].to_string(), "UrlMap \"um1\" updated");
}

#[tokio::test]
async fn forbidden_firewall_insert_is_an_xpn_outcome() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(
            "/compute/v1/projects/p1/global/firewalls/k8s-fw-l7--uid",
        ))
        .respond_with(not_found())
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/compute/v1/projects/p1/global/firewalls"))
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
    let outcome = firewalls::ensure(&compute, &fw, &mut changes)
        .await
        .unwrap();
    assert_eq!(
        outcome,
        firewalls::FirewallOutcome::Forbidden { exists: false }
    );
    assert!(changes.is_empty());
}

#[tokio::test]
async fn neg_endpoints_attach_and_detach_by_set_difference() {
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
    Mock::given(method("POST"))
        .and(path(format!("{neg_path}/attachNetworkEndpoints")))
        .and(body_partial_json(
            json!({"networkEndpoints": [{"ipAddress": "127.64.0.3", "port": 8080}]}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-a")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{neg_path}/detachNetworkEndpoints")))
        .and(body_partial_json(
            json!({"networkEndpoints": [{"ipAddress": "127.64.0.2", "port": 8080}]}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-d")))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let endpoints: BTreeSet<NegEndpoint> = ["127.64.0.1", "127.64.0.3"]
        .iter()
        .map(|ip| NegEndpoint {
            ip_address: (*ip).to_string(),
            port: 8080,
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
    assert_eq!((attached, detached), (1, 1));
}

/// `sync_endpoints` against a NEG holding 700 stale endpoints while 1201 are desired: every
/// attach and detach call carries at most 500 endpoints (the API's limit per call), and the calls
/// together carry each endpoint exactly once.
#[tokio::test]
async fn endpoint_batches_hold_at_most_500() {
    let server = MockServer::start().await;
    let neg_path = "/compute/v1/projects/p1/zones/z1/networkEndpointGroups/neg1";
    let ip = |net: u32, i: u32| format!("127.{net}.{}.{}", i / 250, i % 250);
    let stale: Vec<serde_json::Value> = (0..700)
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
        let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
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
    let fr = "/compute/v1/projects/p1/global/forwardingRules/fr1";
    Mock::given(method("GET"))
        .and(path(fr))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": "fr1", "IPAddress": "127.130.0.5", "portRange": "80-80",
            "target": "https://x/compute/v1/projects/p1/global/targetHttpProxies/old"
        })))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{fr}/setTarget")))
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
}

#[tokio::test]
async fn backends_annotation_state_prefers_healthy_across_groups() {
    let server = MockServer::start().await;
    let bs = "/compute/v1/projects/p1/global/backendServices/b1";
    Mock::given(method("GET"))
        .and(path(bs))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": "b1",
            "backends": [
                {"group": "https://x/compute/v1/projects/p1/zones/z1/networkEndpointGroups/n1"},
                {"group": "https://x/compute/v1/projects/p1/zones/z2/networkEndpointGroups/n1"}
            ]
        })))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{bs}/getHealth")))
        .and(body_partial_json(json!({"group": "https://x/compute/v1/projects/p1/zones/z1/networkEndpointGroups/n1"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"healthStatus": [{"ipAddress": "127.64.0.1", "port": 80, "healthState": "UNHEALTHY"}]}),
        ))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{bs}/getHealth")))
        .and(body_partial_json(json!({"group": "https://x/compute/v1/projects/p1/zones/z2/networkEndpointGroups/n1"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"healthStatus": [{"ipAddress": "127.64.0.2", "port": 80, "healthState": "HEALTHY"}]}),
        ))
        .expect(1)
        .mount(&server)
        .await;
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
    let outcome = firewalls::ensure(&compute, &desired, &mut changes)
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
    let hc = "/compute/v1/projects/p1/global/healthChecks";
    Mock::given(method("GET"))
        .and(path(format!("{hc}/hc1")))
        .respond_with(not_found())
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{hc}/hc1")))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"name": "hc1", "checkIntervalSec": 15, "kind": "compute#healthCheck"}),
        ))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(hc))
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

#[tokio::test]
async fn in_sync_frontend_resync_sends_no_mutation_even_for_absent_https_parts() {
    use crate::translate::namer::FrontendNamer;
    use crate::translate::DesiredFrontend;

    let server = MockServer::start().await;
    forbid_mutations(&server).await;
    let namer = FrontendNamer::new(
        crate::translate::namer::Scheme::Gke,
        "abcd1234",
        "ks-uid",
        "default",
        "web",
    );
    let (um, tp, fr) = (
        namer.url_map(),
        namer.target_http_proxy(),
        namer.http_forwarding_rule(),
    );
    let base = "/compute/v1/projects/p1/global";
    let full = "https://compute.googleapis.com/compute/v1/projects/p1/global";
    Mock::given(method("GET"))
        .and(path(format!("{base}/urlMaps/{um}")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": um, "fingerprint": "YWJj", "defaultService": format!("{full}/backendServices/b1")
        })))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{base}/targetHttpProxies/{tp}")))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"name": tp, "urlMap": format!("{full}/urlMaps/{um}")})),
        )
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{base}/forwardingRules/{fr}")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": fr, "IPAddress": "127.130.0.9", "portRange": "80-80", "IPProtocol": "TCP",
            "target": format!("{full}/targetHttpProxies/{tp}")
        })))
        .with_priority(1)
        .mount(&server)
        .await;
    // The managed address the rule uses (reserved by an earlier sync).
    Mock::given(method("GET"))
        .and(path(format!("{base}/addresses/{fr}")))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"name": fr, "address": "127.130.0.9", "status": "IN_USE"})),
        )
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{base}/sslCertificates")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": []})))
        .with_priority(1)
        .mount(&server)
        .await;
    // The HTTPS rule, HTTPS proxy and redirect map do not exist.
    Mock::given(method("GET"))
        .respond_with(not_found())
        .with_priority(5)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let frontend = DesiredFrontend {
        url_map: Some(
            model::UrlMap::new()
                .set_name(um.clone())
                .set_default_service("projects/p1/global/backendServices/b1"),
        ),
        target_http_proxy: Some(
            model::TargetHttpProxy::new()
                .set_name(tp.clone())
                .set_url_map(format!("projects/p1/global/urlMaps/{um}")),
        ),
        http_forwarding_rule: Some(
            model::ForwardingRule::new()
                .set_name(fr.clone())
                .set_port_range("80")
                .set_target(format!("projects/p1/global/targetHttpProxies/{tp}")),
        ),
        ..DesiredFrontend::default()
    };
    let mut changes = Changes::new();
    let status = ingress::sync_frontend(&compute, &namer, &frontend, None, &mut changes)
        .await
        .unwrap();
    assert_eq!(status.ip.as_deref(), Some("127.130.0.9"));
    assert!(changes.is_empty(), "{changes:?}");
}

const ADDR: &str = "/compute/v1/projects/p1/global/addresses";

async fn address_absent_once_then(server: &MockServer, name: &str, ip: &str) {
    Mock::given(method("GET"))
        .and(path(format!("{ADDR}/{name}")))
        .respond_with(not_found())
        .up_to_n_times(1)
        .with_priority(1)
        .mount(server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{ADDR}/{name}")))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"name": name, "address": ip})),
        )
        .with_priority(2)
        .mount(server)
        .await;
}

/// Without a static IP name the IP a rule already has is promoted to a reserved address named
/// like the HTTP rule (inventory §4), so the IP the Ingress shows does not change.
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
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"name": "k8s2-fr-x", "address": "127.200.0.7"})),
        )
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    let ip = addresses::ensure_managed(&compute, "k8s2-fr-x", Some("127.200.0.7"), &mut changes)
        .await
        .unwrap();
    assert_eq!(ip, "127.200.0.7");
    assert_eq!(changes.len(), 1, "{changes:?}");
}

/// An IP that Compute refuses to promote (another address reserves it, as after a user's
/// static IP annotation was removed) gets a fresh reservation instead.
#[tokio::test]
async fn managed_static_ip_is_freshly_reserved_when_promotion_is_refused() {
    let server = MockServer::start().await;
    address_absent_once_then(&server, "k8s2-fr-new", "127.200.0.2").await;
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

/// `securityPolicy: None` means no policy: an attached one is removed through
/// `setSecurityPolicy` (no PUT), and emulator/server defaults (`portName: http`) cause no update.
#[tokio::test]
async fn backend_service_without_policy_detaches_the_observed_one_only() {
    let server = MockServer::start().await;
    let bs = "/compute/v1/projects/p1/global/backendServices/b1";
    Mock::given(method("GET"))
        .and(path(bs))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": "b1", "fingerprint": "YWJj", "protocol": "HTTP", "portName": "http",
            "timeoutSec": 30,
            "securityPolicy": "https://compute.googleapis.com/compute/v1/projects/p1/global/securityPolicies/sp"
        })))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{bs}/setSecurityPolicy")))
        .and(wiremock::matchers::body_json(json!({})))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-sp")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .respond_with(ResponseTemplate::new(500))
        .expect(0)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let desired = model::BackendService::new()
        .set_name("b1")
        .set_protocol(model::backend_service::Protocol::Http)
        .set_timeout_sec(30);
    let mut changes = Changes::new();
    backend_services::ensure(&compute, &desired, &mut changes)
        .await
        .unwrap();
    assert_eq!(changes.len(), 1, "{changes:?}");
    // The same policy by name, as a full URL on the server: in sync, nothing sent.
    let desired = desired.set_security_policy("projects/p1/global/securityPolicies/sp");
    let mut changes = Changes::new();
    backend_services::ensure(&compute, &desired, &mut changes)
        .await
        .unwrap();
    assert!(changes.is_empty(), "{changes:?}");
}

/// `sslPolicy` on the HTTPS proxy: `None` leaves the observed policy alone, `Some("")`
/// removes it (an empty `setSslPolicy` body), a name sets it.
#[tokio::test]
async fn https_proxy_ssl_policy_is_left_alone_removed_or_set() {
    let server = MockServer::start().await;
    let full = "https://compute.googleapis.com/compute/v1/projects/p1/global";
    Mock::given(method("GET"))
        .and(wiremock::matchers::path_regex("/targetHttpsProxies/ts1$"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": "ts1", "urlMap": format!("{full}/urlMaps/um1"),
            "sslCertificates": [format!("{full}/sslCertificates/c1")],
            "sslPolicy": format!("{full}/sslPolicies/old")
        })))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(wiremock::matchers::path_regex(
            "/targetHttpsProxies/ts1/setSslPolicy$",
        ))
        .and(wiremock::matchers::body_json(json!({})))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-rm")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(wiremock::matchers::path_regex(
            "/targetHttpsProxies/ts1/setSslPolicy$",
        ))
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

/// Deleting an Ingress's frontend sends a DELETE only for what exists: most Ingresses have no
/// HTTPS part, redirect URL map or managed address, and a DELETE of something absent is still
/// a write against the project's quota.
#[tokio::test]
async fn delete_frontend_deletes_only_what_exists() {
    let server = MockServer::start().await;
    let namer = crate::translate::namer::FrontendNamer::new(
        crate::translate::namer::Scheme::Gke,
        "uid12345",
        "kube-system-uid",
        "shop",
        "web",
    );
    let g = "/compute/v1/projects/p1/global";
    let present = [
        format!("{g}/forwardingRules/{}", namer.http_forwarding_rule()),
        format!("{g}/targetHttpProxies/{}", namer.target_http_proxy()),
        format!("{g}/urlMaps/{}", namer.url_map()),
    ];
    for p in &present {
        let name = p.rsplit('/').next().unwrap_or_default();
        Mock::given(method("GET"))
            .and(path(p.as_str()))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"name": name})))
            .mount(&server)
            .await;
        Mock::given(method("DELETE"))
            .and(path(p.as_str()))
            .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-d")))
            .expect(1)
            .named(format!("DELETE {name}"))
            .mount(&server)
            .await;
    }
    Mock::given(method("GET"))
        .and(path(format!("{g}/sslCertificates")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": []})))
        .mount(&server)
        .await;
    // Everything else is absent, and must not be deleted.
    Mock::given(method("GET"))
        .respond_with(not_found())
        .with_priority(20)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .respond_with(ResponseTemplate::new(500))
        .with_priority(20)
        .expect(0)
        .named("DELETE of an absent resource")
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    ingress::delete_frontend(&compute, &namer, &mut changes)
        .await
        .unwrap();
    let done: BTreeSet<String> = changes.iter().map(|c| c.to_string()).collect();
    assert_eq!(done.len(), 3, "{done:?}");
}
