//! Which Ingresses this operator owns (reference 001 "Ingress class" and "Default
//! IngressClass"; reference 000 "Summary of GKE Ingress controller behavior"; inventory §1).
//!
//! "Our controller" is the mode's IngressClass controller value ([`Mode::controller`]):
//! `gclb-operator.dev/gclb` beside GKE's controller, `k8s.io/ingress-gce` in takeover mode.
//! Rules, first match wins:
//! 1. A non-empty `kubernetes.io/ingress.class` annotation: ours iff it equals the configured
//!    class. The annotation is deprecated, but when an old object carries both it wins, as in
//!    GKE and most controllers (the API server refuses new objects that set both).
//! 2. `spec.ingressClassName`: ours iff the named IngressClass has our controller, or, when no
//!    such IngressClass object exists, the name equals the configured class. (GKE ignores this
//!    field; its users asked for it: #1891, #1308.)
//! 3. Neither: ours iff a default IngressClass (annotation
//!    `ingressclass.kubernetes.io/is-default-class: "true"`) has our controller. In takeover
//!    mode also when no default IngressClass exists at all (GKE's "unset means GCE", so GKE
//!    manifests work unchanged); beside GKE's controller such Ingresses are GKE's.

use k8s_openapi::api::networking::v1::{Ingress, IngressClass};

use super::{ClusterSnapshot, Mode, ObjectKey, TranslateConfig};

/// Deprecated Ingress annotation naming the class.
pub const INGRESS_CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";
/// IngressClass annotation marking the cluster default.
pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";

/// Whether this operator should build a load balancer for `ingress` (rules in the module docs).
pub fn owns_ingress(
    snapshot: &ClusterSnapshot,
    ingress: &Ingress,
    config: &TranslateConfig,
) -> bool {
    let annotation = ingress
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(INGRESS_CLASS_ANNOTATION))
        .map(String::as_str)
        .unwrap_or("");
    if !annotation.is_empty() {
        return config.serves_class(annotation);
    }
    let class_name = ingress
        .spec
        .as_ref()
        .and_then(|s| s.ingress_class_name.as_deref());
    let controller = config.mode.controller();
    if let Some(name) = class_name.filter(|n| !n.is_empty()) {
        return match snapshot.ingress_classes.get(&ObjectKey::new("", name)) {
            Some(class) => is_ours(class, controller),
            None => config.serves_class(name),
        };
    }
    let mut defaults = snapshot
        .ingress_classes
        .values()
        .filter(|c| is_default(c))
        .peekable();
    let no_default = defaults.peek().is_none();
    (no_default && config.mode == Mode::Takeover) || defaults.any(|c| is_ours(c, controller))
}

fn is_ours(class: &IngressClass, controller: &str) -> bool {
    class.spec.as_ref().and_then(|s| s.controller.as_deref()) == Some(controller)
}

fn is_default(class: &IngressClass) -> bool {
    class
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
        .is_some_and(|v| v == "true")
}
