//! Decoding errors a real server answers before any validation (`400 BadRequest`):
//!
//! - a built-in kind's field whose JSON type does not fit the Go type (`data: {x: 1}` in a
//!   ConfigMap): `ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot
//!   unmarshal number into Go struct field ConfigMap.data of type string`, the message of
//!   apimachinery's JSON serializer wrapping `encoding/json`'s `UnmarshalTypeError` (the struct
//!   is the innermost Go struct, the field the JSON path from the object's root without list
//!   indices). Checked against the kind's OpenAPI schema: scalars (`string`, `int32`/`int64`,
//!   `bool`), objects and arrays;
//! - a custom resource without `kind`: `the object provided is unrecognized (must be of type
//!   BackendConfig): Object 'Kind' is missing in '<body>' (<first 30 bytes> ...)`
//!   (apiextensions' unstructured decoder).

use serde_json::Value;

use crate::registry::ResourceInfo;
use crate::schema::Schema;
use crate::status::ApiError;

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

/// `io.k8s.api.core.v1.ConfigMap` -> `ConfigMap` (struct) and `v1.ConfigMap` (Go type).
fn go_names(reference: &str) -> (String, String) {
    let name = reference.rsplit('/').next().unwrap_or(reference);
    let mut parts: Vec<&str> = name.split('.').collect();
    let ty = parts.pop().unwrap_or_default().to_string();
    let pkg = parts.pop().unwrap_or_default();
    (ty.clone(), format!("{pkg}.{ty}"))
}

/// The Go type of a schema node, as `encoding/json` names it in its errors.
fn go_type(schema: Schema<'_>) -> String {
    if let Some(r) = schema
        .node
        .get("$ref")
        .and_then(Value::as_str)
        .or_else(|| schema.node["allOf"][0].get("$ref").and_then(Value::as_str))
    {
        return go_names(r).1;
    }
    let node = schema.node;
    match (node["type"].as_str(), node["format"].as_str()) {
        (Some("string"), _) => "string".into(),
        (Some("integer"), Some(f)) => f.to_string(),
        (Some("integer"), None) => "int".into(),
        (Some("boolean"), _) => "bool".into(),
        (Some("number"), _) => "float64".into(),
        (Some("array"), _) => format!(
            "[]{}",
            schema
                .items()
                .map(go_type)
                .unwrap_or_else(|| "interface {}".into())
        ),
        (Some("object"), _) => match node.get("additionalProperties").filter(|a| a.is_object()) {
            Some(a) => format!(
                "map[string]{}",
                go_type(Schema {
                    node: a,
                    components: schema.components
                })
            ),
            None => "map[string]interface {}".into(),
        },
        _ => "interface {}".into(),
    }
}

fn fits(v: &Value, node: &Value) -> bool {
    if node
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return v.is_string() || v.is_i64() || v.is_u64();
    }
    match node["type"].as_str() {
        Some("string") => v.is_string(),
        Some("integer") => v.is_i64() || v.is_u64(),
        Some("number") => v.is_number(),
        Some("boolean") => v.is_boolean(),
        Some("array") => v.is_array(),
        Some("object") => v.is_object(),
        _ => true,
    }
}

/// The first type mismatch: `(JSON kind, struct, field path, Go type)`.
fn mismatch(
    v: &Value,
    schema: Schema<'_>,
    structure: &str,
    path: &str,
) -> Option<(String, String, String, String)> {
    if v.is_null() {
        return None;
    }
    let own = schema
        .node
        .get("$ref")
        .and_then(Value::as_str)
        .or_else(|| schema.node["allOf"][0].get("$ref").and_then(Value::as_str))
        .map(|r| go_names(r).0);
    let resolved = schema.resolve();
    if !fits(v, resolved.node) {
        return Some((
            json_kind(v).into(),
            structure.to_string(),
            path.to_string(),
            go_type(schema),
        ));
    }
    let inner = own.unwrap_or_else(|| structure.to_string());
    match v {
        Value::Object(map) => {
            let props = resolved.node.get("properties").and_then(Value::as_object);
            let additional = resolved
                .node
                .get("additionalProperties")
                .filter(|a| a.is_object());
            for (k, child) in map {
                let node = props.and_then(|p| p.get(k)).or(additional);
                let Some(node) = node else { continue };
                // Map values keep the field path and struct of the map's owner.
                let declared = props.and_then(|p| p.get(k)).is_some();
                let child_path = match (declared, path.is_empty()) {
                    (false, _) => path.to_string(),
                    (true, true) => k.clone(),
                    (true, false) => format!("{path}.{k}"),
                };
                let child_struct = if declared {
                    inner.clone()
                } else {
                    structure.to_string()
                };
                let found = mismatch(
                    child,
                    Schema {
                        node,
                        components: schema.components,
                    },
                    &child_struct,
                    &child_path,
                );
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        Value::Array(items) => {
            let item_schema = resolved.node.get("items")?;
            items.iter().find_map(|item| {
                mismatch(
                    item,
                    Schema {
                        node: item_schema,
                        components: schema.components,
                    },
                    &inner,
                    path,
                )
            })
        }
        _ => None,
    }
}

/// Checks a create or update body of `res` (client form) before it is stored.
///
/// Errors: 400 `BadRequest` with the real server's decoding message.
pub fn check(
    res: &ResourceInfo,
    obj: &Value,
    raw: &[u8],
    schema: Option<Schema<'_>>,
) -> Result<(), ApiError> {
    if res.crd_version.is_some() {
        if obj
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .is_empty()
        {
            let text = String::from_utf8_lossy(raw);
            let head: String = text.chars().take(30).collect();
            return Err(ApiError::BadRequest(format!(
                "the object provided is unrecognized (must be of type {}): Object 'Kind' is missing in '{text}' ({head} ...)",
                res.kind
            )));
        }
        return Ok(());
    }
    let Some(schema) = schema else {
        return Ok(());
    };
    let Some(map) = obj.as_object() else {
        return Ok(());
    };
    let root = schema.resolve();
    for (k, v) in map {
        if k == "apiVersion" || k == "kind" {
            continue;
        }
        let Some(node) = root.node.get("properties").and_then(|p| p.get(k)) else {
            continue;
        };
        let child = Schema {
            node,
            components: schema.components,
        };
        if let Some((json, structure, field, ty)) = mismatch(v, child, &res.kind, k) {
            return Err(ApiError::BadRequest(format!(
                "{kind} in version \"{version}\" cannot be handled as a {kind}: json: cannot unmarshal {json} into Go struct field {structure}.{field} of type {ty}",
                kind = res.kind,
                version = res.version,
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::OpenApi;
    use serde_json::json;

    fn error(group: &str, kind: &str, obj: Value) -> String {
        let api = OpenApi::new();
        let res = crate::registry::Registry::new()
            .all()
            .into_iter()
            .find(|r| r.group == group && r.kind == kind && r.version == "v1")
            .expect("served kind");
        match check(&res, &obj, b"", api.schema_for(group, "v1", kind)) {
            Err(ApiError::BadRequest(m)) => m,
            other => panic!("expected 400, got {other:?}"),
        }
    }

    #[test]
    fn type_mismatches_name_the_go_struct_field() {
        assert_eq!(
            error("", "ConfigMap", json!({"data": {"x": 1}})),
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
        );
        assert_eq!(
            error("networking.k8s.io", "Ingress", json!({"spec": {"rules": [{"host": 3}]}})),
            "Ingress in version \"v1\" cannot be handled as a Ingress: json: cannot unmarshal number into Go struct field IngressRule.spec.rules.host of type string"
        );
    }
}
