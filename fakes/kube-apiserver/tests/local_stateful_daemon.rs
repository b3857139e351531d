//! End to end through the real binary and kubectl: StatefulSets get their ordered, stably named
//! Pods and DaemonSets one Pod per Node from the local StatefulSet and DaemonSet controllers;
//! `kubectl rollout status`, `set image`, `scale`, cascading deletes and `get -o wide` behave as
//! on a real cluster (kubernetes `pkg/controller/statefulset`, `pkg/controller/daemon`; kubectl's
//! `StatefulSetStatusViewer` and `DaemonSetStatusViewer`).

mod local_support;

use k8s_openapi::api::apps::v1::{DaemonSet, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use local_support::{
    condition, eventually, kubectl_ok, record_pods, rollout_status, LocalCluster, Seen,
};

const HELLO: &str = "us-docker.pkg.dev/google-samples/containers/gke/hello-app";

/// A StatefulSet `name` of hello-app Pods labelled `app: {name}`, with `extra` spec lines
/// (two-space indented).
fn sts(name: &str, replicas: u32, extra: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  replicas: {replicas}\n  serviceName: {name}\n{extra}  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n      labels:\n        app: {name}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: web\n        image: {HELLO}:1.0\n        ports:\n        - containerPort: 8080\n"
    )
}

/// A DaemonSet `agent` of hello-app Pods with `extra` template spec lines (six-space indented)
/// and `strategy` spec lines.
fn ds(strategy: &str, extra: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent\n  namespace: default\nspec:\n{strategy}  selector:\n    matchLabels:\n      app: agent\n  template:\n    metadata:\n      labels:\n        app: agent\n    spec:\n      terminationGracePeriodSeconds: 1\n{extra}      containers:\n      - name: agent\n        image: {HELLO}:1.0\n"
    )
}

/// The index of the first record of `name` satisfying `f`.
fn first(seen: &[Seen], name: &str, f: impl Fn(&Seen) -> bool) -> Option<usize> {
    seen.iter().position(|s| s.name == name && f(s))
}

async fn live_pods(cluster: &LocalCluster, selector: &str) -> anyhow::Result<Vec<Pod>> {
    let pods = cluster.pods("default");
    Ok(pods
        .list(&ListParams::default().labels(selector))
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect())
}

fn label(pod: &Pod, key: &str) -> String {
    pod.labels().get(key).cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_ready_creates_up_scales_down_from_the_top_and_rolls_in_reverse(
) -> anyhow::Result<()> {
    let cluster = LocalCluster::start().await?;
    let seen = record_pods(&cluster, "app=web").await;
    kubectl_ok(&cluster, &["apply", "-f", "-"], Some(&sts("web", 3, "")));
    let out = rollout_status(&cluster, "statefulset/web");
    assert!(
        out.contains("partitioned roll out complete: 3 new pods have been updated"),
        "{out}"
    );
    {
        let seen = seen.lock().unwrap().clone();
        for n in 1..3 {
            let created = first(&seen, &format!("web-{n}"), |_| true).unwrap();
            let before_ready = first(&seen, &format!("web-{}", n - 1), |s| s.ready).unwrap();
            assert!(
                before_ready < created,
                "web-{n} created only once web-{} is Ready: {seen:?}",
                n - 1
            );
        }
    }
    let sets: Api<StatefulSet> = Api::default_namespaced(cluster.client.clone());
    let web = sets.get("web").await?;
    let status = web.status.clone().unwrap();
    let revision = status.update_revision.clone().unwrap();
    assert!(revision.starts_with("web-"), "{revision}");
    assert_eq!(status.current_revision.as_deref(), Some(revision.as_str()));
    assert_eq!(
        (
            status.replicas,
            status.ready_replicas,
            status.current_replicas,
            status.updated_replicas
        ),
        (3, Some(3), Some(3), Some(3))
    );
    assert_eq!(status.available_replicas, Some(3));
    assert_eq!(status.observed_generation, web.metadata.generation);
    for pod in live_pods(&cluster, "app=web").await? {
        let name = pod.name_any();
        assert_eq!(label(&pod, "statefulset.kubernetes.io/pod-name"), name);
        assert_eq!(
            label(&pod, "apps.kubernetes.io/pod-index"),
            name.trim_start_matches("web-")
        );
        assert_eq!(label(&pod, "controller-revision-hash"), revision);
        let owner = &pod.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("StatefulSet", Some(true))
        );
        assert_eq!(owner.uid, web.uid().unwrap());
        let spec = pod.spec.unwrap();
        assert_eq!(
            (spec.hostname, spec.subdomain),
            (Some(name), Some("web".to_string()))
        );
    }

    // Scale down: the highest ordinal goes first, and the next only once it is gone.
    seen.lock().unwrap().clear();
    kubectl_ok(
        &cluster,
        &["scale", "statefulset", "web", "--replicas=1"],
        None,
    );
    eventually("web scaled to 1", || async {
        let names: Vec<String> = cluster
            .pods("default")
            .list(&ListParams::default().labels("app=web"))
            .await?
            .items
            .iter()
            .map(|p| p.name_any())
            .collect();
        Ok((names == ["web-0"]).then_some(()))
    })
    .await;
    {
        let seen = seen.lock().unwrap().clone();
        let web2_gone = first(&seen, "web-2", |s| s.deleted).unwrap();
        let web1_terminating = first(&seen, "web-1", |s| s.terminating).unwrap();
        assert!(
            web2_gone < web1_terminating,
            "web-1 deleted after web-2 is gone: {seen:?}"
        );
        assert!(first(&seen, "web-0", |s| s.terminating).is_none());
    }

    // Rolling update: reverse ordinal order, one at a time.
    kubectl_ok(
        &cluster,
        &["scale", "statefulset", "web", "--replicas=3"],
        None,
    );
    rollout_status(&cluster, "statefulset/web");
    seen.lock().unwrap().clear();
    kubectl_ok(
        &cluster,
        &[
            "set",
            "image",
            "statefulset/web",
            &format!("web={HELLO}:2.0"),
        ],
        None,
    );
    let out = rollout_status(&cluster, "statefulset/web");
    assert!(out.contains("partitioned roll out complete"), "{out}");
    let web = sets.get("web").await?;
    let status = web.status.unwrap();
    let updated = status.update_revision.unwrap();
    assert_ne!(updated, revision);
    assert_eq!(status.current_revision.as_deref(), Some(updated.as_str()));
    {
        let seen = seen.lock().unwrap().clone();
        let order: Vec<usize> = ["web-2", "web-1", "web-0"]
            .iter()
            .map(|n| first(&seen, n, |s| s.terminating).unwrap())
            .collect();
        assert!(
            order.windows(2).all(|w| w[0] < w[1]),
            "reverse ordinal order: {seen:?}"
        );
        let web2_ready_again = seen
            .iter()
            .skip(order[0])
            .position(|s| s.name == "web-2" && s.ready && !s.terminating)
            .map(|i| i + order[0])
            .unwrap();
        assert!(
            web2_ready_again < order[1],
            "web-1 waits for the new web-2: {seen:?}"
        );
    }
    for pod in live_pods(&cluster, "app=web").await? {
        assert_eq!(label(&pod, "controller-revision-hash"), updated);
        assert_eq!(
            pod.spec.unwrap().containers[0].image.as_deref(),
            Some(format!("{HELLO}:2.0").as_str())
        );
    }
    let history = kubectl_ok(&cluster, &["rollout", "history", "statefulset/web"], None);
    assert!(
        history.lines().any(|l| l.trim().starts_with('2')),
        "{history}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_on_delete_and_parallel_management() -> anyhow::Result<()> {
    let cluster = LocalCluster::start().await?;
    let partitioned =
        "  updateStrategy:\n    type: RollingUpdate\n    rollingUpdate:\n      partition: 2\n";
    kubectl_ok(
        &cluster,
        &["apply", "-f", "-"],
        Some(&sts("db", 3, partitioned)),
    );
    rollout_status(&cluster, "statefulset/db");
    let sets: Api<StatefulSet> = Api::default_namespaced(cluster.client.clone());
    let old = sets
        .get("db")
        .await?
        .status
        .unwrap()
        .update_revision
        .unwrap();
    kubectl_ok(
        &cluster,
        &[
            "set",
            "image",
            "statefulset/db",
            &format!("web={HELLO}:2.0"),
        ],
        None,
    );
    let out = rollout_status(&cluster, "statefulset/db");
    assert!(
        out.contains("partitioned roll out complete: 1 new pods have been updated"),
        "{out}"
    );
    let status = sets.get("db").await?.status.unwrap();
    let new = status.update_revision.unwrap();
    assert_ne!(new, old);
    assert_eq!(
        status.current_revision.as_deref(),
        Some(old.as_str()),
        "not every Pod is updated"
    );
    assert_eq!(
        (status.current_replicas, status.updated_replicas),
        (Some(2), Some(1))
    );
    let revisions = |pods: Vec<Pod>| {
        let mut v: Vec<(String, String)> = pods
            .iter()
            .map(|p| (p.name_any(), label(p, "controller-revision-hash")))
            .collect();
        v.sort();
        v
    };
    let want = vec![
        ("db-0".to_string(), old.clone()),
        ("db-1".to_string(), old.clone()),
        ("db-2".to_string(), new.clone()),
    ];
    assert_eq!(revisions(live_pods(&cluster, "app=db").await?), want);
    // A Pod below the partition is re-created at the current revision.
    let uid = cluster.pods("default").get("db-0").await?.uid();
    kubectl_ok(&cluster, &["delete", "pod", "db-0"], None);
    eventually("db-0 re-created", || async {
        let pod = cluster.pods("default").get_opt("db-0").await?;
        Ok(pod
            .filter(|p| p.uid() != uid && condition(p, "Ready").as_deref() == Some("True"))
            .map(|p| label(&p, "controller-revision-hash")))
    })
    .await;
    assert_eq!(revisions(live_pods(&cluster, "app=db").await?), want);

    // OnDelete: nothing moves until a Pod is deleted, which comes back at the update revision.
    let on_delete = r#"{"spec":{"updateStrategy":{"type":"OnDelete","rollingUpdate":null}}}"#;
    kubectl_ok(
        &cluster,
        &[
            "patch",
            "statefulset",
            "db",
            "--type=merge",
            "-p",
            on_delete,
        ],
        None,
    );
    kubectl_ok(&cluster, &["delete", "pod", "db-1"], None);
    let recreated = eventually("db-1 re-created at the update revision", || async {
        let pod = cluster.pods("default").get_opt("db-1").await?;
        Ok(pod
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| label(&p, "controller-revision-hash")))
    })
    .await;
    assert_eq!(recreated, new);
    let pods = revisions(live_pods(&cluster, "app=db").await?);
    assert_eq!(
        pods[0],
        ("db-0".to_string(), old.clone()),
        "db-0 is left alone"
    );

    // Parallel: every Pod is created at once, Ready or not (none ever is here).
    let never_ready = sts("par", 3, "  podManagementPolicy: Parallel\n").replace(
        "        ports:\n",
        "        readinessProbe:\n          tcpSocket:\n            port: 9\n        ports:\n",
    );
    kubectl_ok(&cluster, &["apply", "-f", "-"], Some(&never_ready));
    eventually("three Parallel Pods, none Ready", || async {
        let pods = live_pods(&cluster, "app=par").await?;
        Ok((pods.len() == 3).then_some(()))
    })
    .await;
    let status = sets.get("par").await?.status.unwrap_or_default();
    assert_eq!(status.ready_replicas.unwrap_or(0), 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_set_runs_one_pod_per_node_and_rolls_within_max_unavailable() -> anyhow::Result<()> {
    let zones = "us-central1-a,us-central1-b,us-central1-c";
    let cluster = LocalCluster::start_with(&["--nodes", zones]).await?;
    let seen = record_pods(&cluster, "app=agent").await;
    kubectl_ok(&cluster, &["apply", "-f", "-"], Some(&ds("", "")));
    let out = rollout_status(&cluster, "daemonset/agent");
    assert!(
        out.contains("daemon set \"agent\" successfully rolled out"),
        "{out}"
    );
    let nodes_of = |pods: &[Pod]| {
        let mut n: Vec<String> = pods
            .iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        n.sort();
        n
    };
    let pods = live_pods(&cluster, "app=agent").await?;
    assert_eq!(
        nodes_of(&pods),
        ["local-node-1", "local-node-2", "local-node-3"]
    );
    for pod in &pods {
        let spec = pod.spec.clone().unwrap();
        let term = spec
            .affinity
            .unwrap()
            .node_affinity
            .unwrap()
            .required_during_scheduling_ignored_during_execution
            .unwrap()
            .node_selector_terms;
        let field = &term[0].match_fields.as_ref().unwrap()[0];
        assert_eq!(
            (field.key.as_str(), field.values.clone().unwrap()),
            ("metadata.name", vec![spec.node_name.unwrap()])
        );
        assert_eq!(pod.owner_references()[0].kind, "DaemonSet");
    }
    let sets: Api<DaemonSet> = Api::default_namespaced(cluster.client.clone());
    let status = sets.get("agent").await?.status.unwrap();
    assert_eq!(
        (
            status.desired_number_scheduled,
            status.current_number_scheduled,
            status.number_ready,
            status.number_available,
            status.updated_number_scheduled,
            status.number_misscheduled
        ),
        (3, 3, 3, Some(3), Some(3), 0)
    );

    // Rolling update, maxUnavailable 1: never more than one Node without a Ready Pod.
    let before: Vec<String> = pods.iter().map(|p| p.name_any()).collect();
    seen.lock().unwrap().clear();
    kubectl_ok(
        &cluster,
        &[
            "set",
            "image",
            "daemonset/agent",
            &format!("agent={HELLO}:2.0"),
        ],
        None,
    );
    let out = rollout_status(&cluster, "daemonset/agent");
    assert!(out.contains("successfully rolled out"), "{out}");
    {
        let seen = seen.lock().unwrap().clone();
        // Every Pod Ready at the start; track Ready live Pods by name.
        let mut ready: std::collections::BTreeMap<&str, bool> =
            before.iter().map(|n| (n.as_str(), true)).collect();
        let mut worst = 0;
        for s in seen.iter() {
            ready.insert(&s.name, s.ready && !s.terminating && !s.deleted);
            worst = worst.max(3usize.saturating_sub(ready.values().filter(|r| **r).count()));
        }
        assert_eq!(worst, 1, "one Node at a time lacks a Ready Pod: {seen:?}");
    }
    let pods = live_pods(&cluster, "app=agent").await?;
    assert_eq!(nodes_of(&pods).len(), 3);
    assert!(pods
        .iter()
        .all(|p| p.spec.as_ref().unwrap().containers[0].image.as_deref()
            == Some(format!("{HELLO}:2.0").as_str())));

    // A nodeSelector narrows it to one zone's Node; the others' Pods go.
    let pin = r#"{"spec":{"template":{"spec":{"nodeSelector":{"topology.kubernetes.io/zone":"us-central1-b"}}}}}"#;
    kubectl_ok(
        &cluster,
        &["patch", "daemonset", "agent", "--type=merge", "-p", pin],
        None,
    );
    rollout_status(&cluster, "daemonset/agent");
    eventually("only local-node-2 runs agent", || async {
        let pods = cluster
            .pods("default")
            .list(&ListParams::default().labels("app=agent"))
            .await?
            .items;
        Ok((nodes_of(&pods) == ["local-node-2"]).then_some(()))
    })
    .await;
    let status = sets.get("agent").await?.status.unwrap();
    assert_eq!(
        (
            status.desired_number_scheduled,
            status.current_number_scheduled
        ),
        (1, 1)
    );

    // Printer columns as a real server's.
    kubectl_ok(&cluster, &["apply", "-f", "-"], Some(&sts("web", 1, "")));
    rollout_status(&cluster, "statefulset/web");
    let table = kubectl_ok(&cluster, &["get", "sts,ds", "-o", "wide"], None);
    let blocks: Vec<&str> = table.split("\n\n").collect();
    assert_eq!(blocks.len(), 2, "{table}");
    let rows = |block: &str| -> Vec<Vec<String>> {
        block
            .lines()
            .map(|l| l.split_whitespace().map(String::from).collect())
            .collect()
    };
    let sts_rows = rows(blocks[0]);
    assert_eq!(
        sts_rows[0],
        ["NAME", "READY", "AGE", "CONTAINERS", "IMAGES"]
    );
    assert_eq!(sts_rows[1][..2], ["statefulset.apps/web", "1/1"]);
    assert_eq!(
        sts_rows[1][3..],
        ["web".to_string(), format!("{HELLO}:1.0")]
    );
    let ds_rows = rows(blocks[1]);
    assert_eq!(
        ds_rows[0],
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "NODE",
            "SELECTOR",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    assert_eq!(
        ds_rows[1][..7],
        [
            "daemonset.apps/agent",
            "1",
            "1",
            "1",
            "1",
            "1",
            "topology.kubernetes.io/zone=us-central1-b"
        ]
    );
    assert_eq!(
        ds_rows[1][8..],
        [
            "agent".to_string(),
            format!("{HELLO}:2.0"),
            "app=agent".to_string()
        ]
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_stateful_set_cascades_or_orphans_its_pods() -> anyhow::Result<()> {
    let cluster = LocalCluster::start().await?;
    kubectl_ok(&cluster, &["apply", "-f", "-"], Some(&sts("gone", 2, "")));
    kubectl_ok(&cluster, &["apply", "-f", "-"], Some(&sts("kept", 2, "")));
    rollout_status(&cluster, "statefulset/gone");
    rollout_status(&cluster, "statefulset/kept");
    kubectl_ok(&cluster, &["delete", "statefulset", "gone"], None);
    eventually("the Pods of a deleted StatefulSet go", || async {
        let left = cluster
            .pods("default")
            .list(&ListParams::default().labels("app=gone"))
            .await?;
        Ok(left.items.is_empty().then_some(()))
    })
    .await;
    kubectl_ok(
        &cluster,
        &["delete", "statefulset", "kept", "--cascade=orphan"],
        None,
    );
    let pods = live_pods(&cluster, "app=kept").await?;
    assert_eq!(pods.len(), 2, "orphaned Pods stay");
    assert!(
        pods.iter().all(|p| p.owner_references().is_empty()),
        "and name no owner"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_set_adopts_matching_orphans_and_releases_pods_that_stop_matching(
) -> anyhow::Result<()> {
    let cluster = LocalCluster::start().await?;
    let stray = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: stray\n  labels:\n    app: adopt\nspec:\n  containers:\n  - name: web\n    image: {HELLO}:1.0\n"
    );
    kubectl_ok(&cluster, &["apply", "-f", "-"], Some(&stray));
    let rs = format!(
        "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata:\n  name: adopt\nspec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: adopt\n  template:\n    metadata:\n      labels:\n        app: adopt\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: web\n        image: {HELLO}:1.0\n"
    );
    kubectl_ok(&cluster, &["apply", "-f", "-"], Some(&rs));
    let sets: Api<k8s_openapi::api::apps::v1::ReplicaSet> =
        Api::default_namespaced(cluster.client.clone());
    let uid = sets.get("adopt").await?.uid().unwrap();
    let controlled_by_rs = |p: &Pod| {
        p.owner_references()
            .iter()
            .any(|r| r.uid == uid && r.controller == Some(true))
    };
    let pods = cluster.pods("default");
    eventually("the orphan adopted", || async {
        Ok(pods.get("stray").await.ok().filter(controlled_by_rs))
    })
    .await;
    eventually("two Pods in all: the orphan and one created", || async {
        let live = live_pods(&cluster, "app=adopt").await?;
        let status = sets.get("adopt").await?.status.unwrap_or_default();
        Ok(
            (live.len() == 2 && live.iter().all(controlled_by_rs) && status.replicas == 2)
                .then_some(()),
        )
    })
    .await;

    // A Pod relabelled out of the selector is released, and replaced.
    kubectl_ok(
        &cluster,
        &["label", "pod", "stray", "app=gone", "--overwrite"],
        None,
    );
    eventually("the relabelled Pod released", || async {
        let pod = pods.get("stray").await?;
        Ok(pod.owner_references().is_empty().then_some(()))
    })
    .await;
    eventually("a replacement created", || async {
        let live = live_pods(&cluster, "app=adopt").await?;
        Ok((live.len() == 2 && live.iter().all(|p| p.name_any() != "stray")).then_some(()))
    })
    .await;
    Ok(())
}
