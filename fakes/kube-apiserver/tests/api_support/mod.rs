//! Shared helpers of the API server's end-to-end tests: start the real binary on an ephemeral
//! port, build clients from the kubeconfig it writes, run the installed kubectl, poll with a
//! deadline.

#![allow(dead_code)]

pub mod http;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Generous deadline for polls on a loaded 2-core machine.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// A running `fake-kube-apiserver` process, killed on drop.
pub struct ApiServer {
    /// The process.
    pub child: Child,
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// Path of the kubeconfig it wrote.
    pub kubeconfig: PathBuf,
    /// Temporary directory holding the kubeconfig (and state files).
    pub dir: tempfile::TempDir,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the server with extra arguments (always `--no-local-controllers` unless `local`).
pub fn start(extra: &[&str]) -> ApiServer {
    let dir = tempfile::tempdir().expect("tempdir");
    start_in(dir, extra)
}

/// Starts the server with its kubeconfig in `dir`.
pub fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> ApiServer {
    let kubeconfig = dir.path().join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fake-kube-apiserver"))
        .args(["--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(&kubeconfig)
        .args(extra)
        .stdout(Stdio::piped())
        // FAKE_KUBE_TEST_LOG=debug shows the server's log (RUST_LOG syntax).
        .env(
            "RUST_LOG",
            std::env::var("FAKE_KUBE_TEST_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stderr(if std::env::var_os("FAKE_KUBE_TEST_LOG").is_some() {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .spawn()
        .expect("spawn fake-kube-apiserver");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the URL line");
    let url = line.trim().to_string();
    assert!(
        url.starts_with("https://127.0.0.1:"),
        "first stdout line is the URL, got {url:?}"
    );
    assert!(
        kubeconfig.exists(),
        "kubeconfig written before the URL is printed"
    );
    ApiServer {
        child,
        url,
        kubeconfig,
        dir,
    }
}

impl ApiServer {
    /// A kube client from the written kubeconfig.
    pub async fn client(&self) -> kube::Client {
        // Both rustls providers are compiled into the workspace, so none is picked by default.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let text = std::fs::read_to_string(&self.kubeconfig).expect("kubeconfig");
        let kc = kube::config::Kubeconfig::from_yaml(&text).expect("parse kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .expect("config");
        kube::Client::try_from(config).expect("client")
    }

    /// The bearer token from the kubeconfig.
    pub fn token(&self) -> String {
        let text = std::fs::read_to_string(&self.kubeconfig).expect("kubeconfig");
        text.lines()
            .find_map(|l| l.trim().strip_prefix("token: "))
            .expect("token line")
            .to_string()
    }

    /// A reqwest client trusting nothing but this server (certificate check disabled: the test
    /// talks to its own child process over loopback).
    pub fn http(&self) -> reqwest::Client {
        reqwest::Client::builder()
            .danger_accept_invalid_certs(true)
            .build()
            .expect("reqwest client")
    }

    /// Runs kubectl with this kubeconfig; returns (success, stdout, stderr).
    pub fn kubectl(&self, args: &[&str]) -> (bool, String, String) {
        self.kubectl_stdin(args, None)
    }

    /// Runs kubectl with `stdin` piped in.
    pub fn kubectl_stdin(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        use std::io::Write;
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn kubectl");
        if let Some(input) = stdin {
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input.as_bytes())
                .expect("write stdin");
        } else {
            drop(child.stdin.take());
        }
        let out = child.wait_with_output().expect("kubectl output");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Runs kubectl and panics with its output when it fails.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.kubectl(args);
        assert!(ok, "kubectl {args:?} failed:\n{out}\n{err}");
        out
    }
}

/// Path of a fixture file.
pub fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Polls `f` until it returns `Some` or the deadline passes.
pub fn poll<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Async version of [`poll`].
pub async fn poll_async<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
