//! What each sync does with the Compute API's error answers: an insert that loses a race
//! (409), a write to something deleted behind the operator's back (404), a refused write (403),
//! and a 404 that names a missing SSL policy. Each answer is scripted once; the test asserts
//! what the user gets (the resource in place, or the error naming the fix).

use google_cloud_compute_v1::model;
use serde_json::json;
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::{count, desired_b1, list, list_b1, other_lists_empty, G};
use crate::compute::test_support::{compute_for, done_op};
use crate::sync::{
    addresses, backend_services, firewalls, network_endpoint_groups, security_policies,
    target_http_proxies, target_https_proxies, url_maps, Changes, SyncError,
};
use crate::translate::DesiredNeg;

mod backends;
mod permissions;

/// A Compute error answer: `code`, its `status` and a message.
fn answer(code: u16, status: &str, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(code)
        .set_body_json(json!({"error": {"code": code, "message": message, "status": status}}))
}

/// `verb path` answers `response` exactly once, ahead of every other mock.
async fn once(server: &MockServer, verb: &str, at: &str, response: ResponseTemplate) {
    Mock::given(method(verb))
        .and(path(at))
        .respond_with(response)
        .up_to_n_times(1)
        .expect(1)
        .with_priority(1)
        .mount(server)
        .await;
}

fn events(changes: &Changes) -> Vec<String> {
    changes.iter().map(|c| c.to_string()).collect()
}

/// A fresh managed address whose insert loses a race (409: another worker reserved it first)
/// is not an error: the IP the winner got is read back and used, and no creation is reported.
#[tokio::test]
async fn a_fresh_address_that_loses_the_insert_race_uses_the_winners_ip() {
    let server = MockServer::start().await;
    let addresses_path = format!("{G}/addresses");
    once(
        &server,
        "POST",
        &addresses_path,
        answer(409, "ALREADY_EXISTS", "The resource 'fr1' already exists"),
    )
    .await;
    Mock::given(method("GET"))
        .and(path(format!("{addresses_path}/fr1")))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"name": "fr1", "address": "127.130.0.8"})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    let ip = addresses::ensure_managed(&compute, "fr1", None, &mut changes)
        .await
        .unwrap();
    assert_eq!(ip, "127.130.0.8");
    assert!(changes.is_empty(), "the winner created it: {changes:?}");
}

/// An HTTPS proxy naming an SSL policy that does not exist (the insert answers 404 naming the
/// policy) fails with [`SyncError::SslPolicyNotFound`], which the controller's Event turns into
/// "create it or fix spec.sslPolicy"; a 404 naming something else stays the Compute error.
#[tokio::test]
async fn a_missing_ssl_policy_is_named_as_such_and_other_404s_are_not() {
    let policy = "projects/p1/global/sslPolicies/strict";
    let proxy = model::TargetHttpsProxy::new()
        .set_name("ts1")
        .set_url_map("projects/p1/global/urlMaps/um1")
        .set_ssl_certificates(["projects/p1/global/sslCertificates/c1"])
        .set_ssl_policy(policy);
    for (message, policy_named) in [
        (format!("The resource '{policy}' was not found"), true),
        (
            "The resource 'projects/p1/global/urlMaps/um1' was not found".to_string(),
            false,
        ),
    ] {
        let server = MockServer::start().await;
        other_lists_empty(&server).await;
        once(
            &server,
            "POST",
            &format!("{G}/targetHttpsProxies"),
            answer(404, "NOT_FOUND", &message),
        )
        .await;
        let compute = compute_for(&server).await;
        let mut changes = Changes::new();
        let err = target_https_proxies::ensure(&compute, &proxy, &mut changes)
            .await
            .unwrap_err();
        match err {
            SyncError::SslPolicyNotFound {
                name, policy: p, ..
            } if policy_named => {
                assert_eq!((name.as_str(), p.as_str()), ("ts1", policy));
            }
            SyncError::Compute { .. } if !policy_named => {}
            other => panic!("{message}: {other:?}"),
        }
        assert!(changes.is_empty(), "{changes:?}");
    }
}

/// A target HTTP proxy deleted behind the operator's back (its `setUrlMap` answers 404) is
/// inserted again, pointing at the desired URL map.
#[tokio::test]
async fn a_proxy_gone_when_its_url_map_is_set_is_inserted_again() {
    let server = MockServer::start().await;
    let proxies = format!("{G}/targetHttpProxies");
    list(
        &server,
        &proxies,
        json!([{"name": "tp1", "urlMap": "projects/p1/global/urlMaps/old"}]),
        Some(1),
    )
    .await;
    once(
        &server,
        "POST",
        // setUrlMap has no `global/` in its path (Compute API reference).
        "/compute/v1/projects/p1/targetHttpProxies/tp1/setUrlMap",
        answer(404, "NOT_FOUND", "The resource 'tp1' was not found"),
    )
    .await;
    Mock::given(method("POST"))
        .and(path(proxies.as_str()))
        .and(body_partial_json(
            json!({"name": "tp1", "urlMap": "projects/p1/global/urlMaps/um1"}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op")))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let desired = model::TargetHttpProxy::new()
        .set_name("tp1")
        .set_url_map("projects/p1/global/urlMaps/um1");
    let mut changes = Changes::new();
    target_http_proxies::ensure(&compute, &desired, &mut changes)
        .await
        .unwrap();
    assert_eq!(events(&changes), ["TargetProxy \"tp1\" created"]);
}

/// A URL map deleted behind the operator's back (its update answers 404) is inserted again
/// (`sync::ensure_observed`).
#[tokio::test]
async fn a_url_map_gone_when_it_is_updated_is_inserted_again() {
    let server = MockServer::start().await;
    let maps = format!("{G}/urlMaps");
    list(
        &server,
        &maps,
        json!([{"name": "um1", "fingerprint": "YWJj",
            "defaultService": "projects/p1/global/backendServices/old"}]),
        Some(1),
    )
    .await;
    once(
        &server,
        "PUT",
        &format!("{maps}/um1"),
        answer(404, "NOT_FOUND", "The resource 'um1' was not found"),
    )
    .await;
    Mock::given(method("POST"))
        .and(path(maps.as_str()))
        .and(body_partial_json(
            json!({"name": "um1", "defaultService": "projects/p1/global/backendServices/b1"}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op")))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let desired = model::UrlMap::new()
        .set_name("um1")
        .set_default_service("projects/p1/global/backendServices/b1");
    let mut changes = Changes::new();
    url_maps::ensure(&compute, &desired, &mut changes)
        .await
        .unwrap();
    assert_eq!(events(&changes), ["UrlMap \"um1\" created"]);
}

/// A URL map write the API refuses for the request itself (400 `invalid`: neither a race nor a
/// stale fingerprint nor a resource gone) fails the sync at once with that Compute error: the
/// insert or update is sent once, nothing is read back and nothing else is written. Only 409
/// (`alreadyExists`), 412 (`conditionNotMet`, a stale fingerprint) and 404 on update are
/// answers a refetch can fix (Compute API reference, `urlMaps.insert` / `urlMaps.update`:
/// the update carries the fingerprint the last get returned; `sync::ensure_observed`).
#[tokio::test]
async fn a_url_map_write_refused_as_invalid_fails_once_without_refetch_or_other_write() {
    let maps = format!("{G}/urlMaps");
    let observed = json!([{"name": "um1", "fingerprint": "YWJj",
        "defaultService": "projects/p1/global/backendServices/old"}]);
    for (listed, verb) in [(json!([]), "POST"), (observed, "PUT")] {
        let server = MockServer::start().await;
        list(&server, &maps, listed, Some(1)).await;
        Mock::given(method(verb))
            .respond_with(answer(
                400,
                "INVALID_ARGUMENT",
                "Invalid value for field 'resource'",
            ))
            .mount(&server)
            .await;
        let compute = compute_for(&server).await;
        let mut changes = Changes::new();
        let err = url_maps::ensure(&compute, &super::desired_url_map(), &mut changes)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, SyncError::Compute { name, .. } if name == "um1"),
            "{verb}: {err:?}"
        );
        let calls = (
            count(&server, "POST", "/urlMaps$").await,
            count(&server, "PUT", "/urlMaps/um1$").await,
            count(&server, "GET", "/urlMaps/um1$").await,
        );
        let expected = if verb == "POST" { (1, 0, 0) } else { (0, 1, 0) };
        assert_eq!(calls, expected, "{verb}: (inserts, updates, gets)");
        assert!(changes.is_empty(), "{changes:?}");
    }
}

/// A regional URL map (read with a get each sync, `sync::ensure`) whose update is answered 412
/// (`conditionNotMet`: someone wrote it since the get, so the fingerprint is stale) is read
/// again and updated with the new fingerprint (Compute API reference, `regionUrlMaps.update`:
/// the fingerprint "must be provided ... otherwise the request will fail with error 412
/// conditionNotMet"; get the resource for the latest one).
#[tokio::test]
async fn a_regional_url_map_update_answered_412_is_retried_with_the_refetched_fingerprint() {
    let server = MockServer::start().await;
    let map = "/compute/v1/projects/p1/regions/r1/urlMaps/um1";
    for (fingerprint, priority) in [("YWJj", 1), ("bmV3", 2)] {
        Mock::given(method("GET"))
            .and(path(map))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "name": "um1", "fingerprint": fingerprint,
                "defaultService": "projects/p1/regions/r1/backendServices/old"
            })))
            .up_to_n_times(1)
            .with_priority(priority)
            .expect(1)
            .mount(&server)
            .await;
    }
    Mock::given(method("PUT"))
        .and(path(map))
        .and(body_partial_json(json!({"fingerprint": "YWJj"})))
        .respond_with(answer(412, "FAILED_PRECONDITION", "fingerprint mismatch"))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("PUT"))
        .and(path(map))
        .and(body_partial_json(json!({"fingerprint": "bmV3",
            "defaultService": "projects/p1/regions/r1/backendServices/b1"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-r")))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let desired = model::UrlMap::new()
        .set_name("um1")
        .set_default_service("projects/p1/regions/r1/backendServices/b1");
    let mut changes = Changes::new();
    url_maps::ensure_regional(&compute, "r1", &desired, &mut changes)
        .await
        .unwrap();
    assert_eq!(events(&changes), ["UrlMap \"um1\" updated"]);
}

/// Promoting the rules' IP (`globalAddresses.insert` with `address` set, the Compute API
/// reference's way to keep an ephemeral IP) answered 409 means another worker reserved the
/// address first: its IP is read back and used, nothing else is inserted and no creation is
/// reported.
#[tokio::test]
async fn a_promotion_that_loses_the_insert_race_uses_the_winners_ip() {
    let server = MockServer::start().await;
    let addresses_path = format!("{G}/addresses");
    Mock::given(method("POST"))
        .and(path(addresses_path.as_str()))
        .and(body_partial_json(
            json!({"name": "fr1", "address": "127.130.0.5"}),
        ))
        .respond_with(answer(
            409,
            "ALREADY_EXISTS",
            "The resource 'fr1' already exists",
        ))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{addresses_path}/fr1")))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"name": "fr1", "address": "127.130.0.5"})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    let ip = addresses::ensure_managed(&compute, "fr1", Some("127.130.0.5"), &mut changes)
        .await
        .unwrap();
    assert_eq!(ip, "127.130.0.5");
    assert_eq!(count(&server, "POST", "/addresses$").await, 1);
    assert!(changes.is_empty(), "the winner created it: {changes:?}");
}

/// A managed address insert refused for lack of permission (403 `forbidden`, neither a race
/// nor an IP held by another address) fails with that Compute error, whether it promoted the
/// rules' IP or reserved a fresh one: nothing is read back, no fresh address is tried after a
/// refused promotion, and no creation is reported.
#[tokio::test]
async fn a_forbidden_address_insert_fails_without_reading_back_or_reserving_another() {
    for current_ip in [Some("127.130.0.5"), None] {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(format!("{G}/addresses")))
            .respond_with(answer(
                403,
                "PERMISSION_DENIED",
                "Required 'compute.globalAddresses.create' permission for 'projects/p1'",
            ))
            .mount(&server)
            .await;
        let compute = compute_for(&server).await;
        let mut changes = Changes::new();
        let err = addresses::ensure_managed(&compute, "fr1", current_ip, &mut changes)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, SyncError::Compute { name, .. } if name == "fr1"),
            "{current_ip:?}: {err:?}"
        );
        let calls = (
            count(&server, "POST", "/addresses$").await,
            count(&server, "GET", "/addresses/fr1$").await,
        );
        assert_eq!(calls, (1, 0), "{current_ip:?}: (inserts, gets)");
        assert!(changes.is_empty(), "{changes:?}");
    }
}

/// A certificate is inserted when absent; an insert that loses a race (409) is the certificate
/// existing; any other refusal fails the sync.
#[tokio::test]
async fn a_certificate_insert_creates_takes_a_lost_race_as_existing_and_fails_otherwise() {
    let server = MockServer::start().await;
    other_lists_empty(&server).await;
    let certs = format!("{G}/sslCertificates");
    let insert = |name: &str, response: ResponseTemplate| {
        Mock::given(method("POST"))
            .and(path(certs.as_str()))
            .and(body_partial_json(json!({ "name": name })))
            .respond_with(response)
            .expect(1)
    };
    insert(
        "new",
        ResponseTemplate::new(200).set_body_json(done_op("op")),
    )
    .mount(&server)
    .await;
    insert(
        "raced",
        answer(409, "ALREADY_EXISTS", "The resource 'raced' already exists"),
    )
    .mount(&server)
    .await;
    insert(
        "bad",
        answer(
            400,
            "INVALID_ARGUMENT",
            "The SSL certificate could not be parsed.",
        ),
    )
    .mount(&server)
    .await;
    let compute = compute_for(&server).await;
    let cert = |name: &str| model::SslCertificate::new().set_name(name);
    let mut changes = Changes::new();
    crate::sync::ssl_certificates::ensure(&compute, &cert("new"), &mut changes)
        .await
        .unwrap();
    crate::sync::ssl_certificates::ensure(&compute, &cert("raced"), &mut changes)
        .await
        .unwrap();
    let err = crate::sync::ssl_certificates::ensure(&compute, &cert("bad"), &mut changes)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("could not be parsed"), "{err}");
    assert_eq!(events(&changes), ["SslCertificate \"new\" created"]);
}

/// A target proxy insert that loses a race (409) reads the winner back and points it at the
/// desired URL map; a `setUrlMap` refused for another reason than a vanished proxy (here 400)
/// fails the sync and inserts nothing.
#[tokio::test]
async fn a_proxy_insert_race_reads_the_winner_and_other_set_url_map_errors_fail() {
    let server = MockServer::start().await;
    let proxies = format!("{G}/targetHttpProxies");
    list(
        &server,
        &proxies,
        json!([{"name": "tp2", "urlMap": "projects/p1/global/urlMaps/old"}]),
        Some(1),
    )
    .await;
    once(
        &server,
        "POST",
        &proxies,
        answer(409, "ALREADY_EXISTS", "The resource 'tp1' already exists"),
    )
    .await;
    Mock::given(method("POST"))
        .and(path(proxies.as_str()))
        .and(body_partial_json(json!({"name": "tp3"})))
        .respond_with(answer(
            400,
            "INVALID_ARGUMENT",
            "Invalid value for field 'resource.name'",
        ))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{proxies}/tp1")))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(
                json!({"name": "tp1", "urlMap": "projects/p1/global/urlMaps/other"}),
            ),
        )
        .expect(1)
        .mount(&server)
        .await;
    once(
        &server,
        "POST",
        "/compute/v1/projects/p1/targetHttpProxies/tp1/setUrlMap",
        ResponseTemplate::new(200).set_body_json(done_op("op-s")),
    )
    .await;
    once(
        &server,
        "POST",
        "/compute/v1/projects/p1/targetHttpProxies/tp2/setUrlMap",
        answer(
            400,
            "INVALID_ARGUMENT",
            "Invalid value for field 'resource.urlMap'",
        ),
    )
    .await;
    let compute = compute_for(&server).await;
    let proxy = |name: &str| {
        model::TargetHttpProxy::new()
            .set_name(name)
            .set_url_map("projects/p1/global/urlMaps/um1")
    };
    let mut changes = Changes::new();
    target_http_proxies::ensure(&compute, &proxy("tp1"), &mut changes)
        .await
        .unwrap();
    assert_eq!(events(&changes), ["TargetProxy \"tp1\" updated"]);
    let err = target_http_proxies::ensure(&compute, &proxy("tp2"), &mut changes)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("resource.urlMap"), "{err}");
    // An insert refused for another reason is that error, not a race to read back.
    let err = target_http_proxies::ensure(&compute, &proxy("tp3"), &mut changes)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Invalid value for field 'resource.name'"),
        "{err}"
    );
}

/// The HTTPS proxy's insert race: the winner is read back and brought in line.
#[tokio::test]
async fn an_https_proxy_insert_race_reads_the_winner_back() {
    let server = MockServer::start().await;
    other_lists_empty(&server).await;
    let proxies = format!("{G}/targetHttpsProxies");
    once(
        &server,
        "POST",
        &proxies,
        answer(409, "ALREADY_EXISTS", "The resource 'ts1' already exists"),
    )
    .await;
    Mock::given(method("GET"))
        .and(path(format!("{proxies}/ts1")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "name": "ts1", "urlMap": "projects/p1/global/urlMaps/um1",
            "sslCertificates": ["projects/p1/global/sslCertificates/old"]})))
        .expect(1)
        .mount(&server)
        .await;
    once(
        &server,
        "POST",
        "/compute/v1/projects/p1/targetHttpsProxies/ts1/setSslCertificates",
        ResponseTemplate::new(200).set_body_json(done_op("op-c")),
    )
    .await;
    let compute = compute_for(&server).await;
    let desired = model::TargetHttpsProxy::new()
        .set_name("ts1")
        .set_url_map("projects/p1/global/urlMaps/um1")
        .set_ssl_certificates(["projects/p1/global/sslCertificates/new"]);
    let mut changes = Changes::new();
    target_https_proxies::ensure(&compute, &desired, &mut changes)
        .await
        .unwrap();
    assert_eq!(events(&changes), ["TargetProxy \"ts1\" updated"]);
}
