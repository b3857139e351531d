//! Data plane over real sockets, in process: what the load balancer does with its backends:
//! health-check flaps, no healthy endpoint (502), session affinity, the backend timeout (504),
//! connection reuse and the capacity scaler.

mod dataplane_support;

use std::sync::atomic::Ordering;

use dataplane_support::*;
use gce_emulator::health_state::HealthState;
use serde_json::json;

fn bs(name: &str) -> String {
    url(&format!("global/backendServices/{name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_check_flap_removes_and_restores_an_endpoint() {
    let (a, b) = (Backend::start("a").await, Backend::start("b").await);
    let mut w = World::start();
    let (healthy_threshold, unhealthy_threshold) = (2, 2);
    w.health_check("hc", healthy_threshold, unhealthy_threshold);
    w.service("bs", Some("hc"), &[a.addr, b.addr], json!({}));
    w.http_lb("lb", lb_ip(), json!({"defaultService": bs("bs")}));
    w.publish();
    let l = w.listener("lb").await;
    // New endpoints start UNHEALTHY, then pass.
    assert_ne!(w.state("bs", "neg-bs", a.addr), Some(HealthState::Healthy));
    w.wait_state("bs", a.addr, HealthState::Healthy).await;
    w.wait_state("bs", b.addr, HealthState::Healthy).await;
    let cl = client(&l, &["h.example"]);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..6 {
        seen.insert(backend_of(&get(&cl, &l, "h.example", "/").await.2).to_string());
    }
    assert_eq!(seen.len(), 2, "round robin over both: {seen:?}");

    // a starts failing: it goes UNHEALTHY after unhealthyThreshold failed probes, never
    // fewer (more may have run before this test looked: the bound is loose on that side),
    // i.e. within unhealthyThreshold x checkIntervalSec + one interval.
    let before = a.state.probes_failed.load(Ordering::SeqCst);
    a.state.healthy.store(false, Ordering::SeqCst);
    w.wait_state("bs", a.addr, HealthState::Unhealthy).await;
    let failed = a.state.probes_failed.load(Ordering::SeqCst) - before;
    assert!(
        (unhealthy_threshold as usize..=unhealthy_threshold as usize + 2).contains(&failed),
        "{failed} failed probes"
    );
    let served_before = a.state.requests.load(Ordering::SeqCst);
    for _ in 0..10 {
        let (status, _, v, _) = get(&cl, &l, "h.example", "/").await;
        assert_eq!((status, backend_of(&v)), (200, "b"));
    }
    assert_eq!(
        a.state.requests.load(Ordering::SeqCst),
        served_before,
        "no traffic to the unhealthy endpoint"
    );

    // Recovery after healthyThreshold passes.
    let before = a.state.probes_passed.load(Ordering::SeqCst);
    a.state.healthy.store(true, Ordering::SeqCst);
    w.wait_state("bs", a.addr, HealthState::Healthy).await;
    let passed = a.state.probes_passed.load(Ordering::SeqCst) - before;
    assert!(
        (healthy_threshold as usize..=healthy_threshold as usize + 2).contains(&passed),
        "{passed} passed probes"
    );
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..6 {
        seen.insert(backend_of(&get(&cl, &l, "h.example", "/").await.2).to_string());
    }
    assert!(seen.contains("a"), "a serves again: {seen:?}");

    // Detaching an endpoint removes its health entry.
    w.set_endpoints("neg-bs", &[b.addr]);
    w.publish();
    poll("health entry of a removed", 30, async || {
        w.state("bs", "neg-bs", a.addr).is_none().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_healthy_endpoint_gives_502() {
    let a = Backend::start("a").await;
    a.state.healthy.store(false, Ordering::SeqCst);
    let mut w = World::start();
    w.health_check("hc", 1, 1);
    w.service("bs", Some("hc"), &[a.addr], json!({}));
    w.http_lb("lb", lb_ip(), json!({"defaultService": bs("bs")}));
    w.publish();
    let l = w.listener("lb").await;
    poll("a probed", 30, async || {
        (a.state.health_probes.load(Ordering::SeqCst) >= 2).then_some(())
    })
    .await;
    let cl = client(&l, &["h.example"]);
    let (status, _, _, text) = get(&cl, &l, "h.example", "/").await;
    assert_eq!(status, 502);
    assert!(
        text.contains("failed_to_pick_backend") && text.contains("no healthy endpoint"),
        "{text}"
    );
    assert_eq!(a.state.requests.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_cookie_affinity_sticks() {
    let (a, b, c) = (
        Backend::start("a").await,
        Backend::start("b").await,
        Backend::start("c").await,
    );
    let mut w = World::start();
    w.service(
        "bs",
        None,
        &[a.addr, b.addr, c.addr],
        json!({"sessionAffinity": "GENERATED_COOKIE", "affinityCookieTtlSec": 120}),
    );
    w.http_lb("lb", lb_ip(), json!({"defaultService": bs("bs")}));
    w.publish();
    let l = w.listener("lb").await;
    let cl = client(&l, &["h.example"]);
    let (_, headers, v, _) = get(&cl, &l, "h.example", "/").await;
    let first = backend_of(&v).to_string();
    let set_cookie = headers["set-cookie"].to_str().unwrap().to_string();
    assert!(
        set_cookie.starts_with("GCLB=") && set_cookie.contains("Max-Age=120"),
        "{set_cookie}"
    );
    let cookie = set_cookie.split(';').next().unwrap().to_string();
    for _ in 0..10 {
        let r = cl
            .get(format!("http://h.example:{}/", l.local_addr.port()))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert!(r.headers().get("set-cookie").is_none());
        let v: serde_json::Value = r.json().await.unwrap();
        assert_eq!(backend_of(&v), first);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_backend_gets_504_after_timeout_sec() {
    let a = Backend::start("a").await;
    a.state.slow_ms.store(5_000, Ordering::SeqCst);
    let mut w = World::start();
    w.service("bs", None, &[a.addr], json!({"timeoutSec": 1}));
    w.http_lb("lb", lb_ip(), json!({"defaultService": bs("bs")}));
    w.publish();
    let l = w.listener("lb").await;
    let cl = client(&l, &["h.example"]);
    let (status, _, _, text) = get(&cl, &l, "h.example", "/slow").await;
    assert_eq!(status, 504);
    assert!(
        text.contains("backend_timeout") && text.contains("timeoutSec=1"),
        "{text}"
    );
    let (status, _, _, _) = get(&cl, &l, "h.example", "/fast").await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_connections_are_reused() {
    let a = Backend::start("a").await;
    let mut w = World::start();
    w.service("bs", None, &[a.addr], json!({}));
    w.http_lb("lb", lb_ip(), json!({"defaultService": bs("bs")}));
    w.publish();
    let l = w.listener("lb").await;
    // A fresh client connection per request: the LB still reuses one backend connection.
    for _ in 0..20 {
        let c = client(&l, &["h.example"]);
        assert_eq!(get(&c, &l, "h.example", "/").await.0, 200);
    }
    assert_eq!(
        a.state.conn_ports.lock().unwrap().len(),
        1,
        "one pooled upstream connection"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_ip_affinity_and_capacity_scaler_zero() {
    let (a, b, c) = (
        Backend::start("a").await,
        Backend::start("b").await,
        Backend::start("c").await,
    );
    let mut w = World::start();
    w.service(
        "bs",
        None,
        &[a.addr, b.addr, c.addr],
        json!({"sessionAffinity": "CLIENT_IP"}),
    );
    // A second backend service whose only backend has capacityScaler 0: it serves nothing.
    w.service("bs-off", None, &[a.addr], json!({}));
    let mut off = (*w.snap.resources[&key("global/backendServices/bs-off")]).clone();
    off["backends"][0]["capacityScaler"] = json!(0.0);
    w.put("global/backendServices/bs-off", off);
    w.http_lb(
        "lb",
        lb_ip(),
        json!({"defaultService": bs("bs"), "hostRules": [{"hosts": ["off.example"], "pathMatcher": "off"}],
               "pathMatchers": [{"name": "off", "defaultService": bs("bs-off")}]}),
    );
    w.publish();
    let l = w.listener("lb").await;
    for last in [1u8, 3, 4, 5] {
        let c = reqwest::Client::builder()
            .local_address(std::net::IpAddr::from([127, 0, 0, last]))
            .resolve("h.example", l.local_addr)
            .build()
            .unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..8 {
            let r = c
                .get(format!("http://h.example:{}/", l.local_addr.port()))
                .send()
                .await
                .unwrap();
            let v: serde_json::Value = r.json().await.unwrap();
            seen.insert(backend_of(&v).to_string());
        }
        assert_eq!(
            seen.len(),
            1,
            "client 127.0.0.{last} sticks to one endpoint: {seen:?}"
        );
    }
    let cl = client(&l, &["off.example"]);
    let (status, _, _, text) = get(&cl, &l, "off.example", "/").await;
    assert_eq!(status, 502, "{text}");
}
