//! End-to-end harness: starts the real binaries (fake-kube-apiserver, gce-emulator,
//! gclb-operator) on ephemeral loopback ports, drives them with the installed `kubectl` and
//! with real HTTP requests, and stops everything on drop.
//!
//! Binaries are found next to `CARGO_BIN_EXE_gclb-operator` (one target directory for the whole
//! workspace); `make test` builds them all before running tests.
#![allow(dead_code)]

pub mod fanout;
pub mod iam;
pub mod load;
pub mod regional;
pub mod rollout;
pub mod tls;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
pub use iam::metadata_adc;
use serde_json::Value;

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

/// A child process that is killed when dropped; its stderr goes to a log file.
pub struct Proc {
    pub name: String,
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    /// Starts `cmd`, waits (up to [`DEADLINE`]) for its first stdout line and returns it.
    /// The rest of stdout and all of stderr are appended to `log`.
    pub fn start(name: &str, mut cmd: Command, log: PathBuf) -> Result<(Proc, String)> {
        let stderr = std::fs::File::create(&log)?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr);
        let mut child = cmd.spawn().with_context(|| format!("spawning {name}"))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        let log_copy = log.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut first = String::new();
            let _ = reader.read_line(&mut first);
            let _ = tx.send(first.trim().to_string());
            // Keep draining stdout so the child never blocks on a full pipe.
            let mut rest = Vec::new();
            let _ = reader.read_to_end(&mut rest);
            if !rest.is_empty() {
                use std::io::Write;
                if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&log_copy) {
                    let _ = f.write_all(&rest);
                }
            }
        });
        let proc = Proc {
            name: name.to_string(),
            child,
            log,
        };
        match rx.recv_timeout(DEADLINE) {
            Ok(line) if !line.is_empty() => Ok((proc, line)),
            _ => Err(anyhow!(
                "{name} printed no first line; its log:\n{}",
                proc.log_text()
            )),
        }
    }

    /// The process's stderr log so far (for failure messages).
    pub fn log_text(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(80).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }
}

impl Proc {
    /// The operator's `/metrics` URL, from the `metrics listening on http://ADDR` line it
    /// prints once it serves (polled up to [`DEADLINE`]).
    pub fn metrics_url(&self) -> Result<String> {
        wait_for(
            &format!("{}'s metrics address", self.name),
            DEADLINE,
            || {
                // The whole log: the line comes early and log_text() keeps only the tail.
                Ok(std::fs::read_to_string(&self.log)?
                    .lines()
                    .find_map(|l| l.strip_prefix("metrics listening on "))
                    .map(|u| format!("{}/metrics", u.trim())))
            },
        )
    }

    /// `gclb_ingress_syncs_total{result="ok"}` on this operator's `/metrics`: how many
    /// reconciles it completed.
    pub fn ok_syncs(&self) -> Result<u64> {
        let body = reqwest::blocking::get(self.metrics_url()?)?.text()?;
        Ok(body
            .lines()
            .filter(|l| l.starts_with("gclb_ingress_syncs_total") && l.contains("result=\"ok\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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

/// The local system: Kubernetes API, Compute emulator and (optionally) the operator.
pub struct System {
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    pub kube_url: String,
    /// Emulator base URL, e.g. `http://127.0.0.1:41234/`.
    pub compute_url: String,
    pub operator: Option<Proc>,
    /// The operator's kubeconfig (its ServiceAccount's token), made by the first operator start.
    operator_kubeconfig: std::sync::OnceLock<PathBuf>,
    /// With [`Options::iam`]: [`LOCAL_ADMIN`]'s access token, sent by the `compute_*` helpers.
    pub admin_token: Option<String>,
    emulator: Proc,
    apiserver: Proc,
    http: reqwest::blocking::Client,
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

    /// `rb` with [`System::admin_token`] as its bearer token, if any.
    fn authed(&self, rb: reqwest::blocking::RequestBuilder) -> reqwest::blocking::RequestBuilder {
        match &self.admin_token {
            Some(t) => rb.bearer_auth(t),
            None => rb,
        }
    }

    /// GET on the emulator (path relative to its base URL) as JSON.
    pub fn compute_get(&self, path: &str) -> Result<Value> {
        let url = format!("{}{}", self.compute_url, path.trim_start_matches('/'));
        let resp = self.authed(self.http.get(&url)).send()?;
        let status = resp.status();
        let body: Value = resp.json().unwrap_or(Value::Null);
        if !status.is_success() {
            bail!("GET {url}: {status} {body}");
        }
        Ok(body)
    }

    /// POST JSON to the emulator (path relative to its base URL).
    pub fn compute_post(&self, path: &str, body: &Value) -> Result<Value> {
        let url = format!("{}{}", self.compute_url, path.trim_start_matches('/'));
        let resp = self.authed(self.http.post(&url)).json(body).send()?;
        let status = resp.status();
        let text = resp.text()?;
        if !status.is_success() {
            bail!("POST {url}: {status} {text}");
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// DELETE on the emulator (path relative to its base URL).
    pub fn compute_delete(&self, path: &str) -> Result<()> {
        let url = format!("{}{}", self.compute_url, path.trim_start_matches('/'));
        let resp = self.authed(self.http.delete(&url)).send()?;
        if !resp.status().is_success() {
            bail!("DELETE {url}: {}", resp.status());
        }
        Ok(())
    }

    /// Names of the resources in one global collection of the test project
    /// (`urlMaps`, `backendServices`, `healthChecks`, `firewalls`, ...).
    pub fn compute_names(&self, collection: &str) -> Result<Vec<String>> {
        let list = self.compute_get(&format!(
            "compute/v1/projects/{PROJECT}/global/{collection}"
        ))?;
        Ok(item_names(&list))
    }

    /// Names of the firewall rules in the test project except the four a new project's
    /// `default` network starts with (`default-allow-icmp`, `-internal`, `-rdp`, `-ssh`).
    pub fn created_firewalls(&self) -> Result<Vec<String>> {
        Ok(self
            .compute_names("firewalls")?
            .into_iter()
            .filter(|n| {
                !matches!(
                    n.as_str(),
                    "default-allow-icmp"
                        | "default-allow-internal"
                        | "default-allow-rdp"
                        | "default-allow-ssh"
                )
            })
            .collect())
    }

    /// Names of the NEGs in the test zone.
    pub fn neg_names(&self) -> Result<Vec<String>> {
        let list = self.compute_get(&format!(
            "compute/v1/projects/{PROJECT}/zones/{ZONE}/networkEndpointGroups"
        ))?;
        Ok(item_names(&list))
    }

    /// The emulator's count of mutating API calls so far (admin API `/_emulator/calls`).
    pub fn mutating_calls(&self) -> Result<u64> {
        let calls = self.compute_get("_emulator/calls")?;
        calls["mutating"]
            .as_u64()
            .ok_or_else(|| anyhow!("no `mutating` in /_emulator/calls: {calls}"))
    }

    /// The emulator's listener socket for a forwarding rule address and port
    /// (admin API `/_emulator/listeners`), as `ip:port`.
    pub fn listener_for(&self, ip: &str, port: u16) -> Result<Option<String>> {
        let listeners = self.compute_get("_emulator/listeners")?;
        let items = listeners
            .as_array()
            .cloned()
            .or_else(|| listeners["listeners"].as_array().cloned())
            .unwrap_or_default();
        Ok(items
            .iter()
            .find(|l| l["ipAddress"] == ip && l["port"].as_u64() == Some(port as u64))
            .and_then(|l| l["localAddr"].as_str().map(str::to_string)))
    }

    /// Waits until the Ingress has an IP in its status, and its HTTP listener is open.
    /// Returns the socket to send requests to.
    pub fn wait_for_ingress_socket(&self, namespace: &str, name: &str) -> Result<String> {
        let ip = wait_for(
            &format!("an IP on Ingress {namespace}/{name}"),
            DEADLINE,
            || {
                let ing = self.get_json(&["ingress", "-n", namespace, name])?;
                Ok(ing["status"]["loadBalancer"]["ingress"][0]["ip"]
                    .as_str()
                    .map(str::to_string))
            },
        )
        .with_context(|| self.logs())?;
        wait_for(&format!("a listener on {ip}:80"), DEADLINE, || {
            self.listener_for(&ip, 80)
        })
        .with_context(|| self.logs())
    }

    /// Sends `GET http://{host}{path}` to `socket` and returns (status, body).
    pub fn http_get(&self, socket: &str, host: &str, path: &str) -> Result<(u16, String)> {
        let resp = self
            .http
            .get(format!("http://{socket}{path}"))
            .header(reqwest::header::HOST, host)
            .send()?;
        Ok((resp.status().as_u16(), resp.text()?))
    }

    /// Polls until `GET host+path` through `socket` answers `status` with a body containing
    /// `needle`; returns the body.
    pub fn wait_for_response(
        &self,
        socket: &str,
        host: &str,
        path: &str,
        status: u16,
        needle: &str,
    ) -> Result<String> {
        wait_for(
            &format!("{status} with {needle:?} from http://{host}{path}"),
            DEADLINE,
            || {
                let (s, body) = self.http_get(socket, host, path)?;
                if s == status && body.contains(needle) {
                    Ok(Some(body))
                } else {
                    Err(anyhow!(
                        "got {s}: {}",
                        body.chars().take(300).collect::<String>()
                    ))
                }
            },
        )
        .with_context(|| self.logs())
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

// ----- Helpers for the GKE feature tests (issue 6): CRDs, basics, addresses, listeners. -----

impl System {
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

    /// Polls until the emulator serves `ip:port`; returns the local socket.
    pub fn wait_for_listener(&self, ip: &str, port: u16) -> Result<String> {
        wait_for(&format!("a listener on {ip}:{port}"), DEADLINE, || {
            self.listener_for(ip, port)
        })
        .with_context(|| self.logs())
    }

    /// Reserves a global address `name` in the emulator and returns its IP.
    pub fn reserve_global_address(&self, name: &str) -> Result<String> {
        self.compute_post(
            &format!("compute/v1/projects/{PROJECT}/global/addresses"),
            &serde_json::json!({ "name": name }),
        )?;
        wait_for(&format!("global address {name}"), DEADLINE, || {
            let a = self.compute_get(&format!(
                "compute/v1/projects/{PROJECT}/global/addresses/{name}"
            ))?;
            Ok(a["address"].as_str().map(str::to_string))
        })
    }

    /// The emulator's local CA (PEM) that signs MANAGED certificates.
    pub fn emulator_ca_pem(&self) -> Result<String> {
        let url = format!("{}_emulator/ca.pem", self.compute_url);
        let resp = self.http.get(&url).send()?;
        if !resp.status().is_success() {
            bail!("GET {url}: {}", resp.status());
        }
        Ok(resp.text()?)
    }
}
