//! PURE: whether a Pod fits a Node, as the scheduler's filter plugins and the DaemonSet
//! controller's `NodeShouldRunDaemonPod` decide it (kubernetes/kubernetes
//! `pkg/scheduler/framework/plugins/nodeaffinity`, `tainttoleration`,
//! `component-helpers/scheduling/corev1/nodeaffinity`, `pkg/controller/daemon/util`):
//! - `spec.nodeSelector`: every pair is a label of the Node;
//! - required node affinity (`requiredDuringSchedulingIgnoredDuringExecution`): one of its terms
//!   matches, a term matching when all its `matchExpressions` (on labels: `In`, `NotIn`,
//!   `Exists`, `DoesNotExist`, `Gt`, `Lt`) and `matchFields` (`metadata.name` `In`/`NotIn`)
//!   hold; DaemonSet Pods name their Node this way;
//! - taints: a `NoSchedule` or `NoExecute` taint no toleration tolerates keeps a Pod off
//!   (`PreferNoSchedule` does not);
//! - the tolerations the DaemonSet controller adds to every daemon Pod
//!   (`AddOrUpdateDaemonPodTolerations`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration,
};
use serde_json::json;

/// Whether a Node with `name` and `labels` satisfies the Pod's node selector and required node
/// affinity.
pub fn fits_node(name: &str, labels: &BTreeMap<String, String>, spec: &PodSpec) -> bool {
    let selector_ok = spec
        .node_selector
        .as_ref()
        .is_none_or(|s| s.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let terms = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.as_slice());
    // An empty list of terms matches nothing; no required affinity matches everything.
    let affinity_ok = terms.is_none_or(|terms| terms.iter().any(|t| term_matches(name, labels, t)));
    selector_ok && affinity_ok
}

fn term_matches(name: &str, labels: &BTreeMap<String, String>, term: &NodeSelectorTerm) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions
        .iter()
        .all(|r| requirement_matches(labels.get(&r.key).map(String::as_str), r))
        && fields.iter().all(|r| {
            let value = (r.key == "metadata.name").then_some(name);
            value.is_some() && requirement_matches(value, r)
        })
}

fn requirement_matches(value: Option<&str>, r: &NodeSelectorRequirement) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let number = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| values.iter().all(|x| x != v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) = (
                value.and_then(number),
                values.first().and_then(|b| number(b)),
            ) else {
                return false;
            };
            if r.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

/// `ToleratesTaint`: the toleration's key (empty with `Exists` tolerates every key), effect
/// (empty tolerates every effect) and value (`Equal`, the default, compares it) match.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect_ok = toleration
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == taint.effect);
    let key = toleration.key.as_deref().unwrap_or_default();
    let key_ok = key.is_empty() || key == taint.key;
    let value_ok = match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        _ => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
    };
    let exists = toleration.operator.as_deref() == Some("Exists");
    effect_ok && key_ok && (!key.is_empty() || exists) && value_ok
}

/// The Node's taints of `effect` that none of `tolerations` tolerates.
pub fn untolerated<'a>(node: &'a Node, tolerations: &[Toleration], effect: &str) -> Vec<&'a Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
        .iter()
        .filter(|t| t.effect == effect)
        .filter(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
        .collect()
}

/// `AddOrUpdateDaemonPodTolerations`: daemon Pods tolerate a Node that is not ready,
/// unreachable, under disk, memory or PID pressure, or cordoned (`unschedulable`), and, with
/// `hostNetwork`, one whose network is unavailable. Adds those missing to `spec`.
pub fn add_daemon_tolerations(spec: &mut PodSpec) {
    let mut wanted = vec![
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if spec.host_network == Some(true) {
        wanted.push(("node.kubernetes.io/network-unavailable", "NoSchedule"));
    }
    let list = spec.tolerations.get_or_insert_with(Vec::new);
    for (key, effect) in wanted {
        let present = list
            .iter()
            .any(|t| t.key.as_deref() == Some(key) && t.effect.as_deref() == Some(effect));
        if !present {
            list.push(Toleration {
                key: Some(key.to_string()),
                operator: Some("Exists".to_string()),
                effect: Some(effect.to_string()),
                ..Toleration::default()
            });
        }
    }
}

/// `ReplaceDaemonSetPodNodeNameNodeAffinity`: the Pod's required node affinity becomes the one
/// term `metadata.name In [node]` (other affinity kinds are kept), so the scheduler binds it to
/// that Node.
pub fn pin_to_node(spec: &mut PodSpec, node: &str) {
    let term =
        json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]});
    let affinity = spec.affinity.get_or_insert_with(Default::default);
    let node_affinity = affinity.node_affinity.get_or_insert_with(Default::default);
    node_affinity.required_during_scheduling_ignored_during_execution =
        serde_json::from_value(json!({"nodeSelectorTerms": [term]})).ok();
}

/// The Node a Pod is bound to (`spec.nodeName`) or pinned to by [`pin_to_node`]'s affinity.
pub fn target_node(spec: &PodSpec) -> Option<String> {
    if let Some(name) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Some(name.to_string());
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    let [term] = terms.as_slice() else {
        return None;
    };
    let fields = term.match_fields.as_deref()?;
    fields
        .iter()
        .find(|r| r.key == "metadata.name" && r.operator == "In")
        .and_then(|r| match r.values.as_deref() {
            Some([one]) => Some(one.clone()),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v: serde_json::Value) -> PodSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn selector_and_required_affinity_both_must_hold() {
        let labels: BTreeMap<String, String> = [
            ("zone".to_string(), "a".to_string()),
            ("cpu".to_string(), "8".to_string()),
        ]
        .into();
        let s = spec(json!({"containers": [], "nodeSelector": {"zone": "a"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "cpu", "operator": "Gt", "values": ["16"]}]},
                    {"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}],
                     "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}}));
        assert!(fits_node("n1", &labels, &s));
        assert!(
            !fits_node("n2", &labels, &s),
            "matchFields names another Node"
        );
        let other_zone: BTreeMap<String, String> = [("zone".to_string(), "b".to_string())].into();
        assert!(!fits_node("n1", &other_zone, &s), "nodeSelector");
        assert!(fits_node("n9", &labels, &spec(json!({"containers": []}))));
        let mut pinned = spec(json!({"containers": []}));
        pin_to_node(&mut pinned, "n2");
        assert_eq!(target_node(&pinned).as_deref(), Some("n2"));
        assert!(fits_node("n2", &labels, &pinned) && !fits_node("n1", &labels, &pinned));
    }

    #[test]
    fn taints_keep_pods_off_unless_tolerated() {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n"},
            "spec": {"taints": [
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                {"key": "dedicated", "value": "db", "effect": "NoExecute"},
                {"key": "soft", "effect": "PreferNoSchedule"}]}}))
        .unwrap();
        let mut s = spec(json!({"containers": []}));
        assert_eq!(untolerated(&node, &[], "NoSchedule").len(), 1);
        add_daemon_tolerations(&mut s);
        let tolerations = s.tolerations.clone().unwrap();
        assert!(
            untolerated(&node, &tolerations, "NoSchedule").is_empty(),
            "cordoned Nodes run daemons"
        );
        assert_eq!(untolerated(&node, &tolerations, "NoExecute").len(), 1);
        let db: Toleration =
            serde_json::from_value(json!({"key": "dedicated", "operator": "Equal", "value": "db"}))
                .unwrap();
        assert!(untolerated(&node, &[db], "NoExecute").is_empty());
        let wrong: Toleration =
            serde_json::from_value(json!({"key": "dedicated", "value": "web"})).unwrap();
        assert_eq!(untolerated(&node, &[wrong], "NoExecute").len(), 1);
        add_daemon_tolerations(&mut s);
        assert_eq!(s.tolerations.unwrap().len(), 6, "added once");
    }
}
