//! PATCH bodies: JSON patch (RFC 6902) and JSON merge patch (RFC 7386) through the `json-patch`
//! crate; strategic merge patch and server-side apply in the submodules.

pub mod apply;
#[cfg(test)]
mod fuzz_inputs;
#[cfg(test)]
mod fuzz_tests;
pub mod strategic;
pub mod typed;

use serde_json::Value;

use crate::schema::Schema;
use crate::status::ApiError;

/// Patch types by `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (also `+cbor` is not supported).
    Apply,
}

impl PatchType {
    /// Parses a `Content-Type` header value.
    ///
    /// Errors: 415 naming the supported types.
    pub fn from_content_type(ct: &str) -> Result<Self, ApiError> {
        let base = ct.split(';').next().unwrap_or_default().trim();
        match base {
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            "application/apply-patch+yaml" => Ok(PatchType::Apply),
            other => Err(ApiError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format ({other:?}) - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json"
            ))),
        }
    }
}

/// Applies a JSON, merge or strategic merge patch to `current`, returning the patched object.
/// `schema` is the object's schema (strategic merge metadata); `None` for custom resources,
/// which, as on a real server, reject strategic merge patches.
///
/// Errors: 400 for a malformed body (a strategic merge patch's list element without its merge
/// key included), 422 when a JSON patch operation fails, 415 for a strategic
/// merge patch on a custom resource.
pub fn apply_patch(
    kind: PatchType,
    current: &Value,
    body: &[u8],
    schema: Option<Schema<'_>>,
) -> Result<Value, ApiError> {
    let bad = |e: &dyn std::fmt::Display| {
        ApiError::BadRequest(format!("the patch body is not valid: {e}"))
    };
    match kind {
        PatchType::Json => {
            let raw: Vec<Value> = serde_json::from_slice(body).map_err(|e| bad(&e))?;
            // As in the Go json-patch library the real server uses, `test` of a missing path
            // against `null` succeeds (kube-runtime's finalizer helper relies on it).
            let ops: Vec<Value> = raw
                .into_iter()
                .filter(|op| {
                    let missing_null_test = op["op"] == "test"
                        && op["value"].is_null()
                        && op["path"]
                            .as_str()
                            .is_some_and(|p| current.pointer(p).is_none_or(Value::is_null));
                    !missing_null_test
                })
                .collect();
            let ops: json_patch::Patch =
                serde_json::from_value(Value::Array(ops)).map_err(|e| bad(&e))?;
            // `patch_unsafe`: the copy is dropped on error, so no undo is needed, and the
            // crate's undo (`patch`) panics when it cannot reverse a `move` of a value onto its
            // own parent (json-patch 4.2, "unable to undo applied patches").
            let mut doc = current.clone();
            json_patch::patch_unsafe(&mut doc, &ops).map_err(|e| ApiError::Invalid {
                kind: current["kind"].as_str().unwrap_or_default().to_string(),
                name: crate::meta::name(current).to_string(),
                group: String::new(),
                field: "patch".into(),
                message: format!("the JSON patch could not be applied: {e}"),
            })?;
            Ok(doc)
        }
        PatchType::Merge => {
            let patch: Value = serde_json::from_slice(body).map_err(|e| bad(&e))?;
            let mut doc = current.clone();
            json_patch::merge(&mut doc, &patch);
            Ok(doc)
        }
        PatchType::Strategic => {
            let Some(schema) = schema else {
                return Err(ApiError::UnsupportedMediaType(
                    "strategic merge patch is not supported for custom resources; use a JSON merge patch (--type merge) or server-side apply".into(),
                ));
            };
            let patch: Value = serde_json::from_slice(body).map_err(|e| bad(&e))?;
            if let Some(e) = strategic::missing_merge_key(&patch, Some(schema), "", true) {
                return Err(bad(&e));
            }
            let mut doc = current.clone();
            strategic::merge(&mut doc, &patch, Some(schema));
            Ok(doc)
        }
        PatchType::Apply => Err(ApiError::Internal(
            "apply patches are handled by patch::apply".into(),
        )),
    }
}
