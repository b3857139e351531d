//! End to end: two operator replicas with `--leader-elect`. Exactly one reconciles; the other
//! stands by (serving /healthz and /readyz, reconciling nothing) and takes over when the
//! leader dies without releasing the Lease; a replica stopped with SIGTERM releases the Lease.
//! The algorithm is client-go's Lease lock (src/controller/leader_election.rs).

mod support;

use std::process::Command;

use anyhow::{bail, Context, Result};
use support::*;

/// Short, so a takeover is quick, yet with a renew deadline (2/3 of it) that a busy 2-core
/// machine running the other tests never misses.
const LEASE_SECONDS: &str = "8";

fn replica(sys: &System, identity: &str) -> Result<Proc> {
    sys.spawn_operator(
        &[
            "--leader-elect",
            "--leader-election-identity",
            identity,
            "--leader-election-lease-duration",
            LEASE_SECONDS,
        ],
        identity,
    )
}

/// The Lease `gclb-operator/gclb-operator`'s holder and transitions, through kubectl (the
/// operator's own namespace, where deploy/rbac.yaml lets it hold that Lease only).
fn lease(sys: &System) -> Result<(Option<String>, i64)> {
    let lease = sys.get_json(&["lease", "-n", OPERATOR_NAMESPACE, "gclb-operator"])?;
    Ok((
        lease["spec"]["holderIdentity"]
            .as_str()
            .filter(|h| !h.is_empty())
            .map(str::to_string),
        lease["spec"]["leaseTransitions"].as_i64().unwrap_or(0),
    ))
}

fn wait_for_holder(sys: &System, who: &str) -> Result<i64> {
    wait_for(&format!("{who} to hold the Lease"), DEADLINE, || {
        let (holder, transitions) = lease(sys)?;
        Ok((holder.as_deref() == Some(who)).then_some(transitions))
    })
    .with_context(|| sys.logs())
}

#[test]
fn one_replica_leads_the_standby_takes_over_and_sigterm_releases() -> Result<()> {
    let sys = System::start(&["--port-map", "80=0,443=0"])?;
    sys.apply_path(&repo_root().join("docs/examples"))?;

    // Replica a leads (started first, alone); replica b joins as a standby.
    let a = replica(&sys, "replica-a")?;
    let first = wait_for_holder(&sys, "replica-a")?;
    let b = replica(&sys, "replica-b")?;
    let socket = sys.wait_for_ingress_socket("default", "my-ingress")?;
    sys.wait_for_response(&socket, "your-store.example", "/products", 200, "products-")?;

    // The standby serves its endpoints, counts as ready, and has reconciled nothing.
    let b_metrics = b.metrics_url()?;
    let b_base = b_metrics.trim_end_matches("/metrics");
    let ready = reqwest::blocking::get(format!("{b_base}/readyz"))?;
    assert_eq!(ready.status(), 200, "a standby is ready");
    wait_for("replica-b to say it waits", DEADLINE, || {
        Ok(b.log_text()
            .contains("waiting to become the leader")
            .then_some(()))
    })?;
    assert!(a.ok_syncs()? >= 1, "the leader reconciled my-ingress");
    assert_eq!(b.ok_syncs()?, 0, "the standby reconciled nothing");
    assert_eq!(lease(&sys)?.0.as_deref(), Some("replica-a"));

    // The leader dies without releasing (SIGKILL): b takes over after the lease duration,
    // and programs an Ingress created after the takeover.
    drop(a);
    let transitions = wait_for_holder(&sys, "replica-b")?;
    assert!(
        transitions > first,
        "a takeover counts a transition ({first} -> {transitions})"
    );
    sys.apply(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: after-takeover\n  \
         annotations: {kubernetes.io/ingress.class: gce}\nspec:\n  defaultBackend:\n    \
         service: {name: my-discounted-products, port: {number: 80}}\n",
    )?;
    let socket = sys.wait_for_ingress_socket("default", "after-takeover")?;
    sys.wait_for_response(&socket, "any.example", "/", 200, "discounted-products-")?;
    assert!(b.ok_syncs()? >= 1, "the new leader reconciles");

    // SIGTERM: b stops its controllers and gives the Lease up at once.
    let status = Command::new("kill")
        .args(["-TERM", &b.child.id().to_string()])
        .status()?;
    assert!(status.success());
    wait_for("replica-b to release the Lease", DEADLINE, || {
        Ok(lease(&sys)?.0.is_none().then_some(()))
    })
    .with_context(|| sys.logs())?;
    if !b.log_text().contains("released the leader Lease") {
        bail!("replica-b did not log the release:\n{}", b.log_text());
    }
    Ok(())
}
