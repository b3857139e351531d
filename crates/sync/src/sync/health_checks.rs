//! Health checks (`compute.healthChecks`), named like their backend service (inventory §4).
//!
//! Unlike GKE (which keeps interval, thresholds and path once created, issues #39/#317), the
//! desired health check wins: a changed readiness probe or BackendConfig updates the check.

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
