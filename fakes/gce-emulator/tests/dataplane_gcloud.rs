//! A load balancer built with the installed `gcloud` against the real emulator binary carries
//! traffic: host and path routing to two real backends, health checking, and a redirect.
//! gcloud environment per reference/gce-clients.md, section 1, with a throwaway config directory.

mod dataplane_support;

use dataplane_support::{gcloud, poll, Backend};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcloud_built_load_balancer_carries_traffic() {
    let (web, api) = (Backend::start("web").await, Backend::start("api").await);
    let stack = gcloud::start(env!("CARGO_BIN_EXE_gce-emulator"));
    let (base, g) = (stack.base.clone(), &stack.gcloud);
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
