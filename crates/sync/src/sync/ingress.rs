//! One Ingress as a dependency graph. Each step starts as soon as what it references exists:
//!
//! ```text
//! health check ─┐
//!               ├─> backend service ─┐             (per backend, all backends at once)
//! NEG (per zone)┤                    │
//!               └─> NEG endpoints    │
//!                                    ├─> URL map ─┐
//! SSL certificates ──────────────────┼────────────┼─> target HTTPS proxy ─> HTTPS forwarding rule
//! redirect URL map ──────────────────┘            └─> target HTTP proxy ──> HTTP forwarding rule
//! address ───────────────────────────────────────────────────────────────┘ (both rules)
//! ```
//!
//! The longest chain is health check -> backend service -> URL map -> target proxy ->
//! forwarding rule: five writes in a row, each awaited until its Operation is DONE. Everything
//! else runs beside it. What exists comes from the shared state cache, so a new Ingress sends no
//! read before its first write; the one read a resync makes per rule is its forwarding rule
//! ([`sync_frontend`]), which tells whether the frontend changed behind our back.
//!
//! Backends are shared between Ingresses and reconciled by several workers at once; every step
//! is idempotent (409 and 412 refetch), and [`BackendLocks`] orders the work on each shared
//! object (one health check, backend service, NEG or NEG's endpoints) without a lock wider than
//! that object. Parts no longer wanted are deleted users first.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use futures::future::join_all;
use google_cloud_compute_v1::model;

use super::{
    addresses, backend_services, forwarding_rules, health_checks, merge, network_endpoint_groups,
    own_changes, ssl_certificates, target_http_proxies, target_https_proxies, url_maps, Changes,
    SyncError,
};
use crate::compute::reference::normalize;
use crate::compute::Compute;
use crate::translate::namer::{FrontendNamer, Scheme};
use crate::translate::{DesiredBackend, DesiredFrontend, DesiredNeg};

/// Per-object async locks, keyed by collection and name (no global lock: different objects
/// sync in parallel, and two workers never write the same shared object at once).
#[derive(Default)]
pub struct BackendLocks {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl BackendLocks {
    pub(crate) fn get(&self, key: String) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(key).or_default().clone()
    }
}

pub(crate) fn neg_key(what: &str, neg: &DesiredNeg) -> String {
    let name = neg.neg.name.as_deref().unwrap_or_default();
    format!("{what}/{}/{name}", neg.zone)
}

/// Keeps a step's changes and returns its result (see [`merge`] for several).
fn keep<T>(
    changes: &mut Changes,
    (c, result): (Changes, Result<T, SyncError>),
) -> Result<T, SyncError> {
    changes.extend(c);
    result
}

/// Syncs every backend of one Ingress, all at once: per backend the health check and NEGs,
/// then the backend service beside each NEG's endpoints.
pub async fn sync_backends(
    compute: &Compute,
    locks: &BackendLocks,
    backends: &BTreeMap<String, DesiredBackend>,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let results = join_all(backends.iter().map(|(name, backend)| {
        own_changes!(c, {
            sync_backend(compute, locks, name, backend, &mut c).await
        })
    }))
    .await;
    merge(changes, results).map(drop)
}

async fn sync_backend(
    compute: &Compute,
    locks: &BackendLocks,
    name: &str,
    backend: &DesiredBackend,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    // The health check and the NEGs reference nothing.
    let hc = own_changes!(c, {
        let lock = locks.get(format!("healthChecks/{name}"));
        let _one = lock.lock().await;
        health_checks::ensure(compute, &backend.health_check, &mut c).await
    });
    let negs = join_all(backend.negs.iter().map(|neg| {
        own_changes!(c, {
            let lock = locks.get(neg_key("networkEndpointGroups", neg));
            let _one = lock.lock().await;
            network_endpoint_groups::ensure(compute, neg, &mut c).await
        })
    }));
    let (hc, negs) = futures::join!(hc, negs);
    merge(changes, std::iter::once(hc).chain(negs))?;
    // The backend service references both; each NEG's endpoints need only their NEG.
    let bs = own_changes!(c, {
        let lock = locks.get(format!("backendServices/{name}"));
        let _one = lock.lock().await;
        backend_services::ensure(compute, &backend.backend_service, &mut c).await
    });
    let endpoints = join_all(backend.negs.iter().map(|neg| {
        Box::pin(async move {
            let lock = locks.get(neg_key("networkEndpoints", neg));
            let _one = lock.lock().await;
            let result = network_endpoint_groups::sync_endpoints(compute, neg).await;
            (Changes::new(), result.map(drop))
        })
    }));
    let (bs, endpoints) = futures::join!(bs, endpoints);
    merge(changes, std::iter::once(bs).chain(endpoints)).map(drop)
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

/// Checks the frontend the state cache knows against the API: the forwarding rules (the tips of
/// the chain: nothing under a rule can be deleted while it exists) are read; when one is gone or
/// points elsewhere, every frontend resource of the Ingress is read again, so what was changed
/// behind the operator's back is repaired now rather than at the next list.
async fn verify_frontend(compute: &Compute, namer: &FrontendNamer) -> Result<(), SyncError> {
    let project = compute.project();
    let rules = [namer.http_forwarding_rule(), namer.https_forwarding_rule()];
    let checks = join_all(rules.iter().map(|name| async move {
        let err = |e| SyncError::compute(forwarding_rules::KIND, name, e);
        let Some(known) = compute
            .observed::<model::ForwardingRule>(name)
            .await
            .map_err(err)?
        else {
            return Ok(false);
        };
        let now = compute
            .refetch::<model::ForwardingRule>(name)
            .await
            .map_err(err)?;
        let target =
            |r: &model::ForwardingRule| normalize(project, r.target.as_deref().unwrap_or_default());
        Ok(match now {
            None => true,
            Some(now) => target(&now) != target(&known) || now.ip_address != known.ip_address,
        })
    }))
    .await;
    let mut surprised = false;
    for check in checks {
        surprised |= check?;
    }
    if !surprised {
        return Ok(());
    }
    tracing::info!(
        lb = namer.lb_name(),
        "frontend changed behind our back; reading it again"
    );
    let err = |kind| move |e| SyncError::compute(kind, "(refetch)", e);
    let (um, rm) = (namer.url_map(), namer.redirect_url_map());
    let (tp, ts) = (namer.target_http_proxy(), namer.target_https_proxy());
    let (a, b, c, d, e) = futures::join!(
        Box::pin(compute.refetch::<model::UrlMap>(&um)),
        Box::pin(compute.refetch::<model::UrlMap>(&rm)),
        Box::pin(compute.refetch::<model::TargetHttpProxy>(&tp)),
        Box::pin(compute.refetch::<model::TargetHttpsProxy>(&ts)),
        Box::pin(compute.refetch::<model::Address>(&rules[0])),
    );
    a.map_err(err(url_maps::KIND))?;
    b.map_err(err(url_maps::KIND))?;
    c.map_err(err(target_http_proxies::KIND))?;
    d.map_err(err(target_https_proxies::KIND))?;
    e.map_err(err(addresses::KIND))?;
    Ok(())
}

/// Syncs the frontend of one Ingress and removes the parts it no longer wants (an HTTP
/// frontend after `allow-http: "false"`, an HTTPS one after TLS is removed, stale certificates):
/// URL maps and certificates, then the proxies, and beside those the address; then the rules,
/// once their proxy and the address exist; then the removals, users first. The address does
/// not hold back the proxies (only the rules reference it).
///
/// `static_ip`: the address of the reserved global address, when the Ingress names one.
pub async fn sync_frontend(
    compute: &Compute,
    namer: &FrontendNamer,
    frontend: &DesiredFrontend,
    static_ip: Option<&str>,
    changes: &mut Changes,
) -> Result<FrontendStatus, SyncError> {
    verify_frontend(compute, namer).await?;
    // Every rule on one IP for the Ingress's whole life: the user's reserved address, else the
    // managed one (see [`addresses`]).
    let managed = namer.http_forwarding_rule();
    let wants_rule =
        frontend.http_forwarding_rule.is_some() || frontend.https_forwarding_rule.is_some();
    // GKE's controller reserves an Ingress's IP only while it has both rules (ingress-gce
    // `pkg/loadbalancers/addresses.go` checkStaticIP): in GKE's scheme the ephemeral IP of an
    // existing one-rule Ingress is not promoted, so what GKE built is adopted without a new
    // address. A new Ingress still gets its reserved address from the start.
    let promote = namer.scheme() == Scheme::Own
        || (frontend.http_forwarding_rule.is_some() && frontend.https_forwarding_rule.is_some());

    // 1. The URL maps and certificates, then the proxies that reference them; beside them the
    // address, which only the rules reference (a fresh address costs its insert and the read of
    // the IP the API chose: two calls, as long as the URL map and the proxy).
    let proxies = own_changes!(c, { sync_proxies(compute, frontend, &mut c).await });
    let ip = own_changes!(c, {
        match static_ip {
            Some(ip) => Ok(Some(ip.to_string())),
            None if wants_rule => {
                ensure_managed_ip(compute, namer, &managed, promote, &mut c).await
            }
            None => Ok(None),
        }
    });
    let (proxies, ip) = futures::join!(proxies, ip);
    let proxies = keep(changes, proxies);
    let ip = keep(changes, ip);
    proxies?;
    let ip = ip?;

    // 2. The rules, once their proxy and the address exist.
    let with_ip = |fr: &model::ForwardingRule| {
        let mut fr = fr.clone();
        fr.ip_address = ip.clone();
        fr
    };
    let fr = own_changes!(c, {
        match &frontend.http_forwarding_rule {
            Some(fr) => forwarding_rules::ensure(compute, &with_ip(fr), &mut c).await,
            None => Ok(None),
        }
    });
    let fs = own_changes!(c, {
        match &frontend.https_forwarding_rule {
            Some(fs) => forwarding_rules::ensure(compute, &with_ip(fs), &mut c).await,
            None => Ok(None),
        }
    });
    let (fr, fs) = futures::join!(fr, fs);
    let ips = merge(changes, [fr, fs])?;
    let status = FrontendStatus {
        ip: ips.into_iter().flatten().next(),
        managed_address: (static_ip.is_none() && ip.is_some()).then(|| managed.clone()),
    };

    // 3. Parts no longer wanted, users first (the state cache says what exists: no reads).
    let unwanted = |wanted: bool, name: String| (!wanted).then_some(name);
    let rules = [
        unwanted(
            frontend.http_forwarding_rule.is_some(),
            namer.http_forwarding_rule(),
        ),
        unwanted(
            frontend.https_forwarding_rule.is_some(),
            namer.https_forwarding_rule(),
        ),
    ];
    delete_rules(compute, rules.into_iter().flatten(), changes).await?;
    let tp = unwanted(
        frontend.target_http_proxy.is_some(),
        namer.target_http_proxy(),
    );
    let ts = unwanted(
        frontend.target_https_proxy.is_some(),
        namer.target_https_proxy(),
    );
    // The user named a static address: the managed one is garbage once no rule uses it.
    let address = static_ip.is_some().then(|| managed.clone());
    delete_proxies_and_address(compute, tp, ts, address, changes).await?;
    if frontend.redirect_url_map.is_none() {
        url_maps::delete(compute, &namer.redirect_url_map(), changes).await?;
    }
    let keep_certs: Vec<&str> = frontend
        .ssl_certificates
        .iter()
        .filter_map(|c| c.name.as_deref())
        .collect();
    ssl_certificates::delete_stale(
        compute,
        &namer.ssl_certificate_prefix(),
        &keep_certs,
        changes,
    )
    .await?;
    Ok(status)
}

/// The URL maps and certificates at once, then the target proxies once all of them exist (a
/// proxy references its URL map and the certificates).
async fn sync_proxies(
    compute: &Compute,
    frontend: &DesiredFrontend,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let um = own_changes!(c, {
        match &frontend.url_map {
            Some(um) => url_maps::ensure(compute, um, &mut c).await,
            None => Ok(()),
        }
    });
    let rm = own_changes!(c, {
        match &frontend.redirect_url_map {
            Some(rm) => url_maps::ensure(compute, rm, &mut c).await,
            None => Ok(()),
        }
    });
    let certs =
        join_all(frontend.ssl_certificates.iter().map(|cert| {
            own_changes!(c, { ssl_certificates::ensure(compute, cert, &mut c).await })
        }));
    let (um, rm, certs) = futures::join!(um, rm, certs);
    let (um, rm) = (keep(changes, um), keep(changes, rm));
    let certs = merge(changes, certs);
    um?;
    rm?;
    certs?;
    let tp = own_changes!(c, {
        match &frontend.target_http_proxy {
            Some(tp) => target_http_proxies::ensure(compute, tp, &mut c).await,
            None => Ok(()),
        }
    });
    let ts = own_changes!(c, {
        match &frontend.target_https_proxy {
            Some(ts) => target_https_proxies::ensure(compute, ts, &mut c).await,
            None => Ok(()),
        }
    });
    let (tp, ts) = futures::join!(tp, ts);
    merge(changes, [tp, ts]).map(drop)
}

async fn delete_rules(
    compute: &Compute,
    names: impl Iterator<Item = String>,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let names: Vec<String> = names.collect();
    let results =
        join_all(names.iter().map(|name| {
            own_changes!(c, { forwarding_rules::delete(compute, name, &mut c).await })
        }))
        .await;
    merge(changes, results).map(drop)
}

async fn delete_proxies_and_address(
    compute: &Compute,
    http: Option<String>,
    https: Option<String>,
    address: Option<String>,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let tp = own_changes!(c, {
        match &http {
            Some(name) => target_http_proxies::delete(compute, name, &mut c).await,
            None => Ok(()),
        }
    });
    let ts = own_changes!(c, {
        match &https {
            Some(name) => target_https_proxies::delete(compute, name, &mut c).await,
            None => Ok(()),
        }
    });
    let ad = own_changes!(c, {
        match &address {
            Some(name) => addresses::delete(compute, name, &mut c).await,
            None => Ok(()),
        }
    });
    let (tp, ts, ad) = futures::join!(tp, ts, ad);
    merge(changes, [tp, ts, ad]).map(drop)
}

/// The managed address's IP; when it does not exist yet, it is reserved with the IP a rule of
/// the Ingress has now (HTTP first), so an existing Ingress keeps its IP, or, when `promote` is
/// false and a rule has an IP, none (the rules keep their ephemeral IP); a fresh address when
/// no rule has an IP.
async fn ensure_managed_ip(
    compute: &Compute,
    namer: &FrontendNamer,
    managed: &str,
    promote: bool,
    changes: &mut Changes,
) -> Result<Option<String>, SyncError> {
    if let Some(ip) = addresses::get_ip(compute, managed).await? {
        return Ok(Some(ip));
    }
    let mut current = None;
    for name in [namer.http_forwarding_rule(), namer.https_forwarding_rule()] {
        let rule = compute
            .observed::<model::ForwardingRule>(&name)
            .await
            .map_err(|e| SyncError::compute(forwarding_rules::KIND, &name, e))?;
        current = rule
            .and_then(|r| r.ip_address.clone())
            .filter(|ip| !ip.is_empty());
        if current.is_some() {
            break;
        }
    }
    if current.is_some() && !promote {
        return Ok(None);
    }
    addresses::ensure_managed(compute, managed, current.as_deref(), changes)
        .await
        .map(Some)
}

/// Deletes every frontend resource of one Ingress, users before what they use, the managed
/// static address included. Only what exists is deleted (the state cache, checked against the
/// API at the rules): most Ingresses have no HTTPS part, redirect map or managed address, and a
/// DELETE of something absent is still a write against the project's write quota.
pub async fn delete_frontend(
    compute: &Compute,
    namer: &FrontendNamer,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    verify_frontend(compute, namer).await?;
    let rules = [namer.http_forwarding_rule(), namer.https_forwarding_rule()];
    delete_rules(compute, rules.into_iter(), changes).await?;
    // The managed static IP, once no rule uses it (named like the HTTP rule; a user's
    // `global-static-ip-name` address never is).
    delete_proxies_and_address(
        compute,
        Some(namer.target_http_proxy()),
        Some(namer.target_https_proxy()),
        Some(namer.http_forwarding_rule()),
        changes,
    )
    .await?;
    let (um, rm) = (namer.url_map(), namer.redirect_url_map());
    let maps = join_all(
        [&um, &rm].map(|name| own_changes!(c, { url_maps::delete(compute, name, &mut c).await })),
    )
    .await;
    merge(changes, maps)?;
    ssl_certificates::delete_stale(compute, &namer.ssl_certificate_prefix(), &[], changes).await
}
