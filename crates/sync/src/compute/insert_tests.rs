//! What the state cache knows of an insert whose Operation wait fails (issue 43 follow-up):
//! every collection the cache holds records the resource as soon as the API accepts its
//! insert, so a refused `compute.globalOperations.get` (or `zoneOperations.get`) cannot make
//! the operator forget what it created.

use futures::future::BoxFuture;
use google_cloud_compute_v1::model;
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::observed::Listed;
use super::test_support::compute_for;
use super::*;

const G: &str = "/compute/v1/projects/p1/global";

/// The Operation of an accepted insert, still RUNNING (the client must wait on it).
fn running(zone: Option<&str>) -> Value {
    let mut op = json!({"kind": "compute#operation", "name": "op-1", "status": "RUNNING",
        "operationType": "insert"});
    if let Some(z) = zone {
        op["zone"] = json!(format!("projects/p1/zones/{z}"));
    }
    op
}

/// IAM's refusal of the Operation wait (Compute API, "Authorization").
fn refused(permission: &str) -> ResponseTemplate {
    ResponseTemplate::new(403).set_body_json(json!({"error": {"code": 403, "status":
        "PERMISSION_DENIED", "message": format!("Required '{permission}' permission for 'op-1'")}}))
}

/// The scripted API: `collection` lists empty, accepts the insert with a RUNNING Operation,
/// and answers the wait on it (at `operations`) with `wait`.
async fn scripted(
    collection: &str,
    operations: &str,
    zone: Option<&str>,
    wait: ResponseTemplate,
) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(collection))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": []})))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(collection))
        .respond_with(ResponseTemplate::new(200).set_body_json(running(zone)))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("{operations}/op-1/wait")))
        .respond_with(wait)
        .expect(1)
        .mount(&server)
        .await;
    server
}

type Insert = for<'a> fn(&'a Compute) -> BoxFuture<'a, Result<()>>;

/// Inserts `name` into the global `collection` with `insert` while the wait is refused: the
/// refusal is the error, the resource is known (as the operator's), and the collection is
/// listed again at its next use.
async fn refused_wait_records<T: Listed>(collection: &str, insert: Insert) {
    let server = scripted(
        &format!("{G}/{collection}"),
        &format!("{G}/operations"),
        None,
        refused("compute.globalOperations.get"),
    )
    .await;
    let compute = compute_for(&server).await;
    assert!(compute.observed::<T>("r1").await.unwrap().is_none());
    let err = insert(&compute).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Forbidden, "{collection}: {err}");
    let cache = T::cache(compute.state());
    assert!(
        cache.get("r1").is_some(),
        "{collection}: the insert is recorded"
    );
    assert!(
        !cache.is_fresh(compute.state().max_age),
        "{collection}: listed again at its next use"
    );
}

#[tokio::test]
async fn every_cached_collection_records_an_insert_whose_wait_is_refused() {
    refused_wait_records::<model::HealthCheck>("healthChecks", |c| {
        Box::pin(async move {
            c.insert_health_check(&model::HealthCheck::new().set_name("r1"))
                .await
        })
    })
    .await;
    refused_wait_records::<model::BackendService>("backendServices", |c| {
        Box::pin(async move {
            c.insert_backend_service(&model::BackendService::new().set_name("r1"))
                .await
        })
    })
    .await;
    refused_wait_records::<model::UrlMap>("urlMaps", |c| {
        Box::pin(async move { c.insert_url_map(&model::UrlMap::new().set_name("r1")).await })
    })
    .await;
    refused_wait_records::<model::TargetHttpProxy>("targetHttpProxies", |c| {
        Box::pin(async move {
            c.insert_target_http_proxy(&model::TargetHttpProxy::new().set_name("r1"))
                .await
        })
    })
    .await;
    refused_wait_records::<model::TargetHttpsProxy>("targetHttpsProxies", |c| {
        Box::pin(async move {
            c.insert_target_https_proxy(&model::TargetHttpsProxy::new().set_name("r1"))
                .await
        })
    })
    .await;
    refused_wait_records::<model::SslCertificate>("sslCertificates", |c| {
        Box::pin(async move {
            c.insert_ssl_certificate(&model::SslCertificate::new().set_name("r1"))
                .await
        })
    })
    .await;
    refused_wait_records::<model::ForwardingRule>("forwardingRules", |c| {
        Box::pin(async move {
            c.insert_forwarding_rule(&model::ForwardingRule::new().set_name("r1"))
                .await
        })
    })
    .await;
    refused_wait_records::<model::Address>("addresses", |c| {
        Box::pin(async move {
            c.insert_global_address(&model::Address::new().set_name("r1"))
                .await
        })
    })
    .await;
}

/// The zonal NEGs: the same, with `zoneOperations.wait` refused.
#[tokio::test]
async fn a_neg_whose_zonal_wait_is_refused_is_recorded() {
    let zone = "/compute/v1/projects/p1/zones/z1";
    let server = scripted(
        &format!("{zone}/networkEndpointGroups"),
        &format!("{zone}/operations"),
        Some("z1"),
        refused("compute.zoneOperations.get"),
    )
    .await;
    let compute = compute_for(&server).await;
    assert!(compute.observed_neg("z1", "n1").await.unwrap().is_none());
    let neg = model::NetworkEndpointGroup::new().set_name("n1");
    let err = compute
        .insert_network_endpoint_group("z1", &neg)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Forbidden, "{err}");
    let cache = compute.state().negs_in("z1");
    assert!(cache.get("n1").is_some(), "the insert is recorded");
    assert!(!cache.is_fresh(compute.state().max_age), "listed again");
}

/// An Operation DONE with an error: nothing was created, and the cache says so (a recorded
/// resource would stop the next sync from inserting it again).
#[tokio::test]
async fn an_insert_whose_operation_fails_is_not_recorded() {
    let done_with_error = ResponseTemplate::new(200).set_body_json(json!({
        "kind": "compute#operation", "name": "op-1", "status": "DONE", "operationType": "insert",
        "error": {"errors": [{"code": "INVALID_ARGUMENT", "message": "scripted invalid"}]}}));
    let server = scripted(
        &format!("{G}/healthChecks"),
        &format!("{G}/operations"),
        None,
        done_with_error,
    )
    .await;
    let compute = compute_for(&server).await;
    assert!(compute
        .observed::<model::HealthCheck>("r1")
        .await
        .unwrap()
        .is_none());
    let hc = model::HealthCheck::new().set_name("r1");
    compute.insert_health_check(&hc).await.unwrap_err();
    let cache = model::HealthCheck::cache(compute.state());
    assert!(cache.get("r1").is_none(), "not created, not recorded");
    assert!(cache.is_fresh(compute.state().max_age));
}
