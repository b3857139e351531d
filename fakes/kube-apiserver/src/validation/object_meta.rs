//! `metadata` of every object, as k8s.io/apimachinery `pkg/api/validation/objectmeta.go`
//! (`ValidateObjectMetaAccessor`, `ValidateObjectMetaAccessorUpdate`: `generateName`, labels via
//! `pkg/apis/meta/v1/validation` `ValidateLabels`, `ValidateAnnotations`,
//! `ValidateOwnerReferences`, `ValidateFinalizers`) and, for built-in kinds, the extra finalizer
//! rule of k8s.io/kubernetes `pkg/apis/core/validation` `ValidateObjectMeta`
//! (`validateKubeFinalizerName`: an unqualified finalizer must be a standard one). Field paths
//! are those of the real server: every label and annotation error is reported at
//! `metadata.labels` / `metadata.annotations` (not per key), finalizers at
//! `metadata.finalizers` (apimachinery) and `metadata.finalizers[i]` (core), owner references
//! at `metadata.ownerReferences.<field>` (no index). `metadata.name` is checked where the name
//! is generated ([`crate::store`]).

use serde_json::Value;

use super::errors::{invalid, s};
use super::names;
use crate::crd_validation::FieldError;
use crate::registry::ResourceInfo;

/// `TotalAnnotationSizeLimitB`: keys and values together, in bytes.
pub const ANNOTATIONS_LIMIT: usize = 256 * 1024;

const STANDARD_FINALIZERS: [&str; 3] = ["kubernetes", "orphan", "foregroundDeletion"];

/// `ValidateLabels` at `path` (labels of `metadata`, of a Pod template, of a selector's
/// `matchLabels`): each key a qualified name, each value a label value.
pub fn labels(v: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, val) in v.as_object().into_iter().flatten() {
        for m in names::qualified_name(k) {
            errs.push(invalid(path, &Value::from(k.as_str()), m));
        }
        let val = val.as_str().unwrap_or_default();
        for m in names::label_value(val) {
            errs.push(invalid(path, &Value::from(val), m));
        }
    }
    errs
}

/// `ValidateAnnotations` at `path`: keys are qualified names once lower-cased; keys and values
/// together at most [`ANNOTATIONS_LIMIT`] bytes (`Too long: must have at most 262144 bytes`).
pub fn annotations(v: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut total = 0;
    for (k, val) in v.as_object().into_iter().flatten() {
        for m in names::qualified_name(&k.to_lowercase()) {
            errs.push(invalid(path, &Value::from(k.as_str()), m));
        }
        total += k.len() + val.as_str().map_or(0, str::len);
    }
    if total > ANNOTATIONS_LIMIT {
        errs.push(FieldError {
            reason: "FieldValueTooLong",
            field: path.into(),
            message: format!("Too long: must have at most {ANNOTATIONS_LIMIT} bytes"),
        });
    }
    errs
}

/// `ValidateOwnerReferences` (the per-reference rules): a version in `apiVersion`, and
/// non-empty `kind`, `name` and `uid` (`name must not be empty`: the wording before upstream's
/// declarative-validation rework, recorded from a real server in tests/real_api/).
fn owner_references(v: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let path = "metadata.ownerReferences";
    for r in v.as_array().into_iter().flatten() {
        let api_version = s(r, &["apiVersion"]);
        let version = match api_version.split('/').collect::<Vec<_>>().as_slice() {
            [v] => *v,
            [_, v] => *v,
            _ => "",
        };
        if version.is_empty() {
            errs.push(invalid(
                format!("{path}.apiVersion"),
                &Value::from(api_version),
                "version must not be empty",
            ));
        }
        for f in ["kind", "name", "uid"] {
            let value = s(r, &[f]);
            if value.is_empty() {
                errs.push(invalid(
                    format!("{path}.{f}"),
                    &Value::from(value),
                    format!("{f} must not be empty"),
                ));
            }
        }
    }
    errs
}

/// The finalizer rules: each a qualified name (`metadata.finalizers`), and for built-in kinds
/// (`kube`) an unqualified one must be `kubernetes`, `orphan` or `foregroundDeletion`
/// (`metadata.finalizers[i]`, reported after every other metadata error).
fn finalizers(v: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for f in v.as_array().into_iter().flatten() {
        let f = f.as_str().unwrap_or_default();
        for m in names::qualified_name(f) {
            errs.push(invalid("metadata.finalizers", &Value::from(f), m));
        }
    }
    errs
}

fn kube_finalizers(v: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, f) in v.as_array().into_iter().flatten().enumerate() {
        let f = f.as_str().unwrap_or_default();
        if !f.contains('/') && !STANDARD_FINALIZERS.contains(&f) {
            errs.push(invalid(
                format!("metadata.finalizers[{i}]"),
                &Value::from(f),
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
    errs
}

/// The errors of `obj.metadata` on a create (`generateName`, labels, annotations, owner
/// references, finalizers) or an update (`old` given: labels, annotations, owner references
/// and the built-in finalizer rule on the new metadata, as `ValidateObjectMetaAccessorUpdate`
/// does: it does not re-check finalizers as qualified names; the immutable fields are restored
/// by the store before this runs).
pub fn validate(res: &ResourceInfo, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let md = &obj["metadata"];
    let mut errs = Vec::new();
    if old.is_none() {
        let generate = s(md, &["generateName"]);
        if !generate.is_empty() {
            for m in names::check(res, generate, true) {
                errs.push(invalid("metadata.generateName", &Value::from(generate), m));
            }
        }
    }
    errs.extend(labels(&md["labels"], "metadata.labels"));
    errs.extend(annotations(&md["annotations"], "metadata.annotations"));
    errs.extend(owner_references(&md["ownerReferences"]));
    if old.is_none() {
        errs.extend(finalizers(&md["finalizers"]));
    }
    if res.crd_version.is_none() {
        errs.extend(kube_finalizers(&md["finalizers"]));
    }
    errs
}
