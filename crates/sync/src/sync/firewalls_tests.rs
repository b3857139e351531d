//! The shared rule against a scripted Compute API (wiremock): deleted once however many
//! Ingresses ask, written in the network's (host) project, listed at most once per TTL.

use google_cloud_compute_v1::model;
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;
use crate::compute::test_support::{compute_for, not_found};

const HOST_FW: &str = "/compute/v1/projects/host/global/firewalls";

#[tokio::test]
async fn the_rule_is_deleted_once_however_many_ingresses_ask() {
    let server = MockServer::start().await;
    Mock::given(method("DELETE"))
        .and(path(format!("{HOST_FW}/k8s-fw-l7--uid")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "kind": "compute#operation", "name": "op-1", "status": "RUNNING",
            "selfLink": format!("{}/compute/v1/projects/host/global/operations/op-1", server.uri())})))
        .expect(1)
        .mount(&server)
        .await;
    // The Operation is waited for in the host project, where it lives.
    Mock::given(method("POST"))
        .and(path(
            "/compute/v1/projects/host/global/operations/op-1/wait",
        ))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(
                json!({"kind": "compute#operation", "name": "op-1", "status": "DONE"}),
            ),
        )
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut state = RuleState::default();
    for _ in 0..5 {
        let mut changes = Changes::new();
        delete(&compute, "host", "k8s-fw-l7--uid", &mut state, &mut changes)
            .await
            .unwrap();
    }
    // wiremock checks `expect(1)` on drop.
}

#[tokio::test]
async fn a_rule_written_again_is_deleted_again() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{HOST_FW}/fw")))
        .respond_with(not_found())
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(HOST_FW))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(
                json!({"kind": "compute#operation", "name": "op-i", "status": "DONE"}),
            ),
        )
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path(format!("{HOST_FW}/fw")))
        .respond_with(not_found())
        .expect(2)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut state = RuleState::default();
    let mut changes = Changes::new();
    // Gone already (404) counts as deleted: the second call sends nothing.
    delete(&compute, "host", "fw", &mut state, &mut changes)
        .await
        .unwrap();
    delete(&compute, "host", "fw", &mut state, &mut changes)
        .await
        .unwrap();
    let fw = model::Firewall::new().set_name("fw");
    assert_eq!(
        ensure(&compute, "host", &fw, &mut state, &mut changes)
            .await
            .unwrap(),
        FirewallOutcome::InSync
    );
    assert_eq!(state.last().map(|(_, exists)| *exists), Some(true));
    delete(&compute, "host", "fw", &mut state, &mut changes)
        .await
        .unwrap();
}

#[tokio::test]
async fn blocked_ports_lists_the_network_project_once_per_ttl() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(HOST_FW))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": [
            {"name": "k8s-fw-l7--uid", "network": "https://x/compute/v1/projects/host/global/networks/shared",
             "direction": "INGRESS", "priority": 1000, "sourceRanges": ["130.211.0.0/22", "35.191.0.0/16"],
             "allowed": [{"IPProtocol": "tcp", "ports": ["8080"]}]},
            {"name": "deny-9000", "network": "https://x/compute/v1/projects/host/global/networks/shared",
             "direction": "INGRESS", "priority": 900, "sourceRanges": ["0.0.0.0/0"],
             "denied": [{"IPProtocol": "tcp", "ports": ["9000"]}]},
        ]})))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut state = RuleState::default();
    let net = "projects/host/global/networks/shared";
    let blocked = blocked_ports(&compute, net, [8080, 8081, 9000], &[], &mut state)
        .await
        .unwrap();
    assert_eq!(
        blocked,
        BTreeMap::from([
            (8081, FirewallBlock::NoAllowRule),
            (
                9000,
                FirewallBlock::Denied {
                    rule: "deny-9000".into(),
                    priority: 900
                }
            ),
        ])
    );
    assert_eq!(state.listed("k8s-fw-l7--uid"), Some(true));
    // A rule missing from the listing is reported missing, though other rules are listed.
    assert_eq!(state.listed("k8s-fw-l7--gone"), Some(false));
    let again = blocked_ports(&compute, net, [8080], &[], &mut state)
        .await
        .unwrap();
    assert!(again.is_empty());
}

fn forbidden() -> ResponseTemplate {
    ResponseTemplate::new(403).set_body_json(json!({"error": {
        "code": 403, "message": "Required 'compute.firewalls.create' permission",
        "status": "PERMISSION_DENIED"}}))
}

#[tokio::test]
async fn a_forbidden_write_is_an_outcome_that_says_whether_the_rule_exists() {
    let server = MockServer::start().await;
    // "new" does not exist and may not be created; "old" exists and may not be updated.
    Mock::given(method("GET"))
        .and(path(format!("{HOST_FW}/new")))
        .respond_with(not_found())
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{HOST_FW}/old")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": "old", "sourceRanges": ["130.211.0.0/22"]})))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(HOST_FW))
        .respond_with(forbidden())
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(format!("{HOST_FW}/old")))
        .respond_with(forbidden())
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut state = RuleState::default();
    assert_eq!(state.last(), None, "no sync ran yet");
    let mut changes = Changes::new();

    let new = model::Firewall::new()
        .set_name("new")
        .set_source_ranges(["35.191.0.0/16"]);
    let outcome = ensure(&compute, "host", &new, &mut state, &mut changes).await;
    assert_eq!(
        outcome.unwrap(),
        FirewallOutcome::Forbidden { exists: false }
    );
    assert_eq!(state.last(), Some(&(new.clone(), false)));
    assert!(
        state.absent,
        "a rule that could not be created is known to be absent"
    );

    let old = model::Firewall::new()
        .set_name("old")
        .set_source_ranges(["35.191.0.0/16"]);
    let outcome = ensure(&compute, "host", &old, &mut state, &mut changes).await;
    assert_eq!(
        outcome.unwrap(),
        FirewallOutcome::Forbidden { exists: true }
    );
    assert_eq!(state.last(), Some(&(old, true)));
    assert!(!state.absent);
}

#[tokio::test]
async fn other_write_errors_are_errors_and_not_forbidden_outcomes() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{HOST_FW}/fw")))
        .respond_with(not_found())
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(HOST_FW))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": {
            "code": 400, "message": "Invalid value for field 'resource.sourceRanges[0]'",
            "status": "INVALID_ARGUMENT"}})))
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut state = RuleState::default();
    let mut changes = Changes::new();
    let fw = model::Firewall::new().set_name("fw");
    let err = ensure(&compute, "host", &fw, &mut state, &mut changes)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("Invalid value for field"),
        "the API's message is kept: {err}"
    );
    assert_eq!(state.last(), None, "a failed sync records no rule");
}

#[tokio::test]
async fn a_listing_older_than_the_ttl_is_listed_again() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(HOST_FW))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": [
            {"name": "k8s-fw-l7--uid", "network": "https://x/compute/v1/projects/host/global/networks/shared",
             "direction": "INGRESS", "priority": 1000, "sourceRanges": ["130.211.0.0/22", "35.191.0.0/16"],
             "allowed": [{"IPProtocol": "tcp", "ports": ["8080"]}]},
        ]})))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    // A listing made longer ago than the TTL, which held no rule at all.
    let made = Instant::now()
        .checked_sub(LISTING_TTL + Duration::from_secs(1))
        .expect("the clock is past the TTL");
    let mut state = RuleState {
        listing: Some((made, Arc::new(Vec::new()))),
        ..RuleState::default()
    };
    let net = "projects/host/global/networks/shared";
    let blocked = blocked_ports(&compute, net, [8080], &[], &mut state)
        .await
        .unwrap();
    assert!(
        blocked.is_empty(),
        "the fresh listing allows 8080: {blocked:?}"
    );
    assert_eq!(state.listed("k8s-fw-l7--uid"), Some(true));
}
