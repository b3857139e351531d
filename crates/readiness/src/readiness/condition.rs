//! PURE: the Pod `/status` patch that writes the gate condition.
//!
//! A strategic merge patch: `status.conditions` has patch merge key `type` (Kubernetes API
//! `PodStatus.conditions`, `x-kubernetes-patch-merge-key: type`), so the patch replaces only
//! our condition and leaves the kubelet's (`Ready`, `ContainersReady`, ...) alone. A JSON merge
//! patch would replace the whole list.

use k8s_openapi::api::core::v1::PodCondition;
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Value};

use super::rules::{status_str, NegCondition, NEG_READINESS_GATE};

/// The strategic merge patch body for `pods/{name}/status`.
///
/// `lastTransitionTime` is `now` when the status changes (or the condition is new), else the
/// existing one, as Kubernetes conditions require.
pub fn status_patch(
    existing: Option<&PodCondition>,
    decided: &NegCondition,
    now: Timestamp,
) -> Value {
    let status = status_str(decided.status);
    let transition = existing
        .filter(|c| c.status == status)
        .and_then(|c| c.last_transition_time.as_ref())
        .map_or(now, |t| t.0);
    json!({
        "status": {
            "conditions": [{
                "type": NEG_READINESS_GATE,
                "status": status,
                "reason": decided.reason.as_str(),
                "message": decided.message,
                "lastTransitionTime": transition.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            }]
        }
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodCondition;
    use serde_json::json;

    use super::*;
    use crate::readiness::rules::Reason;

    fn decided(status: bool) -> NegCondition {
        NegCondition {
            status,
            reason: if status {
                Reason::Ready
            } else {
                Reason::NotReady
            },
            message: "msg".to_owned(),
        }
    }

    #[test]
    fn patch_lists_only_the_gate_condition() {
        let now: Timestamp = "2026-11-22T03:04:05Z".parse().unwrap();
        let patch = status_patch(None, &decided(true), now);
        assert_eq!(
            patch,
            json!({"status": {"conditions": [{
                "type": NEG_READINESS_GATE, "status": "True", "reason": "LoadBalancerNegReady",
                "message": "msg", "lastTransitionTime": "2026-11-22T03:04:05Z"}]}})
        );
    }

    #[test]
    fn transition_time_kept_while_status_stays() {
        let now: Timestamp = "2026-11-22T03:04:05Z".parse().unwrap();
        let existing: PodCondition = serde_json::from_value(json!({
            "type": NEG_READINESS_GATE, "status": "False",
            "lastTransitionTime": "2026-11-22T03:00:00Z"}))
        .unwrap();
        let same = status_patch(Some(&existing), &decided(false), now);
        assert_eq!(
            same["status"]["conditions"][0]["lastTransitionTime"],
            "2026-11-22T03:00:00Z"
        );
        let flipped = status_patch(Some(&existing), &decided(true), now);
        assert_eq!(
            flipped["status"]["conditions"][0]["lastTransitionTime"],
            "2026-11-22T03:04:05Z"
        );
    }
}
