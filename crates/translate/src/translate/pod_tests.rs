//! The compact [`PodRecord`] the store keeps must give translation exactly what the typed
//! `k8s_openapi` Pods it came from give. The reference is built from the typed Pods by hand
//! ([`read_by_hand`]: no serde, no pruning, every condition kept), so a field the record's serde,
//! condition filter or pruning drops (a container's `readinessProbe`, `readinessGates`, the
//! `ContainersReady` or readiness-gate condition, labels) changes the translation and fails the
//! test. The store's records are built from the same Pods as the API serves them (managed
//! fields, owner references, env, volumes, container statuses, every condition).

use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize as _;
use serde_json::{json, Value};

use super::*;
use crate::translate::test_support::{config, snapshot_from_yaml};
use crate::translate::{translate_ingress, ClusterSnapshot};

/// The golden test's cluster plus a gated Pod whose gate is already True behind a not-ready
/// endpoint (the EndpointSlice lags the gate: it stays attached, issue 40).
fn cluster_yaml() -> String {
    let extra = r#"
apiVersion: v1
kind: Pod
metadata:
  name: shop-d
  labels: {app: shop}
  creationTimestamp: "2026-03-01T00:00:00Z"
spec:
  readinessGates:
  - conditionType: cloud.google.com/load-balancer-neg-ready
  containers:
  - {name: shop, image: shop, ports: [{name: web, containerPort: 8080}]}
status:
  conditions:
  - {type: ContainersReady, status: "True"}
  - {type: cloud.google.com/load-balancer-neg-ready, status: "True"}
  - {type: Ready, status: "False"}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: shop-fghij
  labels: {kubernetes.io/service-name: shop}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- addresses: ["10.1.0.5"]
  conditions: {ready: false}
  nodeName: node-b
  zone: us-central1-b
  targetRef: {kind: Pod, name: shop-d}
"#;
    format!("{}\n---\n{extra}", include_str!("testdata/features.yaml"))
}

/// The typed Pods of `yaml` (namespace `default` when unset, as in [`snapshot_from_yaml`]).
fn typed_pods(yaml: &str) -> Vec<Pod> {
    serde_yaml::Deserializer::from_str(yaml)
        .filter_map(|document| {
            let value = serde_yaml::Value::deserialize(document).expect("valid YAML");
            let mut doc = serde_json::to_value(value).expect("YAML is JSON-compatible");
            if doc["kind"] != "Pod" {
                return None;
            }
            if doc["metadata"].get("namespace").is_none() {
                doc["metadata"]["namespace"] = "default".into();
            }
            Some(serde_json::from_value(doc).expect("a valid Pod"))
        })
        .collect()
}

/// Everything translation can read of a typed Pod, copied field by field from the typed `Pod`
/// (not through the record's serde, pruning or condition filter): the reference the record is
/// checked against. Every condition is kept.
fn read_by_hand(pod: &Pod) -> PodRecord {
    PodRecord {
        metadata: pod.metadata.clone(),
        spec: pod.spec.as_ref().map(|s| PodRecordSpec {
            node_name: s.node_name.clone(),
            readiness_gates: s.readiness_gates.clone(),
            containers: s
                .containers
                .iter()
                .map(|c| ContainerRecord {
                    name: c.name.clone(),
                    ports: c.ports.clone(),
                    readiness_probe: c.readiness_probe.clone().map(Box::new),
                })
                .collect(),
        }),
        status: pod.status.as_ref().map(|s| PodRecordStatus {
            phase: s.phase.clone(),
            conditions: s.conditions.clone(),
            pod_ip: s.pod_ip.clone(),
            pod_ips: s.pod_ips.clone(),
        }),
    }
}

/// `snapshot` with its Pods replaced by `records`.
fn with_pods(
    snapshot: &ClusterSnapshot,
    records: impl IntoIterator<Item = PodRecord>,
) -> ClusterSnapshot {
    let mut out = snapshot.clone();
    out.pods.clear();
    for record in records {
        out.insert(record);
    }
    out
}

/// `pod` as a real API server serves it: everything a ReplicaSet, the scheduler and the kubelet
/// add that the operator never reads.
fn as_served(pod: &Pod) -> Value {
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

/// Every Ingress of the cluster translates the same from the store's records of the served
/// Pods (deserialised straight from the API's JSON, then pruned, as the watch does), and from
/// the records [`PodRecord::from_pod`] makes of the typed Pods (the admission webhook's and the
/// test data's path), as from the typed Pods themselves ([`read_by_hand`]); and the records keep
/// nothing the operator does not read. Fails when the record drops a field translation reads:
/// without `readinessProbe` the health checks lose their paths, without `readinessGates` or the
/// `ContainersReady` condition the not-yet-ready gated endpoints 10.1.0.2 and 10.1.0.5 (gate
/// already True, its EndpointSlice entry lagging) are no longer attached.
#[test]
fn translation_from_served_pod_records_is_identical() {
    let yaml = cluster_yaml();
    let cluster = snapshot_from_yaml(&yaml);
    let pods = typed_pods(&yaml);
    assert!(pods.len() >= 5);
    let typed = with_pods(&cluster, pods.iter().map(read_by_hand));
    let served = with_pods(
        &cluster,
        pods.iter().map(|pod| {
            let mut record: PodRecord = serde_json::from_value(as_served(pod)).unwrap();
            record.prune();
            record
        }),
    );
    let converted = with_pods(
        &cluster,
        pods.iter().map(|pod| PodRecord::from_pod(pod).unwrap()),
    );
    let config = config();
    let mut from_typed_all = Vec::new();
    for (key, ingress) in &cluster.ingresses {
        let show = |s: &ClusterSnapshot| {
            translate_ingress(s, ingress, &config)
                .map(|d| d.to_json())
                .map_err(|e| e.to_string())
        };
        let from_typed = show(&typed);
        assert_eq!(show(&served), from_typed, "{key}: served records");
        assert_eq!(show(&converted), from_typed, "{key}: from_pod records");
        from_typed_all.extend(from_typed.ok());
    }
    assert!(
        from_typed_all.len() >= 3,
        "only {} Ingresses translated",
        from_typed_all.len()
    );
    // The cluster exercises what the Pods decide: a probe's path, a gated endpoint waiting
    // only for its gate (attached), a gated endpoint whose gate is True while its EndpointSlice
    // entry still says not ready (attached).
    let text = serde_json::to_string(&from_typed_all).unwrap();
    assert!(text.contains("\"/healthz\""), "no probe path: {text}");
    assert!(text.contains("\"10.1.0.2\""), "gated endpoint not attached");
    assert!(
        text.contains("\"10.1.0.5\""),
        "endpoint with its gate True detached while its EndpointSlice entry lags"
    );

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
/// IPs, its container's probe and its `deletionTimestamp` in the record, whether read from the API's JSON directly or
/// converted from a typed `Pod` ([`PodRecord::from_pod`], the admission webhook's path): both
/// equal what [`read_by_hand`] copies from the typed Pod.
#[test]
fn a_served_pod_keeps_what_the_operator_reads() {
    let bare: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"},
            "creationTimestamp": "2026-01-01T00:00:00Z",
            // Terminating: translation and the readiness gate leave such a Pod out.
            "deletionTimestamp": "2026-01-01T00:05:00Z"},
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
    let mut expected = read_by_hand(&bare);
    expected.metadata.uid = Some("5f0c-uid".into());
    expected.metadata.resource_version = Some("4242".into());
    assert_eq!(direct, expected);
    assert_eq!(converted, expected);
}

/// The record is a kube `Resource`: kube's metadata accessors read and write the record's own
/// metadata (`k8s_openapi::Metadata`), as the watcher's and the stores' code does.
#[test]
fn kube_writes_the_records_own_metadata() {
    use kube::{Resource, ResourceExt};
    let mut record = PodRecord::default();
    record.labels_mut().insert("app".into(), "web".into());
    record.meta_mut().name = Some("web-1".into());
    assert_eq!(record.metadata.name.as_deref(), Some("web-1"));
    assert_eq!(record.labels().get("app").map(String::as_str), Some("web"));
}
