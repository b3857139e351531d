//! Fields a kind's OpenAPI schema does not declare, for server-side field validation
//! (`fieldValidation=Strict`, which kubectl sends by default): every unknown field is rejected
//! with `400 BadRequest` and the real server's message, `strict decoding error: unknown field
//! "spec.rule"`. (Server-side apply's typed conversion refuses undeclared fields on its own,
//! whatever `fieldValidation` says: `crate::patch::typed`.)
//!
//! Objects or maps whose schema allows any field (`additionalProperties`,
//! `x-kubernetes-preserve-unknown-fields`, or no declared properties) are not inspected.

use serde_json::Value;

use crate::registry::ResourceInfo;
use crate::schema::Schema;
use crate::status::ApiError;

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// Paths of the fields of `value` that `schema` does not declare, e.g. `spec.rules[0].htp`.
pub fn unknown_fields(value: &Value, schema: Schema<'_>) -> Vec<String> {
    let mut out = Vec::new();
    walk(value, schema, "", true, &mut out);
    out
}

fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn walk(value: &Value, schema: Schema<'_>, path: &str, top: bool, out: &mut Vec<String>) {
    let resolved = schema.resolve();
    let node = resolved.node;
    match value {
        Value::Object(map) => {
            if node
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool)
                == Some(true)
                && node.get("properties").is_none()
            {
                return;
            }
            let props = node.get("properties").and_then(Value::as_object);
            let additional = node.get("additionalProperties").filter(|a| a.is_object());
            // The decoder reports fields in document order.
            for (k, v) in map {
                let child_path = child_path(path, k);
                if top && (k == "apiVersion" || k == "kind") {
                    continue;
                }
                // Custom resource schemas rarely declare metadata; it is always ObjectMeta.
                if top
                    && k == "metadata"
                    && props
                        .and_then(|p| p.get(k))
                        .and_then(|m| m.get("properties"))
                        .is_none()
                {
                    if let Some(meta) = schema.components.get(OBJECT_META) {
                        let meta = Schema {
                            node: meta,
                            components: schema.components,
                        };
                        walk(v, meta, &child_path, false, out);
                    }
                    continue;
                }
                match (props.and_then(|p| p.get(k)), additional) {
                    (Some(child), _) | (None, Some(child)) => walk(
                        v,
                        Schema {
                            node: child,
                            components: schema.components,
                        },
                        &child_path,
                        false,
                        out,
                    ),
                    (None, None) => {
                        let open = props.is_none()
                            || node
                                .get("x-kubernetes-preserve-unknown-fields")
                                .and_then(Value::as_bool)
                                == Some(true);
                        if !open {
                            out.push(child_path);
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.items() {
                for (i, item) in items.iter().enumerate() {
                    walk(item, item_schema, &format!("{path}[{i}]"), false, out);
                }
            }
        }
        _ => {}
    }
}

/// Checks `obj` for `fieldValidation=Strict`.
///
/// Errors: 400 BadRequest listing the unknown fields, as the real server words it.
pub fn strict(res: &ResourceInfo, obj: &Value, schema: Option<Schema<'_>>) -> Result<(), ApiError> {
    let Some(schema) = schema else { return Ok(()) };
    let unknown = unknown_fields(obj, schema);
    if unknown.is_empty() {
        return Ok(());
    }
    let fields: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field {f:?}"))
        .collect();
    Err(ApiError::BadRequest(format!(
        "{} in version {:?} cannot be handled as a {}: strict decoding error: {}",
        res.kind,
        res.version,
        res.kind,
        fields.join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::OpenApi;
    use serde_json::json;

    #[test]
    fn finds_typos_at_any_depth_and_accepts_maps() {
        let api = OpenApi::new();
        let schema = api
            .schema_for("networking.k8s.io", "v1", "Ingress")
            .unwrap();
        let ing = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "a", "labels": {"any": "thing"}, "annotation": {}},
            "spec": {"rule": [], "rules": [{"host": "x", "htp": {}}]}});
        let mut unknown = unknown_fields(&ing, schema);
        unknown.sort();
        assert_eq!(
            unknown,
            vec!["metadata.annotation", "spec.rule", "spec.rules[0].htp"]
        );
        let ok = json!({"metadata": {"name": "a"}, "spec": {"rules": [{"host": "x", "http": {"paths": []}}]}});
        assert!(unknown_fields(&ok, schema).is_empty());
    }
}
