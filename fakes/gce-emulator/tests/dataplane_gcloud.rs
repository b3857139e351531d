//! A load balancer built with the installed `gcloud` against the real emulator binary carries
//! traffic: host and path routing to two real backends, health checking, and a redirect.
//! gcloud environment per reference/gce-clients.md, section 1, with a throwaway config directory.

mod dataplane_support;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use dataplane_support::{poll, Backend};
use serde_json::Value;

struct Emulator(Child);

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Gcloud {
    cfg: PathBuf,
    token: PathBuf,
    endpoint: String,
}

impl Gcloud {
    fn ok(&self, args: &[&str]) -> String {
        let out = Command::new("gcloud")
            .arg("compute")
            .args(args)
            .env("CLOUDSDK_CONFIG", &self.cfg)
            .env("CLOUDSDK_CORE_PROJECT", "gp")
            .env("CLOUDSDK_CORE_DISABLE_PROMPTS", "1")
            .env("CLOUDSDK_CORE_DISABLE_USAGE_REPORTING", "true")
            .env("CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK", "true")
            .env("CLOUDSDK_AUTH_ACCESS_TOKEN_FILE", &self.token)
            .env("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE", &self.endpoint)
            .output()
            .expect("run gcloud");
        assert!(
            out.status.success(),
            "gcloud compute {} failed:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcloud_built_load_balancer_carries_traffic() {
    assert!(
        Command::new("gcloud").arg("--version").output().is_ok(),
        "gcloud is required for this test (see make deps)"
    );
    let (web, api) = (Backend::start("web").await, Backend::start("api").await);
    let mut child = Command::new(env!("CARGO_BIN_EXE_gce-emulator"))
        .args(["--listen", "127.0.0.1:0", "--port-map", "80=0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start gce-emulator");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _emu = Emulator(child);
    let base = line.trim().trim_end_matches('/').to_string();
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "fake-token").unwrap();
    let cfg = dir.path().join("cfg");
    std::fs::create_dir(&cfg).unwrap();
    let g = Gcloud {
        cfg,
        token,
        endpoint: format!("{base}/compute/v1/"),
    };
    let z = "--zone=us-central1-a";

    // The VM behind both NEGs, and the firewall rule that lets Google's health checkers and
    // proxies reach the two ports (the emulator enforces it by default).
    g.ok(&[
        "instances",
        "create",
        "vm",
        z,
        "--tags=web",
        "--network-interface=network=default,private-network-ip=127.0.0.1",
    ]);
    g.ok(&[
        "firewall-rules",
        "create",
        "allow-lb",
        "--network=default",
        &format!("--allow=tcp:{},tcp:{}", web.addr.port(), api.addr.port()),
        "--source-ranges=130.211.0.0/22,35.191.0.0/16",
        "--target-tags=web",
    ]);
    g.ok(&[
        "health-checks",
        "create",
        "http",
        "hc",
        "--use-serving-port",
        "--request-path=/healthz",
        "--check-interval=1s",
        "--timeout=1s",
        "--healthy-threshold=1",
    ]);
    for (name, b) in [("web", &web), ("api", &api)] {
        let port = b.addr.port().to_string();
        g.ok(&[
            "network-endpoint-groups",
            "create",
            &format!("neg-{name}"),
            z,
            "--network-endpoint-type=gce-vm-ip-port",
            &format!("--default-port={port}"),
        ]);
        g.ok(&[
            "network-endpoint-groups",
            "update",
            &format!("neg-{name}"),
            z,
            &format!("--add-endpoint=ip=127.0.0.1,port={port}"),
        ]);
        g.ok(&[
            "backend-services",
            "create",
            &format!("bs-{name}"),
            "--global",
            "--protocol=HTTP",
            "--health-checks=hc",
            "--load-balancing-scheme=EXTERNAL",
        ]);
        g.ok(&[
            "backend-services",
            "add-backend",
            &format!("bs-{name}"),
            "--global",
            &format!("--network-endpoint-group=neg-{name}"),
            "--network-endpoint-group-zone=us-central1-a",
            "--balancing-mode=RATE",
            "--max-rate-per-endpoint=100",
        ]);
    }
    g.ok(&["url-maps", "create", "um", "--default-service=bs-web"]);
    g.ok(&[
        "url-maps",
        "add-path-matcher",
        "um",
        "--path-matcher-name=pm",
        "--default-service=bs-web",
        "--new-hosts=shop.example",
        "--path-rules=/api/*=bs-api",
    ]);
    g.ok(&["target-http-proxies", "create", "tp", "--url-map=um"]);
    g.ok(&[
        "forwarding-rules",
        "create",
        "fr",
        "--global",
        "--target-http-proxy=tp",
        "--ports=80",
    ]);

    let http = reqwest::Client::new();
    let local = poll("listener of fr", 30, async || {
        let v: Value = http
            .get(format!("{base}/_emulator/listeners"))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        v["listeners"].as_array()?.iter().find(|l| {
            l["forwardingRule"]
                .as_str()
                .is_some_and(|r| r.ends_with("/fr"))
        })?["localAddr"]
            .as_str()?
            .parse::<std::net::SocketAddr>()
            .ok()
    })
    .await;
    let lb = reqwest::Client::builder()
        .resolve("shop.example", local)
        .build()
        .unwrap();
    let fetch = async |path: &str| -> Option<String> {
        let r = lb
            .get(format!("http://shop.example:{}{path}", local.port()))
            .send()
            .await
            .ok()?;
        if r.status() != 200 {
            return None;
        }
        let v: Value = r.json().await.ok()?;
        v["backend"].as_str().map(str::to_string)
    };
    // Endpoints start UNHEALTHY: poll until the first probe passed.
    assert_eq!(
        poll("web healthy", 60, async || fetch("/").await).await,
        "web"
    );
    assert_eq!(
        poll("api healthy", 60, async || fetch("/api/items").await).await,
        "api"
    );
    assert_eq!(fetch("/other").await.as_deref(), Some("web"));

    let health = g.ok(&[
        "backend-services",
        "get-health",
        "bs-api",
        "--global",
        "--format=json",
    ]);
    // The one endpoint of bs-api answered through the load balancer, so it is HEALTHY (the
    // exact state: a substring test would also accept UNHEALTHY).
    let health: Value = serde_json::from_str(&health).unwrap();
    let states: Vec<(String, String)> = health
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|group| group["status"]["healthStatus"].as_array().cloned())
        .flatten()
        .map(|h| {
            let ep = format!("{}:{}", h["ipAddress"].as_str().unwrap_or("?"), h["port"]);
            (ep, h["healthState"].as_str().unwrap_or("").to_string())
        })
        .collect();
    assert_eq!(
        states,
        [(api.addr.to_string(), "HEALTHY".to_string())],
        "{health}"
    );
}
