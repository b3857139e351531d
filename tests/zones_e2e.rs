//! Multi-zone clusters (issue 15, "Zones from the cluster"): the local API registers Nodes in
//! three zones and the operator runs without `--zone`, so the NEG zones come from the Nodes.
//! - three zones give three NEGs, each in its zone, all attached to the one backend service,
//!   and real HTTP reaches the Pods of every zone;
//! - a fourth zone appearing (a Node created later) gets its NEG, attached, before any Pod runs
//!   there, then its Pod;
//! - a zone emptying (its only Node deleted, its Pods with it) loses its backend and its NEG;
//! - at every step each NEG holds exactly the Pods of its own zone: no endpoint is ever in a
//!   foreign zone's NEG.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{anyhow, Context, Result};
use support::*;

const ZONES: [&str; 3] = ["us-central1-a", "us-central1-b", "us-central1-c"];

/// Service `web` (80 -> 8080) and the Ingress to it.
const WEB: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  defaultBackend:
    service: {name: web, port: {number: 80}}
---
"#;

/// An echo Pod of `web` pinned to `zone`.
fn pod(name: &str, zone: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{app: web}}\n  annotations: {{local.gclb-operator.dev/run: echo}}\nspec:\n  nodeSelector: {{topology.kubernetes.io/zone: {zone}}}\n  containers:\n  - name: echo\n    image: registry.k8s.io/e2e-test-images/agnhost:2.39\n    ports: [{{containerPort: 8080}}]\n    readinessProbe:\n      httpGet: {{path: /, port: 8080}}\n      periodSeconds: 1\n---\n"
    )
}

/// The web backend service's NEG zones (from its `backends[].group`) and NEG name.
fn backend_zones(sys: &System) -> Result<(String, BTreeSet<String>)> {
    let list = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/global/backendServices"
    ))?;
    let web = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|b| {
            b["name"]
                .as_str()
                .is_some_and(|n| n.contains("-default-web-80-"))
        })
        .ok_or_else(|| anyhow!("no backend service for web yet"))?;
    let mut zones = BTreeSet::new();
    let mut name = String::new();
    for group in web["backends"].as_array().into_iter().flatten() {
        let group = group["group"].as_str().unwrap_or_default();
        let parts: Vec<&str> = group.split('/').collect();
        let at = parts
            .iter()
            .position(|p| *p == "zones")
            .context(group.to_string())?;
        zones.insert(parts[at + 1].to_string());
        name = parts.last().unwrap_or(&"").to_string();
    }
    Ok((name, zones))
}

/// Every zone's NEGs of the project (aggregatedList): zone -> NEG names.
fn negs_by_zone(sys: &System) -> Result<BTreeMap<String, Vec<String>>> {
    let list = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/aggregated/networkEndpointGroups"
    ))?;
    let mut out = BTreeMap::new();
    for (scope, entry) in list["items"].as_object().into_iter().flatten() {
        let zone = scope.trim_start_matches("zones/").to_string();
        for neg in entry["networkEndpointGroups"]
            .as_array()
            .into_iter()
            .flatten()
        {
            out.entry(zone.clone())
                .or_insert_with(Vec::new)
                .push(neg["name"].as_str().unwrap_or_default().to_string());
        }
    }
    Ok(out)
}

/// IPs attached to one NEG.
fn neg_ips(sys: &System, zone: &str, neg: &str) -> Result<BTreeSet<String>> {
    let out = sys.compute_post(
        &format!(
            "compute/v1/projects/{PROJECT}/zones/{zone}/networkEndpointGroups/{neg}/listNetworkEndpoints"
        ),
        &serde_json::json!({}),
    )?;
    Ok(out["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            e["networkEndpoint"]["ipAddress"]
                .as_str()
                .map(str::to_string)
        })
        .collect())
}

/// Pod IPs of `web` by the zone of the Node each runs on.
fn pod_ips_by_zone(sys: &System) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let nodes = sys.get_json(&["nodes"])?;
    let zone_of: BTreeMap<String, String> = nodes["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| {
            (
                n["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                n["metadata"]["labels"]["topology.kubernetes.io/zone"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    let pods = sys.get_json(&["pods", "-l", "app=web"])?;
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in pods["items"].as_array().into_iter().flatten() {
        if !p["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        let (Some(node), Some(ip)) = (
            p["spec"]["nodeName"].as_str(),
            p["status"]["podIP"].as_str(),
        ) else {
            continue;
        };
        let zone = zone_of.get(node).cloned().unwrap_or_default();
        out.entry(zone).or_default().insert(ip.to_string());
    }
    Ok(out)
}

/// Waits until the backend service is attached to NEGs in exactly `zones`, NEGs of web exist
/// in exactly those zones, and each holds exactly the IPs of the web Pods of its own zone.
fn wait_for_zones(sys: &System, zones: &[&str]) -> Result<()> {
    let want: BTreeSet<String> = zones.iter().map(|z| z.to_string()).collect();
    wait_for(&format!("web's NEGs in exactly {zones:?}"), DEADLINE, || {
        let (neg, attached) = backend_zones(sys)?;
        if attached != want {
            return Err(anyhow!("backend service attached to {attached:?}"));
        }
        let existing: BTreeSet<String> = negs_by_zone(sys)?
            .into_iter()
            .filter(|(_, names)| names.contains(&neg))
            .map(|(zone, _)| zone)
            .collect();
        if existing != want {
            return Err(anyhow!("NEG {neg} exists in {existing:?}"));
        }
        let pods = pod_ips_by_zone(sys)?;
        for zone in &want {
            let ips = neg_ips(sys, zone, &neg)?;
            let expected = pods.get(zone).cloned().unwrap_or_default();
            if ips != expected {
                return Err(anyhow!(
                    "NEG {neg} in {zone} holds {ips:?}, the Pods of {zone} are {expected:?} (all: {pods:?})"
                ));
            }
        }
        Ok(Some(()))
    })
    .with_context(|| sys.logs())
}

/// No NEG of web ever holds an endpoint of another zone (checked on whatever state it is in).
fn assert_no_foreign_endpoint(sys: &System) -> Result<()> {
    let (neg, _) = backend_zones(sys)?;
    let pods = pod_ips_by_zone(sys)?;
    for (zone, names) in negs_by_zone(sys)? {
        if !names.contains(&neg) {
            continue;
        }
        for ip in neg_ips(sys, &zone, &neg)? {
            let home = pods
                .iter()
                .find(|(_, ips)| ips.contains(&ip))
                .map(|(z, _)| z);
            assert!(
                home.is_none_or(|z| *z == zone),
                "{ip} of zone {home:?} is in the NEG of {zone}"
            );
        }
    }
    Ok(())
}

#[test]
fn negs_follow_the_zones_of_the_nodes_as_they_come_and_go() -> Result<()> {
    let nodes = ZONES.join(",");
    let zones: Vec<&str> = nodes.split(',').collect();
    let mut sys = System::start_with(support::Options {
        emulator_args: &["--port-map", "80=0"],
        nodes: &zones,
        ..Default::default()
    })?;
    sys.apply_basics()?;
    let mut yaml = WEB.to_string();
    for (i, zone) in ZONES.iter().enumerate() {
        yaml.push_str(&pod(&format!("web-{i}"), zone));
    }
    sys.apply(&yaml)?;
    sys.start_operator(&[])?;

    wait_for_zones(&sys, &ZONES)?;
    // Real HTTP reaches the Pods of all three zones through the one backend service.
    let socket = sys.wait_for_ingress_socket("default", "web")?;
    let mut answered = BTreeSet::new();
    wait_for("answers from the Pods of all three zones", DEADLINE, || {
        let (status, body) = sys.http_get(&socket, "web.example", "/")?;
        if status == 200 {
            for i in 0..3 {
                if body.contains(&format!("web-{i}")) {
                    answered.insert(i);
                }
            }
        }
        Ok((answered.len() == 3).then_some(()))
    })
    .with_context(|| sys.logs())?;
    assert_no_foreign_endpoint(&sys)?;

    // A fourth zone: a Node registered later, with a web Pod.
    sys.apply(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: late-node\n  labels: {topology.kubernetes.io/zone: us-central1-f}\n  annotations: {local.gclb-operator.dev/run: kubelet}\n---\n",
    )?;
    // The Node alone (no endpoint changed) gives the zone its NEG, empty and attached.
    let four = [
        "us-central1-a",
        "us-central1-b",
        "us-central1-c",
        "us-central1-f",
    ];
    wait_for_zones(&sys, &four)?;
    sys.apply(&pod("web-f", "us-central1-f"))?;
    wait_for("web-f's IP", DEADLINE, || {
        Ok(pod_ips_by_zone(&sys)?
            .contains_key("us-central1-f")
            .then_some(()))
    })?;
    wait_for_zones(&sys, &four)?;
    assert_no_foreign_endpoint(&sys)?;

    // Zone b empties: its only Node goes, and its Pod with it.
    let b_node = sys
        .kubectl_ok(&[
            "get",
            "nodes",
            "-l",
            "topology.kubernetes.io/zone=us-central1-b",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ])?
        .trim()
        .to_string();
    assert!(!b_node.is_empty() && !b_node.contains(' '), "{b_node:?}");
    sys.kubectl_ok(&["delete", "node", &b_node])?;
    wait_for_zones(&sys, &["us-central1-a", "us-central1-c", "us-central1-f"])?;
    assert_no_foreign_endpoint(&sys)?;
    Ok(())
}
