//! End to end through the real binary and kubectl: Deployments get their ReplicaSets and Pods
//! from the local Deployment and ReplicaSet controllers, every Pod runs with no annotation and
//! answers as its image does, and `kubectl rollout status|history|undo|pause|resume`,
//! `set image`, `scale`, `get -o wide` and cascading deletes behave as on a real cluster.

mod local_support;

use std::process::{Command, Stdio};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use local_support::{eventually, http, pod_ip, LocalCluster};

const HELLO: &str = "us-docker.pkg.dev/google-samples/containers/gke/hello-app";

/// GKE's Ingress tutorial's Deployment (docs "Set up an external Application Load Balancer
/// with Ingress"), with `replicas` and a strategy line.
fn web(replicas: u32, image_tag: &str, strategy: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\nspec:\n  replicas: {replicas}\n{strategy}  selector:\n    matchLabels:\n      run: web\n  template:\n    metadata:\n      labels:\n        run: web\n    spec:\n      containers:\n      - image: {HELLO}:{image_tag}\n        imagePullPolicy: IfNotPresent\n        name: web\n        ports:\n        - containerPort: 8080\n          protocol: TCP\n"
    )
}

fn kubectl(cluster: &LocalCluster, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().expect("kubectl output");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn kubectl_ok(cluster: &LocalCluster, args: &[&str], stdin: Option<&str>) -> String {
    let (ok, out, err) = kubectl(cluster, args, stdin);
    assert!(ok, "kubectl {args:?} failed: {err}\n{out}");
    out
}

fn rollout_status(cluster: &LocalCluster, name: &str) -> String {
    kubectl_ok(
        cluster,
        &[
            "rollout",
            "status",
            &format!("deployment/{name}"),
            "--timeout=90s",
        ],
        None,
    )
}

/// The Pods of Deployment `web` that are not terminating.
async fn web_pods(cluster: &LocalCluster) -> anyhow::Result<Vec<Pod>> {
    let pods = cluster.pods("default");
    Ok(pods
        .list(&ListParams::default().labels("run=web"))
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect())
}

/// Waits until exactly `count` live `web` Pods answer `Version: {version}` with their own
/// names, as hello-app does.
async fn every_replica_answers(cluster: &LocalCluster, count: usize, version: &str) {
    let http = http();
    eventually(&format!("{count} replicas answering {version}"), || async {
        let pods = web_pods(cluster).await?;
        if pods.len() != count {
            return Ok(None);
        }
        for pod in &pods {
            let Some(ip) = pod_ip(pod) else {
                return Ok(None);
            };
            let body = http
                .get(format!("http://{ip}:8080/"))
                .send()
                .await?
                .text()
                .await?;
            let want = format!(
                "Hello, world!\nVersion: {version}\nHostname: {}\n",
                pod.name_any()
            );
            if body != want {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await;
}

fn owned_by<'a>(sets: &'a [ReplicaSet], deployment: &Deployment) -> Vec<&'a ReplicaSet> {
    sets.iter()
        .filter(|rs| {
            rs.owner_references()
                .iter()
                .any(|r| Some(&r.uid) == deployment.metadata.uid.as_ref())
        })
        .collect()
}

fn revision(rs: &ReplicaSet) -> String {
    rs.annotations()
        .get("deployment.kubernetes.io/revision")
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn gke_tutorial_deployment_becomes_available_and_every_replica_answers() -> anyhow::Result<()>
{
    let cluster = LocalCluster::start_with(&["--nodes", "us-central1-a,us-central1-b"]).await?;
    kubectl_ok(&cluster, &["apply", "-f", "-"], Some(&web(2, "1.0", "")));
    let out = rollout_status(&cluster, "web");
    assert!(out.contains("successfully rolled out"), "{out}");
    every_replica_answers(&cluster, 2, "1.0.0").await;

    let deployments: Api<Deployment> = Api::default_namespaced(cluster.client.clone());
    let d = deployments.get("web").await?;
    let sets: Api<ReplicaSet> = Api::default_namespaced(cluster.client.clone());
    let all = sets.list(&ListParams::default()).await?.items;
    let owned = owned_by(&all, &d);
    assert_eq!(owned.len(), 1, "one ReplicaSet per template");
    let rs = owned[0];
    let hash = rs.labels()["pod-template-hash"].clone();
    assert_eq!(rs.name_any(), format!("web-{hash}"));
    assert_eq!(revision(rs), "1");
    assert_eq!(
        d.annotations().get("deployment.kubernetes.io/revision"),
        Some(&"1".to_string())
    );
    let pods = web_pods(&cluster).await?;
    let nodes: std::collections::BTreeSet<String> = pods
        .iter()
        .map(|p| {
            p.spec
                .as_ref()
                .unwrap()
                .node_name
                .clone()
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(
        nodes.len(),
        2,
        "the two replicas are spread over both zones' Nodes"
    );
    for pod in &pods {
        assert!(
            pod.name_any().starts_with(&format!("web-{hash}-")),
            "{}",
            pod.name_any()
        );
        assert_eq!(pod.labels()["pod-template-hash"], hash);
    }
    let status = d.status.clone().unwrap_or_default();
    let conditions = status.conditions.unwrap_or_default();
    let condition = |t: &str| conditions.iter().find(|c| c.type_ == t).cloned().unwrap();
    assert_eq!(condition("Available").status, "True");
    assert_eq!(
        condition("Progressing").reason.as_deref(),
        Some("NewReplicaSetAvailable")
    );

    // Printer columns as a real server prints them.
    let rs_table = kubectl_ok(&cluster, &["get", "rs", "-o", "wide"], None);
    let mut lines = rs_table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(row[..4], [rs.name_any().as_str(), "2", "2", "2"]);
    assert_eq!(
        row[5..].join(" "),
        format!("web {HELLO}:1.0 pod-template-hash={hash},run=web")
    );
    let d_table = kubectl_ok(&cluster, &["get", "deploy", "-o", "wide"], None);
    let mut lines = d_table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(row[..4], ["web", "2/2", "2", "2"]);
    Ok(())
}

#[tokio::test]
async fn set_image_scale_history_undo_pause_and_resume_work_as_on_a_cluster() -> anyhow::Result<()>
{
    let cluster = LocalCluster::start().await?;
    let strategy = "  strategy:\n    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}\n";
    kubectl_ok(
        &cluster,
        &["apply", "-f", "-"],
        Some(&web(2, "1.0", strategy)),
    );
    rollout_status(&cluster, "web");
    every_replica_answers(&cluster, 2, "1.0.0").await;
    let deployments: Api<Deployment> = Api::default_namespaced(cluster.client.clone());
    let sets: Api<ReplicaSet> = Api::default_namespaced(cluster.client.clone());
    let first = owned_by(
        &sets.list(&ListParams::default()).await?.items,
        &deployments.get("web").await?,
    )[0]
    .name_any();

    kubectl_ok(
        &cluster,
        &[
            "set",
            "image",
            "deployment/web",
            &format!("web={HELLO}:2.0"),
        ],
        None,
    );
    rollout_status(&cluster, "web");
    every_replica_answers(&cluster, 2, "2.0.0").await;
    let history = kubectl_ok(&cluster, &["rollout", "history", "deployment/web"], None);
    let revisions: Vec<&str> = history
        .lines()
        .skip_while(|l| !l.starts_with("REVISION"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(revisions, ["1", "2"], "{history}");
    let d = deployments.get("web").await?;
    let all = sets.list(&ListParams::default()).await?.items;
    let owned = owned_by(&all, &d);
    assert_eq!(owned.len(), 2);
    let old = owned.iter().find(|rs| rs.name_any() == first).unwrap();
    assert_eq!(
        old.spec.as_ref().unwrap().replicas,
        Some(0),
        "old ReplicaSet scaled to zero"
    );

    kubectl_ok(&cluster, &["rollout", "undo", "deployment/web"], None);
    rollout_status(&cluster, "web");
    every_replica_answers(&cluster, 2, "1.0.0").await;
    let all = sets.list(&ListParams::default()).await?.items;
    let back = all.iter().find(|rs| rs.name_any() == first).unwrap();
    assert_eq!(
        revision(back),
        "3",
        "undo makes the old ReplicaSet the newest revision"
    );
    assert_eq!(
        back.annotations()
            .get("deployment.kubernetes.io/revision-history"),
        Some(&"1".to_string())
    );

    kubectl_ok(&cluster, &["scale", "deployment/web", "--replicas=3"], None);
    rollout_status(&cluster, "web");
    every_replica_answers(&cluster, 3, "1.0.0").await;
    let scale = kubectl_ok(
        &cluster,
        &[
            "get",
            "deployment/web",
            "--subresource=scale",
            "-o",
            "jsonpath={.spec.replicas}/{.status.replicas}",
        ],
        None,
    );
    assert_eq!(scale, "3/3");

    kubectl_ok(&cluster, &["rollout", "pause", "deployment/web"], None);
    kubectl_ok(
        &cluster,
        &[
            "set",
            "image",
            "deployment/web",
            &format!("web={HELLO}:2.0"),
        ],
        None,
    );
    eventually("the paused condition", || async {
        let d = deployments.get("web").await?;
        let paused = d
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Progressing" && c.reason.as_deref() == Some("DeploymentPaused"));
        Ok(paused.then_some(()))
    })
    .await;
    every_replica_answers(&cluster, 3, "1.0.0").await;
    kubectl_ok(&cluster, &["rollout", "resume", "deployment/web"], None);
    rollout_status(&cluster, "web");
    every_replica_answers(&cluster, 3, "2.0.0").await;

    kubectl_ok(&cluster, &["rollout", "restart", "deployment/web"], None);
    rollout_status(&cluster, "web");
    let d = deployments.get("web").await?;
    assert_eq!(
        d.annotations().get("deployment.kubernetes.io/revision"),
        Some(&"5".to_string())
    );
    every_replica_answers(&cluster, 3, "2.0.0").await;
    Ok(())
}

#[tokio::test]
async fn cascading_deletes_follow_the_propagation_policy() -> anyhow::Result<()> {
    let cluster = LocalCluster::start().await?;
    for name in ["bg", "fg", "orphan"] {
        // A short grace period: the deletions wait for the Pods to stop.
        let manifest = web(1, "1.0", "")
            .replace(
                "    spec:\n      containers:",
                "    spec:\n      terminationGracePeriodSeconds: 1\n      containers:",
            )
            .replace("name: web\n", &format!("name: {name}\n"))
            .replace("run: web", &format!("run: {name}"));
        kubectl_ok(&cluster, &["apply", "-f", "-"], Some(&manifest));
    }
    for name in ["bg", "fg", "orphan"] {
        rollout_status(&cluster, name);
    }
    let sets: Api<ReplicaSet> = Api::default_namespaced(cluster.client.clone());
    let pods = cluster.pods("default");
    let of = |name: &str| ListParams::default().labels(&format!("run={name}"));

    kubectl_ok(
        &cluster,
        &["delete", "deployment", "bg", "--timeout=90s"],
        None,
    );
    eventually(
        "background: the ReplicaSet and Pod go after the Deployment",
        || async {
            let left =
                sets.list(&of("bg")).await?.items.len() + pods.list(&of("bg")).await?.items.len();
            Ok((left == 0).then_some(()))
        },
    )
    .await;

    // kubectl waits for the Deployment to be gone; in the foreground it goes last.
    kubectl_ok(
        &cluster,
        &[
            "delete",
            "deployment",
            "fg",
            "--cascade=foreground",
            "--timeout=90s",
        ],
        None,
    );
    assert!(
        sets.list(&of("fg")).await?.items.is_empty(),
        "foreground: the ReplicaSet is gone before its Deployment"
    );
    assert!(
        pods.list(&of("fg")).await?.items.is_empty(),
        "foreground: the Pod is gone before its ReplicaSet"
    );

    kubectl_ok(
        &cluster,
        &[
            "delete",
            "deployment",
            "orphan",
            "--cascade=orphan",
            "--timeout=90s",
        ],
        None,
    );
    let kept = sets.list(&of("orphan")).await?.items;
    assert_eq!(kept.len(), 1, "orphan: the ReplicaSet stays");
    assert!(
        kept[0].owner_references().is_empty(),
        "and no longer names its owner"
    );
    let running = pods.list(&of("orphan")).await?.items;
    assert_eq!(running.len(), 1);
    assert!(running[0].metadata.deletion_timestamp.is_none());

    // A controller's object whose owner is already gone is collected.
    let dangling = r#"{"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "dangling",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "gone",
            "uid": "no-such-uid", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"run": "dangling"}},
            "template": {"metadata": {"labels": {"run": "dangling"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]}}}}"#;
    kubectl_ok(&cluster, &["create", "-f", "-"], Some(dangling));
    eventually("the ReplicaSet of a deleted owner collected", || async {
        Ok(sets.get_opt("dangling").await?.is_none().then_some(()))
    })
    .await;
    Ok(())
}
