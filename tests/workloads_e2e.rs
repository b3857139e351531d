//! End to end, issue 41: users' own manifests run unchanged on the local stack. Every test
//! starts the real binaries (local Kubernetes API with its Deployment and ReplicaSet
//! controllers and kubelet, Compute emulator with its data plane and health checker, operator)
//! and sends real HTTP requests through the emulated load balancer.
//! - GKE's Ingress tutorial ("Set up an external Application Load Balancer with Ingress":
//!   Deployment `web` of hello-app, NodePort Service, Ingress with a default backend), applied
//!   as published, serves from every replica with hello-app's own answer.
//! - `kubectl set image` on a Deployment behind an Ingress, under steady traffic, loses no
//!   request with the readiness gate, and loses requests with the gate bypassed.
//! - A user's own program, mapped to an image (`--image-command`), answers behind the load
//!   balancer.

mod support;
#[path = "workloads_e2e/users_program.rs"]
mod users_program;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use support::load::{Load, Tally};
use support::*;

const HELLO: &str = "us-docker.pkg.dev/google-samples/containers/gke/hello-app";

/// web-deployment.yaml, web-service.yaml and basic-ingress.yaml of GKE's Ingress tutorial, as
/// published.
const TUTORIAL: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  selector:
    matchLabels:
      run: web
  template:
    metadata:
      labels:
        run: web
    spec:
      containers:
      - image: us-docker.pkg.dev/google-samples/containers/gke/hello-app:1.0
        imagePullPolicy: IfNotPresent
        name: web
        ports:
        - containerPort: 8080
          protocol: TCP
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: default
spec:
  ports:
  - port: 8080
    protocol: TCP
    targetPort: 8080
  selector:
    run: web
  type: NodePort
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: basic-ingress
spec:
  defaultBackend:
    service:
      name: web
      port:
        number: 8080
"#;

/// The names of the live (not terminating) Pods with `label`.
fn live_pods(sys: &System, label: &str) -> Result<Vec<String>> {
    let list = sys.get_json(&["pods", "-l", label])?;
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
        .collect())
}

/// Sends requests through the load balancer until every Pod in `pods` has answered; returns
/// the bodies by Pod (the `x-pod-name` header the local Pods add).
fn answers_from_every_pod(
    sys: &System,
    socket: &str,
    host: &str,
    pods: &[String],
) -> Result<BTreeMap<String, String>> {
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    wait_for("an answer from every replica", DEADLINE, || {
        let resp = http
            .get(format!("http://{socket}/"))
            .header(reqwest::header::HOST, host)
            .send()?;
        let status = resp.status().as_u16();
        let pod = resp
            .headers()
            .get("x-pod-name")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = resp.text()?;
        if status == 200 {
            if let Some(pod) = pod {
                seen.insert(pod, body);
            }
        }
        let missing: Vec<&String> = pods.iter().filter(|p| !seen.contains_key(*p)).collect();
        if missing.is_empty() {
            Ok(Some(()))
        } else {
            Err(anyhow!(
                "last answer {status}; no answer yet from {missing:?}"
            ))
        }
    })
    .with_context(|| sys.logs())?;
    Ok(seen)
}

#[test]
fn gke_ingress_tutorial_serves_hello_app_from_every_replica() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    sys.apply(TUTORIAL)?;
    // The tutorial's Deployment has one replica; a user scales it to two.
    sys.kubectl_ok(&["scale", "deployment/web", "--replicas=2"])?;
    let out = sys
        .kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=90s"])
        .with_context(|| sys.logs())?;
    assert!(out.contains("successfully rolled out"), "{out}");
    sys.start_operator(&["--takeover"])?;
    let socket = sys.wait_for_ingress_socket("default", "basic-ingress")?;
    let pods = live_pods(&sys, "run=web")?;
    assert_eq!(pods.len(), 2, "{pods:?}");
    let answers = answers_from_every_pod(&sys, &socket, "tutorial.example", &pods)?;
    for (pod, body) in &answers {
        assert_eq!(
            body,
            &format!("Hello, world!\nVersion: 1.0.0\nHostname: {pod}\n"),
            "hello-app's published answer"
        );
    }
    eprintln!("answers through the load balancer: {answers:?}");
    Ok(())
}

const NS: &str = "default";
const HOST: &str = "web.example";
const GATE: &str = "cloud.google.com/load-balancer-neg-ready";
/// Load balancer health check interval (seconds), slower than the readiness probe (1 s), as in
/// tests/rollout_e2e.rs: the window in which a rollout trusting the probe alone outruns the
/// load balancer.
const HC_INTERVAL_SEC: u64 = 6;
const CONNECTIONS: usize = 4;
const MIN_REQUESTS: u64 = 2_000;
const REPLICAS: usize = 2;
const THREE_ZONES: [&str; 3] = ["us-central1-a", "us-central1-b", "us-central1-c"];

/// One rollout variant: replicas, the RollingUpdate strategy's `maxSurge` and `maxUnavailable`
/// (as written in the Deployment: a number or a percentage), and the zones of the local Nodes
/// (one Node per zone; empty: the default single Node).
struct Rollout {
    replicas: usize,
    max_surge: &'static str,
    max_unavailable: &'static str,
    zones: &'static [&'static str],
}

/// The variant most tests use: [`REPLICAS`], `maxSurge: 1`, `maxUnavailable: 0`, one zone.
const SURGE_ONE: Rollout = Rollout {
    replicas: REPLICAS,
    max_surge: "1",
    max_unavailable: "0",
    zones: &[],
};

/// BackendConfig, Service and Ingress of the rollout tests ([`rollout::service_and_ingress`]), and the
/// Deployment: the readiness gate in the template (as GKE's NEG controller injects it), a
/// readiness probe, a preStop sleep longer than the endpoint detach plus draining, and the
/// variant's replicas and strategy. The kubelet control `on-sigterm: exit` stops each server right after its
/// preStop sleep, so only that sleep keeps an old Pod serving while the load balancer drains it.
fn rollout_manifests(r: &Rollout) -> String {
    let Rollout {
        replicas,
        max_surge,
        max_unavailable,
        ..
    } = r;
    rollout::service_and_ingress(HC_INTERVAL_SEC)
        + &format!(
            r#"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: {replicas}
  strategy:
    rollingUpdate:
      maxSurge: {max_surge}
      maxUnavailable: {max_unavailable}
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
      annotations:
        local.gclb-operator.dev/on-sigterm: exit
    spec:
      terminationGracePeriodSeconds: 10
      readinessGates:
      - conditionType: {GATE}
      containers:
      - name: web
        image: {HELLO}:1.0
        ports:
        - name: http
          containerPort: 8080
        readinessProbe:
          httpGet:
            path: /ready
            port: 8080
          periodSeconds: 1
        lifecycle:
          preStop:
            sleep:
              seconds: 4
"#
        )
}

/// Endpoint IP -> health state of NEG `neg` in each of `zones` (empty: the default [`ZONE`]).
fn neg_health(sys: &System, zones: &[&str], neg: &str) -> Result<BTreeMap<String, String>> {
    let default = [ZONE];
    let mut out = BTreeMap::new();
    for zone in if zones.is_empty() {
        &default[..]
    } else {
        zones
    } {
        let list = sys.compute_post(
            &format!(
                "compute/v1/projects/{PROJECT}/zones/{zone}/networkEndpointGroups/{neg}/listNetworkEndpoints"
            ),
            &serde_json::json!({"healthStatus": "SHOW"}),
        )?;
        out.extend(
            list["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|item| {
                    let ip = item["networkEndpoint"]["ipAddress"].as_str()?.to_string();
                    let health = item["healths"][0]["healthState"]
                        .as_str()
                        .unwrap_or_default();
                    Some((ip, health.to_string()))
                }),
        );
    }
    Ok(out)
}

/// The IPs of the live Pods with `label`, by Pod name.
fn pod_ips(sys: &System, label: &str) -> Result<BTreeMap<String, String>> {
    let list = sys.get_json(&["pods", "-l", label])?;
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|p| {
            Some((
                p["metadata"]["name"].as_str()?.to_string(),
                p["status"]["podIP"].as_str()?.to_string(),
            ))
        })
        .collect())
}

/// How many `detachNetworkEndpoints` calls carried each Pod's endpoint (`ips`: Pod -> IP), from
/// the emulator's call record over the whole test.
fn detach_calls(sys: &System, ips: &BTreeMap<String, String>) -> Result<Vec<(String, u64)>> {
    let calls = sys.compute_get("_emulator/calls")?;
    let detached = &calls["networkEndpoints"]["detachNetworkEndpoints"];
    Ok(ips
        .iter()
        .map(|(pod, ip)| {
            let n = detached
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(endpoint, _)| endpoint.split(':').next() == Some(ip.as_str()))
                .filter_map(|(_, n)| n.as_u64())
                .sum();
            (pod.clone(), n)
        })
        .collect())
}

/// What one `kubectl set image` under load produced.
struct SetImage {
    tally: Tally,
    /// The Pods of the new ReplicaSet.
    news: Vec<String>,
    /// `detachNetworkEndpoints` calls per Pod, old and new ([`detach_calls`]).
    detach_calls: Vec<(String, u64)>,
    /// The Node of each new Pod (`spec.nodeName`).
    new_nodes: BTreeMap<String, String>,
}

/// Runs `kubectl set image` on Deployment `web` (hello-app 1.0 -> 2.0) while the load
/// generator sends requests through the load balancer; keeps the load on until the rollout is
/// done, every new Pod has answered and at least [`MIN_REQUESTS`] were answered.
fn set_image_under_load(label: &str, operator_flags: &[&str], r: &Rollout) -> Result<SetImage> {
    let mut sys = System::start_with(Options {
        emulator_args: &["--port-map", "80=0,443=0"],
        nodes: r.zones,
        ..Options::default()
    })?;
    sys.apply_path(&repo_root().join("crds/backendconfigs.cloud.google.com.yaml"))?;
    sys.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "crd/backendconfigs.cloud.google.com",
        "--timeout=60s",
    ])?;
    sys.apply(&rollout_manifests(r))?;
    sys.start_operator(operator_flags)?;
    let socket = sys.wait_for_ingress_socket(NS, "web")?;
    sys.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=120s"])
        .with_context(|| sys.logs())?;
    let neg = wait_for("the NEG of Service web", DEADLINE, || {
        Ok(sys
            .neg_names()?
            .into_iter()
            .find(|n| n.contains("-default-web-80-")))
    })?;
    let olds = live_pods(&sys, "app=web")?;
    wait_for("every replica HEALTHY in the NEG", DEADLINE, || {
        let health = neg_health(&sys, r.zones, &neg)?;
        Ok((health.len() == r.replicas && health.values().all(|h| h == "HEALTHY")).then_some(()))
    })
    .with_context(|| sys.logs())?;
    sys.wait_for_response(&socket, HOST, "/", 200, "Version: 1.0.0")?;
    let mut ips = pod_ips(&sys, "app=web")?;

    let load = Load::start(
        &socket,
        HOST,
        CONNECTIONS,
        1_000_000,
        Duration::from_secs(180),
    );
    let rolled = sys
        .kubectl_ok(&[
            "set",
            "image",
            "deployment/web",
            &format!("web={HELLO}:2.0"),
        ])
        .and_then(|_| sys.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=150s"]));
    if let Err(e) = rolled {
        let tally = load.finish();
        bail!(
            "the rollout did not finish ({tally:?}): {e:#}\n{}",
            sys.logs()
        );
    }
    let news: Vec<String> = live_pods(&sys, "app=web")?
        .into_iter()
        .filter(|p| !olds.contains(p))
        .collect();
    let wanted: BTreeSet<String> = news.iter().cloned().collect();
    let new_nodes: BTreeMap<String, String> = sys.get_json(&["pods", "-l", "app=web"])?["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let name = p["metadata"]["name"].as_str()?.to_string();
            let node = p["spec"]["nodeName"].as_str()?.to_string();
            wanted.contains(&name).then_some((name, node))
        })
        .collect();
    let settled = wait_for(
        "old Pods gone, new Pods answering, enough requests",
        Duration::from_secs(90),
        || {
            let left = sys.get_json(&["pods", "-l", "app=web"])?;
            let old_left = item_names(&left).iter().any(|p| olds.contains(p));
            let done = load.done();
            let seen = load.pods_seen();
            if !old_left && done >= MIN_REQUESTS && wanted.is_subset(&seen) {
                Ok(Some(()))
            } else {
                Err(anyhow!(
                    "{done} answered, Pods seen {seen:?}, old Pods left: {old_left}"
                ))
            }
        },
    );
    let tally = load.finish();
    eprintln!(
        "[{label}] {} requests over {CONNECTIONS} connections: {} ok, {} failed {:?}; answers per Pod {:?}; first failures {:#?}",
        tally.ok + tally.failed,
        tally.ok,
        tally.failed,
        tally.failures,
        tally.by_pod,
        tally.samples
    );
    if let Err(e) = settled {
        eprintln!("[{label}] load did not settle: {e:#}");
    }
    ips.extend(pod_ips(&sys, "app=web")?);
    let detach_calls = detach_calls(&sys, &ips)?;
    eprintln!("[{label}] detachNetworkEndpoints calls per Pod: {detach_calls:?}");
    Ok(SetImage {
        tally,
        news,
        detach_calls,
        new_nodes,
    })
}

/// Issue 41: `kubectl set image` on a Deployment behind an Ingress, under steady traffic,
/// loses not one request: the Deployment controller counts a new Pod available only once it
/// is Ready, and Ready waits for the readiness gate, which the operator sets when the load
/// balancer reports the endpoint HEALTHY.
#[test]
fn set_image_with_the_readiness_gate_loses_no_request() -> Result<()> {
    let SetImage {
        tally,
        news,
        detach_calls,
        ..
    } = set_image_under_load("gate enforced", &[], &SURGE_ONE)?;
    assert_lossless(&tally, &news, REPLICAS);
    // Issue 40: the Deployment's first Pods, and the new ones, were never detached when their
    // gate opened: each first Pod's endpoint was detached once (its deletion), no new Pod's.
    assert_eq!(detach_calls.len(), 2 * REPLICAS, "{detach_calls:?}");
    for (pod, calls) in &detach_calls {
        let want = u64::from(!news.contains(pod));
        assert_eq!(
            *calls, want,
            "Pod {pod}: {calls} detachNetworkEndpoints calls carried its endpoint, want {want} (its deletion only): {detach_calls:?}"
        );
    }
    Ok(())
}

/// The rollout lost no request, took at least [`MIN_REQUESTS`], replaced all `replicas`, and
/// every new Pod served traffic.
fn assert_lossless(tally: &Tally, news: &[String], replicas: usize) {
    let total = tally.ok + tally.failed;
    assert_eq!(
        tally.failed, 0,
        "failed requests during the rollout: {:?}, e.g. {:#?}",
        tally.failures, tally.samples
    );
    assert!(total >= MIN_REQUESTS, "only {total} requests were answered");
    assert_eq!(news.len(), replicas, "{news:?}");
    for p in news {
        assert!(
            tally.by_pod.get(p).is_some_and(|n| *n > 0),
            "new Pod {p} served no traffic: {:?}",
            tally.by_pod
        );
    }
}

/// `maxSurge: 0, maxUnavailable: 1` over three zones (one Node each, three replicas): the
/// controller takes an old Pod down before its replacement exists, the two others carry the
/// traffic, and the old Pod drains behind its preStop sleep. No request is lost, and the new
/// Pods are spread one per zone, as the default topology spread places a Deployment's replicas.
#[test]
fn unavailable_first_across_three_zones_loses_no_request() -> Result<()> {
    let rollout = Rollout {
        replicas: 3,
        max_surge: "0",
        max_unavailable: "1",
        zones: &THREE_ZONES,
    };
    let SetImage {
        tally,
        news,
        new_nodes,
        ..
    } = set_image_under_load("surge 0, 3 zones", &[], &rollout)?;
    assert_lossless(&tally, &news, 3);
    let nodes: BTreeSet<&String> = new_nodes.values().collect();
    assert_eq!(
        nodes.len(),
        3,
        "new Pods not one per Node (zone): {new_nodes:?}"
    );
    Ok(())
}

/// Percentages, rounded as upstream rounds them (maxSurge up, maxUnavailable down): with four
/// replicas `25%` and `25%` allow one extra Pod and one unavailable Pod at a time.
#[test]
fn percentage_surge_and_unavailable_lose_no_request() -> Result<()> {
    let rollout = Rollout {
        replicas: 4,
        max_surge: "25%",
        max_unavailable: "25%",
        zones: &[],
    };
    let SetImage { tally, news, .. } = set_image_under_load("25% / 25%", &[], &rollout)?;
    assert_lossless(&tally, &news, 4);
    Ok(())
}

/// The negative control: the same rollout with the gate bypassed (`--readiness-gates=false`:
/// the condition is True at once, so Ready follows the readiness probe alone). The Deployment
/// then replaces the old Pods faster than the load balancer sees the new ones HEALTHY, and
/// requests fail with the load balancer's 502.
#[test]
fn set_image_without_the_readiness_gate_loses_requests() -> Result<()> {
    let SetImage { tally, .. } =
        set_image_under_load("gate bypassed", &["--readiness-gates=false"], &SURGE_ONE)?;
    assert!(
        tally.failed > 0,
        "expected failed requests when the gate does not wait for load balancer health: {tally:?}"
    );
    assert!(
        tally.failures.contains_key("502"),
        "the failures are the load balancer's 502: {:?} {:#?}",
        tally.failures,
        tally.samples
    );
    Ok(())
}
