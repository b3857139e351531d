//! Value validation of the built-in kinds this project writes (issue 30): which rules apply to
//! which write. Creates and main-resource updates run the spec rules; `/status` writes run the
//! status rules, as each kind's strategy `Validate`/`ValidateUpdate` does in v1.28. Errors are
//! `422 Invalid` with one cause per error, in the real server's order.

use serde_json::Value;

use super::{core, networking};
use crate::crd_validation::FieldError;
use crate::registry::ResourceInfo;

/// The errors of writing `obj` (client form for events.k8s.io, storage form otherwise) to
/// `res` in `namespace`; `status_only` for `/status` writes.
pub fn validate(
    res: &ResourceInfo,
    namespace: &str,
    obj: &Value,
    status_only: bool,
) -> Vec<FieldError> {
    if res.crd_version.is_some() {
        return Vec::new();
    }
    match (res.group.as_str(), res.kind.as_str(), status_only) {
        ("networking.k8s.io", "Ingress", false) => networking::ingress_spec(obj),
        ("networking.k8s.io", "Ingress", true) | ("", "Service", true) => {
            networking::load_balancer_status(obj)
        }
        ("networking.k8s.io", "IngressClass", _) => networking::ingress_class_spec(obj),
        ("", "Service", false) => core::service_spec(obj),
        ("", "Secret", _) => core::secret(obj),
        ("", "Pod", true) => core::pod_status(obj),
        ("", "Event", _) => core::event(obj, namespace, false),
        ("events.k8s.io", "Event", _) => core::event(obj, namespace, true),
        ("coordination.k8s.io", "Lease", _) => core::lease(obj),
        ("discovery.k8s.io", "EndpointSlice", _) => core::endpoint_slice(obj),
        _ => Vec::new(),
    }
}

#[cfg(test)]
#[path = "builtin_tests.rs"]
mod tests;
