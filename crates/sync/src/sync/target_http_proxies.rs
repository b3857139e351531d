//! Target HTTP proxies (`compute.targetHttpProxies`). Only the URL map can change on an existing
//! proxy, through the `setUrlMap` verb.
//!
//! The `*_regional` functions, for the regional load balancers of internal and regional
//! external Ingresses:
//! Regional target HTTP proxies (`compute.regionTargetHttpProxies`) of internal load
//! balancers. An existing proxy is pointed at its URL map with `setUrlMap` when that differs.

use google_cloud_compute_v1::model;

use super::{record, Action, Changes, SyncError, MAX_CONFLICT_RETRIES};
use crate::compute::reference::normalize;
use crate::compute::{Compute, ErrorKind};

/// Event kind (GKE: `TargetProxy "x" created`).
pub const KIND: &str = "TargetProxy";

/// Inserts the proxy, or points it at the desired URL map with `setUrlMap` (observed from the
/// state cache; what was written is recorded there).
pub async fn ensure(
    compute: &Compute,
    desired: &model::TargetHttpProxy,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let project = compute.project();
    let name = desired.name.as_deref().unwrap_or_default();
    let want = desired.url_map.as_deref().unwrap_or_default();
    let err = |e| SyncError::compute(KIND, name, e);
    let mut observed = compute
        .observed::<model::TargetHttpProxy>(name)
        .await
        .map_err(err)?;
    for _ in 0..MAX_CONFLICT_RETRIES {
        let Some(found) = observed.take() else {
            match compute.insert_target_http_proxy(desired).await {
                Ok(()) => {
                    compute.record(name, Some(desired.clone()));
                    record(changes, KIND, name, Action::Created);
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    observed = compute.refetch(name).await.map_err(err)?;
                    continue;
                }
                Err(e) => return Err(err(e)),
            }
        };
        let have = found.url_map.as_deref().unwrap_or_default();
        if normalize(project, have) == normalize(project, want) {
            return Ok(());
        }
        let body = model::UrlMapReference::new().set_url_map(want);
        match compute.set_target_http_proxy_url_map(name, &body).await {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {
                compute.record::<model::TargetHttpProxy>(name, None);
                continue;
            }
            Err(e) => return Err(err(e)),
        }
        let mut now = (*found).clone();
        now.url_map = Some(want.to_string());
        compute.record(name, Some(now));
        record(changes, KIND, name, Action::Updated);
        return Ok(());
    }
    Err(SyncError::Conflict {
        kind: KIND,
        name: name.to_string(),
        attempts: MAX_CONFLICT_RETRIES,
    })
}

/// Deletes the proxy when it is known to exist; gone already is fine.
pub async fn delete(compute: &Compute, name: &str, changes: &mut Changes) -> Result<(), SyncError> {
    super::remove_observed::<model::TargetHttpProxy, _, _>(
        compute,
        KIND,
        name,
        || compute.delete_target_http_proxy(name),
        changes,
    )
    .await
}

// In a region: read with `get` per sync, not through the global state cache.

/// Inserts the proxy in `region` or brings its URL map in line.
pub async fn ensure_regional(
    compute: &Compute,
    region: &str,
    desired: &model::TargetHttpProxy,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let project = compute.project();
    let name = desired.name.as_deref().unwrap_or_default();
    let err = |e| SyncError::compute(KIND, name, e);
    let Some(observed) = compute
        .get_region_target_http_proxy(region, name)
        .await
        .map_err(err)?
    else {
        compute
            .insert_region_target_http_proxy(region, desired)
            .await
            .map_err(err)?;
        record(changes, KIND, name, Action::Created);
        return Ok(());
    };
    let norm = |v: Option<&str>| normalize(project, v.unwrap_or_default());
    if norm(desired.url_map.as_deref()) != norm(observed.url_map.as_deref()) {
        let body =
            model::UrlMapReference::new().set_url_map(desired.url_map.clone().unwrap_or_default());
        compute
            .set_region_target_http_proxy_url_map(region, name, &body)
            .await
            .map_err(err)?;
        record(changes, KIND, name, Action::Updated);
    }
    Ok(())
}

/// Deletes the proxy from `region`; a 404 counts as done.
pub async fn delete_regional(
    compute: &Compute,
    region: &str,
    name: &str,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    super::remove(
        KIND,
        name,
        || compute.delete_region_target_http_proxy(region, name),
        changes,
    )
    .await
}
