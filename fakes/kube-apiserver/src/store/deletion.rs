//! Deletion: finalizers, graceful deletion of Pods run by a kubelet, garbage collection of
//! dependents (ownerReferences), namespace and CRD contents, and the periodic sweep of objects
//! whose deletion is due.

use chrono::Utc;
use serde_json::{json, Value};
use std::sync::MutexGuard;

use super::{not_found, ChangeType, DeleteOptions, Inner, Key, Store, LOCAL_RUN_ANNOTATION};
use crate::crds;
use crate::meta::{self, finalizers, metadata_mut, parse_time, timestamp};
use crate::registry::ResourceInfo;
use crate::status::ApiError;

/// Whether a Pod is run by a (local) kubelet and so is deleted gracefully: it is bound to a node
/// or opted in to the local kubelet, and not finished. Unbound Pods are deleted at once, as the
/// real server does.
fn graceful_pod(obj: &Value) -> bool {
    let bound = obj["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| !n.is_empty())
        || obj["metadata"]["annotations"]
            .get(LOCAL_RUN_ANNOTATION)
            .is_some();
    let phase = obj["status"]["phase"].as_str().unwrap_or_default();
    bound && phase != "Succeeded" && phase != "Failed"
}

pub(super) fn ready_to_remove(obj: &Value, margin: chrono::Duration) -> bool {
    let md = &obj["metadata"];
    let Some(ts) = md["deletionTimestamp"].as_str().and_then(parse_time) else {
        return false;
    };
    finalizers(obj).is_empty()
        && (md["deletionGracePeriodSeconds"].as_i64().unwrap_or(0) == 0
            || Utc::now() >= ts + margin)
}

/// Whether no object is left in namespace `name`.
fn namespace_is_empty(inner: &Inner, name: &str) -> bool {
    !inner
        .objects
        .keys()
        .any(|(s, dns, _)| dns == name && s != "/namespaces")
}

impl Store {
    /// Deletes everything in namespace `name` at once (grace period 0; finalizers still hold).
    fn delete_namespace_contents(&self, inner: &mut MutexGuard<'_, Inner>, name: &str) {
        let contents: Vec<Key> = inner
            .objects
            .keys()
            .filter(|(s, dns, _)| dns == name && s != "/namespaces")
            .cloned()
            .collect();
        let now = DeleteOptions {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        for (storage, dns, dname) in contents {
            if let Some(dres) = self.registry.by_storage(&storage).into_iter().next() {
                let _ = self.delete_locked(inner, &dres, &dns, &dname, &now);
            }
        }
    }

    pub(super) fn remove_locked(
        &self,
        inner: &mut MutexGuard<'_, Inner>,
        res: &ResourceInfo,
        ns: &str,
        name: &str,
        obj: Value,
    ) -> Value {
        let removed = self.commit(
            inner,
            ChangeType::Deleted,
            res,
            ns,
            name,
            obj.clone(),
            Some(obj),
        );
        self.release_foreground_owners(inner, &removed);
        // Garbage collection (background propagation): each dependent of this uid is
        // attempted (deleted unless another owner of it is solid).
        let uid = meta::str_field(&removed, "uid").to_string();
        for (key, _) in self.dependents(inner, res, ns, &uid) {
            self.attempt_to_delete(inner, &key, true);
        }
        if res.storage == "/namespaces" {
            self.delete_namespace_contents(inner, name);
        }
        if res.storage == "apiextensions.k8s.io/customresourcedefinitions" {
            if let Some(storage) = crds::storage_key(&removed) {
                let contents: Vec<Key> = inner
                    .objects
                    .keys()
                    .filter(|(s, _, _)| *s == storage)
                    .cloned()
                    .collect();
                for key in contents {
                    if let Some(o) = inner.objects.get(&key).cloned() {
                        if let Some(dres) = self.registry.by_storage(&storage).into_iter().next() {
                            self.commit(
                                inner,
                                ChangeType::Deleted,
                                &dres,
                                &key.1,
                                &key.2,
                                o.clone(),
                                Some(o),
                            );
                        }
                    }
                }
            }
        }
        removed
    }

    /// `DELETE`: removes the object, or marks it for deletion when it has finalizers (deletion
    /// proceeds when the last one is removed) or when it is a Pod run by a kubelet: then
    /// `deletionTimestamp` = now + grace period and `deletionGracePeriodSeconds` are set, and the
    /// Pod is removed when a client deletes it again with `gracePeriodSeconds=0` (the kubelet,
    /// once its containers stopped) or by [`Store::sweep`] shortly after the grace period.
    /// Returns the object as last stored.
    ///
    /// Errors: 404, 409 when a precondition (uid, resourceVersion) fails.
    pub fn delete(
        &self,
        res: &ResourceInfo,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let mut inner = self.lock();
        let out = self.delete_locked(&mut inner, res, ns, name, opts)?;
        self.sync_crd(&inner, res, &out);
        Ok(Self::present(res, &out))
    }

    pub(super) fn delete_locked(
        &self,
        inner: &mut MutexGuard<'_, Inner>,
        res: &ResourceInfo,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let key = (res.storage.clone(), ns.to_string(), name.to_string());
        let old = inner
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| not_found(res, name))?;
        let conflict = |message: String| ApiError::Conflict {
            resource: res.qualified(),
            name: name.to_string(),
            group: res.group.clone(),
            message,
        };
        if let Some(uid) = &opts.uid {
            if uid != meta::str_field(&old, "uid") {
                return Err(conflict(format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta::str_field(&old, "uid")
                )));
            }
        }
        if let Some(rv) = &opts.resource_version {
            if rv != meta::str_field(&old, "resourceVersion") {
                return Err(conflict(format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}", meta::str_field(&old, "resourceVersion"))));
            }
        }
        // propagationPolicy (see [`super::garbage_collection`]).
        let uid = meta::str_field(&old, "uid").to_string();
        match opts.propagation_policy.as_deref() {
            Some("Orphan") => self.orphan_dependents(inner, res, ns, &uid),
            Some("Foreground")
                if res.storage != "/namespaces"
                    && !self.dependents(inner, res, ns, &uid).is_empty() =>
            {
                return Ok(self.delete_foreground(inner, res, ns, name, old));
            }
            _ => {}
        }
        let now = Utc::now();
        let mut grace = 0;
        if res.storage == "/pods" && graceful_pod(&old) {
            grace = opts
                .grace_period_seconds
                .or_else(|| old["metadata"]["deletionGracePeriodSeconds"].as_i64())
                .or_else(|| old["spec"]["terminationGracePeriodSeconds"].as_i64())
                .unwrap_or(30)
                .max(0);
        }
        let already = old["metadata"]["deletionTimestamp"].is_string();
        let current_grace = old["metadata"]["deletionGracePeriodSeconds"].as_i64();
        if grace > 0 || !finalizers(&old).is_empty() || res.storage == "/namespaces" {
            if already
                && current_grace.is_some_and(|g| g <= grace)
                && !(grace == 0 && finalizers(&old).is_empty())
            {
                return Ok(old);
            }
            let mut marked = old.clone();
            let md = metadata_mut(&mut marked);
            md.insert(
                "deletionTimestamp".into(),
                json!(timestamp(now + chrono::Duration::seconds(grace))),
            );
            md.insert("deletionGracePeriodSeconds".into(), json!(grace));
            if res.storage == "/namespaces" {
                marked["status"]["phase"] = json!("Terminating");
            }
            let remove =
                ready_to_remove(&marked, chrono::Duration::zero()) && res.storage != "/namespaces";
            let stored = self.commit(
                inner,
                ChangeType::Modified,
                res,
                ns,
                name,
                marked,
                Some(old),
            );
            if res.storage == "/namespaces" {
                self.delete_namespace_contents(inner, name);
                if namespace_is_empty(inner, name) && finalizers(&stored).is_empty() {
                    return Ok(self.remove_locked(inner, res, ns, name, stored));
                }
                return Ok(stored);
            }
            if remove {
                return Ok(self.remove_locked(inner, res, ns, name, stored));
            }
            return Ok(stored);
        }
        Ok(self.remove_locked(inner, res, ns, name, old))
    }

    /// Removes objects whose deletion is due: Pods whose grace period ended `margin` ago with no
    /// kubelet deleting them, and terminating namespaces that became empty. Called periodically.
    pub fn sweep(&self, margin: chrono::Duration) {
        let mut inner = self.lock();
        let due: Vec<(Key, Value)> = inner
            .objects
            .iter()
            .filter(|(_, o)| ready_to_remove(o, margin))
            .map(|(k, o)| (k.clone(), o.clone()))
            .collect();
        for ((storage, ns, name), obj) in due {
            if storage == "/namespaces" && !namespace_is_empty(&inner, &name) {
                continue;
            }
            if let Some(res) = self.registry.by_storage(&storage).into_iter().next() {
                let removed = self.remove_locked(&mut inner, &res, &ns, &name, obj);
                self.sync_crd(&inner, &res, &removed);
            }
        }
    }
}
