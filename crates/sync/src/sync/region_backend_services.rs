//! Regional BackendServices (`compute.regionBackendServices`) of internal load balancers: the global file's
//! get -> compare -> insert/update, in a region, without the global state cache (an internal
//! Ingress reads its few regional resources once per sync).

use google_cloud_compute_v1::model;

use super::{Changes, Managed, SyncError};
use crate::compute::Compute;

/// Event kind (as the global collection's).
pub const KIND: &str = super::backend_services::KIND;

/// Inserts the resource in `region` or updates it when a managed field differs.
pub async fn ensure(
    compute: &Compute,
    region: &str,
    desired: &model::BackendService,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let name = desired.resource_name();
    super::ensure(
        compute.project(),
        desired,
        || compute.get_region_backend_service(region, name),
        |body| async move { compute.insert_region_backend_service(region, &body).await },
        |body| async move {
            compute
                .update_region_backend_service(region, name, &body)
                .await
        },
        changes,
    )
    .await
}

/// Deletes the resource from `region`; a 404 counts as done.
pub async fn delete(
    compute: &Compute,
    region: &str,
    name: &str,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    super::remove(
        KIND,
        name,
        || compute.delete_region_backend_service(region, name),
        changes,
    )
    .await
}
