//! A real kube-apiserver and etcd for tests, found the envtest way (issue 30).
//!
//! `KUBEBUILDER_ASSETS` names a folder holding `kube-apiserver` and `etcd` (controller-runtime's
//! convention; `setup-envtest use -p path <version>` prints one). [`assets`] returns `None`
//! without it, and the tests print why they skipped. [`RealApi::start`] generates a CA and a
//! serving certificate (rcgen), a ServiceAccount signing key and a static token file whose
//! `admin` user is in `system:masters`; starts etcd and then kube-apiserver on free loopback
//! ports with `--authorization-mode=RBAC`, the default admission plugins and no endpoint
//! reconciler (there is no kubelet, scheduler or controller-manager); waits for `/readyz`; and
//! writes an admin kubeconfig. Both processes are killed on drop and their data directory
//! removed. [`RealApi::service_account_kubeconfig`] makes a ServiceAccount and a kubeconfig
//! holding a TokenRequest token for it.
//!
//! [`in_private_netns`]: when the tests run as root, the tier re-runs itself inside a network
//! namespace it creates (`ip netns add`), whose `lo` also holds 10.244.0.1/24: a Pod range that
//! is local to the test and reaches nothing else, so EndpointSlices and Pod IPs the real server
//! accepts (it refuses loopback ones) still carry traffic. Without root: control-plane only.
#![allow(dead_code)]

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// How long etcd and the API server may take to become ready on a loaded 2-core machine.
pub const READY_DEADLINE: Duration = Duration::from_secs(120);

/// The Pod range of the private network namespace (its `lo` holds the first address).
pub const POD_RANGE_GATEWAY: &str = "10.244.0.1";

/// The environment variable set inside the private network namespace (its name).
pub const NETNS_ENV: &str = "GCLB_REAL_API_NETNS";

/// The folder of `kube-apiserver` and `etcd`, from `KUBEBUILDER_ASSETS`; `None` (with the
/// reason on stderr) when unset or incomplete.
pub fn assets() -> Option<PathBuf> {
    let Some(dir) = std::env::var_os("KUBEBUILDER_ASSETS").map(PathBuf::from) else {
        eprintln!(
            "SKIPPED: KUBEBUILDER_ASSETS is not set; the real-API tier needs a folder holding \
             kube-apiserver and etcd (see docs/testing.md, `make test-real-api`)"
        );
        return None;
    };
    for bin in ["kube-apiserver", "etcd"] {
        if !dir.join(bin).is_file() {
            eprintln!("SKIPPED: KUBEBUILDER_ASSETS={} has no {bin}", dir.display());
            return None;
        }
    }
    Some(dir)
}

/// A free loopback port (bound then released; the server binds it right after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running kube-apiserver with its etcd.
pub struct RealApi {
    apiserver: Killed,
    etcd: Killed,
    /// Data directory (certificates, etcd data, kubeconfigs, logs).
    pub dir: tempfile::TempDir,
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// The `admin` user's bearer token (`system:masters`).
    pub admin_token: String,
    /// The admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// The CA of the serving certificate, PEM.
    pub ca_pem: String,
    /// `kube-apiserver --version`, e.g. `Kubernetes v1.28.7`.
    pub version: String,
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn certificates(dir: &Path) -> Result<String> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "real-api-test CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(vec![
        "127.0.0.1".to_string(),
        "localhost".to_string(),
        "10.96.0.1".to_string(),
        "kubernetes.default.svc".to_string(),
    ])?;
    leaf.distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let cert = leaf.signed_by(&key, &issuer)?;
    write(&dir.join("ca.crt"), &ca_cert.pem())?;
    write(&dir.join("apiserver.crt"), &cert.pem())?;
    write(&dir.join("apiserver.key"), &key.serialize_pem())?;
    let sa = KeyPair::generate()?;
    write(&dir.join("sa.key"), &sa.serialize_pem())?;
    write(&dir.join("sa.pub"), &sa.public_key_pem())?;
    Ok(ca_cert.pem())
}

/// A kubeconfig for `url` with the CA and a bearer token.
pub fn kubeconfig(url: &str, ca_pem: &str, token: &str) -> String {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: real\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: user\n  user:\n    token: {token}\ncontexts:\n- name: real\n  context:\n    cluster: real\n    user: user\n    namespace: default\ncurrent-context: real\n"
    )
}

fn wait_ready(
    what: &str,
    child: &mut Child,
    log: &Path,
    mut ready: impl FnMut() -> bool,
) -> Result<()> {
    let start = Instant::now();
    loop {
        if ready() {
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            bail!(
                "{what} exited ({status}) before it was ready; its log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        if start.elapsed() > READY_DEADLINE {
            bail!(
                "{what} not ready after {READY_DEADLINE:?}; its log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The `--feature-gates` a current cluster runs with that this server has off by default:
/// CEL validation of CRDs (`x-kubernetes-validations`, `CustomResourceValidationExpressions`:
/// alpha and off in v1.23-v1.24, beta and on from v1.25, GA in v1.29, then removed). Off, the
/// server drops the rules from the CRDs it stores, so an unchanged re-apply of `crds/` reports
/// `configured` and the rules never run; the gate is passed only when this binary's `--help`
/// lists it with `default=false` (a server without the gate refuses the flag).
fn modern_feature_gates(apiserver: &Path) -> Result<Option<String>> {
    let help = Command::new(apiserver)
        .arg("--help")
        .output()
        .context("kube-apiserver --help")?;
    let text = String::from_utf8_lossy(&help.stdout);
    let off = text.lines().any(|l| {
        l.contains("CustomResourceValidationExpressions=true|false") && l.contains("default=false")
    });
    Ok(off.then(|| "--feature-gates=CustomResourceValidationExpressions=true".to_string()))
}

fn http_client(ca_pem: &str) -> Result<reqwest::blocking::Client> {
    Ok(reqwest::blocking::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes())?)
        .timeout(Duration::from_secs(30))
        .build()?)
}

impl RealApi {
    /// Starts etcd and kube-apiserver from `assets` and waits for `/readyz`.
    ///
    /// Errors: a process that exits or is not ready within [`READY_DEADLINE`] (with its log).
    pub fn start(assets: &Path) -> Result<RealApi> {
        let dir = tempfile::tempdir()?;
        let d = dir.path();
        let ca_pem = certificates(d)?;
        let admin_token: String = {
            let bytes: [u8; 16] = rand::random();
            bytes.iter().map(|b| format!("{b:02x}")).collect()
        };
        write(
            &d.join("tokens.csv"),
            &format!("{admin_token},admin,admin-uid,\"system:masters\"\n"),
        )?;

        let (client_port, peer_port) = (free_port(), free_port());
        let etcd_log = d.join("etcd.log");
        let mut etcd = Command::new(assets.join("etcd"))
            .arg(format!("--data-dir={}", d.join("etcd").display()))
            .arg(format!(
                "--listen-client-urls=http://127.0.0.1:{client_port}"
            ))
            .arg(format!(
                "--advertise-client-urls=http://127.0.0.1:{client_port}"
            ))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"
            ))
            .arg(format!(
                "--initial-cluster=default=http://127.0.0.1:{peer_port}"
            ))
            .arg("--unsafe-no-fsync")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&etcd_log)?)
            .spawn()
            .context("starting etcd")?;
        let plain = reqwest::blocking::Client::new();
        let health = format!("http://127.0.0.1:{client_port}/health");
        wait_ready("etcd", &mut etcd, &etcd_log, || {
            plain
                .get(&health)
                .send()
                .is_ok_and(|r| r.status().is_success())
        })?;
        let etcd = Killed(etcd);

        let port = free_port();
        let url = format!("https://127.0.0.1:{port}");
        let sa_key = d.join("sa.key");
        let log = d.join("kube-apiserver.log");
        let gates = modern_feature_gates(&assets.join("kube-apiserver"))?;
        let mut apiserver = Command::new(assets.join("kube-apiserver"))
            .args(gates)
            .arg(format!("--etcd-servers=http://127.0.0.1:{client_port}"))
            .arg("--bind-address=127.0.0.1")
            .arg("--advertise-address=127.0.0.1")
            .arg(format!("--secure-port={port}"))
            .arg(format!(
                "--tls-cert-file={}",
                d.join("apiserver.crt").display()
            ))
            .arg(format!(
                "--tls-private-key-file={}",
                d.join("apiserver.key").display()
            ))
            .arg(format!(
                "--token-auth-file={}",
                d.join("tokens.csv").display()
            ))
            .arg("--authorization-mode=RBAC")
            .arg("--service-cluster-ip-range=10.96.0.0/16")
            .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
            .arg(format!(
                "--service-account-key-file={}",
                d.join("sa.pub").display()
            ))
            .arg(format!(
                "--service-account-signing-key-file={}",
                sa_key.display()
            ))
            .arg("--endpoint-reconciler-type=none")
            .arg("--allow-privileged=true")
            .arg("--profiling=false")
            .arg(format!("--cert-dir={}", d.join("certs").display()))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("starting kube-apiserver")?;
        let client = http_client(&ca_pem)?;
        let readyz = format!("{url}/readyz");
        wait_ready("kube-apiserver", &mut apiserver, &log, || {
            client
                .get(&readyz)
                .bearer_auth(&admin_token)
                .send()
                .is_ok_and(|r| r.status().is_success())
        })?;
        let apiserver = Killed(apiserver);
        let version = Command::new(assets.join("kube-apiserver"))
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let kubeconfig = d.join("admin.kubeconfig");
        write(&kubeconfig, &kubeconfig_text(&url, &ca_pem, &admin_token))?;
        Ok(RealApi {
            apiserver,
            etcd,
            dir,
            url,
            admin_token,
            kubeconfig,
            ca_pem,
            version,
        })
    }

    /// A blocking HTTPS client that trusts the server's CA.
    pub fn http(&self) -> reqwest::blocking::Client {
        http_client(&self.ca_pem).expect("client")
    }

    /// Runs kubectl with the admin kubeconfig; `(success, stdout, stderr)`.
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        kubectl(&self.kubeconfig, args, stdin)
    }

    /// Creates ServiceAccount `ns/name` (and namespace `ns` if missing) and writes a kubeconfig
    /// with a TokenRequest token for it (`kubectl create token`, 1 hour).
    pub fn service_account_kubeconfig(&self, ns: &str, name: &str) -> Result<PathBuf> {
        let _ = self.kubectl(&["create", "namespace", ns], None);
        let _ = self.kubectl(&["create", "serviceaccount", name, "-n", ns], None);
        let (ok, token, err) =
            self.kubectl(&["create", "token", name, "-n", ns, "--duration=1h"], None);
        if !ok {
            bail!("kubectl create token {ns}/{name}: {err}");
        }
        let path = self.dir.path().join(format!("{ns}-{name}.kubeconfig"));
        write(
            &path,
            &kubeconfig_text(&self.url, &self.ca_pem, token.trim()),
        )?;
        Ok(path)
    }

    /// The API server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("kube-apiserver.log")).unwrap_or_default()
    }
}

fn kubeconfig_text(url: &str, ca_pem: &str, token: &str) -> String {
    kubeconfig(url, ca_pem, token)
}

/// Runs kubectl with `kubeconfig`; `(success, stdout, stderr)`.
pub fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl is installed");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(text.as_bytes()).expect("write stdin");
    }
    let out = child.wait_with_output().expect("kubectl output");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Whether this process may create network namespaces (it runs as root).
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs the calling test inside a private network namespace: outside one (and as root) it
/// creates the namespace (`lo` up, [`POD_RANGE_GATEWAY`]/24 on it), re-runs this test binary
/// with `--exact test_name` inside it with [`NETNS_ENV`] set, deletes the namespace and returns
/// `Some(passed)`; inside (or without root) it returns `None` and the caller runs the test body.
pub fn in_private_netns(test_name: &str) -> Option<bool> {
    if std::env::var_os(NETNS_ENV).is_some() || !is_root() {
        return None;
    }
    if std::env::var_os("GCLB_REAL_API_NO_NETNS").is_some() {
        eprintln!("GCLB_REAL_API_NO_NETNS is set: no private network namespace");
        return None;
    }
    let ns = format!("gclb-real-api-{}", std::process::id());
    let ip = |args: &[&str]| {
        Command::new("ip")
            .args(args)
            .status()
            .is_ok_and(|s| s.success())
    };
    if !ip(&["netns", "add", &ns]) {
        eprintln!("could not create network namespace {ns}; running without it");
        return None;
    }
    let setup = ip(&["netns", "exec", &ns, "ip", "link", "set", "lo", "up"])
        && ip(&[
            "netns",
            "exec",
            &ns,
            "ip",
            "addr",
            "add",
            &format!("{POD_RANGE_GATEWAY}/24"),
            "dev",
            "lo",
        ]);
    let passed = setup
        && Command::new("ip")
            .args(["netns", "exec", &ns])
            .arg(std::env::current_exe().expect("test binary"))
            .args(["--exact", test_name, "--nocapture"])
            .env(NETNS_ENV, &ns)
            .status()
            .is_ok_and(|s| s.success());
    ip(&["netns", "del", &ns]);
    Some(passed)
}
