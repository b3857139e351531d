//! Control-plane metrics in the Prometheus text format (`GET /_emulator/metrics`):
//! `gce_emulator_api_requests_total{method,code}` and
//! `gce_emulator_api_request_duration_seconds{method}`.

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabels {
    method: String,
}

type HistogramFamily = Family<MethodLabels, Histogram, fn() -> Histogram>;

/// The control plane's metrics registry.
pub struct Metrics {
    registry: Mutex<Registry>,
    requests: Family<RequestLabels, Counter>,
    durations: HistogramFamily,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let requests = Family::<RequestLabels, Counter>::default();
        let durations: HistogramFamily =
            Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.00005, 2.0, 16)));
        let mut registry = Registry::with_prefix("gce_emulator_api");
        registry.register(
            "requests",
            "Compute API calls by method id and HTTP status",
            requests.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Compute API call latency in seconds, by method id",
            durations.clone(),
        );
        Metrics {
            registry: Mutex::new(registry),
            requests,
            durations,
        }
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Metrics {
    /// Records one call.
    pub fn observe(&self, method: &str, code: u16, took: Duration) {
        self.requests
            .get_or_create(&RequestLabels {
                method: method.into(),
                code: code.to_string(),
            })
            .inc();
        self.durations
            .get_or_create(&MethodLabels {
                method: method.into(),
            })
            .observe(took.as_secs_f64());
    }

    /// The Prometheus text exposition (without the final `# EOF`).
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode_registry(
            &mut out,
            &self.registry.lock().expect("metrics poisoned"),
        );
        out
    }
}
