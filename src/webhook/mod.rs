//! The mutating admission webhook that adds the `cloud.google.com/load-balancer-neg-ready`
//! readiness gate to Pods behind Ingress-backed Services.
//!
//! - [`admission`] (pure): AdmissionReview v1 in, AdmissionReview v1 out;
//! - [`tls`]: the HTTPS listener (rustls, certificate and key from PEM files);
//! - [`router`]: `POST /mutate-pods` and `GET /healthz`.
//!
//! High availability: the decision is read-only, so every replica serves it ([`start`]), the
//! leader and the standbys alike, each from its own watches of Ingresses, Services and
//! IngressClasses (no leadership, no shared state). A replica reports ready (`/readyz`) only
//! once its webhook serves from synced caches, so the webhook Service sends reviews only to
//! replicas that answer them; deploy/ runs two replicas and a PodDisruptionBudget, so a
//! replica's failure or a node drain leaves one serving, and a leader failover does not pause
//! admission.
//!
//! The MutatingWebhookConfiguration (`deploy/webhook/`) uses `failurePolicy: Ignore`: when no
//! replica answers within `timeoutSeconds: 5` the API server creates the Pod without the gate,
//! so an operator outage never blocks Pod creation (or the operator's own recovery), but such
//! Pods are not protected during rollouts. `Fail` would block every Pod creation in the
//! selected namespaces while no replica serves (docs/install.md weighs the two). Users who
//! cannot run the webhook add the gate to their Pod templates themselves.
//!
//! Wiring (in `gclb-operator run`, before leader election):
//! ```ignore
//! let serving = webhook::start(client, translate_config, listen, &cert, &key).await?;
//! // serving.addr, serving.is_ready()
//! ```

pub mod admission;
pub mod tls;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use crate::readiness::{NegLookup, StoreLookup};
use crate::translate::TranslateConfig;

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

/// Errors starting the webhook.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The certificate or key could not be loaded.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// The listen address could not be bound.
    #[error("cannot listen on --webhook-listen {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// A webhook that [`start`] set serving.
#[derive(Clone, Debug)]
pub struct Serving {
    /// The bound address (the port is known even for `:0`).
    pub addr: SocketAddr,
    /// The certificate file (reloaded when it changes).
    pub cert: PathBuf,
    synced: Arc<AtomicBool>,
}

impl Serving {
    /// Whether the webhook answers from synced caches (its watches have listed once).
    pub fn is_ready(&self) -> bool {
        self.synced.load(Ordering::Relaxed)
    }
}

/// Serves the webhook on `listen` (HTTPS with the PEM `cert` and `key`) from this process's
/// own watches of Ingresses, Services and IngressClasses, whether or not it is the leader, on
/// background tasks that run for the life of the runtime.
///
/// Errors: [`StartError`] when the certificate or key cannot be loaded or `listen` bound.
pub async fn start(
    client: kube::Client,
    config: TranslateConfig,
    listen: SocketAddr,
    cert: &Path,
    key: &Path,
) -> Result<Serving, StartError> {
    let tls = tls::server_config(cert, key)?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|source| StartError::Bind {
            addr: listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| StartError::Bind {
        addr: listen,
        source,
    })?;
    let (lookup, watches) = StoreLookup::watch(client, config);
    tokio::spawn(watches);
    let lookup = Arc::new(lookup);
    let synced = Arc::new(AtomicBool::new(false));
    {
        let (lookup, synced) = (lookup.clone(), synced.clone());
        tokio::spawn(async move {
            // Re-polled: a store's first-list wait wakes only its latest waiter, and review
            // requests wait on the same stores (see `controller::stores`).
            while tokio::time::timeout(Duration::from_millis(200), lookup.wait_synced())
                .await
                .is_err()
            {}
            synced.store(true, Ordering::Relaxed);
            tracing::info!("webhook caches synced: admission reviews are answered");
        });
    }
    tokio::spawn(tls::serve(listener, tls, router(WebhookState::new(lookup))));
    tracing::info!(%addr, "webhook listening");
    Ok(Serving {
        addr,
        cert: cert.to_owned(),
        synced,
    })
}

#[cfg(test)]
mod tests;
