//! Server-side apply (`application/apply-patch+yaml`), simplified: the applied configuration is
//! merged into the live object like a strategic merge patch (lists merge by their schema's keys,
//! `x-kubernetes-list-map-keys` for custom resources), fields the same manager applied before and
//! no longer applies are removed, and the manager is recorded in `managedFields` with operation
//! `Apply`. Not modelled: conflicts between managers (`force` is accepted and has no effect) and
//! ownership inside lists (lists are owned as a whole for pruning).
//!
//! A configuration with a field the schema does not declare is refused whatever
//! `fieldValidation` says ([`check_declared`]), as the real server's typed conversion does.

use serde_json::Value;

use crate::managed_fields;
use crate::patch::strategic;
use crate::schema::Schema;
use crate::status::ApiError;
use crate::validation;

/// Parses an apply body (YAML or JSON) for an object of `schema`.
///
/// Errors: 400 when the body is not a YAML/JSON object, or a list element lacks its merge key.
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
    if let Some(e) = strategic::missing_merge_key(&v, schema, "", false) {
        return Err(ApiError::BadRequest(format!(
            "the apply configuration is not valid: {e}"
        )));
    }
    Ok(v)
}

/// Refuses an apply configuration carrying fields `schema` does not declare, with the real
/// server's answer: 500, no reason, `failed to create typed patch object (default/p; /v1,
/// Kind=Pod): .spec.containers[name="web"].x: field not declared in schema` (several as
/// `errors:` lines). kube-apiserver v1.28.7 answers so whatever `fieldValidation` is (checked
/// on the real server; tests/real_api/cases.yaml `apply-undeclared-field*`). Without this, the
/// unknown field was merged in and pruned on the next apply, so every apply changed the object.
///
/// Errors: [`ApiError::Unclassified`] naming the fields.
pub fn check_declared(config: &Value, schema: Option<Schema<'_>>) -> Result<(), ApiError> {
    let Some(schema) = schema else { return Ok(()) };
    let undeclared = validation::undeclared_in_apply(config, schema);
    if undeclared.is_empty() {
        return Ok(());
    }
    let str_at = |p: &str| {
        config
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let api_version = str_at("/apiVersion");
    // Go's GroupVersionKind.String(): `apps/v1, Kind=Deployment`, `/v1, Kind=Pod` for core.
    let gv = if api_version.contains('/') {
        api_version.to_owned()
    } else {
        format!("/{api_version}")
    };
    let errors: Vec<String> = undeclared
        .iter()
        .map(|p| format!("{p}: field not declared in schema"))
        .collect();
    let errors = match errors.as_slice() {
        [one] => one.clone(),
        many => format!("errors:\n  {}", many.join("\n  ")),
    };
    Err(ApiError::Unclassified(format!(
        "failed to create typed patch object ({}/{}; {gv}, Kind={}): {errors}",
        str_at("/metadata/namespace"),
        str_at("/metadata/name"),
        str_at("/kind"),
    )))
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
