//! Target HTTP proxies (`compute.targetHttpProxies`). Only the URL map can change on an existing
//! proxy, through the `setUrlMap` verb.

use google_cloud_compute_v1::model;

use super::{record, Action, Changes, SyncError, MAX_CONFLICT_RETRIES};
use crate::compute::reference::normalize;
use crate::compute::{Compute, ErrorKind};

/// Event kind (GKE: `TargetProxy "x" created`).
pub const KIND: &str = "TargetProxy";

/// Inserts the proxy, or points it at the desired URL map with `setUrlMap`.
pub async fn ensure(
    compute: &Compute,
    desired: &model::TargetHttpProxy,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let project = compute.project();
    let name = desired.name.as_deref().unwrap_or_default();
    let want = desired.url_map.as_deref().unwrap_or_default();
    for _ in 0..MAX_CONFLICT_RETRIES {
        let observed = compute
            .get_target_http_proxy(name)
            .await
            .map_err(|e| SyncError::compute(KIND, name, e))?;
        let Some(observed) = observed else {
            match compute.insert_target_http_proxy(desired).await {
                Ok(()) => {
                    record(changes, KIND, name, Action::Created);
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(SyncError::compute(KIND, name, e)),
            }
        };
        let have = observed.url_map.as_deref().unwrap_or_default();
        if normalize(project, have) == normalize(project, want) {
            return Ok(());
        }
        let body = model::UrlMapReference::new().set_url_map(want);
        compute
            .set_target_http_proxy_url_map(name, &body)
            .await
            .map_err(|e| SyncError::compute(KIND, name, e))?;
        record(changes, KIND, name, Action::Updated);
        return Ok(());
    }
    Err(SyncError::Conflict {
        kind: KIND,
        name: name.to_string(),
        attempts: MAX_CONFLICT_RETRIES,
    })
}

/// Deletes the proxy; gone already is fine.
pub async fn delete(compute: &Compute, name: &str, changes: &mut Changes) -> Result<(), SyncError> {
    super::remove(
        KIND,
        name,
        || compute.delete_target_http_proxy(name),
        changes,
    )
    .await
}
