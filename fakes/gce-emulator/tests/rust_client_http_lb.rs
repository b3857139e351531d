//! The official Rust crate google-cloud-compute-v1 (what the operator uses), pointed at the
//! emulator with `with_endpoint` and anonymous credentials (reference/gce-clients.md, section 2):
//! builds a load balancer through slow Operations it must poll, survives an injected 503 on an
//! idempotent read (the client's default retry), and gets 412 on a stale fingerprint.

mod control_support;

use control_support::Emulator;
use google_cloud_compute_v1::client::{
    BackendServices, GlobalAddresses, GlobalForwardingRules, HealthChecks, NetworkEndpointGroups,
    TargetHttpProxies, UrlMaps,
};
use google_cloud_compute_v1::model;
use google_cloud_gax::paginator::ItemPaginator;
use google_cloud_lro::Poller;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

const P: &str = "p1";
const ZONE: &str = "us-central1-a";

fn m<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("model from JSON")
}

fn assert_done(op: &model::Operation) {
    assert_eq!(op.status, Some(model::operation::Status::Done), "{op:?}");
    assert!(
        op.error.is_none() && op.http_error_status_code.is_none(),
        "{op:?}"
    );
}

macro_rules! client {
    ($t:ty, $base:expr) => {
        <$t>::builder()
            .with_endpoint($base)
            .with_credentials(google_cloud_auth::credentials::anonymous::Builder::new().build())
            .build()
            .await
            .expect("client")
    };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_client_builds_a_load_balancer_with_slow_operations_retries_and_fingerprints() {
    let emu = Emulator::start(&["--operation-latency-ms", "1200"]);
    emu.instance(P, ZONE, "vm1", "127.0.0.10").await;
    emu.instance(P, ZONE, "vm2", "127.0.0.11").await;
    let host = emu.root.trim_end_matches('/').to_string();
    let hc: HealthChecks = client!(HealthChecks, &host);
    let negs: NetworkEndpointGroups = client!(NetworkEndpointGroups, &host);
    let bss: BackendServices = client!(BackendServices, &host);
    let ums: UrlMaps = client!(UrlMaps, &host);
    let thps: TargetHttpProxies = client!(TargetHttpProxies, &host);
    let addrs: GlobalAddresses = client!(GlobalAddresses, &host);
    let frs: GlobalForwardingRules = client!(GlobalForwardingRules, &host);

    // Slow operations: each stays RUNNING for 1.2 s, so the poller has to poll.
    let op = hc.insert().set_project(P).set_body(m::<model::HealthCheck>(json!({"name": "hc1", "type": "HTTP", "httpHealthCheck": {"port": 8080, "requestPath": "/healthz"}}))).poller().until_done().await.unwrap();
    assert_done(&op);
    assert_eq!(op.operation_type.as_deref(), Some("insert"));
    let op = negs
        .insert()
        .set_project(P)
        .set_zone(ZONE)
        .set_body(m::<model::NetworkEndpointGroup>(
            json!({"name": "neg1", "networkEndpointType": "GCE_VM_IP_PORT", "defaultPort": 8080}),
        ))
        .poller()
        .until_done()
        .await
        .unwrap();
    assert_done(&op);
    assert!(op
        .zone
        .as_deref()
        .unwrap()
        .ends_with("/zones/us-central1-a"));
    let attach = m::<model::NetworkEndpointGroupsAttachEndpointsRequest>(
        json!({"networkEndpoints": [{"ipAddress": "127.0.0.10", "port": 8080, "instance": "vm1"}, {"ipAddress": "127.0.0.11"}]}),
    );
    assert_done(
        &negs
            .attach_network_endpoints()
            .set_project(P)
            .set_zone(ZONE)
            .set_network_endpoint_group("neg1")
            .set_body(attach)
            .poller()
            .until_done()
            .await
            .unwrap(),
    );
    let calls = emu.admin_get("calls").await;
    assert!(
        calls["methods"]["compute.globalOperations.get"]
            .as_u64()
            .unwrap_or(0)
            >= 1,
        "the poller polled global operations: {calls}"
    );
    assert!(
        calls["methods"]["compute.zoneOperations.get"]
            .as_u64()
            .unwrap_or(0)
            >= 1,
        "the poller polled zone operations: {calls}"
    );

    let bs = m::<model::BackendService>(json!({
        "name": "bs1", "protocol": "HTTP", "healthChecks": [format!("projects/{P}/global/healthChecks/hc1")],
        "backends": [{"group": format!("projects/{P}/zones/{ZONE}/networkEndpointGroups/neg1"), "balancingMode": "RATE", "maxRatePerEndpoint": 100.0}]
    }));
    assert_done(
        &bss.insert()
            .set_project(P)
            .set_body(bs)
            .poller()
            .until_done()
            .await
            .unwrap(),
    );
    let um = m::<model::UrlMap>(json!({
        "name": "um1", "defaultService": format!("projects/{P}/global/backendServices/bs1"),
        "hostRules": [{"hosts": ["example.com"], "pathMatcher": "pm1"}],
        "pathMatchers": [{"name": "pm1", "defaultService": format!("projects/{P}/global/backendServices/bs1"), "pathRules": [{"paths": ["/api/*"], "service": format!("projects/{P}/global/backendServices/bs1")}]}]
    }));
    assert_done(
        &ums.insert()
            .set_project(P)
            .set_body(um)
            .poller()
            .until_done()
            .await
            .unwrap(),
    );
    assert_done(
        &thps
            .insert()
            .set_project(P)
            .set_body(m::<model::TargetHttpProxy>(
                json!({"name": "thp1", "urlMap": format!("projects/{P}/global/urlMaps/um1")}),
            ))
            .poller()
            .until_done()
            .await
            .unwrap(),
    );
    assert_done(
        &addrs
            .insert()
            .set_project(P)
            .set_body(m::<model::Address>(json!({"name": "addr1"})))
            .poller()
            .until_done()
            .await
            .unwrap(),
    );
    let fr = m::<model::ForwardingRule>(
        json!({"name": "fr1", "target": format!("projects/{P}/global/targetHttpProxies/thp1"), "portRange": "80", "IPAddress": format!("projects/{P}/global/addresses/addr1")}),
    );
    assert_done(
        &frs.insert()
            .set_project(P)
            .set_body(fr)
            .poller()
            .until_done()
            .await
            .unwrap(),
    );

    // Reads: get, list (paginated), aggregated list, getHealth, listNetworkEndpoints.
    let addr = addrs
        .get()
        .set_project(P)
        .set_address("addr1")
        .send()
        .await
        .unwrap();
    let fr = frs
        .get()
        .set_project(P)
        .set_forwarding_rule("fr1")
        .send()
        .await
        .unwrap();
    assert_eq!(fr.ip_address, addr.address);
    assert_eq!(addr.status, Some(model::address::Status::InUse));
    let mut names = Vec::new();
    let mut it = hc.list().set_project(P).set_max_results(1u32).by_item();
    while let Some(item) = it.next().await {
        names.push(item.unwrap().name.unwrap());
    }
    assert_eq!(names, vec!["hc1".to_string()]);
    let agg = negs.aggregated_list().set_project(P).send().await.unwrap();
    let zone_negs = &agg.items[&format!("zones/{ZONE}")];
    assert_eq!(zone_negs.network_endpoint_groups[0].size, Some(2));
    let health = bss
        .get_health()
        .set_project(P)
        .set_backend_service("bs1")
        .set_body(m::<model::ResourceGroupReference>(
            json!({"group": format!("projects/{P}/zones/{ZONE}/networkEndpointGroups/neg1")}),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(health.health_status.len(), 2);
    let mut eps = negs
        .list_network_endpoints()
        .set_project(P)
        .set_zone(ZONE)
        .set_network_endpoint_group("neg1")
        .set_body(m::<model::NetworkEndpointGroupsListEndpointsRequest>(
            json!({"healthStatus": "SHOW"}),
        ))
        .by_item();
    let mut seen = Vec::new();
    while let Some(ep) = eps.next().await {
        let ep = ep.unwrap();
        assert_eq!(ep.healths.len(), 1);
        seen.push((ep.network_endpoint.unwrap().ip_address.unwrap(), 0));
    }
    assert_eq!(seen.len(), 2);

    // An injected 503 on an idempotent read is retried by the client's default policy.
    emu.admin(
        reqwest::Method::POST,
        "faults",
        &json!({"method": "compute.backendServices.get", "code": 503, "count": 1}),
    )
    .await;
    let before = emu.admin_get("calls").await["methods"]["compute.backendServices.get"]
        .as_u64()
        .unwrap_or(0);
    let got = bss
        .get()
        .set_project(P)
        .set_backend_service("bs1")
        .send()
        .await
        .unwrap();
    let after = emu.admin_get("calls").await["methods"]["compute.backendServices.get"]
        .as_u64()
        .unwrap_or(0);
    assert_eq!(after - before, 2, "one 503, then one success");
    // A 503 on a mutation reaches the caller with the status it carries.
    emu.admin(
        reqwest::Method::POST,
        "faults",
        &json!({"method": "compute.urlMaps.patch", "code": 503, "count": 1}),
    )
    .await;
    let err = ums
        .patch()
        .set_project(P)
        .set_url_map("um1")
        .set_body(m::<model::UrlMap>(json!({"description": "x"})))
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.http_status_code(), Some(503), "{err:?}");

    // A stale fingerprint gets 412 conditionNotMet; the current one succeeds.
    let with_fp = |timeout: i32| {
        let mut b = m::<model::BackendService>(json!({"timeoutSec": timeout}));
        b.fingerprint = got.fingerprint.clone();
        b
    };
    assert!(got.fingerprint.is_some());
    assert_done(
        &bss.patch()
            .set_project(P)
            .set_backend_service("bs1")
            .set_body(with_fp(40))
            .poller()
            .until_done()
            .await
            .unwrap(),
    );
    let err = bss
        .patch()
        .set_project(P)
        .set_backend_service("bs1")
        .set_body(with_fp(50))
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.http_status_code(), Some(412), "{err:?}");
    assert_eq!(
        err.status().map(|s| s.code),
        Some(google_cloud_gax::error::rpc::Code::FailedPrecondition)
    );
    assert_eq!(
        bss.get()
            .set_project(P)
            .set_backend_service("bs1")
            .send()
            .await
            .unwrap()
            .timeout_sec,
        Some(40)
    );

    // In use: the health check cannot go while bs1 names it.
    let err = hc
        .delete()
        .set_project(P)
        .set_health_check("hc1")
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.http_status_code(), Some(400));
    assert!(
        format!("{err:?}").contains("resourceInUseByAnotherResource")
            || format!("{err}").contains("already being used"),
        "{err}"
    );

    // Tear down in reverse order.
    assert_done(
        &frs.delete()
            .set_project(P)
            .set_forwarding_rule("fr1")
            .poller()
            .until_done()
            .await
            .unwrap(),
    );
    assert_done(
        &addrs
            .delete()
            .set_project(P)
            .set_address("addr1")
            .poller()
            .until_done()
            .await
            .unwrap(),
    );
    assert_done(
        &thps
            .delete()
            .set_project(P)
            .set_target_http_proxy("thp1")
            .poller()
            .until_done()
            .await
            .unwrap(),
    );
    assert_done(
        &ums.delete()
            .set_project(P)
            .set_url_map("um1")
            .poller()
            .until_done()
            .await
            .unwrap(),
    );
    assert_done(
        &bss.delete()
            .set_project(P)
            .set_backend_service("bs1")
            .poller()
            .until_done()
            .await
            .unwrap(),
    );
    assert_done(
        &negs
            .delete()
            .set_project(P)
            .set_zone(ZONE)
            .set_network_endpoint_group("neg1")
            .poller()
            .until_done()
            .await
            .unwrap(),
    );
    assert_done(
        &hc.delete()
            .set_project(P)
            .set_health_check("hc1")
            .poller()
            .until_done()
            .await
            .unwrap(),
    );
    for vm in ["vm1", "vm2"] {
        let path = format!("projects/{P}/zones/{ZONE}/instances/{vm}");
        emu.send(reqwest::Method::DELETE, &path, "").await;
    }
    assert_eq!(emu.keys(P).await, Emulator::initial_keys(P));
}
