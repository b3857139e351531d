//! Server-side apply's typed conversion of an apply configuration: structured-merge-diff's
//! validation of the configuration against the kind's schema (typed/validate.go and
//! typed/helpers.go, v4.2.3 in kube-apiserver v1.28.7), which the real server runs before
//! anything else about the request (even before it finds the namespace missing) and whatever
//! `fieldValidation` says. [`errors`] lists what it refuses, in its wording and path syntax:
//!
//! - a field the schema does not declare: `.spec.x: field not declared in schema` (a map's
//!   walk ends at its first one), so `$patch`, `$retainKeys`... are refused as fields: apply
//!   configurations carry no strategic merge directives;
//! - a value of the wrong type: `expected string, got &value.valueUnstructured{Value:5}`,
//!   `expected numeric (int or float), got string`, `expected boolean, got &{true}`,
//!   `expected map, got &{x}`, `expected list, got &{map[name:web]}` (Go's forms:
//!   [`crate::go_values`]); `null` is always accepted;
//! - an associative list's element that is `null` or not a map (`.spec.containers: element 0:
//!   associative list with keys may not have non-map elements`), or omits a key that has no
//!   default (`... omits key field "port" (and doesn't have default value)`); the list's other
//!   elements are then not visited;
//! - two elements with the same keys: `.spec.containers: duplicate entries for key
//!   [name="web"]`; a set's (`finalizers`) same value twice: `duplicate entries for key [="a"]`.
//!
//! Paths name an associative list's elements by their keys, sorted, with missing keys at their
//! schema default (`[containerPort=80,protocol="TCP"]`, `[name=""]`), a set's by value
//! (`[="a"]`) and an atomic list's by index (`[0]`). Lists are associative as kube-openapi
//! converts them: `x-kubernetes-list-type` (`map` with its `x-kubernetes-list-map-keys`, `set`,
//! `atomic`), else `x-kubernetes-patch-strategy: merge` (keyed by
//! `x-kubernetes-patch-merge-key` when there is one, a set otherwise). Values whose schema has
//! no type (`IntOrString`, `Quantity`), `x-kubernetes-int-or-string`, and objects without
//! declared properties (or only `x-kubernetes-preserve-unknown-fields`) take anything.
//!
//! Every message was checked on kube-apiserver v1.28.7 (docs/kube-apiserver.md, "Server-side
//! apply"). The real server visits a Go map in random order; here fields go in key order.

use serde_json::Value;

use crate::go_values::{plain_v, sharp_v, to_string, type_name};
use crate::schema::{Relationship, Schema};

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The refusals of the typed conversion of `config` (an object of `schema`), each as
/// `<path>: <message>`; empty when the real server converts it.
pub fn errors(config: &Value, schema: Schema<'_>) -> Vec<String> {
    let mut out = Vec::new();
    walk(config, schema, "", true, &mut out);
    out
}

/// What a schema node takes, as structured-merge-diff's atom for it.
enum Atom<'a> {
    /// Anything (deduced or untyped).
    Any,
    String,
    Numeric,
    Boolean,
    /// An object: declared fields, and the schema of any other key (`None`: undeclared).
    Map {
        declared: Option<&'a serde_json::Map<String, Value>>,
        others: Option<Option<&'a Value>>,
    },
    List,
}

fn flag(node: &Value, name: &str) -> bool {
    node.get(name).and_then(Value::as_bool) == Some(true)
}

fn atom(node: &Value) -> Atom<'_> {
    if flag(node, "x-kubernetes-int-or-string") {
        return Atom::Any;
    }
    let declared = node.get("properties").and_then(Value::as_object);
    let additional = node.get("additionalProperties").filter(|a| a.is_object());
    let open = flag(node, "x-kubernetes-preserve-unknown-fields")
        || node.get("additionalProperties") == Some(&Value::Bool(true));
    match node.get("type").and_then(Value::as_str) {
        Some("string") => Atom::String,
        Some("integer" | "number") => Atom::Numeric,
        Some("boolean") => Atom::Boolean,
        Some("array") => Atom::List,
        Some("object") | None if declared.is_some() || additional.is_some() => Atom::Map {
            declared,
            // `Some(None)`: any other key, any value.
            others: match (additional, open) {
                (Some(a), _) => Some(Some(a)),
                (None, true) => Some(None),
                (None, false) => None,
            },
        },
        _ => Atom::Any,
    }
}

fn push(out: &mut Vec<String>, path: &str, message: String) {
    if path.is_empty() {
        out.push(message);
    } else {
        out.push(format!("{path}: {message}"));
    }
}

fn walk(value: &Value, schema: Schema<'_>, path: &str, top: bool, out: &mut Vec<String>) {
    if value.is_null() {
        return;
    }
    let resolved = schema.resolve();
    match atom(resolved.node) {
        Atom::Any => {}
        Atom::String if !value.is_string() => push(
            out,
            path,
            format!("expected string, got {}", sharp_v(value)),
        ),
        Atom::Numeric if !value.is_number() => push(
            out,
            path,
            format!("expected numeric (int or float), got {}", type_name(value)),
        ),
        Atom::Boolean if !value.is_boolean() => push(
            out,
            path,
            format!("expected boolean, got {}", plain_v(value)),
        ),
        Atom::String | Atom::Numeric | Atom::Boolean => {}
        Atom::Map { declared, others } => {
            let Value::Object(map) = value else {
                return push(out, path, format!("expected map, got {}", plain_v(value)));
            };
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for k in keys {
                let here = format!("{path}.{k}");
                if top && (k == "apiVersion" || k == "kind") {
                    continue;
                }
                let field = declared.and_then(|p| p.get(k));
                // Custom resource schemas rarely declare metadata; it is always ObjectMeta.
                let meta =
                    (top && k == "metadata" && field.is_none_or(|m| m.get("properties").is_none()))
                        .then(|| schema.components.get(OBJECT_META))
                        .flatten();
                let child = match (meta.or(field), others) {
                    (Some(node), _) | (None, Some(Some(node))) => node,
                    (None, Some(None)) => continue,
                    (None, None) => {
                        push(out, &here, "field not declared in schema".into());
                        break;
                    }
                };
                let child = Schema {
                    node: child,
                    components: schema.components,
                };
                walk(&map[k], child, &here, false, out);
            }
        }
        Atom::List => {
            let Value::Array(items) = value else {
                return push(out, path, format!("expected list, got {}", plain_v(value)));
            };
            list(items, schema, path, out);
        }
    }
}

/// The path element of a keyed list's element, `[k1=v1,k2=v2]` (keys sorted, missing keys at
/// their default); Err: why the element has none.
fn keyed_element(
    item: &Value,
    keys: &[String],
    item_schema: Option<Schema<'_>>,
) -> Result<String, String> {
    let Value::Object(m) = item else {
        return Err(if item.is_null() {
            "associative list with keys may not have a null element".into()
        } else {
            "associative list with keys may not have non-map elements".into()
        });
    };
    let defaults = item_schema.and_then(|s| s.resolve().node.get("properties"));
    let mut parts = Vec::with_capacity(keys.len());
    for k in keys {
        let v = m
            .get(k)
            .or_else(|| defaults.and_then(|p| p.get(k)).and_then(|f| f.get("default")))
            .ok_or_else(|| {
                format!("associative list with keys has an element that omits key field {k:?} (and doesn't have default value)")
            })?;
        parts.push(format!("{k}={}", to_string(v)));
    }
    Ok(format!("[{}]", parts.join(",")))
}

fn set_element(item: &Value) -> Result<String, String> {
    match item {
        Value::Object(_) => {
            Err("associative list without keys has an element that's a map type".into())
        }
        Value::Array(_) => Err("not supported: associative list with lists as elements".into()),
        Value::Null => {
            Err("associative list without keys has an element that's an explicit null".into())
        }
        v => Ok(format!("[={}]", to_string(v))),
    }
}

fn list(items: &[Value], schema: Schema<'_>, path: &str, out: &mut Vec<String>) {
    let item_schema = schema.items();
    let relationship = schema.relationship();
    let mut seen = std::collections::HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let element = match &relationship {
            Relationship::Atomic => Ok(format!("[{i}]")),
            Relationship::Set => set_element(item),
            Relationship::Keyed(keys) => keyed_element(item, keys, item_schema),
        };
        let element = match element {
            Ok(e) => e,
            Err(why) => {
                // Without its path element, the rest of the list is not visited.
                push(out, path, format!("element {i}: {why}"));
                return;
            }
        };
        if !matches!(relationship, Relationship::Atomic) && !seen.insert(element.clone()) {
            push(out, path, format!("duplicate entries for key {element}"));
        }
        if let Some(item_schema) = item_schema {
            walk(item, item_schema, &format!("{path}{element}"), false, out);
        }
    }
}

/// The Go integer type (`int32`, `int64`) of the first value of `config`, in key order, that is
/// a number Go decodes as a `float64` (`0.5`, `1e300`) where the schema wants an integer. The
/// typed conversion takes any number there (numeric); converting the merged object into the
/// kind's Go struct then fails, and kube-apiserver v1.28.7 answers 500 `failed to convert new
/// object (/p; /v1, Kind=Pod) to proper version: unable to convert unstructured object to /v1,
/// Kind=Pod: cannot convert float64 to int32` (`spec.priority: 0.5`, checked on the real
/// server). For built-in kinds only: custom resources are validated against their schema.
pub fn fraction_for_integer(config: &Value, schema: Schema<'_>) -> Option<String> {
    let node = schema.resolve().node;
    match config {
        Value::Number(_) if node.get("type").and_then(Value::as_str) == Some("integer") => {
            (type_name(config) == "float64")
                .then(|| node["format"].as_str().unwrap_or("int64").to_owned())
        }
        Value::Object(map) => {
            let declared = node.get("properties");
            let others = node.get("additionalProperties").filter(|a| a.is_object());
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            keys.into_iter().find_map(|k| {
                let child = declared.and_then(|p| p.get(k)).or(others)?;
                let child = Schema {
                    node: child,
                    components: schema.components,
                };
                fraction_for_integer(&map[k], child)
            })
        }
        Value::Array(items) => {
            let item_schema = schema.items()?;
            items
                .iter()
                .find_map(|item| fraction_for_integer(item, item_schema))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::OpenApi;
    use serde_json::json;

    fn pod(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    }

    /// Paths name associative list elements by their sorted keys, values as JSON, and one
    /// undeclared field per map (kube-apiserver v1.28.7, tests/real_api/answers.json).
    #[test]
    fn undeclared_fields_are_named_by_list_keys_and_one_per_map() {
        let api = OpenApi::new();
        let schema = api.schema_for("", "v1", "Pod").unwrap();
        let config = pod(json!({"containers": [{"name": "web", "image": "nginx",
                "ports": [{"containerPort": 80, "protocol": "TCP", "zz": 1}],
                "readinessProbe": {"periodSeconds": 5, "x-b": 1, "x-a": 1}}],
            "tolerations": [{"key": "k", "x-t": 1}]}));
        assert_eq!(
            errors(&config, schema),
            vec![
                r#".spec.containers[name="web"].ports[containerPort=80,protocol="TCP"].zz: field not declared in schema"#,
                r#".spec.containers[name="web"].readinessProbe.x-a: field not declared in schema"#,
                ".spec.tolerations[0].x-t: field not declared in schema",
            ]
        );
    }

    /// Each configuration with the answer kube-apiserver v1.28.7 gave for it (applied to a Pod,
    /// checked on the real server; the message after `failed to create typed patch object
    /// (/p; /v1, Kind=Pod): `).
    #[test]
    fn wrong_types_list_keys_and_duplicates_are_refused_as_the_real_server_words_them() {
        let api = OpenApi::new();
        let schema = api.schema_for("", "v1", "Pod").unwrap();
        let web = json!({"name": "web", "image": "nginx"});
        let cases = [
            (
                json!({"containers": [{"name": {"$patch": "delete"}, "image": "nginx"}]}),
                r#".spec.containers[name=$patch="delete"].name: expected string, got &value.valueUnstructured{Value:map[string]interface {}{"$patch":"delete"}}"#,
            ),
            (
                json!({"containers": [{"name": 5, "image": "nginx"}]}),
                ".spec.containers[name=5].name: expected string, got &value.valueUnstructured{Value:5}",
            ),
            (
                json!({"containers": [{"name": ["a", 1]}]}),
                r#".spec.containers[name=["a",1]].name: expected string, got &value.valueUnstructured{Value:[]interface {}{"a", 1}}"#,
            ),
            (
                json!({"containers": [web, {"name": "web"}]}),
                r#".spec.containers: duplicate entries for key [name="web"]"#,
            ),
            (
                json!({"containers": [{"name": "web", "ports": [{"containerPort": 80}, {"containerPort": 80.0, "protocol": "TCP"}]}]}),
                r#".spec.containers[name="web"].ports: duplicate entries for key [containerPort=80,protocol="TCP"]"#,
            ),
            (
                json!({"containers": [{"name": "web", "ports": [{"containerPort": "80"}]}]}),
                r#".spec.containers[name="web"].ports[containerPort="80",protocol="TCP"].containerPort: expected numeric (int or float), got string"#,
            ),
            (
                json!({"containers": [web, "x", {"name": 5}]}),
                ".spec.containers: element 1: associative list with keys may not have non-map elements",
            ),
            (
                json!({"containers": [null]}),
                ".spec.containers: element 0: associative list with keys may not have a null element",
            ),
            (
                json!({"containers": [web], "volumes": [{"$patch": "delete"}]}),
                r#".spec.volumes[name=""].$patch: field not declared in schema"#,
            ),
            (
                json!({"$patch": "replace", "containers": [web]}),
                ".spec.$patch: field not declared in schema",
            ),
            (
                json!({"containers": [web], "hostNetwork": "true"}),
                ".spec.hostNetwork: expected boolean, got &{true}",
            ),
            (
                json!({"containers": [web], "priority": {"a": 1}}),
                ".spec.priority: expected numeric (int or float), got map[string]interface {}",
            ),
            (
                json!({"containers": [web], "nodeSelector": {"a": 1}}),
                ".spec.nodeSelector.a: expected string, got &value.valueUnstructured{Value:1}",
            ),
            (
                json!({"containers": [web], "nodeSelector": 1e300}),
                ".spec.nodeSelector: expected map, got &{1e+300}",
            ),
            (
                json!({"containers": {"name": "web"}}),
                ".spec.containers: expected list, got &{map[name:web]}",
            ),
            (
                json!({"containers": [web], "tolerations": [{"key": 5}]}),
                ".spec.tolerations[0].key: expected string, got &value.valueUnstructured{Value:5}",
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(errors(&pod(spec.clone()), schema), vec![want], "{spec}");
        }
        assert_eq!(
            errors(
                &json!({"apiVersion": "v1", "kind": "Pod", "spec": "nul"}),
                schema
            ),
            vec![".spec: expected map, got &{nul}"]
        );
        let finalizers = |f: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "finalizers": f}});
        assert_eq!(
            errors(&finalizers(json!(["a", "a"])), schema),
            vec![r#".metadata.finalizers: duplicate entries for key [="a"]"#]
        );
        assert_eq!(
            errors(&finalizers(json!([{"a": 1}])), schema),
            vec![".metadata.finalizers: element 0: associative list without keys has an element that's a map type"]
        );
        assert_eq!(
            errors(&finalizers(json!([5])), schema),
            vec![
                ".metadata.finalizers[=5]: expected string, got &value.valueUnstructured{Value:5}"
            ]
        );
    }

    #[test]
    fn fractions_where_integers_go_are_found_with_their_go_type() {
        let api = OpenApi::new();
        let schema = api.schema_for("", "v1", "Pod").unwrap();
        let with = |spec: Value| fraction_for_integer(&pod(spec), schema);
        assert_eq!(with(json!({"priority": 0.5})).as_deref(), Some("int32"));
        assert_eq!(
            with(json!({"activeDeadlineSeconds": 1e300})).as_deref(),
            Some("int64")
        );
        let port = json!({"containers": [{"name": "web", "ports": [{"containerPort": 80.5}]}]});
        assert_eq!(with(port).as_deref(), Some("int32"));
        let fine = json!({"priority": 1.0, "containers": [{"name": "web",
            "resources": {"limits": {"cpu": 0.5}}, "readinessProbe": {"periodSeconds": 5}}]});
        assert_eq!(with(fine), None);
    }

    /// What the typed conversion takes: `null` anywhere, quantities and int-or-string as numbers
    /// or strings, maps of any key, a Deployment's template, an element whose key has a default.
    #[test]
    fn well_typed_configurations_pass() {
        let api = OpenApi::new();
        let schema = api.schema_for("", "v1", "Pod").unwrap();
        let config = pod(json!({"containers": [
            {"name": "web", "image": null, "resources": {"limits": {"cpu": 1, "memory": "1Gi"}},
             "ports": [{"containerPort": 80}, {"containerPort": 80, "protocol": "UDP"}],
             "readinessProbe": {"httpGet": {"port": "http"}}},
            {"name": "side", "readinessProbe": {"tcpSocket": {"port": 8080}}}],
            "volumes": [{"emptyDir": {}}], "hostNetwork": null, "nodeSelector": {"a": "b"}}));
        assert_eq!(errors(&config, schema), Vec::<String>::new());
        let deployment = api.schema_for("apps", "v1", "Deployment").unwrap();
        let config = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": {"$patch": "delete"}}]}}}});
        assert_eq!(
            errors(&config, deployment),
            vec![
                r#".spec.template.spec.containers[name=$patch="delete"].name: expected string, got &value.valueUnstructured{Value:map[string]interface {}{"$patch":"delete"}}"#
            ]
        );
    }
}
