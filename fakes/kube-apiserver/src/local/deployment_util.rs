//! PURE: the helpers the Deployment and ReplicaSet controllers share, ported from
//! kubernetes/kubernetes `pkg/controller/deployment/util/deployment_util.go` and
//! `pkg/api/v1/pod/util.go` (behaviour and unit cases; the code is our own):
//! - surge and unavailability from `maxSurge`/`maxUnavailable` (percentages of the desired
//!   replicas: surge rounds up, unavailability rounds down, and both zero means one may be
//!   unavailable: `ResolveFenceposts`);
//! - how many Pods the new ReplicaSet may have (`NewRSNewReplicas`);
//! - Pod availability: `Ready` (readiness gates included, since the kubelet folds them into
//!   `Ready`) held for `minReadySeconds`;
//! - the `pod-template-hash` of a template, template equality ignoring it, revisions and the
//!   Deployment conditions.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;

/// The label a Deployment adds to its ReplicaSets' selectors, templates and Pods.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// The revision annotation on Deployments and their ReplicaSets.
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// Earlier revisions a ReplicaSet held (rollbacks), comma-separated.
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
/// The Deployment's `spec.replicas` when the ReplicaSet was last scaled.
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
/// `spec.replicas + maxSurge` when the ReplicaSet was last scaled.
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";

/// Errors of the rollout parameters.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IntOrPercentError {
    /// A string that is not `N%`.
    #[error("invalid value for IntOrString: invalid type: string is not a percentage: {0:?}; use an integer or a string like \"25%\"")]
    NotAPercentage(String),
}

/// `GetScaledValueFromIntOrPercent`: an integer as is, `N%` of `total` rounded up or down.
///
/// Errors: [`IntOrPercentError::NotAPercentage`] for a string that is not `N%`.
pub fn scaled_value(
    value: Option<&IntOrString>,
    total: i32,
    round_up: bool,
) -> Result<i32, IntOrPercentError> {
    match value {
        None => Ok(0),
        Some(IntOrString::Int(n)) => Ok(*n),
        Some(IntOrString::String(s)) => {
            let percent: i64 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| IntOrPercentError::NotAPercentage(s.clone()))?;
            let product = percent * i64::from(total);
            let scaled = if round_up {
                (product + 99).div_euclid(100)
            } else {
                product.div_euclid(100)
            };
            Ok(scaled as i32)
        }
    }
}

/// `ResolveFenceposts`: (surge, unavailable) for `desired` replicas; surge rounds up,
/// unavailable rounds down, and when both are zero one replica may be unavailable.
///
/// Errors: a value that is neither an integer nor a percentage.
pub fn resolve_fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    desired: i32,
) -> Result<(i32, i32), IntOrPercentError> {
    let surge = scaled_value(max_surge, desired, true)?;
    let mut unavailable = scaled_value(max_unavailable, desired, false)?;
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    Ok((surge, unavailable))
}

/// `spec.replicas` (default 1).
pub fn replicas(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// Whether the Deployment rolls (the default) rather than recreates.
pub fn is_rolling_update(d: &Deployment) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        .is_none_or(|t| t == "RollingUpdate")
}

fn fenceposts(d: &Deployment) -> (i32, i32) {
    let rolling = d
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref());
    let default = IntOrString::String("25%".into());
    let surge = rolling
        .and_then(|r| r.max_surge.as_ref())
        .unwrap_or(&default);
    let unavailable = rolling
        .and_then(|r| r.max_unavailable.as_ref())
        .unwrap_or(&default);
    resolve_fenceposts(Some(surge), Some(unavailable), replicas(d)).unwrap_or((0, 1))
}

/// `MaxUnavailable`: how many of the desired replicas may be unavailable (0 for Recreate and
/// for zero replicas; never more than the replicas).
pub fn max_unavailable(d: &Deployment) -> i32 {
    if !is_rolling_update(d) || replicas(d) == 0 {
        return 0;
    }
    fenceposts(d).1.min(replicas(d))
}

/// `MaxSurge`: how many Pods above the desired replicas may exist (0 for Recreate).
pub fn max_surge(d: &Deployment) -> i32 {
    if !is_rolling_update(d) {
        return 0;
    }
    fenceposts(d).0
}

/// `spec.replicas` of a ReplicaSet (default 1).
pub fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// `status.availableReplicas` of a ReplicaSet.
pub fn rs_available(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

/// `NewRSNewReplicas`: the size the new ReplicaSet may grow to now. Rolling: up to
/// `replicas + maxSurge` Pods in all (`all_replicas`, the sum of every ReplicaSet's
/// `spec.replicas`) and never past `replicas`; Recreate: `replicas` at once.
pub fn new_rs_new_replicas(d: &Deployment, all_replicas: i32, new_rs_replicas: i32) -> i32 {
    let desired = replicas(d);
    if !is_rolling_update(d) {
        return desired;
    }
    let max_total = desired + max_surge(d);
    if all_replicas >= max_total {
        return new_rs_replicas;
    }
    let up = (max_total - all_replicas).min(desired - new_rs_replicas);
    new_rs_replicas + up
}

/// The Pod's `Ready` condition, when True: since when.
pub fn ready_since(pod: &Pod) -> Option<Timestamp> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| {
            c.last_transition_time
                .as_ref()
                .map_or(Timestamp::UNIX_EPOCH, |t| t.0)
        })
}

/// `IsPodAvailable`: Ready (the kubelet counts readiness gates into Ready) for at least
/// `min_ready_seconds` at `now`.
pub fn is_pod_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    let Some(since) = ready_since(pod) else {
        return false;
    };
    min_ready_seconds <= 0 || since.as_second() + i64::from(min_ready_seconds) <= now.as_second()
}

/// Seconds until a Ready Pod becomes available, when it is not yet.
pub fn seconds_until_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> Option<i64> {
    let since = ready_since(pod)?;
    let left = since.as_second() + i64::from(min_ready_seconds) - now.as_second();
    (min_ready_seconds > 0 && left > 0).then_some(left)
}

/// Whether a Pod counts as active: not terminating and not finished (`FilterActivePods`).
pub fn is_pod_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"))
}

/// The template without the `pod-template-hash` label, as JSON (for `EqualIgnoreHash`), with
/// null, `{}` and `[]` values dropped: a real server decodes into Go structs, where those are
/// the same as absent (kubectl's `rollout undo` sends `resources: {}` and
/// `creationTimestamp: null` that the stored ReplicaSet template does not have).
fn without_hash(t: &PodTemplateSpec) -> serde_json::Value {
    fn prune(v: &mut serde_json::Value) {
        if let Some(map) = v.as_object_mut() {
            for value in map.values_mut() {
                prune(value);
            }
            map.retain(|_, value| match value {
                serde_json::Value::Null => false,
                serde_json::Value::Object(m) => !m.is_empty(),
                serde_json::Value::Array(a) => !a.is_empty(),
                _ => true,
            });
        } else if let Some(items) = v.as_array_mut() {
            items.iter_mut().for_each(prune);
        }
    }
    let mut value = serde_json::to_value(t).unwrap_or_default();
    if let Some(labels) = value
        .pointer_mut("/metadata/labels")
        .and_then(serde_json::Value::as_object_mut)
    {
        labels.remove(POD_TEMPLATE_HASH);
    }
    prune(&mut value);
    value
}

/// `EqualIgnoreHash`: two templates are the same but for the `pod-template-hash` label.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    without_hash(a) == without_hash(b)
}

/// `ComputeHash`: the `pod-template-hash` of a template and collision count: FNV-1a (32 bit)
/// of its canonical JSON (and the count), written in the alphabet of `rand.SafeEncodeString`
/// (no vowels, no confusable characters). Our hashes differ from a real controller's, which
/// hashes Go's printing of the struct; their form is the same.
pub fn pod_template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut hash: u32 = 0x811c_9dc5;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u32::from(*b);
            hash = hash.wrapping_mul(0x0100_0193);
        }
    };
    feed(without_hash(template).to_string().as_bytes());
    if let Some(c) = collision_count {
        feed(&c.to_le_bytes());
    }
    hash.to_string()
        .bytes()
        .map(|d| ALPHABET[usize::from(d) % ALPHABET.len()] as char)
        .collect()
}

/// The `deployment.kubernetes.io/revision` of an object's annotations (0 when none).
pub fn revision(annotations: Option<&BTreeMap<String, String>>) -> i64 {
    annotations
        .and_then(|a| a.get(REVISION))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// The Deployment condition of `type_`.
pub fn condition<'a>(
    conditions: &'a [DeploymentCondition],
    type_: &str,
) -> Option<&'a DeploymentCondition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// `SetDeploymentCondition`: sets a condition unless one of the same status and reason is
/// there; keeps `lastTransitionTime` when only the reason or message changes.
pub fn set_condition(
    conditions: &mut Vec<DeploymentCondition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) {
    let mut new = DeploymentCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    };
    if let Some(current) = condition(conditions, type_) {
        if current.status == status && current.reason.as_deref() == Some(reason) {
            return;
        }
        if current.status == status {
            new.last_transition_time = current.last_transition_time.clone();
        }
    }
    conditions.retain(|c| c.type_ != type_);
    conditions.push(new);
}

/// The Progressing reason of a Deployment whose new ReplicaSet is fully available.
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
/// The Progressing reason of a Deployment past its `progressDeadlineSeconds`.
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";

/// Whether `progressDeadlineSeconds` is set and not "infinite" (`math.MaxInt32`).
pub fn has_progress_deadline(d: &Deployment) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)
        .is_some_and(|p| p != i32::MAX)
}

/// `DeploymentComplete`: every desired replica updated and available, none of an old
/// ReplicaSet left, and the latest generation observed.
pub fn deployment_complete(d: &Deployment, s: &DeploymentStatus) -> bool {
    let desired = replicas(d);
    s.updated_replicas.unwrap_or(0) == desired
        && s.replicas.unwrap_or(0) == desired
        && s.available_replicas.unwrap_or(0) == desired
        && s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

/// `DeploymentProgressing`: compared with the Deployment's current status, more updated,
/// ready or available replicas, or fewer old ones.
pub fn deployment_progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let n = |v: Option<i32>| v.unwrap_or(0);
    let old_old = n(old.replicas) - n(old.updated_replicas);
    let new_old = n(new.replicas) - n(new.updated_replicas);
    n(new.updated_replicas) > n(old.updated_replicas)
        || new_old < old_old
        || n(new.ready_replicas) > n(old.ready_replicas)
        || n(new.available_replicas) > n(old.available_replicas)
}

/// `DeploymentTimedOut`: the Progressing condition was last updated more than
/// `progressDeadlineSeconds` before `now` (never once the rollout completed).
pub fn deployment_timed_out(d: &Deployment, s: &DeploymentStatus, now: Timestamp) -> bool {
    if !has_progress_deadline(d) {
        return false;
    }
    let conditions = s.conditions.as_deref().unwrap_or_default();
    let Some(c) = condition(conditions, "Progressing") else {
        return false;
    };
    match c.reason.as_deref() {
        Some(NEW_RS_AVAILABLE) => return false,
        Some(TIMED_OUT) => return true,
        _ => {}
    }
    let deadline = i64::from(
        d.spec
            .as_ref()
            .and_then(|s| s.progress_deadline_seconds)
            .unwrap_or(600),
    );
    let from = c.last_update_time.as_ref().map_or(0, |t| t.0.as_second());
    from + deadline < now.as_second()
}

#[cfg(test)]
mod tests;
