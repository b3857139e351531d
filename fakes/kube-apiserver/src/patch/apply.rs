//! Server-side apply (`application/apply-patch+yaml`), simplified: the applied configuration is
//! merged into the live object like a strategic merge patch (lists merge by their schema's keys,
//! `x-kubernetes-list-map-keys` for custom resources), fields the same manager applied before and
//! no longer applies are removed, and the manager is recorded in `managedFields` with operation
//! `Apply`; conflicts with other managers and `force` are [`crate::managed_fields`]'s. Not
//! modelled: pruning inside lists (a list no longer applied goes as a whole).
//!
//! A configuration the real server's typed conversion refuses (a field the schema does not
//! declare, a value of the wrong type, a list element without its keys, duplicated keys) is
//! refused first, whatever `fieldValidation` says ([`check_typed`], [`super::typed`]).

use std::collections::HashMap;

use serde_json::Value;

use crate::crd_validation::FieldError;

use crate::managed_fields;
use crate::patch::{strategic, typed};
use crate::schema::Schema;
use crate::status::ApiError;

/// The `fieldManager` query parameter, which apply requires.
///
/// Errors: 422 `Invalid`, as kube-apiserver v1.28.7 answers before it reads the body:
/// `PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply
/// patch` (checked on the real server).
pub fn field_manager(query: &HashMap<String, String>) -> Result<String, ApiError> {
    match query.get("fieldManager") {
        Some(m) if !m.is_empty() => Ok(m.clone()),
        _ => Err(ApiError::InvalidFields {
            kind: "PatchOptions".into(),
            name: String::new(),
            group: "meta.k8s.io".into(),
            causes: vec![FieldError {
                reason: "FieldValueRequired",
                field: "fieldManager".into(),
                message: "Required value: is required for apply patch".into(),
            }],
        }),
    }
}

/// Parses an apply body (YAML or JSON) for an object of `schema` and checks it as the real
/// server's typed conversion does ([`check_typed`]).
///
/// Errors: 400 when the body is not a YAML/JSON object; 500 ([`check_typed`]) when the typed
/// conversion refuses it; 400 when a list element lacks a merge key that has a schema default
/// (`containers[0].name`), which the real server merges as the default and then refuses in
/// validation (422, `spec.containers[1].name: Required value`): here refused before the merge,
/// which would append the element again on every apply.
pub fn parse(body: &[u8], schema: Option<Schema<'_>>) -> Result<Value, ApiError> {
    let v: Value = serde_yaml::from_slice(body).map_err(|e| {
        ApiError::BadRequest(format!(
            "the apply configuration is not valid YAML or JSON: {e}"
        ))
    })?;
    if !v.is_object() {
        return Err(ApiError::BadRequest(
            "the apply configuration must be an object with apiVersion, kind and metadata".into(),
        ));
    }
    check_typed(&v, schema)?;
    if let Some(e) = strategic::missing_merge_key(&v, schema, "", false) {
        return Err(ApiError::BadRequest(format!(
            "the apply configuration is not valid: {e}"
        )));
    }
    Ok(v)
}

/// Refuses an apply configuration the real server's typed conversion refuses ([`typed`]), with
/// its answer: 500, no reason, `failed to create typed patch object (default/p; /v1, Kind=Pod):
/// .spec.containers[name="web"].x: field not declared in schema` (several as `errors:` lines;
/// namespace and name as the configuration gives them). kube-apiserver v1.28.7 answers so
/// whatever `fieldValidation` is, before it looks for the object or its namespace (checked on
/// the real server; tests/real_api/cases.yaml `apply-undeclared-field*`). Without this, an
/// undeclared field was merged in and pruned on the next apply, and a list key of the wrong type
/// (`name: {"$patch": "delete"}`) made every apply append another container.
///
/// Errors: [`ApiError::Unclassified`] naming the fields.
pub fn check_typed(config: &Value, schema: Option<Schema<'_>>) -> Result<(), ApiError> {
    let Some(schema) = schema else { return Ok(()) };
    let refused = typed::errors(config, schema);
    if refused.is_empty() {
        return Ok(());
    }
    let errors = match refused.as_slice() {
        [one] => one.clone(),
        many => format!("errors:\n  {}", many.join("\n  ")),
    };
    let (object, gvk) = identity(config);
    Err(ApiError::Unclassified(format!(
        "failed to create typed patch object ({object}; {gvk}): {errors}"
    )))
}

/// Refuses an apply configuration of a built-in kind with a fraction where the kind's Go type
/// holds an integer (`spec.priority: 0.5`), as the real server's conversion of the merged
/// object does ([`typed::fraction_for_integer`]): 500, no reason, `failed to convert new object
/// (/p; /v1, Kind=Pod) to proper version: unable to convert unstructured object to /v1,
/// Kind=Pod: cannot convert float64 to int32`. Without this, the object was created with the
/// fraction stored (and an update refused with a decoding 400).
///
/// Errors: [`ApiError::Unclassified`].
pub fn check_convertible(config: &Value, schema: Option<Schema<'_>>) -> Result<(), ApiError> {
    let Some(go_type) = schema.and_then(|s| typed::fraction_for_integer(config, s)) else {
        return Ok(());
    };
    let (object, gvk) = identity(config);
    Err(ApiError::Unclassified(format!(
        "failed to convert new object ({object}; {gvk}) to proper version: unable to convert unstructured object to {gvk}: cannot convert float64 to {go_type}"
    )))
}

/// `namespace/name` as the configuration gives them, and Go's GroupVersionKind.String() of it
/// (`apps/v1, Kind=Deployment`; `/v1, Kind=Pod` for the core group).
fn identity(config: &Value) -> (String, String) {
    let str_at = |p: &str| {
        config
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let api_version = str_at("/apiVersion");
    let gv = if api_version.contains('/') {
        api_version.to_owned()
    } else {
        format!("/{api_version}")
    };
    (
        format!(
            "{}/{}",
            str_at("/metadata/namespace"),
            str_at("/metadata/name")
        ),
        format!("{gv}, Kind={}", str_at("/kind")),
    )
}

/// Merges `config` (from `manager`, on `subresource`) into `live`, pruning fields it stopped applying.
pub fn merge(
    live: &Value,
    config: &Value,
    manager: &str,
    subresource: Option<&str>,
    schema: Option<Schema<'_>>,
) -> Value {
    let mut out = live.clone();
    strategic::merge(&mut out, config, schema);
    if let Some(previous) = managed_fields::applied_fields(live, manager, subresource) {
        let now = managed_fields::fields_v1(config);
        managed_fields::prune(&mut out, &previous, &now);
    }
    out
}
