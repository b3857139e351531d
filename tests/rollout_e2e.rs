//! End to end: zero-downtime rollouts behind the readiness gate
//! `cloud.google.com/load-balancer-neg-ready` (issue 7's "Done when"; reference 000 "Pod
//! readiness"; docs/readiness-gates.md).
//!
//! Every test starts the real binaries (local Kubernetes API with its kubelet, Compute emulator
//! with its data plane and health checker, operator), serves one Service `web` through one
//! Ingress, and drives real HTTP traffic through the load balancer's loopback socket.
//!
//! The load balancer's health check (BackendConfig) is deliberately slower than the Pods'
//! readiness probe: probe every 1 s, health check every [`HC_INTERVAL_SEC`] s with a healthy
//! threshold of 2, so a new endpoint is HEALTHY about `HC_INTERVAL_SEC` s after it is attached,
//! while its readiness probe passes within about a second. That gap is the window in which a
//! rollout that trusts the probe alone outruns the load balancer (ingress-gce #583, #769, #1718).

#[path = "rollout_e2e/pod_clock.rs"]
mod pod_clock;
#[path = "rollout_e2e/rig.rs"]
mod rig;
mod support;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use support::load::{Load, Tally};
use support::*;

use pod_clock::{DetachClock, PodClock};
use rig::*;

const NS: &str = "default";
/// Host header of the load generator's requests (the Ingress has only a default backend).
const HOST: &str = "web.example";
/// The condition type of the readiness gate.
const GATE: &str = "cloud.google.com/load-balancer-neg-ready";
/// Load balancer health check interval (seconds); see the module docs.
const HC_INTERVAL_SEC: u64 = 6;
/// Client connections of the load generator.
const CONNECTIONS: usize = 4;
/// The lower bound on requests sent during a rollout.
const MIN_REQUESTS: u64 = 2_000;
/// Pods behind the Service (replaced one at a time).
const REPLICAS: usize = 2;
/// The lower bound on requests sent during a one-replica rollout (issue 40).
const MIN_REQUESTS_ONE_REPLICA: u64 = 1_000;
/// The local kubelet's and EndpointSlice controller's lags in the one-replica test (ms), as on
/// a loaded cluster: wide enough that the operator syncs at least once between a Pod's gate
/// turning True and its EndpointSlice entry saying ready, the window issue 40 found.
const LOADED_CLUSTER_LAGS: [&str; 4] = [
    "--kubelet-status-delay-ms",
    "100",
    "--endpoint-slice-delay-ms",
    "500",
];

/// The Pods' preStop sleep. The endpoint detach (Pod deletion -> operator -> NEG -> data plane)
/// takes well under a second on an idle machine, but a 2 s sleep (1 s left after the 1 s
/// `drainingTimeoutSec`) once let an old Pod exit while it still got traffic when the whole test
/// suite loaded both cores; 4 s keeps the recommended margin under load.
const PRE_STOP_SEC: u64 = 4;

// ---------------------------------------------------------------------------------------------
// The rollout

/// What one rollout under load produced.
struct Rollout {
    tally: Tally,
    news: Vec<String>,
    /// `detachNetworkEndpoints` calls that carried each Pod's endpoint, old and new Pods, from
    /// the emulator's call record (`/_emulator/calls`), over the whole test.
    detach_calls: Vec<(String, u64)>,
    /// Pod creation -> gate True, per new Pod (seconds).
    gate_secs: Vec<(String, f64)>,
    /// Pod deletion -> endpoint detached from the NEG, per old Pod (seconds).
    detach_secs: Vec<(String, f64)>,
}

/// Starts the system with `operator_flags`, then runs a rolling update of every Pod while the
/// load generator sends requests through the load balancer, and keeps the load on until the
/// old Pods are gone, every new Pod has answered and at least [`MIN_REQUESTS`] were answered
/// (each bounded by a deadline).
fn rollout_under_load(label: &str, operator_flags: &[&str]) -> Result<Rollout> {
    rollout_under_load_with(label, operator_flags, REPLICAS, &[], MIN_REQUESTS)
}

/// [`rollout_under_load`] with `replicas` Pods, extra fake-kube-apiserver flags, and at least
/// `min_requests` answered.
fn rollout_under_load_with(
    label: &str,
    operator_flags: &[&str],
    replicas: usize,
    apiserver_args: &[&str],
    min_requests: u64,
) -> Result<Rollout> {
    let rig = Rig::start_with(operator_flags, replicas, apiserver_args)?;
    let detach = DetachClock::start(&rig.sys.compute_url, &rig.neg);
    let olds = rig.pod_names("old", replicas);
    let old_ips: Vec<(String, String)> = olds
        .iter()
        .map(|p| Ok((p.clone(), rig.clock.ip(p)?)))
        .collect::<Result<_>>()?;

    let load = Load::start(
        &rig.socket,
        HOST,
        CONNECTIONS,
        1_000_000,
        Duration::from_secs(150),
    );
    let news = match rig.rolling_update() {
        Ok(news) => news,
        Err(e) => {
            let tally = load.finish();
            bail!("rolling update failed ({tally:?}): {e:#}");
        }
    };
    let wanted: BTreeSet<String> = news.iter().cloned().collect();
    let settled = wait_for(
        "every new Pod to answer and enough requests",
        Duration::from_secs(60),
        || {
            let done = load.done();
            let seen = load.pods_seen();
            if done >= min_requests && wanted.is_subset(&seen) {
                Ok(Some(()))
            } else {
                Err(anyhow!("{done} answered, Pods seen {seen:?}"))
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
        // Reported by the caller's assertions on the tally (every new Pod, enough requests).
        eprintln!("[{label}] load did not settle: {e:#}");
    }

    let gate_secs: Vec<(String, f64)> = news
        .iter()
        .filter_map(|p| {
            let t = rig.clock.times(p);
            Some((p.clone(), (t.gate_true? - t.created?).as_secs_f64()))
        })
        .collect();
    let detach_secs: Vec<(String, f64)> = old_ips
        .iter()
        .filter_map(|(p, ip)| {
            let deleting = rig.clock.times(p).deleting?;
            let gone = detach.detached_at(ip)?;
            Some((
                p.clone(),
                gone.saturating_duration_since(deleting).as_secs_f64(),
            ))
        })
        .collect();
    let calls = rig.sys.compute_get("_emulator/calls")?;
    let detach_calls: Vec<(String, u64)> = old_ips
        .iter()
        .cloned()
        .chain(
            news.iter()
                .map(|p| Ok((p.clone(), rig.clock.ip(p)?)))
                .collect::<Result<Vec<_>>>()?,
        )
        .map(|(pod, ip)| {
            let n = calls["networkEndpoints"]["detachNetworkEndpoints"][format!("{ip}:8080")]
                .as_u64()
                .unwrap_or(0);
            (pod, n)
        })
        .collect();
    eprintln!("[{label}] detachNetworkEndpoints calls per Pod: {detach_calls:?}");
    eprintln!("[{label}] Pod creation -> gate True (s): {gate_secs:?}");
    eprintln!("[{label}] Pod deletion -> endpoint detached from the NEG (s): {detach_secs:?}");
    Ok(Rollout {
        tally,
        news,
        detach_calls,
        gate_secs,
        detach_secs,
    })
}

/// Issue 7: a rolling update of every Pod under continuous load, with the readiness gate
/// controller on (the default), loses no request. A new Pod is Ready only once the load
/// balancer reports it HEALTHY, so the old Pod is deleted only after the load balancer sends
/// traffic to its replacement; on deletion the endpoint is detached while the preStop sleep keeps
/// the old server answering.
#[test]
fn rolling_update_with_the_readiness_gate_loses_no_request() -> Result<()> {
    let r = rollout_under_load("gate enforced", &[])?;
    let total = r.tally.ok + r.tally.failed;
    assert_eq!(
        r.tally.failed, 0,
        "failed requests during the rollout: {:?}, e.g. {:#?}",
        r.tally.failures, r.tally.samples
    );
    assert!(total >= MIN_REQUESTS, "only {total} requests were answered");
    for p in &r.news {
        assert!(
            r.tally.by_pod.get(p).is_some_and(|n| *n > 0),
            "new Pod {p} served no traffic: {:?}",
            r.tally.by_pod
        );
    }
    assert_eq!(
        r.gate_secs.len(),
        REPLICAS,
        "gate True seen for every new Pod"
    );
    assert_eq!(
        r.detach_secs.len(),
        REPLICAS,
        "detach seen for every old Pod"
    );
    assert_detached_only_when_deleted(&r);
    Ok(())
}

/// Issue 40: each Pod's endpoint was detached only when its Pod was deleted: once for each old
/// Pod, never for a new one. The old Pods are the first Pods of the Service, so this also says
/// that no Pod was detached when its gate opened (the operator used to detach a Pod in the
/// moment between its gate turning True and its EndpointSlice entry saying ready, and attach it
/// again UNHEALTHY).
fn assert_detached_only_when_deleted(r: &Rollout) {
    for (pod, calls) in &r.detach_calls {
        let want = u64::from(pod.starts_with("old-"));
        assert_eq!(
            *calls, want,
            "Pod {pod}: {calls} detachNetworkEndpoints calls carried its endpoint, want {want} (its deletion only): {:?}",
            r.detach_calls
        );
    }
}

/// Issue 40: a one-replica rollout (`maxSurge: 1, maxUnavailable: 0`) under steady traffic
/// loses no request, with the local kubelet and EndpointSlice controller lagging as on a loaded
/// cluster ([`LOADED_CLUSTER_LAGS`]). With one replica nothing hides the window between the new
/// Pod's gate turning True and its EndpointSlice entry saying ready: the old Pod is deleted as
/// soon as the new one is Ready, so if the operator detached the new Pod's HEALTHY endpoint in
/// that window, it came back UNHEALTHY and the load balancer had no HEALTHY endpoint for a
/// health-check cycle (502s; 3984 of 5616 requests failed against a real cluster).
#[test]
fn one_replica_rolling_update_with_the_readiness_gate_loses_no_request() -> Result<()> {
    let r = rollout_under_load_with(
        "one replica, gate enforced",
        &[],
        1,
        &LOADED_CLUSTER_LAGS,
        MIN_REQUESTS_ONE_REPLICA,
    )?;
    let total = r.tally.ok + r.tally.failed;
    assert_eq!(
        r.tally.failed, 0,
        "failed requests during the one-replica rollout: {:?}, e.g. {:#?}",
        r.tally.failures, r.tally.samples
    );
    assert!(
        total >= MIN_REQUESTS_ONE_REPLICA,
        "only {total} requests were answered"
    );
    assert!(
        r.tally.by_pod.get("new-0").is_some_and(|n| *n > 0),
        "the new Pod served no traffic: {:?}",
        r.tally.by_pod
    );
    assert_eq!(r.gate_secs.len(), 1, "gate True seen for the new Pod");
    assert_detached_only_when_deleted(&r);
    Ok(())
}

/// Issue 7: the same rollout, manifests and timings, with the readiness gate controller in
/// bypass mode (`--readiness-gates=false`: gated Pods get the condition True at once, so Ready
/// comes from the readiness probe alone, as on a cluster without the gate). The rollout then
/// deletes each old Pod about a second after its replacement was created, while the load balancer
/// needs about `HC_INTERVAL_SEC` s (two probes) to see the replacement HEALTHY; once the last old
/// endpoint is detached no HEALTHY endpoint is left and the load balancer answers 502
/// (`failed_to_pick_backend`) until the new Pods pass their health checks. The contrast with
/// [`rolling_update_with_the_readiness_gate_loses_no_request`] shows the test can fail and that
/// the gate is what prevents the failures: nothing else differs between the two runs.
#[test]
fn rolling_update_without_the_readiness_gate_fails_requests() -> Result<()> {
    let r = rollout_under_load("gate bypassed", &["--readiness-gates=false"])?;
    assert!(
        r.tally.failed > 0,
        "expected failed requests when the gate does not wait for load balancer health: {:?}",
        r.tally
    );
    assert!(
        r.tally.failures.contains_key("502"),
        "the failures are the load balancer's 502 (no HEALTHY endpoint): {:?} {:#?}",
        r.tally.failures,
        r.tally.samples
    );
    Ok(())
}

/// Issue 7: a stalled rollout. A new Pod whose load balancer health check path fails (its
/// readiness probe on `/ready` passes, `/healthz` answers 500) is attached to the NEG but stays
/// UNHEALTHY: its gate condition stays False with reason `LoadBalancerNegNotReady` and a message
/// saying what it waits for, `kubectl describe pod` shows the gate False, and it receives no
/// traffic while the old Pods keep serving. After `--neg-ready-timeout` (shortened to 20 s) the
/// gate opens with reason `LoadBalancerNegTimeout` and a Warning Event, and it still gets no
/// traffic (the load balancer sends only to HEALTHY endpoints).
#[test]
fn a_pod_failing_its_health_check_stalls_until_the_timeout() -> Result<()> {
    const TIMEOUT_SEC: i64 = 20;
    let timeout = TIMEOUT_SEC.to_string();
    let rig = Rig::start(&["--neg-ready-timeout", &timeout])?;
    let sys = &rig.sys;
    sys.apply(&pod("stalled", Some("/healthz")))?;

    let condition = |sys: &System| -> Result<Value> {
        let p = sys.get_json(&["pod", "stalled"])?;
        Ok(p["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == GATE)
            .cloned()
            .unwrap_or(Value::Null))
    };
    let waiting = wait_for("the gate condition False", DEADLINE, || {
        let c = condition(sys)?;
        Ok((c["status"] == "False").then_some(c))
    })
    .with_context(|| sys.logs())?;
    assert_eq!(waiting["reason"], "LoadBalancerNegNotReady", "{waiting}");
    let message = waiting["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Waiting for pod to become healthy in at least one of the NEG(s): [")
            && message.contains(&rig.neg),
        "message: {message}"
    );

    // What the stall looks like, read at once: the gate opens by itself TIMEOUT_SEC after
    // creation, and the health checks below take a good part of that on a loaded machine.
    let describe = sys.kubectl_ok(&["describe", "pod", "stalled"])?;
    let gates = describe
        .split("Readiness Gates:")
        .nth(1)
        .context("describe shows no Readiness Gates")?;
    let gate_line = gates
        .lines()
        .find(|l| l.contains(GATE))
        .context("describe lists no gate")?;
    assert!(gate_line.trim_end().ends_with("False"), "{describe}");
    assert!(
        !sys.get_json(&["pod", "stalled"])?["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True"),
        "the stalled Pod must not be Ready"
    );

    // The load balancer did try it: the endpoint is attached and UNHEALTHY.
    let ip = rig.clock.ip("stalled")?;
    wait_for(
        "the stalled Pod's endpoint to be UNHEALTHY",
        DEADLINE,
        || {
            Ok(
                (neg_endpoints(sys, &rig.neg)?.get(&ip).map(String::as_str) == Some("UNHEALTHY"))
                    .then_some(()),
            )
        },
    )?;

    // No traffic to it while the old Pods keep serving.
    let no_traffic = |phase: &str| -> Result<()> {
        let load = Load::start(&rig.socket, HOST, 2, 300, Duration::from_secs(60));
        while load.done() < 300 && !load.all_finished() {
            std::thread::sleep(Duration::from_millis(50));
        }
        let t = load.finish();
        assert_eq!(t.failed, 0, "{phase}: failures {:?}", t.samples);
        assert!(
            !t.by_pod.contains_key("stalled"),
            "{phase}: the stalled Pod got traffic: {:?}",
            t.by_pod
        );
        eprintln!("[stalled] {phase}: answers per Pod {:?}", t.by_pod);
        Ok(())
    };
    no_traffic("before the timeout")?;

    // The timeout rule opens the gate, no earlier than the timeout after creation.
    let opened = wait_for("the gate to open by timeout", DEADLINE, || {
        let c = condition(sys)?;
        Ok((c["status"] == "True").then_some(c))
    })
    .with_context(|| sys.logs())?;
    assert_eq!(opened["reason"], "LoadBalancerNegTimeout", "{opened}");
    let created = sys.get_json(&["pod", "stalled"])?["metadata"]["creationTimestamp"]
        .as_str()
        .map(str::to_string)
        .context("creationTimestamp")?;
    let opened_at = opened["lastTransitionTime"]
        .as_str()
        .context("lastTransitionTime")?;
    let waited = rfc3339_secs(opened_at)? - rfc3339_secs(&created)?;
    assert!(
        waited >= TIMEOUT_SEC - 1,
        "the gate opened {waited}s after creation, before the {TIMEOUT_SEC}s timeout: {opened}"
    );
    let t = rig.clock.times("stalled");
    if let (Some(c), Some(g)) = (t.created, t.gate_true) {
        eprintln!(
            "[stalled] Pod creation -> gate True by timeout: {:.2}s",
            (g - c).as_secs_f64()
        );
    }
    let events = wait_for("the LoadBalancerNegTimeout Event", DEADLINE, || {
        let ev = sys.events_for(NS, "Pod", "stalled")?;
        Ok(ev
            .iter()
            .any(|e| e.starts_with("Warning LoadBalancerNegTimeout"))
            .then_some(ev))
    })?;
    let describe = sys.kubectl_ok(&["describe", "pod", "stalled"])?;
    assert!(
        describe.contains("LoadBalancerNegTimeout"),
        "describe shows the timeout Event: {describe}\n{events:?}"
    );
    no_traffic("after the timeout")?;
    Ok(())
}

/// Seconds since the epoch of an RFC 3339 timestamp (`2026-01-02T03:04:05Z`).
fn rfc3339_secs(s: &str) -> Result<i64> {
    Ok(chrono::DateTime::parse_from_rfc3339(s)
        .with_context(|| format!("bad timestamp {s:?}"))?
        .timestamp())
}
