//! The regional (internal or regional external) Application Load Balancer of one Ingress
//! (`translate::regional`), as a graph like [`super::ingress`]'s: per backend the regional
//! health check beside its zonal NEGs (shared with external Ingresses of the same Service port),
//! then the regional backend service beside the NEGs' endpoints; then the regional URL map (and
//! the regional external class's HTTP-to-HTTPS redirect map) and certificates, the regional
//! target proxies, and the INTERNAL_MANAGED / EXTERNAL_MANAGED forwarding rules (HTTPS on the
//! HTTP rule's IP, or both on the reserved regional address).
//!
//! Before anything is created, [`check_preconditions`] looks for the region's proxy-only subnet
//! and a firewall rule admitting its range (`translate::proxy_only_subnet`).
//!
//! Regional resources are read with `get` per sync (not through the global state cache): an
//! internal Ingress has a handful of them. [`list_regional_candidates`] lists each regional
//! collection of the region once per garbage collection run, before the run's exclusive lock;
//! [`delete_regional_garbage`] deletes under it.

use futures::future::join_all;
use google_cloud_compute_v1::model;

use super::gc::{delete_each, stale, Candidates, LiveSet};
use super::ingress::{BackendLocks, FrontendStatus};
use super::{
    backend_services, forwarding_rules, health_checks, merge, network_endpoint_groups, own_changes,
    ssl_certificates, target_http_proxies, target_https_proxies, url_maps, Changes, SyncError,
};
use crate::compute::Compute;
use crate::translate::namer::FrontendNamer;
use crate::translate::proxy_only_subnet::{
    active_proxy_only, firewall_admits, firewall_command, subnet_command,
};
use crate::translate::regional_address::ResolvedAddress;
use crate::translate::{DesiredIngress, TranslateConfig};

/// Checks the region's proxy-only subnet (missing: [`SyncError::NoProxyOnlySubnet`], nothing
/// may be created) and the firewall for its range (missing: `Ok(Some(warning))` naming the
/// command; the load balancer is built anyway). `ports`: the Pods' target ports.
pub async fn check_preconditions(
    compute: &Compute,
    config: &TranslateConfig,
    region: &str,
    ports: &[u16],
) -> Result<Option<String>, SyncError> {
    let subnets = compute
        .list_subnetworks(&config.network_project, region)
        .await
        .map_err(|e| SyncError::compute("Subnetwork", "(list)", e))?;
    let Some(proxy_only) = active_proxy_only(&subnets, &config.network) else {
        return Err(SyncError::NoProxyOnlySubnet {
            region: region.to_string(),
            network: config.network.clone(),
            command: subnet_command(config, region),
        });
    };
    let range = proxy_only.ip_cidr_range.clone().unwrap_or_default();
    let firewalls = compute
        .list_firewalls(&config.network_project)
        .await
        .map_err(|e| SyncError::compute("Firewall", "(list)", e))?;
    if firewall_admits(
        &firewalls,
        &config.network,
        &range,
        &config.firewall_target_tags,
        ports,
    ) {
        return Ok(None);
    }
    let command = firewall_command(config, region, &range, ports);
    Ok(Some(format!(
        "No firewall rule admits the proxy-only subnet {} ({range}) of region {region} to the Pods; the regional load balancer's proxies connect from that range, so requests fail until one does. Firewall change required: `{command}`",
        proxy_only.name.as_deref().unwrap_or_default()
    )))
}

/// Syncs the whole regional load balancer of one Ingress in `desired.region` and removes the
/// frontend parts it no longer wants. `static_ip`: the reserved regional address both
/// forwarding rules use (`kubernetes.io/ingress.regional-static-ip-name`, resolved by
/// [`super::addresses::resolve_regional`]); `None`: the HTTP rule's allocated address.
pub async fn sync_internal(
    compute: &Compute,
    locks: &BackendLocks,
    namer: &FrontendNamer,
    desired: &DesiredIngress,
    static_ip: Option<&ResolvedAddress>,
    changes: &mut Changes,
) -> Result<FrontendStatus, SyncError> {
    let region = desired.region.as_deref().unwrap_or_default();
    let results = join_all(desired.backends.values().map(|backend| {
        own_changes!(c, {
            let hc = own_changes!(h, {
                Box::pin(health_checks::ensure_regional(
                    compute,
                    region,
                    &backend.health_check,
                    &mut h,
                ))
                .await
            });
            let negs = join_all(backend.negs.iter().map(|neg| {
                own_changes!(n, {
                    let lock = locks.get(super::ingress::neg_key("networkEndpointGroups", neg));
                    let _one = lock.lock().await;
                    network_endpoint_groups::ensure(compute, neg, &mut n).await
                })
            }));
            let (hc, negs) = futures::join!(hc, negs);
            merge(&mut c, std::iter::once(hc).chain(negs))?;
            let bs = own_changes!(b, {
                Box::pin(backend_services::ensure_regional(
                    compute,
                    region,
                    &backend.backend_service,
                    &mut b,
                ))
                .await
            });
            let endpoints = join_all(backend.negs.iter().map(|neg| {
                Box::pin(async move {
                    let lock = locks.get(super::ingress::neg_key("networkEndpoints", neg));
                    let _one = lock.lock().await;
                    let result = network_endpoint_groups::sync_endpoints(compute, neg).await;
                    (Changes::new(), result.map(drop))
                })
            }));
            let (bs, endpoints) = futures::join!(bs, endpoints);
            merge(&mut c, std::iter::once(bs).chain(endpoints)).map(drop)
        })
    }))
    .await;
    merge(changes, results)?;

    let f = &desired.frontend;
    if let Some(um) = &f.url_map {
        Box::pin(url_maps::ensure_regional(compute, region, um, changes)).await?;
    }
    // The regional external class's HTTP-to-HTTPS redirect map, before the HTTP proxy that
    // points at it.
    if let Some(rm) = &f.redirect_url_map {
        Box::pin(url_maps::ensure_regional(compute, region, rm, changes)).await?;
    }
    for cert in &f.ssl_certificates {
        Box::pin(ssl_certificates::ensure_regional(
            compute, region, cert, changes,
        ))
        .await?;
    }
    if let Some(tp) = &f.target_http_proxy {
        Box::pin(target_http_proxies::ensure_regional(
            compute, region, tp, changes,
        ))
        .await?;
    }
    if let Some(ts) = &f.target_https_proxy {
        Box::pin(target_https_proxies::ensure_regional(
            compute, region, ts, changes,
        ))
        .await?;
    }
    let on_static_ip = |rule: &model::ForwardingRule| {
        let mut rule = rule.clone();
        if let Some(address) = static_ip {
            rule.ip_address = Some(address.ip.clone());
            if let Some(tier) = &address.network_tier {
                rule.network_tier = Some(model::forwarding_rule::NetworkTier::from(tier.as_str()));
            }
        }
        rule
    };
    let mut ip = None;
    if let Some(fr) = &f.http_forwarding_rule {
        ip = Box::pin(forwarding_rules::ensure_regional(
            compute,
            region,
            &on_static_ip(fr),
            changes,
        ))
        .await?;
    }
    if let Some(fs) = &f.https_forwarding_rule {
        let mut fs = on_static_ip(fs);
        if ip.is_some() {
            fs.ip_address.clone_from(&ip);
        }
        let https_ip = Box::pin(forwarding_rules::ensure_regional(
            compute, region, &fs, changes,
        ))
        .await?;
        ip = ip.or(https_ip);
    }

    // Parts no longer wanted, users first.
    if f.http_forwarding_rule.is_none() {
        Box::pin(forwarding_rules::delete_regional(
            compute,
            region,
            &namer.http_forwarding_rule(),
            changes,
        ))
        .await?;
        Box::pin(target_http_proxies::delete_regional(
            compute,
            region,
            &namer.target_http_proxy(),
            changes,
        ))
        .await?;
    }
    if f.https_forwarding_rule.is_none() {
        Box::pin(forwarding_rules::delete_regional(
            compute,
            region,
            &namer.https_forwarding_rule(),
            changes,
        ))
        .await?;
        Box::pin(target_https_proxies::delete_regional(
            compute,
            region,
            &namer.target_https_proxy(),
            changes,
        ))
        .await?;
    }
    // A redirect map no longer wanted, once the HTTP proxy (above) points elsewhere; looked up
    // first, as a DELETE of something absent still counts against the write quota.
    let rm = namer.redirect_url_map();
    let unwanted_redirect = f.redirect_url_map.is_none()
        && compute
            .get_region_url_map(region, &rm)
            .await
            .map_err(|e| SyncError::compute(url_maps::KIND, &rm, e))?
            .is_some();
    if unwanted_redirect {
        Box::pin(url_maps::delete_regional(compute, region, &rm, changes)).await?;
    }
    let keep: Vec<&str> = f
        .ssl_certificates
        .iter()
        .filter_map(|c| c.name.as_deref())
        .collect();
    Box::pin(ssl_certificates::delete_stale_regional(
        compute,
        region,
        &namer.ssl_certificate_prefix(),
        &keep,
        changes,
    ))
    .await?;
    Ok(FrontendStatus {
        ip,
        managed_address: None,
    })
}

/// Deletes the internal frontend of one Ingress from `region`, users first: forwarding rules,
/// proxies, URL map, certificates. What is already gone counts as done.
pub async fn delete_internal_frontend(
    compute: &Compute,
    region: &str,
    namer: &FrontendNamer,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    for name in [namer.http_forwarding_rule(), namer.https_forwarding_rule()] {
        Box::pin(forwarding_rules::delete_regional(
            compute, region, &name, changes,
        ))
        .await?;
    }
    Box::pin(target_http_proxies::delete_regional(
        compute,
        region,
        &namer.target_http_proxy(),
        changes,
    ))
    .await?;
    Box::pin(target_https_proxies::delete_regional(
        compute,
        region,
        &namer.target_https_proxy(),
        changes,
    ))
    .await?;
    for name in [namer.url_map(), namer.redirect_url_map()] {
        Box::pin(url_maps::delete_regional(compute, region, &name, changes)).await?;
    }
    Box::pin(ssl_certificates::delete_stale_regional(
        compute,
        region,
        &namer.ssl_certificate_prefix(),
        &[],
        changes,
    ))
    .await
}

/// Lists the regional collections of `region` garbage collection looks at, all at once and
/// without any lock (the regional half of [`Candidates`]; addresses, NEGs and policies stay
/// empty). Errors: the first list that failed.
pub async fn list_regional_candidates(
    compute: &Compute,
    region: &str,
) -> Result<Candidates, SyncError> {
    fn names<T>(
        kind: &'static str,
        listed: crate::compute::Result<Vec<T>>,
        name: impl Fn(&T) -> Option<&String>,
    ) -> Result<Vec<String>, SyncError> {
        let items = listed.map_err(|e| SyncError::compute(kind, "(list)", e))?;
        Ok(items.iter().filter_map(|i| name(i).cloned()).collect())
    }
    let (rules, http, https, maps, certs, services, checks) = futures::join!(
        Box::pin(compute.list_region_forwarding_rules(region)),
        Box::pin(compute.list_region_target_http_proxies(region)),
        Box::pin(compute.list_region_target_https_proxies(region)),
        Box::pin(compute.list_region_url_maps(region)),
        Box::pin(compute.list_region_ssl_certificates(region)),
        Box::pin(compute.list_region_backend_services(region)),
        Box::pin(compute.list_region_health_checks(region)),
    );
    Ok(Candidates {
        forwarding_rules: names(forwarding_rules::KIND, rules, |r| r.name.as_ref())?,
        target_http_proxies: names(target_http_proxies::KIND, http, |p| p.name.as_ref())?,
        target_https_proxies: names(target_https_proxies::KIND, https, |p| p.name.as_ref())?,
        url_maps: names(url_maps::KIND, maps, |m: &model::UrlMap| m.name.as_ref())?,
        ssl_certificates: names(ssl_certificates::KIND, certs, |c| c.name.as_ref())?,
        backend_services: names(backend_services::KIND, services, |s| s.name.as_ref())?,
        health_checks: names(health_checks::KIND, checks, |c| c.name.as_ref())?,
        ..Candidates::default()
    })
}

/// Deletes the stale among the regional `candidates` of `region`
/// ([`list_regional_candidates`]): those that carry this cluster's names but no live internal
/// Ingress wants (`live`: the internal Ingresses' frontends, certificate prefixes and backends),
/// users first: forwarding rules, proxies, URL maps, certificates, backend services, health
/// checks, each phase at once. The zonal NEGs are the global collection's ([`super::gc`]). Run
/// it under the exclusive lock with `live` read there.
pub async fn delete_regional_garbage(
    compute: &Compute,
    region: &str,
    candidates: &Candidates,
    live: &LiveSet,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let c = candidates;
    // Each phase deletes at once through the global GC's `delete_each` (in-use skipped); the
    // futures are boxed, as in the sync graph, to keep the GC future small.
    macro_rules! phase {
        ($names:expr, $delete:path) => {
            delete_each($names, changes, |name| async move {
                let mut c = Changes::new();
                let r = Box::pin($delete(compute, region, &name, &mut c)).await;
                (c, r)
            })
            .await
        };
    }
    phase!(
        stale(&c.forwarding_rules, |n| {
            live.stale_frontend("fr", n) || live.stale_frontend("fs", n)
        }),
        forwarding_rules::delete_regional
    )?;
    phase!(
        stale(&c.target_http_proxies, |n| live.stale_frontend("tp", n)),
        target_http_proxies::delete_regional
    )?;
    phase!(
        stale(&c.target_https_proxies, |n| live.stale_frontend("ts", n)),
        target_https_proxies::delete_regional
    )?;
    phase!(
        stale(&c.url_maps, |n| {
            live.stale_frontend("um", n) || live.stale_frontend("rm", n)
        }),
        url_maps::delete_regional
    )?;
    phase!(
        stale(&c.ssl_certificates, |n| live.stale_certificate(n)),
        ssl_certificates::delete_regional
    )?;
    phase!(
        stale(&c.backend_services, |n| live.stale_backend(n)),
        backend_services::delete_regional
    )?;
    phase!(
        stale(&c.health_checks, |n| live.stale_backend(n)),
        health_checks::delete_regional
    )
}
