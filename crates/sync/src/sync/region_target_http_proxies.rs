//! Regional target HTTP proxies (`compute.regionTargetHttpProxies`) of internal load
//! balancers. An existing proxy is pointed at its URL map with `setUrlMap` when that differs.

use google_cloud_compute_v1::model;

use super::{record, Action, Changes, SyncError};
use crate::compute::reference::normalize;
use crate::compute::Compute;

/// Event kind (GKE: `TargetProxy "x" created`).
pub const KIND: &str = super::target_http_proxies::KIND;

/// Inserts the proxy in `region` or brings its URL map in line.
pub async fn ensure(
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
pub async fn delete(
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
