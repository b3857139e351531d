//! How a Deployment moves between ReplicaSets (upstream `rolling.go`, `recreate.go`, `sync.go`):
//! - RollingUpdate: grow the new ReplicaSet while all Pods stay within `replicas + maxSurge`,
//!   then shrink the old ones (unhealthy Pods first) while the available Pods stay at least
//!   `replicas - maxUnavailable`;
//! - Recreate: scale every old ReplicaSet to zero, wait until none of their Pods runs, then
//!   create the new ReplicaSet at full size;
//! - paused, or `spec.replicas` changed (a scaling event): only resize, proportionally to each
//!   active ReplicaSet's share of `max-replicas` (`scale` in `sync.go`).

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};

use super::super::deployment_util as util;
use super::progress;
use super::sync::{cleanup, new_replica_set, split_new_and_old, DeploymentError, DeploymentSync};

/// `isScalingEvent`: an active ReplicaSet was last sized for another `spec.replicas`.
pub(super) fn is_scaling_event(d: &Deployment, owned: &[ReplicaSet]) -> bool {
    let desired = util::replicas(d).to_string();
    owned
        .iter()
        .filter(|rs| util::rs_replicas(rs) > 0)
        .filter_map(|rs| {
            rs.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(util::DESIRED_REPLICAS))
        })
        .any(|v| *v != desired)
}

fn total(sets: &[ReplicaSet]) -> i32 {
    sets.iter().map(util::rs_replicas).sum()
}

/// `sync`: resize only (paused Deployments and scaling events), clean up when paused, status.
pub(super) async fn sync_only(
    sync: &DeploymentSync<'_>,
    owned: Vec<ReplicaSet>,
    paused: bool,
) -> Result<Option<Duration>, DeploymentError> {
    let (existing, mut old) = split_new_and_old(&sync.d, owned);
    let mut new = new_replica_set(sync, existing, &old, false).await?;
    scale(sync, new.as_mut(), &mut old).await?;
    if paused {
        cleanup(sync, &old).await?;
    }
    progress::sync_status(sync, new.as_ref(), &old, false).await
}

/// `rolloutRolling`.
pub(super) async fn rollout_rolling(
    sync: &DeploymentSync<'_>,
    owned: Vec<ReplicaSet>,
) -> Result<Option<Duration>, DeploymentError> {
    let (existing, mut old) = split_new_and_old(&sync.d, owned);
    let Some(mut new) = new_replica_set(sync, existing, &old, true).await? else {
        return Ok(Some(Duration::from_millis(200)));
    };
    let d = &sync.d;
    let desired = util::replicas(d);
    // reconcileNewReplicaSet
    let new_size = util::rs_replicas(&new);
    let target = if new_size > desired {
        desired
    } else {
        let all = total(&old) + new_size;
        util::new_rs_new_replicas(d, all, new_size)
    };
    if target != new_size && sync.scale(&mut new, target).await? {
        return progress::sync_status(sync, Some(&new), &old, true).await;
    }
    // reconcileOldReplicaSets
    if reconcile_old(sync, &new, &mut old).await? {
        return progress::sync_status(sync, Some(&new), &old, true).await;
    }
    let status = progress::calculate(sync, Some(&new), &old);
    if util::deployment_complete(d, &status) {
        cleanup(sync, &old).await?;
    }
    progress::sync_status(sync, Some(&new), &old, true).await
}

/// `reconcileOldReplicaSets`: true when an old ReplicaSet was scaled down.
async fn reconcile_old(
    sync: &DeploymentSync<'_>,
    new: &ReplicaSet,
    old: &mut [ReplicaSet],
) -> Result<bool, DeploymentError> {
    let d = &sync.d;
    let old_count = total(old);
    if old_count == 0 {
        return Ok(false);
    }
    let all_count = old_count + util::rs_replicas(new);
    let min_available = util::replicas(d) - util::max_unavailable(d);
    let new_unavailable = util::rs_replicas(new) - util::rs_available(new);
    let max_scaled_down = all_count - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return Ok(false);
    }
    // cleanupUnhealthyReplicas: old Pods that are not available go first.
    old.sort_by_key(|rs| rs.metadata.creation_timestamp.as_ref().map(|t| t.0));
    let mut cleaned = 0;
    for rs in old.iter_mut() {
        if cleaned >= max_scaled_down {
            break;
        }
        let size = util::rs_replicas(rs);
        if size == 0 {
            continue;
        }
        let unhealthy = size - util::rs_available(rs);
        if unhealthy <= 0 {
            continue;
        }
        let down = (max_scaled_down - cleaned).min(unhealthy);
        sync.scale(rs, size - down).await?;
        cleaned += down;
    }
    // scaleDownOldReplicaSetsForRollingUpdate: then available ones, down to minAvailable.
    let available: i32 = old.iter().map(util::rs_available).sum::<i32>() + util::rs_available(new);
    let mut scaled = 0;
    if available > min_available {
        let allowed = available - min_available;
        for rs in old.iter_mut() {
            if scaled >= allowed {
                break;
            }
            let size = util::rs_replicas(rs);
            if size == 0 {
                continue;
            }
            let down = size.min(allowed - scaled);
            sync.scale(rs, size - down).await?;
            scaled += down;
        }
    }
    Ok(cleaned + scaled > 0)
}

/// `rolloutRecreate`.
pub(super) async fn rollout_recreate(
    sync: &DeploymentSync<'_>,
    owned: Vec<ReplicaSet>,
) -> Result<Option<Duration>, DeploymentError> {
    let (existing, mut old) = split_new_and_old(&sync.d, owned);
    let mut new = new_replica_set(sync, existing, &old, false).await?;
    let mut scaled_down = false;
    for rs in old.iter_mut().filter(|rs| util::rs_replicas(rs) > 0) {
        scaled_down |= sync.scale(rs, 0).await?;
    }
    if scaled_down {
        return progress::sync_status(sync, new.as_ref(), &old, true).await;
    }
    // oldPodsRunning: wait until no Pod of an old ReplicaSet runs (terminating ones count).
    let old_running = old
        .iter()
        .any(|rs| rs.status.as_ref().is_some_and(|s| s.replicas > 0))
        || sync.pods_of(&old).iter().any(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        });
    if old_running {
        return progress::sync_status(sync, new.as_ref(), &old, true).await;
    }
    if new.is_none() {
        new = new_replica_set(sync, None, &old, true).await?;
    }
    if let Some(rs) = new.as_mut() {
        let desired = util::replicas(&sync.d);
        if util::rs_replicas(rs) != desired {
            sync.scale(rs, desired).await?;
        }
    }
    let status = progress::calculate(sync, new.as_ref(), &old);
    if util::deployment_complete(&sync.d, &status) {
        cleanup(sync, &old).await?;
    }
    progress::sync_status(sync, new.as_ref(), &old, true).await
}

/// `scale`: resize for a new `spec.replicas`.
async fn scale(
    sync: &DeploymentSync<'_>,
    new: Option<&mut ReplicaSet>,
    old: &mut [ReplicaSet],
) -> Result<(), DeploymentError> {
    let d = &sync.d;
    let desired = util::replicas(d);
    let mut all: Vec<&mut ReplicaSet> = old.iter_mut().collect();
    let new_index = new.map(|rs| {
        all.push(rs);
        all.len() - 1
    });
    let active: Vec<usize> = (0..all.len())
        .filter(|i| util::rs_replicas(all[*i]) > 0)
        .collect();
    // FindActiveOrLatest: one active ReplicaSet (or none: the new, else the newest) takes all.
    let only = match active.as_slice() {
        [] => new_index.or_else(|| {
            (0..all.len()).max_by_key(|i| all[*i].metadata.creation_timestamp.as_ref().map(|t| t.0))
        }),
        [one] => Some(*one),
        _ => None,
    };
    if let Some(i) = only {
        if util::rs_replicas(all[i]) != desired {
            sync.scale(all[i], desired).await?;
        }
        return Ok(());
    }
    // IsSaturated: the new ReplicaSet alone is full and available; the old ones go.
    if let Some(n) = new_index {
        let rs = &all[n];
        let annotated = rs
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(util::DESIRED_REPLICAS))
            .and_then(|v| v.parse::<i32>().ok());
        if util::rs_replicas(rs) == desired
            && annotated == Some(desired)
            && util::rs_available(rs) == desired
        {
            for (i, rs) in all.iter_mut().enumerate() {
                if i != n && util::rs_replicas(rs) > 0 {
                    sync.scale(rs, 0).await?;
                }
            }
            return Ok(());
        }
    }
    if !util::is_rolling_update(d) {
        return Ok(());
    }
    let allowed = if desired > 0 {
        desired + util::max_surge(d)
    } else {
        0
    };
    let current: i32 = active.iter().map(|i| util::rs_replicas(all[*i])).sum();
    let to_add = allowed - current;
    // Larger first; newer first when growing, older first when shrinking.
    let mut order = active.clone();
    order.sort_by_key(|i| {
        let created = all[*i]
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| t.0.as_second());
        (
            -util::rs_replicas(all[*i]),
            if to_add > 0 { -created } else { created },
        )
    });
    let mut sizes: Vec<(usize, i32)> = Vec::new();
    let mut added = 0;
    for i in &order {
        let rs = &all[*i];
        let size = util::rs_replicas(rs);
        let proportion = if to_add == 0 || to_add == added {
            0
        } else {
            let fraction = fraction(rs, d);
            let left = to_add - added;
            if to_add > 0 {
                fraction.min(left)
            } else {
                fraction.max(left)
            }
        };
        added += proportion;
        sizes.push((*i, size + proportion));
    }
    if let Some(first) = sizes.first_mut() {
        first.1 = (first.1 + to_add - added).max(0);
    }
    for (i, size) in sizes {
        sync.scale(all[i], size).await?;
    }
    Ok(())
}

/// `getReplicaSetFraction`: the change of one ReplicaSet's size in proportion to its share of
/// the size it was made for (`max-replicas`).
fn fraction(rs: &ReplicaSet, d: &Deployment) -> i32 {
    let desired = util::replicas(d);
    if desired == 0 {
        return -util::rs_replicas(rs);
    }
    let target = desired + util::max_surge(d);
    let annotated = rs
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(util::MAX_REPLICAS))
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or_else(|| d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0));
    if annotated == 0 {
        return 0;
    }
    let size = util::rs_replicas(rs);
    let scaled = (f64::from(size) * f64::from(target) / f64::from(annotated)).round() as i32;
    scaled - size
}
