//! The controller's side of regional Ingresses (classes `gce-internal` and
//! `gce-regional-external`; `translate::regional`, `sync::regional`): the proxy-only subnet and
//! firewall preconditions and the `regional-static-ip-name` address as Events, the regional
//! sync and cleanup, and the regional half of garbage collection.
//!
//! Regional garbage collection lists the region's collections only once this process has seen
//! an internal Ingress (reconciled or deleted), so clusters without one pay nothing for it; a
//! regional resource left by a previous process with no internal Ingress left is collected
//! after the next internal Ingress appears.

use std::sync::atomic::Ordering;

use k8s_openapi::api::networking::v1::Ingress;

use super::context::key_string;
use super::{Context, Error};
use crate::sync::addresses;
use crate::sync::gc::{Candidates, LiveSet};
use crate::sync::ingress::FrontendStatus;
use crate::sync::regional_ingress::{
    check_preconditions, delete_internal_frontend, delete_regional_garbage,
    list_regional_candidates, sync_internal,
};
use crate::sync::{Changes, SyncError};
use crate::translate::regional::{class_of, cluster_region, is_regional};
use crate::translate::{translate_ingress, ClusterSnapshot, DesiredIngress, ObjectKey};

impl Context {
    /// The region of internal load balancers (`--region`, else the NEG zones' region).
    pub(crate) fn internal_region(&self, snapshot: &ClusterSnapshot) -> Option<String> {
        cluster_region(snapshot, &self.config.translate)
    }

    /// What live internal Ingresses want of the regional collections (frontends, certificate
    /// prefixes, backend services and health checks).
    pub(crate) fn regional_live_set(&self, snapshot: &ClusterSnapshot) -> LiveSet {
        let t = &self.config.translate;
        let mut live = LiveSet {
            scheme: t.mode.scheme(),
            cluster_uid: t.cluster_uid.clone(),
            gke_uid: t.gke_uid.clone(),
            ..LiveSet::default()
        };
        for ingress in self.live_ingresses(snapshot) {
            if !is_regional(snapshot, ingress, t) {
                continue;
            }
            let key = ObjectKey::of(ingress);
            let namer = self.namer(ingress);
            live.frontends.insert(namer.lb_name().to_string());
            live.certificate_prefixes
                .push(namer.ssl_certificate_prefix());
            if let Some(desired) = self
                .last_desired
                .last_or_resolve(&key, || translate_ingress(snapshot, ingress, t))
            {
                if desired.region.is_some() {
                    live.backends.extend(desired.backends.iter().cloned());
                }
            }
        }
        live
    }

    /// The regional half of a GC run's candidates, listed before its exclusive lock
    /// ([`Context::gc_now`]): the region and what its collections hold, or `None` when this
    /// process has seen no internal Ingress or knows no region (see the module docs).
    pub(crate) async fn regional_candidates(
        &self,
    ) -> Result<Option<(String, Candidates)>, SyncError> {
        if !self.regional_seen.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let Some(region) = self.internal_region(&self.stores.snapshot()) else {
            return Ok(None);
        };
        let candidates = Box::pin(list_regional_candidates(&self.compute, &region)).await?;
        Ok(Some((region, candidates)))
    }

    /// The regional half of a GC run, under its exclusive lock: deletes the `candidates` of
    /// `region` that no live internal Ingress of `snapshot` (read under the lock) wants.
    pub(crate) async fn regional_gc(
        &self,
        snapshot: &ClusterSnapshot,
        region: &str,
        candidates: &Candidates,
        changes: &mut Changes,
    ) -> Result<(), SyncError> {
        let live = self.regional_live_set(snapshot);
        Box::pin(delete_regional_garbage(
            &self.compute,
            region,
            candidates,
            &live,
            changes,
        ))
        .await
    }
}

/// Syncs a regional Ingress's load balancer: the preconditions first (a missing proxy-only
/// subnet, or a `regional-static-ip-name` address that is missing or of the wrong type, fails
/// the sync with the command in the error, which the caller's `Sync` Warning carries; a
/// firewall that does not admit its range is a Warning of its own, and the load balancer is
/// built), then the regional resources.
pub(crate) async fn sync_internal_lb(
    ctx: &Context,
    ingress: &Ingress,
    desired: &DesiredIngress,
    changes: &mut Changes,
) -> Result<FrontendStatus, Error> {
    let key = ObjectKey::of(ingress);
    let sync_err = |source| Error::Sync {
        ingress: key_string(&key),
        source,
    };
    ctx.regional_seen.store(true, Ordering::SeqCst);
    let region = desired.region.as_deref().unwrap_or_default();
    let mut ports: Vec<u16> = desired
        .backends
        .values()
        .flat_map(|b| b.firewall_ports.iter().copied())
        .collect();
    ports.sort_unstable();
    ports.dedup();
    let firewall = Box::pin(check_preconditions(
        &ctx.compute,
        &ctx.config.translate,
        region,
        &ports,
    ))
    .await
    .map_err(sync_err)?;
    if let Some(note) = firewall {
        ctx.event(ingress, true, "Sync", note).await;
    }
    let static_ip = match (&desired.frontend.static_ip_name, class_of(desired)) {
        (Some(name), Some(kind)) => Some(
            Box::pin(addresses::resolve_regional(
                &ctx.compute,
                &ctx.config.translate,
                kind,
                region,
                name,
            ))
            .await
            .map_err(sync_err)?,
        ),
        _ => None,
    };
    let namer = ctx.namer(ingress);
    let _shared = ctx.gc_lock.read().await;
    Box::pin(sync_internal(
        &ctx.compute,
        &ctx.locks,
        &namer,
        desired,
        static_ip.as_ref(),
        changes,
    ))
    .await
    .map_err(sync_err)
}

/// Deletes an internal Ingress's regional frontend (its backends go with GC).
pub(crate) async fn cleanup_internal(
    ctx: &Context,
    ingress: &Ingress,
    changes: &mut Changes,
) -> Result<(), Error> {
    let key = ObjectKey::of(ingress);
    ctx.regional_seen.store(true, Ordering::SeqCst);
    let Some(region) = ctx.internal_region(&ctx.stores.snapshot()) else {
        return Ok(());
    };
    let namer = ctx.namer(ingress);
    // Without the GC lock: these names are this Ingress's own (see `reconcile::cleanup`).
    Box::pin(delete_internal_frontend(
        &ctx.compute,
        &region,
        &namer,
        changes,
    ))
    .await
    .map_err(|source| Error::Sync {
        ingress: key_string(&key),
        source,
    })
}
