//! Operator metrics (Prometheus text on `/metrics`) and the `/healthz` and `/readyz` endpoints.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Labels of `gclb_ingress_syncs_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `ok`, or the failure class (`translate`, `compute`, `kubernetes`).
    pub result: String,
}

/// Reconcile metrics.
#[derive(Clone)]
pub struct ControllerMetrics {
    /// Reconciles by result.
    pub syncs: Family<ResultLabels, Counter>,
    /// Failed reconciles by class.
    pub sync_errors: Family<ResultLabels, Counter>,
    /// Ingresses whose latest change is not programmed yet.
    pub queue_depth: Gauge,
    /// Reconciles running now.
    pub in_flight: Gauge,
    /// Seconds from observing an Ingress change (new generation or resourceVersion) to its
    /// load balancer being programmed.
    pub programming_seconds: Histogram,
}

impl Default for ControllerMetrics {
    fn default() -> Self {
        Self {
            syncs: Family::default(),
            sync_errors: Family::default(),
            queue_depth: Gauge::default(),
            in_flight: Gauge::default(),
            programming_seconds: Histogram::new(exponential_buckets(0.01, 2.0, 16)),
        }
    }
}

impl ControllerMetrics {
    /// Registers every metric under `gclb_`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "gclb_ingress_syncs",
            "Ingress reconciles by result",
            self.syncs.clone(),
        );
        registry.register(
            "gclb_ingress_sync_errors",
            "Failed Ingress reconciles by class (translate, compute, kubernetes)",
            self.sync_errors.clone(),
        );
        registry.register(
            "gclb_ingress_queue_depth",
            "Ingresses whose latest change is not programmed yet",
            self.queue_depth.clone(),
        );
        registry.register(
            "gclb_reconciles_in_flight",
            "Ingress reconciles running now",
            self.in_flight.clone(),
        );
        registry.register(
            "gclb_ingress_programming_seconds",
            "Seconds from observing an Ingress change to its load balancer being programmed",
            self.programming_seconds.clone(),
        );
    }

    /// Counts one reconcile with `result` (`ok` or an error class).
    pub fn sync(&self, result: &str) {
        self.syncs
            .get_or_create(&ResultLabels {
                result: result.to_string(),
            })
            .inc();
        if result != "ok" {
            self.sync_errors
                .get_or_create(&ResultLabels {
                    result: result.to_string(),
                })
                .inc();
        }
    }
}

/// What the HTTP endpoints read.
#[derive(Clone)]
pub struct HttpState {
    /// The registry `/metrics` encodes.
    pub registry: Arc<Registry>,
    /// `/readyz` answers 200 once this returns true.
    pub ready: Arc<dyn Fn() -> bool + Send + Sync>,
}

async fn metrics(State(state): State<HttpState>) -> impl IntoResponse {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &state.registry) {
        Ok(()) => (
            StatusCode::OK,
            [(
                "content-type",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        ),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [("content-type", "text/plain")],
            e.to_string(),
        ),
    }
}

async fn readyz(State(state): State<HttpState>) -> (StatusCode, &'static str) {
    if (state.ready)() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "stores not synced yet")
    }
}

/// The router: `GET /metrics`, `GET /healthz` (always 200 while the process serves),
/// `GET /readyz` (200 once the stores are synced, else 503).
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(state)
}

/// Binds `listen` and serves [`router`] on a background task; returns the bound address.
///
/// Errors: the bind error (address in use, permission).
pub async fn serve(listen: SocketAddr, state: HttpState) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router(state)).await {
            tracing::error!(error = %e, "metrics server stopped");
        }
    });
    Ok(addr)
}
