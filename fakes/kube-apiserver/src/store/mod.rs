//! Object storage: every object as `serde_json::Value`, one global resourceVersion counter,
//! a bounded history of changes for watch resumption, and the API conventions' write rules
//! (uid, generation, creationTimestamp, generateName, optimistic concurrency, status
//! subresource separation, finalizers and graceful deletion, namespace lifecycle).
//!
//! Locking: one `std::sync::Mutex` around the whole state; every operation is short and
//! never awaits while holding it. Changes are published on a broadcast channel while the lock is
//! held, so a watcher that subscribes under the lock sees a gapless sequence.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Value};
use tokio::sync::broadcast;

mod deletion;
mod garbage_collection;
mod names;
mod namespaces;
mod write;

pub use namespaces::DEFAULT_SERVICE_ACCOUNT;

use crate::meta::{self, metadata_mut};
use crate::registry::{Registry, ResourceInfo};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::{crds, events};

/// Default number of changes kept for watch resumption; older resourceVersions get 410 Expired.
pub const HISTORY_LIMIT: usize = 20_000;

/// Annotation with which a Pod opts in to the local kubelet (docs/architecture.md).
pub const LOCAL_RUN_ANNOTATION: &str = "local.gclb-operator.dev/run";

/// Type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeType {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
}

impl ChangeType {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeType::Added => "ADDED",
            ChangeType::Modified => "MODIFIED",
            ChangeType::Deleted => "DELETED",
        }
    }
}

/// One committed change (in storage form).
#[derive(Debug, Clone)]
pub struct Change {
    /// resourceVersion of the change.
    pub rv: u64,
    /// Storage key (see [`ResourceInfo::storage`]).
    pub storage: String,
    /// Namespace (`""` for cluster-scoped).
    pub namespace: String,
    /// What happened.
    pub kind: ChangeType,
    /// The object after the change (for deletions: the last state, with the deletion's rv).
    pub object: Value,
    /// The object before the change, for selector transitions in watches.
    pub old: Option<Value>,
}

type Key = (String, String, String);

#[derive(Default)]
struct Inner {
    rv: u64,
    objects: BTreeMap<Key, Value>,
    history: VecDeque<Arc<Change>>,
    /// Highest rv dropped from `history`; watches must start at or after it.
    dropped_upto: u64,
}

/// Options of a delete (`DeleteOptions` body and query parameters).
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `propagationPolicy`: `Background` (default), `Foreground` or `Orphan` (see
    /// `garbage_collection`).
    pub propagation_policy: Option<String>,
}

/// A list request.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// Namespace, `None` for all namespaces.
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
    /// `limit` (0 = unlimited).
    pub limit: usize,
    /// `continue` token from a previous page.
    pub continue_token: Option<String>,
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct ListPage {
    /// Items in client form.
    pub items: Vec<Value>,
    /// resourceVersion of the list.
    pub resource_version: u64,
    /// Token for the next page, if any.
    pub continue_token: Option<String>,
    /// Items left after this page; `None` when the list had a label or field selector (the
    /// real server leaves `remainingItemCount` unset then).
    pub remaining: Option<usize>,
}

/// Who is writing, for managedFields.
#[derive(Clone)]
pub struct Writer {
    /// Field manager name.
    pub manager: String,
    /// `Update` or `Apply`.
    pub operation: &'static str,
    /// For `Apply`: the applied configuration, whose fields the manager then owns.
    pub applied: Option<Value>,
    /// The schemas that name list elements in `managedFields` (`None`: lists are leaves).
    pub openapi: Option<Arc<crate::openapi::OpenApi>>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("manager", &self.manager)
            .field("operation", &self.operation)
            .field("applied", &self.applied)
            .finish_non_exhaustive()
    }
}

impl Writer {
    /// An `Update` writer.
    pub fn update(manager: impl Into<String>) -> Self {
        Writer {
            manager: manager.into(),
            operation: "Update",
            applied: None,
            openapi: None,
        }
    }

    /// The same writer, naming list elements in `managedFields` by `openapi`'s schemas.
    pub fn with_openapi(mut self, openapi: Arc<crate::openapi::OpenApi>) -> Self {
        self.openapi = Some(openapi);
        self
    }
}

/// The object store. Cheap to share behind an `Arc`.
pub struct Store {
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Arc<Change>>,
    /// Served resources, updated when CRDs change.
    pub registry: Registry,
    dirty: tokio::sync::Notify,
    history_limit: usize,
}

fn not_found(res: &ResourceInfo, name: &str) -> ApiError {
    ApiError::NotFound {
        resource: res.qualified(),
        name: name.to_string(),
        group: res.group.clone(),
    }
}

fn invalid(res: &ResourceInfo, name: &str, field: &str, message: impl Into<String>) -> ApiError {
    ApiError::Invalid {
        kind: res.kind.clone(),
        name: name.to_string(),
        group: res.group.clone(),
        field: field.to_string(),
        message: message.into(),
    }
}

impl Store {
    /// An empty store with the `default`, `kube-system`, `kube-public` and `kube-node-lease`
    /// namespaces, keeping the last `history_limit` changes for watch resumption.
    pub fn new(registry: Registry, history_limit: usize) -> Arc<Self> {
        let (tx, _) = broadcast::channel(4096);
        let store = Arc::new(Store {
            inner: Mutex::default(),
            tx,
            registry,
            dirty: tokio::sync::Notify::new(),
            history_limit: history_limit.max(1),
        });
        let ns = store
            .registry
            .find("", "v1", "namespaces")
            .expect("namespaces served");
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            let _ = store.create(&ns, "", obj, &Writer::update("kube-apiserver"));
        }
        store
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Resolves until the state changed since the last call (for the state file writer).
    pub async fn changed(&self) {
        self.dirty.notified().await
    }

    /// Current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    #[allow(clippy::too_many_arguments)]
    fn commit(
        &self,
        inner: &mut Inner,
        kind: ChangeType,
        res: &ResourceInfo,
        ns: &str,
        name: &str,
        mut object: Value,
        old: Option<Value>,
    ) -> Value {
        inner.rv += 1;
        let rv = inner.rv;
        metadata_mut(&mut object).insert("resourceVersion".into(), json!(rv.to_string()));
        let key = (res.storage.clone(), ns.to_string(), name.to_string());
        if kind == ChangeType::Deleted {
            inner.objects.remove(&key);
        } else {
            inner.objects.insert(key, object.clone());
        }
        let change = Arc::new(Change {
            rv,
            storage: res.storage.clone(),
            namespace: ns.to_string(),
            kind,
            object: object.clone(),
            old,
        });
        inner.history.push_back(change.clone());
        while inner.history.len() > self.history_limit {
            if let Some(c) = inner.history.pop_front() {
                inner.dropped_upto = c.rv;
            }
        }
        let _ = self.tx.send(change);
        self.dirty.notify_one();
        tracing::debug!(rv, resource = %res.storage, namespace = ns, name, change = kind.as_str(), "commit");
        object
    }

    /// Converts a stored object into what a client of `res` sees (apiVersion of the requested
    /// version; events.k8s.io/v1 shape for such Events).
    pub fn present(res: &ResourceInfo, obj: &Value) -> Value {
        if res.is_events_v1() {
            return events::core_to_v1(obj);
        }
        let mut v = obj.clone();
        v["apiVersion"] = json!(res.api_version());
        v["kind"] = json!(res.kind);
        v
    }

    fn to_storage(res: &ResourceInfo, obj: Value) -> Value {
        if res.is_events_v1() {
            events::v1_to_core(&obj)
        } else {
            obj
        }
    }

    /// `GET` one object.
    ///
    /// Errors: 404 [`ApiError::NotFound`].
    pub fn get(&self, res: &ResourceInfo, ns: &str, name: &str) -> Result<Value, ApiError> {
        let inner = self.lock();
        inner
            .objects
            .get(&(res.storage.clone(), ns.to_string(), name.to_string()))
            .map(|o| Self::present(res, o))
            .ok_or_else(|| not_found(res, name))
    }

    /// One stored object by storage key (see [`ResourceInfo::storage`]), in storage form.
    pub fn get_stored(&self, storage: &str, ns: &str, name: &str) -> Option<Value> {
        self.lock()
            .objects
            .get(&(storage.to_string(), ns.to_string(), name.to_string()))
            .cloned()
    }

    /// The stored objects under a storage key, in one namespace or all, in storage form.
    pub fn list_stored(&self, storage: &str, ns: Option<&str>) -> Vec<Value> {
        let inner = self.lock();
        let start = (
            storage.to_string(),
            ns.unwrap_or_default().to_string(),
            String::new(),
        );
        inner
            .objects
            .range(start..)
            .take_while(|((s, n, _), _)| s == storage && ns.is_none_or(|want| want == n))
            .map(|(_, o)| o.clone())
            .collect()
    }

    /// Lists objects of `res` in name order (namespace, then name), filtered and paginated.
    ///
    /// A page starts right after its continue token's key and presents (clones into client
    /// form) only the objects it returns, so listing 10k Pods in pages of 500 costs one pass,
    /// not one pass per page. Selectors are matched on the stored form: they read `metadata`,
    /// `spec` and `status`, which presenting does not change (events are converted first).
    /// `remaining` is counted only for a list without selectors: with a label or field selector
    /// the real server does not know it and leaves `remainingItemCount` unset (ListMeta,
    /// Kubernetes API reference), so the page stops at the first match past `limit`.
    ///
    /// Errors: 400 for a malformed continue token.
    pub fn list(&self, res: &ResourceInfo, opts: &ListOptions) -> Result<ListPage, ApiError> {
        use std::ops::Bound;
        let inner = self.lock();
        let from = match &opts.continue_token {
            Some(t) if !t.is_empty() => {
                let (ns, name) = t.split_once('/').ok_or_else(|| {
                    ApiError::BadRequest(format!(
                        "continue token {t:?} is not valid; start the list again without it"
                    ))
                })?;
                Bound::Excluded((res.storage.clone(), ns.to_string(), name.to_string()))
            }
            _ => Bound::Included((
                res.storage.clone(),
                opts.namespace.clone().unwrap_or_default(),
                String::new(),
            )),
        };
        let selective = !opts.labels.0.is_empty() || !opts.fields.0.is_empty();
        let mut items = Vec::new();
        let mut last: Option<(String, String)> = None;
        let mut remaining = 0;
        for ((storage, ns, name), obj) in inner.objects.range((from, Bound::Unbounded)) {
            if *storage != res.storage || opts.namespace.as_ref().is_some_and(|want| want != ns) {
                break;
            }
            if selective {
                let matched = if res.is_events_v1() {
                    let view = Self::present(res, obj);
                    opts.labels.matches(&view) && opts.fields.matches(&view)
                } else {
                    opts.labels.matches(obj) && opts.fields.matches(obj)
                };
                if !matched {
                    continue;
                }
            }
            if opts.limit > 0 && items.len() >= opts.limit {
                remaining += 1;
                if selective {
                    break; // one more match is enough to know there is a next page
                }
                continue;
            }
            last = Some((ns.clone(), name.clone()));
            items.push(Self::present(res, obj));
        }
        let continue_token = if remaining > 0 {
            last.map(|(ns, n)| format!("{ns}/{n}"))
        } else {
            None
        };
        Ok(ListPage {
            items,
            resource_version: inner.rv,
            continue_token,
            remaining: if selective { None } else { Some(remaining) },
        })
    }

    /// Subscribes to changes and returns, atomically with the subscription, the changes after
    /// `since` still in history (for watch resumption), or `Err(oldest)` when `since` is older
    /// than the retained window.
    #[allow(clippy::type_complexity)]
    pub fn subscribe_since(
        &self,
        since: u64,
    ) -> (
        broadcast::Receiver<Arc<Change>>,
        Result<Vec<Arc<Change>>, u64>,
        u64,
    ) {
        let inner = self.lock();
        let rx = self.tx.subscribe();
        let backlog = if since < inner.dropped_upto {
            Err(inner.dropped_upto)
        } else {
            Ok(inner
                .history
                .iter()
                .filter(|c| c.rv > since)
                .cloned()
                .collect())
        };
        (rx, backlog, inner.rv)
    }

    /// Subscribes to changes and returns, atomically, the current objects of `res` (storage
    /// form, with their storage keys) for a watch that starts with the current state.
    pub fn subscribe_with_state(
        &self,
        res: &ResourceInfo,
    ) -> (broadcast::Receiver<Arc<Change>>, Vec<(String, Value)>, u64) {
        let inner = self.lock();
        let rx = self.tx.subscribe();
        let state = inner
            .objects
            .range((res.storage.clone(), String::new(), String::new())..)
            .take_while(|((s, _, _), _)| *s == res.storage)
            .map(|((_, ns, _), o)| (ns.clone(), o.clone()))
            .collect();
        (rx, state, inner.rv)
    }

    /// Every object with its storage key, and the global resourceVersion (for the state file).
    pub fn snapshot(&self) -> (u64, Vec<(String, Value)>) {
        let inner = self.lock();
        (
            inner.rv,
            inner
                .objects
                .iter()
                .map(|((s, _, _), o)| (s.clone(), o.clone()))
                .collect(),
        )
    }

    /// Replaces the whole state (from the state file); CRDs are registered again.
    pub fn restore(&self, rv: u64, objects: Vec<(String, Value)>) {
        let mut inner = self.lock();
        inner.objects.clear();
        inner.history.clear();
        inner.rv = rv;
        inner.dropped_upto = rv;
        let crd_storage = "apiextensions.k8s.io/customresourcedefinitions";
        for (storage, obj) in objects {
            let ns = meta::str_field(&obj, "namespace").to_string();
            let name = meta::name(&obj).to_string();
            if storage == crd_storage {
                self.registry.set_crd(&name, crds::served_resources(&obj));
            }
            inner.objects.insert((storage, ns, name), obj);
        }
    }
}
