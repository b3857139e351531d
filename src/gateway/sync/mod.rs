//! One Gateway's desired load balancer made real, in dependency order, with `sync/`'s modules
//! for every Compute collection Ingress uses: backends (health check -> NEG -> backend service
//! -> endpoints), the address, certificates, then per port URL map -> target proxy ->
//! forwarding rule, then the Network Services tlsRoutes. Target TCP and SSL proxies have their
//! own get -> compare -> insert or set* steps here ([`proxies`]).
//!
//! Removal is garbage collection ([`collect_garbage`]): every resource named like this
//! cluster's Gateway resources that no Gateway wants any more is deleted, users before what they
//! use (forwarding rules, tlsRoutes, proxies, URL maps, backend services, health checks, NEGs,
//! certificates, addresses). Deleting a Gateway or a route is therefore: translate without it,
//! then collect.

mod proxies;

use std::collections::{BTreeMap, BTreeSet};

use super::desired::{AddressPlan, DesiredGateway, PortTarget};
use super::namer;
use super::network_services::NetworkServicesApi;
use crate::compute::Compute;
use crate::sync::ingress::{sync_backends, BackendLocks};
use crate::sync::{
    addresses, backend_services, forwarding_rules, health_checks, network_endpoint_groups, record,
    ssl_certificates, target_http_proxies, target_https_proxies, url_maps, Action, Changes,
    SyncError,
};

/// Event kind of a tlsRoute change.
pub const TLS_ROUTE_KIND: &str = "TlsRoute";

/// What the sync of a Gateway found out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GatewaySynced {
    /// The Gateway's IP address (`status.addresses`).
    pub ip: Option<String>,
}

/// Errors that stop a Gateway's sync.
#[derive(Debug, thiserror::Error)]
pub enum GatewaySyncError {
    /// A Compute or Network Services call failed.
    #[error(transparent)]
    Sync(#[from] SyncError),
    /// `spec.addresses` names an address that does not exist or has no IP.
    #[error("spec.addresses: {0}")]
    Address(String),
}

/// Syncs `desired`; returns the IP.
///
/// # Errors
/// The first failing call ([`GatewaySyncError::Sync`]), or an unusable `spec.addresses`.
pub async fn sync_gateway(
    compute: &Compute,
    netsvc: &NetworkServicesApi,
    locks: &BackendLocks,
    desired: &DesiredGateway,
    changes: &mut Changes,
) -> Result<GatewaySynced, GatewaySyncError> {
    sync_backends(compute, locks, &desired.backends, changes).await?;
    for port in desired.ports.values() {
        match &port.target {
            PortTarget::Passthrough { no_match, .. } => {
                backend_services::ensure(compute, no_match, changes).await?
            }
            PortTarget::Terminate {
                no_match: Some(bs), ..
            } => backend_services::ensure(compute, bs, changes).await?,
            _ => {}
        }
    }
    let ip = match &desired.address {
        AddressPlan::Managed(name) => match addresses::get_ip(compute, name).await? {
            Some(ip) => ip,
            None => addresses::ensure_managed(compute, name, None, changes).await?,
        },
        AddressPlan::Named(name) => addresses::get_ip(compute, name).await?.ok_or_else(|| {
            GatewaySyncError::Address(format!(
                "NamedAddress {name:?} is not a reserved global address; reserve it with `gcloud compute addresses create {name} --global`"
            ))
        })?,
        AddressPlan::Ip(ip) => {
            let owned = compute
                .list_global_addresses()
                .await
                .map_err(|e| SyncError::compute(addresses::KIND, ip, e))?
                .into_iter()
                .any(|a| a.address.as_deref() == Some(ip.as_str()));
            if !owned {
                return Err(GatewaySyncError::Address(format!(
                    "IPAddress {ip} is not held by a reserved global address of the project; reserve it first"
                )));
            }
            ip.clone()
        }
    };
    for cert in &desired.ssl_certificates {
        ssl_certificates::ensure(compute, cert, changes).await?;
    }
    for port in desired.ports.values() {
        match &port.target {
            PortTarget::Http { url_map, proxy } => {
                url_maps::ensure(compute, url_map, changes).await?;
                target_http_proxies::ensure(compute, proxy, changes).await?;
            }
            PortTarget::Https { url_map, proxy } => {
                url_maps::ensure(compute, url_map, changes).await?;
                target_https_proxies::ensure(compute, proxy, changes).await?;
            }
            PortTarget::Passthrough { proxy, .. } => {
                proxies::ensure_tcp(compute, proxy, changes).await?
            }
            PortTarget::Terminate { proxy, .. } => {
                proxies::ensure_ssl(compute, proxy, changes).await?
            }
        }
        let mut fr = port.forwarding_rule.clone();
        fr.ip_address = Some(ip.clone());
        forwarding_rules::ensure(compute, &fr, changes).await?;
    }
    for r in &desired.tls_routes {
        ensure_tls_route(netsvc, r, changes).await?;
    }
    Ok(GatewaySynced { ip: Some(ip) })
}

async fn ensure_tls_route(
    netsvc: &NetworkServicesApi,
    r: &super::desired::DesiredTlsRoute,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let err = |e| SyncError::compute(TLS_ROUTE_KIND, &r.name, e);
    match netsvc.get(&r.name).await.map_err(err)? {
        None => {
            netsvc.create(&r.name, &r.route).await.map_err(err)?;
            record(changes, TLS_ROUTE_KIND, &r.name, Action::Created);
        }
        Some(found) => {
            let same = found.rules == r.route.rules
                && found.target_proxies == r.route.target_proxies
                && found.description == r.route.description;
            if !same {
                netsvc.update(&r.name, &r.route).await.map_err(err)?;
                record(changes, TLS_ROUTE_KIND, &r.name, Action::Updated);
            }
        }
    }
    Ok(())
}

/// Deletes every resource of this cluster's Gateway controller (named by [`namer`]) that is not
/// in `wanted` (collection segment -> names, from [`DesiredGateway::names`] of every live
/// Gateway), users first. `zones` are where NEGs live.
///
/// # Errors
/// The first failing call; what was deleted before it stays deleted, and the next run goes on.
pub async fn collect_garbage(
    compute: &Compute,
    netsvc: &NetworkServicesApi,
    uid8: &str,
    zones: &[String],
    wanted: &BTreeMap<&'static str, BTreeSet<String>>,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let empty = BTreeSet::new();
    let keep = |coll: &str| wanted.get(coll).unwrap_or(&empty);
    let ours = |n: &str| {
        namer::is_gateway_resource(uid8, n)
            || n.starts_with(&namer::backend_prefix(uid8))
            || n.starts_with(&namer::tcp_backend_prefix(uid8))
    };
    let stale = |names: Vec<Option<String>>, coll: &str| -> Vec<String> {
        names
            .into_iter()
            .flatten()
            .filter(|n| ours(n) && !keep(coll).contains(n))
            .collect()
    };
    let list_err = |kind: &'static str| move |e| SyncError::compute(kind, "(list)", e);

    let rules = compute
        .list_forwarding_rules()
        .await
        .map_err(list_err(forwarding_rules::KIND))?;
    for n in stale(
        rules.into_iter().map(|x| x.name).collect(),
        "forwardingRules",
    ) {
        forwarding_rules::delete(compute, &n, changes).await?;
    }
    let routes = netsvc.list().await.map_err(list_err(TLS_ROUTE_KIND))?;
    let route_ids: Vec<Option<String>> = routes
        .into_iter()
        .map(|r| r.name.rsplit('/').next().map(str::to_owned))
        .collect();
    for n in stale(route_ids, "tlsRoutes") {
        if netsvc
            .delete(&n)
            .await
            .map_err(|e| SyncError::compute(TLS_ROUTE_KIND, &n, e))?
        {
            record(changes, TLS_ROUTE_KIND, &n, Action::Deleted);
        }
    }
    let http = compute
        .list_target_http_proxies()
        .await
        .map_err(list_err(target_http_proxies::KIND))?;
    for n in stale(
        http.into_iter().map(|x| x.name).collect(),
        "targetHttpProxies",
    ) {
        target_http_proxies::delete(compute, &n, changes).await?;
    }
    let https = compute
        .list_target_https_proxies()
        .await
        .map_err(list_err(target_https_proxies::KIND))?;
    for n in stale(
        https.into_iter().map(|x| x.name).collect(),
        "targetHttpsProxies",
    ) {
        target_https_proxies::delete(compute, &n, changes).await?;
    }
    let tcp = compute
        .list_target_tcp_proxies()
        .await
        .map_err(list_err(proxies::KIND))?;
    for n in stale(
        tcp.into_iter().map(|x| x.name).collect(),
        "targetTcpProxies",
    ) {
        proxies::delete_tcp(compute, &n, changes).await?;
    }
    let ssl = compute
        .list_target_ssl_proxies()
        .await
        .map_err(list_err(proxies::KIND))?;
    for n in stale(
        ssl.into_iter().map(|x| x.name).collect(),
        "targetSslProxies",
    ) {
        proxies::delete_ssl(compute, &n, changes).await?;
    }
    let ums = compute
        .list_url_maps()
        .await
        .map_err(list_err(url_maps::KIND))?;
    for n in stale(ums.into_iter().map(|x| x.name).collect(), "urlMaps") {
        url_maps::delete(compute, &n, changes).await?;
    }
    let bss = compute
        .list_backend_services()
        .await
        .map_err(list_err(backend_services::KIND))?;
    for n in stale(bss.into_iter().map(|x| x.name).collect(), "backendServices") {
        backend_services::delete(compute, &n, changes).await?;
    }
    let hcs = compute
        .list_health_checks()
        .await
        .map_err(list_err(health_checks::KIND))?;
    for n in stale(hcs.into_iter().map(|x| x.name).collect(), "healthChecks") {
        health_checks::delete(compute, &n, changes).await?;
    }
    for zone in zones {
        let negs = compute
            .list_network_endpoint_groups(zone)
            .await
            .map_err(list_err(network_endpoint_groups::KIND))?;
        for n in stale(
            negs.into_iter().map(|x| x.name).collect(),
            "networkEndpointGroups",
        ) {
            network_endpoint_groups::delete(compute, zone, &n, changes).await?;
        }
    }
    let certs = compute
        .list_ssl_certificates()
        .await
        .map_err(list_err(ssl_certificates::KIND))?;
    for n in stale(
        certs.into_iter().map(|x| x.name).collect(),
        "sslCertificates",
    ) {
        crate::sync::remove(
            ssl_certificates::KIND,
            &n,
            || compute.delete_ssl_certificate(&n),
            changes,
        )
        .await?;
    }
    let addrs = compute
        .list_global_addresses()
        .await
        .map_err(list_err(addresses::KIND))?;
    for n in stale(addrs.into_iter().map(|x| x.name).collect(), "addresses") {
        addresses::delete(compute, &n, changes).await?;
    }
    Ok(())
}
