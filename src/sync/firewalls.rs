//! The shared L7 firewall rule (`compute.firewalls`, inventory §8).
//!
//! On a Shared VPC cluster the service project may not write firewall rules: the API answers
//! 403. Then the sync still succeeds and the caller emits GKE's `XPN` Event with the gcloud
//! command the security admin must run ([`FirewallOutcome::Forbidden`]).

use google_cloud_compute_v1::model;

use super::{Changes, Managed, SyncError};
use crate::compute::{Compute, ErrorKind};

/// Event kind.
pub const KIND: &str = "Firewall";

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

/// Inserts or updates the rule; a 403 on the write is an outcome, not an error.
pub async fn ensure(
    compute: &Compute,
    desired: &model::Firewall,
    changes: &mut Changes,
) -> Result<FirewallOutcome, SyncError> {
    let name = desired.resource_name();
    let result = super::ensure(
        compute.project(),
        desired,
        || compute.get_firewall(name),
        |body| async move { compute.insert_firewall(&body).await },
        |body| async move { compute.update_firewall(name, &body).await },
        changes,
    )
    .await;
    match result {
        Ok(()) => Ok(FirewallOutcome::InSync),
        Err(e) if e.compute_kind() == Some(ErrorKind::Forbidden) => {
            let exists = matches!(compute.get_firewall(name).await, Ok(Some(_)));
            tracing::warn!(name, exists, error = %e, "firewall write forbidden (Shared VPC?)");
            Ok(FirewallOutcome::Forbidden { exists })
        }
        Err(e) => Err(e),
    }
}

/// Deletes the rule (no Ingress left); gone already is fine. A 403 is only logged, as GKE does
/// at GC time.
pub async fn delete(compute: &Compute, name: &str, changes: &mut Changes) -> Result<(), SyncError> {
    match super::remove(KIND, name, || compute.delete_firewall(name), changes).await {
        Err(e) if e.compute_kind() == Some(ErrorKind::Forbidden) => {
            tracing::warn!(name, error = %e, "firewall delete forbidden (Shared VPC?); leaving it");
            Ok(())
        }
        other => other,
    }
}
