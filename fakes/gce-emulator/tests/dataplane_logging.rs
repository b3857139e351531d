//! Request logs in the data plane, in process: `logConfig.sampleRate` over 1000 real requests,
//! the LogEntry's shape, and no entries without `logConfig.enable`.

mod dataplane_support;

use dataplane_support::*;
use serde_json::json;

fn bs(name: &str) -> String {
    url(&format!("global/backendServices/{name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sample_rate_and_entry_shape() {
    let (a, b) = (Backend::start("a").await, Backend::start("b").await);
    let mut w = World::start();
    w.service(
        "half",
        None,
        &[a.addr],
        json!({"logConfig": {"enable": true, "sampleRate": 0.5}}),
    );
    w.service(
        "off",
        None,
        &[b.addr],
        json!({"logConfig": {"enable": false, "sampleRate": 1.0}}),
    );
    w.http_lb(
        "lb",
        lb_ip(),
        json!({"defaultService": bs("half"), "hostRules": [{"hosts": ["off.example"], "pathMatcher": "off"}],
               "pathMatchers": [{"name": "off", "defaultService": bs("off")}]}),
    );
    w.publish();
    let l = w.listener("lb").await;
    let port = l.local_addr.port();
    let c = client(&l, &["log.example", "off.example"]);
    for i in 0..1000 {
        let r = c
            .get(format!("http://log.example:{port}/n/{i}"))
            .header("user-agent", "edge-test/1")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
    }
    for _ in 0..20 {
        c.get(format!("http://off.example:{port}/"))
            .send()
            .await
            .unwrap();
    }
    let all =
        w.dp.logs()
            .query(&["projects/p".into()], "", false)
            .unwrap();
    // Binomial(1000, 0.5): mean 500, standard deviation 15.8; 400..=600 is over 6 deviations.
    assert!(
        (400..=600).contains(&all.len()),
        "sampleRate 0.5 logged {} of 1000 requests",
        all.len()
    );
    assert!(all
        .iter()
        .all(|e| e["resource"]["labels"]["backend_service_name"] == "half"));
    let e = &all[0];
    assert_eq!(e["logName"], "projects/p/logs/requests");
    assert_eq!(e["resource"]["type"], "http_load_balancer");
    assert_eq!(
        e["resource"]["labels"],
        json!({"project_id": "p", "zone": "global", "url_map_name": "lb", "target_proxy_name": "lb",
               "forwarding_rule_name": "lb", "backend_service_name": "half"})
    );
    let h = &e["httpRequest"];
    assert_eq!(h["requestMethod"], "GET");
    assert_eq!(h["status"], 200);
    assert_eq!(h["userAgent"], "edge-test/1");
    assert_eq!(h["serverIp"], l.local_addr.ip().to_string());
    assert!(h["requestUrl"]
        .as_str()
        .unwrap()
        .starts_with(&format!("http://log.example:{port}/n/")));
    assert!(h["latency"].as_str().unwrap().ends_with('s'));
    assert_eq!(e["severity"], "INFO");
    assert_eq!(
        e["jsonPayload"]["statusDetails"],
        "response_sent_by_backend"
    );
    assert_eq!(
        e["jsonPayload"]["@type"],
        "type.googleapis.com/google.cloud.loadbalancing.type.LoadBalancerLogEntry"
    );
    // Filters as Cloud Logging's query language reads them.
    let n = |f: &str| {
        w.dp.logs()
            .query(&["projects/p".into()], f, false)
            .unwrap()
            .len()
    };
    assert_eq!(
        n(r#"resource.type="http_load_balancer" AND httpRequest.status=200"#),
        all.len()
    );
    assert_eq!(n("httpRequest.status>=400"), 0);
    assert_eq!(n(r#"resource.labels.backend_service_name="off""#), 0);
    assert_eq!(
        w.dp.logs()
            .query(&["projects/other".into()], "", false)
            .unwrap()
            .len(),
        0
    );
}
