//! The real `gce-emulator` binary: a load balancer built through its REST API carries traffic to
//! a real backend, and `backendServices.getHealth` and `networkEndpointGroups.listNetworkEndpoints`
//! (`healthStatus: SHOW`) report the health checker's states as they change.

mod dataplane_support;

use std::sync::atomic::Ordering;

use dataplane_support::{compute_call, poll, start_emulator, Backend};
use serde_json::{json, Value};

fn health_states(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if k == "healthState" {
                    out.push(x.as_str().unwrap_or("").to_string());
                } else {
                    health_states(x, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| health_states(x, out)),
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_balancer_built_through_the_rest_api_carries_traffic_and_reports_health() {
    let backend = Backend::start("shop").await;
    let emu = start_emulator(&[]);
    let api = format!("{}/compute/v1/projects/p1", emu.base);
    let http = reqwest::Client::new();
    let call = async |method: reqwest::Method, path: &str, body: Value| -> Value {
        compute_call(&http, &api, method, path, body).await
    };
    use reqwest::Method;
    let z = "zones/us-central1-a";
    call(
        Method::POST,
        "global/healthChecks",
        json!({"name": "hc", "type": "HTTP", "checkIntervalSec": 1, "timeoutSec": 1,
        "healthyThreshold": 1, "unhealthyThreshold": 2,
        "httpHealthCheck": {"portSpecification": "USE_SERVING_PORT", "requestPath": "/healthz"}}),
    )
    .await;
    call(
        Method::POST,
        &format!("{z}/networkEndpointGroups"),
        json!({"name": "neg", "networkEndpointType": "GCE_VM_IP_PORT",
        "defaultPort": backend.addr.port(), "network": "global/networks/default"}),
    )
    .await;
    // The VM the endpoint lives on, and the firewall rule that lets Google's health checkers
    // and proxies reach it (enforced by default).
    call(
        Method::POST,
        &format!("{z}/instances"),
        json!({"name": "vm", "machineType": format!("{z}/machineTypes/e2-small"),
        "disks": [{"boot": true, "initializeParams": {}}], "networkInterfaces": [{"networkIP": "127.0.0.1"}]}),
    )
    .await;
    call(
        Method::POST,
        "global/firewalls",
        json!({"name": "allow-lb", "sourceRanges": ["130.211.0.0/22", "35.191.0.0/16"],
        "allowed": [{"IPProtocol": "tcp", "ports": [backend.addr.port().to_string()]}]}),
    )
    .await;
    call(
        Method::POST,
        &format!("{z}/networkEndpointGroups/neg/attachNetworkEndpoints"),
        json!({"networkEndpoints": [{"ipAddress": "127.0.0.1", "port": backend.addr.port()}]}),
    )
    .await;
    let neg_url = format!("{api}/{z}/networkEndpointGroups/neg");
    call(
        Method::POST,
        "global/backendServices",
        json!({"name": "bs", "protocol": "HTTP", "loadBalancingScheme": "EXTERNAL",
        "healthChecks": [format!("{api}/global/healthChecks/hc")],
        "customResponseHeaders": ["X-Served-By: emulator"],
        "backends": [{"group": neg_url, "balancingMode": "RATE", "maxRatePerEndpoint": 100}]}),
    )
    .await;
    call(Method::POST, "global/urlMaps", json!({"name": "um", "defaultService": format!("{api}/global/backendServices/bs"),
        "hostRules": [{"hosts": ["shop.example"], "pathMatcher": "pm"}],
        "pathMatchers": [{"name": "pm", "defaultService": format!("{api}/global/backendServices/bs"),
            "pathRules": [{"paths": ["/old"], "urlRedirect": {"pathRedirect": "/new", "redirectResponseCode": "FOUND"}}]}]})).await;
    call(
        Method::POST,
        "global/targetHttpProxies",
        json!({"name": "tp", "urlMap": format!("{api}/global/urlMaps/um")}),
    )
    .await;
    call(
        Method::POST,
        "global/forwardingRules",
        json!({"name": "fr", "IPProtocol": "TCP", "portRange": "80",
        "loadBalancingScheme": "EXTERNAL", "target": format!("{api}/global/targetHttpProxies/tp")}),
    )
    .await;
    let rule: Value = http
        .get(format!("{api}/global/forwardingRules/fr"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ip = rule["IPAddress"].as_str().unwrap().to_string();
    assert!(ip.starts_with("127."), "{rule}");

    let local = poll("listener in /_emulator/listeners", 30, async || {
        let v: Value = http
            .get(format!("{}/_emulator/listeners", emu.base))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        let l = v["listeners"]
            .as_array()?
            .iter()
            .find(|l| {
                l["forwardingRule"]
                    .as_str()
                    .is_some_and(|r| r.ends_with("/forwardingRules/fr"))
            })?
            .clone();
        l["localAddr"]
            .as_str()?
            .parse::<std::net::SocketAddr>()
            .ok()
    })
    .await;
    assert_eq!(
        local.ip().to_string(),
        ip,
        "the listener is on the rule's IPAddress"
    );

    let get_health = async || {
        let gh = call(
            Method::POST,
            "global/backendServices/bs/getHealth",
            json!({"group": neg_url}),
        )
        .await;
        let le = call(
            Method::POST,
            &format!("{z}/networkEndpointGroups/neg/listNetworkEndpoints"),
            json!({"healthStatus": "SHOW"}),
        )
        .await;
        let (mut a, mut b) = (Vec::new(), Vec::new());
        health_states(&gh, &mut a);
        health_states(&le, &mut b);
        (a, b)
    };
    poll(
        "HEALTHY in getHealth and listNetworkEndpoints",
        60,
        async || {
            let (a, b) = get_health().await;
            (a == ["HEALTHY"] && b == ["HEALTHY"]).then_some(())
        },
    )
    .await;

    let lb = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .resolve("shop.example", local)
        .build()
        .unwrap();
    let r = lb
        .get(format!("http://shop.example:{}/hello", local.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["x-served-by"], "emulator");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["backend"], "shop");
    assert_eq!(v["headers"]["x-forwarded-for"], format!("127.0.0.1, {ip}"));
    let r = lb
        .get(format!("http://shop.example:{}/old", local.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        (
            r.status().as_u16(),
            r.headers()["location"].to_str().unwrap()
        ),
        (
            302,
            format!("http://shop.example:{}/new", local.port()).as_str()
        )
    );

    // The endpoint fails its checks: both APIs say UNHEALTHY and the LB answers 502.
    backend.state.healthy.store(false, Ordering::SeqCst);
    poll(
        "UNHEALTHY in getHealth and listNetworkEndpoints",
        60,
        async || {
            let (a, b) = get_health().await;
            (a == ["UNHEALTHY"] && b == ["UNHEALTHY"]).then_some(())
        },
    )
    .await;
    let r = lb
        .get(format!("http://shop.example:{}/hello", local.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 502);

    let metrics = http
        .get(format!("{}/_emulator/metrics", emu.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(
            "dataplane_requests_total{forwarding_rule=\"projects/p1/global/forwardingRules/fr\""
        ),
        "{metrics}"
    );
}
