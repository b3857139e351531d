//! Firewall enforcement in the data plane (Google Cloud "Load balancing: firewall rules"):
//! health-check probes are evaluated from 35.191.0.0/16 and proxied connections from
//! 130.211.0.0/22 against the INGRESS rules of the endpoint's network and the tags of the
//! endpoint's instance. A refused probe is dropped (the endpoint turns UNHEALTHY after its
//! thresholds while the backend itself answers 200); a refused connection is 502
//! `failed_to_connect_to_backend`, also in the access log's `statusDetails`.

mod dataplane_support;

use dataplane_support::*;
use gce_emulator::dataplane::DataPlaneConfig;
use gce_emulator::health_state::HealthState;
use gce_emulator::snapshot::NetworkEndpoint;
use serde_json::{json, Value};

const NETWORK: &str = "global/networks/default";

fn rule(priority: u32, ranges: &[&str], allow: bool, port: u16, tags: &[&str]) -> Value {
    let entry = json!([{"IPProtocol": "tcp", "ports": [port.to_string()]}]);
    let mut r = json!({"kind": "compute#firewall", "network": url(NETWORK), "direction": "INGRESS",
        "priority": priority, "sourceRanges": ranges, "targetTags": tags});
    r[if allow { "allowed" } else { "denied" }] = entry;
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn firewall_rules_decide_which_probes_and_connections_reach_an_endpoint() {
    let a = Backend::start("a").await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.jsonl");
    let mut w = World::start_with(DataPlaneConfig {
        port_map: [(80, 0)].into_iter().collect(),
        access_log: Some(log.clone()),
        enforce_firewall: true,
        ..Default::default()
    });
    let port = a.addr.port();
    // The endpoint's VM: tag `web`, holding the endpoint's address.
    w.put(
        &format!("zones/{ZONE}/instances/vm"),
        json!({"kind": "compute#instance", "tags": {"items": ["web"]},
               "networkInterfaces": [{"network": url(NETWORK), "networkIP": "127.0.0.1"}]}),
    );
    w.health_check("hc", 1, 1);
    w.service("bs", Some("hc"), &[a.addr], json!({}));
    w.snap.neg_endpoints.insert(
        key(&format!("zones/{ZONE}/networkEndpointGroups/neg-bs")),
        vec![NetworkEndpoint {
            ip_address: "127.0.0.1".into(),
            port,
            instance: Some("vm".into()),
        }],
    );
    w.http_lb(
        "lb",
        lb_ip(),
        json!({"defaultService": url("global/backendServices/bs")}),
    );
    let google = ["130.211.0.0/22", "35.191.0.0/16"];
    w.put(
        "global/firewalls/allow-lb",
        rule(1000, &google, true, port, &["web"]),
    );
    w.publish();
    let l = w.listener("lb").await;
    let c = client(&l, &["fw.example"]);

    // Both ranges admitted to the instance's tag: HEALTHY, and requests get through.
    w.wait_state("bs", a.addr, HealthState::Healthy).await;
    assert_eq!(get(&c, &l, "fw.example", "/x").await.0, 200);

    // Only the health checkers' range: probes pass, proxied connections are refused.
    w.put(
        "global/firewalls/allow-lb",
        rule(1000, &["35.191.0.0/16"], true, port, &["web"]),
    );
    w.publish();
    let (status, _, _, body) = poll("502 from the refused connection", 30, async || {
        let r = get(&c, &l, "fw.example", "/x").await;
        (r.0 == 502).then_some(r)
    })
    .await;
    // Requests sent before the new rule reached the data plane were served; count from here.
    let served = a.state.requests.load(std::sync::atomic::Ordering::SeqCst);
    for _ in 0..3 {
        assert_eq!(get(&c, &l, "fw.example", "/x").await.0, 502);
    }
    assert!(body.contains("failed_to_connect_to_backend"), "{body}");
    assert!(
        body.contains("130.211.0.1"),
        "names the source it evaluated: {body}"
    );
    assert_eq!(status, 502);
    assert_eq!(w.state("bs", "neg-bs", a.addr), Some(HealthState::Healthy));
    assert_eq!(
        a.state.requests.load(std::sync::atomic::Ordering::SeqCst),
        served,
        "a refused connection never reaches the backend"
    );
    let logged = poll("statusDetails in the access log", 30, async || {
        let text = std::fs::read_to_string(&log).ok()?;
        text.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|r| r["status"] == 502)
    })
    .await;
    assert_eq!(
        logged["statusDetails"], "failed_to_connect_to_backend",
        "{logged}"
    );

    // A rule for another tag: the probes are dropped, the endpoint turns UNHEALTHY although
    // the backend answers 200, and requests find no healthy endpoint.
    w.put(
        "global/firewalls/allow-lb",
        rule(1000, &google, true, port, &["db"]),
    );
    w.publish();
    w.wait_state("bs", a.addr, HealthState::Unhealthy).await;
    let (status, _, _, body) = get(&c, &l, "fw.example", "/x").await;
    assert_eq!(status, 502);
    assert!(body.contains("failed_to_pick_backend"), "{body}");

    // Allowed again: HEALTHY. Then a deny rule on the port at a higher priority wins...
    w.put(
        "global/firewalls/allow-lb",
        rule(1000, &google, true, port, &["web"]),
    );
    w.publish();
    w.wait_state("bs", a.addr, HealthState::Healthy).await;
    w.put(
        "global/firewalls/deny",
        rule(900, &["0.0.0.0/0"], false, port, &[]),
    );
    w.publish();
    w.wait_state("bs", a.addr, HealthState::Unhealthy).await;
    // ...until it denies another port: HEALTHY again, and requests get through.
    w.put(
        "global/firewalls/deny",
        rule(900, &["0.0.0.0/0"], false, port ^ 1, &[]),
    );
    w.publish();
    w.wait_state("bs", a.addr, HealthState::Healthy).await;
    assert_eq!(get(&c, &l, "fw.example", "/x").await.0, 200);
}
