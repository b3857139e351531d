//! Zonal network endpoint groups (`compute.networkEndpointGroups`, `GCE_VM_IP_PORT`) and their
//! endpoints. Endpoints follow EndpointSlices: the set difference against
//! `listNetworkEndpoints` is attached and detached in batches of at most
//! [`MAX_ENDPOINTS_PER_CALL`] (the API's limit per call).

use std::collections::BTreeSet;

use google_cloud_compute_v1::model;

use super::{record, Action, Changes, SyncError};
use crate::compute::{Compute, ErrorKind};
use crate::translate::{DesiredNeg, NegEndpoint};

/// Event kind.
pub const KIND: &str = "NetworkEndpointGroup";

/// The API accepts at most this many endpoints per attach or detach call.
pub const MAX_ENDPOINTS_PER_CALL: usize = 500;

/// An endpoint's identity in a NEG: IP and port (the instance is derived by the API).
type EndpointKey = (String, i32);

fn key_of(ep: &model::NetworkEndpoint) -> EndpointKey {
    (
        ep.ip_address.clone().unwrap_or_default(),
        ep.port.unwrap_or(0),
    )
}

fn to_model(ep: &NegEndpoint) -> model::NetworkEndpoint {
    let mut out = model::NetworkEndpoint::new()
        .set_ip_address(ep.ip_address.clone())
        .set_port(ep.port);
    if let Some(instance) = &ep.instance {
        out = out.set_instance(instance.clone());
    }
    out
}

/// Endpoints to attach and to detach, computed by set difference (pure).
pub fn endpoint_diff(
    desired: &BTreeSet<NegEndpoint>,
    observed: &[model::NetworkEndpoint],
) -> (Vec<model::NetworkEndpoint>, Vec<model::NetworkEndpoint>) {
    let want: BTreeSet<EndpointKey> = desired
        .iter()
        .map(|e| (e.ip_address.clone(), e.port))
        .collect();
    let have: BTreeSet<EndpointKey> = observed.iter().map(key_of).collect();
    let attach = desired
        .iter()
        .filter(|e| !have.contains(&(e.ip_address.clone(), e.port)))
        .map(to_model)
        .collect();
    let detach = observed
        .iter()
        .filter(|e| !want.contains(&key_of(e)))
        .cloned()
        .collect();
    (attach, detach)
}

/// Inserts the NEG when missing (a NEG is immutable; an existing one is kept as is). Whether
/// it exists comes from the state cache; a new NEG is recorded there with no endpoints.
pub async fn ensure(
    compute: &Compute,
    desired: &DesiredNeg,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let name = desired.neg.name.as_deref().unwrap_or_default();
    let err = |e| SyncError::compute(KIND, name, e);
    if compute
        .observed_neg(&desired.zone, name)
        .await
        .map_err(err)?
        .is_some()
    {
        return Ok(());
    }
    match compute
        .insert_network_endpoint_group(&desired.zone, &desired.neg)
        .await
    {
        Ok(()) => {
            // The NEG is in the state cache since the API accepted it
            // (`Compute::note_neg_insert`); a new NEG has no endpoints.
            compute.record_endpoints(&desired.zone, name, Vec::new());
            record(changes, KIND, name, Action::Created);
            Ok(())
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(err(e)),
    }
}

/// Attaches missing endpoints (first, so traffic has somewhere to go) and detaches stale ones.
/// What the NEG holds comes from the state cache (`listNetworkEndpoints` when unknown or
/// stale) and is recorded there after each batch. Returns (attached, detached) counts.
pub async fn sync_endpoints(
    compute: &Compute,
    desired: &DesiredNeg,
) -> Result<(usize, usize), SyncError> {
    let name = desired.neg.name.as_deref().unwrap_or_default();
    let err = |e| SyncError::compute(KIND, name, e);
    let observed = compute
        .observed_endpoints(&desired.zone, name)
        .await
        .map_err(err)?;
    let (attach, detach) = endpoint_diff(&desired.endpoints, &observed);
    let mut now: Vec<model::NetworkEndpoint> = observed.to_vec();
    for batch in attach.chunks(MAX_ENDPOINTS_PER_CALL) {
        compute
            .attach_network_endpoints(&desired.zone, name, batch.to_vec())
            .await
            .map_err(err)?;
        now.extend(batch.iter().cloned());
        compute.record_endpoints(&desired.zone, name, now.clone());
    }
    for batch in detach.chunks(MAX_ENDPOINTS_PER_CALL) {
        compute
            .detach_network_endpoints(&desired.zone, name, batch.to_vec())
            .await
            .map_err(err)?;
        let gone: BTreeSet<EndpointKey> = batch.iter().map(key_of).collect();
        now.retain(|e| !gone.contains(&key_of(e)));
        compute.record_endpoints(&desired.zone, name, now.clone());
    }
    if !attach.is_empty() || !detach.is_empty() {
        tracing::info!(neg = name, zone = %desired.zone, attached = attach.len(), detached = detach.len(), "NEG endpoints synced");
    }
    Ok((attach.len(), detach.len()))
}

/// Deletes the NEG in `zone`; gone already is fine (recorded gone in the state cache).
pub async fn delete(
    compute: &Compute,
    zone: &str,
    name: &str,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    super::remove(
        KIND,
        name,
        || compute.delete_network_endpoint_group(zone, name),
        changes,
    )
    .await?;
    compute.record_neg(zone, name, None);
    Ok(())
}
