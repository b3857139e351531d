//! The `DefaultIngressClass` admission plugin on Ingress create: an Ingress with neither
//! `spec.ingressClassName` nor the `kubernetes.io/ingress.class` annotation gets the name of the
//! IngressClass annotated `ingressclass.kubernetes.io/is-default-class: "true"` (the newest one
//! when several are, ties by name). Port of k8s.io/kubernetes
//! `plugin/pkg/admission/network/defaultingressclass/admission.go`.

use serde_json::{json, Value};

use crate::store::Store;

/// The annotation marking the default IngressClass.
pub const IS_DEFAULT_CLASS: &str = "ingressclass.kubernetes.io/is-default-class";
/// The legacy class annotation on Ingresses.
pub const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

/// The default IngressClass's name, if one is marked.
pub fn default_class(store: &Store) -> Option<String> {
    let mut defaults: Vec<(String, String)> = store
        .list_stored("networking.k8s.io/ingressclasses", None)
        .into_iter()
        .filter(|c| c["metadata"]["annotations"][IS_DEFAULT_CLASS] == "true")
        .map(|c| {
            (
                c["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                c["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    // Newest first; equal timestamps by name.
    defaults.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    defaults.into_iter().next().map(|(_, name)| name)
}

/// Fills `spec.ingressClassName` of an Ingress being created (see the module docs).
pub fn admit(store: &Store, ingress: &mut Value) {
    if !ingress["spec"]["ingressClassName"].is_null()
        || ingress["metadata"]["annotations"]
            .get(CLASS_ANNOTATION)
            .is_some()
    {
        return;
    }
    if let Some(name) = default_class(store) {
        if !ingress["spec"].is_object() {
            ingress["spec"] = json!({});
        }
        ingress["spec"]["ingressClassName"] = json!(name);
    }
}
