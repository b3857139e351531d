//! Control-plane benchmark: insert / get / list / aggregatedList throughput and latency over
//! real HTTP against the `gce-emulator` binary pinned to one core (`taskset -c 0` when
//! available). Prints a table; "server us/call" is the emulator's own CPU time per call (from
//! /proc), which does not depend on how fast this load generator is.
//!
//! Run: `cargo bench -p gce-emulator --bench control_plane` (release build). To measure another
//! build of the emulator: `GCE_EMULATOR_BIN=target/release/gce-emulator`. `BENCH_SCALE=0.1`
//! shrinks every phase.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::Semaphore;

struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(bin: &str) -> (Guard, String) {
    let pinned = Command::new("taskset").arg("--version").output().is_ok();
    let mut cmd = if pinned {
        let mut c = Command::new("taskset");
        c.args(["-c", "0", bin]);
        c
    } else {
        Command::new(bin)
    };
    let mut child = cmd
        .args([
            "--listen",
            "127.0.0.1:0",
            "--port-map",
            "80=0,443=0",
            "--dataplane-threads",
            "1",
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start gce-emulator");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("first line");
    eprintln!(
        "emulator {bin} at {} (pinned to CPU 0: {pinned})",
        line.trim()
    );
    (
        Guard(child),
        format!("{}compute/v1/projects/bench/", line.trim()),
    )
}

#[derive(Clone, Copy)]
enum Kind {
    Get,
    Post,
}

/// CPU seconds the process has used (user + system), from /proc (Linux; 0 elsewhere).
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, r)| r.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // After the ")" field 3 is index 0, so utime (14) and stime (15) are 11 and 12; 100 ticks/s.
    (ticks(11) + ticks(12)) / 100.0
}

struct Row {
    cpu: f64,
    name: String,
    n: usize,
    conc: usize,
    secs: f64,
    lat: Vec<Duration>,
}

async fn phase(
    pid: u32,
    client: &reqwest::Client,
    name: &str,
    conc: usize,
    reqs: Vec<(Kind, String, Option<serde_json::Value>)>,
) -> Row {
    let sem = Arc::new(Semaphore::new(conc));
    let cpu0 = cpu_secs(pid);
    let started = Instant::now();
    let mut handles = Vec::with_capacity(reqs.len());
    let n = reqs.len();
    for (kind, url, body) in reqs {
        let permit = Arc::clone(&sem).acquire_owned().await.unwrap();
        let client = client.clone();
        handles.push(tokio::spawn(async move {
            let t = Instant::now();
            let r = match kind {
                Kind::Get => client.get(&url).send().await,
                Kind::Post => {
                    client
                        .post(&url)
                        .json(&body.unwrap_or_default())
                        .send()
                        .await
                }
            }
            .expect("request");
            let status = r.status();
            let _ = r.bytes().await.expect("body");
            assert!(status.is_success(), "{url}: {status}");
            drop(permit);
            t.elapsed()
        }));
    }
    let mut lat = Vec::with_capacity(n);
    for h in handles {
        lat.push(h.await.unwrap());
    }
    let secs = started.elapsed().as_secs_f64();
    Row {
        cpu: cpu_secs(pid) - cpu0,
        name: name.into(),
        n,
        conc,
        secs,
        lat,
    }
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn main() {
    let bin = std::env::var("GCE_EMULATOR_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_gce-emulator").to_string());
    let scale: f64 = std::env::var("BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    print!("{}", run(&bin, scale));
}

/// Runs every phase against the emulator binary `bin`, each phase's size multiplied by `scale`
/// (at least 10 calls), and returns the table (also run at a tiny size by
/// tests/bench_smoke.rs).
pub fn run(bin: &str, scale: f64) -> String {
    use std::fmt::Write as _;
    let n = |x: usize| ((x as f64 * scale) as usize).max(10);
    let (guard, base) = start(bin);
    let pid = guard.0.id();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let out = rt.block_on(async {
        let client = reqwest::Client::builder().pool_max_idle_per_host(64).build().unwrap();
        let hcs = n(2000);
        let bss = n(500);
        let mut rows = Vec::new();
        let inserts = (0..hcs).map(|i| (Kind::Post, format!("{base}global/healthChecks"), Some(json!({"name": format!("hc-{i}"), "type": "HTTP", "httpHealthCheck": {"port": 8080, "requestPath": "/healthz"}})))).collect();
        rows.push(phase(pid, &client, "insert healthChecks", 4, inserts).await);
        let inserts = (0..bss)
            .map(|i| (Kind::Post, format!("{base}global/backendServices"), Some(json!({"name": format!("bs-{i}"), "healthChecks": [format!("global/healthChecks/hc-{}", i % hcs)]}))))
            .collect();
        rows.push(phase(pid, &client, "insert backendServices", 4, inserts).await);
        let gets = (0..n(20000)).map(|i| (Kind::Get, format!("{base}global/healthChecks/hc-{}", (i * 7919) % hcs), None)).collect();
        rows.push(phase(pid, &client, "get healthCheck", 16, gets).await);
        let pages = (0..n(200)).map(|_| (Kind::Get, format!("{base}global/backendServices?maxResults=500&pageToken="), None)).collect();
        rows.push(phase(pid, &client, "list backendServices (500/page)", 4, pages).await);
        let filtered = (0..n(200)).map(|i| (Kind::Get, format!("{base}global/healthChecks?filter=name%20eq%20%22hc-{}.*%22", i % 10), None)).collect();
        rows.push(phase(pid, &client, "list healthChecks filter eq", 4, filtered).await);
        let agg = (0..n(200)).map(|_| (Kind::Get, format!("{base}aggregated/backendServices"), None)).collect();
        rows.push(phase(pid, &client, "aggregatedList backendServices", 4, agg).await);

        let mut out = String::new();
        let _ = writeln!(out, "\ngce-emulator control plane, one core ({hcs} health checks, {bss} backend services stored)\n");
        let _ = writeln!(out, "{:<34} {:>7} {:>5} {:>10} {:>9} {:>9} {:>9} {:>12}", "operation", "calls", "conc", "calls/s", "p50 ms", "p99 ms", "max ms", "server us/call");
        for mut r in rows {
            r.lat.sort();
            let _ = writeln!(
                out,
                "{:<34} {:>7} {:>5} {:>10.0} {:>9.2} {:>9.2} {:>9.2} {:>12.0}",
                r.name,
                r.n,
                r.conc,
                r.n as f64 / r.secs,
                pct(&r.lat, 0.5),
                pct(&r.lat, 0.99),
                pct(&r.lat, 1.0),
                r.cpu * 1e6 / r.n as f64
            );
        }
        out
    });
    drop(guard);
    out
}
