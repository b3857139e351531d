use google_cloud_compute_v1::model;
use serde_json::json;

use super::*;

fn backend_service(value: serde_json::Value) -> model::BackendService {
    serde_json::from_value(value).unwrap()
}

#[test]
fn endpoint_health_from_wire_json() {
    // The shape listNetworkEndpoints returns with healthStatus SHOW (Compute API v1 reference).
    let item: model::NetworkEndpointWithHealthStatus = serde_json::from_value(json!({
        "networkEndpoint": {"ipAddress": "127.64.0.7", "port": 8080, "instance": "node-1"},
        "healths": [
            {"backendService": {"backendService":
                "https://www.googleapis.com/compute/v1/projects/p/global/backendServices/bs-1"},
             "healthState": "HEALTHY"},
            {"healthState": "UNHEALTHY"}
        ]
    }))
    .unwrap();
    let e = endpoint_health(&item);
    assert_eq!(e.ip_address, "127.64.0.7");
    assert_eq!(e.port, Some(8080));
    assert_eq!(
        e.healths,
        vec![
            BackendHealth {
                backend_service: "bs-1".into(),
                health_state: "HEALTHY".into()
            },
            BackendHealth {
                backend_service: String::new(),
                health_state: "UNHEALTHY".into()
            },
        ]
    );
    let bare: model::NetworkEndpointWithHealthStatus =
        serde_json::from_value(json!({"networkEndpoint": {"ipAddress": "127.64.0.8"}})).unwrap();
    let e = endpoint_health(&bare);
    assert!(e.healths.is_empty());
    assert_eq!(e.port, None);
}

#[test]
fn health_checked_by_matches_group_paths_and_requires_a_health_check() {
    let neg_a = NegRef::new("us-central1-a", "neg-a");
    let neg_b = NegRef::new("us-central1-b", "neg-a");
    let neg_c = NegRef::new("us-central1-a", "neg-c");
    let services = vec![
        backend_service(json!({
            "name": "bs-1",
            "healthChecks": ["projects/p/global/healthChecks/hc-1"],
            "backends": [{"group":
                "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/networkEndpointGroups/neg-a"}]
        })),
        backend_service(json!({
            "name": "bs-2",
            "healthChecks": ["projects/p/global/healthChecks/hc-2"],
            "backends": [{"group": "projects/p/zones/us-central1-a/networkEndpointGroups/neg-a"},
                         {"group": "projects/p/zones/us-central1-a/networkEndpointGroups/neg-ab"}]
        })),
        backend_service(json!({
            "name": "bs-no-hc",
            "backends": [{"group": "projects/p/zones/us-central1-a/networkEndpointGroups/neg-c"}]
        })),
    ];
    let users = health_checked_by(&services, &[neg_a.clone(), neg_b.clone(), neg_c.clone()]);
    assert_eq!(users[&neg_a], vec!["bs-1".to_owned(), "bs-2".to_owned()]);
    // Same name in another zone is another NEG.
    assert!(users[&neg_b].is_empty());
    // A backend service without a health check does not health-check the NEG.
    assert!(users[&neg_c].is_empty());
}

#[test]
fn neg_ref_displays_its_name() {
    assert_eq!(NegRef::new("z", "k8s1-x").to_string(), "k8s1-x");
}

mod over_http {
    use serde_json::json;
    use wiremock::matchers::{body_partial_json, method, path, query_param};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::super::*;

    const NEGS: &str = "/compute/v1/projects/p1/zones/us-central1-a/networkEndpointGroups";

    #[tokio::test]
    async fn list_network_endpoints_asks_for_health_and_follows_pages() {
        let server = MockServer::start().await;
        let url = format!("{NEGS}/neg-a/listNetworkEndpoints");
        Mock::given(method("POST"))
            .and(path(url.as_str()))
            .and(query_param("pageToken", "p2"))
            .and(body_partial_json(json!({"healthStatus": "SHOW"})))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "items": [{"networkEndpoint": {"ipAddress": "127.64.0.2", "port": 8080}}]
            })))
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path(url.as_str()))
            .and(body_partial_json(json!({"healthStatus": "SHOW"})))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "items": [{"networkEndpoint": {"ipAddress": "127.64.0.1", "port": 8080},
                           "healths": [{"backendService": {"backendService":
                               "projects/p1/global/backendServices/bs-a"}, "healthState": "HEALTHY"}]}],
                "nextPageToken": "p2"
            })))
            .mount(&server)
            .await;
        let health = ComputeNegHealth::connect(
            "p1",
            Some(&server.uri()),
            gclb_sync::compute::CredentialsMode::Anonymous,
        )
        .await
        .unwrap();
        let neg = NegRef::new("us-central1-a", "neg-a");
        let endpoints = health.list_network_endpoints(&neg).await.unwrap().unwrap();
        let ips: Vec<&str> = endpoints.iter().map(|e| e.ip_address.as_str()).collect();
        assert_eq!(ips, vec!["127.64.0.1", "127.64.0.2"]);
        assert_eq!(endpoints[0].healths[0].backend_service, "bs-a");
        assert_eq!(endpoints[0].healths[0].health_state, "HEALTHY");
    }

    /// The backend service list is read to its last page.
    #[tokio::test]
    async fn backend_services_using_follows_every_page() {
        let server = MockServer::start().await;
        let bs = |name: &str| {
            json!({"name": name, "healthChecks": ["projects/p1/global/healthChecks/hc"],
                   "backends": [{"group": "projects/p1/zones/us-central1-a/networkEndpointGroups/neg-a"}]})
        };
        Mock::given(method("GET"))
            .and(path("/compute/v1/projects/p1/global/backendServices"))
            .and(query_param("pageToken", "p2"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": [bs("bs-b")]})))
            .expect(1)
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path("/compute/v1/projects/p1/global/backendServices"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"items": [bs("bs-a")], "nextPageToken": "p2"})),
            )
            .mount(&server)
            .await;
        let health = ComputeNegHealth::connect(
            "p1",
            Some(&server.uri()),
            gclb_sync::compute::CredentialsMode::Anonymous,
        )
        .await
        .unwrap();
        let neg = NegRef::new("us-central1-a", "neg-a");
        let users = health
            .backend_services_using(std::slice::from_ref(&neg))
            .await
            .unwrap();
        assert_eq!(users[&neg], vec!["bs-a".to_owned(), "bs-b".to_owned()]);
    }

    /// An empty `nextPageToken` (as a real server may send) ends a listing like an absent one:
    /// one request each, never a loop asking again for the first page.
    #[tokio::test]
    async fn an_empty_next_page_token_ends_each_listing() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(format!("{NEGS}/neg-a/listNetworkEndpoints").as_str()))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "items": [{"networkEndpoint": {"ipAddress": "127.64.0.1", "port": 8080}}],
                "nextPageToken": ""
            })))
            .expect(1)
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path("/compute/v1/projects/p1/global/backendServices"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "items": [{"name": "bs-a",
                    "healthChecks": ["projects/p1/global/healthChecks/hc"],
                    "backends": [{"group": "projects/p1/zones/us-central1-a/networkEndpointGroups/neg-a"}]}],
                "nextPageToken": ""
            })))
            .expect(1)
            .mount(&server)
            .await;
        let health = ComputeNegHealth::connect(
            "p1",
            Some(&server.uri()),
            gclb_sync::compute::CredentialsMode::Anonymous,
        )
        .await
        .unwrap();
        let neg = NegRef::new("us-central1-a", "neg-a");
        let deadline = std::time::Duration::from_secs(30);
        let endpoints = tokio::time::timeout(deadline, health.list_network_endpoints(&neg))
            .await
            .expect("listNetworkEndpoints ended")
            .unwrap()
            .unwrap();
        assert_eq!(endpoints.len(), 1);
        let users = tokio::time::timeout(
            deadline,
            health.backend_services_using(std::slice::from_ref(&neg)),
        )
        .await
        .expect("backendServices.list ended")
        .unwrap();
        assert_eq!(users[&neg], vec!["bs-a".to_owned()]);
    }

    #[tokio::test]
    async fn missing_neg_is_none_and_errors_name_the_method() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(format!("{NEGS}/gone/listNetworkEndpoints").as_str()))
            .respond_with(ResponseTemplate::new(404).set_body_json(json!({"error": {
                "code": 404, "message": "The resource 'gone' was not found",
                "errors": [{"domain": "global", "reason": "notFound", "message": "not found"}]}})))
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path(format!("{NEGS}/broken/listNetworkEndpoints").as_str()))
            .respond_with(ResponseTemplate::new(403).set_body_json(json!({"error": {
                "code": 403, "message": "Required 'compute.networkEndpointGroups.listNetworkEndpoints' permission",
                "errors": [{"domain": "global", "reason": "forbidden", "message": "forbidden"}]}})))
            .mount(&server)
            .await;
        let health = ComputeNegHealth::connect(
            "p1",
            Some(&server.uri()),
            gclb_sync::compute::CredentialsMode::Anonymous,
        )
        .await
        .unwrap();
        let gone = NegRef::new("us-central1-a", "gone");
        assert_eq!(health.list_network_endpoints(&gone).await.unwrap(), None);
        let broken = NegRef::new("us-central1-a", "broken");
        let err = health.list_network_endpoints(&broken).await.unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("compute.networkEndpointGroups.listNetworkEndpoints"),
            "{text}"
        );
        assert!(text.contains("us-central1-a/broken"), "{text}");
        assert!(text.contains("403"), "{text}");
    }

    #[tokio::test]
    async fn backend_services_using_reads_the_backend_service_list_once() {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/compute/v1/projects/p1/global/backendServices"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": [
                {"name": "bs-a", "healthChecks": ["projects/p1/global/healthChecks/hc"],
                 "backends": [{"group": "projects/p1/zones/us-central1-a/networkEndpointGroups/neg-a"}]}
            ]})))
            .expect(1)
            .mount(&server)
            .await;
        let health = ComputeNegHealth::connect(
            "p1",
            Some(&server.uri()),
            gclb_sync::compute::CredentialsMode::Anonymous,
        )
        .await
        .unwrap();
        let a = NegRef::new("us-central1-a", "neg-a");
        let b = NegRef::new("us-central1-a", "neg-b");
        let users = health
            .backend_services_using(&[a.clone(), b.clone()])
            .await
            .unwrap();
        assert_eq!(users[&a], vec!["bs-a".to_owned()]);
        assert!(users[&b].is_empty());
    }

    /// Both calls of the readiness poller name the operator in `User-Agent`.
    #[tokio::test]
    async fn readiness_polls_carry_the_operator_user_agent() {
        let server = MockServer::start().await;
        Mock::given(wiremock::matchers::any())
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"items": []})))
            .mount(&server)
            .await;
        let health = ComputeNegHealth::connect(
            "p1",
            Some(&server.uri()),
            gclb_sync::compute::CredentialsMode::Anonymous,
        )
        .await
        .unwrap();
        let neg = NegRef::new("us-central1-a", "neg-a");
        health.list_network_endpoints(&neg).await.unwrap();
        health.backend_services_using(&[neg]).await.unwrap();
        let requests = server.received_requests().await.unwrap();
        assert_eq!(requests.len(), 2);
        for r in &requests {
            assert_eq!(
                r.headers.get("user-agent").and_then(|v| v.to_str().ok()),
                Some(crate::USER_AGENT),
                "{} {}",
                r.method,
                r.url
            );
        }
    }
}
