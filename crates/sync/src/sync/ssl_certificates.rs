//! Self-managed SSL certificates (`compute.sslCertificates`) made from `spec.tls` Secrets.
//! They are immutable and named by content hash, so a changed Secret means a new certificate:
//! insert the new one, switch the proxy, then delete the old one.

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
