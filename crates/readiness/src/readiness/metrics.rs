//! Prometheus metrics of the readiness gate controller.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Label of the gate latency: the condition reason (`LoadBalancerNegReady`, ...).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    /// Condition reason.
    pub reason: String,
}

/// Label of the Compute calls: the method id and `ok` / `error`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    /// `compute.networkEndpointGroups.listNetworkEndpoints` or `compute.backendServices.list`.
    pub method: String,
    /// `ok` or `error`.
    pub result: String,
}

fn gate_buckets() -> Histogram {
    // 0.25 s .. about 17 min: covers a fast local probe and GKE's 10-minute timeout.
    Histogram::new(exponential_buckets(0.25, 2.0, 13))
}

/// Metrics handed to the controller; register once, share behind an `Arc`.
#[derive(Debug)]
pub struct ReadinessMetrics {
    /// Seconds from Pod creation to the gate condition turning True, by reason.
    pub gate_seconds: Family<ReasonLabels, Histogram, fn() -> Histogram>,
    /// Compute calls made by the poller.
    pub calls: Family<CallLabels, Counter>,
    /// Gated Pods whose condition is not True yet (after the last poll).
    pub waiting_pods: Gauge,
}

impl Default for ReadinessMetrics {
    fn default() -> Self {
        Self {
            gate_seconds: Family::new_with_constructor(gate_buckets),
            calls: Family::default(),
            waiting_pods: Gauge::default(),
        }
    }
}

impl ReadinessMetrics {
    /// Registers under the `readiness_gate` prefix:
    /// `readiness_gate_seconds{reason}` (histogram),
    /// `readiness_gate_compute_calls_total{method,result}`, `readiness_gate_waiting_pods`.
    pub fn register(&self, registry: &mut Registry) {
        let sub = registry.sub_registry_with_prefix("readiness_gate");
        sub.register(
            "seconds",
            "Seconds from Pod creation to the cloud.google.com/load-balancer-neg-ready condition turning True",
            self.gate_seconds.clone(),
        );
        sub.register(
            "compute_calls",
            "Compute API calls made by the readiness gate poller",
            self.calls.clone(),
        );
        sub.register(
            "waiting_pods",
            "Gated Pods whose load-balancer-neg-ready condition is not True",
            self.waiting_pods.clone(),
        );
    }

    pub(crate) fn call(&self, method: &str, ok: bool) {
        self.calls
            .get_or_create(&CallLabels {
                method: method.to_owned(),
                result: if ok { "ok" } else { "error" }.to_owned(),
            })
            .inc();
    }
}
