//! Desired vs observed: ordered creates, updates and deletes of Compute resources.
//!
//! One module per Compute resource, each an idempotent get -> compare -> insert/update (with the
//! fingerprint) or custom verb (`setUrlMap`, `setTarget`, ...). [`ingress`] runs them in
//! dependency order for one Ingress (health check -> NEG -> backend service -> endpoints ->
//! URL map -> target proxy -> forwarding rule) and deletes in reverse; [`gc`] removes what
//! carries this cluster's names but no live Ingress wants. Comparison rules are in [`compare`];
//! they make a no-op resync send zero mutating calls.

pub mod addresses;
pub mod backend_services;
pub mod compare;
pub mod firewalls;
pub mod forwarding_rules;
pub mod gc;
pub mod health_checks;
pub mod ingress;
pub mod network_endpoint_groups;
pub mod ssl_certificates;
pub mod target_http_proxies;
pub mod target_https_proxies;
pub mod url_maps;

use std::fmt;
use std::future::Future;

use serde::Serialize;

use crate::compute::{ComputeError, ErrorKind};

/// How many times an update is retried after `412 conditionNotMet` (each time after a refetch).
pub const MAX_CONFLICT_RETRIES: usize = 4;

/// A sync step that failed.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// A Compute call failed.
    #[error("{kind} {name:?}: {source}")]
    Compute {
        /// Resource kind, e.g. `UrlMap`.
        kind: &'static str,
        /// Resource name.
        name: String,
        /// The classified Compute error.
        #[source]
        source: Box<ComputeError>,
    },
    /// The resource kept changing under us (412 after every refetch).
    #[error("{kind} {name:?}: fingerprint changed {attempts} times in a row (412 conditionNotMet); someone else is editing it, retrying later")]
    Conflict {
        /// Resource kind.
        kind: &'static str,
        /// Resource name.
        name: String,
        /// Attempts made.
        attempts: usize,
    },
    /// The SSL policy a target HTTPS proxy is to use does not exist (a FrontendConfig's
    /// `spec.sslPolicy` names it); the controller's Event names the FrontendConfig.
    #[error("{kind} {name:?}: SSL policy {policy:?} does not exist; create it (gcloud compute ssl-policies create) or fix spec.sslPolicy of the FrontendConfig")]
    SslPolicyNotFound {
        /// Resource kind (`TargetProxy`).
        kind: &'static str,
        /// The proxy.
        name: String,
        /// The policy as referenced (`projects/p/global/sslPolicies/x` or a URL).
        policy: String,
    },
    /// A reserved address has no IP although its insert succeeded (a Compute bug; retried).
    #[error("Address {name:?} was reserved but has no IP address; retrying later")]
    NoAddress {
        /// Address name.
        name: String,
    },
}

impl SyncError {
    pub(crate) fn compute(kind: &'static str, name: &str, source: ComputeError) -> Self {
        Self::Compute {
            kind,
            name: name.to_string(),
            source: Box::new(source),
        }
    }

    /// The Compute error class, when a Compute call failed.
    pub fn compute_kind(&self) -> Option<ErrorKind> {
        match self {
            Self::Compute { source, .. } => Some(source.kind()),
            Self::Conflict { .. } => Some(ErrorKind::ConditionNotMet),
            Self::SslPolicyNotFound { .. } => Some(ErrorKind::NotFound),
            Self::NoAddress { .. } => None,
        }
    }
}

/// What a sync step did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Inserted.
    Created,
    /// Updated, patched or changed through a custom verb.
    Updated,
    /// Deleted.
    Deleted,
}

/// One mutation sync made, reported as a `Sync` Event (`UrlMap "x" created`, as GKE words it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// Kind as GKE's events name it: `UrlMap`, `TargetProxy`, `ForwardingRule`, ...
    pub kind: &'static str,
    /// Resource name.
    pub name: String,
    /// What happened.
    pub action: Action,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = match self.action {
            Action::Created => "created",
            Action::Updated => "updated",
            Action::Deleted => "deleted",
        };
        write!(f, "{} {:?} {verb}", self.kind, self.name)
    }
}

/// The mutations of one sync, in the order they happened.
pub type Changes = Vec<Change>;

pub(crate) fn record(changes: &mut Changes, kind: &'static str, name: &str, action: Action) {
    tracing::info!(kind, name, ?action, "compute resource changed");
    changes.push(Change {
        kind,
        name: name.to_string(),
        action,
    });
}

/// A resource sync replaces whole (insert, or update with the observed fingerprint).
pub(crate) trait Managed: Clone + Serialize {
    /// Kind in Events.
    const KIND: &'static str;
    /// Top-level list fields that must be emptied when the desired value has none.
    const CLEARABLE: &'static [&'static str];
    /// The resource name.
    fn resource_name(&self) -> &str;
    /// Copies the fingerprint (optimistic lock) from the observed resource.
    fn take_fingerprint(&mut self, observed: &Self);
}

/// Get -> compare -> insert or update, refetching after 412 and after an insert race (409).
///
/// `update` receives the desired value carrying the observed fingerprint. Returns whether a
/// mutation was made.
// Plain closures returning futures (not async closures): futures of async closures trip the
// compiler's higher-ranked `Send` check in the controller's spawned reconciles.
pub(crate) async fn ensure<T, G, GF, I, IF, U, UF>(
    project: &str,
    desired: &T,
    get: G,
    insert: I,
    update: U,
    changes: &mut Changes,
) -> Result<(), SyncError>
where
    T: Managed,
    G: Fn() -> GF,
    GF: Future<Output = crate::compute::Result<Option<T>>>,
    I: Fn(T) -> IF,
    IF: Future<Output = crate::compute::Result<()>>,
    U: Fn(T) -> UF,
    UF: Future<Output = crate::compute::Result<()>>,
{
    let name = desired.resource_name();
    for _ in 0..MAX_CONFLICT_RETRIES {
        let observed = get()
            .await
            .map_err(|e| SyncError::compute(T::KIND, name, e))?;
        match observed {
            None => match insert(desired.clone()).await {
                Ok(()) => {
                    record(changes, T::KIND, name, Action::Created);
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(SyncError::compute(T::KIND, name, e)),
            },
            Some(observed) => {
                let Some(field) =
                    compare::first_difference(project, desired, &observed, T::CLEARABLE)
                else {
                    return Ok(());
                };
                tracing::debug!(kind = T::KIND, name, field, "resource differs");
                let mut body = desired.clone();
                body.take_fingerprint(&observed);
                match update(body).await {
                    Ok(()) => {
                        record(changes, T::KIND, name, Action::Updated);
                        return Ok(());
                    }
                    Err(e) if e.kind() == ErrorKind::ConditionNotMet => continue,
                    Err(e) => return Err(SyncError::compute(T::KIND, name, e)),
                }
            }
        }
    }
    Err(SyncError::Conflict {
        kind: T::KIND,
        name: name.to_string(),
        attempts: MAX_CONFLICT_RETRIES,
    })
}

/// Deletes with `delete`; a 404 counts as done. Records a change only when something went.
pub(crate) async fn remove<D, DF>(
    kind: &'static str,
    name: &str,
    delete: D,
    changes: &mut Changes,
) -> Result<(), SyncError>
where
    D: FnOnce() -> DF,
    DF: Future<Output = crate::compute::Result<bool>>,
{
    match delete().await {
        Ok(true) => {
            record(changes, kind, name, Action::Deleted);
            Ok(())
        }
        Ok(false) => Ok(()),
        Err(e) => Err(SyncError::compute(kind, name, e)),
    }
}

#[cfg(test)]
mod tests;
