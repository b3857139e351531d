//! PURE: the value of the `cloud.google.com/load-balancer-neg-ready` Pod condition.
//!
//! The four rules come from reference 000 ("Pod readiness") and
//! `reference/ingress-gce-inventory.md` section 7 (ingress-gce `pkg/neg/readiness/reflector.go`).
//! The condition is True when, checked in this order:
//! 1. one of the Pod's IPs is an endpoint that is `HEALTHY` for some backend service
//!    (reason `LoadBalancerNegReady`);
//! 2. one of the Pod's IPs is an endpoint of a NEG that no backend service health-checks
//!    (reason `LoadBalancerNegWithoutHealthCheck`);
//! 3. the Pod belongs to no readiness-gated NEG (reason `LoadBalancerNegReady`);
//! 4. the timeout (GKE: 10 minutes) has passed since the Pod's `creationTimestamp`
//!    (reason `LoadBalancerNegTimeout`).
//!
//! Otherwise it is False with reason `LoadBalancerNegNotReady` and the message
//! "Waiting for pod to become healthy in at least one of the NEG(s): [...]".
//!
//! Improvement over GKE (its issues #769 and #1718, inventory section 10): an endpoint with an
//! empty `healths[]` is treated as "not health-checked" (rule 2) only when the backend services
//! have been read and none uses the NEG with a health check. Right after a NEG is attached, the
//! health state may not have arrived yet; GKE let such Pods through early.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::PodCondition;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::neg::{EndpointHealth, NegRef, HEALTHY};
use crate::translate::pod::PodRecord;

/// The readiness gate and Pod condition type (ingress-gce `pkg/neg/types/shared/types.go`).
pub const NEG_READINESS_GATE: &str = "cloud.google.com/load-balancer-neg-ready";

/// GKE's default time a Pod may wait for a health state before the gate is let through.
pub const DEFAULT_NEG_READY_TIMEOUT: Duration = Duration::from_secs(600);

/// Why the condition has its value; the strings are GKE's, users search for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// Rules 1 and 3: healthy for a backend service, or in no readiness-gated NEG.
    Ready,
    /// Rule 2: in a NEG that no backend service health-checks.
    WithoutHealthCheck,
    /// Rule 4: the timeout passed.
    Timeout,
    /// Still waiting: the condition is False.
    NotReady,
}

impl Reason {
    /// The condition / Event reason, e.g. `LoadBalancerNegReady`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "LoadBalancerNegReady",
            Self::WithoutHealthCheck => "LoadBalancerNegWithoutHealthCheck",
            Self::Timeout => "LoadBalancerNegTimeout",
            Self::NotReady => "LoadBalancerNegNotReady",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The decided value of the gate condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NegCondition {
    /// `true` for condition status `True`.
    pub status: bool,
    /// Why.
    pub reason: Reason,
    /// Human-readable message shown by `kubectl describe pod`.
    pub message: String,
}

/// What one poll learned about one NEG the Pod belongs to.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct NegObservation {
    /// `None` when the NEG was not polled (API error) or does not exist yet; otherwise its
    /// endpoints with health (`listNetworkEndpoints`, `healthStatus: SHOW`).
    pub endpoints: Option<Vec<EndpointHealth>>,
    /// Names of the backend services that use this NEG and have a health check; `None` when not
    /// read in this poll (only needed when an endpoint has no `healths[]`).
    pub health_checked_by: Option<Vec<String>>,
}

/// Whether the Pod has the gate in `spec.readinessGates`.
pub fn has_gate(pod: &PodRecord) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|gates| gates.iter().any(|g| g.condition_type == NEG_READINESS_GATE))
}

/// The Pod's current gate condition, if any.
pub fn gate_condition(pod: &PodRecord) -> Option<&PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == NEG_READINESS_GATE)
}

/// Whether the controller must work on this Pod: it has the gate, its condition is not True,
/// and it is not terminating (ingress-gce `needToProcess`, plus the terminating check: a
/// terminating Pod's readiness no longer steers a rollout).
pub fn needs_processing(pod: &PodRecord) -> bool {
    has_gate(pod)
        && pod.metadata.deletion_timestamp.is_none()
        && gate_condition(pod).is_none_or(|c| c.status != "True")
}

/// Every IP of the Pod (`status.podIPs[].ip`, then `status.podIP`), without duplicates.
pub fn pod_ips(pod: &PodRecord) -> Vec<String> {
    let mut ips: Vec<String> = Vec::new();
    if let Some(status) = &pod.status {
        let listed = status.pod_ips.iter().flatten().map(|p| p.ip.clone());
        for ip in listed.chain(status.pod_ip.clone()) {
            if !ip.is_empty() && !ips.contains(&ip) {
                ips.push(ip);
            }
        }
    }
    ips
}

/// Decides the gate condition for a Pod.
///
/// - `pod_ips`: from [`pod_ips`];
/// - `created`: the Pod's `creationTimestamp`;
/// - `negs`: the readiness-gated NEGs the Pod belongs to (by Service selector), each with what
///   this poll observed; empty means rule 3;
/// - `now`, `timeout`: rule 4 applies when `now >= created + timeout`.
pub fn decide(
    pod_ips: &[String],
    created: Timestamp,
    negs: &BTreeMap<NegRef, NegObservation>,
    now: Timestamp,
    timeout: Duration,
) -> NegCondition {
    let gate = NEG_READINESS_GATE;
    let endpoints_of = |obs: &NegObservation| -> Vec<EndpointHealth> {
        obs.endpoints
            .iter()
            .flatten()
            .filter(|e| pod_ips.contains(&e.ip_address))
            .cloned()
            .collect()
    };
    // Rule 1: healthy for some backend service.
    for (neg, obs) in negs {
        for endpoint in endpoints_of(obs) {
            let healthy = endpoint
                .healths
                .iter()
                .find(|h| h.health_state == HEALTHY && !h.backend_service.is_empty());
            if let Some(h) = healthy {
                return NegCondition {
                    status: true,
                    reason: Reason::Ready,
                    message: format!(
                        "Pod has become Healthy in NEG \"{}\" attached to BackendService \"{}\". \
                         Marking condition \"{gate}\" to True.",
                        neg, h.backend_service
                    ),
                };
            }
        }
    }
    // Rule 2: an endpoint of a NEG that no backend service health-checks.
    for (neg, obs) in negs {
        let unchecked = obs.health_checked_by.as_ref().is_some_and(Vec::is_empty);
        if unchecked && endpoints_of(obs).iter().any(|e| e.healths.is_empty()) {
            return NegCondition {
                status: true,
                reason: Reason::WithoutHealthCheck,
                message: format!(
                    "Pod is in NEG \"{neg}\". NEG is not attached to any BackendService with \
                     health checking. Marking condition \"{gate}\" to True."
                ),
            };
        }
    }
    // Rule 3: in no readiness-gated NEG.
    if negs.is_empty() {
        return NegCondition {
            status: true,
            reason: Reason::Ready,
            message: format!(
                "Pod does not belong to any NEG. Marking condition \"{gate}\" to True."
            ),
        };
    }
    let names: Vec<String> = negs.keys().map(ToString::to_string).collect();
    let names = names.join(" ");
    // Rule 4: waited too long.
    let waited = now.duration_since(created);
    if waited >= SignedDuration::try_from(timeout).unwrap_or(SignedDuration::MAX) {
        return NegCondition {
            status: true,
            reason: Reason::Timeout,
            message: format!(
                "Timeout waiting for pod to become healthy in at least one of the NEG(s): \
                 [{names}]. Marking condition \"{gate}\" to True."
            ),
        };
    }
    NegCondition {
        status: false,
        reason: Reason::NotReady,
        message: format!(
            "Waiting for pod to become healthy in at least one of the NEG(s): [{names}]"
        ),
    }
}

/// Whether an endpoint of the Pod was listed with an empty `healths[]` while the backend
/// services using its NEG are unknown: the caller must read them before rule 2 can decide.
pub fn needs_backend_services(pod_ips: &[String], obs: &NegObservation) -> bool {
    obs.health_checked_by.is_none()
        && obs
            .endpoints
            .iter()
            .flatten()
            .any(|e| pod_ips.contains(&e.ip_address) && e.healths.is_empty())
}

/// Whether `existing` already says what `decided` says (status, reason and message), so no
/// patch is needed.
pub fn is_current(existing: Option<&PodCondition>, decided: &NegCondition) -> bool {
    existing.is_some_and(|c| {
        c.status == status_str(decided.status)
            && c.reason.as_deref() == Some(decided.reason.as_str())
            && c.message.as_deref() == Some(decided.message.as_str())
    })
}

/// `"True"` or `"False"`.
pub fn status_str(status: bool) -> &'static str {
    if status {
        "True"
    } else {
        "False"
    }
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
