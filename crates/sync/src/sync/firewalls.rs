//! The shared L7 firewall rule (`compute.firewalls`, inventory §8), in the project that owns
//! the cluster's network (the Shared VPC host project on a Shared VPC cluster).
//!
//! On a Shared VPC cluster the service project may not write firewall rules: the API answers
//! 403. Then the sync still succeeds and the caller emits GKE's `XPN` Event with the gcloud
//! command the security admin must run ([`FirewallOutcome::Forbidden`]).
//!
//! [`RuleState`] is what this process knows of the rule between syncs (held under the
//! controller's firewall lock): whether it is known to be gone, so that deleting many Ingresses
//! at once sends one `firewalls.delete` and not one per Ingress (each sees no Ingress left);
//! the last rule synced, for hints; and a short-lived listing of the network's rules, for the
//! check that Google's ranges get through ([`blocked_ports`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use google_cloud_compute_v1::model;

use super::{Changes, Managed, SyncError};
use crate::compute::{Compute, ErrorKind};
use crate::translate::{google_ranges_blocked, FirewallBlock};

/// Event kind.
pub const KIND: &str = "Firewall";

/// How long a listing of the network's firewall rules is reused by [`blocked_ports`].
pub const LISTING_TTL: Duration = Duration::from_secs(10);

impl Managed for model::Firewall {
    const KIND: &'static str = KIND;
    const CLEARABLE: &'static [&'static str] = &["allowed", "sourceRanges", "targetTags"];
    fn resource_name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }
    fn take_fingerprint(&mut self, _observed: &Self) {}
}

/// Result of syncing the firewall rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirewallOutcome {
    /// The rule is as desired (created, updated or already right).
    InSync,
    /// The API refused the write with 403; `exists` tells whether the rule is there already
    /// (the admin must `update` it) or not (`create`).
    Forbidden {
        /// Whether the rule exists.
        exists: bool,
    },
}

/// What this process knows of the shared rule; keep it under one lock with the syncs.
#[derive(Debug, Default)]
pub struct RuleState {
    /// This process deleted the rule (or found it gone) and has not written it since.
    absent: bool,
    /// The rule last asked for, and whether it existed then (for the gcloud hints).
    last: Option<(model::Firewall, bool)>,
    /// The last listing of the network's rules and when it was made.
    listing: Option<(Instant, Arc<Vec<model::Firewall>>)>,
}

impl RuleState {
    /// The rule last synced and whether it existed, if any sync ran.
    pub fn last(&self) -> Option<&(model::Firewall, bool)> {
        self.last.as_ref()
    }

    /// Whether the last listing of the network's rules ([`blocked_ports`]) holds `name`.
    pub fn listed(&self, name: &str) -> Option<bool> {
        self.listing
            .as_ref()
            .map(|(_, rules)| rules.iter().any(|r| r.name.as_deref() == Some(name)))
    }
}

/// Inserts or updates the rule in `project`; a 403 on the write is an outcome, not an error.
pub async fn ensure(
    compute: &Compute,
    project: &str,
    desired: &model::Firewall,
    state: &mut RuleState,
    changes: &mut Changes,
) -> Result<FirewallOutcome, SyncError> {
    let name = desired.resource_name();
    let result = super::ensure(
        project,
        desired,
        || compute.get_firewall(project, name),
        |body| async move { compute.insert_firewall(project, &body).await },
        |body| async move { compute.update_firewall(project, name, &body).await },
        changes,
    )
    .await;
    state.listing = None;
    let outcome = match result {
        Ok(()) => FirewallOutcome::InSync,
        Err(e) if e.compute_kind() == Some(ErrorKind::Forbidden) => {
            let exists = matches!(compute.get_firewall(project, name).await, Ok(Some(_)));
            tracing::warn!(name, project, exists, error = %e, "firewall write forbidden (Shared VPC?)");
            FirewallOutcome::Forbidden { exists }
        }
        Err(e) => return Err(e),
    };
    let exists = !matches!(outcome, FirewallOutcome::Forbidden { exists: false });
    state.absent = !exists;
    state.last = Some((desired.clone(), exists));
    Ok(outcome)
}

/// Deletes the rule in `project` (no Ingress left); gone already is fine, and a rule this
/// process already deleted is not deleted again.
///
/// A 403 is forgiven (logged, the rule left to the security admin) only on a Shared VPC
/// cluster, where `project` (the network's host project) is not the operator's own project,
/// as GKE does at GC time (ingress-gce `pkg/firewalls/firewalls_l7.go` deleteFirewall:
/// `IsForbiddenError(err) && cloud.OnXPN()`). In the operator's own project a 403 is a missing
/// permission (`compute.firewalls.delete`): it is returned, so the caller says so (the
/// `PermissionDenied` Event) and retries, instead of leaking the rule silently.
///
/// Errors: any refusal other than 404, and a 403 outside a Shared VPC, as [`SyncError::Compute`].
pub async fn delete(
    compute: &Compute,
    project: &str,
    name: &str,
    state: &mut RuleState,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    if state.absent {
        return Ok(());
    }
    state.listing = None;
    match super::remove(
        KIND,
        name,
        || compute.delete_firewall(project, name),
        changes,
    )
    .await
    {
        Err(e)
            if e.compute_kind() == Some(ErrorKind::Forbidden) && project != compute.project() =>
        {
            tracing::warn!(name, project, error = %e, "firewall delete forbidden on the Shared VPC host project; leaving it to its security admin");
            Ok(())
        }
        Err(e) => Err(e),
        Ok(()) => {
            state.absent = true;
            if let Some((_, exists)) = &mut state.last {
                *exists = false;
            }
            Ok(())
        }
    }
}

/// For each of `ports`, why Google's health checkers and proxies cannot reach it on nodes
/// tagged `node_tags` in `network_ref` (`projects/{p}/global/networks/{n}`), from the network
/// project's firewall rules (listed at most once per [`LISTING_TTL`]). Ports that get through
/// are left out.
///
/// Errors: the listing failed.
pub async fn blocked_ports(
    compute: &Compute,
    network_ref: &str,
    ports: impl IntoIterator<Item = u16>,
    node_tags: &[String],
    state: &mut RuleState,
) -> Result<BTreeMap<u16, FirewallBlock>, SyncError> {
    let project = network_ref.split('/').nth(1).unwrap_or_default();
    let rules = match &state.listing {
        Some((at, rules)) if at.elapsed() < LISTING_TTL => rules.clone(),
        _ => {
            let rules = Arc::new(
                compute
                    .list_firewalls(project)
                    .await
                    .map_err(|e| SyncError::compute(KIND, project, e))?,
            );
            state.listing = Some((Instant::now(), rules.clone()));
            rules
        }
    };
    Ok(ports
        .into_iter()
        .filter_map(|p| Some((p, google_ranges_blocked(&rules, network_ref, p, node_tags)?)))
        .collect())
}

#[cfg(test)]
#[path = "firewalls_tests.rs"]
mod tests;
