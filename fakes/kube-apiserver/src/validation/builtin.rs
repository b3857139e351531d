//! Value validation of built-in kinds: which rules apply to which write, in the order each
//! kind's strategy runs them (k8s.io/kubernetes `pkg/registry/*/strategy.go` `Validate` /
//! `ValidateUpdate` calling `pkg/apis/*/validation`): the object's metadata
//! ([`object_meta`]; for every kind, custom resources too), then the kind's own rules on a
//! create ([`core`], [`config`], [`pod`], [`apps`], [`networking`]) and its update rules and
//! immutable fields on an update ([`update`]). `/status` writes run the status rules. Errors are
//! `422 Invalid` with one cause per error, in the real server's order.

use serde_json::Value;

use super::{apps, config, core, networking, object_meta, pod, update};
use crate::crd_validation::FieldError;
use crate::registry::ResourceInfo;

/// The errors of writing `obj` (client form for events.k8s.io, storage form otherwise) to
/// `res` in `namespace`: a create when `old` is `None`, else an update of `old`;
/// `status_only` for `/status` writes; `spec_changed` false for writes that change neither spec
/// nor status (only metadata is validated then, as the real server's ratcheting leaves stored
/// values alone).
pub fn validate(
    res: &ResourceInfo,
    namespace: &str,
    obj: &Value,
    old: Option<&Value>,
    status_only: bool,
    spec_changed: bool,
) -> Vec<FieldError> {
    let mut errs = object_meta::validate(res, obj, old);
    if res.crd_version.is_some() || !spec_changed {
        return errs;
    }
    let apps_update = |kind_rules: Vec<FieldError>, errs: &mut Vec<FieldError>| {
        errs.extend(kind_rules);
        if let Some(old) = old {
            errs.extend(update::selector(obj, old));
        }
    };
    match (res.group.as_str(), res.kind.as_str(), status_only) {
        ("networking.k8s.io", "Ingress", false) => errs.extend(networking::ingress_spec(obj)),
        ("networking.k8s.io", "Ingress", true) | ("", "Service", true) => {
            errs.extend(networking::load_balancer_status(obj))
        }
        ("networking.k8s.io", "IngressClass", _) => {
            errs.extend(networking::ingress_class_spec(obj))
        }
        ("", "Service", false) => {
            if let Some(old) = old {
                errs.extend(update::service(obj, old));
            }
            errs.extend(core::service_spec(obj));
            if errs.is_empty() {
                errs.extend(core::service_node_ports(obj, old));
            }
        }
        ("", "Secret", _) => {
            if let Some(old) = old {
                errs.extend(update::config_data(obj, old, &["data"]));
            }
            errs.extend(config::secret(obj));
        }
        ("", "ConfigMap", _) => {
            if let Some(old) = old {
                errs.extend(update::config_data(obj, old, &["data", "binaryData"]));
            }
            errs.extend(config::config_map(obj));
        }
        ("", "Pod", true) => errs.extend(core::pod_status(obj)),
        ("", "Pod", false) => {
            errs.extend(pod::spec(&obj["spec"], "spec"));
            if let Some(old) = old {
                errs.extend(update::pod(obj, old));
            }
        }
        ("apps", "Deployment", false) => apps_update(apps::deployment(obj), &mut errs),
        ("apps", "ReplicaSet", false) => apps_update(apps::replica_set(obj), &mut errs),
        ("apps", "DaemonSet", false) => apps_update(apps::daemon_set(obj), &mut errs),
        ("apps", "StatefulSet", false) => {
            errs.extend(apps::stateful_set(obj));
            if let Some(old) = old {
                errs.extend(update::stateful_set(obj, old));
            }
        }
        ("", "Event", _) => errs.extend(core::event(obj, namespace, false)),
        ("events.k8s.io", "Event", _) => errs.extend(core::event(obj, namespace, true)),
        ("coordination.k8s.io", "Lease", _) => errs.extend(core::lease(obj)),
        ("discovery.k8s.io", "EndpointSlice", _) => errs.extend(core::endpoint_slice(obj)),
        _ => {}
    }
    errs
}

#[cfg(test)]
#[path = "builtin_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "kinds_tests.rs"]
mod kinds_tests;
