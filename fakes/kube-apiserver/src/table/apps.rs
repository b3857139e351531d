//! The Table columns and cells of the apps/v1 workloads, as `kubectl get deploy,rs,sts,ds
//! [-o wide]` prints them (kubernetes/pkg/printers/internalversion `printDeployment`,
//! `printReplicaSet`, `printStatefulSet`, `printDaemonSet`, `printControllerRevision`):
//! - Deployment: READY `ready/desired`, UP-TO-DATE, AVAILABLE, AGE; wide CONTAINERS, IMAGES,
//!   SELECTOR.
//! - ReplicaSet: DESIRED, CURRENT, READY, AGE; wide CONTAINERS, IMAGES, SELECTOR.
//! - StatefulSet: READY `ready/desired`, AGE; wide CONTAINERS, IMAGES.
//! - DaemonSet: DESIRED, CURRENT, READY, UP-TO-DATE, AVAILABLE, NODE SELECTOR, AGE; wide
//!   CONTAINERS, IMAGES, SELECTOR.
//! - ControllerRevision: CONTROLLER `kind.group/name`, REVISION, AGE.

use serde_json::{json, Value};

use super::columns::{age_col, col};
use crate::meta::age;

/// Swagger descriptions kube-apiserver gives the apps/v1 columns (the printers' `Description`:
/// the API fields' documentation).
mod doc {
    pub const READY: &str = "Number of the pod with ready state";
    pub const CONTAINERS: &str = "Names of each container in the template.";
    pub const IMAGES: &str = "Images referenced by each container in the template.";
    pub const DEPLOY_UPDATED: &str = "Total number of non-terminated pods targeted by this deployment that have the desired template spec.";
    pub const DEPLOY_AVAILABLE: &str = "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.";
    pub const DEPLOY_SELECTOR: &str = "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.";
    pub const RS_DESIRED: &str = "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller";
    pub const RS_CURRENT: &str = "Replicas is the most recently oberved number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller";
    pub const RS_READY: &str = "The number of ready replicas for this replica set.";
    pub const RS_SELECTOR: &str = "Selector is a label query over pods that should match the replica count. If the selector is empty, it is defaulted to the labels present on the pod template. Label keys and values that must match in order to be controlled by this replica set. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
    pub const DS_DESIRED: &str = "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/";
    pub const DS_CURRENT: &str = "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/";
    pub const DS_READY: &str = "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.";
    pub const DS_UPDATED: &str = "The total number of nodes that are running updated daemon pod";
    pub const DS_AVAILABLE: &str = "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)";
    pub const DS_NODE_SELECTOR: &str = "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/";
    pub const DS_SELECTOR: &str = "A label query over pods that are managed by the daemon set. Must match in order to be controlled. If empty, defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
}

/// Columns after Name for the apps/v1 storage key `storage`; `None` for other kinds. Types as
/// kube-apiserver declares them (a Deployment's UP-TO-DATE and AVAILABLE are `string`).
pub fn columns(storage: &str) -> Option<Vec<Value>> {
    let s = |n: &str, d: &str| col(n, "string", "", 0, d);
    let int = |n: &str, d: &str| col(n, "integer", "", 0, d);
    let wide = |n: &str, d: &str| col(n, "string", "", 1, d);
    let pod_template = || {
        [
            wide("Containers", doc::CONTAINERS),
            wide("Images", doc::IMAGES),
        ]
    };
    Some(match storage {
        "apps/deployments" => {
            let mut c = vec![
                s("Ready", doc::READY),
                s("Up-to-date", doc::DEPLOY_UPDATED),
                s("Available", doc::DEPLOY_AVAILABLE),
                age_col(),
            ];
            c.extend(pod_template());
            c.push(wide("Selector", doc::DEPLOY_SELECTOR));
            c
        }
        "apps/replicasets" => {
            let mut c = vec![
                int("Desired", doc::RS_DESIRED),
                int("Current", doc::RS_CURRENT),
                int("Ready", doc::RS_READY),
                age_col(),
            ];
            c.extend(pod_template());
            c.push(wide("Selector", doc::RS_SELECTOR));
            c
        }
        "apps/statefulsets" => {
            let mut c = vec![s("Ready", doc::READY), age_col()];
            c.extend(pod_template());
            c
        }
        "apps/daemonsets" => {
            let mut c = vec![
                int("Desired", doc::DS_DESIRED),
                int("Current", doc::DS_CURRENT),
                int("Ready", doc::DS_READY),
                int("Up-to-date", doc::DS_UPDATED),
                int("Available", doc::DS_AVAILABLE),
                s("Node Selector", doc::DS_NODE_SELECTOR),
                age_col(),
            ];
            c.extend(pod_template());
            c.push(wide("Selector", doc::DS_SELECTOR));
            c
        }
        "apps/controllerrevisions" => vec![s("Controller", ""), int("Revision", ""), age_col()],
        _ => return None,
    })
}

/// Cells after the name for the apps/v1 storage key `storage`; `None` for other kinds.
pub fn cells(storage: &str, o: &Value) -> Option<Vec<Value>> {
    let st = &o["status"];
    let n = |v: &Value| json!(v.as_i64().unwrap_or(0));
    let desired = o["spec"]["replicas"].as_i64().unwrap_or(1);
    let (names, images) = containers(o);
    let selector = json!(format_label_selector(&o["spec"]["selector"]));
    Some(match storage {
        "apps/deployments" => vec![
            json!(format!(
                "{}/{desired}",
                st["readyReplicas"].as_i64().unwrap_or(0)
            )),
            n(&st["updatedReplicas"]),
            n(&st["availableReplicas"]),
            json!(age(o)),
            names,
            images,
            selector,
        ],
        "apps/replicasets" => vec![
            json!(desired),
            n(&st["replicas"]),
            n(&st["readyReplicas"]),
            json!(age(o)),
            names,
            images,
            selector,
        ],
        "apps/statefulsets" => vec![
            json!(format!(
                "{}/{desired}",
                st["readyReplicas"].as_i64().unwrap_or(0)
            )),
            json!(age(o)),
            names,
            images,
        ],
        "apps/daemonsets" => vec![
            n(&st["desiredNumberScheduled"]),
            n(&st["currentNumberScheduled"]),
            n(&st["numberReady"]),
            n(&st["updatedNumberScheduled"]),
            n(&st["numberAvailable"]),
            json!(format_labels(
                &o["spec"]["template"]["spec"]["nodeSelector"]
            )),
            json!(age(o)),
            names,
            images,
            selector,
        ],
        "apps/controllerrevisions" => {
            let owner = o["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|r| r["controller"] == true);
            let controller = owner.map_or("<none>".to_string(), |r| {
                let group = r["apiVersion"]
                    .as_str()
                    .and_then(|v| v.rsplit_once('/'))
                    .map(|(g, _)| format!(".{g}"))
                    .unwrap_or_default();
                format!(
                    "{}{group}/{}",
                    r["kind"].as_str().unwrap_or_default().to_lowercase(),
                    r["name"].as_str().unwrap_or_default()
                )
            });
            vec![json!(controller), n(&o["revision"]), json!(age(o))]
        }
        _ => return None,
    })
}

/// The CONTAINERS and IMAGES cells: the template's container names and images, comma-joined.
fn containers(o: &Value) -> (Value, Value) {
    let list = o["spec"]["template"]["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let field = |f: &str| {
        list.iter()
            .map(|c| c[f].as_str().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    (json!(field("name")), json!(field("image")))
}

/// `labels.FormatLabels`: `k=v` pairs in key order, comma-joined; `<none>` when empty.
pub fn format_labels(labels: &Value) -> String {
    let pairs: Vec<String> = labels
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

/// `metav1.FormatLabelSelector`: a LabelSelector as its string form (`app=web,tier in
/// (a,b),!legacy`), requirements sorted by key; `<none>` for an empty or missing selector.
pub fn format_label_selector(selector: &Value) -> String {
    let mut reqs: Vec<(String, String)> = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), format!("{k}={}", v.as_str().unwrap_or_default())))
        .collect();
    for e in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = e["key"].as_str().unwrap_or_default().to_string();
        let mut values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let text = match e["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other}"),
        };
        reqs.push((key, text));
    }
    reqs.sort();
    if reqs.is_empty() {
        "<none>".into()
    } else {
        reqs.into_iter()
            .map(|(_, t)| t)
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_set_row_is_desired_current_ready_age_then_wide() {
        let rs = json!({
            "metadata": {"name": "web-5d9c7b", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web", "pod-template-hash": "5d9c7b"}},
                "template": {"spec": {"containers": [{"name": "hello", "image": "hello-app:1.0"}, {"name": "side", "image": "envoy"}]}}},
            "status": {"replicas": 2, "readyReplicas": 1}
        });
        let cells = cells("apps/replicasets", &rs).unwrap();
        assert_eq!(cells[0..3], [json!(3), json!(2), json!(1)]);
        assert_eq!(cells[4], json!("hello,side"));
        assert_eq!(cells[5], json!("hello-app:1.0,envoy"));
        assert_eq!(cells[6], json!("app=web,pod-template-hash=5d9c7b"));
        let cols = columns("apps/replicasets").unwrap();
        assert_eq!(cols.len(), cells.len());
        let names: Vec<&str> = cols.iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "Desired",
                "Current",
                "Ready",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
    }

    #[test]
    fn every_kind_has_as_many_cells_as_columns() {
        let o = json!({"metadata": {"name": "x"}, "spec": {}, "status": {}});
        for storage in [
            "apps/deployments",
            "apps/replicasets",
            "apps/statefulsets",
            "apps/daemonsets",
            "apps/controllerrevisions",
        ] {
            assert_eq!(
                columns(storage).unwrap().len(),
                cells(storage, &o).unwrap().len(),
                "{storage}"
            );
        }
        assert!(columns("/pods").is_none() && cells("/pods", &o).is_none());
    }

    #[test]
    fn selectors_print_as_kubectl_prints_them() {
        let s = json!({"matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web", "api"]},
                {"key": "legacy", "operator": "DoesNotExist"}]});
        assert_eq!(
            format_label_selector(&s),
            "a=1,b=2,!legacy,tier in (api,web)"
        );
        assert_eq!(format_label_selector(&Value::Null), "<none>");
        assert_eq!(format_labels(&json!({})), "<none>");
    }
}
