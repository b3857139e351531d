//! CRD registration: every `default` in a version's `openAPIV3Schema` must be pruned and valid
//! against the schema node it sits in, as apiextensions-apiserver v1.28
//! `pkg/apiserver/schema/defaulting/validation.go` (`ValidateDefaults`, with
//! `requirePrunedDefaults` for apiextensions.k8s.io/v1) checks on create and update. Errors are
//! reported under `spec.versions[i].schema.openAPIV3Schema.properties[a].properties[b].default`
//! with the value validator's messages (`Unsupported value`, `Invalid value`, `must not have
//! unknown fields`), so a CRD the real server refuses is refused here with the same words.
//! Defaults inside `additionalProperties` are not followed (the real server forbids them there).

use serde_json::Value;

use crate::crd_validation::{validate_at, FieldError};

/// Whether `default` has a field `schema` does not declare (`must not have unknown fields`).
fn unpruned(default: &Value, schema: &Value) -> bool {
    if schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return false;
    }
    match default {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            map.iter()
                .any(|(k, v)| match (props.and_then(|p| p.get(k)), additional) {
                    (Some(child), _) => unpruned(v, child),
                    (None, Some(a)) => unpruned(v, a),
                    (None, None) => true,
                })
        }
        Value::Array(items) => schema
            .get("items")
            .is_some_and(|s| items.iter().any(|v| unpruned(v, s))),
        _ => false,
    }
}

/// Go's `%#v` of a decoded JSON value (map keys sorted, as `fmt` prints maps).
fn go_syntax(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{k:?}:{}", go_syntax(&m[*k])))
                .collect();
            format!("map[string]interface {{}}{{{}}}", parts.join(", "))
        }
        Value::Array(a) => {
            let parts: Vec<String> = a.iter().map(go_syntax).collect();
            format!("[]interface {{}}{{{}}}", parts.join(", "))
        }
        Value::Null => "interface {}(nil)".into(),
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn walk(node: &Value, path: &str, out: &mut Vec<FieldError>) {
    if let Some(default) = node.get("default") {
        let at = format!("{path}.default");
        if unpruned(default, node) {
            out.push(FieldError {
                reason: "FieldValueInvalid",
                field: at,
                message: format!(
                    "Invalid value: {}: must not have unknown fields",
                    go_syntax(default)
                ),
            });
        } else {
            let mut schema = node.clone();
            if let Some(m) = schema.as_object_mut() {
                m.remove("default");
            }
            // The value validator names paths inside the default from its root ("" for the
            // default itself: `Invalid value: 0:  in body should be ...`).
            out.extend(validate_at(default, &schema, "").into_iter().map(|mut e| {
                e.field = if e.field.is_empty() {
                    at.clone()
                } else {
                    format!("{at}.{}", e.field)
                };
                e
            }));
        }
    }
    if let Some(items) = node.get("items").filter(|i| i.is_object()) {
        walk(items, &format!("{path}.items"), out);
    }
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        for (k, child) in props {
            walk(child, &format!("{path}.properties[{k}]"), out);
        }
    }
}

/// The default errors of every version of `crd` (client form), in document order. When every
/// version has the same schema the real server checks it once, as the internal
/// `spec.validation.openAPIV3Schema` (apiextensions' v1 conversion hoists identical schemas).
pub fn errors(crd: &Value) -> Vec<FieldError> {
    let mut out = Vec::new();
    let versions = crd["spec"]["versions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let schemas: Vec<&Value> = versions
        .iter()
        .filter_map(|v| v["schema"].get("openAPIV3Schema"))
        .collect();
    if schemas.len() == versions.len() && schemas.windows(2).all(|w| w[0] == w[1]) {
        if let Some(schema) = schemas.first() {
            walk(schema, "spec.validation.openAPIV3Schema", &mut out);
        }
        return out;
    }
    for (i, version) in versions.iter().enumerate() {
        if let Some(schema) = version["schema"].get("openAPIV3Schema") {
            walk(
                schema,
                &format!("spec.versions[{i}].schema.openAPIV3Schema"),
                &mut out,
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_must_be_valid_and_pruned() {
        let crd = json!({"spec": {"versions": [{"schema": {"openAPIV3Schema": {
        "type": "object", "properties": {"spec": {"type": "object", "properties": {
            "affinity": {"type": "string", "enum": ["NONE", "CLIENT_IP"], "default": ""},
            "ttl": {"type": "integer", "maximum": 10, "default": 5},
            "extra": {"type": "object", "properties": {"a": {"type": "string"}},
                      "default": {"b": "x"}},
        }}}}}}]}});
        let lines: Vec<String> = errors(&crd).iter().map(FieldError::to_line).collect();
        assert_eq!(
            lines,
            [
                "spec.validation.openAPIV3Schema.properties[spec].properties[affinity].default: Unsupported value: \"\": supported values: \"NONE\", \"CLIENT_IP\"",
                "spec.validation.openAPIV3Schema.properties[spec].properties[extra].default: Invalid value: map[string]interface {}{\"b\":\"x\"}: must not have unknown fields",
            ]
        );
    }
}
