//! The local system a test runs against: the Compute emulator, then the local Kubernetes API
//! (whose kubelet registers the Nodes' instances in the emulator), then the operator, each a
//! [`Proc`] on an ephemeral loopback port, run as deploy/'s ServiceAccount; their logs for
//! failure messages.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::Value;

use super::{
    bin, iam, metadata_adc, repo_root, Options, Proc, CLUSTER, NODE_TAG, OPERATOR_NAMESPACE,
    OPERATOR_SERVICE_ACCOUNT, PROJECT,
};

/// The local system: Kubernetes API, Compute emulator and (optionally) the operator.
pub struct System {
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    pub kube_url: String,
    /// Emulator base URL, e.g. `http://127.0.0.1:41234/`.
    pub compute_url: String,
    pub operator: Option<Proc>,
    /// The operator's kubeconfig (its ServiceAccount's token), made by the first operator start.
    pub(super) operator_kubeconfig: std::sync::OnceLock<PathBuf>,
    /// With [`Options::iam`]: [`LOCAL_ADMIN`]'s access token, sent by the `compute_*` helpers.
    pub admin_token: Option<String>,
    pub(super) emulator: Proc,
    pub(super) apiserver: Proc,
    pub(super) http: reqwest::blocking::Client,
}

impl System {
    /// Starts the local Kubernetes API and the emulator (not yet the operator).
    /// `emulator_args` are extra flags for gce-emulator.
    pub fn start(emulator_args: &[&str]) -> Result<System> {
        Self::start_with(Options {
            emulator_args,
            ..Options::default()
        })
    }

    /// Starts the emulator, then the local Kubernetes API, whose kubelet registers each Node
    /// as an instance in the emulator (zone, InternalIP, Pod CIDR as alias range, [`NODE_TAG`])
    /// as a GKE node pool does; not yet the operator.
    pub fn start_with(options: Options<'_>) -> Result<System> {
        let dir = tempfile::tempdir()?;
        let mut cmd = Command::new(bin("gce-emulator"));
        cmd.args(["--listen", "127.0.0.1:0"])
            .args(options.emulator_args);
        if options.iam {
            cmd.arg("--iam");
        }
        let (emulator, compute_url) =
            Proc::start("gce-emulator", cmd, dir.path().join("emulator.log"))?;
        let http = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(30))
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        if let Some((host, admin)) = options.shared_vpc {
            for (path, body) in [
                (
                    format!("compute/v1/projects/{host}/enableXpnHost"),
                    Value::Null,
                ),
                (
                    format!("compute/v1/projects/{host}/enableXpnResource"),
                    serde_json::json!({"xpnResource": {"id": PROJECT, "type": "PROJECT"}}),
                ),
            ] {
                let resp = http
                    .post(format!("{compute_url}{path}"))
                    .bearer_auth(admin)
                    .json(&body)
                    .send()?;
                if !resp.status().is_success() {
                    bail!("POST {path}: {} {}", resp.status(), resp.text()?);
                }
            }
        }

        let admin_token = match options.iam {
            true => Some(iam::local_admin(&http, &compute_url, options.shared_vpc)?),
            false => None,
        };
        let kubeconfig = dir.path().join("kubeconfig");
        let mut cmd = Command::new(bin("fake-kube-apiserver"));
        if let Some(t) = &admin_token {
            cmd.env("COMPUTE_TOKEN", t);
        }
        cmd.args(["--listen", "127.0.0.1:0", "--kubeconfig-out"])
            .arg(&kubeconfig)
            .args(["--project", PROJECT, "--node-tags", NODE_TAG])
            .args(["--compute-endpoint", compute_url.trim_end_matches('/')]);
        cmd.args(options.apiserver_args);
        if !options.nodes.is_empty() {
            cmd.args(["--nodes", &options.nodes.join(",")]);
        }
        if let Some((host, _)) = options.shared_vpc {
            cmd.args(["--network-project", host]);
        }
        // E2E_AUDIT_LOG=PATH: every request of every test appended there (audit.k8s.io/v1
        // Event lines; docs/kube-apiserver.md), e.g. to derive the operator's RBAC.
        if let Some(path) = std::env::var_os("E2E_AUDIT_LOG") {
            cmd.arg("--audit-log").arg(path);
        }
        let (apiserver, kube_url) =
            Proc::start("fake-kube-apiserver", cmd, dir.path().join("apiserver.log"))?;
        Ok(System {
            dir,
            kubeconfig,
            kube_url,
            compute_url,
            operator: None,
            operator_kubeconfig: std::sync::OnceLock::new(),
            admin_token,
            emulator,
            apiserver,
            http,
        })
    }

    /// Starts the operator against this system with `extra` flags.
    pub fn start_operator(&mut self, extra: &[&str]) -> Result<()> {
        self.operator = Some(self.spawn_operator(extra, "operator")?);
        Ok(())
    }

    /// The kubeconfig the operator runs with: deploy/'s Namespace, ServiceAccount and RBAC are
    /// applied (as `kubectl apply -k deploy/` would), a token of the ServiceAccount is minted
    /// with TokenRequest (`kubectl create token`) and written to a file that the kubeconfig
    /// names with `tokenFile:`, the way a Pod reads its projected token. So every e2e test runs
    /// the operator with exactly deploy/'s permissions, not as admin. Made once per System.
    pub fn operator_kubeconfig(&self) -> Result<PathBuf> {
        if let Some(p) = self.operator_kubeconfig.get() {
            return Ok(p.clone());
        }
        let deploy = repo_root().join("deploy");
        self.apply_path(&deploy.join("namespace.yaml"))?;
        self.apply_path(&deploy.join("rbac.yaml"))?;
        let token = self.kubectl_ok(&[
            "create",
            "token",
            OPERATOR_SERVICE_ACCOUNT,
            "-n",
            OPERATOR_NAMESPACE,
            "--duration",
            "24h",
        ])?;
        let token_file = self.dir.path().join("operator-token");
        std::fs::write(&token_file, token.trim())?;
        let mut config: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(&self.kubeconfig)?)?;
        let user = config["users"][0]["user"]
            .as_mapping_mut()
            .context("the kubeconfig has a user")?;
        user.clear();
        user.insert(
            "tokenFile".into(),
            token_file.to_string_lossy().into_owned().into(),
        );
        let path = self.dir.path().join("operator-kubeconfig");
        std::fs::write(&path, serde_yaml::to_string(&config)?)?;
        Ok(self.operator_kubeconfig.get_or_init(|| path).clone())
    }

    /// Starts one more operator process against this system (for tests that run several
    /// replicas); its stdout and stderr go to `<log_name>.log` in the test directory. It runs
    /// as deploy/'s ServiceAccount ([`System::operator_kubeconfig`]) in its namespace
    /// (`POD_NAMESPACE`, as deploy/deployment.yaml sets it: the leader Lease lives there).
    pub fn spawn_operator(&self, extra: &[&str], log_name: &str) -> Result<Proc> {
        self.spawn_operator_from(&bin("gclb-operator"), extra, log_name, &[])
    }

    /// [`System::spawn_operator`] of another build of the operator (`binary`, e.g. one built
    /// from main, for a before/after benchmark) with extra environment variables `env`.
    pub fn spawn_operator_from(
        &self,
        binary: &Path,
        extra: &[&str],
        log_name: &str,
        env: &[(&str, &str)],
    ) -> Result<Proc> {
        let kubeconfig = self.operator_kubeconfig()?;
        let mut cmd = Command::new(binary);
        metadata_adc(&mut cmd, &self.compute_url, self.dir.path());
        cmd.envs(env.iter().copied());
        cmd.arg("run")
            .args([
                "--project",
                PROJECT,
                "--network",
                "default",
                "--cluster-name",
                CLUSTER,
            ])
            .args(["--compute-endpoint", self.compute_url.trim_end_matches('/')])
            .args(["--firewall-target-tags", NODE_TAG])
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--metrics-listen", "127.0.0.1:0"])
            .args(extra)
            .env("POD_NAMESPACE", OPERATOR_NAMESPACE)
            .env("RUST_LOG", "info,gclb_operator=debug");
        // The local cluster has no GKE Ingress controller: tests run the operator in its place
        // (class gce, GKE's names and finalizer) unless they pass `--takeover=false`.
        if !extra.iter().any(|a| a.starts_with("--takeover")) {
            cmd.arg("--takeover");
        }
        // Tests that do not ask for periodic resyncs get none, so that nothing happens
        // behind their back.
        if !extra.contains(&"--resync-period") {
            cmd.args(["--resync-period", "3600"]);
        }
        let log = self.dir.path().join(format!("{log_name}.log"));
        let stderr = std::fs::File::create(&log)?;
        let stdout = stderr.try_clone()?;
        cmd.stdin(Stdio::null()).stdout(stdout).stderr(stderr);
        let child = cmd.spawn().context("spawning gclb-operator")?;
        Ok(Proc {
            name: format!("gclb-operator ({log_name})"),
            child,
            log,
        })
    }

    /// Stops the operator (if running).
    pub fn stop_operator(&mut self) {
        self.operator = None;
    }

    /// Logs of every process, for assertion messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for p in [
            Some(&self.apiserver),
            Some(&self.emulator),
            self.operator.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            out.push_str(&format!("\n===== {} =====\n{}\n", p.name, p.log_text()));
        }
        out
    }
}
