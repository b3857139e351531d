//! What the operator keeps of the objects it caches (issue 15, "Memory"): each store holds only
//! the fields translation, the readiness gates and Events read, so a cluster of 10k Pods and
//! thousands of Secrets fits the Deployment's memory limit. Applied to every object as it
//! arrives from a watch, before it is stored (kube-runtime's `WatchStreamExt::modify`).
//!
//! - every kind: `metadata.managedFields` (often larger than the object) and the
//!   `kubectl.kubernetes.io/last-applied-configuration` annotation (a second copy of the
//!   object; of a Secret, its data) go;
//! - Pods are not cached as the typed `Pod` at all but as [`PodRecord`]s, which deserialise
//!   only the fields the operator reads; [`PodRecord::prune`] then drops the metadata it does
//!   not read (the record's module docs list what is kept);
//! - Secrets arrive already filtered to `kubernetes.io/tls` (`stores::TLS_SECRETS`); their
//!   annotations, labels and owner references go.

use k8s_openapi::api::core::v1::Secret;
use kube::Resource;

#[cfg(doc)]
use crate::translate::pod::PodRecord;

/// The annotation `kubectl apply` stores the whole last applied object in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops `managedFields` and the last-applied annotation (any kind).
pub fn metadata<K: Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

/// Keeps of a TLS Secret its identity, type and data.
pub fn secret(secret: &mut Secret) {
    metadata(secret);
    let meta = &mut secret.metadata;
    meta.annotations = None;
    meta.labels = None;
    meta.owner_references = None;
    secret.string_data = None;
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Pod, Service};

    use super::*;
    use crate::readiness::rules::{needs_processing, pod_ips};
    use crate::translate::annotations::AppProtocol;
    use crate::translate::endpoints::serving_behind_neg_gate;
    use crate::translate::health_check::probe_settings;
    use crate::translate::pod::PodRecord;
    use crate::translate::ClusterSnapshot;

    /// A Pod as a ReplicaSet creates it and the kubelet reports it, with the readiness gate
    /// pending and a readiness probe the health check is derived from.
    fn rich_pod() -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "web-1", "namespace": "default", "uid": "u1", "resourceVersion": "42",
                "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"app": "web"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}", "a": "b"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-x", "uid": "rs"}],
                "managedFields": [{"manager": "kube-controller-manager", "operation": "Update"}]
            },
            "spec": {
                "nodeName": "node-a",
                "readinessGates": [{"conditionType": "cloud.google.com/load-balancer-neg-ready"}],
                "initContainers": [{"name": "init", "image": "busybox"}],
                "containers": [{
                    "name": "app", "image": "app:1",
                    "env": [{"name": "A", "value": "x".repeat(200)}],
                    "ports": [{"name": "http", "containerPort": 8080}],
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 7},
                    "volumeMounts": [{"name": "v", "mountPath": "/v"}]
                }],
                "volumes": [{"name": "v", "emptyDir": {}}]
            },
            "status": {
                "phase": "Running", "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}],
                "conditions": [
                    {"type": "ContainersReady", "status": "True"},
                    {"type": "Ready", "status": "False"},
                    {"type": "cloud.google.com/load-balancer-neg-ready", "status": "False"}
                ],
                "containerStatuses": [{"name": "app", "image": "app:1", "imageID": "sha256:x",
                    "ready": true, "restartCount": 0}]
            }
        })
    }

    fn service() -> Service {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}
        }))
        .unwrap()
    }

    /// Everything the operator derives from a Pod it derives from the Pod's record: the health
    /// check's probe, the readiness gate's state and the Pod's IPs, while the record keeps
    /// none of what the operator does not read.
    #[test]
    fn a_pod_record_gives_the_answers_of_the_full_pod() {
        let full = rich_pod();
        let mut record: PodRecord = serde_json::from_value(full.clone()).unwrap();
        record.prune();
        let mut s = ClusterSnapshot::default();
        s.insert(record.clone());
        let svc = service();
        let port = &svc.spec.as_ref().unwrap().ports.as_ref().unwrap()[0];
        let probe = probe_settings(&s, &svc, port, AppProtocol::Http).expect("probe kept");
        assert_eq!(probe.request_path.as_deref(), Some("/ready"));
        assert_eq!(probe.check_interval_sec, Some(7));
        assert!(serving_behind_neg_gate(&record));
        assert!(needs_processing(&record));
        assert_eq!(pod_ips(&record), vec!["10.0.0.1".to_string()]);
        let typed: Pod = serde_json::from_value(full).unwrap();
        assert_eq!(record.object_ref(&()), typed.object_ref(&()));
        assert_eq!(record.metadata.labels, typed.metadata.labels);
        assert!(record.metadata.managed_fields.is_none());
        assert!(record.metadata.annotations.is_none());
        assert!(record.metadata.owner_references.is_none());
    }

    #[test]
    fn secrets_keep_their_certificate_and_lose_the_applied_copy() {
        let mut s: Secret = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "tls", "namespace": "default",
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"data\":{}}"},
                "managedFields": [{"manager": "kubectl"}]},
            "data": {"tls.crt": "Y3J0", "tls.key": "a2V5"}
        }))
        .unwrap();
        let data = s.data.clone();
        secret(&mut s);
        assert_eq!(s.data, data);
        assert_eq!(s.type_.as_deref(), Some("kubernetes.io/tls"));
        assert!(s.metadata.annotations.is_none());
        assert!(s.metadata.managed_fields.is_none());
    }
}
