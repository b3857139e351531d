//! Regional forwarding rules (`compute.forwardingRules`) of internal load balancers
//! (`loadBalancingScheme: INTERNAL_MANAGED`; the API gives them an address of the subnet).
//! An existing rule is pointed at its proxy with `setTarget`; any other difference (network,
//! subnetwork, port, scheme) cannot be patched and replaces the rule.

use google_cloud_compute_v1::model;

use super::{record, Action, Changes, SyncError};
use crate::compute::reference::normalize;
use crate::compute::Compute;

/// Event kind.
pub const KIND: &str = super::forwarding_rules::KIND;

/// Whether `observed` can stay (its target aside): each of the network, the subnetwork and the
/// IP address `desired` names is the same (a field it leaves unset is the API's choice), and the
/// port range and the scheme are. Anything else replaces the rule.
fn keeps(project: &str, desired: &model::ForwardingRule, observed: &model::ForwardingRule) -> bool {
    let norm = |v: Option<&str>| normalize(project, v.unwrap_or_default());
    let same = |a: Option<&str>, b: Option<&str>| a.is_none() || norm(a) == norm(b);
    same(desired.network.as_deref(), observed.network.as_deref())
        && same(
            desired.subnetwork.as_deref(),
            observed.subnetwork.as_deref(),
        )
        && super::forwarding_rules::port_range(desired.port_range.as_deref())
            == super::forwarding_rules::port_range(observed.port_range.as_deref())
        && desired.load_balancing_scheme == observed.load_balancing_scheme
        && desired
            .ip_address
            .as_ref()
            .is_none_or(|ip| Some(ip) == observed.ip_address.as_ref())
}

/// Inserts the rule in `region` or brings it in line; returns its IP address.
pub async fn ensure(
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
        if keeps(project, desired, observed) {
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
pub async fn delete(
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
#[path = "region_forwarding_rules_tests.rs"]
mod tests;
