//! Compute call metrics: one counter per (method, result) and a latency histogram per method.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Labels of `gclb_compute_calls_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    /// Compute method id, e.g. `compute.urlMaps.insert` (the emulator's call-counter names).
    pub method: String,
    /// `ok` or the error reason ([`super::ErrorKind::as_str`]: `notFound`, `conditionNotMet`,
    /// `authError` for a 401, `forbidden` for a 403, ...).
    pub result: String,
}

/// Labels of `gclb_compute_call_duration_seconds`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    /// Compute method id.
    pub method: String,
}

/// Counters and histograms for every Compute HTTP call (each attempt counts once).
#[derive(Clone)]
pub struct ComputeMetrics {
    calls: Family<CallLabels, Counter>,
    duration: Family<MethodLabels, Histogram, fn() -> Histogram>,
}

impl Default for ComputeMetrics {
    fn default() -> Self {
        Self {
            calls: Family::default(),
            duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.001, 2.0, 16))
            }),
        }
    }
}

impl ComputeMetrics {
    /// Registers `gclb_compute_calls_total` and `gclb_compute_call_duration_seconds`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "gclb_compute_calls",
            "Compute API calls by method id and result (ok or error reason)",
            self.calls.clone(),
        );
        registry.register(
            "gclb_compute_call_duration_seconds",
            "Compute API call latency in seconds, by method id",
            self.duration.clone(),
        );
    }

    /// Records one attempt of `method` that ended with `result` after `seconds`.
    pub fn record(&self, method: &str, result: &str, seconds: f64) {
        self.calls
            .get_or_create(&CallLabels {
                method: method.to_string(),
                result: result.to_string(),
            })
            .inc();
        self.duration
            .get_or_create(&MethodLabels {
                method: method.to_string(),
            })
            .observe(seconds);
    }

    /// Number of calls recorded for (method, result); for tests and diagnostics.
    pub fn count(&self, method: &str, result: &str) -> u64 {
        self.calls
            .get_or_create(&CallLabels {
                method: method.to_string(),
                result: result.to_string(),
            })
            .get()
    }
}
