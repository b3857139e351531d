//! Update rules and immutable fields of each kind, as each kind's `Validate*Update` in
//! k8s.io/kubernetes `pkg/apis/*/validation` and its strategy's `ValidateUpdate` in
//! `pkg/registry/*/strategy.go` define them:
//!
//! - Secret and ConfigMap (`ValidateSecretUpdate`, `ValidateConfigMapUpdate`): `type` is
//!   immutable; once `immutable: true`, neither `immutable` nor `data` (`binaryData`) may change.
//! - Service (`validateUpgradeDowngradeClusterIPs`): the primary cluster IP may not change once
//!   set (`spec.clusterIPs[0]`; a changed `clusterIP` with `clusterIPs` left as it was means
//!   `clusterIPs: [clusterIP]`, as the registry's `normalizeClusterIPs` reads it).
//! - Pod (`ValidatePodUpdate`): only container images, `activeDeadlineSeconds`, added
//!   tolerations and `terminationGracePeriodSeconds` may change in `spec`.
//! - Deployment, ReplicaSet, DaemonSet (their strategies' `ValidateUpdate`) and StatefulSet
//!   (`ValidateStatefulSetUpdate`): `spec.selector` is immutable; a StatefulSet's spec may change
//!   only in `replicas`, `template`, `updateStrategy`, `persistentVolumeClaimRetentionPolicy`
//!   and `minReadySeconds`.

use serde_json::Value;

use super::errors::{forbidden, invalid, invalid_raw};
use super::go_format;
use crate::crd_validation::FieldError;

const IMMUTABLE_WHEN_SET: &str = "field is immutable when `immutable` is set";

/// A field that is `null` or absent reads as Go's zero value; an empty map and an absent one
/// differ only for `reflect.DeepEqual`, which the local API does not distinguish.
fn same(a: &Value, b: &Value) -> bool {
    let empty = |v: &Value| v.is_null() || v.as_object().is_some_and(|m| m.is_empty());
    a == b || (empty(a) && empty(b))
}

/// `ValidateSecretUpdate` / `ValidateConfigMapUpdate`'s own rules (before the kind's
/// validation of the new object).
pub fn config_data(new: &Value, old: &Value, fields: &[&str]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if new.get("type").is_some() || old.get("type").is_some() {
        let (n, o) = (&new["type"], &old["type"]);
        if n != o {
            errs.push(invalid("type", n, "field is immutable"));
        }
    }
    if old["immutable"] == Value::Bool(true) {
        if new["immutable"] != Value::Bool(true) {
            errs.push(forbidden("immutable", IMMUTABLE_WHEN_SET));
        }
        for f in fields {
            if !same(&new[*f], &old[*f]) {
                errs.push(forbidden(*f, IMMUTABLE_WHEN_SET));
            }
        }
    }
    errs
}

/// The primary cluster IP of a Service may not change once set.
pub fn service(new: &Value, old: &Value) -> Vec<FieldError> {
    let (ns, os) = (&new["spec"], &old["spec"]);
    let external = |s: &Value| s["type"] == "ExternalName";
    let headless = |s: &Value| s["clusterIP"] == "None";
    if external(ns) || external(os) || (headless(ns) && headless(os)) {
        return Vec::new();
    }
    let mut new_ips = ns["clusterIPs"].clone();
    if ns["clusterIP"] != os["clusterIP"] && ns["clusterIPs"] == os["clusterIPs"] {
        new_ips = match ns["clusterIP"].as_str() {
            Some(ip) if !ip.is_empty() => Value::from(vec![ip]),
            _ => Value::Null,
        };
    }
    let old_ips = os["clusterIPs"].as_array().cloned().unwrap_or_default();
    let new_list = new_ips.as_array().cloned().unwrap_or_default();
    let printed = go_format::string_slice(&new_ips);
    let mut errs = Vec::new();
    if old_ips.len() == new_list.len() {
        for (i, ip) in old_ips.iter().enumerate() {
            if *ip != new_list[i] {
                errs.push(invalid_raw(
                    format!("spec.clusterIPs[{i}]"),
                    &printed,
                    "may not change once set",
                ));
            }
        }
    } else if old_ips.len() > new_list.len() {
        if new_list.is_empty() {
            errs.push(invalid_raw(
                "spec.clusterIPs[0]",
                &printed,
                "primary clusterIP can not be unset",
            ));
        } else if !old_ips.is_empty() && new_list[0] != old_ips[0] {
            errs.push(invalid_raw(
                "spec.clusterIPs[0]",
                &printed,
                "may not change once set",
            ));
        }
    }
    errs
}

/// The first line of `ValidatePodUpdate`'s refusal; the real server follows it with a diff of
/// the two specs (`cmp.Diff`), which the local API does not reproduce (a documented
/// deviation).
pub const POD_UPDATE_MSG: &str = "pod updates may not change fields other than `spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations) or `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// `ValidatePodUpdate`'s rule on `spec`: the new spec with the mutable fields taken from the
/// old one must equal the old spec. Setting `nodeName` on an unbound Pod is allowed here: the
/// local kubelet binds Pods with a patch instead of the `binding` subresource.
pub fn pod(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut munged = new["spec"].clone();
    let old_spec = &old["spec"];
    for list in ["containers", "initContainers"] {
        if let (Some(n), Some(o)) = (
            munged.get_mut(list).and_then(Value::as_array_mut),
            old_spec[list].as_array(),
        ) {
            for (nc, oc) in n.iter_mut().zip(o) {
                if let Some(m) = nc.as_object_mut() {
                    match oc.get("image") {
                        Some(img) => m.insert("image".into(), img.clone()),
                        None => m.remove("image"),
                    };
                }
            }
        }
    }
    let Some(m) = munged.as_object_mut() else {
        return Vec::new();
    };
    for f in [
        "activeDeadlineSeconds",
        "tolerations",
        "terminationGracePeriodSeconds",
    ] {
        match old_spec.get(f) {
            Some(v) => m.insert(f.into(), v.clone()),
            None => m.remove(f),
        };
    }
    if old_spec["nodeName"].as_str().is_none_or(str::is_empty) {
        match old_spec.get("nodeName") {
            Some(v) => m.insert("nodeName".into(), v.clone()),
            None => m.remove("nodeName"),
        };
    }
    if munged == *old_spec {
        return Vec::new();
    }
    vec![forbidden("spec", POD_UPDATE_MSG)]
}

/// `spec.selector` may not change (`ValidateImmutableField`, printed as Go prints a
/// `metav1.LabelSelector`).
pub fn selector(new: &Value, old: &Value) -> Vec<FieldError> {
    let (n, o) = (&new["spec"]["selector"], &old["spec"]["selector"]);
    if n == o {
        return Vec::new();
    }
    vec![invalid_raw(
        "spec.selector",
        &go_format::label_selector(n),
        "field is immutable",
    )]
}

/// `ValidateStatefulSetUpdate`: only `replicas`, `template`, `updateStrategy`,
/// `persistentVolumeClaimRetentionPolicy` and `minReadySeconds` may change.
pub fn stateful_set(new: &Value, old: &Value) -> Vec<FieldError> {
    let strip = |v: &Value| {
        let mut s = v["spec"].clone();
        if let Some(m) = s.as_object_mut() {
            for f in [
                "replicas",
                "template",
                "updateStrategy",
                "persistentVolumeClaimRetentionPolicy",
                "minReadySeconds",
            ] {
                m.remove(f);
            }
        }
        s
    };
    if strip(new) == strip(old) {
        return Vec::new();
    }
    vec![forbidden(
        "spec",
        "updates to statefulset spec for fields other than 'replicas', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
    )]
}
