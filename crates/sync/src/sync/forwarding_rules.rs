//! Global forwarding rules (`compute.globalForwardingRules`): the load balancer's IP and port.
//!
//! A rule whose IP address, port range, protocol or scheme must change is deleted and
//! recreated (inventory §4 "Update details"); a new target goes through `setTarget`. Without a
//! desired IP the rule keeps the ephemeral IP it got, so the Ingress IP stays stable.
//!
//! The `*_regional` functions, for the regional load balancers of internal and regional
//! external Ingresses:
//! Regional forwarding rules (`compute.forwardingRules`) of internal load balancers
//! (`loadBalancingScheme: INTERNAL_MANAGED`; the API gives them an address of the subnet).
//! An existing rule is pointed at its proxy with `setTarget`; any other difference (network,
//! subnetwork, port, scheme) cannot be patched and replaces the rule.

use google_cloud_compute_v1::model;

use super::{record, Action, Changes, SyncError, MAX_CONFLICT_RETRIES};
use crate::compute::reference::normalize;
use crate::compute::{Compute, ErrorKind};

/// Event kind (GKE: `ForwardingRule "x" created`).
pub const KIND: &str = "ForwardingRule";

/// `80` and `80-80` are the same port range.
pub(crate) fn port_range(value: Option<&str>) -> String {
    let v = value.unwrap_or_default();
    match v.split_once('-') {
        Some((a, b)) if a == b => a.to_string(),
        _ => v.to_string(),
    }
}

fn must_recreate(desired: &model::ForwardingRule, observed: &model::ForwardingRule) -> bool {
    let ip_changed = match desired.ip_address.as_deref() {
        Some(ip) if !ip.is_empty() => observed.ip_address.as_deref() != Some(ip),
        _ => false,
    };
    let port_changed = desired.port_range.is_some()
        && port_range(desired.port_range.as_deref()) != port_range(observed.port_range.as_deref());
    let protocol_changed =
        desired.ip_protocol.is_some() && desired.ip_protocol != observed.ip_protocol;
    let scheme_changed = desired.load_balancing_scheme.is_some()
        && desired.load_balancing_scheme != observed.load_balancing_scheme;
    ip_changed || port_changed || protocol_changed || scheme_changed
}

/// Makes the rule match (observed from the state cache, which `ingress::sync_frontend` has just
/// checked against the API); returns its IP address (what `status.loadBalancer` shows).
pub async fn ensure(
    compute: &Compute,
    desired: &model::ForwardingRule,
    changes: &mut Changes,
) -> Result<Option<String>, SyncError> {
    let project = compute.project();
    let name = desired.name.as_deref().unwrap_or_default();
    let err = |e| SyncError::compute(KIND, name, e);
    let mut observed = compute
        .observed::<model::ForwardingRule>(name)
        .await
        .map_err(err)?;
    for _ in 0..MAX_CONFLICT_RETRIES {
        let Some(found) = observed.take() else {
            match compute.insert_forwarding_rule(desired).await {
                Ok(()) => {
                    // In the state cache since the API accepted it (`Compute::note_insert`).
                    record(changes, KIND, name, Action::Created);
                    // Without a desired IP the API picks one: read it (the only read back).
                    if desired
                        .ip_address
                        .as_deref()
                        .is_some_and(|ip| !ip.is_empty())
                    {
                        return Ok(desired.ip_address.clone());
                    }
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                Err(e) => return Err(err(e)),
            }
            observed = compute.refetch(name).await.map_err(err)?;
            continue;
        };
        if must_recreate(desired, &found) {
            tracing::info!(name, "forwarding rule IP or port changed; recreating");
            super::remove(KIND, name, || compute.delete_forwarding_rule(name), changes).await?;
            compute.record::<model::ForwardingRule>(name, None);
            continue;
        }
        let want = normalize(project, desired.target.as_deref().unwrap_or_default());
        let have = normalize(project, found.target.as_deref().unwrap_or_default());
        if want != have {
            let body = model::TargetReference::new().set_target(want.clone());
            compute
                .set_forwarding_rule_target(name, &body)
                .await
                .map_err(err)?;
            let mut now = (*found).clone();
            now.target = Some(want);
            compute.record(name, Some(now));
            record(changes, KIND, name, Action::Updated);
        }
        return Ok(found.ip_address.clone());
    }
    Err(SyncError::Conflict {
        kind: KIND,
        name: name.to_string(),
        attempts: MAX_CONFLICT_RETRIES,
    })
}

/// Deletes the rule when it is known to exist; gone already is fine.
pub async fn delete(compute: &Compute, name: &str, changes: &mut Changes) -> Result<(), SyncError> {
    super::remove_observed::<model::ForwardingRule, _, _>(
        compute,
        KIND,
        name,
        || compute.delete_forwarding_rule(name),
        changes,
    )
    .await
}

// In a region: read with `get` per sync, not through the global state cache.

/// Whether `observed` can stay (its target aside): each of the network, the subnetwork and the
/// IP address `desired` names is the same (a field it leaves unset is the API's choice), and the
/// port range and the scheme are. Anything else replaces the rule.
fn keeps_regional(
    project: &str,
    desired: &model::ForwardingRule,
    observed: &model::ForwardingRule,
) -> bool {
    let norm = |v: Option<&str>| normalize(project, v.unwrap_or_default());
    let same = |a: Option<&str>, b: Option<&str>| a.is_none() || norm(a) == norm(b);
    same(desired.network.as_deref(), observed.network.as_deref())
        && same(
            desired.subnetwork.as_deref(),
            observed.subnetwork.as_deref(),
        )
        && port_range(desired.port_range.as_deref()) == port_range(observed.port_range.as_deref())
        && desired.load_balancing_scheme == observed.load_balancing_scheme
        && desired
            .ip_address
            .as_ref()
            .is_none_or(|ip| Some(ip) == observed.ip_address.as_ref())
}

/// Inserts the rule in `region` or brings it in line; returns its IP address.
pub async fn ensure_regional(
    compute: &Compute,
    region: &str,
    desired: &model::ForwardingRule,
    changes: &mut Changes,
) -> Result<Option<String>, SyncError> {
    let project = compute.project();
    let name = desired.name.as_deref().unwrap_or_default();
    let err = |e| SyncError::compute(KIND, name, e);
    let observed = compute
        .get_region_forwarding_rule(region, name)
        .await
        .map_err(err)?;
    let norm = |v: Option<&str>| normalize(project, v.unwrap_or_default());
    if let Some(observed) = &observed {
        if keeps_regional(project, desired, observed) {
            if norm(desired.target.as_deref()) != norm(observed.target.as_deref()) {
                let body = model::TargetReference::new()
                    .set_target(desired.target.clone().unwrap_or_default());
                compute
                    .set_region_forwarding_rule_target(region, name, &body)
                    .await
                    .map_err(err)?;
                record(changes, KIND, name, Action::Updated);
            }
            return Ok(observed.ip_address.clone());
        }
        compute
            .delete_region_forwarding_rule(region, name)
            .await
            .map_err(err)?;
        record(changes, KIND, name, Action::Deleted);
    }
    compute
        .insert_region_forwarding_rule(region, desired)
        .await
        .map_err(err)?;
    record(changes, KIND, name, Action::Created);
    let now = compute
        .get_region_forwarding_rule(region, name)
        .await
        .map_err(err)?;
    Ok(now.and_then(|r| r.ip_address))
}

/// Deletes the rule from `region`; a 404 counts as done.
pub async fn delete_regional(
    compute: &Compute,
    region: &str,
    name: &str,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    super::remove(
        KIND,
        name,
        || compute.delete_region_forwarding_rule(region, name),
        changes,
    )
    .await
}

#[cfg(test)]
#[path = "forwarding_rules_tests.rs"]
mod tests;
