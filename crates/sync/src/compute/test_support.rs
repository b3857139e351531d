//! Test helpers for the Compute seam and the code above it (`sync`, the operator's controller):
//! a [`Compute`] on a scripted Compute API (wiremock) and the answers tests script most.
//! Built for this crate's tests and, with the `test-support` feature, for gclb-operator's.

use std::time::Duration;

use serde_json::json;
use wiremock::{MockServer, ResponseTemplate};

use super::{Compute, ComputeConfig, ComputeMetrics, RetrySettings};

/// A [`Compute`] for project `p1` on the scripted server `server` (wiremock), with 1 ms
/// Operation polls and 1-5 ms retry delays (3 retries, 10 after a rate limit).
///
/// # Panics
/// When the clients do not build.
pub async fn compute_for(server: &MockServer) -> Compute {
    let mut config = ComputeConfig::new("p1", Some(server.uri()));
    config.credentials = crate::compute::CredentialsMode::Anonymous;
    config.operation_poll_interval = Duration::from_millis(1);
    config.retry = RetrySettings {
        min_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        max_retries: 3,
        max_rate_limited_retries: 10,
    };
    Compute::new(config, ComputeMetrics::default())
        .await
        .expect("clients build")
}

/// A DONE `compute#operation` named `name`: the answer to an insert that finished at once.
pub fn done_op(name: &str) -> serde_json::Value {
    json!({"kind": "compute#operation", "name": name, "status": "DONE", "operationType": "insert"})
}

/// A 404 answer with the Compute API's `NOT_FOUND` error body: the resource does not exist.
pub fn not_found() -> ResponseTemplate {
    ResponseTemplate::new(404).set_body_json(
        json!({"error": {"code": 404, "message": "not found", "status": "NOT_FOUND"}}),
    )
}
