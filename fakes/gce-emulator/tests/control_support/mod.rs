//! Shared helpers for the emulator's control-plane tests: start the real binary on an ephemeral
//! port, talk to it over HTTP, poll with deadlines.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A running `gce-emulator` process; killed on drop.
pub struct Emulator {
    child: Child,
    /// `http://127.0.0.1:PORT/`.
    pub root: String,
    /// `http://127.0.0.1:PORT/compute/v1/`.
    pub base: String,
    pub http: reqwest::Client,
}

impl Emulator {
    /// Starts the binary with extra `args` and waits (up to 60 s) for its first stdout line.
    pub fn start(args: &[&str]) -> Emulator {
        let mut child = Command::new(env!("CARGO_BIN_EXE_gce-emulator"))
            .args([
                "--listen",
                "127.0.0.1:0",
                "--port-map",
                "80=0,443=0,8080=0",
                "--dataplane-threads",
                "1",
            ])
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start gce-emulator");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let root = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("gce-emulator printed its URL")
            .trim()
            .to_string();
        assert!(
            root.starts_with("http://127.0.0.1:") && root.ends_with('/'),
            "first line: {root:?}"
        );
        let base = format!("{root}compute/v1/");
        Emulator {
            child,
            root,
            base,
            http: reqwest::Client::new(),
        }
    }

    /// `GET base+path` -> (status, JSON).
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("GET");
        let s = r.status().as_u16();
        (s, r.json().await.unwrap_or(Value::Null))
    }

    /// `method base+path` with a raw body -> (status, JSON).
    pub async fn send(&self, method: reqwest::Method, path: &str, body: &str) -> (u16, Value) {
        let r = self
            .http
            .request(method, format!("{}{path}", self.base))
            .body(body.to_string())
            .header("content-type", "application/json")
            .send()
            .await
            .expect("request");
        let s = r.status().as_u16();
        (s, r.json().await.unwrap_or(Value::Null))
    }

    /// `POST base+path` with JSON.
    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, &body.to_string())
            .await
    }

    /// Inserts the VM instance `name` with primary address `ip` on the `default` network of
    /// `project` in `zone` (NEG endpoints must name an instance holding their address).
    pub async fn instance(&self, project: &str, zone: &str, name: &str, ip: &str) {
        let vm = serde_json::json!({"name": name, "machineType": format!("zones/{zone}/machineTypes/e2-small"),
            "disks": [{"boot": true, "initializeParams": {}}], "networkInterfaces": [{"networkIP": ip}]});
        let (code, body) = self
            .post(&format!("projects/{project}/zones/{zone}/instances"), &vm)
            .await;
        assert_eq!(code, 200, "instance {name}: {body}");
    }

    /// `GET /_emulator/{path}` as JSON.
    pub async fn admin_get(&self, path: &str) -> Value {
        self.http
            .get(format!("{}_emulator/{path}", self.root))
            .send()
            .await
            .expect("admin GET")
            .json()
            .await
            .expect("admin JSON")
    }

    /// `method /_emulator/{path}` with JSON.
    pub async fn admin(&self, method: reqwest::Method, path: &str, body: &Value) -> (u16, Value) {
        let r = self
            .http
            .request(method, format!("{}_emulator/{path}", self.root))
            .json(body)
            .send()
            .await
            .expect("admin");
        let s = r.status().as_u16();
        (s, r.json().await.unwrap_or(Value::Null))
    }

    /// Keys of every stored resource in `project` (from the admin state dump).
    pub async fn keys(&self, project: &str) -> Vec<String> {
        let state = self.admin_get("state").await;
        state["resources"]
            .as_object()
            .map(|m| {
                m.keys()
                    .filter(|k| k.starts_with(&format!("projects/{project}/")))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The keys a project starts with ([`Emulator::keys`] after first use, nothing created):
    /// its auto-mode `default` network and that network's four default firewall rules.
    pub fn initial_keys(project: &str) -> Vec<String> {
        let mut keys: Vec<String> = [
            "firewalls/default-allow-icmp",
            "firewalls/default-allow-internal",
            "firewalls/default-allow-rdp",
            "firewalls/default-allow-ssh",
            "networks/default",
        ]
        .iter()
        .map(|k| format!("projects/{project}/global/{k}"))
        .collect();
        keys.sort();
        keys
    }

    /// Kills the process (tests that restart it).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Polls `f` until it returns `Some`, for at most `secs` seconds.
pub async fn poll<T, F, Fut>(secs: u64, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
