//! The cloud side of the real-API tier, shared by its tests: the Compute emulator with NEG
//! endpoint validation ON in a private address space (issue 40), one Node registered as a
//! Compute instance the way a VPC-native GKE node pool does it, and the operator running as
//! deploy/'s ServiceAccount.
//!
//! The Node (`node-1`, zone [`support::ZONE`]) has InternalIP [`NODE_IP`] in the subnetwork's
//! primary range and Pod CIDR [`POD_CIDR`]; its instance holds the same: `networkIP` =
//! InternalIP, alias IP range `pods` = Pod CIDR, the cluster's node tag, the default service
//! account (as `fakes/kube-apiserver/src/local/instances.rs` registers local Nodes). The
//! emulator accepts those private addresses because it runs with
//! `--private-ranges` [`PRIVATE_RANGES`] (`fakes/gce-emulator/src/network/ranges.rs`); the Pod
//! CIDR is routed to the tier's private network namespace's `lo`, so health checks and
//! proxied requests reach the Pods and nothing else.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use serde_json::json;

use super::harness::{self, RealApi};
use crate::support;

/// The Node's name (= its instance's name; the NEG endpoints' `instance`).
pub const NODE: &str = "node-1";
/// The Node's InternalIP, in the subnetwork's primary range.
pub const NODE_IP: &str = "10.128.0.2";
/// The Node's Pod CIDR (the tier's network namespace routes it to its `lo`).
pub const POD_CIDR: &str = "10.244.0.0/24";
/// The emulator's `--private-ranges`: the subnetwork's primary range and the Pod range.
pub const PRIVATE_RANGES: &str = "10.128.0.0/20,10.244.0.0/16";

/// Starts the emulator (ephemeral API port, ports 80/443 mapped to ephemeral ones) with NEG
/// endpoint validation in [`PRIVATE_RANGES`]; returns it and its API root URL (no trailing
/// slash). The firewall stays unenforced: this tier is about the API server.
pub fn start_emulator(dir: &Path) -> Result<(support::Proc, String)> {
    let mut cmd = Command::new(support::bin("gce-emulator"));
    cmd.args(["--listen", "127.0.0.1:0", "--port-map", "80=0,443=0"])
        .args(["--private-ranges", PRIVATE_RANGES])
        .args(["--validate-neg-endpoints=true", "--enforce-firewall=false"]);
    let (proc, url) = support::Proc::start("gce-emulator", cmd, dir.join("emulator.log"))?;
    Ok((proc, url.trim().trim_end_matches('/').to_string()))
}

/// Creates Node [`NODE`] (zone label, providerID, Pod CIDR, InternalIP, Ready) on the real API
/// server and registers its Compute instance in the emulator at `compute_url`.
///
/// Errors: kubectl or the instance insert failing (with their output).
pub fn register_node(real: &RealApi, compute_url: &str) -> Result<()> {
    let (project, zone) = (support::PROJECT, support::ZONE);
    let node = format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {NODE}\n  labels:\n    \
         topology.kubernetes.io/zone: {zone}\n    topology.kubernetes.io/region: us-central1\n    \
         kubernetes.io/hostname: {NODE}\nspec:\n  podCIDR: {POD_CIDR}\n  podCIDRs: [{POD_CIDR}]\n  \
         providerID: gce://{project}/{zone}/{NODE}\n"
    );
    let (ok, out, err) = real.kubectl(&["apply", "-f", "-"], Some(&node));
    if !ok {
        bail!("creating Node {NODE}: {out}{err}");
    }
    let status = json!({"status": {
        "addresses": [{"type": "InternalIP", "address": NODE_IP}, {"type": "Hostname", "address": NODE}],
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "stand-in kubelet of the real-API tier"}]}});
    let (ok, out, err) = real.kubectl(
        &[
            "patch",
            "node",
            NODE,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ],
        None,
    );
    if !ok {
        bail!("writing Node {NODE}'s status: {out}{err}");
    }
    let instance = json!({
        "name": NODE,
        "machineType": format!("zones/{zone}/machineTypes/e2-medium"),
        "disks": [{"boot": true, "autoDelete": true, "initializeParams": {
            "sourceImage": "projects/cos-cloud/global/images/family/cos-stable"}}],
        "networkInterfaces": [{"network": "global/networks/default", "networkIP": NODE_IP,
            "aliasIpRanges": [{"ipCidrRange": POD_CIDR, "subnetworkRangeName": "pods"}]}],
        "tags": {"items": [support::NODE_TAG]},
        "serviceAccounts": [{"email": "default",
            "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}],
        "labels": {"goog-gke-node": ""},
    });
    let url = format!("{compute_url}/compute/v1/projects/{project}/zones/{zone}/instances");
    let resp = reqwest::blocking::Client::new()
        .post(&url)
        .json(&instance)
        .send()
        .context("inserting the Node's instance")?;
    if !resp.status().is_success() {
        bail!(
            "instances.insert {NODE}: {} {}",
            resp.status(),
            resp.text().unwrap_or_default()
        );
    }
    Ok(())
}

/// Installs the operator as a user would (`kubectl apply -k deploy/`) and waits for its CRDs;
/// returns the kubeconfig of deploy/'s ServiceAccount (a TokenRequest token).
pub fn install_operator(real: &RealApi) -> Result<PathBuf> {
    let deploy = support::repo_root().join("deploy");
    let (ok, out, err) = real.kubectl(&["apply", "-k", &deploy.display().to_string()], None);
    if !ok {
        bail!("kubectl apply -k deploy/: {out}{err}");
    }
    let (ok, out, err) = real.kubectl(
        &[
            "wait",
            "--for=condition=Established",
            "crd/backendconfigs.cloud.google.com",
            "--timeout=60s",
        ],
        None,
    );
    if !ok {
        bail!("the BackendConfig CRD: {out}{err}");
    }
    real.service_account_kubeconfig(
        support::OPERATOR_NAMESPACE,
        support::OPERATOR_SERVICE_ACCOUNT,
    )
}

/// A child process killed on drop.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the operator with `kubeconfig` against `compute_url`, logging to `log`, with leader
/// election and a one-hour resync (as `operator_on_a_real_api_server` runs it).
pub fn start_operator(kubeconfig: &Path, compute_url: &str, log: &Path) -> Result<KillOnDrop> {
    let out = std::fs::File::create(log)?;
    let mut cmd = Command::new(support::bin("gclb-operator"));
    // Its Application Default Credentials come from the emulator's metadata server, as
    // Workload Identity serves them: nothing reaches for a real metadata server.
    support::metadata_adc(
        &mut cmd,
        compute_url,
        log.parent().unwrap_or(Path::new("/tmp")),
    );
    let child = cmd
        .arg("run")
        .args(["--project", support::PROJECT, "--zone", support::ZONE])
        .args(["--network", "default", "--cluster-name", support::CLUSTER])
        .args(["--compute-endpoint", compute_url])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--metrics-listen", "127.0.0.1:0", "--resync-period", "3600"])
        .arg("--leader-elect")
        .env("POD_NAMESPACE", support::OPERATOR_NAMESPACE)
        .env("RUST_LOG", "info,gclb_operator=debug")
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .context("starting gclb-operator")?;
    Ok(KillOnDrop(child))
}

/// Runs kubectl with `kubeconfig`, failing with its output.
pub fn kubectl_ok(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Result<String> {
    let (ok, out, err) = harness::kubectl(kubeconfig, args, stdin);
    if !ok {
        bail!("kubectl {args:?} failed:\n{out}\n{err}");
    }
    Ok(out)
}
