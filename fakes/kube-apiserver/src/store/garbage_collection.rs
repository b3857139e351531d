//! Garbage collection by `ownerReferences`, done by the store at deletion time where a real
//! cluster splits it between the API server (which adds the `orphan` or `foregroundDeletion`
//! finalizer for the request's `propagationPolicy`) and kube-controller-manager's garbage
//! collector (which acts on them). Behaviour as documented in "Garbage Collection" and
//! `DeleteOptions.propagationPolicy` (reference kube-api-v1.36):
//! - `Background` (the default): the owner goes at once; then each dependent is attempted
//!   ([`Store::attempt_to_delete`]): deleted, or, when another owner of it is still solid,
//!   kept without its reference to the removed owner.
//! - `Orphan`: the dependents lose their ownerReference to the owner and stay.
//! - `Foreground`: the owner stays, with `deletionTimestamp` and the `foregroundDeletion`
//!   finalizer, while the collector attempts to delete each dependent
//!   ([`Store::attempt_to_delete`]); it goes once no dependent with `blockOwnerDeletion: true`
//!   is left (a Deployment outlives its ReplicaSets, which outlive their terminating Pods).
//! - Objects created later are attempted too: one whose owners are all gone or waiting goes
//!   at once. A ReplicaSet controller whose cache has not yet seen its ReplicaSet's deletion
//!   replaces a terminating Pod; without this the new Pod would hold the ReplicaSet, so the
//!   Deployment and `kubectl delete --cascade=foreground`, for ever.

use chrono::Utc;
use serde_json::{json, Value};
use std::sync::MutexGuard;

use super::{ChangeType, DeleteOptions, Inner, Key, Store};
use crate::meta::{self, finalizers, metadata_mut, timestamp};
use crate::registry::ResourceInfo;

/// The finalizer of an owner waiting for its dependents.
pub const FOREGROUND_DELETION: &str = "foregroundDeletion";

/// An owner as the garbage collector classifies it for one of its dependents.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OwnerState {
    /// No object with the reference's uid.
    Gone,
    /// Being deleted in the foreground (`foregroundDeletion` finalizer).
    Waiting,
    /// Exists and is not waiting for its dependents.
    Solid,
}

fn owner_uids(obj: &Value) -> impl Iterator<Item = &str> {
    obj["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uid"].as_str())
}

impl Store {
    /// How the garbage collector sees the owner named by reference `r` of an object in `ns`
    /// (`classifyReferences` in kube-controller-manager's garbagecollector). As the collector's
    /// `isDangling` does (pkg/controller/garbagecollector/garbagecollector.go: a GET of the
    /// reference's name, then its uid compared), the owner is the object of the reference's
    /// name, and a uid other than the reference's makes the reference dangling (gone). The
    /// name is compared first, from the store's key: a create scans the store once per
    /// reference, and each object's uid read from its JSON is two map lookups.
    fn owner_state(inner: &Inner, ns: &str, r: &Value) -> OwnerState {
        let Some(name) = r["name"].as_str() else {
            return OwnerState::Gone;
        };
        inner
            .objects
            .iter()
            .find(|((_, ons, oname), o)| {
                oname == name && (ons == ns || ons.is_empty()) && o["metadata"]["uid"] == r["uid"]
            })
            .map_or(OwnerState::Gone, |(_, o)| {
                if finalizers(o).iter().any(|f| f == FOREGROUND_DELETION) {
                    OwnerState::Waiting
                } else {
                    OwnerState::Solid
                }
            })
    }

    /// The garbage collector's `attemptToDeleteItem` for the dependent at `key`, run when it
    /// is created, when an owner of it starts waiting in the foreground and when an owner of
    /// it is removed (`owner_removed`):
    /// - with a solid owner (existing, not waiting for dependents), its references to gone
    ///   and waiting owners are removed and it stays;
    /// - else, with an owner waiting, it is deleted (in the foreground when it has dependents
    ///   itself, as the collector does);
    /// - else (every owner gone) it is deleted after an owner's removal; at creation only when
    ///   its controller reference blocks owner deletion, as controllers set it. Narrower there
    ///   than the collector, which deletes any object whose owners are all gone: tests and
    ///   users of `--no-local-controllers` write references to owners they never create.
    pub(super) fn attempt_to_delete(
        &self,
        inner: &mut MutexGuard<'_, Inner>,
        key: &Key,
        owner_removed: bool,
    ) {
        // Most creates have no owner: nothing to attempt, and no copy of the object made.
        let owned = |o: &&Value| {
            o["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|r| !r.is_empty())
        };
        let Some(obj) = inner.objects.get(key).filter(owned).cloned() else {
            return;
        };
        let Some(res) = self.registry.by_storage(&key.0).into_iter().next() else {
            return;
        };
        let (_, ns, name) = key;
        let refs: Vec<Value> = obj["metadata"]["ownerReferences"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let states: Vec<OwnerState> = refs
            .iter()
            .map(|r| Self::owner_state(inner, ns, r))
            .collect();
        if states.contains(&OwnerState::Solid) {
            let solid = |i: usize, _: &Value| states[i] == OwnerState::Solid;
            if self.retain_owner_references(inner, key, solid) {
                // An owner waiting for this dependent may have no other left.
                self.release_foreground_owners(inner, &obj);
            }
            return;
        }
        let policy = if states.contains(&OwnerState::Waiting) {
            let uid = meta::str_field(&obj, "uid").to_string();
            let has_dependents = !self.dependents(inner, &res, ns, &uid).is_empty();
            has_dependents.then(|| "Foreground".to_string())
        } else if owner_removed
            || refs
                .iter()
                .any(|r| r["controller"] == json!(true) && r["blockOwnerDeletion"] == json!(true))
        {
            None
        } else {
            return;
        };
        let opts = DeleteOptions {
            propagation_policy: policy,
            ..DeleteOptions::default()
        };
        // Removal releases an owner it was the last blocking dependent of (remove_locked).
        let _ = self.delete_locked(inner, &res, ns, name, &opts);
    }

    /// The objects owned by `uid` (in `ns`, or anywhere for a cluster-scoped owner), with
    /// whether their reference blocks the owner's deletion.
    pub(super) fn dependents(
        &self,
        inner: &Inner,
        res: &ResourceInfo,
        ns: &str,
        uid: &str,
    ) -> Vec<(Key, bool)> {
        inner
            .objects
            .iter()
            .filter(|((_, dns, _), _)| dns == ns || !res.namespaced)
            .filter_map(|(k, o)| {
                let r = o["metadata"]["ownerReferences"]
                    .as_array()?
                    .iter()
                    .find(|r| r["uid"] == json!(uid))?;
                Some((k.clone(), r["blockOwnerDeletion"] == json!(true)))
            })
            .collect()
    }

    /// Keeps the ownerReferences of the object at `key` that `keep` (index, reference)
    /// accepts, removing the field when none is left. Returns whether any was removed.
    fn retain_owner_references(
        &self,
        inner: &mut MutexGuard<'_, Inner>,
        key: &Key,
        keep: impl Fn(usize, &Value) -> bool,
    ) -> bool {
        let Some(old) = inner.objects.get(key).cloned() else {
            return false;
        };
        let Some(res) = self.registry.by_storage(&key.0).into_iter().next() else {
            return false;
        };
        let refs = old["metadata"]["ownerReferences"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let kept: Vec<Value> = refs
            .iter()
            .enumerate()
            .filter(|(i, r)| keep(*i, r))
            .map(|(_, r)| r.clone())
            .collect();
        if kept.len() == refs.len() {
            return false;
        }
        let mut new = old.clone();
        let md = metadata_mut(&mut new);
        if kept.is_empty() {
            md.remove("ownerReferences");
        } else {
            md.insert("ownerReferences".into(), json!(kept));
        }
        let (_, ns, name) = key;
        self.commit(inner, ChangeType::Modified, &res, ns, name, new, Some(old));
        true
    }

    /// `Orphan`: removes the ownerReferences to `uid` from its dependents.
    pub(super) fn orphan_dependents(
        &self,
        inner: &mut MutexGuard<'_, Inner>,
        res: &ResourceInfo,
        ns: &str,
        uid: &str,
    ) {
        for (key, _) in self.dependents(inner, res, ns, uid) {
            self.retain_owner_references(inner, &key, |_, r| r["uid"] != json!(uid));
        }
    }

    /// `Foreground`: marks the owner (deletionTimestamp, `foregroundDeletion` finalizer) and
    /// deletes its dependents in the foreground; the owner goes when the last blocking one
    /// does ([`Store::release_foreground_owners`]). Returns the owner as stored.
    pub(super) fn delete_foreground(
        &self,
        inner: &mut MutexGuard<'_, Inner>,
        res: &ResourceInfo,
        ns: &str,
        name: &str,
        old: Value,
    ) -> Value {
        let uid = meta::str_field(&old, "uid").to_string();
        let mut marked = old.clone();
        let mut fins = finalizers(&old);
        if !fins.iter().any(|f| f == FOREGROUND_DELETION) {
            fins.push(FOREGROUND_DELETION.to_string());
        }
        let md = metadata_mut(&mut marked);
        md.insert("finalizers".into(), json!(fins));
        if !old["metadata"]["deletionTimestamp"].is_string() {
            md.insert("deletionTimestamp".into(), json!(timestamp(Utc::now())));
            md.insert("deletionGracePeriodSeconds".into(), json!(0));
        }
        let stored = self.commit(
            inner,
            ChangeType::Modified,
            res,
            ns,
            name,
            marked,
            Some(old),
        );
        for (key, _) in self.dependents(inner, res, ns, &uid) {
            self.attempt_to_delete(inner, &key, false);
        }
        self.release_foreground_owners_of(inner, &[uid]);
        inner
            .objects
            .get(&(res.storage.clone(), ns.to_string(), name.to_string()))
            .cloned()
            .unwrap_or(stored)
    }

    /// After `removed` left the store: its owners waiting in the foreground with no blocking
    /// dependent left lose the `foregroundDeletion` finalizer (and go, if it was the last).
    pub(super) fn release_foreground_owners(
        &self,
        inner: &mut MutexGuard<'_, Inner>,
        removed: &Value,
    ) {
        let uids: Vec<String> = owner_uids(removed).map(str::to_string).collect();
        if !uids.is_empty() {
            self.release_foreground_owners_of(inner, &uids);
        }
    }

    fn release_foreground_owners_of(&self, inner: &mut MutexGuard<'_, Inner>, uids: &[String]) {
        let waiting: Vec<(Key, Value)> = inner
            .objects
            .iter()
            .filter(|(_, o)| uids.iter().any(|u| o["metadata"]["uid"] == json!(u)))
            .filter(|(_, o)| finalizers(o).iter().any(|f| f == FOREGROUND_DELETION))
            .map(|(k, o)| (k.clone(), o.clone()))
            .collect();
        for ((storage, ons, oname), owner) in waiting {
            let Some(ores) = self.registry.by_storage(&storage).into_iter().next() else {
                continue;
            };
            let uid = meta::str_field(&owner, "uid").to_string();
            let blocked = self
                .dependents(inner, &ores, &ons, &uid)
                .iter()
                .any(|(_, blocks)| *blocks);
            if blocked {
                continue;
            }
            let mut released = owner.clone();
            let rest: Vec<String> = finalizers(&owner)
                .into_iter()
                .filter(|f| f != FOREGROUND_DELETION)
                .collect();
            let md = metadata_mut(&mut released);
            if rest.is_empty() {
                md.remove("finalizers");
            } else {
                md.insert("finalizers".into(), json!(rest));
            }
            let stored = self.commit(
                inner,
                ChangeType::Modified,
                &ores,
                &ons,
                &oname,
                released,
                Some(owner),
            );
            if finalizers(&stored).is_empty() {
                self.remove_locked(inner, &ores, &ons, &oname, stored);
            }
        }
    }
}
