//! End to end: `make demo`'s script (tests/demo.sh) routes real requests through the emulated
//! load balancer and, on exit, stops every process it started (README promises both).

mod support;

use std::process::Command;

use anyhow::{Context, Result};
use support::*;

/// Command lines of the running processes that mention `needle`.
fn processes_mentioning(needle: &str) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
        .filter(|cmd| cmd.contains(needle))
        .collect()
}

#[test]
fn demo_routes_requests_and_stops_everything_it_started() -> Result<()> {
    // The binaries must exist (`make test` builds them); bin() says so clearly otherwise.
    bin("fake-kube-apiserver");
    let out = Command::new("bash")
        .arg(repo_root().join("tests/demo.sh"))
        .env("DEMO_DEADLINE", "90")
        .output()
        .context("running tests/demo.sh")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "demo failed: {}\n{stdout}\n{stderr}",
        out.status
    );
    for line in [
        "/products      -> 200  answered by products-",
        "/discounted    -> 200  answered by discounted-products-",
        "/no-such-page  -> 404  answered by default backend - 404",
        "The demo worked",
        // The dashboard's URL, and explain naming the rule closest to the 404's path.
        "Dashboard: http://127.0.0.1:",
        "closest rule",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    // The endpoints that answered are HEALTHY (the state compared whole: a substring test
    // would also accept UNHEALTHY).
    let healthy = stdout
        .lines()
        .filter_map(|l| l.trim().split_once("  "))
        .filter(|(ep, _)| ep.parse::<std::net::SocketAddr>().is_ok())
        // `IP:PORT  STATE  (instance NODE)`: the state is the first word after the address.
        .filter(|(_, rest)| rest.split_whitespace().next() == Some("HEALTHY"))
        .count();
    assert!(
        healthy > 0,
        "the printed load balancer shows HEALTHY endpoints:\n{stdout}"
    );

    // Every process the demo started ran with its work directory on the command line
    // (the kubeconfig path); none may survive it.
    let work = stdout
        .lines()
        .find_map(|l| l.split("(kubeconfig ").nth(1))
        .and_then(|rest| rest.strip_suffix("/kubeconfig)"))
        .context("the demo prints its kubeconfig path")?
        .to_string();
    let left = wait_for("the demo's processes to be gone", DEADLINE, || {
        Ok(processes_mentioning(&work).is_empty().then_some(()))
    });
    assert!(
        left.is_ok(),
        "left running: {:?}",
        processes_mentioning(&work)
    );

    // The emulator and the local API it printed no longer listen.
    let lines: Vec<&str> = stdout.lines().collect();
    for heading in [
        "== starting the local Kubernetes API",
        "== starting the Compute Engine API emulator",
    ] {
        let i = lines
            .iter()
            .position(|l| l.starts_with(heading))
            .with_context(|| format!("{heading:?} in the demo output"))?;
        let url = lines
            .get(i + 1)
            .and_then(|l| l.split_whitespace().next())
            .context("a URL under the heading")?;
        let socket = url
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .trim_end_matches('/');
        let closed = wait_for(&format!("{socket} to close"), DEADLINE, || {
            Ok(std::net::TcpStream::connect(socket).is_err().then_some(()))
        });
        assert!(
            closed.is_ok(),
            "{heading}: {socket} still accepts connections"
        );
    }
    Ok(())
}
