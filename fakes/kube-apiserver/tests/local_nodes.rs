//! End to end through the real binary: the local kubelet registers its Nodes across zones
//! (`--nodes`), keeps their Leases renewed, schedules opted-in Pods onto them (nodeSelector,
//! round-robin) with Pod IPs from each Node's Pod CIDR, and the EndpointSlice controller gives
//! every endpoint its Node's zone. A Node created later with the run annotation is served; a
//! deleted Node's Pods are deleted.

mod local_support;

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{DeleteParams, PostParams};
use kube::Api;
use local_support::*;
use serde_json::json;

const ZONES: &str = "us-central1-a,us-central1-b,us-central1-c";
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

fn pod(name: &str, selector: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}, "annotations": {"local.gclb-operator.dev/run": "echo"}},
        "spec": {
            "nodeSelector": selector,
            "containers": [{"name": "app", "image": "echo", "ports": [{"name": "http", "containerPort": 8080}]}]
        }
    }))
    .unwrap()
}

/// Whether `ip` lies in the /24 `cidr`.
fn in_slash_24(ip: &str, cidr: &str) -> bool {
    let prefix = cidr.trim_end_matches("0/24");
    cidr.ends_with(".0/24") && ip.starts_with(prefix)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_span_zones_and_pods_and_endpoints_follow_them() {
    let cluster = LocalCluster::start_with(&["--nodes", ZONES, "--project", "p1"])
        .await
        .expect("server starts");
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let listed = eventually("three Ready Nodes", || async {
        let list = nodes.list(&Default::default()).await?.items;
        let ready = list.iter().all(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        });
        Ok((list.len() == 3 && ready).then_some(list))
    })
    .await;
    let mut cidrs = BTreeMap::new();
    for (node, zone) in listed.iter().zip(ZONES.split(',')) {
        let name = node.metadata.name.clone().unwrap();
        let labels = node.metadata.labels.clone().unwrap();
        assert_eq!(labels.get(ZONE_LABEL).map(String::as_str), Some(zone));
        assert_eq!(
            labels
                .get("failure-domain.beta.kubernetes.io/region")
                .map(String::as_str),
            Some("us-central1")
        );
        let spec = node.spec.clone().unwrap();
        assert_eq!(
            spec.provider_id.as_deref(),
            Some(format!("gce://p1/{zone}/{name}").as_str())
        );
        let cidr = spec.pod_cidr.unwrap();
        assert!(in_slash_24(
            &format!("{}1", cidr.trim_end_matches("0/24")),
            &cidr
        ));
        let ip = node.status.as_ref().unwrap().addresses.as_ref().unwrap()[0].clone();
        assert_eq!(ip.type_, "InternalIP");
        cidrs.insert(name, (cidr, ip.address, zone.to_string()));
    }
    assert_eq!(
        cidrs
            .values()
            .map(|c| &c.0)
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        3,
        "distinct Pod CIDRs: {cidrs:?}"
    );

    // kubectl shows them with their zones.
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(["get", "nodes", "-o", "wide", "-L", ZONE_LABEL])
        .output()
        .expect("kubectl runs");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{table}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        table.lines().next().unwrap().contains("INTERNAL-IP"),
        "{table}"
    );
    for (name, (_, ip, zone)) in &cidrs {
        assert!(
            table.lines().any(|l| l.starts_with(name.as_str())
                && l.contains(" Ready ")
                && l.contains(ip.as_str())
                && l.trim_end().ends_with(zone.as_str())),
            "{name} {ip} {zone} missing from:\n{table}"
        );
    }

    // Heartbeats: each Node's Lease is renewed.
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), "kube-node-lease");
    let first = eventually("the Lease of local-node-1", || async {
        Ok(leases.get_opt("local-node-1").await?)
    })
    .await;
    let spec = first.spec.clone().unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("local-node-1"));
    assert_eq!(spec.lease_duration_seconds, Some(40));
    let renewed = spec.renew_time.clone().unwrap();
    eventually("the Lease renewed", || async {
        let now = leases.get("local-node-1").await?;
        Ok((now.spec.and_then(|s| s.renew_time) != Some(renewed.clone())).then_some(()))
    })
    .await;

    // Pods: pinned by zone, or round-robin; IPs from their Node's Pod CIDR; slices carry zones.
    let services: Api<Service> = Api::namespaced(cluster.client.clone(), "default");
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}
    }))
    .unwrap();
    services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    let pods = cluster.pods("default");
    pods.create(
        &PostParams::default(),
        &pod("pinned", json!({ZONE_LABEL: "us-central1-b"})),
    )
    .await
    .unwrap();
    for i in 0..3 {
        pods.create(&PostParams::default(), &pod(&format!("any-{i}"), json!({})))
            .await
            .unwrap();
    }
    let running = eventually("four Pods with IPs", || async {
        let list = pods.list(&Default::default()).await?.items;
        Ok((list.len() == 4 && list.iter().all(|p| pod_ip(p).is_some())).then_some(list))
    })
    .await;
    let mut used = std::collections::BTreeSet::new();
    for p in &running {
        let name = p.metadata.name.clone().unwrap();
        let node = p.spec.as_ref().unwrap().node_name.clone().unwrap();
        let (cidr, host_ip, zone) = &cidrs[&node];
        let ip = pod_ip(p).unwrap();
        assert!(
            in_slash_24(&ip, cidr),
            "{name}: {ip} not in {node}'s {cidr}"
        );
        assert_eq!(
            p.status.as_ref().unwrap().host_ip.as_deref(),
            Some(host_ip.as_str())
        );
        if name == "pinned" {
            assert_eq!(zone, "us-central1-b");
        } else {
            used.insert(node);
        }
    }
    assert_eq!(used.len(), 3, "round-robin over the three Nodes");
    let slices = eventually("four endpoints with zones", || async {
        let slices = cluster.slices_of("default", "web").await?;
        let n: usize = slices.iter().map(|s| s.endpoints.len()).sum();
        Ok((n == 4).then_some(slices))
    })
    .await;
    for endpoint in slices.iter().flat_map(|s| &s.endpoints) {
        let node = endpoint.node_name.clone().unwrap();
        assert_eq!(endpoint.zone.as_deref(), Some(cidrs[&node].2.as_str()));
    }

    // A fourth zone: a Node created with the run annotation is served.
    let extra: Node = serde_json::from_value(json!({
        "metadata": {"name": "extra-d", "labels": {ZONE_LABEL: "us-central1-d"},
                     "annotations": {"local.gclb-operator.dev/run": "kubelet"}}
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &extra).await.unwrap();
    pods.create(
        &PostParams::default(),
        &pod("in-d", json!({ZONE_LABEL: "us-central1-d"})),
    )
    .await
    .unwrap();
    eventually(
        "the Pod in zone d served with a zone-d endpoint",
        || async {
            let slices = cluster.slices_of("default", "web").await?;
            Ok(slices
                .iter()
                .flat_map(|s| &s.endpoints)
                .any(|e| {
                    e.node_name.as_deref() == Some("extra-d")
                        && e.zone.as_deref() == Some("us-central1-d")
                })
                .then_some(()))
        },
    )
    .await;
    let adopted = nodes.get("extra-d").await.unwrap();
    let spec = adopted.spec.unwrap();
    assert_eq!(
        spec.provider_id.as_deref(),
        Some("gce://p1/us-central1-d/extra-d")
    );
    assert!(spec.pod_cidr.is_some());

    // A zone emptying: the Node goes, its Pods and endpoints with it.
    nodes
        .delete("local-node-2", &DeleteParams::default())
        .await
        .unwrap();
    eventually("no Pod and no endpoint left in zone b", || async {
        let on_b = pods
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .filter(|p| {
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("local-node-2")
            })
            .count();
        let slices = cluster.slices_of("default", "web").await?;
        let in_b = slices
            .iter()
            .flat_map(|s| &s.endpoints)
            .filter(|e| e.zone.as_deref() == Some("us-central1-b"))
            .count();
        Ok((on_b == 0 && in_b == 0).then_some(()))
    })
    .await;
    assert!(leases.get_opt("local-node-2").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_no_node_fits_waits_with_failed_scheduling() {
    let cluster = LocalCluster::start().await.expect("server starts");
    let pods = cluster.pods("default");
    pods.create(
        &PostParams::default(),
        &pod("lost", json!({ZONE_LABEL: "europe-west1-b"})),
    )
    .await
    .unwrap();
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(cluster.client.clone(), "default");
    let event = eventually("a FailedScheduling Event", || async {
        Ok(events
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("FailedScheduling")))
    })
    .await;
    assert_eq!(
        event.note.as_deref(),
        Some("0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.")
    );
    let pod = pods.get("lost").await.unwrap();
    assert!(pod.spec.unwrap().node_name.is_none());
    assert!(pod_ip(&pods.get("lost").await.unwrap()).is_none());
}
