//! Issue 40: the NEG sync issues no detach for a Pod in the window between its readiness gate
//! turning True and its EndpointSlice entry saying `ready: true`. The desired endpoints come
//! from the translation of a cluster snapshot taken in that window; the NEG already holds the
//! Pod's endpoint (HEALTHY, as the gate opened because of it). Before the fix the translation
//! left the Pod out and the sync detached it, so it came back UNHEALTHY a moment later.

use std::collections::BTreeSet;

use gclb_translate::translate::endpoints::service_endpoints;
use gclb_translate::translate::test_support::{
    config, one_pod_service_yaml, snapshot_from_yaml, web_port,
};
use gclb_translate::translate::ObjectKey;
use google_cloud_compute_v1::model;
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::super::*;
use crate::compute::test_support::{compute_for, done_op};
use crate::translate::DesiredNeg;

const NEG: &str = "/compute/v1/projects/p1/zones/us-central1-a/networkEndpointGroups/neg1";

/// Service `web` with Pod `web-1` (10.0.0.9, gated, containers ready) whose gate condition is
/// `gate`, whose kubelet `Ready` is `ready`, whose EndpointSlice entry says `slice_ready`, and
/// which is being deleted when `deleting`.
fn snapshot_yaml(gate: &str, ready: &str, slice_ready: bool, deleting: bool) -> String {
    let deletion = if deleting {
        "\n  deletionTimestamp: \"2026-01-01T00:00:00Z\""
    } else {
        ""
    };
    one_pod_service_yaml(
        &format!("{{ready: {slice_ready}, terminating: {deleting}}}"),
        true,
        deletion,
        &[
            ("ContainersReady", "True"),
            ("cloud.google.com/load-balancer-neg-ready", gate),
            ("Ready", ready),
        ],
    )
}

/// The desired NEG in `us-central1-a` translated from `yaml`.
fn desired_neg(yaml: &str) -> DesiredNeg {
    let snapshot = snapshot_from_yaml(yaml);
    let service = ObjectKey::new("default", "web");
    let eps = service_endpoints(&snapshot, &config(), &service, &web_port());
    DesiredNeg {
        zone: "us-central1-a".into(),
        neg: model::NetworkEndpointGroup::new().set_name("neg1"),
        endpoints: eps
            .by_zone
            .get("us-central1-a")
            .cloned()
            .unwrap_or_else(BTreeSet::new),
    }
}

/// A NEG holding 10.0.0.9:8080 HEALTHY, attach and detach answered; returns the server.
async fn neg_holding_the_pod() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("{NEG}/listNetworkEndpoints")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": [{
            "networkEndpoint": {"ipAddress": "10.0.0.9", "port": 8080, "instance": "node-a"},
            "healths": [{"healthState": "HEALTHY"}]
        }]})))
        .mount(&server)
        .await;
    for verb in ["attachNetworkEndpoints", "detachNetworkEndpoints"] {
        Mock::given(method("POST"))
            .and(path(format!("{NEG}/{verb}")))
            .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-a")))
            .mount(&server)
            .await;
    }
    server
}

/// The verbs of the attach and detach calls the server received.
async fn endpoint_calls(server: &MockServer) -> Vec<String> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.url.path().rsplit('/').next().unwrap().to_string())
        .filter(|v| v == "attachNetworkEndpoints" || v == "detachNetworkEndpoints")
        .collect()
}

/// Every state a gated Pod passes through from its gate turning True to its EndpointSlice entry
/// catching up: the sync sends no call at all (the endpoint is already attached).
#[tokio::test]
async fn no_detach_between_the_gate_turning_true_and_the_endpoint_slice_catching_up() {
    let window = [
        ("False", "False", false), // waiting for the load balancer
        ("True", "False", false),  // the operator set the gate; the kubelet has not written Ready
        ("True", "True", false),   // the kubelet wrote Ready; the EndpointSlice lags
        ("True", "True", true),    // caught up
    ];
    for (gate, ready, slice_ready) in window {
        let server = neg_holding_the_pod().await;
        let compute = compute_for(&server).await;
        let neg = desired_neg(&snapshot_yaml(gate, ready, slice_ready, false));
        let done = network_endpoint_groups::sync_endpoints(&compute, &neg)
            .await
            .unwrap();
        assert_eq!(
            (done, endpoint_calls(&server).await),
            ((0, 0), vec![]),
            "gate {gate}, Ready {ready}, slice ready {slice_ready}: the HEALTHY endpoint was touched"
        );
    }
}

/// The same sync detaches the Pod once it is being deleted: the test above can fail.
#[tokio::test]
async fn a_terminating_pod_is_detached() {
    let server = neg_holding_the_pod().await;
    let compute = compute_for(&server).await;
    let neg = desired_neg(&snapshot_yaml("True", "True", false, true));
    let done = network_endpoint_groups::sync_endpoints(&compute, &neg)
        .await
        .unwrap();
    assert_eq!(done, (0, 1));
    assert_eq!(endpoint_calls(&server).await, ["detachNetworkEndpoints"]);
}
