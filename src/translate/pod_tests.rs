//! The compact [`PodRecord`] the store keeps must give translation exactly what the Pods it
//! came from give: the store's records are built from Pods as the API serves them (managed
//! fields, owner references, env, volumes, container statuses, every condition), the test
//! data's from the bare Pods.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Value};

use super::*;
use crate::translate::test_support::{config, snapshot_from_yaml};
use crate::translate::{translate_ingress, ClusterSnapshot};

/// `pod` as a real API server serves it: everything a ReplicaSet, the scheduler and the kubelet
/// add that the operator never reads.
fn as_served(pod: &PodRecord) -> Value {
    let mut v = serde_json::to_value(pod).unwrap();
    v["apiVersion"] = "v1".into();
    v["kind"] = "Pod".into();
    let meta = &mut v["metadata"];
    meta["uid"] = "5f0c-uid".into();
    meta["resourceVersion"] = "4242".into();
    meta["generateName"] = "web-5d8f-".into();
    meta["annotations"] = json!({
        "kubectl.kubernetes.io/last-applied-configuration": "{\"spec\":{}}",
        "prometheus.io/scrape": "true"
    });
    meta["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "name": "web-5d8f", "uid": "rs-uid", "controller": true}]);
    meta["managedFields"] = json!([{"manager": "kube-controller-manager", "operation": "Update",
        "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}]);
    let spec = &mut v["spec"];
    spec["initContainers"] = json!([{"name": "init", "image": "busybox", "command": ["true"]}]);
    spec["volumes"] = json!([{"name": "cfg", "configMap": {"name": "cfg"}}]);
    spec["serviceAccountName"] = "default".into();
    spec["tolerations"] = json!([{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}]);
    for c in spec["containers"].as_array_mut().unwrap() {
        c["image"] = "app:1".into();
        c["env"] = json!([{"name": "LONG", "value": "x".repeat(300)}]);
        c["resources"] = json!({"requests": {"cpu": "100m", "memory": "64Mi"}});
        c["volumeMounts"] = json!([{"name": "cfg", "mountPath": "/cfg"}]);
        c["livenessProbe"] = json!({"tcpSocket": {"port": 1}});
    }
    if v.get("status").is_none() {
        v["status"] = json!({});
    }
    let status = &mut v["status"];
    status["hostIP"] = "10.128.0.9".into();
    status["qosClass"] = "Burstable".into();
    status["containerStatuses"] = json!([{"name": "app", "image": "app:1", "imageID": "sha256:0", "ready": true,
            "restartCount": 0, "state": {"running": {"startedAt": "2026-01-01T00:00:01Z"}}}]);
    let mut conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    for type_ in [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "PodScheduled",
    ] {
        conditions.push(json!({"type": type_, "status": "True",
            "lastTransitionTime": "2026-01-01T00:00:02Z"}));
    }
    status["conditions"] = conditions.into();
    v
}

/// The translation golden test's cluster with each Pod replaced by the record the store builds
/// from that Pod as served (deserialised straight from the JSON, then pruned, as the watch does).
fn from_served(bare: &ClusterSnapshot) -> ClusterSnapshot {
    let mut served = bare.clone();
    for pod in served.pods.values_mut() {
        let mut record: PodRecord = serde_json::from_value(as_served(pod)).unwrap();
        record.prune();
        *pod = Arc::new(record);
    }
    served
}

/// Every Ingress of the golden test's cluster translates the same from the store's records of
/// the served Pods as from the bare Pods, and the records keep nothing the operator does not
/// read. Fails when the record drops a field translation reads (e.g. without `readinessProbe`
/// the health checks lose their paths, without `readinessGates` or the `ContainersReady`
/// condition the not-yet-ready gated endpoints are no longer attached).
#[test]
fn translation_from_served_pod_records_is_identical() {
    let bare = snapshot_from_yaml(include_str!("testdata/features.yaml"));
    let served = from_served(&bare);
    assert!(served.pods.len() >= 3);
    let config = config();
    let mut translated = 0;
    for (key, ingress) in &bare.ingresses {
        let show = |s: &ClusterSnapshot| {
            translate_ingress(s, ingress, &config)
                .map(|d| d.to_json())
                .map_err(|e| e.to_string())
        };
        let (from_bare, from_served) = (show(&bare), show(&served));
        assert_eq!(from_served, from_bare, "{key}");
        translated += usize::from(from_bare.is_ok());
    }
    assert!(translated >= 3, "only {translated} Ingresses translated");

    for (key, record) in &served.pods {
        let meta = &record.metadata;
        assert!(meta.annotations.is_none(), "{key}: annotations kept");
        assert!(meta.managed_fields.is_none(), "{key}: managedFields kept");
        assert!(
            meta.owner_references.is_none(),
            "{key}: ownerReferences kept"
        );
        assert!(meta.generate_name.is_none(), "{key}: generateName kept");
        assert_eq!(meta.uid.as_deref(), Some("5f0c-uid"), "{key}: uid lost");
        let types: Vec<&str> = record
            .status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .map(|c| c.type_.as_str())
            .collect();
        assert!(types.iter().all(|t| reads_condition(t)), "{key}: {types:?}");
        // The record's JSON is a valid Pod holding nothing more than the record.
        let back: Pod = serde_json::from_value(serde_json::to_value(&**record).unwrap()).unwrap();
        assert!(back.spec.iter().all(|s| s.volumes.is_none()
            && s.init_containers.is_none()
            && s.containers
                .iter()
                .all(|c| c.env.is_none() && c.image.is_none())));
        assert!(back.status.iter().all(|s| s.container_statuses.is_none()));
    }
}

/// A Pod as served keeps its readiness gate, its `ContainersReady` and gate conditions, its
/// IPs and its container's probe in the record, whether read from the API's JSON directly or
/// converted from a typed `Pod` ([`PodRecord::from_pod`], the admission webhook's path).
#[test]
fn a_served_pod_keeps_what_the_operator_reads() {
    let bare: PodRecord = serde_json::from_value(json!({
        "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"},
            "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"nodeName": "node-a",
            "readinessGates": [{"conditionType": NEG_READINESS_GATE}],
            "containers": [{"name": "app", "ports": [{"name": "http", "containerPort": 8080}],
                "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 7}}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1",
            "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
            "conditions": [{"type": CONTAINERS_READY, "status": "True"},
                {"type": NEG_READINESS_GATE, "status": "False"}]}
    }))
    .unwrap();
    let served = as_served(&bare);
    let mut direct: PodRecord = serde_json::from_value(served.clone()).unwrap();
    direct.prune();
    let typed: Pod = serde_json::from_value(served).unwrap();
    let converted = PodRecord::from_pod(&typed).unwrap();
    assert_eq!(direct, converted);
    let mut expected = bare;
    expected.metadata.uid = Some("5f0c-uid".into());
    expected.metadata.resource_version = Some("4242".into());
    assert_eq!(direct, expected);
}
