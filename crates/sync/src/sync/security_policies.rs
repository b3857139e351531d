//! Cloud Armor security policies of `ncp/whitelist-source-range` (`translate::ncp`). They are
//! content-addressed (the name hashes the allowed ranges), so a policy is created once with all
//! its rules and never updated: a new list is a new policy, and GC deletes the old one once no
//! backend service names it. They are read straight from the API, not from the state cache:
//! one `get` per sync of an Ingress that has one, one `list` per GC.

use google_cloud_compute_v1::model;

use super::{record, Action, Changes, SyncError};
use crate::compute::{Compute, ErrorKind};

/// Kind as named in Events.
pub const KIND: &str = "SecurityPolicy";

/// Creates the policy unless it exists (before any backend service names it).
pub async fn ensure(
    compute: &Compute,
    desired: &model::SecurityPolicy,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let name = desired.name.as_deref().unwrap_or_default();
    let err = |e| SyncError::compute(KIND, name, e);
    if compute
        .get_security_policy(name)
        .await
        .map_err(err)?
        .is_some()
    {
        return Ok(());
    }
    match compute.insert_security_policy(desired).await {
        Ok(()) => {
            record(changes, KIND, name, Action::Created);
            Ok(())
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(err(e)),
    }
}

/// Names of this cluster's whitelist policies (`prefix`, from
/// `translate::ncp::security_policy_prefix`). A project where the operator may not list
/// security policies has none of ours: `Forbidden` gives an empty list.
pub async fn list_ours(compute: &Compute, prefix: &str) -> Result<Vec<String>, SyncError> {
    match compute.list_security_policies().await {
        Ok(all) => Ok(all
            .into_iter()
            .filter_map(|p| p.name)
            .filter(|n| n.starts_with(prefix))
            .collect()),
        Err(e) if e.kind() == ErrorKind::Forbidden => {
            tracing::debug!(error = %e, "may not list security policies; none to collect");
            Ok(Vec::new())
        }
        Err(e) => Err(SyncError::compute(KIND, "(list)", e)),
    }
}

/// Deletes one policy; gone already is fine, in use comes back for the caller to skip.
pub async fn delete(compute: &Compute, name: &str, changes: &mut Changes) -> Result<(), SyncError> {
    match compute.delete_security_policy(name).await {
        Ok(true) => {
            record(changes, KIND, name, Action::Deleted);
            Ok(())
        }
        Ok(false) => Ok(()),
        Err(e) => Err(SyncError::compute(KIND, name, e)),
    }
}
