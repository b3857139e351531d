//! GKE coexistence and takeover (issue 15, "Coexistence with GKE").
//!
//! GKE's side is stood in for by the operator in takeover mode (class `gce`, GKE's names and
//! finalizer, `kube-system/default-http-backend`): it builds the load balancers of a class-gce
//! Ingress and of an Ingress without a class, then stops, leaving what GKE's add-on would leave
//! in a cluster and a project. Then the operator runs in its default mode, beside it:
//! - it serves its own class `gclb` with its own names (`gclb-...`), its own finalizer and its
//!   own default backend in its own namespace, real HTTP through its load balancer;
//! - it touches none of GKE's objects: both GKE Ingresses keep their resourceVersion (no
//!   finalizer, status or annotation written), so do `kube-system/default-http-backend` and the
//!   `gce` IngressClass, and every `k8s...` Compute resource is byte for byte what it was after
//!   its own load balancer is built and garbage-collected again;
//! - switched to takeover mode (GKE's add-on disabled), the operator adopts GKE's load
//!   balancers by name: no Compute write, same IPs.

mod support;

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde_json::Value;
use support::*;

/// A Service `shop` with one echo Pod, and the two Ingresses GKE's controller serves.
const GKE_APPS: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: shop}
spec:
  selector: {app: shop}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata:
  name: shop-1
  labels: {app: shop}
  annotations: {local.gclb-operator.dev/run: echo}
spec:
  containers:
  - name: echo
    image: registry.k8s.io/e2e-test-images/agnhost:2.39
    ports: [{containerPort: 8080}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: gke-annotated
  annotations: {kubernetes.io/ingress.class: gce}
spec:
  defaultBackend:
    service: {name: shop, port: {number: 80}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: gke-no-class}
spec:
  rules:
  - host: shop.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: shop, port: {number: 80}}}}
"#;

/// The operator's own default backend (deploy/default-backend.yaml's Service, with a Pod the
/// local kubelet runs in place of its Deployment) and an Ingress of class gclb.
const OURS: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: gclb-default-backend, namespace: gclb-operator}
spec:
  selector: {app.kubernetes.io/name: gclb-default-backend}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata:
  name: gclb-default-backend
  namespace: gclb-operator
  labels: {app.kubernetes.io/name: gclb-default-backend}
  annotations: {local.gclb-operator.dev/run: default-backend}
spec:
  containers:
  - name: default-http-backend
    image: gclb-operator
    ports: [{containerPort: 8080}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: ours}
spec:
  ingressClassName: gclb
  rules:
  - host: ours.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: shop, port: {number: 80}}}}
"#;

/// Every resource of the test project (global collections and the test zone's NEGs), by
/// `collection/name`, as the emulator returns it.
fn project_resources(sys: &System) -> Result<BTreeMap<String, Value>> {
    let mut out = BTreeMap::new();
    let global = [
        "urlMaps",
        "targetHttpProxies",
        "targetHttpsProxies",
        "forwardingRules",
        "addresses",
        "backendServices",
        "healthChecks",
        "sslCertificates",
        "firewalls",
    ];
    let mut paths: Vec<String> = global
        .iter()
        .map(|c| format!("compute/v1/projects/{PROJECT}/global/{c}"))
        .collect();
    paths.push(format!(
        "compute/v1/projects/{PROJECT}/zones/{ZONE}/networkEndpointGroups"
    ));
    for path in paths {
        let list = sys.compute_get(&path)?;
        let collection = path.rsplit('/').next().unwrap_or_default().to_string();
        for item in list["items"].as_array().into_iter().flatten() {
            let name = item["name"].as_str().unwrap_or_default();
            out.insert(format!("{collection}/{name}"), item.clone());
        }
    }
    Ok(out)
}

/// The resources a GKE controller names (`k8s...`).
fn gke_named(all: &BTreeMap<String, Value>) -> BTreeMap<String, Value> {
    all.iter()
        .filter(|(k, _)| k.split('/').nth(1).is_some_and(|n| n.starts_with("k8s")))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The resourceVersion of the object `args` names, or of the first item when `args` list
/// objects (a label selector).
fn resource_version(sys: &System, args: &[&str]) -> Result<String> {
    let answer = sys.get_json(args)?;
    let object = answer.get("items").map_or(&answer, |items| &items[0]);
    Ok(object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string())
}

/// The objects of GKE's side in the cluster, by what identifies them, with their
/// resourceVersions (a write to any changes it).
fn gke_objects(sys: &System) -> Result<BTreeMap<&'static str, String>> {
    let mut out = BTreeMap::new();
    for (key, args) in [
        ("ingress gke-annotated", &["ingress", "gke-annotated"][..]),
        ("ingress gke-no-class", &["ingress", "gke-no-class"][..]),
        ("ingressclass gce", &["ingressclass", "gce"][..]),
        (
            "service kube-system/default-http-backend",
            &["service", "-n", "kube-system", "default-http-backend"][..],
        ),
        (
            "deployment kube-system/l7-default-backend",
            &["deployment", "-n", "kube-system", "l7-default-backend"][..],
        ),
        (
            "its Pod",
            &["pod", "-n", "kube-system", "-l", "k8s-app=glbc"][..],
        ),
    ] {
        out.insert(key, resource_version(sys, args)?);
    }
    Ok(out)
}

/// Lines of the operator's log that say a garbage collection run finished.
fn gc_runs(proc: &Proc) -> Result<usize> {
    Ok(std::fs::read_to_string(&proc.log)?
        .lines()
        .filter(|l| l.contains("garbage collection run finished"))
        .count())
}

#[test]
fn default_mode_touches_nothing_of_gkes_and_takeover_adopts_it() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0"])?;
    sys.apply_basics()?;
    sys.apply(GKE_APPS)?;

    // GKE's controller (stood in for by takeover mode) builds both load balancers.
    sys.start_operator(&[])?;
    let gke_sockets = [
        sys.wait_for_ingress_socket("default", "gke-annotated")?,
        sys.wait_for_ingress_socket("default", "gke-no-class")?,
    ];
    sys.wait_for_response(&gke_sockets[0], "any.example", "/", 200, "shop-1")?;
    sys.wait_for_response(&gke_sockets[1], "shop.example", "/", 200, "shop-1")?;
    let gke_ips = [
        sys.wait_for_ingress_ip("default", "gke-annotated")?,
        sys.wait_for_ingress_ip("default", "gke-no-class")?,
    ];
    let gke_finalizers =
        sys.get_json(&["ingress", "gke-annotated"])?["metadata"]["finalizers"].clone();
    assert_eq!(
        gke_finalizers,
        serde_json::json!(["networking.gke.io/ingress-finalizer-V2"])
    );
    wait_for("the stand-in's first GC", DEADLINE, || {
        Ok((gc_runs(sys.operator.as_ref().unwrap())? > 0).then_some(()))
    })?;
    sys.stop_operator();
    let gke_objects_before = gke_objects(&sys)?;
    let gke_resources_before = gke_named(&project_resources(&sys)?);
    assert!(
        gke_resources_before.len() >= 10,
        "GKE's side built too little: {:?}",
        gke_resources_before.keys()
    );

    // The operator in its default mode, beside GKE's controller.
    sys.apply_path(&repo_root().join("deploy/ingressclass.yaml"))?;
    sys.apply(OURS)?;
    sys.start_operator(&["--takeover=false"])?;
    let socket = sys.wait_for_ingress_socket("default", "ours")?;
    sys.wait_for_response(&socket, "ours.example", "/", 200, "shop-1")?;
    // Its own default backend (gclb-operator/gclb-default-backend) answers unmatched hosts.
    sys.wait_for_response(&socket, "other.example", "/", 404, "default backend - 404")?;
    assert_eq!(
        gke_objects(&sys)?,
        gke_objects_before,
        "the default mode wrote to GKE's objects:\n{}",
        sys.logs()
    );
    let ours = sys.get_json(&["ingress", "ours"])?;
    assert_eq!(
        ours["metadata"]["finalizers"],
        serde_json::json!(["gclb-operator.dev/ingress-finalizer"])
    );
    let all = project_resources(&sys)?;
    let own: Vec<&String> = all
        .keys()
        .filter(|k| !gke_resources_before.contains_key(*k))
        .filter(|k| !k.starts_with("firewalls/default-allow-"))
        .collect();
    assert!(own.len() >= 8, "{own:?}");
    for key in &own {
        let name = key.split('/').nth(1).unwrap_or_default();
        assert!(name.starts_with("gclb-"), "not one of ours by name: {key}");
    }
    // Deleting its Ingress deletes its load balancer through a garbage collection run over
    // the whole project, which must leave GKE's alone.
    let runs = gc_runs(sys.operator.as_ref().unwrap())?;
    sys.kubectl_ok(&["delete", "ingress", "ours", "--wait=false"])?;
    wait_for(
        "the operator's own resources to be deleted",
        DEADLINE,
        || {
            let left: Vec<String> = project_resources(&sys)?
                .into_keys()
                .filter(|k| k.split('/').nth(1).is_some_and(|n| n.starts_with("gclb-")))
                .filter(|k| !k.starts_with("firewalls/"))
                .collect();
            Ok(left.is_empty().then_some(()))
        },
    )
    .with_context(|| sys.logs())?;
    wait_for(
        "a garbage collection run after the deletion",
        DEADLINE,
        || Ok((gc_runs(sys.operator.as_ref().unwrap())? > runs).then_some(())),
    )
    .with_context(|| sys.logs())?;
    let operator_log = std::fs::read_to_string(&sys.operator.as_ref().unwrap().log)?;
    sys.stop_operator();
    assert_eq!(
        gke_objects(&sys)?,
        gke_objects_before,
        "the default mode wrote to GKE's objects; operator log:\n{operator_log}"
    );
    let gke_resources_after = gke_named(&project_resources(&sys)?);
    for (key, before) in &gke_resources_before {
        assert_eq!(
            gke_resources_after.get(key),
            Some(before),
            "GKE's {key} changed or went away"
        );
    }
    assert_eq!(
        gke_resources_after.len(),
        gke_resources_before.len(),
        "new k8s-named resources: {:?}",
        gke_resources_after.keys()
    );
    // Switch-over: the add-on disabled, the operator takes over and adopts by name.
    let writes = sys.mutating_calls()?;
    sys.start_operator(&[])?;
    let operator = sys.operator.as_ref().unwrap();
    wait_for(
        "both GKE Ingresses reconciled and a GC run",
        DEADLINE,
        || Ok((operator.ok_syncs()? >= 2 && gc_runs(operator)? > 0).then_some(())),
    )
    .with_context(|| sys.logs())?;
    assert_eq!(
        sys.mutating_calls()?,
        writes,
        "takeover wrote to the Compute API instead of adopting:\n{}",
        sys.logs()
    );
    assert_eq!(
        [
            sys.wait_for_ingress_ip("default", "gke-annotated")?,
            sys.wait_for_ingress_ip("default", "gke-no-class")?,
        ],
        gke_ips
    );
    Ok(())
}
