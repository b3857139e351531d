//! The mutating admission webhook that adds the `cloud.google.com/load-balancer-neg-ready`
//! readiness gate to Pods behind Ingress-backed Services.
//!
//! - [`admission`] (pure): AdmissionReview v1 in, AdmissionReview v1 out;
//! - [`tls`]: the HTTPS listener (rustls, certificate and key from PEM files);
//! - [`router`]: `POST /mutate-pods` and `GET /healthz`.
//!
//! The MutatingWebhookConfiguration (`deploy/webhook/`) uses `failurePolicy: Ignore`: when the
//! webhook is down or slow (over `timeoutSeconds: 5`) the API server creates the Pod without the
//! gate, so an outage never blocks Pods, but such Pods are not protected during rollouts (the
//! Deployment may count them Ready before the load balancer sends them traffic). Users who
//! cannot run the webhook add the gate to their Pod templates themselves.
//!
//! Wiring (in `gclb-operator run`):
//! ```ignore
//! let state = webhook::WebhookState::new(Arc::new(lookup.clone()));
//! let tls = webhook::tls::server_config(&cert_path, &key_path)?;
//! let listener = tokio::net::TcpListener::bind(webhook_listen).await?;
//! tokio::spawn(webhook::tls::serve(listener, tls, webhook::router(state)));
//! ```

pub mod admission;
pub mod tls;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use crate::readiness::NegLookup;

/// Path the MutatingWebhookConfiguration's `clientConfig.service.path` points at.
pub const MUTATE_PODS_PATH: &str = "/mutate-pods";

/// Shared state of the webhook handlers.
#[derive(Clone)]
pub struct WebhookState {
    /// Pod -> readiness-gated NEGs; a Pod with any gets the gate.
    pub lookup: Arc<dyn NegLookup>,
    /// How long a request may wait for the lookup's stores to sync (then the Pod is admitted
    /// unchanged). Must stay well under the configuration's `timeoutSeconds: 5`.
    pub sync_wait: Duration,
}

impl WebhookState {
    /// State with a 2-second sync wait.
    pub fn new(lookup: Arc<dyn NegLookup>) -> Self {
        Self {
            lookup,
            sync_wait: Duration::from_secs(2),
        }
    }
}

/// The webhook's routes: `POST /mutate-pods` (AdmissionReview v1, JSON) and `GET /healthz`.
pub fn router(state: WebhookState) -> Router {
    Router::new()
        .route(MUTATE_PODS_PATH, post(mutate_pods))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(state)
}

async fn mutate_pods(State(state): State<WebhookState>, body: Bytes) -> Response {
    if tokio::time::timeout(state.sync_wait, state.lookup.wait_synced())
        .await
        .is_err()
    {
        tracing::warn!("Ingress/Service stores not synced yet; admitting the Pod unchanged");
    }
    match admission::review(&body, state.lookup.as_ref()) {
        Ok((answer, decision)) => {
            tracing::debug!(?decision, "admission review answered");
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                answer.to_string(),
            )
                .into_response()
        }
        Err(err) => {
            tracing::warn!(error = %err, "bad admission request");
            (StatusCode::BAD_REQUEST, err.to_string()).into_response()
        }
    }
}

#[cfg(test)]
mod tests;
