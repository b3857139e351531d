//! Memory benchmark (issue 15, "Memory"): the operator's resident set size (RSS) with a large
//! cluster in its caches. Not a pass/fail test: it prints figures.
//!
//! It starts the local API and the emulator like the end-to-end tests, measures the operator on
//! an empty cluster, then creates `BENCH_PODS` Pods (default 10000; realistic specs: two
//! containers with env, mounts, resources and probes, an init container, volumes, annotations)
//! and `BENCH_SECRETS` Secrets (default 2000: half `kubernetes.io/tls`, half Opaque blobs of
//! 4 KiB), starts a fresh operator of each variant ([`variants`]: this build with and without
//! `MALLOC_ARENA_MAX=2`, and `BENCH_BASELINE`, another build, when set), waits for its stores to
//! list everything ("stores synced") and reads `VmRSS` and `VmHWM` (peak) from
//! `/proc/PID/status`, then prints a markdown table.
//! Run: `cargo bench -p gclb-operator --bench memory --profile dev` (or `make bench`).

#[path = "../support/mod.rs"]
mod support;

mod cluster;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use support::*;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// (VmRSS, VmHWM) of a process, in KiB.
fn rss_kib(pid: u32) -> Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> Result<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .with_context(|| format!("no {name} in /proc/{pid}/status"))
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

/// One operator build and environment to measure.
struct Variant {
    label: String,
    binary: PathBuf,
    env: Vec<(&'static str, &'static str)>,
}

/// The operator of this build with glibc's default allocator settings and with
/// `MALLOC_ARENA_MAX=2` (as deploy/deployment.yaml sets it), and, when `BENCH_BASELINE` names
/// another build of the operator (e.g. main's), that one first.
fn variants() -> Vec<Variant> {
    let mut v = Vec::new();
    if let Ok(path) = std::env::var("BENCH_BASELINE") {
        v.push(Variant {
            label: format!("baseline ({path})"),
            binary: PathBuf::from(path),
            env: Vec::new(),
        });
    }
    v.push(Variant {
        label: "this build, glibc defaults".into(),
        binary: bin("gclb-operator"),
        env: Vec::new(),
    });
    v.push(Variant {
        label: "this build, MALLOC_ARENA_MAX=2".into(),
        binary: bin("gclb-operator"),
        env: vec![("MALLOC_ARENA_MAX", "2")],
    });
    v
}

/// Starts an operator, waits until its stores have listed, lets it settle, returns its memory.
fn measure(sys: &System, variant: &Variant, cluster: &str) -> Result<(u64, u64)> {
    let label = format!("{} on the {cluster} cluster", variant.label);
    let log_name: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let operator = sys.spawn_operator_from(&variant.binary, &[], &log_name, &variant.env)?;
    wait_for(
        &format!("{label}: stores synced"),
        Duration::from_secs(900),
        || {
            Ok(std::fs::read_to_string(&operator.log)?
                .contains("stores synced")
                .then_some(()))
        },
    )?;
    let pid = operator.child.id();
    let mut last = (0, 0);
    // A few samples over five seconds: the first list's buffers are freed by then.
    for _ in 0..5 {
        std::thread::sleep(Duration::from_secs(1));
        last = rss_kib(pid)?;
    }
    drop(operator);
    Ok(last)
}

fn main() -> Result<()> {
    let pods = env_usize("BENCH_PODS", 10_000);
    let secrets = env_usize("BENCH_SECRETS", 2_000);
    let variants = variants();
    let sys = System::start(&[])?;
    let mut empty = Vec::new();
    for v in &variants {
        empty.push(measure(&sys, v, "empty")?);
    }

    cluster::populate(&sys, pods, secrets)?;
    let mut full = Vec::new();
    for v in &variants {
        full.push(measure(&sys, v, "full")?);
    }

    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "\n{pods} Pods, {secrets} Secrets ({} TLS); RSS after the stores synced (peak RSS), MiB\n",
        secrets.div_ceil(2)
    );
    println!("| operator | empty cluster | full cluster |");
    println!("| --- | ---: | ---: |");
    for ((v, e), f) in variants.iter().zip(&empty).zip(&full) {
        println!(
            "| {} | {:.1} ({:.1}) | {:.1} ({:.1}) |",
            v.label,
            mib(e.0),
            mib(e.1),
            mib(f.0),
            mib(f.1)
        );
    }
    Ok(())
}
