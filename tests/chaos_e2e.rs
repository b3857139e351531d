//! A failing cloud and a killed operator (docs/reliability.md): with 20 % of Compute calls
//! failing (429, 500, 503, connections that close without an answer as a timeout does,
//! responses lost after the server acted) and slow Operations, Ingresses converge, serve, and
//! are all deleted, while the operator is SIGKILLed at random points of both phases; every
//! restart converges with no duplicated resource, and at the end every collection in every scope
//! of the project is empty. The counts are printed.
//!
//! `make test` runs it with 8 Ingresses and 10 kills (5 per phase); `make chaos` with 100
//! Ingresses and 20 kills (`CHAOS_INGRESSES`, `CHAOS_KILLS` per phase, `CHAOS_SEED` to replay
//! kill points).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use support::*;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Fault rules: the first matching rule whose dice roll hits applies, so each probability is
/// conditional on the rules before it missing. Shares of all calls: 429 5 %, 500 3 %, 503 3 %,
/// lost response (the change is made, the client gets 503) 4 %, no answer after 1.5 s (a
/// timeout) 3 %, lost response with no answer 2 %: 20 % fail. Then 10 % of the rest get an
/// Operation that stays RUNNING for 2 s.
fn fault_rules() -> Value {
    let shares: [(Value, f64); 6] = [
        (json!({"code": 429}), 0.05),
        (json!({"code": 500}), 0.03),
        (json!({"code": 503}), 0.03),
        (json!({"code": 503, "lostResponse": true}), 0.04),
        (json!({"drop": true, "latencyMs": 1500}), 0.03),
        (json!({"drop": true, "lostResponse": true}), 0.02),
    ];
    let mut left = 1.0;
    let mut rules = Vec::new();
    for (mut rule, share) in shares {
        rule["method"] = json!("compute.*");
        rule["probability"] = json!(share / left);
        left -= share;
        rules.push(rule);
    }
    rules.push(json!({"method": "compute.*", "operationLatencyMs": 2000, "probability": 0.1}));
    Value::Array(rules)
}

fn set_faults(sys: &System, on: bool) -> Result<()> {
    sys.compute_delete("_emulator/faults")?;
    if on {
        sys.compute_post("_emulator/faults", &fault_rules())?;
    }
    Ok(())
}

/// Calls each fault rule affected so far, by what it does.
fn fault_hits(sys: &System, into: &mut BTreeMap<String, u64>) -> Result<()> {
    let v = sys.compute_get("_emulator/faults")?;
    for r in v["faults"].as_array().into_iter().flatten() {
        let what = match (
            r["code"].as_u64(),
            r["drop"].as_bool().unwrap_or(false),
            r["lostResponse"].as_bool().unwrap_or(false),
        ) {
            (Some(c), _, false) => format!("error {c}"),
            (Some(c), _, true) => format!("lost response, then {c}"),
            (None, true, false) => "no answer after 1.5 s".into(),
            (None, true, true) => "lost response, then no answer".into(),
            (None, false, _) => "slow Operation (2 s)".into(),
        };
        *into.entry(what).or_default() += r["hits"].as_u64().unwrap_or(0);
    }
    Ok(())
}

fn workload(ingresses: usize, services: usize) -> String {
    let mut y = String::new();
    for s in 0..services {
        let _ = write!(
            y,
            "apiVersion: v1\nkind: Service\nmetadata: {{name: svc-{s}}}\n\
             spec: {{type: NodePort, selector: {{app: svc-{s}}}, ports: [{{port: 80, targetPort: 8080}}]}}\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata: {{name: svc-{s}-0, labels: {{app: svc-{s}}}, \
             annotations: {{local.gclb-operator.dev/run: echo}}}}\n\
             spec: {{containers: [{{name: echo, image: echo, ports: [{{containerPort: 8080}}]}}]}}\n---\n"
        );
    }
    for i in 0..ingresses {
        let _ = write!(
            y,
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: ing-{i}}}\n\
             spec: {{ingressClassName: gce, rules: [{{host: ing-{i}.example, http: {{paths: \
             [{{path: /, pathType: Prefix, backend: {{service: {{name: svc-{}, port: {{number: 80}}}}}}}}]}}}}]}}\n---\n",
            i % services
        );
    }
    y
}

/// Ingresses in `default`: (name, load balancer IP if any).
fn ingresses(sys: &System) -> Result<Vec<(String, Option<String>)>> {
    let list = sys.get_json(&["ingress", "-n", "default"])?;
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            (
                i["metadata"]["name"].as_str().unwrap_or("").to_string(),
                i["status"]["loadBalancer"]["ingress"][0]["ip"]
                    .as_str()
                    .map(str::to_string),
            )
        })
        .collect())
}

/// Every resource of the project, `collection -> names` (keys `projects/p/{scope}/{coll}/{name}`),
/// except what a new project starts with (the default network and its four firewall rules).
fn resources(sys: &System) -> Result<BTreeMap<String, Vec<String>>> {
    Ok(resources_in(&sys.compute_get("_emulator/state")?))
}

fn resources_in(state: &Value) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for key in state["resources"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        let parts: Vec<&str> = key.split('/').collect();
        if parts.len() < 4 || parts[1] != PROJECT {
            continue;
        }
        let (coll, name) = (parts[parts.len() - 2], parts[parts.len() - 1]);
        let scope = parts[2..parts.len() - 2].join("/");
        // The default network and its rules, and the Nodes' instances (the local kubelet
        // registers them), are not the operator's.
        let preexisting = (coll == "networks" && name == "default")
            || (coll == "firewalls" && name.starts_with("default-allow-"))
            || coll == "instances"
            || parts.len() == 2;
        if !preexisting {
            out.entry(format!("{scope}/{coll}"))
                .or_default()
                .push(name.to_string());
        }
    }
    out
}

/// Every resource name that existed at any moment, per collection: the emulator's state (an
/// admin call, never faulted) read every 200 ms until `stop`.
fn watch_names(
    compute_url: String,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<BTreeMap<String, BTreeSet<String>>> {
    std::thread::spawn(move || {
        let http = reqwest::blocking::Client::new();
        let mut seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        while !stop.load(Ordering::SeqCst) {
            let state = http
                .get(format!("{compute_url}_emulator/state"))
                .send()
                .and_then(|r| r.json::<Value>());
            if let Ok(state) = state {
                for (coll, names) in resources_in(&state) {
                    seen.entry(coll).or_default().extend(names);
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        seen
    })
}

/// Kills the operator `kills` times at random points of the phase's work: after write number
/// k of the phase, k drawn from 1 to `writes` (about the phase's Compute writes; counted by the
/// emulator, an admin call that is never faulted), so kills land mid-reconcile all through the
/// phase. If the work is done before a point, that kill hits an idle operator and `idle_kills`
/// counts it. Then lets the last one run until `phase_done` holds. Returns the operator running
/// at the end.
#[allow(clippy::too_many_arguments)]
fn with_kills(
    sys: &System,
    rng: &mut rand::rngs::StdRng,
    kills: usize,
    writes: u64,
    mut op: Proc,
    restarts: &mut usize,
    idle_kills: &mut usize,
    what: &str,
    deadline: Duration,
    mut phase_done: impl FnMut() -> Result<bool>,
) -> Result<Proc> {
    let start = Instant::now();
    let first = sys.mutating_calls()?;
    let mut points: Vec<u64> = (0..kills).map(|_| rng.random_range(1..=writes)).collect();
    points.sort_unstable();
    for point in points {
        let after = first + point;
        while sys.mutating_calls()? < after {
            // Work can run out before the last kills: then they hit an idle operator.
            if phase_done()? {
                *idle_kills += 1;
                break;
            }
            if start.elapsed() > deadline {
                bail!(
                    "{what}: no Compute write for the next kill within {deadline:?}\n{}",
                    op.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(op); // SIGKILL
        *restarts += 1;
        op = sys.spawn_operator(&[], &format!("operator-{restarts}"))?;
    }
    while !phase_done()? {
        if start.elapsed() > deadline {
            bail!("{what}: not done after {deadline:?}\n{}", op.log_text());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Ok(op)
}

#[test]
fn failing_cloud_and_killed_operator_converge_without_leak_or_duplicate() -> Result<()> {
    let n = env_usize("CHAOS_INGRESSES", 8);
    let kills = env_usize("CHAOS_KILLS", 5);
    let services = n.clamp(1, 4);
    let seed = std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    eprintln!("chaos: {n} Ingresses, {kills} kills per phase, CHAOS_SEED={seed}");
    // Per phase; the defaults keep the whole test inside nextest's 10 minutes.
    let deadline = Duration::from_secs(env_usize("CHAOS_DEADLINE_SECS", 240) as u64);

    let sys = System::start(&["--port-map", "80=0,443=0"])?;
    sys.apply_crds()?;
    sys.apply_basics()?;
    let mut restarts = 0;
    let mut idle_kills = 0;
    let mut hits = BTreeMap::new();
    set_faults(&sys, true)?;
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch_names(sys.compute_url.clone(), stop.clone());
    sys.apply(&workload(n, services))?;
    let op = sys.spawn_operator(&[], "operator-0")?;

    // Phase 1: converge under faults, with kills.
    let t1 = Instant::now();
    let op = with_kills(
        &sys,
        &mut rng,
        kills,
        // Per Ingress: address, URL map, proxy, forwarding rule; per Service port: health
        // check, NEG, backend service, endpoints; the firewall rule.
        (4 * n + 4 * (services + 1) + 1) as u64,
        op,
        &mut restarts,
        &mut idle_kills,
        "convergence",
        deadline,
        || {
            let all = ingresses(&sys)?;
            Ok(all.len() == n && all.iter().all(|(_, ip)| ip.is_some()))
        },
    )?;
    let converge_secs = t1.elapsed().as_secs_f64();

    // Inspect without faults (the test's own calls are not the operator's). Names are derived,
    // so a duplicate would be one more resource than the Ingresses need: count them.
    fault_hits(&sys, &mut hits)?;
    set_faults(&sys, false)?;
    let peak = resources(&sys)?;
    let count = |c: &str| peak.get(c).map_or(0, Vec::len);
    let mut problems = Vec::new();
    for coll in [
        "global/forwardingRules",
        "global/targetHttpProxies",
        "global/urlMaps",
        "global/addresses",
    ] {
        if count(coll) != n {
            problems.push(format!(
                "{coll}: {} for {n} Ingresses: {:?}",
                count(coll),
                peak.get(coll)
            ));
        }
    }
    // One backend service, health check and NEG per Service port, and the default backend's.
    for coll in [
        "global/backendServices",
        "global/healthChecks",
        &format!("zones/{ZONE}/networkEndpointGroups"),
    ] {
        if count(coll) != services + 1 {
            problems.push(format!(
                "{coll}: {} for {} Service ports: {:?}",
                count(coll),
                services + 1,
                peak.get(coll)
            ));
        }
    }
    if count("global/firewalls") != 1 {
        problems.push(format!("firewalls: {:?}", peak.get("global/firewalls")));
    }
    if !problems.is_empty() {
        bail!(
            "duplicated or missing resources after convergence:\n{}\n{}",
            problems.join("\n"),
            sys.logs()
        );
    }
    // Every load balancer serves its Ingress's Service.
    for (name, ip) in ingresses(&sys)? {
        let socket = sys.wait_for_listener(ip.as_deref().unwrap_or_default(), 80)?;
        sys.wait_for_response(&socket, &format!("{name}.example"), "/", 200, "svc-")?;
    }
    let peak_total: usize = peak.values().map(Vec::len).sum();

    // Phase 2: delete every Ingress under faults, with kills.
    set_faults(&sys, true)?;
    let t2 = Instant::now();
    sys.kubectl_ok(&[
        "delete",
        "ingress",
        "--all",
        "-n",
        "default",
        "--wait=false",
    ])?;
    let op = with_kills(
        &sys,
        &mut rng,
        kills,
        (4 * n + 3 * (services + 1) + 1) as u64,
        op,
        &mut restarts,
        &mut idle_kills,
        "deletion",
        deadline,
        || Ok(ingresses(&sys)?.is_empty()),
    )?;
    fault_hits(&sys, &mut hits)?;
    set_faults(&sys, false)?;
    // Deleting an Ingress removes its finalizer only after its own resources are gone; shared
    // ones (backend services of Services no Ingress uses) go with garbage collection.
    let start = Instant::now();
    let leaked = loop {
        let left = resources(&sys)?;
        if left.is_empty() || start.elapsed() > Duration::from_secs(90) {
            break left;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let delete_secs = t2.elapsed().as_secs_f64();
    stop.store(true, Ordering::SeqCst);
    let ever = watcher.join().expect("the state watcher");
    // Over the whole run, each Ingress had one name per collection and each Service port one:
    // a second name for the same thing, even if later collected, was a duplicate.
    let neg = format!("zones/{ZONE}/networkEndpointGroups");
    let mut duplicated = Vec::new();
    for (coll, want) in [
        ("global/forwardingRules", n),
        ("global/targetHttpProxies", n),
        ("global/urlMaps", n),
        ("global/addresses", n),
        ("global/backendServices", services + 1),
        ("global/healthChecks", services + 1),
        (neg.as_str(), services + 1),
        ("global/firewalls", 1),
    ] {
        let names = ever.get(coll).cloned().unwrap_or_default();
        if names.len() != want {
            duplicated.push(format!(
                "{coll}: {} names over the run, {want} expected: {names:?}",
                names.len()
            ));
        }
    }
    let ever_total: usize = ever.values().map(BTreeSet::len).sum();
    let calls = sys.compute_get("_emulator/calls")?;
    let injected: u64 = hits
        .iter()
        .filter(|(k, _)| !k.starts_with("slow"))
        .map(|(_, v)| v)
        .sum();
    println!(
        "chaos (CHAOS_SEED={seed}): {n} Ingresses over {services} Services; {restarts} operator kills (SIGKILL) and restarts ({idle_kills} after the phase's work was done)\n\
         Compute calls: {} mutating, {} reading; faults injected: {injected} failed calls {hits:?}\n\
         converged in {converge_secs:.0} s with {peak_total} resources ({ever_total} names over the whole run), {} duplicated; deleted in {delete_secs:.0} s; leaked: {}",
        calls["mutating"], calls["reading"],
        duplicated.len(),
        leaked.values().map(Vec::len).sum::<usize>()
    );
    drop(op);
    if !duplicated.is_empty() {
        bail!("duplicated over the run:\n{}", duplicated.join("\n"));
    }
    if !leaked.is_empty() {
        bail!(
            "leaked after every Ingress was deleted: {leaked:?}\n{}",
            sys.logs()
        );
    }
    assert!(
        restarts >= 2 * kills,
        "the operator was killed {restarts} times"
    );
    assert!(injected > 0, "no fault was injected: {hits:?}");
    Ok(())
}

/// Every first insert of every collection an Ingress needs acts and then loses its response
/// (the client gets 503 as if the server had failed): the operator's retry finds the resource
/// there (409) and carries on, and the load balancer ends with exactly one of each resource.
#[test]
fn inserts_whose_response_is_lost_are_reconciled_not_duplicated() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    sys.apply_crds()?;
    sys.apply_basics()?;
    let inserts = [
        "compute.globalAddresses.insert",
        "compute.healthChecks.insert",
        "compute.networkEndpointGroups.insert",
        "compute.backendServices.insert",
        "compute.urlMaps.insert",
        "compute.targetHttpProxies.insert",
        "compute.globalForwardingRules.insert",
        "compute.firewalls.insert",
    ];
    let rules: Vec<Value> = inserts
        .iter()
        .map(|m| json!({"method": m, "code": 503, "lostResponse": true, "count": 1}))
        .collect();
    sys.compute_post("_emulator/faults", &Value::Array(rules))?;
    sys.compute_delete("_emulator/calls")?;
    sys.apply(&workload(1, 1))?;
    sys.start_operator(&[])?;
    let ip = wait_for("the Ingress's IP", DEADLINE, || {
        Ok(ingresses(&sys)?.into_iter().find_map(|(_, ip)| ip))
    })?;
    let socket = sys.wait_for_listener(&ip, 80)?;
    sys.wait_for_response(&socket, "ing-0.example", "/", 200, "svc-")?;
    // Every rule was used up (a rule with `count` disappears when spent): each insert's first
    // call acted and lost its answer.
    let left = sys.compute_get("_emulator/faults")?;
    assert_eq!(left["faults"], json!([]), "unspent: {left}");
    let calls = sys.compute_get("_emulator/calls")?;
    let (_, metrics) = sys.http_get(
        sys.compute_url
            .trim_start_matches("http://")
            .trim_end_matches('/'),
        "127.0.0.1",
        "/_emulator/metrics",
    )?;
    let state = resources(&sys)?;
    let mut problems = Vec::new();
    let neg = format!("zones/{ZONE}/networkEndpointGroups");
    for (method, coll) in inserts.iter().zip([
        "global/addresses",
        "global/healthChecks",
        neg.as_str(),
        "global/backendServices",
        "global/urlMaps",
        "global/targetHttpProxies",
        "global/forwardingRules",
        "global/firewalls",
    ]) {
        let n = calls["methods"][method].as_u64().unwrap_or(0);
        // Each Service port (and the default backend's) has its own health check, NEG and
        // backend service: one or two of each.
        let want = state.get(coll).map_or(0, Vec::len);
        if n <= want as u64 {
            problems.push(format!(
                "{method}: {n} calls for {want} resources: no retry after the lost response"
            ));
        }
        // The retry found what the lost call had made: 409, handled as "already there".
        // (At least one: a call refused by another injected fault is retried too.)
        let conflict =
            format!("gce_emulator_api_requests_total{{method=\"{method}\",code=\"409\"}} ");
        let conflicts: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(conflict.as_str()))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        if conflicts == 0 {
            problems.push(format!(
                "{method}: no retry answered 409 (did the lost call act?)"
            ));
        }
        let per_ingress = [
            "global/addresses",
            "global/urlMaps",
            "global/targetHttpProxies",
            "global/forwardingRules",
            "global/firewalls",
        ]
        .contains(&coll);
        if per_ingress && want != 1 {
            problems.push(format!("{coll}: {:?}", state.get(coll)));
        }
    }
    println!(
        "lost responses: {} inserts acted and lost their answer; calls {}",
        inserts.len(),
        calls["methods"]
    );
    if !problems.is_empty() {
        bail!("{}\n{}", problems.join("\n"), sys.logs());
    }
    Ok(())
}
