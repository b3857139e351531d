//! A backend service's IAP OAuth client secret is input only: Compute Engine serves its SHA-256
//! (`iap.oauth2ClientSecretSha256`) instead, and sync compares that hash, as GKE does
//! (`Managed::as_served`).

use google_cloud_compute_v1::model;
use serde_json::json;
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::{desired_b1, list_b1, G};
use crate::compute::test_support::{compute_for, done_op};
use crate::sync::{backend_services, Changes};

fn with_secret(secret: &str) -> model::BackendService {
    desired_b1().set_iap(
        model::BackendServiceIAP::new()
            .set_enabled(true)
            .set_oauth_2_client_id("client-1")
            .set_oauth_2_client_secret(secret),
    )
}

/// Listed as the API serves it (the hash, no secret), the same secret needs no update; a new
/// secret is sent in a PUT, recorded as served, and the next sync sends nothing more.
#[tokio::test]
async fn iap_secrets_compare_by_their_sha256() {
    let server = MockServer::start().await;
    list_b1(
        &server,
        json!({"iap": {"enabled": true, "oauth2ClientId": "client-1",
            // SHA-256("abc"): the FIPS 180-2 test vector.
            "oauth2ClientSecretSha256":
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}}),
    )
    .await;
    Mock::given(method("PUT"))
        .and(path(format!("{G}/backendServices/b1")))
        .and(body_partial_json(json!({"fingerprint": "YWJj",
            "iap": {"enabled": true, "oauth2ClientId": "client-1", "oauth2ClientSecret": "new"}})))
        .respond_with(ResponseTemplate::new(200).set_body_json(done_op("op-1")))
        .expect(1)
        .mount(&server)
        .await;
    let compute = compute_for(&server).await;
    let mut changes = Changes::new();
    backend_services::ensure(&compute, &with_secret("abc"), &mut changes)
        .await
        .unwrap();
    assert!(changes.is_empty(), "{changes:?}");
    for expected in [1, 0] {
        let mut changes = Changes::new();
        backend_services::ensure(&compute, &with_secret("new"), &mut changes)
            .await
            .unwrap();
        assert_eq!(changes.len(), expected, "{changes:?}");
    }
}
