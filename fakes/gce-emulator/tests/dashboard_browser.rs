//! The dashboard in a real browser: Debian's `chromium`, headless, driven over the Chrome
//! DevTools Protocol (its `--remote-debugging-port` WebSocket), against the real `gce-emulator`
//! binary serving a demo-like load balancer (one URL map, two backend services, one endpoint
//! each). Checks the topology on the page, then takes one endpoint down and waits for it to
//! turn red on the same page (no reload: a marker set in the page survives), and saves a
//! screenshot to `$CARGO_TARGET_TMPDIR/dashboard-browser/dashboard.png`.

mod dataplane_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use base64::Engine;
use dataplane_support::{compute_call, poll, start_emulator, Backend};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

/// A child process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Builds the demo-like load balancer through the REST API: `/products` -> `products`,
/// everything else -> `discounted`, health checked every second.
async fn build_lb(base: &str, products: &Backend, discounted: &Backend) {
    let api = format!("{base}/compute/v1/projects/p1");
    let http = reqwest::Client::new();
    let call = async |path: &str, body: Value| {
        compute_call(&http, &api, reqwest::Method::POST, path, body).await;
    };
    let z = "zones/us-central1-a";
    call(
        "global/healthChecks",
        json!({"name": "hc", "type": "HTTP", "checkIntervalSec": 1, "timeoutSec": 1,
        "healthyThreshold": 1, "unhealthyThreshold": 1,
        "httpHealthCheck": {"portSpecification": "USE_SERVING_PORT", "requestPath": "/healthz"}}),
    )
    .await;
    call(&format!("{z}/instances"), json!({"name": "vm", "machineType": format!("{z}/machineTypes/e2-small"),
        "disks": [{"boot": true, "initializeParams": {}}], "networkInterfaces": [{"networkIP": "127.0.0.1"}]})).await;
    let ports: Vec<String> = [products, discounted]
        .iter()
        .map(|b| b.addr.port().to_string())
        .collect();
    call(
        "global/firewalls",
        json!({"name": "allow-lb", "sourceRanges": ["130.211.0.0/22", "35.191.0.0/16"],
        "allowed": [{"IPProtocol": "tcp", "ports": ports}]}),
    )
    .await;
    for b in [products, discounted] {
        let n = &b.name;
        call(&format!("{z}/networkEndpointGroups"), json!({"name": format!("neg-{n}"),
            "networkEndpointType": "GCE_VM_IP_PORT", "defaultPort": b.addr.port(), "network": "global/networks/default"})).await;
        call(
            &format!("{z}/networkEndpointGroups/neg-{n}/attachNetworkEndpoints"),
            json!({"networkEndpoints": [{"ipAddress": "127.0.0.1", "port": b.addr.port()}]}),
        )
        .await;
        call("global/backendServices", json!({"name": format!("bs-{n}"), "protocol": "HTTP", "loadBalancingScheme": "EXTERNAL",
            "healthChecks": [format!("{api}/global/healthChecks/hc")],
            "backends": [{"group": format!("{api}/{z}/networkEndpointGroups/neg-{n}"), "balancingMode": "RATE", "maxRatePerEndpoint": 100}]})).await;
    }
    let bs = |n: &str| format!("{api}/global/backendServices/bs-{n}");
    call(
        "global/urlMaps",
        json!({"name": "web-map", "defaultService": bs("discounted"),
        "hostRules": [{"hosts": ["your-store.example"], "pathMatcher": "store"}],
        "pathMatchers": [{"name": "store", "defaultService": bs("discounted"),
            "pathRules": [{"paths": ["/products", "/products/*"], "service": bs("products")}]}]}),
    )
    .await;
    call(
        "global/targetHttpProxies",
        json!({"name": "web-proxy", "urlMap": format!("{api}/global/urlMaps/web-map")}),
    )
    .await;
    call("global/forwardingRules", json!({"name": "web-rule", "IPProtocol": "TCP", "portRange": "80",
        "loadBalancingScheme": "EXTERNAL", "target": format!("{api}/global/targetHttpProxies/web-proxy")})).await;
}

/// A Chrome DevTools Protocol session on one page.
struct Cdp {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    next: u64,
}

impl Cdp {
    /// Sends `method` and returns its `result` (events in between are skipped).
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let msg = json!({"id": id, "method": method, "params": params}).to_string();
        self.ws.send(Message::text(msg)).await.expect("CDP send");
        loop {
            let m = tokio::time::timeout(Duration::from_secs(30), self.ws.next())
                .await
                .expect("CDP answer within 30 s")
                .expect("CDP connection open")
                .expect("CDP message");
            let Ok(text) = m.to_text() else { continue };
            let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// Evaluates `expr` in the page and returns its value.
    async fn eval(&mut self, expr: &str) -> Value {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expr, "returnByValue": true}),
            )
            .await;
        r["result"]["value"].clone()
    }
}

/// Starts headless chromium on `url` and connects to the page over CDP.
async fn open_in_chromium(url: &str, profile: &Path) -> (Proc, Cdp) {
    let child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            "--disable-extensions",
            "--disable-breakpad",
            "--window-size=1280,900",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium (Debian package `chromium`; `make deps` installs it)");
    let chromium = Proc(child);
    // Chromium writes its port to DevToolsActivePort in the profile once it listens.
    let port_file = profile.join("DevToolsActivePort");
    let port: u16 = poll("chromium's DevToolsActivePort", 60, async || {
        std::fs::read_to_string(&port_file)
            .ok()?
            .lines()
            .next()?
            .trim()
            .parse()
            .ok()
    })
    .await;
    let list_url = format!("http://127.0.0.1:{port}/json/list");
    let ws_url = poll("the dashboard page target", 60, async || {
        let v: Value = reqwest::get(&list_url).await.ok()?.json().await.ok()?;
        v.as_array()?.iter().find(|t| {
            t["type"] == "page" && t["url"].as_str().is_some_and(|u| u.contains("/dashboard"))
        })?["webSocketDebuggerUrl"]
            .as_str()
            .map(str::to_string)
    })
    .await;
    let (ws, _) = tokio_tungstenite::connect_async(ws_url.as_str())
        .await
        .expect("CDP WebSocket");
    (chromium, Cdp { ws, next: 0 })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_shows_the_load_balancer_and_health_changes_live() {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard-browser");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let (products, discounted) = (
        Backend::start("products").await,
        Backend::start("discounted").await,
    );
    let access_log = out.join("access.log");
    let emu = start_emulator(&["--access-log".as_ref(), access_log.as_os_str()]);
    let base = emu.base.clone();
    build_lb(&base, &products, &discounted).await;

    let health_of = async |bs: &str| -> Vec<String> {
        let v: Value = reqwest::get(format!("{base}/_emulator/health"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["health"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| h["backendService"].as_str().unwrap().ends_with(bs))
            .map(|h| h["healthState"].as_str().unwrap().to_string())
            .collect()
    };
    poll("both endpoints HEALTHY", 60, async || {
        (health_of("/bs-products").await == ["HEALTHY"]
            && health_of("/bs-discounted").await == ["HEALTHY"])
        .then_some(())
    })
    .await;
    // Some traffic, so rates and recent status codes show.
    let listeners: Value = reqwest::get(format!("{base}/_emulator/listeners"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let socket = listeners["listeners"][0]["localAddr"].as_str().unwrap();
    let lb = reqwest::Client::builder()
        .resolve("your-store.example", socket.parse().unwrap())
        .build()
        .unwrap();
    let port = socket.rsplit(':').next().unwrap();
    for path in ["/products", "/discounted", "/products/1"] {
        let r = lb
            .get(format!("http://your-store.example:{port}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
    }

    let (_chromium, mut page) =
        open_in_chromium(&format!("{base}/_emulator/dashboard"), &out.join("profile")).await;
    // The topology: forwarding rule -> proxy -> URL map -> both backend services -> NEGs ->
    // endpoints, both green.
    let text = poll(
        "the page lists the load balancer, both endpoints green",
        60,
        async || {
            let green = page
                .eval("document.querySelectorAll('.ep.HEALTHY').length")
                .await;
            let text = page.eval("document.body.innerText").await;
            (green == 2).then(|| text.as_str().unwrap_or("").to_string())
        },
    )
    .await;
    for name in [
        "web-rule",
        "web-proxy",
        "web-map",
        "bs-products",
        "bs-discounted",
        "neg-products",
        "neg-discounted",
        "/products/*",
        &products.addr.port().to_string(),
        &discounted.addr.port().to_string(),
    ] {
        assert!(text.contains(name), "{name} not on the page:\n{text}");
    }
    let json_link = page
        .eval("document.querySelector('a[href$=\"/global/urlMaps/web-map\"]') !== null")
        .await;
    assert_eq!(json_link, true, "the URL map links to its JSON");
    poll("recent status codes from the access log", 30, async || {
        let recent = page
            .eval("document.querySelector('[data-recent]').innerText")
            .await;
        recent.as_str()?.contains("200").then_some(())
    })
    .await;
    // A marker that only lives as long as this document: a reload would drop it.
    page.eval("window.__noReload = 'same document'").await;

    // Take the discounted endpoint down: it must turn red on this page, without a reload.
    let down = Instant::now();
    discounted.state.healthy.store(false, Ordering::SeqCst);
    let sel = format!(
        "(() => {{ const e = [...document.querySelectorAll('.ep')].find(e => e.textContent.includes(':{}')); return e ? e.className : ''; }})()",
        discounted.addr.port()
    );
    poll("the discounted endpoint red on the page", 30, async || {
        (page.eval(&sel).await == "ep UNHEALTHY").then_some(())
    })
    .await;
    let took = down.elapsed();
    assert_eq!(page.eval("window.__noReload").await, "same document");
    assert_eq!(
        page.eval("getComputedStyle(document.querySelector('.ep.UNHEALTHY')).backgroundColor")
            .await,
        "rgb(217, 48, 37)",
        "UNHEALTHY is drawn red"
    );
    assert_eq!(
        page.eval("document.querySelectorAll('.ep.HEALTHY').length")
            .await,
        1,
        "the products endpoint stays green"
    );
    eprintln!("endpoint down -> red on the page after {took:?} (health check interval 1 s, unhealthyThreshold 1)");

    let shot = page
        .call("Page.captureScreenshot", json!({"format": "png"}))
        .await;
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot["data"].as_str().expect("screenshot data"))
        .expect("base64 PNG");
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let path = out.join("dashboard.png");
    std::fs::write(&path, &png).unwrap();
    eprintln!("screenshot: {}", path.display());
}
