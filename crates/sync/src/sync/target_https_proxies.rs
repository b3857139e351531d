//! Target HTTPS proxies (`compute.targetHttpsProxies`). An existing proxy is changed through
//! `setUrlMap`, `setSslCertificates` and `setSslPolicy`, each sent only when that field differs.
//!
//! The `*_regional` functions, for the regional load balancers of internal and regional
//! external Ingresses:
//! Regional target HTTPS proxies (`compute.regionTargetHttpsProxies`) of internal load
//! balancers. An existing proxy is changed with `setUrlMap` and `setSslCertificates`, each
//! sent only when that field differs.

use google_cloud_compute_v1::model;

use super::{record, Action, Changes, SyncError, MAX_CONFLICT_RETRIES};
use crate::compute::reference::normalize;
use crate::compute::{Compute, ErrorKind};

/// Event kind (GKE: `TargetProxy "x" created`).
pub const KIND: &str = "TargetProxy";

/// Inserts the proxy or brings its URL map, certificates and SSL policy in line.
///
/// `ssl_policy`: `None` in the desired proxy leaves the policy untouched (FrontendConfig without
/// `sslPolicy`); `Some("")` removes it.
pub async fn ensure(
    compute: &Compute,
    desired: &model::TargetHttpsProxy,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let project = compute.project();
    let name = desired.name.as_deref().unwrap_or_default();
    let err = |e| SyncError::compute(KIND, name, e);
    let mut insert_body = desired.clone();
    if insert_body.ssl_policy.as_deref() == Some("") {
        insert_body.ssl_policy = None;
    }
    let mut observed = compute
        .observed::<model::TargetHttpsProxy>(name)
        .await
        .map_err(err)?;
    for _ in 0..MAX_CONFLICT_RETRIES {
        if observed.is_some() {
            break;
        }
        match compute.insert_target_https_proxy(&insert_body).await {
            Ok(()) => {
                // In the state cache since the API accepted it (`Compute::note_insert`).
                record(changes, KIND, name, Action::Created);
                return Ok(());
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                observed = compute.refetch(name).await.map_err(err)?;
            }
            Err(e) => return Err(policy_error(name, insert_body.ssl_policy.as_deref(), e)),
        }
    }
    let Some(observed) = observed else {
        return Err(SyncError::Conflict {
            kind: KIND,
            name: name.to_string(),
            attempts: MAX_CONFLICT_RETRIES,
        });
    };
    let mut now = (*observed).clone();
    let norm = |v: Option<&str>| normalize(project, v.unwrap_or_default());
    let mut changed = false;
    if norm(desired.url_map.as_deref()) != norm(observed.url_map.as_deref()) {
        let body =
            model::UrlMapReference::new().set_url_map(desired.url_map.clone().unwrap_or_default());
        compute
            .set_target_https_proxy_url_map(name, &body)
            .await
            .map_err(err)?;
        now.url_map = desired.url_map.clone();
        changed = true;
    }
    let want: Vec<String> = desired
        .ssl_certificates
        .iter()
        .map(|c| normalize(project, c))
        .collect();
    let have: Vec<String> = observed
        .ssl_certificates
        .iter()
        .map(|c| normalize(project, c))
        .collect();
    if want != have {
        let body = model::TargetHttpsProxiesSetSslCertificatesRequest::new()
            .set_ssl_certificates(desired.ssl_certificates.clone());
        compute
            .set_target_https_proxy_ssl_certificates(name, &body)
            .await
            .map_err(err)?;
        now.ssl_certificates = desired.ssl_certificates.clone();
        changed = true;
    }
    if let Some(policy) = desired.ssl_policy.as_deref() {
        if normalize(project, policy) != norm(observed.ssl_policy.as_deref()) {
            let body = if policy.is_empty() {
                model::SslPolicyReference::new()
            } else {
                model::SslPolicyReference::new().set_ssl_policy(policy)
            };
            compute
                .set_target_https_proxy_ssl_policy(name, &body)
                .await
                .map_err(|e| policy_error(name, Some(policy), e))?;
            now.ssl_policy = Some(policy.to_string()).filter(|p| !p.is_empty());
            changed = true;
        }
    }
    if changed {
        now.fingerprint = None;
        compute.record(name, Some(now));
        record(changes, KIND, name, Action::Updated);
    }
    Ok(())
}

/// A failed insert or `setSslPolicy` of proxy `name` that names `policy`: a 404 naming the
/// policy is [`SyncError::SslPolicyNotFound`], anything else the Compute error.
fn policy_error(name: &str, policy: Option<&str>, e: crate::compute::ComputeError) -> SyncError {
    match policy.filter(|p| !p.is_empty()) {
        Some(p)
            if e.kind() == ErrorKind::NotFound
                && e.to_string()
                    .contains(crate::compute::reference::last_segment(p)) =>
        {
            SyncError::SslPolicyNotFound {
                kind: KIND,
                name: name.to_string(),
                policy: p.to_string(),
            }
        }
        _ => SyncError::compute(KIND, name, e),
    }
}

/// Deletes the proxy when it is known to exist; gone already is fine.
pub async fn delete(compute: &Compute, name: &str, changes: &mut Changes) -> Result<(), SyncError> {
    super::remove_observed::<model::TargetHttpsProxy, _, _>(
        compute,
        KIND,
        name,
        || compute.delete_target_https_proxy(name),
        changes,
    )
    .await
}

// In a region: read with `get` per sync, not through the global state cache.

/// Inserts the proxy in `region` or brings its URL map and certificates in line.
pub async fn ensure_regional(
    compute: &Compute,
    region: &str,
    desired: &model::TargetHttpsProxy,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let project = compute.project();
    let name = desired.name.as_deref().unwrap_or_default();
    let err = |e| SyncError::compute(KIND, name, e);
    let Some(observed) = compute
        .get_region_target_https_proxy(region, name)
        .await
        .map_err(err)?
    else {
        compute
            .insert_region_target_https_proxy(region, desired)
            .await
            .map_err(err)?;
        record(changes, KIND, name, Action::Created);
        return Ok(());
    };
    let norm = |v: Option<&str>| normalize(project, v.unwrap_or_default());
    let mut changed = false;
    if norm(desired.url_map.as_deref()) != norm(observed.url_map.as_deref()) {
        let body =
            model::UrlMapReference::new().set_url_map(desired.url_map.clone().unwrap_or_default());
        compute
            .set_region_target_https_proxy_url_map(region, name, &body)
            .await
            .map_err(err)?;
        changed = true;
    }
    let refs =
        |certs: &[String]| -> Vec<String> { certs.iter().map(|c| normalize(project, c)).collect() };
    if refs(&desired.ssl_certificates) != refs(&observed.ssl_certificates) {
        let body = model::RegionTargetHttpsProxiesSetSslCertificatesRequest::new()
            .set_ssl_certificates(desired.ssl_certificates.clone());
        compute
            .set_region_target_https_proxy_ssl_certificates(region, name, &body)
            .await
            .map_err(err)?;
        changed = true;
    }
    if changed {
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
        || compute.delete_region_target_https_proxy(region, name),
        changes,
    )
    .await
}
