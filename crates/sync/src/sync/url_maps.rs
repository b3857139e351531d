//! URL maps (`compute.urlMaps`): the Ingress's routing table and the HTTPS redirect map.
//! Updated with the fingerprint only when default service, host rules or path matchers differ.
//!
//! The `*_regional` functions, for the regional load balancers of internal and regional
//! external Ingresses:
//! Regional UrlMaps (`compute.regionUrlMaps`) of internal load balancers: the global file's
//! get -> compare -> insert/update, in a region, without the global state cache (an internal
//! Ingress reads its few regional resources once per sync).

use google_cloud_compute_v1::model;

use super::{Changes, Managed, SyncError};
use crate::compute::Compute;

/// Event kind (GKE: `UrlMap "x" created`).
pub const KIND: &str = "UrlMap";

impl Managed for model::UrlMap {
    const KIND: &'static str = KIND;
    const CLEARABLE: &'static [&'static str] = &["hostRules", "pathMatchers", "tests"];
    fn resource_name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }
    fn take_fingerprint(&mut self, observed: &Self) {
        self.fingerprint = observed.fingerprint.clone();
    }
    const FINGERPRINTED: bool = true;
    fn has_fingerprint(&self) -> bool {
        self.fingerprint.as_ref().is_some_and(|f| !f.is_empty())
    }
    fn clear_fingerprint(&mut self) {
        self.fingerprint = None;
    }
}

/// Inserts the URL map or updates it (PUT with fingerprint) when it differs (observed from the
/// state cache; see [`super::ensure_observed`]).
pub async fn ensure(
    compute: &Compute,
    desired: &model::UrlMap,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let name = desired.resource_name();
    super::ensure_observed(
        compute,
        desired,
        |body| async move { compute.insert_url_map(&body).await.map(|()| body) },
        |body| async move { compute.update_url_map(name, &body).await.map(|()| body) },
        changes,
    )
    .await
}

/// Deletes the URL map when it is known to exist; gone already is fine.
pub async fn delete(compute: &Compute, name: &str, changes: &mut Changes) -> Result<(), SyncError> {
    super::remove_observed::<model::UrlMap, _, _>(
        compute,
        KIND,
        name,
        || compute.delete_url_map(name),
        changes,
    )
    .await
}

// In a region: read with `get` per sync, not through the global state cache.

/// Inserts the resource in `region` or updates it when a managed field differs.
pub async fn ensure_regional(
    compute: &Compute,
    region: &str,
    desired: &model::UrlMap,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let name = desired.resource_name();
    super::ensure(
        compute.project(),
        desired,
        || compute.get_region_url_map(region, name),
        |body| async move { compute.insert_region_url_map(region, &body).await },
        |body| async move { compute.update_region_url_map(region, name, &body).await },
        changes,
    )
    .await
}

/// Deletes the resource from `region`; a 404 counts as done.
pub async fn delete_regional(
    compute: &Compute,
    region: &str,
    name: &str,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    super::remove(
        KIND,
        name,
        || compute.delete_region_url_map(region, name),
        changes,
    )
    .await
}
