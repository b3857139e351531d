//! Server-side apply (`application/apply-patch+yaml`), simplified: the applied configuration is
//! merged into the live object like a strategic merge patch (lists merge by their schema's keys,
//! `x-kubernetes-list-map-keys` for custom resources), fields the same manager applied before and
//! no longer applies are removed, and the manager is recorded in `managedFields` with operation
//! `Apply`. Not modelled: conflicts between managers (`force` is accepted and has no effect) and
//! ownership inside lists (lists are owned as a whole for pruning).

use serde_json::Value;

use crate::managed_fields;
use crate::patch::strategic;
use crate::schema::Schema;
use crate::status::ApiError;

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
