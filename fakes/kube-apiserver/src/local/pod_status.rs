//! PURE: the Pod status the local kubelet owns, and the strategic merge patch that writes it.
//!
//! Conditions follow the kubelet (`GenerateContainersReadyCondition`,
//! `GeneratePodReadyCondition`) and reference 000_8e2dd831946c5b72.txt ("Pod readiness"):
//! `ContainersReady` is True when every container is ready; `Ready` is True when
//! `ContainersReady` is True AND every `spec.readinessGates[].conditionType` has a condition
//! with status True. The gate conditions themselves belong to other writers (e.g. the operator's
//! readiness-gate controller): the patch lists only the kubelet's condition types, and a
//! strategic merge patch merges `status.conditions` by `type`, so others' conditions survive.

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{json, Value};

/// The condition types the kubelet writes.
pub const KUBELET_CONDITIONS: [&str; 5] = [
    "PodReadyToStartContainers",
    "Initialized",
    "ContainersReady",
    "Ready",
    "PodScheduled",
];

/// What the kubelet knows about a running local Pod.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalPodState {
    /// The Pod IP (loopback IPv4).
    pub pod_ip: String,
    /// The node address (`127.0.0.1`).
    pub host_ip: String,
    /// When the kubelet started the Pod (`status.startTime`, also each container's `startedAt`).
    pub start_time: Time,
    /// Readiness per container, in `spec.containers` order: `(name, ready)`.
    pub containers_ready: Vec<(String, bool)>,
}

/// The `ContainersReady` and `Ready` conditions as `(type, status, reason, message)`.
pub fn readiness_conditions(
    pod: &Pod,
    containers_ready: &[(String, bool)],
) -> [(String, bool, String, String); 2] {
    let unready: Vec<&str> = containers_ready
        .iter()
        .filter(|(_, r)| !r)
        .map(|(n, _)| n.as_str())
        .collect();
    let containers = if unready.is_empty() {
        (
            "ContainersReady".to_string(),
            true,
            String::new(),
            String::new(),
        )
    } else {
        (
            "ContainersReady".to_string(),
            false,
            "ContainersNotReady".to_string(),
            format!("containers with unready status: [{}]", unready.join(" ")),
        )
    };
    let ready = if !containers.1 {
        (
            "Ready".to_string(),
            false,
            containers.2.clone(),
            containers.3.clone(),
        )
    } else {
        match unmet_gate_message(pod) {
            Some(message) => (
                "Ready".to_string(),
                false,
                "ReadinessGatesNotReady".to_string(),
                message,
            ),
            None => ("Ready".to_string(), true, String::new(), String::new()),
        }
    };
    [containers, ready]
}

/// The kubelet's message for the first readiness gate that is not True, or `None` when all are.
pub fn unmet_gate_message(pod: &Pod) -> Option<String> {
    let gates = pod.spec.as_ref().and_then(|s| s.readiness_gates.as_ref())?;
    let conditions = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let mut messages = Vec::new();
    for gate in gates {
        match conditions.iter().find(|c| c.type_ == gate.condition_type) {
            None => messages.push(format!(
                "corresponding condition of pod readiness gate \"{}\" does not exist.",
                gate.condition_type
            )),
            Some(c) if c.status != "True" => messages.push(format!(
                "the status of pod readiness gate \"{}\" is not \"True\", but {}",
                gate.condition_type, c.status
            )),
            Some(_) => {}
        }
    }
    (!messages.is_empty()).then(|| messages.join(", "))
}

/// The status patch (`{"status": {...}}`, strategic merge) that brings the Pod's
/// kubelet-owned status to `state`, or `None` when it already matches (so an unchanged Pod
/// causes no write). `now` stamps conditions whose status changes; unchanged conditions keep
/// their `lastTransitionTime`.
pub fn status_patch(pod: &Pod, state: &LocalPodState, now: &Time) -> Option<Value> {
    let status = pod.status.clone().unwrap_or_default();
    let existing = status.conditions.clone().unwrap_or_default();
    let [containers, ready] = readiness_conditions(pod, &state.containers_ready);
    let fixed = |t: &str| (t.to_string(), true, String::new(), String::new());
    let wanted = [
        fixed("PodReadyToStartContainers"),
        fixed("Initialized"),
        containers,
        ready,
        fixed("PodScheduled"),
    ];
    let conditions: Vec<PodCondition> = wanted
        .into_iter()
        .map(|(type_, ok, reason, message)| {
            let status_word = if ok { "True" } else { "False" };
            let previous = existing.iter().find(|c| c.type_ == type_);
            let last_transition_time = match previous {
                Some(p) if p.status == status_word && p.last_transition_time.is_some() => {
                    p.last_transition_time.clone()
                }
                _ => Some(now.clone()),
            };
            PodCondition {
                type_,
                status: status_word.to_string(),
                reason: (!reason.is_empty()).then_some(reason),
                message: (!message.is_empty()).then_some(message),
                last_transition_time,
                ..PodCondition::default()
            }
        })
        .collect();

    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let container_statuses: Vec<Value> = containers
        .iter()
        .map(|c| {
            let ready = state
                .containers_ready
                .iter()
                .any(|(n, r)| n == &c.name && *r);
            json!({
                "name": c.name,
                "image": c.image.clone().unwrap_or_default(),
                "imageID": format!("local://{}", c.image.as_deref().unwrap_or_default()),
                "containerID": format!("local://{uid}/{}", c.name),
                "ready": ready,
                "started": true,
                "restartCount": 0,
                "state": {"running": {"startedAt": state.start_time}},
            })
        })
        .collect();

    let conditions_match = conditions.iter().all(|want| {
        existing.iter().any(|have| {
            have.type_ == want.type_
                && have.status == want.status
                && have.reason == want.reason
                && have.message == want.message
        })
    });
    let statuses_match =
        serde_json::to_value(status.container_statuses.clone().unwrap_or_default())
            .ok()
            .is_some_and(|have| container_statuses_match(&have, &container_statuses));
    let fields_match = status.phase.as_deref() == Some("Running")
        && status.pod_ip.as_deref() == Some(state.pod_ip.as_str())
        && status.host_ip.as_deref() == Some(state.host_ip.as_str())
        && status.start_time.is_some();
    if conditions_match && statuses_match && fields_match {
        return None;
    }
    Some(json!({
        "status": {
            "phase": "Running",
            "hostIP": state.host_ip,
            "hostIPs": [{"ip": state.host_ip}],
            "podIP": state.pod_ip,
            "podIPs": [{"ip": state.pod_ip}],
            "startTime": status.start_time.clone().unwrap_or_else(|| state.start_time.clone()),
            "qosClass": "BestEffort",
            "conditions": conditions,
            "containerStatuses": container_statuses,
        }
    }))
}

fn container_statuses_match(have: &Value, want: &[Value]) -> bool {
    let Some(have) = have.as_array() else {
        return false;
    };
    have.len() == want.len()
        && want.iter().all(|w| {
            have.iter().any(|h| {
                h.get("name") == w.get("name")
                    && h.get("ready") == w.get("ready")
                    && h.get("containerID") == w.get("containerID")
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(extra: Value) -> Pod {
        let mut v = json!({
            "metadata": {"name": "a", "namespace": "default", "uid": "u1"},
            "spec": {"containers": [{"name": "app", "image": "echo"}, {"name": "side", "image": "echo"}]}
        });
        json_patch::merge(&mut v, &extra);
        serde_json::from_value(v).unwrap()
    }

    fn state(ready: &[bool]) -> LocalPodState {
        LocalPodState {
            pod_ip: "127.64.0.9".to_string(),
            host_ip: "127.0.0.1".to_string(),
            start_time: Time("2026-01-01T00:00:00Z".parse().unwrap()),
            containers_ready: ["app", "side"]
                .iter()
                .zip(ready)
                .map(|(n, r)| (n.to_string(), *r))
                .collect(),
        }
    }

    fn now() -> Time {
        Time("2026-01-01T00:00:05Z".parse().unwrap())
    }

    fn apply(pod: &Pod, patch: &Value) -> Pod {
        // Merges conditions by type like the server's strategic merge patch does.
        let mut next = pod.clone();
        let new: Pod =
            serde_json::from_value(json!({"metadata": {}, "status": patch["status"].clone()}))
                .unwrap();
        let mut status = next.status.take().unwrap_or_default();
        let mut conds = status.conditions.take().unwrap_or_default();
        for c in new.status.clone().unwrap().conditions.unwrap() {
            conds.retain(|o| o.type_ != c.type_);
            conds.push(c);
        }
        let mut merged = new.status.unwrap();
        merged.conditions = Some(conds);
        next.status = Some(merged);
        next
    }

    fn condition(pod: &Pod, t: &str) -> PodCondition {
        pod.status
            .as_ref()
            .unwrap()
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == t)
            .unwrap()
            .clone()
    }

    #[test]
    fn all_containers_ready_makes_pod_ready() {
        let p = pod(json!({}));
        let patch = status_patch(&p, &state(&[true, true]), &now()).unwrap();
        let p = apply(&p, &patch);
        assert_eq!(condition(&p, "ContainersReady").status, "True");
        assert_eq!(condition(&p, "Ready").status, "True");
        assert_eq!(condition(&p, "PodScheduled").status, "True");
        assert_eq!(patch["status"]["podIP"], "127.64.0.9");
        assert_eq!(patch["status"]["phase"], "Running");
        // Applied once, the same state needs no further write.
        assert_eq!(status_patch(&p, &state(&[true, true]), &now()), None);
    }

    #[test]
    fn an_unready_container_names_itself() {
        let p = pod(json!({}));
        let p = apply(
            &p,
            &status_patch(&p, &state(&[true, false]), &now()).unwrap(),
        );
        let ready = condition(&p, "Ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_deref()),
            ("False", Some("ContainersNotReady"))
        );
        assert_eq!(
            ready.message.as_deref(),
            Some("containers with unready status: [side]")
        );
    }

    #[test]
    fn readiness_gate_holds_ready_until_true_and_gate_condition_survives() {
        let gate = "cloud.google.com/load-balancer-neg-ready";
        let p = pod(json!({"spec": {"readinessGates": [{"conditionType": gate}]}}));
        let p = apply(
            &p,
            &status_patch(&p, &state(&[true, true]), &now()).unwrap(),
        );
        assert_eq!(condition(&p, "ContainersReady").status, "True");
        let ready = condition(&p, "Ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_deref()),
            ("False", Some("ReadinessGatesNotReady"))
        );
        assert!(ready.message.unwrap().contains("does not exist"));

        // Another writer sets the gate False, then True.
        let mut gated = p.clone();
        gated
            .status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()
            .push(PodCondition {
                type_: gate.to_string(),
                status: "False".to_string(),
                ..PodCondition::default()
            });
        assert_eq!(
            status_patch(&gated, &state(&[true, true]), &now())
                .map(|p| p["status"]["conditions"][3]["message"].clone()),
            Some(json!(format!(
                "the status of pod readiness gate \"{gate}\" is not \"True\", but False"
            )))
        );
        for c in gated.status.as_mut().unwrap().conditions.as_mut().unwrap() {
            if c.type_ == gate {
                c.status = "True".to_string();
            }
        }
        let patch = status_patch(&gated, &state(&[true, true]), &now()).unwrap();
        let written: Vec<&str> = patch["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert!(
            !written.contains(&gate),
            "the kubelet must not write the gate condition"
        );
        let after = apply(&gated, &patch);
        assert_eq!(condition(&after, "Ready").status, "True");
        assert_eq!(condition(&after, gate).status, "True");
    }

    #[test]
    fn transition_time_changes_only_with_status() {
        let p = pod(json!({}));
        let p = apply(
            &p,
            &status_patch(&p, &state(&[false, true]), &now()).unwrap(),
        );
        let later = Time("2026-01-01T00:01:00Z".parse().unwrap());
        let patch = status_patch(&p, &state(&[true, true]), &later).unwrap();
        let p2 = apply(&p, &patch);
        assert_eq!(condition(&p2, "Ready").last_transition_time, Some(later));
        assert_eq!(
            condition(&p2, "PodScheduled").last_transition_time,
            Some(now())
        );
    }
}
