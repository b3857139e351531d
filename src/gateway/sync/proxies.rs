//! Target TCP proxies and target SSL proxies (`compute.targetTcpProxies`,
//! `compute.targetSslProxies`): insert, or bring an existing proxy's backend service and
//! certificates in line with `setBackendService` / `setSslCertificates`, each sent only when
//! that field differs (a no-op resync sends no mutating call).

use google_cloud_compute_v1::model;

use crate::compute::reference::normalize;
use crate::compute::{Compute, ErrorKind};
use crate::sync::{record, remove, Action, Changes, SyncError};

/// Event kind (`TargetProxy "x" created`, as for HTTP(S) proxies).
pub const KIND: &str = "TargetProxy";

/// Inserts the target TCP proxy or sets its `service`.
pub async fn ensure_tcp(
    compute: &Compute,
    desired: &model::TargetTcpProxy,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let name = desired.name.as_deref().unwrap_or_default();
    let err = |e| SyncError::compute(KIND, name, e);
    let observed = match compute.get_target_tcp_proxy(name).await.map_err(err)? {
        Some(o) => o,
        None => {
            match compute.insert_target_tcp_proxy(desired).await {
                Ok(()) => record(changes, KIND, name, Action::Created),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                Err(e) => return Err(err(e)),
            }
            return Ok(());
        }
    };
    let p = compute.project();
    let norm = |v: Option<&str>| normalize(p, v.unwrap_or_default());
    if norm(desired.service.as_deref()) != norm(observed.service.as_deref()) {
        let body = model::TargetTcpProxiesSetBackendServiceRequest::new()
            .set_service(desired.service.clone().unwrap_or_default());
        compute
            .set_target_tcp_proxy_backend_service(name, &body)
            .await
            .map_err(err)?;
        record(changes, KIND, name, Action::Updated);
    }
    Ok(())
}

/// Inserts the target SSL proxy or sets its `service` and `sslCertificates`.
pub async fn ensure_ssl(
    compute: &Compute,
    desired: &model::TargetSslProxy,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let name = desired.name.as_deref().unwrap_or_default();
    let err = |e| SyncError::compute(KIND, name, e);
    let observed = match compute.get_target_ssl_proxy(name).await.map_err(err)? {
        Some(o) => o,
        None => {
            match compute.insert_target_ssl_proxy(desired).await {
                Ok(()) => record(changes, KIND, name, Action::Created),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                Err(e) => return Err(err(e)),
            }
            return Ok(());
        }
    };
    let p = compute.project();
    let norm = |v: Option<&str>| normalize(p, v.unwrap_or_default());
    let mut changed = false;
    if norm(desired.service.as_deref()) != norm(observed.service.as_deref()) {
        let body = model::TargetSslProxiesSetBackendServiceRequest::new()
            .set_service(desired.service.clone().unwrap_or_default());
        compute
            .set_target_ssl_proxy_backend_service(name, &body)
            .await
            .map_err(err)?;
        changed = true;
    }
    let want: Vec<String> = desired
        .ssl_certificates
        .iter()
        .map(|c| normalize(p, c))
        .collect();
    let have: Vec<String> = observed
        .ssl_certificates
        .iter()
        .map(|c| normalize(p, c))
        .collect();
    if want != have {
        let body = model::TargetSslProxiesSetSslCertificatesRequest::new()
            .set_ssl_certificates(desired.ssl_certificates.clone());
        compute
            .set_target_ssl_proxy_ssl_certificates(name, &body)
            .await
            .map_err(err)?;
        changed = true;
    }
    if changed {
        record(changes, KIND, name, Action::Updated);
    }
    Ok(())
}

/// Deletes a target TCP proxy; gone already is fine.
pub async fn delete_tcp(
    compute: &Compute,
    name: &str,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    remove(
        KIND,
        name,
        || compute.delete_target_tcp_proxy(name),
        changes,
    )
    .await
}

/// Deletes a target SSL proxy; gone already is fine.
pub async fn delete_ssl(
    compute: &Compute,
    name: &str,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    remove(
        KIND,
        name,
        || compute.delete_target_ssl_proxy(name),
        changes,
    )
    .await
}
