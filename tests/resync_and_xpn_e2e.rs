//! End to end: a resync with nothing changed writes nothing to the Compute API (issue 5's
//! acceptance list). The Shared VPC firewall hint is proven in firewall_e2e.rs, where the
//! emulator's firewall makes the refused rule visible (UNHEALTHY, 502) until the host project's
//! admin runs the hint's command.

mod support;

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::json;
use support::*;

fn examples() -> std::path::PathBuf {
    repo_root().join("docs/examples")
}

/// Waits until every example Pod is Ready and every NEG holds its two (or one) endpoints.
fn wait_until_settled(sys: &System, socket: &str) -> Result<()> {
    sys.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "pod",
        "--all",
        "--timeout=90s",
    ])?;
    sys.kubectl_ok(&[
        "wait",
        "--for=condition=Ready",
        "pod",
        "--all",
        "-n",
        "kube-system",
        "--timeout=90s",
    ])?;
    sys.wait_for_response(socket, "your-store.example", "/products", 200, "products-")?;
    sys.wait_for_response(
        socket,
        "your-store.example",
        "/discounted",
        200,
        "discounted-products-",
    )?;
    wait_for("5 endpoints attached across the NEGs", DEADLINE, || {
        let mut total = 0;
        for neg in sys.neg_names()? {
            let eps = sys.compute_post(
                &format!("compute/v1/projects/{PROJECT}/zones/{ZONE}/networkEndpointGroups/{neg}/listNetworkEndpoints"),
                &json!({}),
            )?;
            total += eps["items"].as_array().map_or(0, |a| a.len());
        }
        Ok((total == 5).then_some(()))
    })
}

#[test]
fn a_resync_with_nothing_changed_sends_zero_mutating_compute_calls() -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0,443=0"])?;
    sys.apply_path(&examples())?;
    sys.start_operator(&["--resync-period", "2"])?;
    let socket = sys.wait_for_ingress_socket("default", "my-ingress")?;
    wait_until_settled(&sys, &socket)?;

    // Let any write the settling triggered finish, then take the baseline: the baseline is
    // good once a whole reconcile ran without a write (no mutating call while the operator's
    // completed syncs went up by two; counts read calls-then-syncs at the window's start and
    // syncs-then-calls at its end, so the second sync began and ended inside it). A fixed
    // pause would not do: on a loaded machine one reconcile can outlast it.
    let op = sys.operator.as_ref().context("operator")?;
    let mut before = sys.compute_get("_emulator/calls")?;
    let mut syncs_before = op.ok_syncs()?;
    wait_for("a whole resync without a mutating call", DEADLINE, || {
        let syncs = op.ok_syncs()?;
        let now = sys.compute_get("_emulator/calls")?;
        if now["mutating"] != before["mutating"] {
            // A new window: its sync count read after its call count, so a sync counted
            // past it began after the baseline.
            before = now;
            syncs_before = op.ok_syncs()?;
            return Ok(None);
        }
        Ok((syncs >= syncs_before + 2).then_some(()))
    })?;

    // Several periodic resyncs happen (the operator reads the load balancer back each time)...
    let start = Instant::now();
    let reads_before = before["reading"].as_u64().unwrap_or(0);
    let after = wait_for("three resync periods with reads", DEADLINE, || {
        let now = sys.compute_get("_emulator/calls")?;
        let reads = now["reading"].as_u64().unwrap_or(0);
        Ok((start.elapsed() > Duration::from_secs(7) && reads >= reads_before + 15).then_some(now))
    })
    .map_err(|e| anyhow!("{e:#}\n{}", sys.logs()))?;

    // ...and none of them wrote anything.
    if after["mutating"] != before["mutating"] {
        let changed: Vec<String> = after["methods"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, v)| before["methods"][k.as_str()] != **v)
            .map(|(k, v)| format!("{k}: {} -> {v}", before["methods"][k.as_str()]))
            .collect();
        bail!(
            "a no-op resync sent mutating calls: {changed:?}\n{}",
            sys.logs()
        );
    }
    Ok(())
}
