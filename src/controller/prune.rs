//! What the operator keeps of the objects it caches (issue 15, "Memory"): each store holds only
//! the fields translation, the readiness gates and Events read, so a cluster of 10k Pods and
//! thousands of Secrets fits the Deployment's memory limit. Applied to every object as it
//! arrives from a watch, before it is stored (kube-runtime's `WatchStreamExt::modify`).
//!
//! - every kind: `metadata.managedFields` (often larger than the object) and the
//!   `kubectl.kubernetes.io/last-applied-configuration` annotation (a second copy of the
//!   object; of a Secret, its data) go;
//! - Pods: the metadata that names and selects them (name, namespace, uid, resourceVersion,
//!   creation and deletion timestamps, labels), of the spec only `nodeName`, `readinessGates`
//!   and each container's name, ports and readiness probe (the health check comes from them),
//!   of the status only `phase`, `conditions`, `podIP` and `podIPs`;
//! - Secrets arrive already filtered to `kubernetes.io/tls` (`stores::TLS_SECRETS`); their
//!   annotations, labels and owner references go.

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;

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

/// Keeps of a Pod what the operator reads (module docs).
pub fn pod(pod: &mut Pod) {
    let meta = std::mem::take(&mut pod.metadata);
    pod.metadata = ObjectMeta {
        name: meta.name,
        namespace: meta.namespace,
        uid: meta.uid,
        resource_version: meta.resource_version,
        creation_timestamp: meta.creation_timestamp,
        deletion_timestamp: meta.deletion_timestamp,
        labels: meta.labels,
        ..ObjectMeta::default()
    };
    pod.spec = pod.spec.take().map(|spec| PodSpec {
        node_name: spec.node_name,
        readiness_gates: spec.readiness_gates,
        containers: spec
            .containers
            .into_iter()
            .map(|c| Container {
                name: c.name,
                ports: c.ports,
                readiness_probe: c.readiness_probe,
                ..Container::default()
            })
            .collect(),
        ..PodSpec::default()
    });
    pod.status = pod.status.take().map(|status| PodStatus {
        phase: status.phase,
        conditions: status.conditions,
        pod_ip: status.pod_ip,
        pod_ips: status.pod_ips,
        ..PodStatus::default()
    });
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
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::Service;

    use super::*;
    use crate::readiness::rules::{decide, needs_processing, pod_ips, NegObservation};
    use crate::translate::endpoints::waits_only_for_neg_gate;
    use crate::translate::health_check::probe_settings;
    use crate::translate::ClusterSnapshot;

    /// A Pod as a ReplicaSet creates it and the kubelet reports it, with the readiness gate
    /// pending and a readiness probe the health check is derived from.
    fn rich_pod() -> Pod {
        serde_json::from_value(serde_json::json!({
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
        }))
        .unwrap()
    }

    fn service() -> Service {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}
        }))
        .unwrap()
    }

    /// Everything the operator derives from a Pod is the same from the pruned Pod, and the
    /// pruned Pod is much smaller.
    #[test]
    fn a_pruned_pod_gives_the_same_answers() {
        let full = rich_pod();
        let mut pruned = full.clone();
        pod(&mut pruned);
        let snapshot = |p: &Pod| {
            let mut s = ClusterSnapshot::default();
            s.insert(p.clone());
            s
        };
        let svc = service();
        let port = &svc.spec.as_ref().unwrap().ports.as_ref().unwrap()[0];
        let probe = |p: &Pod| {
            probe_settings(
                &snapshot(p),
                &svc,
                port,
                crate::translate::annotations::AppProtocol::Http,
            )
        };
        assert!(probe(&full).is_some());
        assert_eq!(probe(&pruned), probe(&full));
        assert_eq!(
            waits_only_for_neg_gate(&pruned),
            waits_only_for_neg_gate(&full)
        );
        assert!(waits_only_for_neg_gate(&full));
        assert_eq!(needs_processing(&pruned), needs_processing(&full));
        assert_eq!(pod_ips(&pruned), pod_ips(&full));
        let created = full.metadata.creation_timestamp.clone().unwrap().0;
        let negs: BTreeMap<crate::readiness::NegRef, NegObservation> = BTreeMap::new();
        let now = created;
        assert_eq!(
            decide(
                &pod_ips(&pruned),
                created,
                &negs,
                now,
                std::time::Duration::from_secs(1)
            ),
            decide(
                &pod_ips(&full),
                created,
                &negs,
                now,
                std::time::Duration::from_secs(1)
            )
        );
        assert_eq!(pruned.object_ref(&()), full.object_ref(&()));
        assert_eq!(pruned.metadata.labels, full.metadata.labels);

        let size = |p: &Pod| serde_json::to_vec(p).unwrap().len();
        assert!(
            size(&pruned) * 2 < size(&full),
            "pruned {} bytes of {}",
            size(&pruned),
            size(&full)
        );
        assert!(pruned.metadata.managed_fields.is_none());
        assert!(pruned.spec.as_ref().unwrap().volumes.is_none());
        assert!(pruned.status.as_ref().unwrap().container_statuses.is_none());
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
