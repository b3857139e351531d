//! Desired vs observed: creates, updates and deletes of Compute resources, as a dependency graph.
//!
//! One module per Compute resource, each an idempotent observe -> compare -> insert/update (with
//! the fingerprint) or custom verb (`setUrlMap`, `setTarget`, ...). "Observed" is the shared
//! state cache ([`crate::compute::state`]): one list per collection for every reconcile, kept
//! current by the writes recorded here, so a resource is not read back after a write whose
//! result is known. [`ingress`] runs one Ingress as a graph: what does not depend on anything
//! else at once (health checks, NEGs, the address, certificates), each dependent step as soon as
//! what it references exists (backend service after its health check and NEGs, endpoints after
//! their NEG, URL map after the backend services, proxies after the URL map and certificates,
//! forwarding rules after the proxy and the address), deletions in reverse; [`gc`] removes what
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
pub mod regional_ingress;
pub mod security_policies;
pub mod ssl_certificates;
pub mod target_http_proxies;
pub mod target_https_proxies;
pub mod url_maps;

use std::fmt;
use std::future::Future;

use serde::Serialize;

use crate::compute::observed::Listed;
use crate::compute::{Compute, ComputeError, ErrorKind};

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
    /// The region of an internal or regional external Ingress has no ACTIVE proxy-only subnet
    /// in the cluster's network: nothing is created (`translate::proxy_only_subnet`).
    #[error("no active proxy-only subnet (purpose REGIONAL_MANAGED_PROXY, role ACTIVE) in region {region} of network {network}: the regional load balancer's proxies need one, and nothing was created; create it: `{command}`")]
    NoProxyOnlySubnet {
        /// The region.
        region: String,
        /// The network name.
        network: String,
        /// The gcloud command that creates it.
        command: String,
    },
    /// The regional address `kubernetes.io/ingress.regional-static-ip-name` names is missing,
    /// global or of the wrong type (`translate::regional_address`): nothing is created or
    /// changed.
    #[error("{problem}; nothing was created or changed; fix: `{command}`")]
    RegionalStaticIp {
        /// What is wrong, naming the annotation, the address and the region.
        problem: String,
        /// The gcloud command that fixes it.
        command: String,
    },
    /// A reserved address has no IP although its insert succeeded (a Compute bug; retried).
    #[error("Address {name:?} was reserved but has no IP address; retrying later")]
    NoAddress {
        /// Address name.
        name: String,
    },
}

impl SyncError {
    /// [`SyncError::Compute`]: the Compute call on resource `name` of collection `kind`
    /// (`"BackendService"`, ...) failed with `source`.
    pub fn compute(kind: &'static str, name: &str, source: ComputeError) -> Self {
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
            Self::NoAddress { .. }
            | Self::NoProxyOnlySubnet { .. }
            | Self::RegionalStaticIp { .. } => None,
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

/// Appends to `changes` (and logs at info) that resource `name` of collection `kind`
/// (`"UrlMap"`, ...) was changed by `action`.
pub fn record(changes: &mut Changes, kind: &'static str, name: &str, action: Action) {
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
    /// Whether an update must carry the observed fingerprint (the API answers 412 otherwise).
    const FINGERPRINTED: bool = false;
    /// Whether the resource carries a known fingerprint.
    fn has_fingerprint(&self) -> bool {
        false
    }
    /// Forgets the fingerprint (the API sets a new one on every write).
    fn clear_fingerprint(&mut self) {}
    /// The resource as the API serves it back after it was written as `self`: input-only
    /// fields replaced by what the API returns instead (a backend service's IAP client secret
    /// by its SHA-256). The desired value is compared with the observed one, and a written
    /// body is recorded in the state cache, in this shape, so a secret the API never returns
    /// is not taken for a difference on every resync.
    fn as_served(&self) -> std::borrow::Cow<'_, Self> {
        std::borrow::Cow::Borrowed(self)
    }
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
                let Some(field) = compare::first_difference(
                    project,
                    &*desired.as_served(),
                    &observed,
                    T::CLEARABLE,
                ) else {
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

/// Observe -> compare -> insert or update, for a resource in the state cache: the observed value
/// comes from the shared lists, and what was written is recorded there (nothing is read back).
/// A `409` on insert or a `412` on update refetches the resource and compares again; a `404`
/// on update inserts. An update of an entry without a known fingerprint (one this operator wrote)
/// fetches the resource first.
///
/// `insert` and `update` return the body they sent (which may differ from their argument, e.g. a
/// backend service's security policy), so the record is exactly what the API holds.
pub(crate) async fn ensure_observed<T, I, IF, U, UF>(
    compute: &Compute,
    desired: &T,
    insert: I,
    update: U,
    changes: &mut Changes,
) -> Result<(), SyncError>
where
    T: Managed + Listed,
    I: Fn(T) -> IF,
    IF: Future<Output = crate::compute::Result<T>>,
    U: Fn(T) -> UF,
    UF: Future<Output = crate::compute::Result<T>>,
{
    let name = desired.resource_name();
    let err = |e| SyncError::compute(T::KIND, name, e);
    let mut observed = compute.observed::<T>(name).await.map_err(err)?;
    let mut fetched = false;
    for _ in 0..MAX_CONFLICT_RETRIES {
        match observed.take() {
            None => match insert(desired.clone()).await {
                Ok(sent) => {
                    let mut sent = sent.as_served().into_owned();
                    sent.clear_fingerprint();
                    compute.record(name, Some(sent));
                    record(changes, T::KIND, name, Action::Created);
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    fetched = true;
                    observed = compute.refetch::<T>(name).await.map_err(err)?;
                }
                Err(e) => return Err(err(e)),
            },
            Some(found) => {
                let project = compute.project();
                let Some(field) = compare::first_difference(
                    project,
                    &*desired.as_served(),
                    &*found,
                    T::CLEARABLE,
                ) else {
                    return Ok(());
                };
                tracing::debug!(kind = T::KIND, name, field, "resource differs");
                if T::FINGERPRINTED && !found.has_fingerprint() && !fetched {
                    fetched = true;
                    observed = compute.refetch::<T>(name).await.map_err(err)?;
                    continue;
                }
                let mut body = desired.clone();
                body.take_fingerprint(&found);
                match update(body).await {
                    Ok(sent) => {
                        let mut sent = sent.as_served().into_owned();
                        sent.clear_fingerprint();
                        compute.record(name, Some(sent));
                        record(changes, T::KIND, name, Action::Updated);
                        return Ok(());
                    }
                    Err(e) if e.kind() == ErrorKind::ConditionNotMet => {
                        fetched = true;
                        observed = compute.refetch::<T>(name).await.map_err(err)?;
                    }
                    Err(e) if e.kind() == ErrorKind::NotFound => {
                        compute.record::<T>(name, None);
                    }
                    Err(e) => return Err(err(e)),
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

/// Deletes resource `name` of collection `kind` with `delete` (a Compute delete: `Ok(true)`
/// when it deleted, `Ok(false)` when the resource was already gone, so a 404 counts as done).
/// Records a change only when something went.
///
/// # Errors
/// [`SyncError::Compute`] when the delete fails.
pub async fn remove<D, DF>(
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

/// Deletes a cached resource: only when the cache knows it (a DELETE of something absent is
/// still a write against the quota), recording it gone once deleted or found gone.
pub(crate) async fn remove_observed<T, D, DF>(
    compute: &Compute,
    kind: &'static str,
    name: &str,
    delete: D,
    changes: &mut Changes,
) -> Result<(), SyncError>
where
    T: Listed,
    D: FnOnce() -> DF,
    DF: Future<Output = crate::compute::Result<bool>>,
{
    let known = compute
        .observed::<T>(name)
        .await
        .map_err(|e| SyncError::compute(kind, name, e))?;
    if known.is_none() {
        return Ok(());
    }
    remove(kind, name, delete, changes).await?;
    compute.record::<T>(name, None);
    Ok(())
}

/// Runs `$body` (a block using `&mut $c`, a change list of its own) as a future yielding
/// `(changes, result)`, so steps that run at once keep their changes apart; [`merge`] joins them.
macro_rules! own_changes {
    ($c:ident, $body:block) => {
        // Boxed: steps are joined side by side, and a join holds its futures inline; unboxed,
        // the Compute client futures of a whole Ingress's graph overflow a 2 MiB worker stack
        // in debug builds.
        ::std::boxed::Box::pin(async {
            #[allow(unused_mut)]
            let mut $c = $crate::sync::Changes::new();
            let result = async { $body }.await;
            ($c, result)
        })
    };
}
pub(crate) use own_changes;

/// Appends the changes of steps that ran at once, in the order given (so Events come in a stable
/// order), and returns their values, or the first error once every step's changes are kept.
pub(crate) fn merge<T>(
    changes: &mut Changes,
    results: impl IntoIterator<Item = (Changes, Result<T, SyncError>)>,
) -> Result<Vec<T>, SyncError> {
    let mut values = Vec::new();
    let mut first_error = None;
    for (c, result) in results {
        changes.extend(c);
        match result {
            Ok(v) => values.push(v),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(values),
    }
}

#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
#[cfg(test)]
mod tests;
