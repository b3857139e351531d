//! Ingress created -> first 200 through its load balancer (issues 18 and 26).
//!
//! One at a time, the clock starts just before the benchmark's own client sends the create
//! request to the API server ([`super::create`]: kubectl's start-up is the user's tool, not the
//! controller); all at once, just before `kubectl apply` of the 50 (its start-up included). It
//! stops at the first `GET /` with the Ingress's host that answers 200
//! through the emulator's listener of its HTTP forwarding rule. Listeners are found from the
//! emulator's `/_emulator/listeners`; a rule belongs to Ingress `default/NAME` when its name
//! holds `-default-NAME-` (the v2 frontend naming, `k8s2-fr-<uid8>-<ns>-<name>-<hash>`).
//! Polling every 20 ms.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use serde_json::Value;

use super::create::Creator;
use super::support::System;

/// Ingress `name` routing host `NAME.example` to Service `svc`.
pub fn ingress_yaml(name: &str, svc: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}}}\n\
         spec: {{ingressClassName: gce, rules: [{{host: {name}.example, http: {{paths: \
         [{{path: /, pathType: Prefix, backend: {{service: {{name: {svc}, port: {{number: 80}}}}}}}}]}}}}]}}\n---\n"
    )
}

/// Waits until every Ingress of `names` answers 200 and returns the seconds from `start` to
/// each one's first 200.
pub fn first_200(
    sys: &System,
    names: &[String],
    start: Instant,
    deadline: Duration,
) -> Result<Vec<f64>> {
    let mut done: BTreeMap<&str, f64> = BTreeMap::new();
    while done.len() < names.len() {
        if start.elapsed() > deadline {
            bail!(
                "only {} of {} Ingresses answered 200 within {deadline:?}{}",
                done.len(),
                names.len(),
                sys.logs()
            );
        }
        let listeners = sys.compute_get("_emulator/listeners")?;
        let listeners: &[Value] = listeners["listeners"].as_array().map_or(&[], Vec::as_slice);
        for name in names {
            if done.contains_key(name.as_str()) {
                continue;
            }
            let needle = format!("-default-{name}-");
            let socket = listeners.iter().find_map(|l| {
                let rule = l["forwardingRule"].as_str()?;
                (l["port"].as_u64() == Some(80) && rule.contains(&needle))
                    .then(|| l["localAddr"].as_str())
                    .flatten()
            });
            let Some(socket) = socket else { continue };
            if let Ok((200, _)) = sys.http_get(socket, &format!("{name}.example"), "/") {
                done.insert(name, start.elapsed().as_secs_f64());
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut times: Vec<f64> = done.into_values().collect();
    times.sort_by(f64::total_cmp);
    Ok(times)
}

/// Nearest-rank percentile of sorted `times`.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// The lower bounds of one Ingress's first 200 under the emulator's current slow-cloud profile
/// (`GET /_emulator/slow-cloud`), `(its Service is new, its Service already has a backend)`.
///
/// The longest chain of resources that reference each other is health check -> backend
/// service -> URL map -> target proxy -> forwarding rule: 5 global inserts in a row, each but the
/// last waited for (its Operation PENDING + RUNNING, at least one `wait` call) before the next
/// starts; the last serves traffic as soon as the emulator commits it. On a Service that already
/// has its backend, the chain is URL map -> proxy -> rule, 3 inserts. The NEG, its endpoints and
/// the address run beside the chain and are shorter.
pub fn chain_lower_bounds(sys: &System) -> Result<(f64, f64)> {
    let p = sys.compute_get("_emulator/slow-cloud")?;
    let p = if p["profile"].is_object() {
        &p["profile"]
    } else {
        &p
    };
    let ms = |v: &Value| v.as_f64().unwrap_or(0.0);
    let insert = ms(&p["latencyMs"]["insert"]);
    let global = &p["operations"]["global"];
    let op = ms(&global["pendingMs"]) + ms(&global["runningMs"]);
    let wait = if op > 0.0 {
        ms(&p["latencyMs"]["operationWait"])
    } else {
        0.0
    };
    let bound = |steps: f64| ((steps - 1.0) * (insert + op.max(wait)) + insert) / 1000.0;
    Ok((bound(5.0), bound(3.0)))
}

/// `(one at a time, all at once)` rows: `seq` Ingresses created one after the other (each
/// waited for before the next), then `burst` created by one `kubectl apply`.
pub fn rows(
    sys: &System,
    services: usize,
    seq: usize,
    burst: usize,
    deadline: Duration,
) -> Result<Vec<String>> {
    let (new_bound, old_bound) = chain_lower_bounds(sys)?;
    let mut rows = Vec::new();
    let row = |label: String, t: &[f64], bound: f64| {
        format!(
            "| {label} | {:.2} s | {:.2} s | {:.2} s | {:.2} s | {bound:.2} s | {} |",
            percentile(t, 0.5),
            percentile(t, 0.9),
            percentile(t, 0.99),
            percentile(t, 1.0),
            if bound > 0.0 {
                format!("{:.2}x", percentile(t, 0.5) / bound)
            } else {
                String::new()
            },
        )
    };
    // Ingress i routes to svc-(i % services): the first `services` are the first of their
    // Service (a new backend), the rest reuse one.
    let (mut new, mut old) = (Vec::new(), Vec::new());
    let creator = if seq > 0 {
        Some(Creator::new(sys)?)
    } else {
        None
    };
    for i in 0..seq {
        let creator = creator.as_ref().expect("made when seq > 0");
        let name = format!("one-{i}");
        let (start, accepted) = creator.create_ingress(&name, &format!("svc-{}", i % services))?;
        let t = first_200(sys, std::slice::from_ref(&name), start, deadline)?;
        // Wall-clock times, to line up with the processes' logs (`BENCH_LOGS`) when profiling.
        let unix = |at: Instant| {
            let ago = at.elapsed();
            (std::time::SystemTime::now() - ago)
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
        };
        eprintln!(
            "first200: {name} create sent at {:.3} (unix), answered after {accepted:.3} s, first 200 after {:.3} s",
            unix(start),
            t[0]
        );
        if i < services {
            new.extend(t);
        } else {
            old.extend(t);
        }
    }
    eprintln!("first200: one at a time, new Service: {new:.2?}; existing Service: {old:.2?}");
    for (times, what, bound) in [
        (&mut new, "new", new_bound),
        (&mut old, "existing", old_bound),
    ] {
        if !times.is_empty() {
            times.sort_by(f64::total_cmp);
            let label = format!("{} created one at a time, {what} Service", times.len());
            rows.push(row(label, times, bound));
        }
    }
    if burst > 0 {
        let names: Vec<String> = (0..burst).map(|i| format!("burst-{i}")).collect();
        let yaml: String = names
            .iter()
            .enumerate()
            .map(|(i, n)| ingress_yaml(n, &format!("svc-{}", (seq + i) % services)))
            .collect();
        let start = Instant::now();
        sys.apply(&yaml)?;
        let times = first_200(sys, &names, start, deadline)?;
        eprintln!("first200: at once: {times:.2?}");
        let bound = if seq >= services {
            old_bound
        } else {
            new_bound
        };
        rows.push(row(format!("{burst} created at once"), &times, bound));
    }
    Ok(rows)
}
