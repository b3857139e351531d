//! Data plane metrics (Prometheus text format through `DataPlane::metrics_text`):
//! - `dataplane_requests_total{forwarding_rule,code_class}` and
//!   `dataplane_request_duration_seconds{forwarding_rule}` (to response headers);
//! - `dataplane_backend_requests_total{backend_service,code_class}` and
//!   `dataplane_backend_latency_seconds{backend_service}`;
//! - `dataplane_health_transitions_total{backend_service,state}`.
//!
//! Handles are created when a snapshot is compiled and kept in the routing table, so the request
//! path only touches atomics (and the histogram's uncontended lock).

use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RuleCode {
    forwarding_rule: String,
    code_class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Rule {
    forwarding_rule: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServiceCode {
    backend_service: String,
    code_class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Service {
    backend_service: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServiceState {
    backend_service: String,
    state: &'static str,
}

const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

fn class_index(status: u16) -> usize {
    (status / 100).clamp(1, 5) as usize - 1
}

fn histogram() -> Histogram {
    // 100 us .. ~52 s
    Histogram::new(exponential_buckets(0.0001, 2.0, 20))
}

/// Counters and a latency histogram for one label value.
#[derive(Clone, Debug, Default)]
pub struct RequestMetrics {
    by_class: Option<Arc<[Counter; 5]>>,
    latency: Option<Histogram>,
}

impl RequestMetrics {
    /// Counts one response with `status` after `seconds`.
    pub fn observe(&self, status: u16, seconds: f64) {
        if let Some(c) = &self.by_class {
            c[class_index(status)].inc();
        }
        if let Some(h) = &self.latency {
            h.observe(seconds);
        }
    }
}

impl RequestMetrics {
    /// Responses counted so far by class: `[1xx, 2xx, 3xx, 4xx, 5xx]` (for the dashboard).
    pub fn counts(&self) -> [u64; 5] {
        self.by_class
            .as_ref()
            .map_or([0; 5], |c| std::array::from_fn(|i| c[i].get()))
    }
}

/// Metrics of one backend service.
pub type BackendMetrics = RequestMetrics;

/// The registry of the data plane.
pub struct Metrics {
    registry: Mutex<Registry>,
    rule_requests: Family<RuleCode, Counter>,
    rule_latency: Family<Rule, Histogram, fn() -> Histogram>,
    backend_requests: Family<ServiceCode, Counter>,
    backend_latency: Family<Service, Histogram, fn() -> Histogram>,
    health_transitions: Family<ServiceState, Counter>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let m = Metrics {
            registry: Mutex::new(Registry::with_prefix("dataplane")),
            rule_requests: Family::default(),
            rule_latency: Family::new_with_constructor(histogram),
            backend_requests: Family::default(),
            backend_latency: Family::new_with_constructor(histogram),
            health_transitions: Family::default(),
        };
        {
            let mut r = m.registry.lock().expect("metrics registry poisoned");
            r.register(
                "requests",
                "Requests per forwarding rule and response code class",
                m.rule_requests.clone(),
            );
            r.register(
                "request_duration_seconds",
                "Time to response headers per forwarding rule",
                m.rule_latency.clone(),
            );
            r.register(
                "backend_requests",
                "Requests per backend service and response code class",
                m.backend_requests.clone(),
            );
            r.register(
                "backend_latency_seconds",
                "Backend time to response headers per backend service",
                m.backend_latency.clone(),
            );
            r.register(
                "health_transitions",
                "Endpoint health state changes per backend service",
                m.health_transitions.clone(),
            );
        }
        m
    }
}

impl Metrics {
    /// Handles for a forwarding rule.
    pub fn for_rule(&self, rule: &str) -> RequestMetrics {
        let counters = CLASSES.map(|c| {
            self.rule_requests
                .get_or_create(&RuleCode {
                    forwarding_rule: rule.to_string(),
                    code_class: c,
                })
                .clone()
        });
        RequestMetrics {
            by_class: Some(Arc::new(counters)),
            latency: Some(
                self.rule_latency
                    .get_or_create(&Rule {
                        forwarding_rule: rule.to_string(),
                    })
                    .clone(),
            ),
        }
    }

    /// Handles for a backend service.
    pub fn for_backend(&self, bs: &str) -> BackendMetrics {
        let counters = CLASSES.map(|c| {
            self.backend_requests
                .get_or_create(&ServiceCode {
                    backend_service: bs.to_string(),
                    code_class: c,
                })
                .clone()
        });
        RequestMetrics {
            by_class: Some(Arc::new(counters)),
            latency: Some(
                self.backend_latency
                    .get_or_create(&Service {
                        backend_service: bs.to_string(),
                    })
                    .clone(),
            ),
        }
    }

    /// Counts a health transition of an endpoint of `bs` into `state`.
    pub fn health_transition(&self, bs: &str, state: &'static str) {
        self.health_transitions
            .get_or_create(&ServiceState {
                backend_service: bs.to_string(),
                state,
            })
            .inc();
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let r = self.registry.lock().expect("metrics registry poisoned");
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &r) {
            tracing::warn!(error = %e, "cannot encode data plane metrics");
        }
        out
    }
}
