//! Health checks (`compute.healthChecks`), named like their backend service (inventory §4).
//!
//! Unlike GKE (which keeps interval, thresholds and path once created, issues #39/#317), the
//! desired health check wins: a changed readiness probe or BackendConfig updates the check.
//!
//! The `*_regional` functions, for the regional load balancers of internal and regional
//! external Ingresses:
//! Regional HealthChecks (`compute.regionHealthChecks`) of internal load balancers: the global file's
//! get -> compare -> insert/update, in a region, without the global state cache (an internal
//! Ingress reads its few regional resources once per sync).

use google_cloud_compute_v1::model;

use super::{Changes, Managed, SyncError};
use crate::compute::Compute;

/// Event kind.
pub const KIND: &str = "HealthCheck";

impl Managed for model::HealthCheck {
    const KIND: &'static str = KIND;
    const CLEARABLE: &'static [&'static str] = &[];
    fn resource_name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }
    fn take_fingerprint(&mut self, _observed: &Self) {}
}

/// Inserts the health check or updates it (PUT) when a managed field differs (observed from
/// the state cache; see [`super::ensure_observed`]).
pub async fn ensure(
    compute: &Compute,
    desired: &model::HealthCheck,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let name = desired.resource_name();
    super::ensure_observed(
        compute,
        desired,
        |body| async move { compute.insert_health_check(&body).await.map(|()| body) },
        |body| async move {
            compute
                .update_health_check(name, &body)
                .await
                .map(|()| body)
        },
        changes,
    )
    .await
}

/// Deletes the health check when it is known to exist; gone already is fine.
pub async fn delete(compute: &Compute, name: &str, changes: &mut Changes) -> Result<(), SyncError> {
    super::remove_observed::<model::HealthCheck, _, _>(
        compute,
        KIND,
        name,
        || compute.delete_health_check(name),
        changes,
    )
    .await
}

// In a region: read with `get` per sync, not through the global state cache.

/// Inserts the resource in `region` or updates it when a managed field differs.
pub async fn ensure_regional(
    compute: &Compute,
    region: &str,
    desired: &model::HealthCheck,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let name = desired.resource_name();
    super::ensure(
        compute.project(),
        desired,
        || compute.get_region_health_check(region, name),
        |body| async move { compute.insert_region_health_check(region, &body).await },
        |body| async move {
            compute
                .update_region_health_check(region, name, &body)
                .await
        },
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
        || compute.delete_region_health_check(region, name),
        changes,
    )
    .await
}
