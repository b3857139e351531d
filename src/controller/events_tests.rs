//! Events as the API server receives them ([`Context::event`]): a repeated Warning is folded
//! into the first one's series (a PATCH), a Normal Event is posted on its own every time, so the
//! operator keeps no memory of it.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::networking::v1::Ingress;
use serde_json::json;
use wiremock::matchers::{method, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::stores::stores_holding;
use super::{Config, Context, ControllerMetrics};
use crate::compute::test_support::compute_for;
use crate::translate::ClusterSnapshot;

const EVENTS: &str = "^/apis/events.k8s.io/v1/namespaces/default/events";

/// A context whose Kubernetes client is `kube`, which accepts every Event POST and PATCH.
async fn context(kube: &MockServer) -> Arc<Context> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let echo = |req: &wiremock::Request| {
        let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap_or(json!({}));
        ResponseTemplate::new(201).set_body_json(body)
    };
    for verb in ["POST", "PATCH"] {
        Mock::given(method(verb))
            .and(path_regex(EVENTS))
            .respond_with(echo)
            .mount(kube)
            .await;
    }
    let compute = MockServer::start().await;
    let config = Config {
        translate: crate::translate::test_support::config(),
        resync_period: Duration::from_secs(3600),
        workers: 4,
        status_address: None,
        principal: None,
    };
    Arc::new(Context::new(
        kube::Client::try_from(kube::Config::new(kube.uri().parse().unwrap())).unwrap(),
        Arc::new(compute_for(&compute).await),
        stores_holding(&ClusterSnapshot::default()),
        config,
        ControllerMetrics::default(),
    ))
}

fn ingress() -> Ingress {
    serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"}
    }))
    .unwrap()
}

/// The methods of the Event requests `kube` received, in order.
async fn verbs(kube: &MockServer) -> Vec<String> {
    let requests = kube.received_requests().await.unwrap_or_default();
    requests.iter().map(|r| r.method.to_string()).collect()
}

#[tokio::test]
async fn a_repeated_warning_becomes_a_series_and_a_normal_event_is_posted_each_time() {
    let kube = MockServer::start().await;
    let ctx = context(&kube).await;
    let web = ingress();

    ctx.event(&web, true, "Sync", "Error syncing to GCP: quota".into())
        .await;
    ctx.event(&web, true, "Sync", "Error syncing to GCP: quota".into())
        .await;
    assert_eq!(verbs(&kube).await, ["POST", "PATCH"], "a repeated Warning");

    ctx.event(&web, false, "Sync", "UrlMap \"um\" created".into())
        .await;
    ctx.event(&web, false, "Sync", "UrlMap \"um\" created".into())
        .await;
    assert_eq!(
        verbs(&kube).await,
        ["POST", "PATCH", "POST", "POST"],
        "a Normal Event is posted anew, not remembered for a series"
    );
}
