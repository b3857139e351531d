//! Fault injection per API method (admin API `/_emulator/faults`): an error with any status
//! code and reason, on a fraction of calls (`probability`) or on the next N calls (`count`),
//! and/or added latency. Method ids are the API's (`compute.firewalls.insert`); a trailing `*`
//! matches a prefix (`compute.firewalls.*` refuses every firewall call, the Shared VPC case).

use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::errors::ApiError;

/// One fault rule, as posted to `POST /_emulator/faults`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultRule {
    /// Assigned by the emulator; `DELETE /_emulator/faults/{id}` removes the rule.
    #[serde(default)]
    pub id: u64,
    /// Method id or prefix pattern ending in `*`.
    pub method: String,
    /// HTTP status to answer; absent for latency-only rules.
    #[serde(default)]
    pub code: Option<u16>,
    /// Google error reason; defaults from the code (403 `forbidden`, 429 `rateLimitExceeded`,
    /// 5xx `backendError`, ...).
    #[serde(default)]
    pub reason: Option<String>,
    /// Error message; defaults to a text naming the method.
    #[serde(default)]
    pub message: Option<String>,
    /// Fraction of matching calls affected, 0.0-1.0 (default 1.0).
    #[serde(default)]
    pub probability: Option<f64>,
    /// Affect only the next N matching calls, then the rule disappears.
    #[serde(default)]
    pub count: Option<u64>,
    /// Latency added to affected calls, in milliseconds.
    #[serde(default)]
    pub latency_ms: Option<u64>,
}

/// Errors of the fault admin API.
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    /// The rule is inconsistent.
    #[error("invalid fault rule: {0}")]
    Invalid(String),
}

/// What to do to one call.
#[derive(Debug, Default, PartialEq)]
pub struct Injected {
    /// Sleep this long first.
    pub latency: Duration,
    /// Then fail with this error.
    pub error: Option<ApiError>,
}

/// The active fault rules.
#[derive(Debug, Default)]
pub struct Faults {
    rules: Mutex<(u64, Vec<FaultRule>)>,
}

/// The reason a real Compute API error with `code` carries.
pub fn default_reason(code: u16) -> &'static str {
    match code {
        400 => "invalid",
        401 => "authError",
        403 => "forbidden",
        404 => "notFound",
        409 => "alreadyExists",
        412 => "conditionNotMet",
        429 => "rateLimitExceeded",
        _ => "backendError",
    }
}

fn matches(pattern: &str, method: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => method.starts_with(prefix),
        None => pattern == method,
    }
}

impl Faults {
    /// Adds a rule; returns it with its id. Errors: an out-of-range code or probability, or a
    /// rule that does nothing.
    pub fn add(&self, mut rule: FaultRule) -> Result<FaultRule, FaultError> {
        if let Some(c) = rule.code {
            if !(400..=599).contains(&c) {
                return Err(FaultError::Invalid(format!("code {c}: must be 400-599")));
            }
        }
        if let Some(p) = rule.probability {
            if !(0.0..=1.0).contains(&p) {
                return Err(FaultError::Invalid(format!(
                    "probability {p}: must be 0.0-1.0"
                )));
            }
        }
        if rule.code.is_none() && rule.latency_ms.unwrap_or(0) == 0 {
            return Err(FaultError::Invalid("set code and/or latencyMs".into()));
        }
        if rule.method.is_empty() {
            return Err(FaultError::Invalid(
                "method is required (e.g. compute.firewalls.insert)".into(),
            ));
        }
        let mut g = self.rules.lock().expect("faults poisoned");
        g.0 += 1;
        rule.id = g.0;
        g.1.push(rule.clone());
        Ok(rule)
    }

    /// The active rules.
    pub fn list(&self) -> Vec<FaultRule> {
        self.rules.lock().expect("faults poisoned").1.clone()
    }

    /// Removes one rule (`Some(id)`) or all; returns how many were removed.
    pub fn remove(&self, id: Option<u64>) -> usize {
        let mut g = self.rules.lock().expect("faults poisoned");
        let before = g.1.len();
        match id {
            Some(id) => g.1.retain(|r| r.id != id),
            None => g.1.clear(),
        }
        before - g.1.len()
    }

    /// Decides the fault for one call of `method` (consuming `count`).
    pub fn check(&self, method: &str) -> Injected {
        let mut g = self.rules.lock().expect("faults poisoned");
        let mut out = Injected::default();
        let mut exhausted = None;
        for (i, r) in g.1.iter_mut().enumerate() {
            if !matches(&r.method, method) {
                continue;
            }
            if let Some(p) = r.probability {
                if rand::random::<f64>() >= p {
                    continue;
                }
            }
            if let Some(c) = r.count.as_mut() {
                *c = c.saturating_sub(1);
                if *c == 0 {
                    exhausted = Some(i);
                }
            }
            out.latency = Duration::from_millis(r.latency_ms.unwrap_or(0));
            out.error = r.code.map(|code| {
                ApiError::new(
                    code,
                    r.reason
                        .clone()
                        .unwrap_or_else(|| default_reason(code).to_string()),
                    r.message
                        .clone()
                        .unwrap_or_else(|| format!("Injected fault: {method} answered {code}")),
                )
            });
            break;
        }
        if let Some(i) = exhausted {
            g.1.remove(i);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(method: &str, code: u16, count: Option<u64>) -> FaultRule {
        FaultRule {
            id: 0,
            method: method.into(),
            code: Some(code),
            reason: None,
            message: None,
            probability: None,
            count,
            latency_ms: None,
        }
    }

    #[test]
    fn next_n_calls_then_gone() {
        let f = Faults::default();
        f.add(rule("compute.backendServices.get", 503, Some(2)))
            .unwrap();
        assert_eq!(
            f.check("compute.backendServices.get").error.unwrap().reason,
            "backendError"
        );
        assert!(f.check("compute.urlMaps.get").error.is_none());
        assert!(f.check("compute.backendServices.get").error.is_some());
        assert!(f.check("compute.backendServices.get").error.is_none());
        assert!(f.list().is_empty());
    }

    #[test]
    fn prefix_patterns_and_validation() {
        let f = Faults::default();
        let r = f.add(rule("compute.firewalls.*", 403, None)).unwrap();
        assert_eq!(
            f.check("compute.firewalls.insert").error.unwrap().reason,
            "forbidden"
        );
        assert!(f.check("compute.firewalls.patch").error.is_some());
        assert_eq!(f.remove(Some(r.id)), 1);
        assert!(f.add(rule("x", 200, None)).is_err());
    }
}
