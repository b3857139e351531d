//! One Ingress, in dependency order: backends (health check -> NEG -> backend service ->
//! endpoints), then the frontend (URL maps -> certificates -> target proxies -> forwarding
//! rules), then removal of frontend parts no longer wanted (reverse order).
//!
//! Backends are shared between Ingresses and reconciled by several workers at once; every step
//! is idempotent (409 and 412 refetch), and [`BackendLocks`] serialises work on one backend
//! name so two workers do not attach the same endpoints at the same time.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};

use google_cloud_compute_v1::model;

use super::{
    addresses, backend_services, forwarding_rules, health_checks, network_endpoint_groups,
    ssl_certificates, target_http_proxies, target_https_proxies, url_maps, Changes, SyncError,
};
use crate::compute::Compute;
use crate::translate::namer::FrontendNamer;
use crate::translate::{DesiredBackend, DesiredFrontend};

/// Per-backend-name async locks (no global lock: different backends sync in parallel).
#[derive(Default)]
pub struct BackendLocks {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl BackendLocks {
    fn get(&self, name: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(name.to_string()).or_default().clone()
    }
}

/// Syncs every backend of one Ingress: health check, NEGs, backend service, NEG endpoints.
pub async fn sync_backends(
    compute: &Compute,
    locks: &BackendLocks,
    backends: &BTreeMap<String, DesiredBackend>,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    for (name, backend) in backends {
        let lock = locks.get(name);
        let _guard = lock.lock().await;
        health_checks::ensure(compute, &backend.health_check, changes).await?;
        for neg in &backend.negs {
            network_endpoint_groups::ensure(compute, neg, changes).await?;
        }
        backend_services::ensure(compute, &backend.backend_service, changes).await?;
        for neg in &backend.negs {
            network_endpoint_groups::sync_endpoints(compute, neg).await?;
        }
    }
    Ok(())
}

/// What the frontend sync found out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrontendStatus {
    /// The load balancer IP (HTTP forwarding rule first, else HTTPS).
    pub ip: Option<String>,
    /// Name of the managed address every rule uses (`k8s2-fr-<lb>`), unless the Ingress names a
    /// static address of its own (see [`addresses`]); for the `ingress.kubernetes.io/static-ip`
    /// annotation.
    pub managed_address: Option<String>,
}

/// Syncs the frontend of one Ingress and removes the parts it no longer wants (an HTTP
/// frontend after `allow-http: "false"`, an HTTPS one after TLS is removed, stale certificates).
///
/// `static_ip`: the address of the reserved global address, when the Ingress names one.
pub async fn sync_frontend(
    compute: &Compute,
    namer: &FrontendNamer,
    frontend: &DesiredFrontend,
    static_ip: Option<&str>,
    changes: &mut Changes,
) -> Result<FrontendStatus, SyncError> {
    if let Some(um) = &frontend.url_map {
        url_maps::ensure(compute, um, changes).await?;
    }
    if let Some(rm) = &frontend.redirect_url_map {
        url_maps::ensure(compute, rm, changes).await?;
    }
    for cert in &frontend.ssl_certificates {
        ssl_certificates::ensure(compute, cert, changes).await?;
    }
    let mut status = FrontendStatus::default();
    if let Some(tp) = &frontend.target_http_proxy {
        target_http_proxies::ensure(compute, tp, changes).await?;
    }
    // Every rule on one IP for the Ingress's whole life: the user's reserved address, else the
    // managed one (see [`addresses`]).
    let managed = namer.http_forwarding_rule();
    let wants_rule =
        frontend.http_forwarding_rule.is_some() || frontend.https_forwarding_rule.is_some();
    let ip = match static_ip {
        Some(ip) => Some(ip.to_string()),
        None if wants_rule => Some(ensure_managed_ip(compute, namer, &managed, changes).await?),
        None => None,
    };
    status.managed_address = (static_ip.is_none() && ip.is_some()).then(|| managed.clone());
    let with_ip = |fr: &model::ForwardingRule| {
        let mut fr = fr.clone();
        fr.ip_address = ip.clone();
        fr
    };
    if let Some(fr) = &frontend.http_forwarding_rule {
        status.ip = forwarding_rules::ensure(compute, &with_ip(fr), changes).await?;
    }
    if let Some(ts) = &frontend.target_https_proxy {
        target_https_proxies::ensure(compute, ts, changes).await?;
    }
    if let Some(fs) = &frontend.https_forwarding_rule {
        let ip = forwarding_rules::ensure(compute, &with_ip(fs), changes).await?;
        status.ip = status.ip.or(ip);
    }
    // The user named a static address: the managed one is garbage once no rule uses it.
    if static_ip.is_some() {
        delete_if_present(
            addresses::KIND,
            || compute.get_global_address(&managed),
            || addresses::delete(compute, &managed, changes),
        )
        .await?;
    }

    // Parts no longer wanted, users first.
    if frontend.http_forwarding_rule.is_none() {
        let name = namer.http_forwarding_rule();
        delete_if_present(
            forwarding_rules::KIND,
            || compute.get_forwarding_rule(&name),
            || forwarding_rules::delete(compute, &name, changes),
        )
        .await?;
    }
    if frontend.target_http_proxy.is_none() {
        let name = namer.target_http_proxy();
        delete_if_present(
            target_http_proxies::KIND,
            || compute.get_target_http_proxy(&name),
            || target_http_proxies::delete(compute, &name, changes),
        )
        .await?;
    }
    if frontend.https_forwarding_rule.is_none() {
        let name = namer.https_forwarding_rule();
        delete_if_present(
            forwarding_rules::KIND,
            || compute.get_forwarding_rule(&name),
            || forwarding_rules::delete(compute, &name, changes),
        )
        .await?;
    }
    if frontend.target_https_proxy.is_none() {
        let name = namer.target_https_proxy();
        delete_if_present(
            target_https_proxies::KIND,
            || compute.get_target_https_proxy(&name),
            || target_https_proxies::delete(compute, &name, changes),
        )
        .await?;
    }
    if frontend.redirect_url_map.is_none() {
        let name = namer.redirect_url_map();
        delete_if_present(
            url_maps::KIND,
            || compute.get_url_map(&name),
            || url_maps::delete(compute, &name, changes),
        )
        .await?;
    }
    let keep: Vec<&str> = frontend
        .ssl_certificates
        .iter()
        .filter_map(|c| c.name.as_deref())
        .collect();
    ssl_certificates::delete_stale(compute, &namer.ssl_certificate_prefix(), &keep, changes)
        .await?;
    Ok(status)
}

/// The managed address's IP; when it does not exist yet, it is reserved with the IP a rule of
/// the Ingress has now (HTTP first), so an existing Ingress keeps its IP.
async fn ensure_managed_ip(
    compute: &Compute,
    namer: &FrontendNamer,
    managed: &str,
    changes: &mut Changes,
) -> Result<String, SyncError> {
    if let Some(ip) = addresses::get_ip(compute, managed).await? {
        return Ok(ip);
    }
    let mut current = None;
    for name in [namer.http_forwarding_rule(), namer.https_forwarding_rule()] {
        let rule = compute
            .get_forwarding_rule(&name)
            .await
            .map_err(|e| SyncError::compute(forwarding_rules::KIND, &name, e))?;
        current = rule.and_then(|r| r.ip_address).filter(|ip| !ip.is_empty());
        if current.is_some() {
            break;
        }
    }
    addresses::ensure_managed(compute, managed, current.as_deref(), changes).await
}

/// Deletes a `kind` resource when `get` finds it. Looking first matters: a DELETE of something
/// absent is still a mutating call, and a no-op resync must send none.
async fn delete_if_present<T, G, GF, D, DF>(
    kind: &'static str,
    get: G,
    delete: D,
) -> Result<(), SyncError>
where
    G: FnOnce() -> GF,
    GF: Future<Output = crate::compute::Result<Option<T>>>,
    D: FnOnce() -> DF,
    DF: Future<Output = Result<(), SyncError>>,
{
    let found = get()
        .await
        .map_err(|e| SyncError::compute(kind, "(get)", e))?;
    if found.is_some() {
        delete().await?;
    }
    Ok(())
}

/// Deletes every frontend resource of one Ingress, users before what they use, the managed
/// static address included. Only what exists is deleted: most Ingresses have no HTTPS part,
/// redirect map or managed address, and a DELETE of something absent is still a write against
/// the project's write quota (a 404 in the audit log).
pub async fn delete_frontend(
    compute: &Compute,
    namer: &FrontendNamer,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    for name in [namer.http_forwarding_rule(), namer.https_forwarding_rule()] {
        delete_if_present(
            forwarding_rules::KIND,
            || compute.get_forwarding_rule(&name),
            || forwarding_rules::delete(compute, &name, changes),
        )
        .await?;
    }
    let name = namer.target_http_proxy();
    delete_if_present(
        target_http_proxies::KIND,
        || compute.get_target_http_proxy(&name),
        || target_http_proxies::delete(compute, &name, changes),
    )
    .await?;
    let name = namer.target_https_proxy();
    delete_if_present(
        target_https_proxies::KIND,
        || compute.get_target_https_proxy(&name),
        || target_https_proxies::delete(compute, &name, changes),
    )
    .await?;
    for name in [namer.url_map(), namer.redirect_url_map()] {
        delete_if_present(
            url_maps::KIND,
            || compute.get_url_map(&name),
            || url_maps::delete(compute, &name, changes),
        )
        .await?;
    }
    // The managed static IP, once no rule uses it (named like the HTTP rule; a user's
    // `global-static-ip-name` address never is).
    let name = namer.http_forwarding_rule();
    delete_if_present(
        addresses::KIND,
        || compute.get_global_address(&name),
        || addresses::delete(compute, &name, changes),
    )
    .await?;
    ssl_certificates::delete_stale(compute, &namer.ssl_certificate_prefix(), &[], changes).await
}
