//! Fault injection per API method (admin API `/_emulator/faults`): an error with any status
//! code and reason, on a fraction of calls (`probability`) or on the next N calls (`count`),
//! and/or added latency. Method ids are the API's (`compute.firewalls.insert`); a trailing `*`
//! matches a prefix (`compute.firewalls.*` refuses every firewall call, the Shared VPC case).
//!
//! What a failing cloud also does: a call with no HTTP answer at all (`drop`: the connection
//! closes, as a client sees a timeout or a reset), a call whose answer is lost after the server
//! acted (`lostResponse`: the change is made, then the error or the dropped connection is what
//! the client gets, so a retry finds the resource already there), and slow Operations
//! (`operationLatencyMs`: the Operation of the call reads RUNNING that long).

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
    /// Answer with no HTTP response: the connection is closed (after `latencyMs`).
    #[serde(default)]
    pub drop: bool,
    /// Run the call first, then answer with the fault (`code` or `drop`): the response is lost
    /// after the server acted.
    #[serde(default)]
    pub lost_response: bool,
    /// Milliseconds the Operation of an affected mutation reads RUNNING (instead of
    /// `--operation-latency-ms`).
    #[serde(default)]
    pub operation_latency_ms: Option<u64>,
    /// Output only: how many calls this rule has affected.
    #[serde(default)]
    pub hits: u64,
}

tokio::task_local! {
    /// The Operation latency a fault asks for, for the call being executed (read where the
    /// Operation is recorded).
    pub static OPERATION_LATENCY: Option<Duration>;
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
    /// Then fail with this error (one with [`ApiError::dropped`] closes the connection).
    pub error: Option<ApiError>,
    /// Whether the call runs before `error` is answered (its response is lost).
    pub after_effect: bool,
    /// The Operation latency of the call, when the rule sets one.
    pub operation_latency: Option<Duration>,
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
        if rule.code.is_none()
            && !rule.drop
            && rule.latency_ms.unwrap_or(0) == 0
            && rule.operation_latency_ms.unwrap_or(0) == 0
        {
            return Err(FaultError::Invalid(
                "set code, drop, latencyMs and/or operationLatencyMs".into(),
            ));
        }
        if rule.lost_response && rule.code.is_none() && !rule.drop {
            return Err(FaultError::Invalid(
                "lostResponse needs code or drop: what the client gets instead".into(),
            ));
        }
        if rule.code.is_some() && rule.drop {
            return Err(FaultError::Invalid("set code or drop, not both".into()));
        }
        if rule.method.is_empty() {
            return Err(FaultError::Invalid(
                "method is required (e.g. compute.firewalls.insert)".into(),
            ));
        }
        let mut g = self.rules.lock().expect("faults poisoned");
        g.0 += 1;
        rule.id = g.0;
        rule.hits = 0;
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
            r.hits += 1;
            out.latency = Duration::from_millis(r.latency_ms.unwrap_or(0));
            out.after_effect = r.lost_response;
            out.operation_latency = r.operation_latency_ms.map(Duration::from_millis);
            if r.drop {
                out.error = Some(ApiError::dropped(method));
            }
            out.error = out.error.take().or_else(|| {
                r.code.map(|code| {
                    ApiError::new(
                        code,
                        r.reason
                            .clone()
                            .unwrap_or_else(|| default_reason(code).to_string()),
                        r.message
                            .clone()
                            .unwrap_or_else(|| format!("Injected fault: {method} answered {code}")),
                    )
                })
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
            drop: false,
            lost_response: false,
            operation_latency_ms: None,
            hits: 0,
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

    #[test]
    fn drops_lost_responses_and_slow_operations() {
        let f = Faults::default();
        let mut lost = rule("compute.urlMaps.insert", 503, None);
        lost.lost_response = true;
        f.add(lost).unwrap();
        let got = f.check("compute.urlMaps.insert");
        assert!(got.after_effect);
        assert_eq!(got.error.unwrap().code, 503);
        assert_eq!(f.list()[0].hits, 1);
        f.remove(None);
        let mut drop = rule("compute.urlMaps.get", 500, None);
        drop.code = None;
        drop.drop = true;
        f.add(drop.clone()).unwrap();
        assert!(f.check("compute.urlMaps.get").error.unwrap().dropped);
        drop.code = Some(500);
        assert!(f.add(drop).is_err(), "code and drop together");
        let mut slow = rule("compute.*", 500, None);
        slow.code = None;
        slow.operation_latency_ms = Some(1500);
        f.remove(None);
        f.add(slow).unwrap();
        let got = f.check("compute.firewalls.insert");
        assert_eq!(got.operation_latency, Some(Duration::from_millis(1500)));
        assert!(got.error.is_none());
        let mut lost_nothing = rule("x", 500, None);
        lost_nothing.code = None;
        lost_nothing.lost_response = true;
        lost_nothing.latency_ms = Some(1);
        assert!(
            f.add(lost_nothing).is_err(),
            "lostResponse without an answer to lose it to"
        );
    }
}
