//! Every benchmark of the emulator, run at a tiny size (issue 45): `benches/run.sh` (the data
//! plane against nginx and haproxy, or alone when they or ../shared/bench/proxy-compare.sh are
//! missing), `benches/instructions.sh` (callgrind, skipped without valgrind) and
//! `benches/control_plane.rs`. Each must run to its table with the emulator's defaults (NEG
//! endpoints validated against their instance, firewall enforced): these tests assert that the
//! tables are printed, never a figure (timings belong in `make bench`).
//!
//! `make bench` once broke unseen: lb.sh attached an endpoint without its instance, which the
//! emulator had begun to refuse, and the benchmark stopped before measuring. Here that failure
//! fails `make test`.

use std::path::{Path, PathBuf};
use std::process::Command;

#[allow(dead_code)]
#[path = "../benches/control_plane.rs"]
mod control_plane;

const EMULATOR: &str = env!("CARGO_BIN_EXE_gce-emulator");

fn benches() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches")
}

fn has(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs `bash benches/SCRIPT` with `env`; its stdout, or a panic with both streams.
fn script(name: &str, env: &[(&str, &str)]) -> String {
    let out = Command::new("bash")
        .arg(benches().join(name))
        .env("EMULATOR", EMULATOR)
        .env("NICE", "0")
        .envs(env.iter().copied())
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{name} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    eprintln!("{stderr}");
    println!("{stdout}");
    stdout
}

/// The table row of `label` in `table` (`| label | ...`), or a panic naming what was printed.
fn assert_row(table: &str, label: &str) {
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(&format!("| {label} |"))),
        "no row `{label}` in:\n{table}"
    );
}

#[test]
fn data_plane_benchmark_runs_to_its_table() {
    let out = script(
        "run.sh",
        &[
            ("DURATION", "1"),
            (
                "COMPARE_ARGS",
                "--duration 1 --runs 1 --scenarios ka64,tls64",
            ),
            ("IDLE_CONNS", "20"),
            ("CONTROL_PLANE", "0"),
        ],
    );
    assert_row(&out, "emulator | ka64");
    assert_row(&out, "emulator | tls64");
    if !out.contains("emulator alone") {
        // proxy-compare.sh ran: its peers' rows are there too.
        assert_row(&out, "nginx | ka64");
        assert_row(&out, "haproxy | tls64");
    }
    assert_row(&out, "http keep-alive");
    assert_row(&out, "https keep-alive");
}

#[test]
fn instruction_benchmark_runs_to_its_table() {
    if !has("valgrind") || !has("callgrind_control") {
        eprintln!("SKIPPED: valgrind is not installed (instructions.sh needs callgrind)");
        return;
    }
    let out = script("instructions.sh", &[("SECS", "1"), ("CONNS", "4")]);
    for row in [
        "emulator http keep-alive",
        "emulator https keep-alive",
        "emulator http, Cloud Armor 3 CEL rules",
        "emulator http, Cloud Armor CRS WAF",
        "emulator http, Cloud CDN hit",
        "emulator http, Cloud CDN miss",
        "emulator http, IAP with a session",
        "emulator http, request logging (sampleRate 1)",
        "emulator http keep-alive, firewall not enforced",
    ] {
        assert_row(&out, row);
    }
    if has("nginx") {
        assert_row(&out, "nginx http keep-alive");
    }
}

#[test]
fn control_plane_benchmark_runs_to_its_table() {
    let table = control_plane::run(EMULATOR, 0.0);
    println!("{table}");
    for op in [
        "insert healthChecks",
        "get healthCheck",
        "aggregatedList backendServices",
    ] {
        assert!(
            table.lines().any(|l| l.starts_with(op)),
            "no `{op}` row in:\n{table}"
        );
    }
}
