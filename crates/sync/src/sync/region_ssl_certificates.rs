//! Regional self-managed SSL certificates (`compute.regionSslCertificates`) made from an
//! internal Ingress's `spec.tls` Secrets. Certificates are immutable and named by content
//! (a rotated Secret gives a new name), so sync only inserts and deletes.

use google_cloud_compute_v1::model;

use super::{record, Action, Changes, SyncError};
use crate::compute::Compute;

/// Event kind.
pub const KIND: &str = super::ssl_certificates::KIND;

/// Inserts the certificate in `region` unless it exists. Never log `desired`: it holds the
/// private key.
pub async fn ensure(
    compute: &Compute,
    region: &str,
    desired: &model::SslCertificate,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let name = desired.name.as_deref().unwrap_or_default();
    let err = |e| SyncError::compute(KIND, name, e);
    if compute
        .get_region_ssl_certificate(region, name)
        .await
        .map_err(err)?
        .is_none()
    {
        compute
            .insert_region_ssl_certificate(region, desired)
            .await
            .map_err(err)?;
        record(changes, KIND, name, Action::Created);
    }
    Ok(())
}

/// Deletes the certificate `name` from `region`; a 404 counts as done.
pub async fn delete(
    compute: &Compute,
    region: &str,
    name: &str,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    super::remove(
        KIND,
        name,
        || compute.delete_region_ssl_certificate(region, name),
        changes,
    )
    .await
}

/// Deletes the certificates of `region` whose name starts with `prefix` and is not in `keep`.
pub async fn delete_stale(
    compute: &Compute,
    region: &str,
    prefix: &str,
    keep: &[&str],
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let listed = compute
        .list_region_ssl_certificates(region)
        .await
        .map_err(|e| SyncError::compute(KIND, "(list)", e))?;
    for name in listed.iter().filter_map(|c| c.name.as_deref()) {
        if name.starts_with(prefix) && !keep.contains(&name) {
            super::remove(
                KIND,
                name,
                || compute.delete_region_ssl_certificate(region, name),
                changes,
            )
            .await?;
        }
    }
    Ok(())
}
