//! The managed static IP (`compute.globalAddresses`): when an Ingress serves both HTTP and
//! HTTPS without `kubernetes.io/ingress.global-static-ip-name`, GKE promotes the HTTP forwarding
//! rule's ephemeral IP to a reserved global address named like that rule (`k8s2-fr-<lb>`), so
//! the HTTPS rule can share it (an ephemeral IP in use by one rule cannot be given to another).
//! Sources: inventory §1 (`ingress.kubernetes.io/static-ip`) and §4 ("A managed static IP takes
//! the HTTP FR's name"; sync order "static-IP promotion (only when HTTP and TLS are both on)");
//! ingress-gce `pkg/loadbalancers/addresses.go` checkStaticIP.
//!
//! The address lives as long as the Ingress (so its IP stays stable across updates) and is
//! deleted with the Ingress's frontend or by garbage collection; a user's reserved address
//! (never named like ours) is never touched.

use google_cloud_compute_v1::model;

use super::{record, Action, Changes, SyncError};
use crate::compute::{Compute, ErrorKind};

/// Event kind (`Address "k8s2-fr-..." created`).
pub const KIND: &str = "Address";

/// Description written on the managed address.
const DESCRIPTION: &str =
    "Static IP managed by gclb-operator for an Ingress (HTTP and HTTPS share it)";

/// The managed address's IP, reserving it when absent: first by promoting `ephemeral_ip` (the
/// HTTP rule's current IP, so the Ingress IP does not change); when Compute refuses that promotion
/// with a 400 (an emulator that does not implement promotion of an in-use IP) a fresh address is
/// reserved instead and the rules move to it once. `Ok(None)` when there is nothing to promote
/// yet (no HTTP rule IP).
///
/// Errors: any Compute failure other than the refused promotion, as [`SyncError::Compute`].
pub async fn ensure_managed(
    compute: &Compute,
    name: &str,
    ephemeral_ip: Option<&str>,
    changes: &mut Changes,
) -> Result<Option<String>, SyncError> {
    let err = |e| SyncError::compute(KIND, name, e);
    if let Some(ip) = get_ip(compute, name).await? {
        return Ok(Some(ip));
    }
    let Some(ephemeral_ip) = ephemeral_ip else {
        return Ok(None);
    };
    let promote = model::Address::new()
        .set_name(name)
        .set_address(ephemeral_ip)
        .set_description(DESCRIPTION);
    match compute.insert_global_address(&promote).await {
        Ok(()) => record(changes, KIND, name, Action::Created),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        // 400: invalid, or read as in use since the message says the IP is taken.
        Err(e) if matches!(e.kind(), ErrorKind::Invalid | ErrorKind::ResourceInUse) => {
            tracing::warn!(name, ip = ephemeral_ip, error = %e,
                "promoting the HTTP rule's IP was refused; reserving a new address instead");
            let fresh = model::Address::new()
                .set_name(name)
                .set_description(DESCRIPTION);
            match compute.insert_global_address(&fresh).await {
                Ok(()) => record(changes, KIND, name, Action::Created),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                Err(e) => return Err(err(e)),
            }
        }
        Err(e) => return Err(err(e)),
    }
    get_ip(compute, name).await
}

/// The address's IP, `None` when it does not exist.
pub async fn get_ip(compute: &Compute, name: &str) -> Result<Option<String>, SyncError> {
    Ok(compute
        .get_global_address(name)
        .await
        .map_err(|e| SyncError::compute(KIND, name, e))?
        .and_then(|a| a.address))
}

/// Deletes the address; gone already is fine.
pub async fn delete(compute: &Compute, name: &str, changes: &mut Changes) -> Result<(), SyncError> {
    super::remove(KIND, name, || compute.delete_global_address(name), changes).await
}
