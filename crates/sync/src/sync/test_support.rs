//! Test helpers for `sync` and the code above it (the operator's controller): a scripted
//! Compute API's collection lists (wiremock) and a desired backend. Built for this crate's tests
//! and, with the `test-support` feature, for gclb-operator's.

use google_cloud_compute_v1::model;
use serde_json::{json, Value};
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::translate::{DesiredBackend, DesiredNeg, NegEndpoint, ServicePortKey};

/// Path of project `p1`'s global collections on the scripted API
/// ([`crate::compute::test_support::compute_for`]).
pub const G: &str = "/compute/v1/projects/p1/global";

/// `GET {collection path}` answers `items`, exactly `times` times when given.
pub async fn list(server: &MockServer, collection: &str, items: Value, times: Option<u64>) {
    let mock = Mock::given(method("GET"))
        .and(path(collection))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({ "items": items })))
        .with_priority(2)
        .named(format!("list {collection}"));
    match times {
        Some(n) => mock.expect(n).mount(server).await,
        None => mock.mount(server).await,
    }
}

/// Every other collection list answers empty (lowest priority).
pub async fn other_lists_empty(server: &MockServer) {
    Mock::given(method("GET"))
        .and(path_regex(
            r"^/compute/v1/projects/p1/(global|zones/[^/]+)/[A-Za-z]+$",
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": []})))
        .with_priority(30)
        .mount(server)
        .await;
}

/// A backend of Service port `default/web:80` whose health check, NEG (in zone `z1`, one
/// endpoint) and backend service are all called `name`.
pub fn backend_named(name: &str) -> DesiredBackend {
    let neg = DesiredNeg {
        zone: "z1".into(),
        neg: model::NetworkEndpointGroup::new().set_name(name),
        endpoints: [NegEndpoint {
            ip_address: "127.64.0.1".into(),
            port: 8080,
            instance: None,
        }]
        .into_iter()
        .collect(),
    };
    DesiredBackend {
        key: ServicePortKey {
            namespace: "default".into(),
            service: "web".into(),
            port: 80,
        },
        health_check: model::HealthCheck::new().set_name(name),
        backend_service: model::BackendService::new()
            .set_name(name)
            .set_health_checks([format!("projects/p1/global/healthChecks/{name}")]),
        negs: vec![neg],
        firewall_ports: Default::default(),
        findings: Vec::new(),
    }
}
