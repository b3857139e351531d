//! Owner references of the local controllers (upstream `metav1.GetControllerOf` and
//! `NewControllerRef`): the uid of an object's controlling owner, and the reference a controller
//! puts on what it creates. Shared by the ReplicaSet, Deployment, StatefulSet and DaemonSet
//! controllers and the kubelet, below all of them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;

/// The uid of an object's controlling owner.
pub fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

/// The owner reference a controller puts on what it creates.
pub fn controller_ref<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).to_string(),
        kind: K::kind(&()).to_string(),
        name: owner.meta().name.clone().unwrap_or_default(),
        uid: owner.meta().uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}
