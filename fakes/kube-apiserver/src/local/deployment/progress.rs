//! A Deployment's `status` (upstream `progress.go` and `sync.go` `calculateStatus`,
//! `syncRolloutStatus`): the replica counts summed over its ReplicaSets, and the conditions
//! - `Available`: True (`MinimumReplicasAvailable`) while at least `replicas - maxUnavailable`
//!   Pods are available, else False (`MinimumReplicasUnavailable`);
//! - `Progressing` (only with a `progressDeadlineSeconds`): True `NewReplicaSetCreated` /
//!   `FoundNewReplicaSet` / `ReplicaSetUpdated` while the rollout moves, True
//!   `NewReplicaSetAvailable` once complete, False `ProgressDeadlineExceeded` when it has not
//!   moved for `progressDeadlineSeconds`, Unknown `DeploymentPaused` / `DeploymentResumed`.
//!
//! `kubectl rollout status` reads exactly these (reference kube-api-v1.36, DeploymentStatus).

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet};
use k8s_openapi::jiff::Timestamp;
use kube::api::Patch;
use kube::ResourceExt;
use serde_json::json;

use super::super::deployment_util::{self as util, NEW_RS_AVAILABLE, TIMED_OUT};
use super::sync::{DeploymentError, DeploymentSync};

/// `calculateStatus`: counts over every ReplicaSet and the Available condition.
pub(super) fn calculate(
    sync: &DeploymentSync<'_>,
    new: Option<&ReplicaSet>,
    old: &[ReplicaSet],
) -> DeploymentStatus {
    let d = &sync.d;
    let all: Vec<&ReplicaSet> = old.iter().chain(new).collect();
    let sum = |f: &dyn Fn(&ReplicaSet) -> i32| -> i32 { all.iter().map(|rs| f(rs)).sum() };
    let status_of = |rs: &ReplicaSet| rs.status.clone().unwrap_or_default();
    let available = sum(&|rs| util::rs_available(rs));
    let total = sum(&|rs| util::rs_replicas(rs));
    let mut conditions = d
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let now = Timestamp::now();
    if available >= util::replicas(d) - util::max_unavailable(d) {
        util::set_condition(
            &mut conditions,
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.".into(),
            now,
        );
    } else {
        util::set_condition(
            &mut conditions,
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.".into(),
            now,
        );
    }
    let nonzero = |n: i32| (n != 0).then_some(n);
    DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: nonzero(sum(&|rs| status_of(rs).replicas)),
        updated_replicas: nonzero(new.map_or(0, |rs| status_of(rs).replicas)),
        ready_replicas: nonzero(sum(&|rs| status_of(rs).ready_replicas.unwrap_or(0))),
        available_replicas: nonzero(available),
        unavailable_replicas: nonzero((total - available).max(0)),
        collision_count: d.status.as_ref().and_then(|s| s.collision_count),
        conditions: Some(conditions),
        terminating_replicas: None,
    }
}

/// Writes the status; with `rollout`, moves the Progressing condition as the rollout does
/// (`syncRolloutStatus`). Returns when to look again (the progress deadline).
pub(super) async fn sync_status(
    sync: &DeploymentSync<'_>,
    new: Option<&ReplicaSet>,
    old: &[ReplicaSet],
    rollout: bool,
) -> Result<Option<Duration>, DeploymentError> {
    let d = &sync.d;
    let mut status = calculate(sync, new, old);
    let now = Timestamp::now();
    let mut conditions = status.conditions.take().unwrap_or_default();
    let paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
    let mut requeue = None;
    if util::has_progress_deadline(d) {
        let reason = util::condition(&conditions, "Progressing").and_then(|c| c.reason.clone());
        if paused && reason.as_deref() != Some("DeploymentPaused") {
            util::set_condition(
                &mut conditions,
                "Progressing",
                "Unknown",
                "DeploymentPaused",
                "Deployment is paused".into(),
                now,
            );
        } else if !paused && reason.as_deref() == Some("DeploymentPaused") {
            util::set_condition(
                &mut conditions,
                "Progressing",
                "Unknown",
                "DeploymentResumed",
                "Deployment is resumed".into(),
                now,
            );
        }
    } else {
        conditions.retain(|c| c.type_ != "Progressing");
    }
    if rollout && !paused && util::has_progress_deadline(d) {
        let current = util::condition(&conditions, "Progressing").cloned();
        let complete = status.replicas == status.updated_replicas
            && current.as_ref().and_then(|c| c.reason.as_deref()) == Some(NEW_RS_AVAILABLE);
        let new_name = new.map(|rs| rs.name_any());
        if !complete {
            let with_conditions = DeploymentStatus {
                conditions: Some(conditions.clone()),
                ..status.clone()
            };
            if util::deployment_complete(d, &with_conditions) {
                let message = format!(
                    "ReplicaSet \"{}\" has successfully progressed.",
                    new_name.unwrap_or_default()
                );
                util::set_condition(
                    &mut conditions,
                    "Progressing",
                    "True",
                    NEW_RS_AVAILABLE,
                    message,
                    now,
                );
            } else if util::deployment_progressing(d, &with_conditions) || current.is_none() {
                let message = match &new_name {
                    Some(n) => format!("ReplicaSet \"{n}\" is progressing."),
                    None => format!("Deployment \"{}\" is progressing.", d.name_any()),
                };
                let reason = if current.is_none() && new.is_some() {
                    "NewReplicaSetCreated"
                } else {
                    "ReplicaSetUpdated"
                };
                // A moving rollout refreshes lastUpdateTime (the deadline restarts).
                conditions.retain(|c| c.type_ != "Progressing");
                util::set_condition(&mut conditions, "Progressing", "True", reason, message, now);
                if let (Some(old), Some(c)) = (current.as_ref(), conditions.last_mut()) {
                    if old.status == "True" {
                        c.last_transition_time = old.last_transition_time.clone();
                    }
                }
            } else if util::deployment_timed_out(d, &with_conditions, now) {
                let message = format!(
                    "ReplicaSet \"{}\" has timed out progressing.",
                    new_name.unwrap_or_default()
                );
                util::set_condition(
                    &mut conditions,
                    "Progressing",
                    "False",
                    TIMED_OUT,
                    message,
                    now,
                );
            }
            // Not done: look again when the deadline would pass (`requeueStuckDeployment`).
            if let Some(c) = util::condition(&conditions, "Progressing") {
                if c.status == "True" && c.reason.as_deref() != Some(NEW_RS_AVAILABLE) {
                    let deadline = d
                        .spec
                        .as_ref()
                        .and_then(|s| s.progress_deadline_seconds)
                        .unwrap_or(600);
                    let from = c
                        .last_update_time
                        .as_ref()
                        .map_or(now.as_second(), |t| t.0.as_second());
                    let left = (from + i64::from(deadline) - now.as_second()).max(0) as u64;
                    requeue = Some(Duration::from_secs(left + 1));
                }
            }
        }
    }
    status.conditions = Some(conditions);
    write(sync, d, status).await?;
    Ok(requeue)
}

async fn write(
    sync: &DeploymentSync<'_>,
    d: &Deployment,
    status: DeploymentStatus,
) -> Result<(), DeploymentError> {
    let current = d.status.clone().unwrap_or_default();
    if current == status {
        return Ok(());
    }
    let mut value = serde_json::to_value(&status).unwrap_or_default();
    // Counts that dropped to zero are removed (a merge patch null), as omitempty stores them.
    for field in [
        "replicas",
        "updatedReplicas",
        "readyReplicas",
        "availableReplicas",
        "unavailableReplicas",
    ] {
        if value.get(field).is_none() {
            value[field] = serde_json::Value::Null;
        }
    }
    sync.d_api
        .patch_status(
            &d.name_any(),
            &DeploymentSync::params(),
            &Patch::Merge(json!({"status": value})),
        )
        .await
        .map_err(sync.error("writing status"))?;
    Ok(())
}
