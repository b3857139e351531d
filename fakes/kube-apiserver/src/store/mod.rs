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

use chrono::Utc;
use rand::Rng;
use serde_json::{json, Value};
use tokio::sync::broadcast;

mod deletion;

use deletion::ready_to_remove;

use crate::managed_fields;
use crate::meta::{self, finalizers, metadata_mut, timestamp};
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
    /// `propagationPolicy` (`Orphan` keeps dependents).
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
    /// Items left after this page.
    pub remaining: usize,
}

/// Who is writing, for managedFields.
#[derive(Debug, Clone)]
pub struct Writer {
    /// Field manager name.
    pub manager: String,
    /// `Update` or `Apply`.
    pub operation: &'static str,
    /// For `Apply`: the applied configuration, whose fields the manager then owns.
    pub applied: Option<Value>,
}

impl Writer {
    /// An `Update` writer.
    pub fn update(manager: impl Into<String>) -> Self {
        Writer {
            manager: manager.into(),
            operation: "Update",
            applied: None,
        }
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

/// Structural defaulting of a custom resource from its CRD version's schema `default`s.
fn default_custom(res: &ResourceInfo, obj: &mut Value) {
    if let Some(schema) = res
        .crd_version
        .as_ref()
        .and_then(|v| v["schema"].get("openAPIV3Schema"))
    {
        crate::crd_validation::apply_defaults(obj, schema);
    }
}

/// Schema validation of a custom resource against its CRD version's `openAPIV3Schema`
/// (see [`crate::crd_validation`]); built-in kinds are not value-validated.
///
/// Errors: 422 `Invalid` with one cause per field error.
fn validate_custom(res: &ResourceInfo, name: &str, obj: &Value) -> Result<(), ApiError> {
    let Some(schema) = res
        .crd_version
        .as_ref()
        .and_then(|v| v["schema"].get("openAPIV3Schema"))
    else {
        return Ok(());
    };
    let causes = crate::crd_validation::validate(obj, schema);
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::InvalidFields {
        kind: res.kind.clone(),
        name: name.to_string(),
        group: res.group.clone(),
        causes,
    })
}

/// A DNS-1123 subdomain (names of most kinds), at most 253 characters.
pub fn valid_name(name: &str) -> bool {
    name.len() <= 253
        && !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// Random suffix for `generateName`, from the alphabet the real server uses.
fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

fn new_uid() -> String {
    let b: [u8; 16] = rand::random();
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
        u16::from_be_bytes([b[4], b[5]]),
        u16::from_be_bytes([b[6], b[7]]) & 0x0fff,
        (u16::from_be_bytes([b[8], b[9]]) & 0x3fff) | 0x8000,
        u64::from_be_bytes([0, 0, b[10], b[11], b[12], b[13], b[14], b[15]])
    )
}

/// Everything but `metadata` and `status`: a change here bumps `metadata.generation`.
fn spec_part(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
        m.remove("apiVersion");
        m.remove("kind");
    }
    v
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

    /// Lists objects of `res` in name order (namespace, then name), filtered and paginated.
    ///
    /// Errors: 400 for a malformed continue token.
    pub fn list(&self, res: &ResourceInfo, opts: &ListOptions) -> Result<ListPage, ApiError> {
        let inner = self.lock();
        let start = match &opts.continue_token {
            Some(t) if !t.is_empty() => {
                let (ns, name) = t.split_once('/').ok_or_else(|| {
                    ApiError::BadRequest(format!(
                        "continue token {t:?} is not valid; start the list again without it"
                    ))
                })?;
                Some((ns.to_string(), name.to_string()))
            }
            _ => None,
        };
        let mut items = Vec::new();
        let mut last: Option<(String, String)> = None;
        let mut remaining = 0;
        for ((storage, ns, name), obj) in inner
            .objects
            .range((res.storage.clone(), String::new(), String::new())..)
        {
            if *storage != res.storage {
                break;
            }
            if opts.namespace.as_ref().is_some_and(|want| want != ns) {
                continue;
            }
            if let Some((sns, sname)) = &start {
                if (ns, name) <= (sns, sname) {
                    continue;
                }
            }
            let view = Self::present(res, obj);
            if !opts.labels.matches(&view) || !opts.fields.matches(&view) {
                continue;
            }
            if opts.limit > 0 && items.len() >= opts.limit {
                remaining += 1;
                continue;
            }
            last = Some((ns.clone(), name.clone()));
            items.push(view);
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
            remaining,
        })
    }

    fn check_namespace(&self, inner: &Inner, res: &ResourceInfo, ns: &str) -> Result<(), ApiError> {
        if !res.namespaced {
            return Ok(());
        }
        match inner.objects.get(&("/namespaces".to_string(), String::new(), ns.to_string())) {
            None => Err(ApiError::NotFound { resource: "namespaces".into(), name: ns.into(), group: String::new() }),
            Some(n) if n["metadata"]["deletionTimestamp"].is_string() => Err(ApiError::Forbidden(format!(
                "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                res.qualified(),
                meta::name(n)
            ))),
            Some(_) => Ok(()),
        }
    }

    /// `POST`: creates `obj` (client form) in `ns`.
    ///
    /// Errors: 422 for a missing/invalid name, 404 for a missing namespace, 409 AlreadyExists,
    /// 400 when the body's namespace differs from the URL's.
    pub fn create(
        &self,
        res: &ResourceInfo,
        ns: &str,
        obj: Value,
        writer: &Writer,
    ) -> Result<Value, ApiError> {
        let mut obj = Self::to_storage(res, obj);
        if !obj.is_object() {
            return Err(ApiError::BadRequest(format!(
                "the body of a {} create must be a JSON object",
                res.kind
            )));
        }
        let now = Utc::now();
        let md = metadata_mut(&mut obj);
        let body_ns = md
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if res.namespaced && !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::BadRequest("the namespace of the provided object does not match the namespace sent on the request".into()));
        }
        let mut name = md
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if name.is_empty() {
            let prefix = md
                .get("generateName")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if prefix.is_empty() {
                return Err(invalid(
                    res,
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required",
                ));
            }
            name = format!("{prefix}{}", random_suffix());
        }
        if !valid_name(&name) {
            return Err(invalid(res, &name, "metadata.name", format!(
                "Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            )));
        }
        md.insert("name".into(), json!(name));
        if res.namespaced {
            md.insert("namespace".into(), json!(ns));
        } else {
            md.remove("namespace");
        }
        md.insert("uid".into(), json!(new_uid()));
        md.insert("creationTimestamp".into(), json!(timestamp(now)));
        for f in [
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
            "resourceVersion",
        ] {
            md.remove(f);
        }
        if obj.get("spec").is_some() || res.crd_name.is_some() {
            metadata_mut(&mut obj).insert("generation".into(), json!(1));
        } else {
            metadata_mut(&mut obj).remove("generation");
        }
        if res.status_subresource && res.storage != "/namespaces" {
            obj.as_object_mut().expect("object").remove("status");
        }
        crate::defaults::apply(res, &mut obj, None);
        default_custom(res, &mut obj);
        validate_custom(res, &name, &obj)?;
        let fields = managed_fields::entry(writer, &res.api_version(), None, &obj, now);
        metadata_mut(&mut obj).insert("managedFields".into(), json!([fields]));
        let mut inner = self.lock();
        self.check_namespace(&inner, res, ns)?;
        let key = (res.storage.clone(), ns.to_string(), name.clone());
        if inner.objects.contains_key(&key) {
            return Err(ApiError::AlreadyExists {
                resource: res.qualified(),
                name,
                group: res.group.clone(),
            });
        }
        if res.storage == "apiextensions.k8s.io/customresourcedefinitions" {
            crds::establish(&mut obj).map_err(|e| invalid(res, &name, e.field(), e.to_string()))?;
        }
        let stored = self.commit(&mut inner, ChangeType::Added, res, ns, &name, obj, None);
        self.sync_crd(&inner, res, &stored);
        Ok(Self::present(res, &stored))
    }

    /// `PUT` (or the result of a patch): replaces the object, or only its status when
    /// `status_only` (the `/status` subresource).
    ///
    /// Errors: 404, 409 Conflict on a stale `metadata.resourceVersion`, 400 on a name mismatch,
    /// 422 when adding finalizers to an object being deleted.
    pub fn update(
        &self,
        res: &ResourceInfo,
        ns: &str,
        name: &str,
        obj: Value,
        status_only: bool,
        writer: &Writer,
    ) -> Result<Value, ApiError> {
        let new = Self::to_storage(res, obj);
        let mut inner = self.lock();
        let key = (res.storage.clone(), ns.to_string(), name.to_string());
        let old = inner
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| not_found(res, name))?;
        self.update_locked(&mut inner, res, ns, name, old, new, status_only, writer)
    }

    #[allow(clippy::too_many_arguments)]
    fn update_locked(
        &self,
        inner: &mut MutexGuard<'_, Inner>,
        res: &ResourceInfo,
        ns: &str,
        name: &str,
        old: Value,
        mut new: Value,
        status_only: bool,
        writer: &Writer,
    ) -> Result<Value, ApiError> {
        if !new.is_object() {
            return Err(ApiError::BadRequest(format!(
                "the body of a {} update must be a JSON object",
                res.kind
            )));
        }
        let body_rv = meta::str_field(&new, "resourceVersion").to_string();
        if !body_rv.is_empty() && body_rv != meta::str_field(&old, "resourceVersion") {
            return Err(ApiError::Conflict {
                resource: res.qualified(),
                name: name.to_string(),
                group: res.group.clone(),
                message: "the object has been modified; please apply your changes to the latest version and try again".into(),
            });
        }
        let body_name = meta::name(&new);
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::BadRequest(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let mut result = if status_only {
            let mut r = old.clone();
            r["status"] = new.get("status").cloned().unwrap_or(Value::Null);
            if r["status"].is_null() {
                r.as_object_mut().expect("object").remove("status");
            }
            r
        } else {
            if res.status_subresource {
                match old.get("status") {
                    Some(s) => new["status"] = s.clone(),
                    None => {
                        new.as_object_mut().expect("object").remove("status");
                    }
                }
            }
            new
        };
        {
            let old_md = &old["metadata"];
            let md = metadata_mut(&mut result);
            for f in [
                "name",
                "namespace",
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "generateName",
            ] {
                match old_md.get(f) {
                    Some(v) => md.insert(f.into(), v.clone()),
                    None => md.remove(f),
                };
            }
            md.insert("resourceVersion".into(), old_md["resourceVersion"].clone());
            md.insert(
                "managedFields".into(),
                old_md.get("managedFields").cloned().unwrap_or(json!([])),
            );
        }
        if old["metadata"]["deletionTimestamp"].is_string() {
            let before = finalizers(&old);
            if let Some(f) = finalizers(&result)
                .into_iter()
                .find(|f| !before.contains(f))
            {
                return Err(invalid(res, name, "metadata.finalizers", format!(
                    "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers [{f:?}]"
                )));
            }
        }
        crate::defaults::apply(res, &mut result, Some(&old));
        default_custom(res, &mut result);
        // Metadata-only writes (finalizer removal, labels) never fail on stored values, like the
        // real server's validation ratcheting of unchanged fields.
        if spec_part(&result) != spec_part(&old) || result.get("status") != old.get("status") {
            validate_custom(res, name, &result)?;
        }
        if spec_part(&result) != spec_part(&old) && old["metadata"].get("generation").is_some() {
            let g = old["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
            metadata_mut(&mut result).insert("generation".into(), json!(g));
        }
        if res.storage == "apiextensions.k8s.io/customresourcedefinitions" && !status_only {
            crds::establish(&mut result)
                .map_err(|e| invalid(res, name, e.field(), e.to_string()))?;
        }
        if result == old {
            return Ok(Self::present(res, &old));
        }
        let subresource = status_only.then_some("status");
        managed_fields::record(
            &mut result,
            writer,
            &res.api_version(),
            subresource,
            Utc::now(),
        );
        let remove = ready_to_remove(&result, chrono::Duration::zero());
        let stored = self.commit(
            inner,
            ChangeType::Modified,
            res,
            ns,
            name,
            result,
            Some(old),
        );
        let stored = if remove {
            self.remove_locked(inner, res, ns, name, stored)
        } else {
            stored
        };
        self.sync_crd(inner, res, &stored);
        Ok(Self::present(res, &stored))
    }

    /// Read-modify-write used by patches: `f` gets the current object (client form) and returns
    /// the new one, which is then written like an update with the current resourceVersion
    /// unless the patch set one.
    ///
    /// Errors: 404 when missing (unless `create` gives an object to create), and whatever `f`
    /// or the update returns.
    pub fn modify<F>(
        &self,
        res: &ResourceInfo,
        ns: &str,
        name: &str,
        status_only: bool,
        writer: &Writer,
        f: F,
    ) -> Result<Value, ApiError>
    where
        F: FnOnce(&Value) -> Result<Value, ApiError>,
    {
        let mut inner = self.lock();
        let key = (res.storage.clone(), ns.to_string(), name.to_string());
        let old = inner
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| not_found(res, name))?;
        let new = Self::to_storage(res, f(&Self::present(res, &old))?);
        self.update_locked(&mut inner, res, ns, name, old, new, status_only, writer)
    }

    /// Keeps the registry in step with CRDs after a CRD write.
    fn sync_crd(&self, inner: &Inner, res: &ResourceInfo, obj: &Value) {
        if res.storage == "apiextensions.k8s.io/customresourcedefinitions" {
            let exists = inner.objects.contains_key(&(
                res.storage.clone(),
                String::new(),
                meta::name(obj).to_string(),
            ));
            let served = if exists {
                crds::served_resources(obj)
            } else {
                Vec::new()
            };
            self.registry.set_crd(meta::name(obj), served);
        }
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
