//! Self-managed SSL certificates (`compute.sslCertificates`) made from `spec.tls` Secrets.
//! They are immutable and named by content hash, so a changed Secret means a new certificate:
//! insert the new one, switch the proxy, then delete the old one.
//!
//! The `*_regional` functions, for the regional load balancers of internal and regional
//! external Ingresses:
//! Regional self-managed SSL certificates (`compute.regionSslCertificates`) made from an
//! internal Ingress's `spec.tls` Secrets. Certificates are immutable and named by content
//! (a rotated Secret gives a new name), so sync only inserts and deletes.

use google_cloud_compute_v1::model;

use super::{record, Action, Changes, SyncError};
use crate::compute::{Compute, ErrorKind};

/// Event kind.
pub const KIND: &str = "SslCertificate";

/// Inserts the certificate when no certificate of that name exists.
pub async fn ensure(
    compute: &Compute,
    desired: &model::SslCertificate,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let name = desired.name.as_deref().unwrap_or_default();
    let observed = compute
        .observed::<model::SslCertificate>(name)
        .await
        .map_err(|e| SyncError::compute(KIND, name, e))?;
    if observed.is_some() {
        return Ok(());
    }
    match compute.insert_ssl_certificate(desired).await {
        Ok(()) => {
            // Kept without the private key: the cache only needs to know it exists.
            let mut known = desired.clone();
            known.private_key = None;
            compute.record(name, Some(known));
            record(changes, KIND, name, Action::Created);
            Ok(())
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(SyncError::compute(KIND, name, e)),
    }
}

/// Deletes every certificate whose name starts with `prefix` and is not in `keep` (known from
/// the state cache, not a list per call).
pub async fn delete_stale(
    compute: &Compute,
    prefix: &str,
    keep: &[&str],
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let certs = compute
        .observed_all::<model::SslCertificate>()
        .await
        .map_err(|e| SyncError::compute(KIND, prefix, e))?;
    for cert in certs {
        let Some(name) = cert.name.as_deref() else {
            continue;
        };
        if name.starts_with(prefix) && !keep.contains(&name) {
            super::remove(KIND, name, || compute.delete_ssl_certificate(name), changes).await?;
            compute.record::<model::SslCertificate>(name, None);
        }
    }
    Ok(())
}

// In a region: read with `get` per sync, not through the global state cache.

/// Inserts the certificate in `region` unless it exists. Never log `desired`: it holds the
/// private key.
pub async fn ensure_regional(
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
pub async fn delete_regional(
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
pub async fn delete_stale_regional(
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
