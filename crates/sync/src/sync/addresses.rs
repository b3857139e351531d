//! The Ingress's IP (`compute.globalAddresses`). Without `kubernetes.io/ingress.global-static-ip-name`
//! every Ingress gets a managed address named like its HTTP forwarding rule (`k8s2-fr-<lb>`), and
//! all its forwarding rules use that address. So the IP lives as long as the Ingress: through
//! adding and removing TLS, `allow-http: "false"`, a forwarding rule being recreated and operator
//! restarts. Only naming (or un-naming) a static address changes it.
//!
//! The address is reserved by promoting the IP a rule of the Ingress already has (the Compute
//! API reference documents promotion as the way to keep an ephemeral IP; `globalAddresses.insert`
//! with `address` set), else a fresh one is reserved before the first rule is created.
//! Sources: inventory §1 (`ingress.kubernetes.io/static-ip`) and §4 ("A managed static IP takes
//! the HTTP FR's name"); ingress-gce `pkg/loadbalancers/addresses.go` checkStaticIP. GKE promotes
//! only while an Ingress has both HTTP and HTTPS, so its IP can still change when a rule is
//! recreated; this operator promotes always (docs/routing.md, "Addresses").
//!
//! The address is deleted with the Ingress's frontend, by garbage collection, or when the user
//! names a static address instead; a user's reserved address (never named like ours) is never
//! touched.
//!
//! The `*_regional` functions, for the regional load balancers of internal and regional
//! external Ingresses:
//! Regional addresses (`compute.addresses`): the reserved address that
//! `kubernetes.io/ingress.regional-static-ip-name` names for an internal or regional external
//! Ingress, read (never created or deleted: the user owns it) and checked by
//! [`crate::translate::regional_address::check`].

use google_cloud_compute_v1::model;

use super::{record, Action, Changes, SyncError};
use crate::compute::{Compute, ErrorKind};
use crate::translate::proxy_only_subnet::REGIONAL_MANAGED_PROXY;
use crate::translate::regional::RegionalClass;
use crate::translate::regional_address::{check, ResolvedAddress};
use crate::translate::TranslateConfig;

/// Event kind (`Address "k8s2-fr-..." created`).
pub const KIND: &str = "Address";

/// Description written on the managed address.
const DESCRIPTION: &str =
    "Static IP managed by gclb-operator for an Ingress (all its forwarding rules use it)";

/// Reserves the managed address (call it when [`get_ip`] found none) and returns its IP: first by promoting
/// `current_ip` (the IP a forwarding rule of the Ingress has now, so the Ingress IP does not
/// change), else, or when Compute refuses that IP (it is reserved by another address, as after a
/// user's static IP annotation was removed), a fresh address.
///
/// Errors: any Compute failure other than a refused promotion, as [`SyncError::Compute`];
/// [`SyncError::Compute`] as well when the address has no IP after a successful insert.
pub async fn ensure_managed(
    compute: &Compute,
    name: &str,
    current_ip: Option<&str>,
    changes: &mut Changes,
) -> Result<String, SyncError> {
    if let Some(ip) = current_ip {
        let promote = model::Address::new()
            .set_name(name)
            .set_address(ip)
            .set_description(DESCRIPTION);
        match compute.insert_global_address(&promote).await {
            Ok(()) => {
                record(changes, KIND, name, Action::Created);
                return Ok(ip.to_string());
            }
            // Another worker won the race; or the IP is reserved elsewhere (see below).
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) if matches!(e.kind(), ErrorKind::Invalid | ErrorKind::ResourceInUse) => {
                tracing::info!(name, ip, error = %e,
                    "the rules' IP cannot be promoted (reserved by another address); reserving a new one");
            }
            Err(e) => return Err(SyncError::compute(KIND, name, e)),
        }
        if let Some(ip) = refetch_ip(compute, name).await? {
            return Ok(ip);
        }
    }
    let fresh = model::Address::new()
        .set_name(name)
        .set_description(DESCRIPTION);
    match compute.insert_global_address(&fresh).await {
        // The insert is in the state cache already (without its IP, which the API chose:
        // `Compute::note_insert`), so if the read below is refused (no
        // `compute.globalAddresses.get`), the Ingress's deletion and garbage collection still
        // know the address exists and delete it.
        Ok(()) => record(changes, KIND, name, Action::Created),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(SyncError::compute(KIND, name, e)),
    }
    // The API chose the IP: the one read back after a write.
    refetch_ip(compute, name)
        .await?
        .ok_or_else(|| SyncError::NoAddress {
            name: name.to_string(),
        })
}

/// The address's IP as the state cache knows it, `None` when it does not exist.
pub async fn get_ip(compute: &Compute, name: &str) -> Result<Option<String>, SyncError> {
    Ok(compute
        .observed::<model::Address>(name)
        .await
        .map_err(|e| SyncError::compute(KIND, name, e))?
        .and_then(|a| a.address.clone()))
}

/// The address's IP read from the API (and recorded), `None` when it does not exist.
async fn refetch_ip(compute: &Compute, name: &str) -> Result<Option<String>, SyncError> {
    Ok(compute
        .refetch::<model::Address>(name)
        .await
        .map_err(|e| SyncError::compute(KIND, name, e))?
        .and_then(|a| a.address.clone()))
}

/// Deletes the address when it is known to exist; gone already is fine.
pub async fn delete(compute: &Compute, name: &str, changes: &mut Changes) -> Result<(), SyncError> {
    super::remove_observed::<model::Address, _, _>(
        compute,
        KIND,
        name,
        || compute.delete_global_address(name),
        changes,
    )
    .await
}

// In a region: read with `get` per sync, not through the global state cache.

/// The IP (and tier) of the regional address `name` of `region` for a `kind` load balancer.
///
/// # Errors
/// [`SyncError::RegionalStaticIp`] with the problem and the gcloud command that fixes it
/// (missing, global-only or of the wrong type); [`SyncError::Compute`] when a read fails.
pub async fn resolve_regional(
    compute: &Compute,
    config: &TranslateConfig,
    kind: RegionalClass,
    region: &str,
    name: &str,
) -> Result<ResolvedAddress, SyncError> {
    let err = |e| SyncError::compute(KIND, name, e);
    let regional = compute
        .get_region_address(region, name)
        .await
        .map_err(err)?;
    let global_exists = if regional.is_none() {
        compute
            .get_global_address(name)
            .await
            .map_err(err)?
            .is_some()
    } else {
        false
    };
    // The subnet an internal address would be reserved in, for the fix: `--subnetwork`, else
    // the network's one (non proxy-only) subnet of the region.
    let subnet = match (&config.subnetwork, kind, &regional) {
        (Some(s), _, _) => Some(s.clone()),
        (None, RegionalClass::Internal, None) => compute
            .list_subnetworks(&config.network_project, region)
            .await
            .map_err(err)?
            .into_iter()
            .find(|s| {
                s.purpose.as_ref().and_then(|p| p.name()) != Some(REGIONAL_MANAGED_PROXY)
                    && s.network
                        .as_deref()
                        .is_some_and(|n| n.rsplit('/').next() == Some(config.network.as_str()))
            })
            .and_then(|s| s.name),
        _ => None,
    };
    check(
        config,
        kind,
        region,
        name,
        regional.as_ref(),
        global_exists,
        subnet.as_deref(),
    )
    .map_err(|p| SyncError::RegionalStaticIp {
        problem: p.problem,
        command: p.command,
    })
}
