//! A regional internal Application Load Balancer built with the installed `gcloud` and its
//! `--region` commands against the real emulator binary: proxy-only subnet, regional health
//! check, backend services, URL map, target HTTP proxy and an INTERNAL_MANAGED forwarding rule
//! whose address comes from the backend subnet; real HTTP reaches both backends through the
//! loopback address that carries the internal IP (dataplane/internal.rs). The firewall decides
//! as in the cloud: proxied connections come from the proxy-only subnet's range.
//! gcloud environment per reference/gce-clients.md, section 1.

mod dataplane_support;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::Command;

use dataplane_support::{gcloud, poll, Backend};
use serde_json::Value;

const R: &str = "--region=us-central1";

/// A plain API call for the global and zonal setup gcloud is not under test for (each gcloud
/// run costs seconds).
async fn rest(http: &reqwest::Client, base: &str, method: &str, path: &str, body: Value) {
    let url = format!("{base}/compute/v1/projects/gp/{path}");
    let req = match method {
        "POST" => http.post(&url).json(&body),
        _ => http.get(&url),
    };
    let r = req.send().await.unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    assert!(status.is_success(), "{method} {path}: {status} {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcloud_built_internal_load_balancer_carries_traffic() {
    let (web, api) = (Backend::start("web").await, Backend::start("api").await);
    let stack = gcloud::start(env!("CARGO_BIN_EXE_gce-emulator"));
    let (base, g) = (stack.base.clone(), &stack.gcloud);

    let http = reqwest::Client::new();
    let (web_port, api_port) = (web.addr.port(), api.addr.port());
    rest(&http, &base, "POST", "zones/us-central1-a/instances", serde_json::json!({
        "name": "vm", "machineType": "zones/us-central1-a/machineTypes/e2-small",
        "disks": [{"boot": true, "initializeParams": {"sourceImage": "projects/debian-cloud/global/images/family/debian-12"}}],
        "tags": {"items": ["web"]},
        "networkInterfaces": [{"network": "global/networks/default", "networkIP": "127.0.0.1"}],
    })).await;
    // Health checks come from Google's ranges; proxied traffic will come from the proxy-only
    // subnet, which no rule admits yet.
    let allow = |name: &str, ranges: &[&str]| {
        serde_json::json!({
            "name": name, "network": "global/networks/default", "sourceRanges": ranges,
            "targetTags": ["web"],
            "allowed": [{"IPProtocol": "tcp", "ports": [web_port.to_string(), api_port.to_string()]}],
        })
    };
    rest(
        &http,
        &base,
        "POST",
        "global/firewalls",
        allow("allow-hc", &["130.211.0.0/22", "35.191.0.0/16"]),
    )
    .await;
    for (name, port) in [("web", web_port), ("api", api_port)] {
        let negs = "zones/us-central1-a/networkEndpointGroups";
        rest(
            &http,
            &base,
            "POST",
            negs,
            serde_json::json!({
                "name": format!("neg-{name}"), "networkEndpointType": "GCE_VM_IP_PORT",
                "defaultPort": port, "network": "global/networks/default",
            }),
        )
        .await;
        rest(
            &http,
            &base,
            "POST",
            &format!("{negs}/neg-{name}/attachNetworkEndpoints"),
            serde_json::json!({
                "networkEndpoints": [{"ipAddress": "127.0.0.1", "port": port, "instance": "vm"}],
            }),
        )
        .await;
    }
    g.ok(&[
        "networks",
        "subnets",
        "create",
        "backends",
        "--network=default",
        "--range=10.1.2.0/24",
        R,
    ]);
    g.ok(&[
        "health-checks",
        "create",
        "http",
        "hc",
        R,
        "--use-serving-port",
        "--request-path=/healthz",
        "--check-interval=1s",
        "--timeout=1s",
        "--healthy-threshold=1",
    ]);
    for name in ["web", "api"] {
        g.ok(&[
            "backend-services",
            "create",
            &format!("bs-{name}"),
            R,
            "--protocol=HTTP",
            "--health-checks=hc",
            "--health-checks-region=us-central1",
            "--load-balancing-scheme=INTERNAL_MANAGED",
        ]);
        g.ok(&[
            "backend-services",
            "add-backend",
            &format!("bs-{name}"),
            R,
            &format!("--network-endpoint-group=neg-{name}"),
            "--network-endpoint-group-zone=us-central1-a",
            "--balancing-mode=RATE",
            "--max-rate-per-endpoint=100",
        ]);
    }
    g.ok(&["url-maps", "create", "um", R, "--default-service=bs-web"]);
    g.ok(&[
        "url-maps",
        "add-path-matcher",
        "um",
        R,
        "--path-matcher-name=pm",
        "--default-service=bs-web",
        "--new-hosts=shop.internal",
        "--path-rules=/api/*=bs-api",
    ]);
    g.ok(&[
        "target-http-proxies",
        "create",
        "tp",
        R,
        "--url-map=um",
        "--url-map-region=us-central1",
    ]);
    let fr = [
        "forwarding-rules",
        "create",
        "fr",
        R,
        "--load-balancing-scheme=INTERNAL_MANAGED",
        "--network=default",
        "--subnet=backends",
        "--target-http-proxy=tp",
        "--target-http-proxy-region=us-central1",
        "--ports=80",
    ];
    // No proxy-only subnet in the region yet: refused as the API refuses it.
    let refused = g.run(&fr);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("An active proxy-only subnetwork is required"),
        "{stderr}"
    );
    g.ok(&[
        "networks",
        "subnets",
        "create",
        "proxy-only",
        "--purpose=REGIONAL_MANAGED_PROXY",
        "--role=ACTIVE",
        "--network=default",
        "--range=10.2.0.0/23",
        R,
    ]);
    g.ok(&fr);

    // The API shows the internal address from the backend subnet's range; gcloud lists and
    // describes every regional resource.
    let rule = g.json(&["forwarding-rules", "describe", "fr", R]);
    assert_eq!(rule["IPAddress"], "10.1.2.2", "{rule}");
    assert_eq!(rule["loadBalancingScheme"], "INTERNAL_MANAGED");
    assert!(rule["region"]
        .as_str()
        .unwrap()
        .ends_with("/regions/us-central1"));
    let subnets = g.json(&["networks", "subnets", "list"]);
    let proxy = subnets
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "proxy-only")
        .expect("proxy-only subnet listed");
    assert_eq!(proxy["purpose"], "REGIONAL_MANAGED_PROXY");
    assert_eq!(proxy["role"], "ACTIVE");
    for (coll, name) in [("url-maps", "um"), ("backend-services", "bs-api")] {
        let listed = g.json(&[coll, "list", "--regions=us-central1"]);
        assert!(
            listed.as_array().unwrap().iter().any(|x| x["name"] == name),
            "{coll}: {listed}"
        );
        let d = g.json(&[coll, "describe", name, R]);
        assert!(
            d["region"]
                .as_str()
                .unwrap()
                .ends_with("/regions/us-central1"),
            "{d}"
        );
    }

    // The internal IP is carried by its loopback address (127.64.0.0/10 mapping).
    let local = poll("listener of fr", 30, async || {
        let v: Value = http
            .get(format!("{base}/_emulator/listeners"))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        let l = v["listeners"].as_array()?.iter().find(|l| {
            l["forwardingRule"]
                .as_str()
                .is_some_and(|r| r.ends_with("/regions/us-central1/forwardingRules/fr"))
        })?;
        assert_eq!(l["ipAddress"], "10.1.2.2", "{l}");
        l["localAddr"].as_str()?.parse::<SocketAddr>().ok()
    })
    .await;
    assert_eq!(local.ip(), IpAddr::V4(Ipv4Addr::new(127, 65, 2, 2)));
    let printed = Command::new(env!("CARGO_BIN_EXE_gce-emulator"))
        .args(["--loopback-for", "10.1.2.2"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&printed.stdout).trim(),
        "10.1.2.2 is served on 127.65.2.2"
    );
    let lb = reqwest::Client::builder()
        .resolve("shop.internal", local)
        .build()
        .unwrap();
    let fetch = async |path: &str| -> Option<(u16, String)> {
        let r = lb
            .get(format!("http://shop.internal:{}{path}", local.port()))
            .send()
            .await
            .ok()?;
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap_or_default();
        Some((status, body["backend"].as_str().unwrap_or("").to_string()))
    };
    // Healthy (probes are admitted), yet no rule admits the proxy-only range (10.2.0.0/23 is
    // outside the default network's `default-allow-internal` 10.128.0.0/9): 502.
    let health_url = format!(
        "{base}/compute/v1/projects/gp/regions/us-central1/backendServices/bs-web/getHealth"
    );
    let group =
        format!("{base}/compute/v1/projects/gp/zones/us-central1-a/networkEndpointGroups/neg-web");
    poll("bs-web healthy", 60, async || {
        let h: Value = http
            .post(&health_url)
            .json(&serde_json::json!({"group": group}))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        (h["healthStatus"][0]["healthState"] == "HEALTHY").then_some(())
    })
    .await;
    assert_eq!(fetch("/").await.map(|r| r.0), Some(502));
    rest(
        &http,
        &base,
        "POST",
        "global/firewalls",
        allow("allow-proxies", &["10.2.0.0/23"]),
    )
    .await;
    assert_eq!(
        poll("web through the internal LB", 60, async || {
            fetch("/").await.filter(|r| r.0 == 200)
        })
        .await
        .1,
        "web"
    );
    assert_eq!(
        poll("api through the internal LB", 60, async || {
            fetch("/api/items").await.filter(|r| r.0 == 200)
        })
        .await
        .1,
        "api"
    );

    // Regional operations: gcloud polled them; they list under the region.
    let ops = g.json(&["operations", "list", "--regions=us-central1"]);
    assert!(
        ops.as_array()
            .unwrap()
            .iter()
            .any(|o| o["operationType"] == "insert"
                && o["targetLink"]
                    .as_str()
                    .unwrap_or("")
                    .ends_with("/forwardingRules/fr")),
        "{ops}"
    );

    // A subnet in use by the forwarding rule cannot be deleted; torn down in dependency order,
    // nothing regional remains.
    let del = g.run(&["networks", "subnets", "delete", "backends", R]);
    assert!(!del.status.success());
    g.ok(&["forwarding-rules", "delete", "fr", R]);
    g.ok(&["target-http-proxies", "delete", "tp", R]);
    g.ok(&["url-maps", "delete", "um", R]);
    g.ok(&["backend-services", "delete", "bs-web", "bs-api", R]);
    g.ok(&["health-checks", "delete", "hc", R]);
    let left: Value = http
        .get(format!(
            "{base}/compute/v1/projects/gp/aggregated/forwardingRules"
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(!left.to_string().contains("forwardingRules/fr"), "{left}");
}
