//! BackendConfig values checked against the BackendConfig CRD's own schema (its `minimum` and
//! `maximum` bounds, generated from `crate::crd::backend_config`) and its rule that a probe's
//! `timeoutSec` may not exceed its `checkIntervalSec`.
//!
//! The API server enforces the same schema when a BackendConfig is written, but objects outlive
//! their CRD: one stored before a bound or rule existed is still served as it was. The Compute
//! API would refuse such a value with a message about `resource.timeoutSec`, naming neither the
//! BackendConfig nor its field; here the error names both and the fix.

use std::sync::LazyLock;

use kube::CustomResourceExt;
use serde_json::Value;

use super::errors::TranslateError;
use super::snapshot::ObjectKey;
use crate::crd::backend_config::{BackendConfig, BackendConfigSpec};

/// The OpenAPI schema of `spec` in the generated CRD.
static SPEC_SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    let crd = serde_json::to_value(BackendConfig::crd()).unwrap_or(Value::Null);
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"].clone()
});

/// The first value of `spec` outside its CRD's bounds: `(field, what is wrong)`.
fn out_of_range(value: &Value, schema: &Value, field: &str) -> Option<(String, String)> {
    match value {
        Value::Number(n) => {
            let x = n.as_f64()?;
            let min = schema["minimum"].as_f64();
            let max = schema["maximum"].as_f64();
            let low = min.is_some_and(|m| x < m);
            let high = max.is_some_and(|m| x > m);
            (low || high).then(|| {
                let range = match (min, max) {
                    (Some(a), Some(b)) => format!("{a}..={b}"),
                    (Some(a), None) => format!(">= {a}"),
                    (None, Some(b)) => format!("<= {b}"),
                    (None, None) => String::new(),
                };
                (field.to_string(), format!("is {n}, outside {range}"))
            })
        }
        Value::Object(m) => m
            .iter()
            .find_map(|(k, v)| out_of_range(v, &schema["properties"][k], &format!("{field}.{k}"))),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| out_of_range(v, &schema["items"], &format!("{field}[{i}]"))),
        _ => None,
    }
}

/// Checks the BackendConfig `key`'s `spec`. Errors: [`TranslateError::InvalidBackendConfig`]
/// naming the first field at fault.
pub fn check(key: &ObjectKey, spec: &BackendConfigSpec) -> Result<(), TranslateError> {
    let invalid = |field: String, reason: String| TranslateError::InvalidBackendConfig {
        backend_config: key.to_string(),
        field,
        reason,
    };
    let value = serde_json::to_value(spec).unwrap_or(Value::Null);
    if let Some((field, reason)) = out_of_range(&value, &SPEC_SCHEMA, "spec") {
        return Err(invalid(field, reason));
    }
    if let Some(hc) = &spec.health_check {
        if let (Some(timeout), Some(interval)) = (hc.timeout_sec, hc.check_interval_sec) {
            if timeout > interval {
                return Err(invalid(
                    "spec.healthCheck.timeoutSec".into(),
                    format!(
                        "is {timeout}, longer than spec.healthCheck.checkIntervalSec {interval}"
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v: serde_json::Value) -> BackendConfigSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn bounds_and_the_probe_rule_name_the_field() {
        let key = ObjectKey::new("default", "bc");
        assert!(check(&key, &spec(serde_json::json!({"timeoutSec": 30}))).is_ok());
        // The bounds themselves are inside: the minimum, the maximum, a probe timeout equal to
        // its interval.
        for ok in [
            serde_json::json!({"timeoutSec": 1}),
            serde_json::json!({"connectionDraining": {"drainingTimeoutSec": 3600}}),
            serde_json::json!({"healthCheck": {"checkIntervalSec": 5, "timeoutSec": 5}}),
        ] {
            assert!(check(&key, &spec(ok.clone())).is_ok(), "{ok}");
        }
        let e = check(
            &key,
            &spec(serde_json::json!({"connectionDraining": {"drainingTimeoutSec": 4000}})),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("BackendConfig default/bc: spec.connectionDraining.drainingTimeoutSec is 4000, outside 0..=3600"), "{e}");
        let e = check(
            &key,
            &spec(serde_json::json!({"healthCheck": {"checkIntervalSec": 5, "timeoutSec": 10}})),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("spec.healthCheck.timeoutSec is 10, longer than spec.healthCheck.checkIntervalSec 5"), "{e}");
        let e = check(&key, &spec(serde_json::json!({"timeoutSec": 0})))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("spec.timeoutSec is 0, outside 1..=2147483647"),
            "{e}"
        );
        // Items of a list are checked too, and named by their index.
        let e = check(
            &key,
            &spec(
                serde_json::json!({"cdn": {"enabled": true, "negativeCachingPolicy": [
                {"code": 404, "ttl": 30}, {"code": 200, "ttl": 30}]}}),
            ),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("spec.cdn.negativeCachingPolicy[1].code is 200, outside 300..=599"),
            "{e}"
        );
    }
}
