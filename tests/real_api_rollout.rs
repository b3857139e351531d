//! Rollouts through the real Deployment controller (issue 40), in the real-API tier: a real
//! kube-apiserver and kube-controller-manager (`KUBEBUILDER_ASSETS` holding both, built from one
//! public tree; tests/real_api/kcm.rs), the Compute emulator validating NEG endpoints in the
//! tier's private range (tests/real_api/stack.rs), the operator as deploy/'s ServiceAccount, and
//! a stand-in scheduler and kubelet for the one Node (tests/real_api/kubelet.rs). The
//! EndpointSlices come from the real EndpointSlice controller, the ReplicaSets and Pods from the
//! real Deployment and ReplicaSet controllers.
//!
//! Each scenario serves Deployment `web` (`maxSurge: 1`, `maxUnavailable: 0`, a preStop sleep
//! of [`PRE_STOP_SEC`] s) through an Ingress of class `gclb`, with a BackendConfig health check
//! every [`HC_INTERVAL_SEC`] s (healthy threshold 2), waits until every endpoint is HEALTHY,
//! then runs `kubectl set image` under steady traffic through the emulated load balancer (at
//! least [`MIN_REQUESTS`] requests, each sent once) and counts failed requests:
//! - with the readiness gate `cloud.google.com/load-balancer-neg-ready` in the Pod template, one
//!   replica and two: zero may fail (a new Pod is Ready only once HEALTHY behind the load
//!   balancer, and must stay attached while its EndpointSlice entry catches up: issue 40);
//! - without the gate (negative control): the Deployment outruns the health check, and requests
//!   must fail, or the scenario proves nothing.
//!
//! Runs as root only (the Pod range lives in a private network namespace); skipped with a
//! message without root, without assets, or without `kube-controller-manager`.

#[path = "real_api/harness.rs"]
mod harness;
#[path = "real_api/kcm.rs"]
mod kcm;
#[path = "real_api/kubelet.rs"]
mod kubelet;
#[path = "real_api/stack.rs"]
mod stack;
mod support;

use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use support::load::{Load, Tally};
use support::wait_for;

/// The scenarios' namespace.
const NS: &str = "shop";
/// Host of the Ingress rule and of the load's requests.
const HOST: &str = "web.example.com";
/// BackendConfig health check interval, seconds (healthy and unhealthy thresholds 2).
const HC_INTERVAL_SEC: u64 = 2;
/// The Pods' preStop sleep, seconds: longer than the endpoint detach plus draining (1 s).
const PRE_STOP_SEC: u64 = 4;
/// The issue's lower bound on requests sent during a rollout.
const MIN_REQUESTS: u64 = 1_000;
/// Client connections of the load generator.
const CONNECTIONS: usize = 4;
/// Deadline for each wait (on a loaded 2-core machine).
const DEADLINE: Duration = Duration::from_secs(180);
const GATE: &str = "cloud.google.com/load-balancer-neg-ready";

fn manifests(replicas: u32, gated: bool, image: &str) -> String {
    let gate = if gated {
        format!("      readinessGates:\n      - conditionType: {GATE}\n")
    } else {
        String::new()
    };
    format!(
        r#"apiVersion: cloud.google.com/v1
kind: BackendConfig
metadata: {{name: web, namespace: {NS}}}
spec:
  healthCheck: {{type: HTTP, requestPath: /healthz, checkIntervalSec: {HC_INTERVAL_SEC}, timeoutSec: 1, healthyThreshold: 2, unhealthyThreshold: 2}}
  connectionDraining: {{drainingTimeoutSec: 1}}
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: {NS}
  annotations:
    cloud.google.com/neg: '{{"ingress": true}}'
    cloud.google.com/backend-config: '{{"default": "web"}}'
spec:
  selector: {{app: web}}
  ports: [{{name: http, port: 80, targetPort: 8080, protocol: TCP}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {NS}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  strategy: {{type: RollingUpdate, rollingUpdate: {{maxSurge: 1, maxUnavailable: 0}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      terminationGracePeriodSeconds: 10
{gate}      containers:
      - name: web
        image: {image}
        ports: [{{containerPort: 8080}}]
        lifecycle: {{preStop: {{exec: {{command: [sleep, "{PRE_STOP_SEC}"]}}}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: web, namespace: {NS}}}
spec:
  ingressClassName: gclb
  rules:
  - host: {HOST}
    http:
      paths:
      - {{path: /, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}
"#
    )
}

/// Everything a scenario runs; dropped in reverse order of start.
struct Tier {
    _operator: stack::KillOnDrop,
    kubelet: kubelet::Kubelet,
    _emulator: support::Proc,
    kcm: kcm::ControllerManager,
    real: harness::RealApi,
    compute_url: String,
}

impl Tier {
    fn logs(&self) -> String {
        let read =
            |f: &str| std::fs::read_to_string(self.real.dir.path().join(f)).unwrap_or_default();
        let tail = |s: String, n: usize| {
            let lines: Vec<&str> = s.lines().collect();
            lines[lines.len().saturating_sub(n)..].join("\n")
        };
        format!(
            "\n===== stand-in kubelet =====\n{}\n===== operator (tail) =====\n{}\n===== emulator (tail) =====\n{}\n===== kube-controller-manager (tail) =====\n{}",
            self.kubelet.log(),
            tail(read("operator.log"), 150),
            tail(read("emulator.log"), 40),
            self.kcm.log_tail(40)
        )
    }

    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Result<String> {
        stack::kubectl_ok(&self.real.kubeconfig, args, stdin)
    }

    fn compute(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value> {
        let http = reqwest::blocking::Client::new();
        let url = format!("{}/{path}", self.compute_url);
        let req = match method {
            "POST" => http.post(&url).json(&body.unwrap_or(json!({}))),
            _ => http.get(&url),
        };
        Ok(req.send()?.json()?)
    }

    /// `ip -> healthState` of the Service's NEG (empty until it exists).
    fn neg_health(&self) -> Result<Vec<(String, String)>> {
        let zone = format!(
            "compute/v1/projects/{}/zones/{}",
            support::PROJECT,
            support::ZONE
        );
        let negs = self.compute("GET", &format!("{zone}/networkEndpointGroups"), None)?;
        let Some(neg) = negs["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|n| {
                let name = n["name"].as_str()?;
                name.contains(&format!("-{NS}-web-80-"))
                    .then(|| name.to_string())
            })
        else {
            return Ok(Vec::new());
        };
        let list = self.compute(
            "POST",
            &format!("{zone}/networkEndpointGroups/{neg}/listNetworkEndpoints"),
            Some(json!({"healthStatus": "SHOW"})),
        )?;
        Ok(list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| {
                let ip = i["networkEndpoint"]["ipAddress"]
                    .as_str()
                    .unwrap_or_default();
                let h = i["healths"][0]["healthState"].as_str().unwrap_or_default();
                (ip.to_string(), h.to_string())
            })
            .collect())
    }
}

/// Starts the tier and serves `replicas` Pods of `web` (gated or not) behind the load balancer,
/// every endpoint HEALTHY; returns it and the load balancer's socket.
fn serve(replicas: u32, gated: bool) -> Result<Option<(Tier, String)>> {
    let (Some(assets), Some(kcm_bin)) = (harness::assets(), kcm::assets()) else {
        return Ok(None);
    };
    let real = harness::RealApi::start(&assets)?;
    eprintln!("real API server: {}", real.version);
    let kcm = kcm::ControllerManager::start(&kcm_bin, &real)?;
    let operator_kc = stack::install_operator(&real)?;
    let (emulator, compute_url) = stack::start_emulator(real.dir.path())?;
    stack::register_node(&real, &compute_url)?;
    stack::kubectl_ok(&real.kubeconfig, &["create", "namespace", NS], None)?;
    // The ServiceAccount controller makes the namespace's `default` ServiceAccount.
    wait_for("ServiceAccount shop/default", DEADLINE, || {
        Ok(
            harness::kubectl(&real.kubeconfig, &["get", "sa", "default", "-n", NS], None)
                .0
                .then_some(()),
        )
    })?;
    let node = kubelet::NodeSpec {
        name: stack::NODE.to_string(),
        internal_ip: stack::NODE_IP.parse()?,
        first_pod_ip: "10.244.0.10".parse()?,
    };
    let kubelet = kubelet::Kubelet::start(&real.kubeconfig, NS, node)?;
    let log = real.dir.path().join("operator.log");
    let operator = stack::start_operator(&operator_kc, &compute_url, &log)?;
    let tier = Tier {
        _operator: operator,
        kubelet,
        _emulator: emulator,
        kcm,
        real,
        compute_url,
    };
    tier.kubectl(
        &["apply", "-f", "-"],
        Some(&manifests(replicas, gated, "example/web:1")),
    )?;
    let socket = wait_for("the load balancer's HTTP listener", DEADLINE, || {
        let ing: Value = serde_json::from_str(
            &tier.kubectl(&["get", "ingress", "web", "-n", NS, "-o", "json"], None)?,
        )?;
        let Some(ip) = ing["status"]["loadBalancer"]["ingress"][0]["ip"].as_str() else {
            return Ok(None);
        };
        let listeners = tier.compute("GET", "_emulator/listeners", None)?;
        let items = listeners.as_array().cloned().unwrap_or_else(|| {
            listeners["listeners"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        });
        Ok(items
            .iter()
            .find(|l| l["ipAddress"] == ip && l["port"] == 80)
            .and_then(|l| l["localAddr"].as_str().map(str::to_string)))
    })
    .with_context(|| tier.logs())?;
    tier.kubectl(
        &[
            "rollout",
            "status",
            "deployment/web",
            "-n",
            NS,
            "--timeout=180s",
        ],
        None,
    )
    .with_context(|| tier.logs())?;
    wait_for("every endpoint HEALTHY", DEADLINE, || {
        let h = tier.neg_health()?;
        Ok((h.len() == replicas as usize && h.iter().all(|(_, s)| s == "HEALTHY")).then_some(()))
    })
    .with_context(|| tier.logs())?;
    Ok(Some((tier, socket)))
}

/// Serves `replicas` Pods, then rolls them out to a new image under load; the load's tally.
fn rollout(name: &str, replicas: u32, gated: bool) -> Result<Option<Tally>> {
    let Some((tier, socket)) = serve(replicas, gated)? else {
        return Ok(None);
    };
    let load = Load::start(
        &socket,
        HOST,
        CONNECTIONS,
        1_000_000,
        Duration::from_secs(600),
    );
    wait_for("the first answers", DEADLINE, || {
        Ok((load.done() >= 50).then_some(()))
    })?;
    tier.kubectl(
        &[
            "set",
            "image",
            "deployment/web",
            "web=example/web:2",
            "-n",
            NS,
        ],
        None,
    )?;
    tier.kubectl(
        &[
            "rollout",
            "status",
            "deployment/web",
            "-n",
            NS,
            "--timeout=300s",
        ],
        None,
    )
    .with_context(|| tier.logs())?;
    // The old Pods' preStop sleeps end and the kubelet deletes them.
    wait_for("only the new Pods left", DEADLINE, || {
        let out = tier.kubectl(&["get", "pods", "-n", NS, "-o", "name"], None)?;
        Ok((out.lines().count() == replicas as usize).then_some(()))
    })
    .with_context(|| tier.logs())?;
    wait_for("enough requests", DEADLINE, || {
        Ok((load.done() >= MIN_REQUESTS).then_some(()))
    })?;
    let tally = load.finish();
    eprintln!(
        "{name}: {} of {} requests failed ({:?}); answers by Pod {:?}; samples {:?}",
        tally.failed,
        tally.ok + tally.failed,
        tally.failures,
        tally.by_pod,
        tally.samples
    );
    if gated && tally.failed > 0 {
        eprintln!("{}", tier.logs());
    }
    let new_pods = tally.by_pod.len();
    if new_pods < replicas as usize + 1 {
        bail!(
            "the load saw only Pods {:?}: no new Pod served",
            tally.by_pod
        );
    }
    Ok(Some(tally))
}

fn run(name: &str, replicas: u32, gated: bool) -> Option<Tally> {
    if !harness::is_root() {
        eprintln!(
            "SKIPPED: {name} needs root (its Pod range lives in a private network namespace)"
        );
        return None;
    }
    if let Some(passed) = harness::in_private_netns(name) {
        assert!(
            passed,
            "{name} failed inside its network namespace (output above)"
        );
        return None;
    }
    rollout(name, replicas, gated).unwrap_or_else(|e| panic!("{name}: {e:#}"))
}

#[test]
fn one_replica_rollout_behind_the_gate_loses_no_request() {
    let name = "one_replica_rollout_behind_the_gate_loses_no_request";
    if let Some(t) = run(name, 1, true) {
        assert!(t.ok + t.failed >= MIN_REQUESTS, "{t:?}");
        assert_eq!(
            t.failed, 0,
            "requests failed during the rollout: {:?}",
            t.samples
        );
    }
}

#[test]
fn two_replica_rollout_behind_the_gate_loses_no_request() {
    let name = "two_replica_rollout_behind_the_gate_loses_no_request";
    if let Some(t) = run(name, 2, true) {
        assert!(t.ok + t.failed >= MIN_REQUESTS, "{t:?}");
        assert_eq!(
            t.failed, 0,
            "requests failed during the rollout: {:?}",
            t.samples
        );
    }
}

/// The negative control: without the gate, the same rollout must lose requests.
#[test]
fn rollout_without_the_gate_loses_requests() {
    let name = "rollout_without_the_gate_loses_requests";
    if let Some(t) = run(name, 2, false) {
        assert!(t.ok + t.failed >= MIN_REQUESTS, "{t:?}");
        assert!(
            t.failed > 0,
            "no request failed without the readiness gate: the scenario cannot tell a \
             protected rollout from an unprotected one ({t:?})"
        );
    }
}
