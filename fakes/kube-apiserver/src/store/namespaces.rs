//! Namespace lifecycle: what a namespace must be for content to be created in it, and what a
//! cluster's controllers add to a new namespace at once: its `default` ServiceAccount (the
//! ServiceAccount controller of kube-controller-manager; Pods that name no ServiceAccount use
//! it, and a real server refuses them without it).

use chrono::Utc;
use serde_json::json;

use super::names::new_uid;
use super::{ChangeType, Inner, Store};
use crate::meta::{self, timestamp};
use crate::registry::ResourceInfo;
use crate::status::ApiError;

/// The ServiceAccount every namespace gets.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

impl Store {
    pub(super) fn check_namespace(
        &self,
        inner: &Inner,
        res: &ResourceInfo,
        ns: &str,
    ) -> Result<(), ApiError> {
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

    /// Creates the `default` ServiceAccount of a namespace just created (in the same critical
    /// section, so a Pod created right after the namespace finds it).
    pub(super) fn namespace_created(&self, inner: &mut Inner, namespace: &str) {
        let Some(res) = self.registry.find("", "v1", "serviceaccounts") else {
            return;
        };
        let key = (
            res.storage.clone(),
            namespace.to_string(),
            DEFAULT_SERVICE_ACCOUNT.to_string(),
        );
        if inner.objects.contains_key(&key) {
            return;
        }
        let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {
            "name": DEFAULT_SERVICE_ACCOUNT, "namespace": namespace, "uid": new_uid(),
            "creationTimestamp": timestamp(Utc::now())}});
        self.commit(
            inner,
            ChangeType::Added,
            &res,
            namespace,
            DEFAULT_SERVICE_ACCOUNT,
            sa,
            None,
        );
    }
}
