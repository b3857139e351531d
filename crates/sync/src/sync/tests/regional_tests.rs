//! Regional load balancers against a scripted Compute API: forwarding rules, URL maps,
//! certificates and the backends annotation's health (`sync::region_*`, `sync::regional`).

use google_cloud_compute_v1::model;
use serde_json::json;
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::forbid_mutations;
use crate::compute::test_support::{compute_for, done_op, not_found};
use crate::sync::{
    backend_services, forwarding_rules, regional_ingress, ssl_certificates, url_maps, Changes,
};

mod internal_load_balancer;

const FR: &str = "/compute/v1/projects/p1/regions/r1/forwardingRules/fr1";
const PROXY: &str = "projects/p1/regions/r1/targetHttpProxies";

async fn observed_rule(server: &MockServer, target: &str) {
    Mock::given(method("GET"))
        .and(path(FR))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": "fr1", "IPAddress": "10.0.0.5", "portRange": "80-80",
            "loadBalancingScheme": "INTERNAL_MANAGED",
            "target": format!("https://x/compute/v1/{PROXY}/{target}"),
        })))
        .mount(server)
        .await;
}

fn desired() -> model::ForwardingRule {
    model::ForwardingRule::new()
        .set_name("fr1")
        .set_port_range("80")
        .set_load_balancing_scheme("INTERNAL_MANAGED")
        .set_target(format!("{PROXY}/tp1"))
}

/// A regional rule whose only difference is its target gets `setTarget` (its IP is kept); a
/// rule already pointing at the desired proxy gets nothing.
#[tokio::test]
async fn a_regional_rule_changes_target_in_place_and_is_left_alone_in_sync() {
    let server = MockServer::start().await;
    observed_rule(&server, "old").await;
    Mock::given(method("POST"))
        .and(path(format!("{FR}/setTarget")))
        .and(body_partial_json(json!({"target": format!("{PROXY}/tp1")})))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-t")))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    let ip = forwarding_rules::ensure_regional(&compute, "r1", &desired(), &mut changes)
        .await
        .unwrap();
    assert_eq!(ip.as_deref(), Some("10.0.0.5"));
    let done: Vec<String> = changes.iter().map(|c| c.to_string()).collect();
    assert_eq!(done, ["ForwardingRule \"fr1\" updated"]);

    let server = MockServer::start().await;
    observed_rule(&server, "tp1").await;
    forbid_mutations(&server).await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    forwarding_rules::ensure_regional(&compute, "r1", &desired(), &mut changes)
        .await
        .unwrap();
    assert!(changes.is_empty(), "{changes:?}");
}

const R: &str = "/compute/v1/projects/p1/regions/r1";

/// A regional rule on the desired network and subnetwork (named relatively in the desired rule,
/// as full URLs by the API) is kept; one on another subnetwork cannot be patched and is
/// replaced (deleted, then inserted and its new IP read).
#[tokio::test]
async fn a_regional_rule_is_kept_on_its_subnetwork_and_replaced_on_another() {
    let observed = json!({
        "name": "fr1", "IPAddress": "10.0.0.5", "portRange": "80-80",
        "loadBalancingScheme": "INTERNAL_MANAGED",
        "network": "https://x/compute/v1/projects/p1/global/networks/net1",
        "subnetwork": "https://x/compute/v1/projects/p1/regions/r1/subnetworks/s1",
        "target": format!("https://x/compute/v1/{PROXY}/tp1"),
    });
    let on = |subnet: &str| {
        desired()
            .set_network("projects/p1/global/networks/net1")
            .set_subnetwork(format!("projects/p1/regions/r1/subnetworks/{subnet}"))
    };
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(FR))
        .respond_with(ResponseTemplate::new(200).set_body_json(observed.clone()))
        .mount(&server)
        .await;
    forbid_mutations(&server).await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    let ip = forwarding_rules::ensure_regional(&compute, "r1", &on("s1"), &mut changes)
        .await
        .unwrap();
    assert_eq!(ip.as_deref(), Some("10.0.0.5"));
    assert!(changes.is_empty(), "{changes:?}");

    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(FR))
        .respond_with(ResponseTemplate::new(200).set_body_json(observed))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(FR))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": "fr1", "IPAddress": "10.0.1.7"})))
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path(FR))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-d")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{R}/forwardingRules")))
        .and(body_partial_json(json!({
            "subnetwork": "projects/p1/regions/r1/subnetworks/s2"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-i")))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    let ip = forwarding_rules::ensure_regional(&compute, "r1", &on("s2"), &mut changes)
        .await
        .unwrap();
    assert_eq!(ip.as_deref(), Some("10.0.1.7"));
    let done: Vec<String> = changes.iter().map(|c| c.to_string()).collect();
    assert_eq!(
        done,
        [
            "ForwardingRule \"fr1\" deleted",
            "ForwardingRule \"fr1\" created"
        ]
    );
}

/// A missing regional URL map is inserted; one whose insert loses a race (409) is read again
/// and compared, and as the winner made it as desired nothing more is sent.
#[tokio::test]
async fn a_regional_url_map_is_inserted_and_an_insert_race_is_read_again() {
    let desired = model::UrlMap::new()
        .set_name("um1")
        .set_default_service("projects/p1/regions/r1/backendServices/b1");
    let um = format!("{R}/urlMaps/um1");
    for race in [false, true] {
        let server = MockServer::start().await;
        let (code, body) = if race {
            (
                409,
                json!({"error": {"code": 409, "message": "already exists", "status": "ALREADY_EXISTS"}}),
            )
        } else {
            (200, done_op("op-um"))
        };
        Mock::given(method("POST"))
            .and(path(format!("{R}/urlMaps")))
            .and(body_partial_json(json!({"name": "um1"})))
            .respond_with(ResponseTemplate::new(code).set_body_json(body))
            .expect(1)
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path(um.as_str()))
            .respond_with(not_found())
            .up_to_n_times(1)
            .with_priority(1)
            .expect(1)
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path(um.as_str()))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "name": "um1", "fingerprint": "YWJj",
                "defaultService": "https://x/compute/v1/projects/p1/regions/r1/backendServices/b1"})))
            .expect(u64::from(race))
            .mount(&server)
            .await;
        let compute = compute_for(&server).await;
        let mut changes = Changes::new();
        url_maps::ensure_regional(&compute, "r1", &desired, &mut changes)
            .await
            .unwrap();
        let done: Vec<String> = changes.iter().map(|c| c.to_string()).collect();
        let want: &[&str] = if race {
            &[]
        } else {
            &["UrlMap \"um1\" created"]
        };
        assert_eq!(done, want, "race: {race}");
    }
}

/// The regional certificates of an internal Ingress that it no longer names are deleted; the
/// ones it names and other prefixes' are left.
#[tokio::test]
async fn stale_regional_certificates_are_deleted_and_kept_ones_left() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("{R}/sslCertificates")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": [
            {"name": "k8s2-cr-a-kept"}, {"name": "k8s2-cr-a-old"}, {"name": "user-cert"}]})))
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path(format!("{R}/sslCertificates/k8s2-cr-a-old")))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-d")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .respond_with(ResponseTemplate::new(500))
        .with_priority(10)
        .expect(0)
        .named("DELETE of another certificate")
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    ssl_certificates::delete_stale_regional(
        &compute,
        "r1",
        "k8s2-cr-a-",
        &["k8s2-cr-a-kept"],
        &mut changes,
    )
    .await
    .unwrap();
    let done: Vec<String> = changes.iter().map(|c| c.to_string()).collect();
    assert_eq!(done, ["SslCertificate \"k8s2-cr-a-old\" deleted"]);
}

/// The `ingress.kubernetes.io/backends` state of a regional backend service: HEALTHY when any
/// endpoint of any group is, else the last state seen, "Unknown" when the service is missing.
#[tokio::test]
async fn regional_backend_health_prefers_healthy_across_groups() {
    let server = MockServer::start().await;
    let bs = format!("{R}/backendServices/b1");
    let group = |zone: &str| {
        format!("https://x/compute/v1/projects/p1/zones/{zone}/networkEndpointGroups/n1")
    };
    Mock::given(method("GET"))
        .and(path(bs.as_str()))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"name": "b1",
            "backends": [{"group": group("z1")}, {"group": group("z2")}]})),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{R}/backendServices/b2")))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"name": "b2",
            "backends": [{"group": group("z1")}]})),
        )
        .mount(&server)
        .await;
    for (service, zone, state) in [
        ("b1", "z1", "UNHEALTHY"),
        ("b1", "z2", "HEALTHY"),
        ("b2", "z1", "UNHEALTHY"),
    ] {
        Mock::given(method("POST"))
            .and(path(format!("{R}/backendServices/{service}/getHealth")))
            .and(body_partial_json(json!({"group": group(zone)})))
            .respond_with(ResponseTemplate::new(200).set_body_json(
                json!({"healthStatus": [{"ipAddress": "10.0.0.9", "port": 80, "healthState": state}]}),
            ))
            .mount(&server)
            .await;
    }
    Mock::given(method("GET"))
        .respond_with(not_found())
        .with_priority(40)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    assert_eq!(
        backend_services::health_regional(&compute, "r1", "b1").await,
        "HEALTHY"
    );
    assert_eq!(
        backend_services::health_regional(&compute, "r1", "b2").await,
        "UNHEALTHY"
    );
    assert_eq!(
        backend_services::health_regional(&compute, "r1", "missing").await,
        "Unknown"
    );
}

/// A missing internal address: the fix reserves it in the network's own subnet of the region,
/// found by listing the subnetworks (not the proxy-only one, not another network's), or in
/// `--subnetwork` when given, without a listing.
#[tokio::test]
async fn a_missing_internal_address_names_the_subnet_to_reserve_it_in() {
    use crate::sync::{addresses, SyncError};
    use crate::translate::regional::RegionalClass;
    use crate::translate::TranslateConfig;

    let server = MockServer::start().await;
    for gone in [
        "/compute/v1/projects/p1/regions/r1/addresses/ip1",
        "/compute/v1/projects/p1/global/addresses/ip1",
    ] {
        Mock::given(method("GET"))
            .and(path(gone))
            .respond_with(not_found())
            .mount(&server)
            .await;
    }
    let net = |n: &str| format!("https://x/compute/v1/projects/p1/global/networks/{n}");
    // Listed once: the second resolve names its subnet itself.
    Mock::given(method("GET"))
        .and(path("/compute/v1/projects/p1/regions/r1/subnetworks"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": [
            {"name": "proxy", "network": net("default"), "purpose": "REGIONAL_MANAGED_PROXY"},
            {"name": "elsewhere", "network": net("other")},
            {"name": "nodes", "network": net("default"), "purpose": "PRIVATE"},
        ]})))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut config = TranslateConfig::new("p1", "default", &["r1-a"], "c", "uid");
    let command = |result: Result<_, SyncError>| match result {
        Err(SyncError::RegionalStaticIp { command, .. }) => command,
        other => panic!("expected a missing address: {other:?}"),
    };
    let listed =
        addresses::resolve_regional(&compute, &config, RegionalClass::Internal, "r1", "ip1").await;
    assert_eq!(
        command(listed),
        "gcloud compute addresses create ip1 --region=r1 --subnet=nodes --purpose=SHARED_LOADBALANCER_VIP"
    );
    config.subnetwork = Some("mine".into());
    let named =
        addresses::resolve_regional(&compute, &config, RegionalClass::Internal, "r1", "ip1").await;
    assert_eq!(
        command(named),
        "gcloud compute addresses create ip1 --region=r1 --subnet=mine --purpose=SHARED_LOADBALANCER_VIP"
    );
}

/// A regional backend service is inserted when absent and deleted by name (`compute.
/// regionBackendServices`, in its region).
#[tokio::test]
async fn a_regional_backend_service_is_inserted_and_deleted_in_its_region() {
    let server = MockServer::start().await;
    let bs = "/compute/v1/projects/p1/regions/r1/backendServices";
    Mock::given(method("GET"))
        .and(path(format!("{bs}/b1")))
        .respond_with(not_found())
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(bs))
        .and(body_partial_json(json!({"name": "b1", "protocol": "HTTP"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-i")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path(format!("{bs}/b1")))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-d")))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let desired = model::BackendService::new()
        .set_name("b1")
        .set_protocol("HTTP");
    let mut changes = Changes::new();
    backend_services::ensure_regional(&compute, "r1", &desired, &mut changes)
        .await
        .unwrap();
    backend_services::delete_regional(&compute, "r1", "b1", &mut changes)
        .await
        .unwrap();
    let said: Vec<String> = changes.iter().map(ToString::to_string).collect();
    assert_eq!(
        said,
        [
            "BackendService \"b1\" created",
            "BackendService \"b1\" deleted"
        ]
    );
}

/// Regional health checks and proxies: inserted when absent; an existing proxy gets only the
/// `setUrlMap` / `setSslCertificates` its differences need (references compared by relative
/// name); each is deleted by name.
#[tokio::test]
async fn regional_health_checks_and_proxies_are_inserted_updated_and_deleted() {
    use crate::sync::{health_checks, target_http_proxies, target_https_proxies};

    let server = MockServer::start().await;
    let r = "/compute/v1/projects/p1/regions/r1";
    let full = |rel: &str| format!("https://www.googleapis.com/compute/v1/projects/p1/{rel}");
    let get = |name: &str, body: Option<serde_json::Value>| {
        let mock = Mock::given(method("GET")).and(path(format!("{r}/{name}")));
        match body {
            Some(b) => mock.respond_with(ResponseTemplate::new(200).set_body_json(b)),
            None => mock.respond_with(not_found()),
        }
    };
    let write = |verb: &str, p: String, n: u64| {
        Mock::given(method(verb))
            .and(path(p))
            .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op")))
            .expect(n)
    };
    for m in [
        get("healthChecks/hc1", None),
        get("targetHttpProxies/tp1", None),
        get(
            "targetHttpProxies/tp2",
            Some(json!({"name": "tp2", "urlMap": full("regions/r1/urlMaps/old")})),
        ),
        get(
            "targetHttpsProxies/tps1",
            Some(
                json!({"name": "tps1", "urlMap": full("regions/r1/urlMaps/old"),
                        "sslCertificates": [full("regions/r1/sslCertificates/cert-a")]}),
            ),
        ),
        get(
            "targetHttpsProxies/tps2",
            Some(
                json!({"name": "tps2", "urlMap": full("regions/r1/urlMaps/um1"),
                        "sslCertificates": [full("regions/r1/sslCertificates/cert-b")]}),
            ),
        ),
        write("POST", format!("{r}/healthChecks"), 1),
        write("POST", format!("{r}/targetHttpProxies"), 1),
        write("POST", format!("{r}/targetHttpProxies/tp2/setUrlMap"), 1),
        write("POST", format!("{r}/targetHttpsProxies/tps1/setUrlMap"), 1),
        write(
            "POST",
            format!("{r}/targetHttpsProxies/tps1/setSslCertificates"),
            1,
        ),
        write("DELETE", format!("{r}/healthChecks/hc1"), 1),
        write("DELETE", format!("{r}/targetHttpProxies/tp1"), 1),
        write("DELETE", format!("{r}/targetHttpsProxies/tps1"), 1),
    ] {
        m.mount(&server).await;
    }
    let compute = compute_for(&server).await;
    let um1 = "projects/p1/regions/r1/urlMaps/um1";
    let http = |name: &str| {
        model::TargetHttpProxy::new()
            .set_name(name)
            .set_url_map(um1)
    };
    let https = |name: &str| {
        model::TargetHttpsProxy::new()
            .set_name(name)
            .set_url_map(um1)
            .set_ssl_certificates(["projects/p1/regions/r1/sslCertificates/cert-b"])
    };
    let mut changes = Changes::new();
    let hc = model::HealthCheck::new().set_name("hc1");
    health_checks::ensure_regional(&compute, "r1", &hc, &mut changes)
        .await
        .unwrap();
    for name in ["tp1", "tp2"] {
        target_http_proxies::ensure_regional(&compute, "r1", &http(name), &mut changes)
            .await
            .unwrap();
    }
    for name in ["tps1", "tps2"] {
        target_https_proxies::ensure_regional(&compute, "r1", &https(name), &mut changes)
            .await
            .unwrap();
    }
    health_checks::delete_regional(&compute, "r1", "hc1", &mut changes)
        .await
        .unwrap();
    target_http_proxies::delete_regional(&compute, "r1", "tp1", &mut changes)
        .await
        .unwrap();
    target_https_proxies::delete_regional(&compute, "r1", "tps1", &mut changes)
        .await
        .unwrap();
    let said: Vec<String> = changes.iter().map(ToString::to_string).collect();
    assert_eq!(
        said,
        [
            "HealthCheck \"hc1\" created",
            "TargetProxy \"tp1\" created",
            "TargetProxy \"tp2\" updated",
            "TargetProxy \"tps1\" updated",
            "HealthCheck \"hc1\" deleted",
            "TargetProxy \"tp1\" deleted",
            "TargetProxy \"tps1\" deleted",
        ]
    );
}

/// A regional certificate is inserted only when absent (its content is never compared: it holds
/// the private key, and a new certificate gets a new name); certificates and forwarding rules
/// are deleted by name.
#[tokio::test]
async fn regional_certificates_are_inserted_once_and_rules_and_certificates_deleted_by_name() {
    let server = MockServer::start().await;
    let r = "/compute/v1/projects/p1/regions/r1";
    Mock::given(method("GET"))
        .and(path(format!("{r}/sslCertificates/new")))
        .respond_with(not_found())
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{r}/sslCertificates/there")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"name": "there"})))
        .mount(&server)
        .await;
    for (verb, p) in [
        ("POST", format!("{r}/sslCertificates")),
        ("DELETE", format!("{r}/sslCertificates/there")),
        ("DELETE", format!("{r}/forwardingRules/fr1")),
    ] {
        Mock::given(method(verb))
            .and(path(p))
            .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op")))
            .expect(1)
            .mount(&server)
            .await;
    }
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    for name in ["new", "there"] {
        let cert = model::SslCertificate::new()
            .set_name(name)
            .set_certificate("PEM");
        ssl_certificates::ensure_regional(&compute, "r1", &cert, &mut changes)
            .await
            .unwrap();
    }
    ssl_certificates::delete_regional(&compute, "r1", "there", &mut changes)
        .await
        .unwrap();
    forwarding_rules::delete_regional(&compute, "r1", "fr1", &mut changes)
        .await
        .unwrap();
    let said: Vec<String> = changes.iter().map(ToString::to_string).collect();
    assert_eq!(
        said,
        [
            "SslCertificate \"new\" created",
            "SslCertificate \"there\" deleted",
            "ForwardingRule \"fr1\" deleted",
        ]
    );
}
