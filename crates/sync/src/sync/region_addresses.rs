//! Regional addresses (`compute.addresses`): the reserved address that
//! `kubernetes.io/ingress.regional-static-ip-name` names for an internal or regional external
//! Ingress, read (never created or deleted: the user owns it) and checked by
//! [`crate::translate::regional_address::check`].

use crate::compute::Compute;
use crate::translate::proxy_only_subnet::REGIONAL_MANAGED_PROXY;
use crate::translate::regional::RegionalClass;
use crate::translate::regional_address::{check, ResolvedAddress};
use crate::translate::TranslateConfig;

use super::SyncError;

/// Event kind.
pub const KIND: &str = "Address";

/// The IP (and tier) of the regional address `name` of `region` for a `kind` load balancer.
///
/// # Errors
/// [`SyncError::RegionalStaticIp`] with the problem and the gcloud command that fixes it
/// (missing, global-only or of the wrong type); [`SyncError::Compute`] when a read fails.
pub async fn resolve(
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
