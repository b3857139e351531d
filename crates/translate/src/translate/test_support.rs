//! Test helpers: load a snapshot from multi-document YAML and a fixed config.

use serde::de::DeserializeOwned;

use super::{ClusterSnapshot, SnapshotObject, TranslateConfig};

/// The config every translation test uses.
pub fn config() -> TranslateConfig {
    TranslateConfig::new(
        "my-project",
        "default",
        &["us-central1-a", "us-central1-b"],
        "test-cluster",
        "5a6b7c8d-0000-4000-8000-123456789abc",
    )
}

fn insert<K: SnapshotObject + DeserializeOwned>(
    snapshot: &mut ClusterSnapshot,
    doc: serde_json::Value,
) {
    let object: K = serde_json::from_value(doc).unwrap_or_else(|e| panic!("bad test object: {e}"));
    snapshot.insert(object);
}

/// Parses Kubernetes objects (Ingress, Service, EndpointSlice, Pod, IngressClass, Secret,
/// BackendConfig, FrontendConfig, ManagedCertificate) from multi-document YAML. Namespaced
/// objects without a namespace go to `default`.
///
/// # Panics
/// On malformed YAML or an unknown kind (test input errors).
pub fn snapshot_from_yaml(yaml: &str) -> ClusterSnapshot {
    use k8s_openapi::api::{core::v1, discovery::v1 as discovery, networking::v1 as networking};
    let mut snapshot = ClusterSnapshot::default();
    for document in serde_yaml::Deserializer::from_str(yaml) {
        let value: serde_yaml::Value =
            serde::Deserialize::deserialize(document).expect("valid YAML");
        if value.is_null() {
            continue;
        }
        let mut doc: serde_json::Value =
            serde_json::to_value(value).expect("YAML is JSON-compatible");
        let kind = doc["kind"]
            .as_str()
            .expect("every object has a kind")
            .to_owned();
        if kind != "IngressClass" && doc["metadata"].get("namespace").is_none() {
            doc["metadata"]["namespace"] = "default".into();
        }
        match kind.as_str() {
            "Ingress" => insert::<networking::Ingress>(&mut snapshot, doc),
            "IngressClass" => insert::<networking::IngressClass>(&mut snapshot, doc),
            "Service" => insert::<v1::Service>(&mut snapshot, doc),
            "Pod" => {
                // Checked as a typed Pod, cached as the store caches it.
                let pod: v1::Pod =
                    serde_json::from_value(doc).unwrap_or_else(|e| panic!("bad test object: {e}"));
                snapshot.insert(super::pod::PodRecord::from_pod(&pod).expect("a Pod serialises"));
            }
            "Secret" => insert::<v1::Secret>(&mut snapshot, doc),
            "EndpointSlice" => insert::<discovery::EndpointSlice>(&mut snapshot, doc),
            "BackendConfig" => insert::<crate::crd::BackendConfig>(&mut snapshot, doc),
            "FrontendConfig" => insert::<crate::crd::FrontendConfig>(&mut snapshot, doc),
            "ManagedCertificate" => insert::<crate::crd::ManagedCertificate>(&mut snapshot, doc),
            "TLSCertificateDelegation" => {
                insert::<crate::crd::TLSCertificateDelegation>(&mut snapshot, doc)
            }
            other => panic!("unsupported kind {other} in test data"),
        }
    }
    snapshot
}

/// Service `web` (port `http` 80 -> target 8080, selector `app: web`) whose one EndpointSlice
/// entry, 10.0.0.9 on `node-a` in `us-central1-a`, has the conditions `slice_conditions` (a YAML
/// flow map such as `{ready: false}`) and names Pod `web-1`; and that Pod, with the readiness
/// gate `cloud.google.com/load-balancer-neg-ready` when `gated`, `pod_metadata` appended to its
/// metadata (e.g. a `deletionTimestamp` line) and the status `conditions` `(type, status)`.
/// The cluster the endpoint and gate-window tests vary (issue 40); [`web_port`] is its port.
pub fn one_pod_service_yaml(
    slice_conditions: &str,
    gated: bool,
    pod_metadata: &str,
    conditions: &[(&str, &str)],
) -> String {
    let gates = if gated {
        "  readinessGates:\n  - conditionType: cloud.google.com/load-balancer-neg-ready\n"
    } else {
        ""
    };
    let conditions: String = conditions
        .iter()
        .map(|(t, s)| format!("  - {{type: {t}, status: \"{s}\"}}\n"))
        .collect();
    format!(
        r#"
apiVersion: v1
kind: Service
metadata: {{name: web}}
spec:
  selector: {{app: web}}
  ports: [{{name: http, port: 80, targetPort: 8080}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abcde
  labels: {{kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{{name: http, port: 8080}}]
endpoints:
- addresses: ["10.0.0.9"]
  conditions: {slice_conditions}
  nodeName: node-a
  zone: us-central1-a
  targetRef: {{kind: Pod, name: web-1}}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  labels: {{app: web}}{pod_metadata}
spec:
{gates}  containers:
  - {{name: web, image: web, ports: [{{containerPort: 8080}}]}}
status:
  podIP: 10.0.0.9
  conditions:
{conditions}"#
    )
}

/// The port of Service `web` in [`one_pod_service_yaml`].
pub fn web_port() -> k8s_openapi::api::core::v1::ServicePort {
    k8s_openapi::api::core::v1::ServicePort {
        name: Some("http".into()),
        port: 80,
        target_port: Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(8080)),
        ..Default::default()
    }
}
