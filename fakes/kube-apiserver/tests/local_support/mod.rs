//! Shared harness of the `local_*` tests: starts the real `fake-kube-apiserver` binary (with
//! its local controllers) on an ephemeral port and gives a kube-rs client for it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::ListParams;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, ResourceExt};

/// A running server; killed on drop.
pub struct LocalCluster {
    child: Child,
    _dir: tempfile::TempDir,
    pub url: String,
    /// The kubeconfig the server wrote (for `kubectl --kubeconfig`).
    pub kubeconfig: std::path::PathBuf,
    pub client: Client,
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl LocalCluster {
    pub async fn start() -> anyhow::Result<LocalCluster> {
        LocalCluster::start_with(&[]).await
    }

    /// Starts the server with extra command-line arguments.
    pub async fn start_with(extra: &[&str]) -> anyhow::Result<LocalCluster> {
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        let mut child = Command::new(env!("CARGO_BIN_EXE_fake-kube-apiserver"))
            .args(["--listen", "127.0.0.1:0", "--kubeconfig-out"])
            .arg(&kubeconfig)
            .args(extra)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("spawning fake-kube-apiserver")?;
        let stdout = child.stdout.take().context("stdout")?;
        let url = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            BufReader::new(stdout)
                .read_line(&mut line)
                .map(|_| line.trim().to_string())
        })
        .await??;
        anyhow::ensure!(
            url.starts_with("https://127.0.0.1:"),
            "unexpected first line {url:?}"
        );
        let yaml = std::fs::read_to_string(&kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::from_yaml(&yaml)?,
            &Default::default(),
        )
        .await?;
        // Both rustls providers are compiled into the workspace, so none is picked by default.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = Client::try_from(config)?;
        Ok(LocalCluster {
            child,
            _dir: dir,
            url,
            kubeconfig,
            client,
        })
    }

    pub fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }

    pub async fn slices_of(
        &self,
        namespace: &str,
        service: &str,
    ) -> anyhow::Result<Vec<EndpointSlice>> {
        let api: Api<EndpointSlice> = Api::namespaced(self.client.clone(), namespace);
        let lp = ListParams::default().labels(&format!("kubernetes.io/service-name={service}"));
        Ok(api.list(&lp).await?.items)
    }
}

/// Polls `check` until it returns `Some`, failing after 60 s with `what` and the last value seen.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let last = match check().await {
            Ok(Some(value)) => return value,
            Ok(None) => "condition not met".to_string(),
            Err(error) => format!("{error:#}"),
        };
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}: {last}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `(ready, serving, terminating)` of the endpoint for `pod`, if any slice lists it.
pub fn endpoint_conditions(slices: &[EndpointSlice], pod: &str) -> Option<(bool, bool, bool)> {
    slices
        .iter()
        .flat_map(|s| s.endpoints.iter())
        .find_map(|e| {
            let target = e.target_ref.as_ref()?;
            if target.name.as_deref() != Some(pod) {
                return None;
            }
            let c = e.conditions.clone().unwrap_or_default();
            Some((
                c.ready.unwrap_or(false),
                c.serving.unwrap_or(false),
                c.terminating.unwrap_or(false),
            ))
        })
}

/// The status of a Pod condition, if present.
pub fn condition(pod: &Pod, type_: &str) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

/// The Pod IP, once assigned.
pub fn pod_ip(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .pod_ip
        .clone()
        .filter(|ip| !ip.is_empty())
}

/// A plain HTTP client (no proxy: Pod IPs are loopback addresses).
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("http client")
}

/// Runs kubectl against the cluster with `stdin`: (succeeded, stdout, stderr).
pub fn kubectl(
    cluster: &LocalCluster,
    args: &[&str],
    stdin: Option<&str>,
) -> (bool, String, String) {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().expect("kubectl output");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs kubectl and fails the test when it fails; its stdout.
pub fn kubectl_ok(cluster: &LocalCluster, args: &[&str], stdin: Option<&str>) -> String {
    let (ok, out, err) = kubectl(cluster, args, stdin);
    assert!(ok, "kubectl {args:?} failed: {err}\n{out}");
    out
}

/// `kubectl rollout status WHAT --timeout=90s`, which must succeed; its stdout.
pub fn rollout_status(cluster: &LocalCluster, what: &str) -> String {
    kubectl_ok(cluster, &["rollout", "status", what, "--timeout=90s"], None)
}

/// One observed Pod change: name, Running and Ready, terminating, deleted.
#[derive(Clone, Debug, PartialEq)]
pub struct Seen {
    pub name: String,
    pub ready: bool,
    pub terminating: bool,
    pub deleted: bool,
}

/// Records every change of the Pods labelled `selector`, in the order the watch delivers them,
/// once the watch has listed them (so nothing after the call is missed).
pub async fn record_pods(cluster: &LocalCluster, selector: &str) -> Arc<Mutex<Vec<Seen>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let api: Api<Pod> = cluster.pods("default");
    let config = watcher::Config::default().labels(selector);
    let (listed, started) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let mut listed = Some(listed);
        // With backoff, a watch whose server is gone (the test ended) sleeps between retries
        // instead of spinning, so the runtime can shut down.
        let mut events = watcher(api, config).default_backoff().boxed();
        while let Some(event) = events.next().await {
            let (pod, deleted) = match event {
                Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => (p, false),
                Ok(watcher::Event::Delete(p)) => (p, true),
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = listed.take() {
                        let _ = tx.send(());
                    }
                    continue;
                }
                _ => continue,
            };
            let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
            let Ok(mut log) = log.lock() else { return };
            log.push(Seen {
                name: pod.name_any(),
                ready: running && condition(&pod, "Ready").as_deref() == Some("True"),
                terminating: pod.metadata.deletion_timestamp.is_some(),
                deleted,
            });
        }
    });
    let _ = started.await;
    seen
}
