//! A real kube-controller-manager beside the real kube-apiserver (issue 40), found the envtest
//! way: `KUBEBUILDER_ASSETS` also holds `kube-controller-manager` (built from the same public
//! tree as the API server; /work/shared/envtest/README.md, "kube-controller-manager beside
//! it"). [`assets`] returns `None` without it, and the caller prints why it skipped.
//!
//! [`ControllerManager::start`] runs it against a [`RealApi`] with the flags that README lists:
//! the admin kubeconfig for `--kubeconfig` and delegated authentication/authorization (lookup
//! skipped), no leader election, one shared client (`--use-service-account-credentials=false`),
//! the API server's ServiceAccount signing key, its CA as root CA, a CSR signing CA of its own,
//! the Service range, a free `--secure-port` on 127.0.0.1, and every controller except node
//! IPAM, node lifecycle, the cloud controllers, and Service/route (there is no kubelet to renew
//! Node heartbeats: with node lifecycle on, the Node would be tainted `unreachable` after 40 s
//! and its Pods evicted). So a Deployment gets its ReplicaSet and Pods, a Service its
//! EndpointSlices, a namespace its `default` ServiceAccount, exactly as in a cluster. It runs in
//! whatever network namespace the caller runs in (the tier's private one). Killed on drop.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};

use super::harness::{free_port, RealApi, READY_DEADLINE};

/// The controllers started: all but node IPAM, node lifecycle and the cloud ones.
pub const CONTROLLERS: &str = "*,-nodeipam,-nodelifecycle,-cloud-node-lifecycle,-service,-route";

/// `KUBEBUILDER_ASSETS/kube-controller-manager`, or `None` (with the reason on stderr).
pub fn assets() -> Option<PathBuf> {
    let dir = std::env::var_os("KUBEBUILDER_ASSETS").map(PathBuf::from)?;
    let bin = dir.join("kube-controller-manager");
    if bin.is_file() {
        Some(bin)
    } else {
        eprintln!(
            "SKIPPED: KUBEBUILDER_ASSETS={} has no kube-controller-manager; the rollout \
             scenarios need one built from the same tree as kube-apiserver (docs/testing.md, \
             the real-API tier)",
            dir.display()
        );
        None
    }
}

/// A running kube-controller-manager.
pub struct ControllerManager {
    child: Child,
    /// Its log file.
    pub log: PathBuf,
    /// `--secure-port` (on 127.0.0.1).
    pub port: u16,
}

impl Drop for ControllerManager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A self-signed CA (certificate and key PEM files in `dir`) for `--cluster-signing-*`.
fn signing_ca(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "real-api-test cluster signer");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = ca.self_signed(&key)?;
    let (c, k) = (dir.join("signer.crt"), dir.join("signer.key"));
    std::fs::write(&c, cert.pem())?;
    std::fs::write(&k, key.serialize_pem())?;
    Ok((c, k))
}

impl ControllerManager {
    /// Starts `bin` against `real` and waits for its `/healthz` (TLS, self-signed; the path
    /// is always allowed without credentials).
    ///
    /// Errors: the process exits or is not healthy within [`READY_DEADLINE`] (with its log).
    pub fn start(bin: &Path, real: &RealApi) -> Result<ControllerManager> {
        let d = real.dir.path();
        let (signer_crt, signer_key) = signing_ca(d)?;
        let port = free_port();
        let log = d.join("kube-controller-manager.log");
        let kc = real.kubeconfig.display().to_string();
        let mut child = Command::new(bin)
            .arg(format!("--kubeconfig={kc}"))
            .arg(format!("--authentication-kubeconfig={kc}"))
            .arg(format!("--authorization-kubeconfig={kc}"))
            .arg("--authentication-skip-lookup")
            .arg("--leader-elect=false")
            .arg("--use-service-account-credentials=false")
            .arg(format!(
                "--service-account-private-key-file={}",
                d.join("sa.key").display()
            ))
            .arg(format!("--root-ca-file={}", d.join("ca.crt").display()))
            .arg(format!(
                "--cluster-signing-cert-file={}",
                signer_crt.display()
            ))
            .arg(format!(
                "--cluster-signing-key-file={}",
                signer_key.display()
            ))
            .arg("--service-cluster-ip-range=10.96.0.0/16")
            .arg(format!("--controllers={CONTROLLERS}"))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={port}"))
            .arg(format!("--cert-dir={}", d.join("kcm-certs").display()))
            .arg("--profiling=false")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("starting kube-controller-manager")?;
        let http = reqwest::blocking::Client::builder()
            .danger_accept_invalid_certs(true)
            .timeout(Duration::from_secs(5))
            .build()?;
        let url = format!("https://127.0.0.1:{port}/healthz");
        let start = Instant::now();
        loop {
            if http.get(&url).send().is_ok_and(|r| r.status().is_success()) {
                break;
            }
            if let Some(status) = child.try_wait()? {
                bail!(
                    "kube-controller-manager exited ({status}) before it was healthy; its log:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            if start.elapsed() > READY_DEADLINE {
                let _ = child.kill();
                bail!(
                    "kube-controller-manager not healthy after {READY_DEADLINE:?}; its log:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(ControllerManager { child, log, port })
    }

    /// The last `n` lines of its log.
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}
