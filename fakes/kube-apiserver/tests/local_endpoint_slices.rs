//! End to end through the real binary: the local EndpointSlice controller follows selection
//! changes, resolves named targetPorts per Pod, cleans up after a deleted Service, and does not
//! write when nothing relevant changed.

mod local_support;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::Api;
use local_support::*;
use serde_json::json;

fn pod(name: &str, app: &str, port: i32, opted_in: bool) -> Pod {
    let annotations = if opted_in {
        json!({"local.gclb-operator.dev/run": "echo"})
    } else {
        json!({"local.gclb-operator.dev/run": "none"})
    };
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}, "annotations": annotations},
        "spec": {"containers": [{
            "name": "app",
            "image": "echo",
            "ports": [{"name": "http", "containerPort": port}],
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1, "failureThreshold": 1}
        }]}
    }))
    .unwrap()
}

fn service(name: &str) -> Service {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [
            {"name": "http", "port": 80, "targetPort": "http"},
            {"name": "metrics", "port": 9090, "targetPort": 9090}
        ]}
    }))
    .unwrap()
}

/// `(port of the "http" slice port, endpoint Pod names)` per slice, sorted.
fn layout(slices: &[EndpointSlice]) -> Vec<(Option<i32>, Vec<String>)> {
    let mut out: Vec<(Option<i32>, Vec<String>)> = slices
        .iter()
        .map(|s| {
            let http = s
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some("http"))
                .and_then(|p| p.port);
            let mut pods: Vec<String> = s
                .endpoints
                .iter()
                .filter_map(|e| e.target_ref.as_ref()?.name.clone())
                .collect();
            pods.sort();
            (http, pods)
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slices_follow_named_ports_selection_changes_and_service_deletion() {
    let cluster = LocalCluster::start().await.expect("server starts");
    let services: Api<Service> = Api::namespaced(cluster.client.clone(), "default");
    let pods = cluster.pods("default");
    services
        .create(&PostParams::default(), &service("shop"))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("shop-a", "shop", 8080, true))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("shop-b", "shop", 8081, true))
        .await
        .unwrap();
    // Opted out of the local kubelet: never gets an IP, so never an endpoint.
    pods.create(&PostParams::default(), &pod("shop-c", "shop", 8080, false))
        .await
        .unwrap();

    let expected = vec![
        (Some(8080), vec!["shop-a".to_string()]),
        (Some(8081), vec!["shop-b".to_string()]),
    ];
    eventually("one slice per resolved port", || async {
        let slices = cluster.slices_of("default", "shop").await?;
        let ready = slices
            .iter()
            .flat_map(|s| &s.endpoints)
            .all(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true));
        Ok((layout(&slices) == expected && ready).then_some(()))
    })
    .await;
    let slices = cluster.slices_of("default", "shop").await.unwrap();
    for slice in &slices {
        let metrics = slice
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some("metrics"))
            .and_then(|p| p.port);
        assert_eq!(metrics, Some(9090), "numeric targetPort is used as is");
    }

    // shop-b leaves the selection: its endpoint goes.
    let relabel = json!({"metadata": {"labels": {"app": "elsewhere"}}});
    pods.patch("shop-b", &PatchParams::default(), &Patch::Merge(relabel))
        .await
        .unwrap();
    eventually("shop-b removed", || async {
        let slices = cluster.slices_of("default", "shop").await?;
        Ok((layout(&slices) == vec![(Some(8080), vec!["shop-a".to_string()])]).then_some(()))
    })
    .await;

    // The Service goes: so do its slices.
    services
        .delete("shop", &DeleteParams::default())
        .await
        .unwrap();
    eventually("slices deleted with the Service", || async {
        Ok(cluster
            .slices_of("default", "shop")
            .await?
            .is_empty()
            .then_some(()))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_irrelevant_pod_change_writes_no_slice() {
    let cluster = LocalCluster::start().await.expect("server starts");
    let services: Api<Service> = Api::namespaced(cluster.client.clone(), "default");
    let pods = cluster.pods("default");
    services
        .create(&PostParams::default(), &service("calm"))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("calm-a", "calm", 8080, true))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &pod("calm-b", "calm", 8080, true))
        .await
        .unwrap();
    eventually("both ready", || async {
        let slices = cluster.slices_of("default", "calm").await?;
        Ok(
            (endpoint_conditions(&slices, "calm-a") == Some((true, true, false))
                && endpoint_conditions(&slices, "calm-b") == Some((true, true, false)))
            .then_some(()),
        )
    })
    .await;

    let slices_api: Api<EndpointSlice> = Api::namespaced(cluster.client.clone(), "default");
    let listed = slices_api
        .list(&kube::api::ListParams::default().labels("kubernetes.io/service-name=calm"))
        .await
        .unwrap();
    let from = listed.metadata.resource_version.clone().unwrap();
    let params = WatchParams::default()
        .labels("kubernetes.io/service-name=calm")
        .timeout(60);
    let mut changes = slices_api.watch(&params, &from).await.unwrap().boxed();

    // First a change the slices do not depend on, then one they do.
    let note = json!({"metadata": {"annotations": {"note": "irrelevant"}}});
    pods.patch("calm-a", &PatchParams::default(), &Patch::Merge(note))
        .await
        .unwrap();
    let fail =
        json!({"metadata": {"annotations": {"local.gclb-operator.dev/fail-paths": "/healthz"}}});
    pods.patch("calm-b", &PatchParams::default(), &Patch::Merge(fail))
        .await
        .unwrap();

    let mut writes = 0;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let event = tokio::time::timeout_at(deadline, changes.try_next())
            .await
            .expect("calm-b turned not ready within 60 s")
            .expect("watch")
            .expect("watch open");
        match event {
            WatchEvent::Added(s) | WatchEvent::Modified(s) | WatchEvent::Deleted(s) => {
                writes += 1;
                if endpoint_conditions(&[s], "calm-b") == Some((false, false, false)) {
                    break;
                }
            }
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("watch error {e:?}"),
        }
    }
    assert_eq!(
        writes, 1,
        "only the readiness change of calm-b may write the slice"
    );
}
