//! Regional frontends against a scripted Compute API (`sync::region_forwarding_rules`).

use google_cloud_compute_v1::model;
use serde_json::json;
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::forbid_mutations;
use crate::compute::tests::{compute_for, done_op};
use crate::sync::{region_forwarding_rules, Changes};

const FR: &str = "/compute/v1/projects/p1/regions/r1/forwardingRules/fr1";
const PROXY: &str = "projects/p1/regions/r1/targetHttpProxies";

async fn observed_rule(server: &MockServer, target: &str) {
    Mock::given(method("GET"))
        .and(path(FR))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": "fr1", "IPAddress": "10.0.0.5", "portRange": "80-80",
            "loadBalancingScheme": "INTERNAL_MANAGED",
            "target": format!("https://x/compute/v1/{PROXY}/{target}"),
        })))
        .mount(server)
        .await;
}

fn desired() -> model::ForwardingRule {
    model::ForwardingRule::new()
        .set_name("fr1")
        .set_port_range("80")
        .set_load_balancing_scheme("INTERNAL_MANAGED")
        .set_target(format!("{PROXY}/tp1"))
}

/// A regional rule whose only difference is its target gets `setTarget` (its IP is kept); a
/// rule already pointing at the desired proxy gets nothing.
#[tokio::test]
async fn a_regional_rule_changes_target_in_place_and_is_left_alone_in_sync() {
    let server = MockServer::start().await;
    observed_rule(&server, "old").await;
    Mock::given(method("POST"))
        .and(path(format!("{FR}/setTarget")))
        .and(body_partial_json(json!({"target": format!("{PROXY}/tp1")})))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-t")))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    let ip = region_forwarding_rules::ensure(&compute, "r1", &desired(), &mut changes)
        .await
        .unwrap();
    assert_eq!(ip.as_deref(), Some("10.0.0.5"));
    let done: Vec<String> = changes.iter().map(|c| c.to_string()).collect();
    assert_eq!(done, ["ForwardingRule \"fr1\" updated"]);

    let server = MockServer::start().await;
    observed_rule(&server, "tp1").await;
    forbid_mutations(&server).await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    region_forwarding_rules::ensure(&compute, "r1", &desired(), &mut changes)
        .await
        .unwrap();
    assert!(changes.is_empty(), "{changes:?}");
}
