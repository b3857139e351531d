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
