//! Fields a kind's OpenAPI schema does not declare, found two ways:
//!
//! - Server-side field validation (`fieldValidation=Strict`, which kubectl sends by default):
//!   every unknown field is rejected with `400 BadRequest` and the real server's message,
//!   `strict decoding error: unknown field "spec.rule"`.
//! - Server-side apply's typed conversion ([`undeclared_in_apply`]): structured-merge-diff
//!   refuses an apply configuration with a field its schema does not declare, whatever
//!   `fieldValidation` says, naming it in its own path syntax
//!   (`.spec.template.spec.containers[name="web"].readinessProbe.x-unknown`).
//!
//! Objects or maps whose schema allows any field (`additionalProperties`,
//! `x-kubernetes-preserve-unknown-fields`, or no declared properties) are not inspected.

use serde_json::Value;

use crate::registry::ResourceInfo;
use crate::schema::Schema;
use crate::status::ApiError;

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// How paths are written and how far a map is walked.
#[derive(Clone, Copy, PartialEq)]
enum Style {
    /// The JSON decoder's strict mode: `spec.rules[0].htp`, every unknown field.
    Decoder,
    /// structured-merge-diff: `.spec.rules[host="x"].htp` (an associative list's element by
    /// its keys), and a map's walk ends at its first unknown field.
    Apply,
}

/// Paths of the fields of `value` that `schema` does not declare, e.g. `spec.rules[0].htp`.
pub fn unknown_fields(value: &Value, schema: Schema<'_>) -> Vec<String> {
    let mut out = Vec::new();
    walk(value, schema, "", true, Style::Decoder, &mut out);
    out
}

/// The fields of an apply configuration that `schema` does not declare, in
/// structured-merge-diff's path syntax (`.spec.items[name="a"].zz`).
///
/// As kube-apiserver v1.28.7 answers (checked on the real server; tests/real_api/cases.yaml
/// `apply-undeclared-field`): each map's fields are visited in turn and the first undeclared one
/// ends that map's walk, so of two undeclared siblings only one is named. The real server visits
/// a Go map in random order, so which sibling it names varies; here the first in key order.
pub fn undeclared_in_apply(config: &Value, schema: Schema<'_>) -> Vec<String> {
    let mut out = Vec::new();
    walk(config, schema, "", true, Style::Apply, &mut out);
    out
}

fn child_path(path: &str, key: &str, style: Style) -> String {
    match style {
        Style::Decoder if path.is_empty() => key.to_owned(),
        Style::Decoder | Style::Apply => format!("{path}.{key}"),
    }
}

/// The path element of list element `i`: `[i]`, or by its keys (`[containerPort=80,protocol="TCP"]`,
/// values as JSON) when the list is associative and the element carries them.
fn element_path(path: &str, i: usize, item: &Value, keys: &[String], style: Style) -> String {
    if style == Style::Apply && !keys.is_empty() {
        let values: Option<Vec<String>> = keys
            .iter()
            .map(|k| item.get(k).map(|v| format!("{k}={v}")))
            .collect();
        if let Some(values) = values {
            return format!("{path}[{}]", values.join(","));
        }
    }
    format!("{path}[{i}]")
}

fn walk(
    value: &Value,
    schema: Schema<'_>,
    path: &str,
    top: bool,
    style: Style,
    out: &mut Vec<String>,
) {
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
            // The decoder reports fields in document order; apply's walk is made deterministic.
            let mut keys: Vec<&String> = map.keys().collect();
            if style == Style::Apply {
                keys.sort();
            }
            for k in keys {
                let v = &map[k];
                let child_path = child_path(path, k, style);
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
                        walk(v, meta, &child_path, false, style, out);
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
                        style,
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
                            if style == Style::Apply {
                                return;
                            }
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.items() {
                let keys = schema.list_map_keys();
                for (i, item) in items.iter().enumerate() {
                    let item_path = element_path(path, i, item, &keys, style);
                    walk(item, item_schema, &item_path, false, style, out);
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

    /// The paths server-side apply's typed conversion names (recorded from kube-apiserver
    /// v1.28.7 in tests/real_api/answers.json): associative list elements by their sorted keys,
    /// values as JSON, and one undeclared field per map.
    #[test]
    fn apply_paths_name_list_elements_by_their_keys_and_stop_a_map_at_its_first_unknown_field() {
        let api = OpenApi::new();
        let pod = api.schema_for("", "v1", "Pod").unwrap();
        let config = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "web", "image": "nginx",
                "ports": [{"containerPort": 80, "protocol": "TCP", "zz": 1}],
                "readinessProbe": {"periodSeconds": 5, "x-b": 1, "x-a": 1}}],
                "tolerations": [{"key": "k", "x-t": 1}]}});
        assert_eq!(
            undeclared_in_apply(&config, pod),
            vec![
                r#".spec.containers[name="web"].ports[containerPort=80,protocol="TCP"].zz"#,
                r#".spec.containers[name="web"].readinessProbe.x-a"#,
                ".spec.tolerations[0].x-t",
            ]
        );
        // The decoder's strict mode names every field, by index.
        let mut strict = unknown_fields(&config, pod);
        strict.sort();
        assert_eq!(
            strict,
            vec![
                "spec.containers[0].ports[0].zz",
                "spec.containers[0].readinessProbe.x-a",
                "spec.containers[0].readinessProbe.x-b",
                "spec.tolerations[0].x-t",
            ]
        );
    }
}
