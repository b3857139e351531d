//! Mutating and validating admission on create, the plugins of a real kube-apiserver's default
//! set that change what this project's clients see: `ServiceAccount` (Pods) and
//! `DefaultIngressClass` (Ingresses). They run after decoding and before the object is stored,
//! for `POST` and for server-side apply that creates. Webhooks, quotas and limit ranges are not
//! run (docs/kube-apiserver.md).

pub mod default_ingress_class;
pub mod service_account;

use serde_json::Value;

use crate::registry::ResourceInfo;
use crate::status::ApiError;
use crate::store::Store;

/// Runs the admission plugins for the create of `obj` (client form) in `namespace`, after the
/// `NamespaceLifecycle` check that the namespace exists (it runs first on a real server).
///
/// Errors: 404 for a missing namespace; 403 `Forbidden` when a plugin refuses (e.g. a Pod whose
/// ServiceAccount is missing).
pub fn admit_create(
    store: &Store,
    res: &ResourceInfo,
    namespace: &str,
    obj: &mut Value,
) -> Result<(), ApiError> {
    if res.namespaced && store.get_stored("/namespaces", "", namespace).is_none() {
        return Err(ApiError::NotFound {
            resource: "namespaces".into(),
            name: namespace.into(),
            group: String::new(),
        });
    }
    match (res.group.as_str(), res.plural.as_str()) {
        ("", "pods") => service_account::admit(store, namespace, obj),
        ("networking.k8s.io", "ingresses") => {
            default_ingress_class::admit(store, obj);
            Ok(())
        }
        _ => Ok(()),
    }
}
