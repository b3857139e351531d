//! End-to-end harness: starts the real binaries (fake-kube-apiserver, gce-emulator,
//! gclb-operator) on ephemeral loopback ports, drives them with the installed `kubectl` and
//! with real HTTP requests, and stops everything on drop.
//!
//! Binaries are found next to `CARGO_BIN_EXE_gclb-operator` (one target directory for the whole
//! workspace); `make test` builds them all before running tests.
#![allow(dead_code)]

pub mod compute;
pub mod fanout;
pub mod gke_prebuilt;
pub mod iam;
pub mod kubectl;
pub mod load;
pub mod process;
pub mod regional;
pub mod rollout;
pub mod system;
pub mod tls;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
pub use iam::metadata_adc;
pub use process::Proc;
use serde_json::Value;
pub use system::System;

/// Default deadline for anything the system does asynchronously (on a busy 2-core machine).
pub const DEADLINE: Duration = Duration::from_secs(90);

/// The namespace and ServiceAccount the operator runs as (deploy/rbac.yaml), as in a cluster.
pub const OPERATOR_NAMESPACE: &str = "gclb-operator";
pub const OPERATOR_SERVICE_ACCOUNT: &str = "gclb-operator";

/// Project, zone (of the local API's one Node, where the NEGs go) and cluster name the tests
/// run the operator with.
pub const PROJECT: &str = "e2e-project";
pub const ZONE: &str = "us-central1-a";
pub const CLUSTER: &str = "e2e";
/// The network tag of the local Nodes' instances, and the operator's firewall target tag.
pub const NODE_TAG: &str = "gke-e2e-node";

/// How to start a [`System`] beyond the defaults.
#[derive(Clone, Debug, Default)]
pub struct Options<'a> {
    /// Extra flags for gce-emulator.
    pub emulator_args: &'a [&'a str],
    /// One local Node per zone (default: one Node in [`ZONE`]).
    pub nodes: &'a [&'a str],
    /// A Shared VPC: `(host project, token of the host's admin)`. The host is made a Shared
    /// VPC host with [`PROJECT`] attached (as its admin) before the Nodes' instances are
    /// registered on the host's `default` network.
    pub shared_vpc: Option<(&'a str, &'a str)>,
    /// Extra flags for fake-kube-apiserver (e.g. `--audit-log`).
    pub apiserver_args: &'a [&'a str],
    /// Run the emulator with `--iam`: every API call needs a token and its permissions. The
    /// harness itself (its `compute_*` helpers, the local kubelet registering the Nodes'
    /// instances) calls as [`LOCAL_ADMIN`], bound to `roles/compute.admin`; the operator gets
    /// nothing until the test binds its account.
    pub iam: bool,
}

/// Path of a workspace binary (operator, `gce-emulator`, `fake-kube-apiserver`).
pub fn bin(name: &str) -> PathBuf {
    let operator = PathBuf::from(env!("CARGO_BIN_EXE_gclb-operator"));
    let path = operator.with_file_name(name);
    assert!(
        path.exists(),
        "{} is missing: build every binary first (`cargo build --workspace --bins`, as `make test` does)",
        path.display()
    );
    path
}

/// Repository root (for docs/examples and deploy/).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Polls `f` until it returns `Ok(Some(v))`, or fails after `deadline` with the last error.
pub fn wait_for<T>(
    what: &str,
    deadline: Duration,
    mut f: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let start = Instant::now();
    let mut last = String::from("condition not met yet");
    let mut pause = Duration::from_millis(50);
    loop {
        match f() {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last = format!("{e:#}"),
        }
        if start.elapsed() > deadline {
            bail!("timed out after {:?} waiting for {what}: {last}", deadline);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

/// `items[].name` of a Compute list response.
pub fn item_names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn rand_suffix() -> String {
    use rand::Rng;
    format!("{:08x}", rand::rng().random::<u32>())
}
