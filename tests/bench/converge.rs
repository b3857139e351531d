//! Convergence benchmark (`make bench`): how fast the operator programs many Ingresses, what a
//! restart's full resync of all of them costs, and how fast deleting them all cleans up.
//!
//! It starts the real binaries (fake-kube-apiserver, gce-emulator, gclb-operator) on loopback
//! exactly like the end-to-end tests, applies `BENCH_INGRESSES` Ingresses (default 100) at once
//! over `BENCH_SERVICES` shared Services (default 5, two local echo Pods each), and prints one
//! markdown table:
//! - apply -> every Ingress has `status.loadBalancer.ingress[0].ip`: total seconds, the p50 and
//!   max time per Ingress, and Compute calls per Ingress (mutating and reading, counted by the
//!   emulator);
//! - operator restart -> every Ingress reconciled once more (`gclb_ingress_syncs{result="ok"}`
//!   on the new process's `/metrics`): seconds and Compute calls; the mutating count must be 0,
//!   the issue 5 "no-op resync writes nothing" rule at scale;
//! - delete all -> the emulator holds no URL map, backend service or NEG of this cluster, nor the
//!   shared firewall rule, and how many `firewalls.delete` calls that took (one, not one per
//!   Ingress).
//!
//! Figures are for the binaries of the profile it is built in (`make bench` uses dev builds, as
//! `make test` does). Timings live here and never in pass/fail tests (DESIGN.md conventions).
//! Before that, the time from an Ingress being created to its first 200 (see [`first200`]):
//! `BENCH_FIRST200_SEQ` Ingresses (default 20) created one at a time, then
//! `BENCH_FIRST200_BURST` (default 50) created at once, p50/p90/p99/max beside the dependency
//! chain's lower bound under the emulator's profile.
//!
//! Run alone: `cargo bench -p gclb-operator --bench converge --profile dev`
//! (`BENCH_INGRESSES=500` for the 500-Ingress resync, 0 to skip convergence;
//! `BENCH_WORKERS` sets `--workers`, default the operator's own; `BENCH_SLOW_CLOUD` starts the
//! emulator with `--slow-cloud VALUE`, e.g. `realistic` or `uniform:200`, docs/performance.md).
//! The operator's CPU seconds and resident memory (now and peak) are printed per phase, with the
//! machine's 1-minute load average at the phase's start and end;
//! `BENCH_LOGS=FILE` writes the processes' logs after the first-200 phase (for profiling).
//! `BENCH_PODS` and `BENCH_SECRETS` (default 0) fill namespace `bench` with that many Pods and
//! Secrets before the operator starts (the memory benchmark's, [`cluster`]), so the peak RSS is
//! the one of a big cluster; `BENCH_OPERATOR=PATH` runs another operator binary (e.g. the
//! release build the image ships); `BENCH_PHASE_DEADLINE_SECS` (default 900) bounds each phase.
//! The environment is passed on to the processes (e.g. `MALLOC_ARENA_MAX=2`, as
//! deploy/deployment.yaml sets it).
//!
//! The size sweep (issue 18, `make bench-scale`): `BENCH_SIZES=100,500,1000,2000` runs the three
//! phases at each size in turn on one system (Pods and Secrets created once), `BENCH_PATHS`
//! (default 1) routes each Ingress to that many Services of the pool, and a summary table is
//! printed and written with a PNG plot of convergence time and peak RSS against Ingress count
//! (`BENCH_REPORT_DIR`, default `bench-report` beside the binaries; both paths printed). Each
//! phase's peak RSS is its own (the operator's `VmHWM` is reset when the phase starts).
//! Ingresses, Pods and Secrets are created by a kube client, 16 requests at a time
//! ([`cluster::create_all`]). `BENCH_GLBC=PATH` runs GKE's controller side by side instead
//! ([`glbc`]).

#[path = "../support/mod.rs"]
mod support;

mod cluster;
mod create;
mod first200;
mod glbc;
mod plot;
mod procstat;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;
use support::*;

/// Each phase's deadline: `BENCH_PHASE_DEADLINE_SECS`, default 900 s (generous: 500 Ingresses
/// on a busy 2-core machine with dev builds).
fn phase_deadline() -> Duration {
    Duration::from_secs(env_usize("BENCH_PHASE_DEADLINE_SECS", 900) as u64)
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Services `svc-0..S` with two opted-in echo Pods each (the local kubelet runs them).
fn services_yaml(services: usize) -> String {
    let mut y = String::new();
    for s in 0..services {
        let _ = write!(
            y,
            "apiVersion: v1\nkind: Service\nmetadata: {{name: svc-{s}}}\n\
             spec: {{type: NodePort, selector: {{app: svc-{s}}}, ports: [{{port: 80, targetPort: 8080}}]}}\n---\n"
        );
        for p in 0..2 {
            let _ = write!(
                y,
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: svc-{s}-{p}, labels: {{app: svc-{s}}}, \
                 annotations: {{local.gclb-operator.dev/run: echo}}}}\n\
                 spec: {{containers: [{{name: echo, image: echo, ports: [{{containerPort: 8080}}]}}]}}\n---\n"
            );
        }
    }
    y
}

/// Ingresses `ing-0..N`, each routing its own host to `paths` of the shared Services (`/` to the
/// first, `/p1`, `/p2`.. to the next ones), so `paths` backends per Ingress.
fn ingresses_yaml(ingresses: usize, services: usize, paths: usize) -> String {
    let mut y = String::new();
    for i in 0..ingresses {
        let rules: Vec<String> = (0..paths)
            .map(|k| {
                let s = (i * paths + k) % services;
                let path = if k == 0 { "/".to_string() } else { format!("/p{k}") };
                format!(
                    "{{path: {path}, pathType: Prefix, backend: {{service: {{name: svc-{s}, port: {{number: 80}}}}}}}}"
                )
            })
            .collect();
        let _ = write!(
            y,
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: ing-{i}, namespace: default}}\n\
             spec: {{ingressClassName: gce, rules: [{{host: ing-{i}.example, http: {{paths: [{}]}}}}]}}\n---\n",
            rules.join(", ")
        );
    }
    y
}

/// Number of Ingresses in the default namespace that have a load balancer IP.
fn ingresses_with_ip(sys: &System) -> Result<Vec<String>> {
    let list = sys.get_json(&["ingress", "-n", "default"])?;
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["status"]["loadBalancer"]["ingress"][0]["ip"].is_string())
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
        .collect())
}

/// `(mutating, reading)` Compute calls the emulator counted since its counters were zeroed.
fn calls(sys: &System) -> Result<(u64, u64)> {
    let c = sys.compute_get("_emulator/calls")?;
    Ok((
        c["mutating"].as_u64().unwrap_or(0),
        c["reading"].as_u64().unwrap_or(0),
    ))
}

/// The emulator's per-method counts as `method=count` (largest first), for the log.
fn calls_by_method(sys: &System) -> Result<String> {
    let c = sys.compute_get("_emulator/calls")?;
    let mut methods: Vec<(String, u64)> = c["methods"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(m, n)| Some((m.trim_start_matches("compute.").to_string(), n.as_u64()?)))
        .collect();
    methods.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok(methods
        .iter()
        .map(|(m, n)| format!("{m}={n}"))
        .collect::<Vec<_>>()
        .join(" "))
}

fn zero_calls(sys: &System) -> Result<()> {
    sys.compute_delete("_emulator/calls")
}

/// One table row for a phase that took `wall` seconds over `n` Ingresses, with the Compute
/// calls counted since the counters were zeroed (logged by method on stderr); also returns
/// the `(mutating, reading)` counts.
fn phase_row(
    sys: &System,
    n: usize,
    label: &str,
    wall: f64,
    per: &str,
) -> Result<(String, (u64, u64))> {
    let (m, r) = calls(sys)?;
    eprintln!("converge: {label}: {}", calls_by_method(sys)?);
    let row = format!(
        "| {label} | {wall:.1} s | {per} | {:.1} | {:.1} |",
        m as f64 / n as f64,
        r as f64 / n as f64
    );
    Ok((row, (m, r)))
}

use first200::percentile;

/// One phase's cost to the operator since `meter` started: the table cell
/// `X.X CPU s, RSS Y MiB (peak Z), load A->B`, and `(CPU seconds, peak RSS MiB, load at the
/// start, load at the end)`.
fn operator_cost(sys: &System, meter: &procstat::Meter) -> (String, (f64, f64, f64, f64)) {
    let (_, cpu, _) = meter.stop();
    let pid = sys.operator.as_ref().map_or(0, |p| p.child.id());
    let (rss, peak) = procstat::rss_mib(pid);
    let (_, _, (load0, load1)) = meter.stop();
    let cpu = cpu.first().map_or(0.0, |c| c.1);
    (
        format!("{cpu:.1} CPU s, RSS {rss:.0} MiB (peak {peak:.0}), load {load0:.1}->{load1:.1}"),
        (cpu, peak, load0, load1),
    )
}

/// Starts metering the operator; its peak RSS (`VmHWM`) is reset first, so each phase's peak
/// is its own.
fn operator_meter(sys: &System) -> procstat::Meter {
    let pid = sys.operator.as_ref().map_or(0, |p| p.child.id());
    procstat::reset_peak_rss(pid);
    procstat::Meter::start(&[("operator", pid)])
}

/// Starts the operator: this build's, or `BENCH_OPERATOR`'s binary.
fn start_operator(sys: &mut System, args: &[&str]) -> Result<()> {
    match std::env::var_os("BENCH_OPERATOR") {
        Some(path) => {
            let op = sys.spawn_operator_from(std::path::Path::new(&path), args, "operator", &[])?;
            sys.operator = Some(op);
            Ok(())
        }
        None => sys.start_operator(args),
    }
}

fn main() -> Result<()> {
    let deadline = phase_deadline();
    if let Some(glbc) = std::env::var_os("BENCH_GLBC") {
        return glbc::side_by_side(std::path::Path::new(&glbc), deadline);
    }
    let sizes = sizes();
    let n = sizes.iter().copied().max().unwrap_or(0);
    let pods = env_usize("BENCH_PODS", 0);
    let secrets = env_usize("BENCH_SECRETS", 0);
    let services = env_usize("BENCH_SERVICES", 5).max(1);
    let paths = env_usize("BENCH_PATHS", 1).max(1);
    let services = if n > 0 {
        services.min(n * paths)
    } else {
        services
    };
    let seq = env_usize("BENCH_FIRST200_SEQ", 20);
    let burst = env_usize("BENCH_FIRST200_BURST", 50);
    let slow = std::env::var("BENCH_SLOW_CLOUD").ok();
    let workers = std::env::var("BENCH_WORKERS").ok();
    let mut operator_args: Vec<&str> = Vec::new();
    if let Some(w) = workers.as_deref() {
        operator_args.extend(["--workers", w]);
    }
    eprintln!("converge: {sizes:?} Ingresses, {paths} Services each, over {services} Services");

    let mut emulator_args = vec!["--port-map", "80=0,443=0"];
    if let Some(s) = slow.as_deref() {
        emulator_args.extend(["--slow-cloud", s]);
    }
    let profile = format!(
        "{}, {}",
        slow.as_deref().unwrap_or("no added latency"),
        operator_label()
    );
    let mut sys = System::start(&emulator_args)?;
    sys.apply_basics()?;
    sys.apply(&services_yaml(services))?;
    if pods + secrets > 0 {
        let t = Instant::now();
        cluster::populate(&sys, pods, secrets)?;
        eprintln!(
            "converge: {pods} Pods and {secrets} Secrets created in {:.0} s",
            t.elapsed().as_secs_f64()
        );
    }
    start_operator(&mut sys, &operator_args)?;

    // 0. Ingress created -> first 200.
    if seq + burst > 0 {
        let first = first200::rows(&sys, services, seq, burst, deadline)?;
        println!();
        println!(
            "| Ingress created -> first 200 ({profile}, workers {}) | p50 | p90 | p99 | max | chain lower bound | p50 / bound |",
            workers.as_deref().unwrap_or("default")
        );
        println!("|---|---:|---:|---:|---:|---:|---:|");
        for row in first {
            println!("{row}");
        }
        if let Ok(path) = std::env::var("BENCH_LOGS") {
            std::fs::write(&path, sys.logs())?;
            eprintln!("converge: the processes' logs are in {path}");
        }
        if n == 0 {
            return Ok(());
        }
        sys.kubectl_ok(&["delete", "ingress", "--all"])?;
        wait_for("the first-200 Ingresses to be deleted", deadline, || {
            Ok(
                (sys.compute_names("urlMaps")?.is_empty() && ingresses_left(&sys)? == 0)
                    .then_some(()),
            )
        })?;
    }
    if n == 0 {
        return Ok(());
    }

    let workers_label = workers.as_deref().unwrap_or("default").to_string();
    let mut sweep = Vec::new();
    for &size in &sizes {
        let figures = converge_size(&mut sys, size, services, paths, &operator_args, deadline)?;
        println!();
        println!(
            "| operator convergence ({size} Ingresses x {paths} Services over {services}, {profile}, workers {workers_label}) | wall | per Ingress | mutating calls/Ingress | reading calls/Ingress | operator |"
        );
        println!("|---|---:|---:|---:|---:|---:|");
        for row in &figures.rows {
            println!("{row}");
        }
        println!();
        println!(
            "`firewalls.delete` calls while deleting {size} Ingresses: {}",
            figures.firewall_deletes
        );
        sweep.push(figures);
    }
    let refused = sys.compute_get("_emulator/slow-cloud")?["refused"].clone();
    if refused["writes"].as_u64().unwrap_or(0) + refused["reads"].as_u64().unwrap_or(0) > 0 {
        println!("\nrefused by the rate quota (rateLimitExceeded): {refused}");
    }
    if sweep.len() > 1 {
        let title = format!(
            "{} Ingresses x {paths} Services, {pods} Pods, {secrets} Secrets, {profile}",
            sizes
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join("/")
        );
        let stem = if slow.is_some() {
            "scale-slow"
        } else {
            "scale"
        };
        report_sweep(&title, stem, &sweep)?;
    }
    Ok(())
}

/// `BENCH_SIZES` (comma-separated Ingress counts, e.g. `100,500,1000,2000`), else
/// `BENCH_INGRESSES` (default 100; 0 skips convergence).
fn sizes() -> Vec<usize> {
    match std::env::var("BENCH_SIZES") {
        Ok(list) => list
            .split(',')
            .filter_map(|v| v.trim().parse().ok())
            .filter(|&v| v > 0)
            .collect(),
        Err(_) => Some(env_usize("BENCH_INGRESSES", 100))
            .filter(|&v| v > 0)
            .into_iter()
            .collect(),
    }
}

/// One phase: wall seconds, `(mutating, reading)` calls, `(CPU s, peak RSS MiB, load at start,
/// load at end)`.
type Phase = (f64, (u64, u64), (f64, f64, f64, f64));

/// What one size of the sweep measured.
struct SizeFigures {
    n: usize,
    /// The three phases' table rows (apply, restart, delete).
    rows: Vec<String>,
    /// Per phase: wall seconds, `(mutating, reading)` calls, `(CPU s, peak RSS MiB, load at
    /// start, load at end)`.
    phases: Vec<Phase>,
    firewall_deletes: u64,
}

/// Apply `n` Ingresses at once, restart the operator, delete them all: the three phases at one
/// size, on the running system (the operator left running for the next size).
fn converge_size(
    sys: &mut System,
    n: usize,
    services: usize,
    paths: usize,
    operator_args: &[&str],
    deadline: Duration,
) -> Result<SizeFigures> {
    let mut rows = Vec::new();
    let mut phases = Vec::new();
    // 1. Apply every Ingress at once; note when each first shows an IP.
    zero_calls(sys)?;
    let meter = operator_meter(sys);
    let start = Instant::now();
    // Created by a kube client, 16 at a time: `kubectl apply` of 2000 takes minutes itself.
    cluster::create_all(sys, &[ingresses_yaml(n, services, paths)])?;
    let mut first_ip: std::collections::BTreeMap<String, f64> = Default::default();
    let mut next_report = 30.0;
    while first_ip.len() < n {
        if start.elapsed() > deadline {
            bail!(
                "only {} of {n} Ingresses got an IP in {deadline:?}{}",
                first_ip.len(),
                sys.logs()
            );
        }
        let t = start.elapsed().as_secs_f64();
        let poll = Instant::now();
        for name in ingresses_with_ip(sys)? {
            first_ip.entry(name).or_insert(t);
        }
        // Listing N Ingresses with kubectl costs CPU that the measured processes share: poll
        // every 200 ms, or at twice the list's own duration when that is longer (at 2000
        // Ingresses a list takes about a second), so polling takes at most a third of a core.
        let took = poll.elapsed();
        if t >= next_report {
            next_report += 30.0;
            eprintln!(
                "converge: {:.0} s: {} of {n} Ingresses have an IP (list took {:.2} s)",
                start.elapsed().as_secs_f64(),
                first_ip.len(),
                took.as_secs_f64()
            );
        }
        std::thread::sleep(Duration::from_millis(200).max(took * 2));
    }
    let total = start.elapsed().as_secs_f64();
    let mut times: Vec<f64> = first_ip.into_values().collect();
    times.sort_by(f64::total_cmp);
    let per = format!(
        "p50 {:.1} s, max {:.1} s",
        percentile(&times, 0.5),
        percentile(&times, 1.0)
    );
    let cost = operator_cost(sys, &meter);
    let (row, calls0) = phase_row(
        sys,
        n,
        &format!("apply {n} Ingresses -> every IP"),
        total,
        &per,
    )?;
    rows.push(format!("{row} {} |", cost.0));
    phases.push((total, calls0, cost.1));

    // Let the writes that settling triggers (NEG endpoints as Pods turn Ready) finish.
    let mut before = calls(sys)?;
    wait_for("Compute writes to stop", deadline, || {
        std::thread::sleep(Duration::from_secs(3));
        let now = calls(sys)?;
        let stable = now.0 == before.0;
        before = now;
        Ok(stable.then_some(()))
    })?;

    // 2. Restart the operator: it reconciles every Ingress once and must write nothing.
    sys.stop_operator();
    zero_calls(sys)?;
    let start = Instant::now();
    start_operator(sys, operator_args)?;
    let meter = operator_meter(sys);
    let operator = sys.operator.as_ref().context("operator")?;
    operator.metrics_url()?;
    wait_for(
        "every Ingress to be reconciled after the restart",
        deadline,
        || Ok((operator.ok_syncs()? >= n as u64).then_some(())),
    )?;
    let resync = start.elapsed().as_secs_f64();
    let cost = operator_cost(sys, &meter);
    let per = format!("{:.0} Ingresses/s", n as f64 / resync);
    let label = format!("operator restart -> {n} Ingresses resynced");
    let (row, (m, r)) = phase_row(sys, n, &label, resync, &per)?;
    rows.push(format!("{row} {} |", cost.0));
    phases.push((resync, (m, r), cost.1));
    if m != 0 {
        eprintln!("converge: WARNING the restart resync sent {m} mutating Compute calls");
    }

    // 3. Delete every Ingress; wait until the emulator holds none of their resources.
    zero_calls(sys)?;
    let meter = operator_meter(sys);
    let start = Instant::now();
    sys.kubectl_ok(&["delete", "ingress", "--all", "--wait=false"])?;
    wait_for("every load balancer to be deleted", deadline, || {
        let maps = sys.compute_names("urlMaps")?;
        let left = ingresses_left(sys)?;
        let rules = sys.created_firewalls()?;
        Ok((maps.is_empty() && left == 0 && rules.is_empty()).then_some(()))
    })?;
    let cleanup = start.elapsed().as_secs_f64();
    let cost = operator_cost(sys, &meter);
    let per = format!("{:.0} Ingresses/s", n as f64 / cleanup);
    let label = format!("delete {n} Ingresses -> no URL map or firewall rule left");
    let (row, calls2) = phase_row(sys, n, &label, cleanup, &per)?;
    rows.push(format!("{row} {} |", cost.0));
    phases.push((cleanup, calls2, cost.1));
    // The one shared firewall rule must be deleted once, not once per Ingress (issue 28).
    let firewall_deletes = sys.compute_get("_emulator/calls")?["methods"]
        ["compute.firewalls.delete"]
        .as_u64()
        .unwrap_or(0);

    Ok(SizeFigures {
        n,
        rows,
        phases,
        firewall_deletes,
    })
}

/// Which operator binary the figures are of: `BENCH_OPERATOR`'s, or this bench's own build.
fn operator_label() -> String {
    match std::env::var("BENCH_OPERATOR") {
        Ok(path) if path.contains("/release/") => "release-build operator".to_string(),
        Ok(path) => format!("operator {path}"),
        Err(_) => "operator of this bench's build".to_string(),
    }
}

/// The sweep's summary: one row per size, printed and written to `BENCH_REPORT_DIR` (default
/// `bench-report` beside the binaries, e.g. `target/debug/bench-report`) as `<stem>.md`
/// (`scale`, or `scale-slow` on a slow cloud), with the plot of convergence time and peak RSS
/// against Ingress count as `<stem>.png` beside it; both paths are printed.
fn report_sweep(title: &str, stem: &str, sweep: &[SizeFigures]) -> Result<()> {
    let mut table = String::new();
    let _ = writeln!(table, "{title}\n");
    let _ = writeln!(
        table,
        "| Ingresses | converge | writes/Ingress | reads/Ingress | CPU s | peak RSS | restart resync | its writes | its reads/Ingress | delete all | its calls/Ingress (w+r) | load |"
    );
    let _ = writeln!(
        table,
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for f in sweep {
        let per = |c: u64| c as f64 / f.n as f64;
        let [(t0, (w0, r0), (cpu0, peak0, l0, _)), (t1, (w1, r1), (cpu1, peak1, _, _)), (t2, (w2, r2), (cpu2, peak2, _, l2))] =
            f.phases[..]
        else {
            continue;
        };
        let _ = writeln!(
            table,
            "| {} | {t0:.1} s | {:.1} | {:.1} | {cpu0:.1} | {peak0:.0} MiB | {t1:.1} s ({cpu1:.1} CPU s, peak {peak1:.0} MiB) | {w1} | {:.1} | {t2:.1} s ({cpu2:.1} CPU s, peak {peak2:.0} MiB) | {:.1}+{:.1} | {l0:.1}->{l2:.1} |",
            f.n,
            per(w0),
            per(r0),
            per(r1),
            per(w2),
            per(r2),
        );
    }
    println!("\n{table}");
    let dir = match std::env::var_os("BENCH_REPORT_DIR") {
        Some(d) => std::path::PathBuf::from(d),
        None => bin("gclb-operator").with_file_name("bench-report"),
    };
    std::fs::create_dir_all(&dir)?;
    let report = dir.join(format!("{stem}.md"));
    std::fs::write(&report, &table)?;
    let png = dir.join(format!("{stem}.png"));
    let points: Vec<plot::Point> = sweep
        .iter()
        .filter_map(|f| Some((f.n, f.phases.first()?.0, f.phases.first()?.2 .1)))
        .collect();
    plot::draw(&png, title, &points)?;
    println!("report: {}\nplot: {}", report.display(), png.display());
    Ok(())
}

/// Ingresses still present (finalizers not yet removed).
fn ingresses_left(sys: &System) -> Result<usize> {
    let list: Value = sys.get_json(&["ingress", "-n", "default"])?;
    Ok(list["items"].as_array().map_or(0, Vec::len))
}
