//! Garbage collection by `ownerReferences`, done by the store at deletion time where a real
//! cluster splits it between the API server (which adds the `orphan` or `foregroundDeletion`
//! finalizer for the request's `propagationPolicy`) and kube-controller-manager's garbage
//! collector (which acts on them). Behaviour as documented in "Garbage Collection" and
//! `DeleteOptions.propagationPolicy` (reference kube-api-v1.36):
//! - `Background` (the default): the owner goes at once; its dependents are deleted after it
//!   ([`super::Store`]'s removal cascades).
//! - `Orphan`: the dependents lose their ownerReference to the owner and stay.
//! - `Foreground`: the owner stays, with `deletionTimestamp` and the `foregroundDeletion`
//!   finalizer, while its dependents are deleted (foreground too); it goes once no dependent
//!   with `blockOwnerDeletion: true` is left (a Deployment outlives its ReplicaSets, which
//!   outlive their terminating Pods).
//! - An object created with a controller reference (`controller` and `blockOwnerDeletion`, as
//!   controllers set them) to an owner that no longer exists is deleted at once, as the garbage
//!   collector deletes dependents whose owners are gone (a controller that raced its owner's
//!   deletion must not leave a ReplicaSet or Pod behind).

use chrono::Utc;
use serde_json::{json, Value};
use std::sync::MutexGuard;

use super::{ChangeType, DeleteOptions, Inner, Key, Store};
use crate::meta::{self, finalizers, metadata_mut, timestamp};
use crate::registry::ResourceInfo;

/// The finalizer of an owner waiting for its dependents.
pub const FOREGROUND_DELETION: &str = "foregroundDeletion";

fn owner_uids(obj: &Value) -> impl Iterator<Item = &str> {
    obj["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uid"].as_str())
}

impl Store {
    /// Deletes `obj` (just created) when its controller reference names an owner that is gone.
    pub(super) fn collect_if_owner_gone(
        &self,
        inner: &mut MutexGuard<'_, Inner>,
        res: &ResourceInfo,
        ns: &str,
        obj: &Value,
    ) -> bool {
        let Some(owner) = obj["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["controller"] == json!(true) && r["blockOwnerDeletion"] == json!(true))
        else {
            return false;
        };
        let exists = inner.objects.iter().any(|((_, ons, _), o)| {
            (ons == ns || ons.is_empty()) && o["metadata"]["uid"] == owner["uid"]
        });
        if exists {
            return false;
        }
        let name = meta::name(obj).to_string();
        self.delete_locked(inner, res, ns, &name, &DeleteOptions::default())
            .is_ok()
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

    /// `Orphan`: removes the ownerReferences to `uid` from its dependents.
    pub(super) fn orphan_dependents(
        &self,
        inner: &mut MutexGuard<'_, Inner>,
        res: &ResourceInfo,
        ns: &str,
        uid: &str,
    ) {
        for ((storage, dns, dname), _) in self.dependents(inner, res, ns, uid) {
            let Some(dres) = self.registry.by_storage(&storage).into_iter().next() else {
                continue;
            };
            let Some(old) = inner
                .objects
                .get(&(storage, dns.clone(), dname.clone()))
                .cloned()
            else {
                continue;
            };
            let mut new = old.clone();
            let md = metadata_mut(&mut new);
            let refs: Vec<Value> = old["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["uid"] != json!(uid))
                .cloned()
                .collect();
            if refs.is_empty() {
                md.remove("ownerReferences");
            } else {
                md.insert("ownerReferences".into(), json!(refs));
            }
            self.commit(
                inner,
                ChangeType::Modified,
                &dres,
                &dns,
                &dname,
                new,
                Some(old),
            );
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
        let foreground = DeleteOptions {
            propagation_policy: Some("Foreground".into()),
            ..DeleteOptions::default()
        };
        for ((storage, dns, dname), _) in self.dependents(inner, res, ns, &uid) {
            if let Some(dres) = self.registry.by_storage(&storage).into_iter().next() {
                let _ = self.delete_locked(inner, &dres, &dns, &dname, &foreground);
            }
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
