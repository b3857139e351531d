//! Takeover mode adopts what GKE's Ingress controller built (issue 32, issue 15: "adopt, don't
//! recreate, where names match").
//!
//! The project starts with exactly the resources GKE's controller (glbc v1.23) builds for the
//! demo Ingress (docs/examples), and the cluster with GKE's `kube-system/ingress-uid`
//! ConfigMap and the Ingress with GKE's finalizer and status IP (tests/support/gke_prebuilt.rs,
//! which also says where each name and field comes from). Then the operator starts with
//! `--takeover`: it converges (the Ingress serves through the same IP) with no insert and no
//! delete, per the emulator's per-method call counts (`GET /_emulator/calls`), no other write
//! than the URL map's path-rule order, and no Warning Event.
//!
//! Both of GKE's frontend schemes are covered: v2 (`k8s2-...`, what GKE builds since 1.17)
//! and v1 (`k8s-um-default-my-ingress--<uid>`). The same takeover under exactly deploy/iam's
//! role, and its garbage collection, is tests/iam_role_exact_e2e.rs.

mod support;

use anyhow::Result;
use support::*;

fn adopts(v1: bool) -> Result<()> {
    let mut sys = System::start(&["--port-map", "80=0"])?;
    sys.apply_basics()?;
    sys.apply_path(&repo_root().join("docs/examples/20-services-and-deployments.yaml"))?;
    let prebuilt = gke_prebuilt::install(&sys, v1)?;
    sys.start_operator(gke_prebuilt::OPERATOR_FLAGS)?;
    prebuilt.check_adopted(&sys)
}

#[test]
fn takeover_adopts_gkes_v2_load_balancer_without_a_write() -> Result<()> {
    adopts(false)
}

#[test]
fn takeover_adopts_gkes_v1_load_balancer_without_a_write() -> Result<()> {
    adopts(true)
}
