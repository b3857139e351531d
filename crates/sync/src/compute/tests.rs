//! HTTP-level tests of the Compute seam against a scripted server (wiremock).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use google_cloud_compute_v1::model;
use serde_json::json;
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::test_support::{compute_for, done_op};
use super::*;

fn error_body(code: u16, status: &str, reason: &str) -> serde_json::Value {
    json!({"error": {"code": code, "message": format!("scripted {reason}"), "status": status,
        "errors": [{"domain": "global", "reason": reason, "message": "scripted"}]}})
}

#[tokio::test]
async fn get_returns_resource_and_none_on_404() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/compute/v1/projects/p1/global/urlMaps/um1"))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"name": "um1", "fingerprint": "YWJj", "defaultService": "https://x/compute/v1/projects/p1/global/backendServices/b"}),
        ))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/compute/v1/projects/p1/global/urlMaps/missing"))
        .respond_with(ResponseTemplate::new(404).set_body_json(error_body(
            404,
            "NOT_FOUND",
            "notFound",
        )))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let um = compute.get_url_map("um1").await.unwrap().expect("found");
    assert_eq!(um.fingerprint.as_deref(), Some(&b"abc"[..]));
    assert!(compute.get_url_map("missing").await.unwrap().is_none());
    assert_eq!(compute.metrics().count("compute.urlMaps.get", "ok"), 1);
    assert_eq!(
        compute.metrics().count("compute.urlMaps.get", "notFound"),
        1
    );
}

#[tokio::test]
async fn insert_retries_503_then_succeeds() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/compute/v1/projects/p1/global/healthChecks"))
        .respond_with(ResponseTemplate::new(503).set_body_json(error_body(
            503,
            "UNAVAILABLE",
            "backendError",
        )))
        .up_to_n_times(1)
        .with_priority(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/compute/v1/projects/p1/global/healthChecks"))
        .and(body_partial_json(json!({"name": "hc1", "type": "HTTP"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-1")))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let hc = model::HealthCheck::new()
        .set_name("hc1")
        .set_type(model::health_check::Type::Http);
    compute.insert_health_check(&hc).await.expect("retried");
    assert_eq!(
        compute
            .metrics()
            .count("compute.healthChecks.insert", "backendError"),
        1
    );
    assert_eq!(
        compute.metrics().count("compute.healthChecks.insert", "ok"),
        1
    );
}

#[tokio::test]
async fn failed_operation_is_an_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/compute/v1/projects/p1/global/urlMaps"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": "op-2", "status": "DONE", "operationType": "insert",
            "error": {"errors": [{"code": "RESOURCE_ALREADY_EXISTS", "message": "um1 exists"}]},
            "httpErrorStatusCode": 409, "httpErrorMessage": "CONFLICT"
        })))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let err = compute
        .insert_url_map(&model::UrlMap::new().set_name("um1"))
        .await
        .expect_err("operation carried an error");
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
    assert!(err.to_string().contains("um1 exists"), "{err}");
}

#[tokio::test]
async fn pending_operation_is_waited_for() {
    let server = MockServer::start().await;
    Mock::given(method("DELETE"))
        .and(path("/compute/v1/projects/p1/global/backendServices/b1"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(
                json!({"name": "op-3", "status": "RUNNING", "operationType": "delete"}),
            ),
        )
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/compute/v1/projects/p1/global/operations/op-3/wait"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": "op-3", "status": "DONE", "operationType": "delete",
            "error": {"errors": [{"code": "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE", "message": "used by um1"}]},
            "httpErrorStatusCode": 400, "httpErrorMessage": "BAD REQUEST"
        })))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let err = compute.delete_backend_service("b1").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceInUse);
}

#[tokio::test]
async fn zonal_operation_waits_in_its_zone_and_delete_404_is_gone() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(
            "/compute/v1/projects/p1/zones/z1/networkEndpointGroups/neg1/attachNetworkEndpoints",
        ))
        .and(body_partial_json(
            json!({"networkEndpoints": [{"ipAddress": "127.64.0.9", "port": 8080}]}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": "op-4", "status": "PENDING", "operationType": "attachNetworkEndpoints",
            "zone": "https://compute.googleapis.com/compute/v1/projects/p1/zones/z1"
        })))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(
            "/compute/v1/projects/p1/zones/z1/operations/op-4/wait",
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-4")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path(
            "/compute/v1/projects/p1/zones/z1/networkEndpointGroups/gone",
        ))
        .respond_with(ResponseTemplate::new(404).set_body_json(error_body(
            404,
            "NOT_FOUND",
            "notFound",
        )))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let ep = model::NetworkEndpoint::new()
        .set_ip_address("127.64.0.9")
        .set_port(8080);
    compute
        .attach_network_endpoints("z1", "neg1", vec![ep])
        .await
        .unwrap();
    assert!(!compute
        .delete_network_endpoint_group("z1", "gone")
        .await
        .unwrap());
}

#[tokio::test]
async fn list_follows_page_tokens() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/compute/v1/projects/p1/global/firewalls"))
        .and(wiremock::matchers::query_param("pageToken", "t2"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": [{"name": "fw2"}]})))
        .with_priority(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/compute/v1/projects/p1/global/firewalls"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"items": [{"name": "fw1"}], "nextPageToken": "t2"})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let names: Vec<_> = compute
        .list_firewalls("p1")
        .await
        .unwrap()
        .into_iter()
        .filter_map(|f| f.name)
        .collect();
    assert_eq!(names, vec!["fw1".to_string(), "fw2".to_string()]);
}

/// Real GCE returns `healths[]` only when asked (`healthStatus: SHOW`, a body field).
#[tokio::test]
async fn list_network_endpoints_asks_for_health_status() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(
            "/compute/v1/projects/p1/zones/z1/networkEndpointGroups/neg1/listNetworkEndpoints",
        ))
        .and(body_partial_json(json!({"healthStatus": "SHOW"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": [{
            "networkEndpoint": {"ipAddress": "10.0.0.1", "port": 8080, "instance": "i"},
            "healths": [{"healthState": "HEALTHY"}]
        }]})))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let items = compute.list_network_endpoints("z1", "neg1").await.unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].healths.len(), 1);
}

#[tokio::test]
async fn global_addresses_insert_and_delete() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/compute/v1/projects/p1/global/addresses"))
        .and(body_partial_json(
            json!({"name": "a1", "address": "127.200.0.9"}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-a")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path("/compute/v1/projects/p1/global/addresses/a1"))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-d")))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .and(path("/compute/v1/projects/p1/global/addresses/gone"))
        .respond_with(ResponseTemplate::new(404).set_body_json(error_body(
            404,
            "NOT_FOUND",
            "notFound",
        )))
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let body = model::Address::new()
        .set_name("a1")
        .set_address("127.200.0.9");
    compute.insert_global_address(&body).await.unwrap();
    assert!(compute.delete_global_address("a1").await.unwrap());
    assert!(!compute.delete_global_address("gone").await.unwrap());
}

/// A call refused for the rate quota (429, or Compute's 403 naming the quota) is sent again in
/// the write pacer's turn, beyond the 5xx retry limit (3 here), and the pacer slows down; reads
/// keep their own pace.
#[tokio::test]
async fn rate_limited_writes_are_paced_and_retried_past_the_error_retry_limit() {
    let server = MockServer::start().await;
    let quota = "Quota exceeded for quota metric 'Write requests' and limit 'Write requests per minute' of service 'compute.googleapis.com'";
    for code in [429u16, 403] {
        Mock::given(method("POST"))
            .and(path("/compute/v1/projects/p1/global/healthChecks"))
            .respond_with(ResponseTemplate::new(code).set_body_json(json!({"error": {
                "code": code, "message": quota, "status": if code == 429 { "RESOURCE_EXHAUSTED" } else { "PERMISSION_DENIED" },
                "errors": [{"domain": "usageLimits", "reason": "rateLimitExceeded", "message": quota}]}})))
            .up_to_n_times(3)
            .with_priority(u8::try_from(code / 100).unwrap())
            .expect(3)
            .mount(&server)
            .await;
    }
    Mock::given(method("POST"))
        .and(path("/compute/v1/projects/p1/global/healthChecks"))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-q")))
        .with_priority(9)
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    assert_eq!(compute.writes.rate(), None, "unpaced before any refusal");
    let hc = model::HealthCheck::new().set_name("hc1");
    compute
        .insert_health_check(&hc)
        .await
        .expect("six refusals, then sent in its turn");
    assert!(compute.writes.rate().is_some(), "the writes are paced now");
    assert_eq!(compute.reads.rate(), None, "reads are not");
    assert_eq!(
        compute
            .metrics()
            .count("compute.healthChecks.insert", "rateLimitExceeded"),
        6
    );
}

/// Every request names the operator (`User-Agent: gclb-operator/<version>`) so cloud admins can
/// attribute calls in Cloud Audit Logs: one call of every shape (global get, insert with an
/// Operation wait, update, delete, paged list, getHealth; zonal get, insert, delete, list,
/// listNetworkEndpoints, attach, detach). Fails when any request site lacks the header.
#[tokio::test]
async fn every_request_carries_the_operator_user_agent() {
    let server = MockServer::start().await;
    // The insert's Operation is still running: its wait is a request of its own.
    Mock::given(method("POST"))
        .and(path("/compute/v1/projects/p1/global/urlMaps"))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"kind": "compute#operation", "name": "op-ua", "status": "RUNNING"}),
        ))
        .mount(&server)
        .await;
    Mock::given(wiremock::matchers::any())
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-ua")))
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let um = model::UrlMap::new().set_name("um1");
    let neg = model::NetworkEndpointGroup::new().set_name("neg1");
    let ep = vec![model::NetworkEndpoint::new()
        .set_ip_address("127.64.0.1")
        .set_port(80)];
    compute.get_url_map("um1").await.unwrap();
    compute.insert_url_map(&um).await.unwrap();
    compute.update_url_map("um1", &um).await.unwrap();
    compute.delete_url_map("um1").await.unwrap();
    compute.list_url_maps().await.unwrap();
    compute
        .get_backend_service_health("bs1", "zones/z1/networkEndpointGroups/neg1")
        .await
        .unwrap();
    compute
        .get_network_endpoint_group("z1", "neg1")
        .await
        .unwrap();
    compute
        .insert_network_endpoint_group("z1", &neg)
        .await
        .unwrap();
    compute
        .delete_network_endpoint_group("z1", "neg1")
        .await
        .unwrap();
    compute.list_network_endpoint_groups("z1").await.unwrap();
    compute.list_network_endpoints("z1", "neg1").await.unwrap();
    compute
        .attach_network_endpoints("z1", "neg1", ep.clone())
        .await
        .unwrap();
    compute
        .detach_network_endpoints("z1", "neg1", ep)
        .await
        .unwrap();
    let requests = server.received_requests().await.unwrap();
    assert!(
        requests
            .iter()
            .any(|r| r.url.path().ends_with("/operations/op-ua/wait")),
        "the Operation wait was not exercised"
    );
    assert_eq!(requests.len(), 14, "one request per call plus one wait");
    for r in &requests {
        let agent = r.headers.get("user-agent").and_then(|v| v.to_str().ok());
        assert_eq!(
            agent,
            Some(crate::compute::USER_AGENT),
            "{} {} without the operator's User-Agent",
            r.method,
            r.url
        );
    }
    assert!(crate::compute::USER_AGENT.starts_with("gclb-operator/0."));
}

/// A client is built on its collection's first call, and only then: `Compute::new` builds
/// none, and a URL map read builds the URL map client alone.
#[tokio::test]
async fn clients_are_built_on_first_use_only() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/compute/v1/projects/p1/global/urlMaps/um"))
        .respond_with(super::test_support::not_found())
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    assert!(!compute.clients.url_maps.initialized());
    assert!(!compute.clients.backend_services.initialized());
    assert_eq!(compute.get_url_map("um").await.unwrap(), None);
    assert!(compute.clients.url_maps.initialized());
    assert!(!compute.clients.backend_services.initialized());
}

/// Credentials that send `Authorization: Bearer tok-N`, N counting the times they were built:
/// what a token cache built again hands out (a fresh token), without a token server.
#[derive(Debug)]
struct NumberedToken(u64);

impl google_cloud_auth::credentials::CredentialsProvider for NumberedToken {
    async fn headers(
        &self,
        _: http::Extensions,
    ) -> std::result::Result<
        google_cloud_auth::credentials::CacheableResource<http::HeaderMap>,
        google_cloud_auth::errors::CredentialsError,
    > {
        let mut h = http::HeaderMap::new();
        let v = format!("Bearer tok-{}", self.0);
        h.insert(http::header::AUTHORIZATION, v.parse().expect("header"));
        Ok(google_cloud_auth::credentials::CacheableResource::New {
            entity_tag: Default::default(),
            data: h,
        })
    }

    async fn universe_domain(&self) -> Option<String> {
        None
    }
}

/// A [`Compute`] on `server` whose credentials send `tok-1`, then `tok-2` once built again.
async fn compute_with_numbered_tokens(server: &MockServer) -> (Compute, Arc<AtomicU64>) {
    let built = Arc::new(AtomicU64::new(0));
    let b = built.clone();
    let creds = RefreshableCredentials::with_builder(Arc::new(move || {
        let n = b.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(google_cloud_auth::credentials::Credentials::from(
            NumberedToken(n),
        ))
    }))
    .expect("builds");
    let mut config = ComputeConfig::new("p1", Some(server.uri()));
    config.operation_poll_interval = Duration::from_millis(1);
    (
        Compute::with_credentials(config, creds, ComputeMetrics::default()),
        built,
    )
}

fn unauthenticated() -> ResponseTemplate {
    ResponseTemplate::new(401).set_body_json(error_body(401, "UNAUTHENTICATED", "authError"))
}

#[tokio::test]
async fn a_401_builds_the_credentials_again_and_retries_once() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/compute/v1/projects/p1/global/urlMaps/um1"))
        .and(header("authorization", "Bearer tok-1"))
        .respond_with(unauthenticated())
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/compute/v1/projects/p1/global/urlMaps/um1"))
        .and(header("authorization", "Bearer tok-2"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"name": "um1"})))
        .expect(2)
        .mount(&server)
        .await;
    let (compute, built) = compute_with_numbered_tokens(&server).await;
    let um = compute
        .get_url_map("um1")
        .await
        .expect("retried with tok-2");
    assert_eq!(um.and_then(|u| u.name).as_deref(), Some("um1"));
    assert_eq!(built.load(Ordering::SeqCst), 2, "built once more");
    // The 401 is counted under its own label, not with the requests the API found invalid.
    let count = |label| compute.metrics().count("compute.urlMaps.get", label);
    assert_eq!(
        (count("authError"), count("invalid"), count("ok")),
        (1, 0, 1)
    );
    // The next call sends the new token at once: no 401, no second refresh.
    compute.get_url_map("um1").await.expect("tok-2 again");
    assert_eq!(built.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_second_401_is_the_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/compute/v1/projects/p1/global/healthChecks"))
        .respond_with(unauthenticated())
        .expect(2)
        .mount(&server)
        .await;
    let (compute, built) = compute_with_numbered_tokens(&server).await;
    let hc = model::HealthCheck::new().set_name("hc1");
    let e = compute.insert_health_check(&hc).await.unwrap_err();
    assert!(e.is_unauthenticated(), "{e}");
    assert_eq!(
        built.load(Ordering::SeqCst),
        2,
        "one refresh, then the error"
    );
}
