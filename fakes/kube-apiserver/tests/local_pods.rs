//! End to end through the real binary: opted-in Pods run as echo servers on loopback Pod IPs,
//! the local kubelet computes readiness (probes AND readiness gates), and the EndpointSlice
//! controller mirrors it; deletion goes through Terminating.

mod local_support;

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::Api;
use local_support::*;
use serde_json::json;

const GATE: &str = "cloud.google.com/load-balancer-neg-ready";

fn service(name: &str) -> Service {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}
    }))
    .unwrap()
}

fn pod(name: &str, app: &str, extra: serde_json::Value) -> Pod {
    let mut value = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}, "annotations": {"local.gclb-operator.dev/run": "echo"}},
        "spec": {
            "containers": [{
                "name": "app",
                "image": "echo",
                "ports": [{"name": "http", "containerPort": 8080}],
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1, "failureThreshold": 1}
            }]
        }
    });
    json_patch::merge(&mut value, &extra);
    serde_json::from_value(value).unwrap()
}

async fn annotate(pods: &Api<Pod>, name: &str, key: &str, value: Option<&str>) {
    let patch = json!({"metadata": {"annotations": {key: value}}});
    pods.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("annotating Pod");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_slices_follow_pod_readiness_and_echo_servers_answer() {
    let cluster = LocalCluster::start().await.expect("server starts");
    let services: Api<Service> = Api::namespaced(cluster.client.clone(), "default");
    let pods = cluster.pods("default");
    services
        .create(&PostParams::default(), &service("web"))
        .await
        .unwrap();
    for name in ["web-a", "web-b"] {
        pods.create(&PostParams::default(), &pod(name, "web", json!({})))
            .await
            .unwrap();
    }

    let slices = eventually("both endpoints ready", || async {
        let slices = cluster.slices_of("default", "web").await?;
        let a = endpoint_conditions(&slices, "web-a");
        let b = endpoint_conditions(&slices, "web-b");
        Ok((a == Some((true, true, false)) && b == Some((true, true, false))).then_some(slices))
    })
    .await;
    let slice = &slices[0];
    let labels = slice.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("endpointslice.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("endpointslice-controller.k8s.io")
    );
    assert_eq!(slice.address_type, "IPv4");
    let port = &slice.ports.as_ref().expect("slice ports")[0];
    assert_eq!(
        (port.name.as_deref(), port.port),
        (Some("http"), Some(8080))
    );
    let owner = &slice.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Service", "web")
    );

    // Each echo server answers at its own Pod IP, naming its Pod.
    let http = http();
    let mut ips = Vec::new();
    for name in ["web-a", "web-b"] {
        let p = pods.get(name).await.unwrap();
        let ip = pod_ip(&p).expect("Pod IP");
        assert!(ip.starts_with("127."), "{ip}");
        assert_eq!(
            p.spec.as_ref().and_then(|s| s.node_name.as_deref()),
            Some("local-node-1")
        );
        let endpoint_address = slices
            .iter()
            .flat_map(|s| &s.endpoints)
            .find(|e| e.target_ref.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .map(|e| e.addresses[0].clone());
        assert_eq!(endpoint_address.as_deref(), Some(ip.as_str()));
        let response = http
            .get(format!("http://{ip}:8080/hello"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.headers()["x-pod-name"], name);
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(
            (
                body["pod"].as_str(),
                body["path"].as_str(),
                body["podIP"].as_str()
            ),
            (Some(name), Some("/hello"), Some(ip.as_str()))
        );
        ips.push(ip);
    }
    assert_ne!(ips[0], ips[1], "Pod IPs are unique");

    // Failing web-a's probe path makes it not ready; web-b stays ready.
    annotate(
        &pods,
        "web-a",
        "local.gclb-operator.dev/fail-paths",
        Some("/healthz"),
    )
    .await;
    eventually("web-a not ready", || async {
        let slices = cluster.slices_of("default", "web").await?;
        let a = endpoint_conditions(&slices, "web-a");
        Ok((a == Some((false, false, false))
            && endpoint_conditions(&slices, "web-b") == Some((true, true, false)))
        .then_some(()))
    })
    .await;
    let a = pods.get("web-a").await.unwrap();
    assert_eq!(condition(&a, "Ready").as_deref(), Some("False"));
    assert_eq!(condition(&a, "ContainersReady").as_deref(), Some("False"));
    // The kubelet says why, as an Event on the Pod.
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(cluster.client.clone(), "default");
    let note = eventually("an Unhealthy Event for web-a", || async {
        let list = events.list(&Default::default()).await?;
        Ok(list.items.into_iter().find_map(|e| {
            let about_a = e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("web-a");
            (about_a && e.reason.as_deref() == Some("Unhealthy"))
                .then(|| e.note.unwrap_or_default())
        }))
    })
    .await;
    assert!(
        note.contains("Readiness probe failed") && note.contains("500"),
        "{note}"
    );
    let failing = http
        .get(format!("http://{}:8080/healthz", ips[0]))
        .send()
        .await
        .unwrap();
    assert_eq!(failing.status().as_u16(), 500);

    // And it recovers when the control is removed.
    annotate(&pods, "web-a", "local.gclb-operator.dev/fail-paths", None).await;
    eventually("web-a ready again", || async {
        let slices = cluster.slices_of("default", "web").await?;
        Ok((endpoint_conditions(&slices, "web-a") == Some((true, true, false))).then_some(()))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_gate_holds_ready_until_its_condition_is_true() {
    let cluster = LocalCluster::start().await.expect("server starts");
    let pods = cluster.pods("default");
    let gated = pod(
        "gated",
        "gated",
        json!({"spec": {"readinessGates": [{"conditionType": GATE}]}}),
    );
    pods.create(&PostParams::default(), &gated).await.unwrap();

    eventually("containers ready, Pod not Ready", || async {
        let p = pods.get("gated").await?;
        Ok((condition(&p, "ContainersReady").as_deref() == Some("True")
            && condition(&p, "Ready").as_deref() == Some("False"))
        .then_some(()))
    })
    .await;

    // The readiness-gate controller's write: a strategic merge patch of status.conditions.
    let gate_true = json!({"status": {"conditions": [{"type": GATE, "status": "True", "reason": "LoadBalancerNegReady"}]}});
    pods.patch_status(
        "gated",
        &PatchParams::default(),
        &Patch::Strategic(gate_true),
    )
    .await
    .unwrap();
    eventually("Ready follows the gate", || async {
        let p = pods.get("gated").await?;
        Ok((condition(&p, "Ready").as_deref() == Some("True")).then_some(()))
    })
    .await;

    // Later kubelet writes keep the gate condition: fail the probe, Ready drops, gate stays.
    annotate(
        &pods,
        "gated",
        "local.gclb-operator.dev/fail-paths",
        Some("/healthz"),
    )
    .await;
    let p = eventually("Ready drops with the probe", || async {
        let p = pods.get("gated").await?;
        Ok((condition(&p, "Ready").as_deref() == Some("False")).then_some(p))
    })
    .await;
    assert_eq!(
        condition(&p, GATE).as_deref(),
        Some("True"),
        "the kubelet must not drop the gate condition"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_pod_shows_terminating_then_removes_it() {
    let cluster = LocalCluster::start().await.expect("server starts");
    let services: Api<Service> = Api::namespaced(cluster.client.clone(), "default");
    let pods = cluster.pods("default");
    services
        .create(&PostParams::default(), &service("drain"))
        .await
        .unwrap();
    pods.create(
        &PostParams::default(),
        &pod(
            "drain-a",
            "drain",
            json!({"spec": {"terminationGracePeriodSeconds": 4}}),
        ),
    )
    .await
    .unwrap();
    eventually("endpoint ready", || async {
        let slices = cluster.slices_of("default", "drain").await?;
        Ok((endpoint_conditions(&slices, "drain-a") == Some((true, true, false))).then_some(()))
    })
    .await;
    let ip = pod_ip(&pods.get("drain-a").await.unwrap()).unwrap();

    pods.delete("drain-a", &DeleteParams::default())
        .await
        .unwrap();
    eventually("endpoint terminating but serving", || async {
        let slices = cluster.slices_of("default", "drain").await?;
        Ok((endpoint_conditions(&slices, "drain-a") == Some((false, true, true))).then_some(()))
    })
    .await;
    // Still serving during the grace period.
    let response = http()
        .get(format!("http://{ip}:8080/"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);

    eventually("Pod gone", || async {
        Ok(pods.get_opt("drain-a").await?.is_none().then_some(()))
    })
    .await;
    eventually("endpoint removed", || async {
        let slices = cluster.slices_of("default", "drain").await?;
        Ok(endpoint_conditions(&slices, "drain-a")
            .is_none()
            .then_some(()))
    })
    .await;
    assert!(
        http()
            .get(format!("http://{ip}:8080/"))
            .send()
            .await
            .is_err(),
        "server stopped with the Pod"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_backend_pod_serves_gke_default_backend() {
    let cluster = LocalCluster::start().await.expect("server starts");
    let pods = cluster.pods("kube-system");
    let backend = pod(
        "default-http-backend",
        "glbc",
        json!({"metadata": {"annotations": {"local.gclb-operator.dev/run": "default-backend"}},
               "spec": {"containers": [{"name": "app", "image": "default-backend", "ports": [{"containerPort": 8080}]}]}}),
    );
    pods.create(&PostParams::default(), &backend).await.unwrap();
    let ip = eventually("Pod IP", || async {
        Ok(pod_ip(&pods.get("default-http-backend").await?))
    })
    .await;
    let http = http();
    let miss = eventually("default backend answers", || {
        let http = http.clone();
        let ip = ip.clone();
        async move {
            Ok(http
                .get(format!("http://{ip}:8080/missing"))
                .send()
                .await
                .ok())
        }
    })
    .await;
    assert_eq!(miss.status().as_u16(), 404);
    assert_eq!(miss.text().await.unwrap(), "default backend - 404");
    let health = http
        .get(format!("http://{ip}:8080/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        (health.status().as_u16(), health.text().await.unwrap()),
        (200, "ok".to_string())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_on_sigterm_ends_the_pod_after_pre_stop_not_the_grace_period() {
    let cluster = LocalCluster::start().await.expect("server starts");
    let pods = cluster.pods("default");
    // A 10-minute grace period: the Pod can only be gone within the poll deadline if the
    // application exits after its preStop hook, as `on-sigterm: exit` asks.
    let quick = pod(
        "quick",
        "quick",
        json!({
            "metadata": {"annotations": {"local.gclb-operator.dev/on-sigterm": "exit"}},
            "spec": {
                "terminationGracePeriodSeconds": 600,
                "containers": [{
                    "name": "app",
                    "image": "echo",
                    "ports": [{"name": "http", "containerPort": 8080}],
                    "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep 1"]}}}
                }]
            }
        }),
    );
    pods.create(&PostParams::default(), &quick).await.unwrap();
    eventually("Pod ready", || async {
        let p = pods.get("quick").await?;
        Ok((condition(&p, "Ready").as_deref() == Some("True")).then_some(()))
    })
    .await;
    pods.delete("quick", &DeleteParams::default())
        .await
        .unwrap();
    let terminating = pods.get("quick").await.unwrap();
    assert!(
        terminating.metadata.deletion_timestamp.is_some(),
        "graceful deletion first"
    );
    eventually("Pod gone after preStop", || async {
        Ok(pods.get_opt("quick").await?.is_none().then_some(()))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_keeps_local_pod_ips() {
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path().join("state.json");
    let state_arg = state.to_str().unwrap();
    let first = LocalCluster::start_with(&["--state-file", state_arg])
        .await
        .expect("server starts");
    let pods = first.pods("default");
    pods.create(&PostParams::default(), &pod("keep", "keep", json!({})))
        .await
        .unwrap();
    let ip = eventually("Pod IP", || async { Ok(pod_ip(&pods.get("keep").await?)) }).await;
    eventually("state file holds the Pod IP", || async {
        Ok(std::fs::read_to_string(&state)
            .ok()
            .filter(|s| s.contains(&ip))
            .map(|_| ()))
    })
    .await;
    drop(first);

    let second = LocalCluster::start_with(&["--state-file", state_arg])
        .await
        .expect("server restarts");
    let pods = second.pods("default");
    eventually("the same Pod IP serving again", || {
        let ip = ip.clone();
        let pods = pods.clone();
        async move {
            let p = pods.get("keep").await?;
            let running_again =
                condition(&p, "Ready").as_deref() == Some("True") && pod_ip(&p) == Some(ip.clone());
            let answered = http().get(format!("http://{ip}:8080/")).send().await.ok();
            Ok((running_again
                && answered
                    .is_some_and(|r| r.headers().get("x-pod-name").is_some_and(|v| v == "keep")))
            .then_some(()))
        }
    })
    .await;
}
