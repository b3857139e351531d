//! The operator's role proven enough, end to end (issue 43), against an emulator that enforces
//! IAM (`gce-emulator --iam`), the operator authenticated through the metadata server as a
//! Google service account bound to exactly deploy/iam/gclb-operator-role.yaml:
//! - [`exactly_deploy_iams_role_is_enough`]: the scenario (my-ingress: program the load
//!   balancer until it serves, then delete the Ingress until everything is collected) passes
//!   with no refusal; so it does with the predefined roles docs/install.md names instead
//!   (Compute Load Balancer Admin + Compute Security Admin). It prints which of the role's
//!   permissions the scenario exercised.
//! - Takeover ([`takeover_with_exactly_deploy_iams_role`], its v1 twin, and
//!   [`takeover_with_the_predefined_roles`]): GKE's load balancer for my-ingress built by the
//!   local admin as GKE's controller builds it (tests/support/gke_prebuilt.rs, as
//!   tests/takeover_e2e.rs), then the operator started with `--takeover` under the role: it
//!   adopts (serves through GKE's IP, no insert, no delete, no Warning Event), and once the
//!   Ingress is deleted its garbage collection removes every one of GKE's resources, with no
//!   refusal. Takeover checks no permission that deploy/iam/permission-report.md lists as
//!   reached by no scenario (asserted), so the report's "not reached" rows stand.
//! - [`takeover_without_a_permission_it_needs_is_refused_with_an_event`]: takeover under the
//!   role minus each of [`TAKEOVER_PROVES`] is refused that permission and no other, and the
//!   Ingress's Warning `PermissionDenied` Event names it; among them
//!   `compute.networkEndpointGroups.get`, which the report's scenarios reach only depending on
//!   timing (its row there points here).
//!
//! That the role holds nothing more than needed, permission by permission and over every kind
//! of load balancer, is tests/iam_permission_report_e2e.rs (deploy/iam/permission-report.md).

mod support;

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Context, Result};
use reqwest::Method;
use support::iam::{role_permissions, start_with_operator_account, OPERATOR_GSA as GSA};
use support::*;

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
    let mut sys = start_with_operator_account(&[])?;
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

/// Deletes default/my-ingress, not waiting.
fn delete_my_ingress(sys: &System) -> Result<()> {
    sys.kubectl_ok(&[
        "delete",
        "ingress",
        "-n",
        "default",
        "my-ingress",
        "--wait=false",
    ])
    .map(drop)
}

/// Whether default/my-ingress is gone (its finalizer removed).
fn my_ingress_gone(sys: &System) -> Result<bool> {
    Ok(!sys
        .kubectl_ok(&["get", "ingress", "-n", "default", "-o", "name"])?
        .contains("my-ingress"))
}

fn ingress_gone_and_collected(sys: &System) -> Result<bool> {
    Ok(my_ingress_gone(sys)? && leftovers(sys)?.is_empty())
}

/// One run of the scenario; `removed` is the permission taken out of the role, if any.
/// `Ok(None)`: it completed; `Ok(Some(phase))`: it stalled there on a refusal of `removed`.
fn scenario(sys: &System, removed: Option<&str>) -> Result<Option<Phase>> {
    sys.apply_path(&repo_root().join("docs/examples/30-my-ingress.yaml"))?;
    if !until(sys, "my-ingress serves /products", removed, || serves(sys))? {
        return Ok(Some(Phase::Create));
    }
    delete_my_ingress(sys)?;
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

/// The permissions deploy/iam/permission-report.md says no scenario reaches (rows whose
/// "exercised in" is `-`).
fn unreached_in_report() -> Result<BTreeSet<String>> {
    let report = std::fs::read_to_string(repo_root().join("deploy/iam/permission-report.md"))?;
    Ok(report
        .lines()
        .filter_map(|l| {
            let mut cols = l.strip_prefix("| ")?.split(" | ");
            let p = cols.next()?;
            (cols.next()? == "-").then(|| p.to_string())
        })
        .collect())
}

/// The permissions refused to [`GSA`] since the last reset of the usage counters.
fn denied(sys: &System) -> Result<Vec<String>> {
    Ok(usage(sys, false)?
        .into_iter()
        .filter(|(_, c)| c.1 > 0)
        .map(|(p, _)| p)
        .collect())
}

/// The takeover stack: the emulator with `--iam`, [`under_test`] defined with `perms`, `roles`
/// bound to [`GSA`]; GKE's load balancer for my-ingress pre-built by the local admin
/// (tests/support/gke_prebuilt.rs; `v1`: GKE's v1 frontend names, else v2); then the usage
/// counters reset and the operator started with `--takeover` (and GKE's UID from its
/// ConfigMap), authenticated through the metadata server as [`GSA`].
fn takeover_stack(
    roles: &[String],
    perms: &[String],
    v1: bool,
) -> Result<(System, gke_prebuilt::Prebuilt)> {
    let mut sys = System::start_with(Options {
        emulator_args: &["--port-map", "80=0", "--metadata-service-account", GSA],
        iam: true,
        ..Options::default()
    })?;
    define_under_test(&sys, perms)?;
    for r in roles {
        binding(&sys, Method::POST, r)?;
    }
    sys.apply_basics()?;
    sys.apply_path(&repo_root().join("docs/examples/20-services-and-deployments.yaml"))?;
    let prebuilt = gke_prebuilt::install(&sys, v1)?;
    usage(&sys, true)?;
    sys.start_operator(gke_prebuilt::OPERATOR_FLAGS)?;
    Ok((sys, prebuilt))
}

/// The takeover scenario under `roles` ([`takeover_stack`], [`under_test`] exactly deploy/iam's
/// role): adoption checked as tests/takeover_e2e.rs checks it
/// ([`gke_prebuilt::Prebuilt::check_adopted`]: served through GKE's IP, no insert, no delete,
/// no Warning Event), then the Ingress deleted until garbage collection removed every one of
/// GKE's resources, with no Warning Event. Fails on any refusal; returns the permissions
/// checked (granted).
fn takeover_under(roles: &[String], v1: bool) -> Result<BTreeSet<String>> {
    let (sys, prebuilt) = takeover_stack(roles, &role_permissions()?, v1)?;
    prebuilt
        .check_adopted(&sys)
        .with_context(|| format!("refused under {roles:?}: {:?}", denied(&sys)))?;
    let refused = denied(&sys)?;
    if !refused.is_empty() {
        bail!("takeover under {roles:?} was refused {refused:?}");
    }
    delete_my_ingress(&sys)?;
    until(&sys, "GKE's load balancer collected", None, || {
        Ok(my_ingress_gone(&sys)? && prebuilt.remaining(&sys)?.is_empty())
    })
    .with_context(|| {
        format!(
            "left: {:?}; refused: {:?}",
            prebuilt.remaining(&sys).unwrap_or_default(),
            denied(&sys).unwrap_or_default()
        )
    })?;
    let u = usage(&sys, true)?;
    let refused: Vec<&String> = u.iter().filter(|(_, c)| c.1 > 0).map(|(p, _)| p).collect();
    if !refused.is_empty() {
        bail!("takeover's garbage collection under {roles:?} was refused {refused:?}");
    }
    let warnings: Vec<String> = sys
        .events_for("default", "Ingress", "my-ingress")?
        .into_iter()
        .filter(|e| e.starts_with("Warning"))
        .collect();
    assert!(warnings.is_empty(), "Warning Events: {warnings:?}");
    Ok(u.into_keys().collect())
}

/// Takeover (v2 frontend names) under exactly deploy/iam's role minus `p`: waits until the
/// emulator refused `p` and the Ingress has a Warning `PermissionDenied` Event naming it;
/// fails if anything else was refused. Returns the Event ("TYPE REASON: MESSAGE").
fn takeover_without(p: &str) -> Result<String> {
    let perms: Vec<String> = role_permissions()?.into_iter().filter(|q| q != p).collect();
    let (sys, _) = takeover_stack(&[under_test()], &perms, false)?;
    let needle = format!("'{p}'");
    let event = wait_for(&format!("{p} refused and named"), DEADLINE, || {
        if !denied(&sys)?.iter().any(|q| q == p) {
            return Ok(None);
        }
        Ok(sys
            .events_for("default", "Ingress", "my-ingress")?
            .into_iter()
            .find(|e| e.starts_with("Warning PermissionDenied") && e.contains(&needle)))
    })
    .with_context(|| format!("refused: {:?}\n{}", denied(&sys), sys.logs()))?;
    let refused = denied(&sys)?;
    anyhow::ensure!(refused == [p], "without {p}, refused: {refused:?}");
    Ok(event)
}

/// Takeover under exactly the role (`v1`: GKE's v1 frontend names, else v2): passes, checks
/// nothing outside the role and nothing the permission report lists as reached by no scenario.
fn takeover_under_the_role(v1: bool) -> Result<()> {
    let used = takeover_under(&[under_test()], v1)?;
    let role: BTreeSet<String> = role_permissions()?.into_iter().collect();
    assert!(
        used.is_subset(&role),
        "used outside the role: {:?}",
        used.difference(&role)
    );
    let unreached = unreached_in_report()?;
    assert!(
        unreached.len() >= 5,
        "the report's not-reached rows not found: {unreached:?}"
    );
    let newly: Vec<&String> = used.intersection(&unreached).collect();
    assert!(
        newly.is_empty(),
        "takeover reaches what deploy/iam/permission-report.md says no scenario does: {newly:?}"
    );
    println!("takeover (v1: {v1}) exercised {} permissions:", used.len());
    for p in &used {
        println!("  {p}");
    }
    Ok(())
}

#[test]
fn takeover_with_exactly_deploy_iams_role() -> Result<()> {
    takeover_under_the_role(false)
}

#[test]
fn takeover_v1_with_exactly_deploy_iams_role() -> Result<()> {
    takeover_under_the_role(true)
}

/// docs/install.md's predefined alternative (Compute Load Balancer Admin + Compute Security
/// Admin) is enough for takeover too.
#[test]
fn takeover_with_the_predefined_roles() -> Result<()> {
    let roles = [
        "roles/compute.loadBalancerAdmin",
        "roles/compute.securityAdmin",
    ];
    let used = takeover_under(&roles.map(String::from), false)?;
    assert!(used.len() >= 10, "only {used:?} checked");
    Ok(())
}

/// What takeover alone proves needed: `compute.networkEndpointGroups.get`, which
/// `networkEndpointGroups.listNetworkEndpoints` checks (Compute API reference,
/// deploy/iam/method-permissions.yaml) and which the operator calls for a NEG whose endpoints
/// it has not recorded, every time for GKE's NEGs (the permission report's scenarios create
/// their NEGs, so they reach it only depending on timing: deploy/iam/permission-report.md);
/// and `compute.urlMaps.update`, adoption's one write (the path rules' order). Without either,
/// takeover is refused and the Ingress's Event names the permission.
const TAKEOVER_PROVES: &[&str] = &[
    "compute.networkEndpointGroups.get",
    "compute.urlMaps.update",
];

#[test]
fn takeover_without_a_permission_it_needs_is_refused_with_an_event() -> Result<()> {
    for p in TAKEOVER_PROVES {
        let event = takeover_without(p)?;
        println!("without {p}: {event}");
    }
    Ok(())
}
