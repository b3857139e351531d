//! Pod readiness gates from load balancer health: the `cloud.google.com/load-balancer-neg-ready`
//! condition (reference 000, "Pod readiness"; `reference/ingress-gce-inventory.md` section 7).
//!
//! - [`rules`] (pure): the four rules that decide the condition;
//! - [`condition`] (pure): the strategic merge patch that writes it;
//! - [`lookup`]: which readiness-gated NEGs a Pod belongs to ([`NegLookup`]);
//! - [`neg`]: NEG endpoint health from the Compute API ([`NegHealth`]);
//! - [`controller`]: the watch + poll loop ([`run`]);
//! - [`metrics`]: gate latency and call counters.
//!
//! Wiring (in `gclb-operator run`), reusing the Ingress controller's stores:
//! ```ignore
//! let lookup = Arc::new(readiness::StoreLookup::new(
//!     stores.ingresses.clone(), stores.services.clone(), stores.ingress_classes.clone(),
//!     translate_config.clone()));
//! let health = readiness::ComputeNegHealth::connect(&project, compute_endpoint.as_deref(), credentials).await?;
//! let ctx = readiness::Context::new(client, Arc::new(health), lookup.clone(), readiness::Config {
//!     timeout: neg_ready_timeout, bypass: !readiness_gates, ..Default::default() })
//!     .with_metrics(readiness_metrics);
//! tokio::spawn(readiness::run_with_pods(ctx, stores.pods.clone()));
//! ```
//! Standalone: `let (lookup, watches) = StoreLookup::watch(client, config); tokio::spawn(watches);`
//! and `tokio::spawn(readiness::run(ctx))` (its own Pod watch).

pub mod condition;
pub mod controller;
pub mod lookup;
pub mod metrics;
pub mod neg;
pub mod rules;

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::Reporter;

pub use controller::{run, run_with_pods};
pub use lookup::{NegLookup, StaticLookup, StoreLookup};
pub use metrics::ReadinessMetrics;
pub use neg::{ComputeNegHealth, EndpointHealth, NegHealth, NegHealthError, NegRef};
pub use rules::{NegCondition, Reason, DEFAULT_NEG_READY_TIMEOUT, NEG_READINESS_GATE};

/// Settings of the readiness gate controller.
#[derive(Clone, Debug)]
pub struct Config {
    /// Rule 4: how long after Pod creation the gate opens without a health state
    /// (`--neg-ready-timeout`, default 600 s as GKE).
    pub timeout: Duration,
    /// Delay between polls while Pods wait (GKE: 1 s).
    pub poll_interval: Duration,
    /// Longest delay after repeated API errors (GKE: 100 s).
    pub max_error_backoff: Duration,
    /// A waiting Pod gets a Warning Event `LoadBalancerNegNotReady` once it has waited this long.
    pub slow_event_after: Duration,
    /// NEGs polled at the same time.
    pub max_concurrent_polls: usize,
    /// `--readiness-gates=false`: set the condition True at once without looking at load
    /// balancer health, so gated Pods are not stuck. For comparisons (the rollout test proves the
    /// gate matters by running with this on).
    pub bypass: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_NEG_READY_TIMEOUT,
            poll_interval: Duration::from_secs(1),
            max_error_backoff: Duration::from_secs(100),
            slow_event_after: Duration::from_secs(60),
            max_concurrent_polls: 8,
            bypass: false,
        }
    }
}

/// Everything the controller needs; cheap to build once in `main`.
#[derive(Clone)]
pub struct Context {
    /// Kubernetes client (Pods watch, `pods/status` patch, Events).
    pub client: kube::Client,
    /// NEG endpoint health source.
    pub health: Arc<dyn NegHealth>,
    /// Pod -> readiness-gated NEGs.
    pub lookup: Arc<dyn NegLookup>,
    /// Settings.
    pub config: Config,
    /// Metrics, when a registry is in use.
    pub metrics: Option<Arc<ReadinessMetrics>>,
    /// Who reports the Events (`reportingController`).
    pub reporter: Reporter,
}

impl Context {
    /// A context with no metrics and reporter `gclb-operator-readiness`.
    pub fn new(
        client: kube::Client,
        health: Arc<dyn NegHealth>,
        lookup: Arc<dyn NegLookup>,
        config: Config,
    ) -> Self {
        Self {
            client,
            health,
            lookup,
            config,
            metrics: None,
            reporter: Reporter {
                controller: "gclb-operator-readiness".to_owned(),
                instance: std::env::var("POD_NAME").ok(),
            },
        }
    }

    /// Records metrics into `metrics` (register it in the operator's registry first).
    pub fn with_metrics(mut self, metrics: Arc<ReadinessMetrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }
}

/// Errors of the readiness controller (logged per Pod; the loop goes on).
#[derive(Debug, thiserror::Error)]
pub enum ReadinessError {
    /// Patching `pods/{pod}/status` failed (RBAC needs `patch` on `pods/status`).
    #[error("cannot patch the {gate} condition of Pod {namespace}/{pod}: {source}; the operator needs RBAC verb patch on pods/status", gate = NEG_READINESS_GATE)]
    PatchStatus {
        /// Pod namespace.
        namespace: String,
        /// Pod name.
        pod: String,
        /// The API error.
        source: kube::Error,
    },
    /// Reading NEG health failed.
    #[error(transparent)]
    Health(#[from] NegHealthError),
}

#[cfg(test)]
pub(crate) mod test_api;
