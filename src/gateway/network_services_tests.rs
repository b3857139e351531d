//! The Network Services client against a scripted API (wiremock): a call refused with 401
//! builds the credentials again and is sent once more; a second 401 is the error, as in the
//! Compute seam (issue 43 follow-up).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::network_services::NetworkServicesApi;
use crate::compute::{CredentialsMode, RefreshableCredentials};

const ROUTE: &str = "/networkservices/v1/projects/p1/locations/global/tlsRoutes/r1";

fn unauthenticated() -> ResponseTemplate {
    ResponseTemplate::new(401).set_body_json(json!({"error": {"code": 401,
        "status": "UNAUTHENTICATED", "message": "Request had invalid authentication credentials."}}))
}

/// The client on `server`, with credentials that count how often they were built.
async fn client(server: &MockServer) -> (NetworkServicesApi, Arc<AtomicU32>) {
    let builds = Arc::new(AtomicU32::new(0));
    let b = builds.clone();
    let creds = RefreshableCredentials::with_builder(Arc::new(move || {
        b.fetch_add(1, Ordering::SeqCst);
        CredentialsMode::Anonymous.build()
    }))
    .unwrap();
    let api = NetworkServicesApi::with_credentials("p1", Some(&server.uri()), creds)
        .await
        .unwrap();
    (api, builds)
}

#[tokio::test]
async fn a_401_is_retried_once_with_credentials_built_again() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(ROUTE))
        .respond_with(unauthenticated())
        .up_to_n_times(1)
        .expect(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(ROUTE))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"name": "projects/p1/locations/global/tlsRoutes/r1"})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let (api, builds) = client(&server).await;
    let route = api.get("r1").await.expect("retried with fresh credentials");
    assert_eq!(
        route.map(|r| r.name),
        Some("projects/p1/locations/global/tlsRoutes/r1".to_string())
    );
    assert_eq!(
        builds.load(Ordering::SeqCst),
        2,
        "built again after the 401"
    );
}

#[tokio::test]
async fn a_second_401_is_the_error() {
    let server = MockServer::start().await;
    Mock::given(method("DELETE"))
        .and(path(ROUTE))
        .respond_with(unauthenticated())
        .expect(2)
        .mount(&server)
        .await;
    let (api, builds) = client(&server).await;
    let err = api.delete("r1").await.unwrap_err();
    assert!(err.is_unauthenticated(), "{err}");
    assert_eq!(builds.load(Ordering::SeqCst), 2);
}
