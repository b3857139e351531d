//! The harness's Kubernetes side: `kubectl` against the local API (apply, get as JSON, Events
//! of an object), the CRDs and the basics every Ingress test needs (the gce IngressClass,
//! GKE's default backend), and the Ingress's IP as its status shows it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::{rand_suffix, repo_root, wait_for, System, DEADLINE};

impl System {
    /// Runs `kubectl --kubeconfig ... args`.
    pub fn kubectl(&self, args: &[&str]) -> Result<Output> {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .context("running kubectl")
    }

    /// Runs kubectl and fails unless it exits 0; returns stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> Result<String> {
        let out = self.kubectl(args)?;
        if !out.status.success() {
            bail!(
                "kubectl {} failed: {}{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `kubectl apply -f -` with `yaml` on stdin.
    pub fn apply(&self, yaml: &str) -> Result<String> {
        let path = self
            .dir
            .path()
            .join(format!("apply-{}.yaml", rand_suffix()));
        std::fs::write(&path, yaml)?;
        self.kubectl_ok(&["apply", "-f", path.to_str().unwrap()])
    }

    /// `kubectl apply -f PATH` (file or directory).
    pub fn apply_path(&self, path: &Path) -> Result<String> {
        self.kubectl_ok(&["apply", "-f", path.to_str().unwrap()])
    }

    /// `kubectl get -o json` of one object.
    pub fn get_json(&self, args: &[&str]) -> Result<Value> {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json"]);
        Ok(serde_json::from_str(&self.kubectl_ok(&all)?)?)
    }

    /// Events of one object as "TYPE REASON: MESSAGE" lines (core/v1 and events.k8s.io/v1).
    pub fn events_for(&self, namespace: &str, kind: &str, name: &str) -> Result<Vec<String>> {
        let mut out = Vec::new();
        let core = self.get_json(&["events", "-n", namespace])?;
        for e in core["items"].as_array().cloned().unwrap_or_default() {
            let obj = if e["involvedObject"].is_object() {
                &e["involvedObject"]
            } else {
                &e["regarding"]
            };
            if obj["kind"] == kind && obj["name"] == name {
                let msg = e["message"]
                    .as_str()
                    .or(e["note"].as_str())
                    .unwrap_or_default();
                out.push(format!(
                    "{} {}: {}",
                    e["type"].as_str().unwrap_or(""),
                    e["reason"].as_str().unwrap_or(""),
                    msg
                ));
            }
        }
        Ok(out)
    }

    /// Applies the CRDs from `crds/*.yaml` (not the kustomization) and waits until each kind
    /// is served.
    pub fn apply_crds(&self) -> Result<()> {
        let dir = repo_root().join("crds");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .filter(|p| p.file_name().is_some_and(|n| n != "kustomization.yaml"))
            .collect();
        files.sort();
        for f in &files {
            self.apply_path(f)?;
        }
        for kind in [
            "backendconfigs",
            "frontendconfigs",
            "managedcertificates",
            "tlscertificatedelegations",
        ] {
            wait_for(&format!("{kind} to be served"), DEADLINE, || {
                self.kubectl_ok(&["get", kind, "-A"]).map(Some)
            })?;
        }
        Ok(())
    }

    /// Applies the gce IngressClass and GKE's default backend from docs/examples, and waits until
    /// its Deployment is Available.
    pub fn apply_basics(&self) -> Result<()> {
        let examples = repo_root().join("docs/examples");
        self.apply_path(&examples.join("00-ingressclass.yaml"))?;
        self.apply_path(&examples.join("10-default-backend.yaml"))?;
        // Settled before a test snapshots objects: the Deployment's status stops changing.
        self.kubectl_ok(&[
            "rollout",
            "status",
            "-n",
            "kube-system",
            "deployment/l7-default-backend",
            &format!("--timeout={}s", DEADLINE.as_secs()),
        ])?;
        Ok(())
    }

    /// Polls until the Ingress has an IP in `status.loadBalancer`; returns it.
    pub fn wait_for_ingress_ip(&self, namespace: &str, name: &str) -> Result<String> {
        wait_for(
            &format!("an IP on Ingress {namespace}/{name}"),
            DEADLINE,
            || {
                let ing = self.get_json(&["ingress", "-n", namespace, name])?;
                Ok(ing["status"]["loadBalancer"]["ingress"][0]["ip"]
                    .as_str()
                    .map(str::to_string))
            },
        )
        .with_context(|| self.logs())
    }
}
