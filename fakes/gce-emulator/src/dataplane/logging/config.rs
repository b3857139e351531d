//! A backend service's `logConfig` (Compute API v1 `BackendServiceLogConfig`): whether its
//! requests are logged, at which sample rate, with which optional fields. Below the log store
//! and the entry builder, which both read it.

use serde_json::Value;

/// Which optional fields entries carry (`logConfig.optionalMode`).
#[derive(Clone, Debug, PartialEq)]
pub enum Optional {
    /// `EXCLUDE_ALL_OPTIONAL`.
    None,
    /// `INCLUDE_ALL_OPTIONAL`.
    All,
    /// `CUSTOM` with `optionalFields`.
    Custom(Vec<String>),
}

/// A backend service's `logConfig`, when logging is enabled.
#[derive(Clone, Debug, PartialEq)]
pub struct LogConfig {
    /// `sampleRate`.
    pub sample_rate: f64,
    /// `optionalMode`.
    pub optional: Optional,
}

impl LogConfig {
    /// `None` unless `logConfig.enable` is true.
    pub fn compile(v: &Value) -> Option<LogConfig> {
        let lc = v.get("logConfig")?;
        if lc.get("enable").and_then(Value::as_bool) != Some(true) {
            return None;
        }
        let optional = match lc.get("optionalMode").and_then(Value::as_str) {
            Some("INCLUDE_ALL_OPTIONAL") => Optional::All,
            Some("CUSTOM") => Optional::Custom(
                lc.get("optionalFields")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect(),
            ),
            _ => Optional::None,
        };
        Some(LogConfig {
            sample_rate: lc
                .get("sampleRate")
                .and_then(Value::as_f64)
                .unwrap_or(1.0)
                .clamp(0.0, 1.0),
            optional,
        })
    }

    /// Whether an optional field is logged.
    pub fn includes(&self, field: &str) -> bool {
        match &self.optional {
            Optional::None => false,
            Optional::All => true,
            Optional::Custom(f) => f.iter().any(|x| x == field),
        }
    }
}
