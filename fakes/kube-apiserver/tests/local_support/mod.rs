//! Shared harness of the `local_*` tests: starts the real `fake-kube-apiserver` binary (with
//! its local controllers) on an ephemeral port and gives a kube-rs client for it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::ListParams;
use kube::{Api, Client};

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
