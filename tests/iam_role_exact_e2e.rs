//! The operator's role proven enough, end to end (issue 43), against an emulator that enforces
//! IAM (`gce-emulator --iam`), the operator authenticated through the metadata server as a
//! Google service account bound to exactly deploy/iam/gclb-operator-role.yaml:
//! - [`exactly_deploy_iams_role_is_enough`]: the scenario (my-ingress: program the load
//!   balancer until it serves, then delete the Ingress until everything is collected) passes
//!   with no refusal; so it does with the predefined roles docs/install.md names instead
//!   (Compute Load Balancer Admin + Compute Security Admin). It prints which of the role's
//!   permissions the scenario exercised.
//!
//! That the role holds nothing more than needed, permission by permission and over every kind
//! of load balancer, is tests/iam_permission_report_e2e.rs (deploy/iam/permission-report.md).

mod support;

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Context, Result};
use reqwest::Method;
use support::iam::role_permissions;
use support::*;

const GSA: &str = "gclb-operator@p1.iam.gserviceaccount.com";
fn under_test() -> String {
    format!("projects/{PROJECT}/roles/underTest")
}

/// Defines [`under_test`] with `perms`.
fn define_under_test(sys: &System, perms: &[String]) -> Result<()> {
    sys.define_role("underTest", perms)
}

fn binding(sys: &System, method: Method, role: &str) -> Result<()> {
    sys.bind(method, &format!("serviceAccount:{GSA}"), role)
}

/// The operator's checks since the last reset: permission -> (granted, denied).
fn usage(sys: &System, reset: bool) -> Result<BTreeMap<String, (u64, u64)>> {
    sys.iam_usage(&format!("serviceAccount:{GSA}"), reset)
}

/// The emulator with `--iam`, the operator bound to [`under_test`] = deploy/iam's role, and
/// the example's Services and Pods (not yet the Ingress).
fn stack() -> Result<System> {
    let mut sys = System::start_with(Options {
        emulator_args: &[
            "--port-map",
            "80=0,443=0",
            "--metadata-service-account",
            GSA,
        ],
        iam: true,
        ..Options::default()
    })?;
    define_under_test(&sys, &role_permissions()?)?;
    binding(&sys, Method::POST, &under_test())?;
    let examples = repo_root().join("docs/examples");
    for f in [
        "00-ingressclass.yaml",
        "10-default-backend.yaml",
        "20-services-and-deployments.yaml",
    ] {
        sys.apply_path(&examples.join(f))?;
    }
    sys.start_operator(&[])?;
    Ok(sys)
}

/// Where a scenario run stopped.
#[derive(Debug, PartialEq, Eq)]
enum Phase {
    /// Programming the load balancer until it serves.
    Create,
    /// Deleting the Ingress until everything is collected.
    Delete,
}

/// What remains of the operator's load balancers in the project (empty once collected).
fn leftovers(sys: &System) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for c in [
        "forwardingRules",
        "targetHttpProxies",
        "urlMaps",
        "backendServices",
        "healthChecks",
        "firewalls",
    ] {
        out.extend(
            sys.compute_names(c)?
                .into_iter()
                // The operator's names (GKE's, with --takeover); not the network's defaults.
                .filter(|n| n.starts_with("k8s"))
                .map(|n| format!("{c}/{n}")),
        );
    }
    Ok(out)
}

/// Polls `done` until it holds, or until `removed` (if any) was refused; `touch` re-applies
/// the Ingress's annotation so a backed-off sync runs now. `Ok(true)`: done; `Ok(false)`: the
/// removed permission was refused first.
fn until(
    sys: &System,
    what: &str,
    removed: Option<&str>,
    mut done: impl FnMut() -> Result<bool>,
) -> Result<bool> {
    wait_for(what, DEADLINE, || {
        if done()? {
            return Ok(Some(true));
        }
        if let Some(p) = removed {
            if usage(sys, false)?.get(p).is_some_and(|c| c.1 > 0) {
                return Ok(Some(false));
            }
        }
        Ok(None)
    })
    .with_context(|| format!("{what}\n{}", sys.logs()))
}

fn serves(sys: &System) -> Result<bool> {
    let ing = sys.get_json(&["ingress", "-n", "default", "my-ingress"])?;
    let Some(ip) = ing["status"]["loadBalancer"]["ingress"][0]["ip"].as_str() else {
        return Ok(false);
    };
    let Some(socket) = sys.listener_for(ip, 80)? else {
        return Ok(false);
    };
    Ok(sys
        .http_get(&socket, "your-store.example", "/products")
        .is_ok_and(|(s, body)| s == 200 && body.contains("products-")))
}

fn ingress_gone_and_collected(sys: &System) -> Result<bool> {
    let gone = !sys
        .kubectl_ok(&["get", "ingress", "-n", "default", "-o", "name"])?
        .contains("my-ingress");
    Ok(gone && leftovers(sys)?.is_empty())
}

/// One run of the scenario; `removed` is the permission taken out of the role, if any.
/// `Ok(None)`: it completed; `Ok(Some(phase))`: it stalled there on a refusal of `removed`.
fn scenario(sys: &System, removed: Option<&str>) -> Result<Option<Phase>> {
    sys.apply_path(&repo_root().join("docs/examples/30-my-ingress.yaml"))?;
    if !until(sys, "my-ingress serves /products", removed, || serves(sys))? {
        return Ok(Some(Phase::Create));
    }
    sys.kubectl_ok(&[
        "delete",
        "ingress",
        "-n",
        "default",
        "my-ingress",
        "--wait=false",
    ])?;
    if !until(sys, "my-ingress deleted and collected", removed, || {
        ingress_gone_and_collected(sys)
    })? {
        return Ok(Some(Phase::Delete));
    }
    Ok(None)
}

/// Permissions checked and granted in a clean run with the whole role.
fn exercised(sys: &System) -> Result<BTreeSet<String>> {
    usage(sys, true)?;
    if let Some(phase) = scenario(sys, None)? {
        bail!("the scenario stalled in {phase:?} with the whole role");
    }
    let u = usage(sys, true)?;
    let denied: Vec<&String> = u.iter().filter(|(_, c)| c.1 > 0).map(|(p, _)| p).collect();
    if !denied.is_empty() {
        bail!("refused with exactly deploy/iam's role: {denied:?}");
    }
    Ok(u.into_keys().collect())
}

#[test]
fn exactly_deploy_iams_role_is_enough() -> Result<()> {
    let sys = stack()?;
    let role: BTreeSet<String> = role_permissions()?.into_iter().collect();
    let used = exercised(&sys)?;
    assert!(
        used.is_subset(&role),
        "used outside the role: {:?}",
        used.difference(&role)
    );
    // Most of the role is exercised by this one scenario.
    assert!(
        used.len() >= 30,
        "only {} permissions exercised: {used:?}",
        used.len()
    );
    println!(
        "exercised {} of the role's {} permissions:",
        used.len(),
        role.len()
    );
    for p in &used {
        println!("  {p}");
    }
    // The predefined alternative docs/install.md names is enough too.
    binding(&sys, Method::DELETE, &under_test())?;
    binding(&sys, Method::POST, "roles/compute.loadBalancerAdmin")?;
    binding(&sys, Method::POST, "roles/compute.securityAdmin")?;
    usage(&sys, true)?;
    if let Some(phase) = scenario(&sys, None)? {
        bail!("stalled in {phase:?} with the predefined roles");
    }
    let denied: Vec<String> = usage(&sys, true)?
        .into_iter()
        .filter(|(_, c)| c.1 > 0)
        .map(|(p, _)| p)
        .collect();
    assert!(denied.is_empty(), "the predefined roles lack {denied:?}");
    Ok(())
}
