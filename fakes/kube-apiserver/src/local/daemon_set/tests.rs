//! Unit cases of the DaemonSet controller's pure parts (upstream `daemon_controller_test.go`
//! and `util/daemonset_util_test.go` cases, ported).

use super::*;

fn ds(extra: serde_json::Value) -> DaemonSet {
    let mut v = json!({
        "metadata": {"name": "agent", "namespace": "kube-system", "uid": "u1", "generation": 2},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                "spec": {"nodeSelector": {"pool": "default"},
                    "containers": [{"name": "agent", "image": "agnhost:2.52"}]}}},
    });
    if let (Some(spec), Some(extra)) = (v["spec"].as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    serde_json::from_value(v).unwrap()
}

fn revision(d: &DaemonSet) -> Revision {
    Revision {
        name: "agent-5f6d".into(),
        hash: "5f6d".into(),
        number: 1,
        template: d.spec.clone().unwrap().template,
    }
}

fn node(name: &str, pool: &str, taints: serde_json::Value) -> Arc<Node> {
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"pool": pool}},
            "spec": {"taints": taints}}))
        .unwrap(),
    )
}

fn daemon_pod(d: &DaemonSet, rev: &Revision, on: &str, ready: bool) -> Arc<Pod> {
    let mut pod = pod_for(d, rev, on);
    pod.metadata.name = Some(format!("agent-{on}"));
    pod.status = serde_json::from_value(json!({"phase": "Running", "conditions": [
        {"type": "Ready", "status": if ready { "True" } else { "False" },
         "lastTransitionTime": "2020-01-01T00:00:00Z"}]}))
    .unwrap();
    Arc::new(pod)
}

#[test]
fn pods_are_pinned_to_their_node_tolerate_and_carry_the_revision() {
    let d = ds(json!({}));
    let pod = pod_for(&d, &revision(&d), "n2");
    assert_eq!(pod.metadata.generate_name.as_deref(), Some("agent-"));
    let labels = pod.metadata.labels.clone().unwrap();
    assert_eq!(labels[CONTROLLER_REVISION_HASH], "5f6d");
    assert_eq!(labels[POD_TEMPLATE_GENERATION], "2");
    let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("DaemonSet", Some(true))
    );
    let spec = pod.spec.unwrap();
    assert_eq!(node_fit::target_node(&spec).as_deref(), Some("n2"));
    assert_eq!(spec.node_name, None, "the scheduler binds it");
    assert_eq!(spec.tolerations.unwrap().len(), 6);
}

#[test]
fn nodes_run_the_daemon_by_selector_and_taints() {
    let d = ds(json!({}));
    let rev = revision(&d);
    let check = |n: &Node| should_run(n, &pod_for(&d, &rev, &n.name_any()));
    assert_eq!(check(&node("a", "default", json!([]))), (true, true));
    assert_eq!(
        check(&node("b", "gpu", json!([]))),
        (false, false),
        "nodeSelector"
    );
    let cordoned = json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]);
    assert_eq!(
        check(&node("c", "default", cordoned)),
        (true, true),
        "daemons run on cordoned Nodes"
    );
    let dedicated = json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]);
    assert_eq!(
        check(&node("d", "default", dedicated)),
        (false, true),
        "NoSchedule keeps running Pods"
    );
    let evict = json!([{"key": "dedicated", "value": "db", "effect": "NoExecute"}]);
    assert_eq!(check(&node("e", "default", evict)), (false, false));
}

#[test]
fn max_unavailable_scales_up_and_is_at_least_one() {
    assert_eq!(max_unavailable(&ds(json!({})), 5), 1);
    let pct = |p: &str| {
        ds(
            json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": p}}}),
        )
    };
    assert_eq!(max_unavailable(&pct("30%"), 5), 2);
    assert_eq!(max_unavailable(&pct("0%"), 5), 1);
    assert_eq!(max_unavailable(&pct("100%"), 3), 3);
}

#[test]
fn status_counts_desired_current_ready_updated_and_misscheduled() {
    let d = ds(json!({}));
    let rev = revision(&d);
    let old = Revision {
        hash: "old".into(),
        ..rev.clone()
    };
    let nodes = [
        node("a", "default", json!([])),
        node("b", "default", json!([])),
        node("c", "default", json!([])),
        node("g", "gpu", json!([])),
    ];
    let pods = [
        daemon_pod(&d, &rev, "a", true),
        daemon_pod(&d, &old, "b", false),
        daemon_pod(&d, &rev, "g", true),
    ];
    let (s, _) = status_of(&d, &nodes, &pods, &rev);
    assert_eq!(
        s,
        json!({"desiredNumberScheduled": 3, "currentNumberScheduled": 2,
        "numberMisscheduled": 1, "numberReady": 1, "numberAvailable": 1,
        "numberUnavailable": 2, "updatedNumberScheduled": 1, "observedGeneration": 2})
    );
}
