//! `gclb-operator crds` output checked by the rules an apiextensions.k8s.io/v1 API server applies
//! when a CustomResourceDefinition is created (issue 15: "CRDs a real server accepts").
//!
//! The rules, and where the real server has them (kubernetes/kubernetes,
//! staging/src/k8s.io/apiextensions-apiserver):
//! - `pkg/apiserver/schema/validation.go` (`ValidateStructural`): a `type` on every node at the
//!   root, in `properties`, `items` and `additionalProperties` (unless
//!   `x-kubernetes-int-or-string` or `x-kubernetes-preserve-unknown-fields`); `object` at the
//!   root; `items` on every array; no `additionalProperties` at the root; inside
//!   `allOf`/`anyOf`/`oneOf`/`not` no `type`, `default`, `title`, `description`, `nullable`,
//!   `additionalProperties`, `x-kubernetes-*` and no `metadata`; `metadata` at the root restricts
//!   at most `name` and `generateName`; every `pattern` compiles.
//! - `pkg/apis/apiextensions/validation/validation.go`: no `$ref`, `id`, `definitions`,
//!   `dependencies`, `additionalItems`, `patternProperties`; `type` never `null`; `items` a
//!   schema, not an array; `uniqueItems` never true; `properties` and `additionalProperties`
//!   mutually exclusive, and `additionalProperties: false` refused; `x-kubernetes-preserve-unknown-fields`
//!   true or absent; printer column types and JSON paths; one storage version.
//! - `pkg/apiserver/schema/defaulting/validation.go` (`ValidateDefaults`): every `default` is
//!   pruned (no field its schema does not know) and validates against its own node's schema
//!   (type, enum, bounds, lengths, pattern, items, required, CEL rules).
//! - enums: kube-openapi's enum validator never matches an untyped (`null`) entry, so a `null`
//!   in an `enum` is dead weight on the server and `kubectl` validating client-side against an
//!   older server refuses the CRD: refused here unless the node is `nullable` (and the generated
//!   CRDs carry none at all, see `crd::without_null_enums`).
//!
//! Default values are checked with the local API's value validator
//! (`fake_kube_apiserver::crd_validation`), the same code that validates custom resources there.

use std::process::Command;

use serde_json::{json, Value};

/// One rule broken: where (`spec.versions[0].schema.openAPIV3Schema.properties...`) and what.
#[derive(Debug)]
struct Violation {
    path: String,
    message: String,
}

/// Every rule broken by one CRD document.
fn crd_violations(crd: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    let versions = crd["spec"]["versions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let storage = versions
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .count();
    if storage != 1 {
        out.push(Violation {
            path: "spec.versions".into(),
            message: format!("must have exactly one storage version, has {storage}"),
        });
    }
    for (i, version) in versions.iter().enumerate() {
        let base = format!("spec.versions[{i}]");
        for (j, col) in version["additionalPrinterColumns"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let ty = col["type"].as_str().unwrap_or_default();
            if !["integer", "number", "string", "boolean", "date"].contains(&ty) {
                out.push(Violation {
                    path: format!("{base}.additionalPrinterColumns[{j}].type"),
                    message: format!("unsupported printer column type {ty:?}"),
                });
            }
            if !col["jsonPath"]
                .as_str()
                .unwrap_or_default()
                .starts_with('.')
            {
                out.push(Violation {
                    path: format!("{base}.additionalPrinterColumns[{j}].jsonPath"),
                    message: "must be a simple json path starting with .".into(),
                });
            }
        }
        let schema = &version["schema"]["openAPIV3Schema"];
        if schema.is_null() {
            out.push(Violation {
                path: format!("{base}.schema.openAPIV3Schema"),
                message: "Required value: schemas are required in apiextensions.k8s.io/v1".into(),
            });
            continue;
        }
        schema_violations(
            schema,
            Level::Root,
            &format!("{base}.schema.openAPIV3Schema"),
            &mut out,
        );
    }
    out
}

#[derive(Clone, Copy, PartialEq)]
enum Level {
    Root,
    Item,
    Field,
}

fn is_true(node: &Value, key: &str) -> bool {
    node.get(key).and_then(Value::as_bool) == Some(true)
}

/// Structural-schema, core schema, default and enum rules for one node and everything below it.
fn schema_violations(node: &Value, level: Level, path: &str, out: &mut Vec<Violation>) {
    let mut bad = |what: &str, message: String| {
        out.push(Violation {
            path: if what.is_empty() {
                path.to_string()
            } else {
                format!("{path}.{what}")
            },
            message,
        })
    };
    for key in [
        "$ref",
        "id",
        "definitions",
        "dependencies",
        "additionalItems",
        "patternProperties",
    ] {
        if node.get(key).is_some() {
            bad(key, format!("{key} is not supported"));
        }
    }
    let ty = node.get("type").and_then(Value::as_str).unwrap_or_default();
    if ty == "null" {
        bad("type", "type cannot be set to null".into());
    }
    if ty.is_empty()
        && !is_true(node, "x-kubernetes-int-or-string")
        && !is_true(node, "x-kubernetes-preserve-unknown-fields")
    {
        let message = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        bad("type", format!("Required value: {message}"));
    }
    if level == Level::Root && !ty.is_empty() && ty != "object" {
        bad("type", "must be object at the root".into());
    }
    if is_true(node, "uniqueItems") {
        bad(
            "uniqueItems",
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
                .into(),
        );
    }
    if node.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(false)) {
        bad(
            "x-kubernetes-preserve-unknown-fields",
            "must be true or undefined".into(),
        );
    }
    if let Some(pattern) = node.get("pattern").and_then(Value::as_str) {
        if let Err(e) = regex::Regex::new(pattern) {
            bad(
                "pattern",
                format!("must be a valid regular expression, but isn't: {e}"),
            );
        }
    }
    // Enums: values of the node's type; `null` only where the node is nullable.
    if let Some(values) = node.get("enum").and_then(Value::as_array) {
        for v in values {
            if v.is_null() {
                if !is_true(node, "nullable") {
                    bad(
                        "enum",
                        "null listed in the enum of a field that is not nullable".into(),
                    );
                }
            } else if !ty.is_empty() && !has_type(v, ty) {
                bad("enum", format!("enum value {v} is not of type {ty}"));
            }
        }
    }
    if let Some(default) = node.get("default") {
        default_violations(default, node, path, out);
    }
    // Items.
    match node.get("items") {
        Some(Value::Array(_)) => out.push(Violation {
            path: format!("{path}.items"),
            message: "items must be a schema object and not an array".into(),
        }),
        Some(items) => {
            schema_violations(items, Level::Item, &format!("{path}.items"), out);
        }
        None if ty == "array" => out.push(Violation {
            path: format!("{path}.items"),
            message: "Required value: must be specified".into(),
        }),
        None => {}
    }
    // Properties and additionalProperties.
    let props = node.get("properties").and_then(Value::as_object);
    if let Some(extra) = node.get("additionalProperties") {
        let mut here = |message: &str| {
            out.push(Violation {
                path: format!("{path}.additionalProperties"),
                message: message.into(),
            })
        };
        if level == Level::Root {
            here("must not be used at the root");
        }
        if extra == &json!(false) {
            here("additionalProperties cannot be set to false");
        }
        if props.is_some_and(|p| !p.is_empty()) {
            here("additionalProperties and properties are mutual exclusive");
        }
        if extra.is_object() {
            schema_violations(
                extra,
                Level::Field,
                &format!("{path}.additionalProperties"),
                out,
            );
        }
    }
    for (name, child) in props.into_iter().flatten() {
        let child_path = format!("{path}.properties[{name}]");
        if name == "metadata" && level == Level::Root {
            let allowed = child
                .get("properties")
                .and_then(Value::as_object)
                .is_none_or(|p| p.keys().all(|k| k == "name" || k == "generateName"));
            let only_shape = child.as_object().is_some_and(|m| {
                m.keys()
                    .all(|k| matches!(k.as_str(), "type" | "properties" | "description"))
            });
            if !allowed || !only_shape {
                out.push(Violation {
                    path: child_path.clone(),
                    message: "must not specify anything other than name and generateName".into(),
                });
            }
            if child.get("type").is_some_and(|t| t != "object") {
                out.push(Violation {
                    path: format!("{child_path}.type"),
                    message: "must be object".into(),
                });
            }
            continue;
        }
        schema_violations(child, Level::Field, &child_path, out);
    }
    // Logical junctors carry value validation only.
    for junctor in ["allOf", "anyOf", "oneOf"] {
        for (i, nested) in node
            .get(junctor)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            nested_violations(nested, &format!("{path}.{junctor}[{i}]"), out);
        }
    }
    if let Some(not) = node.get("not") {
        nested_violations(not, &format!("{path}.not"), out);
    }
}

/// What a node under `allOf`/`anyOf`/`oneOf`/`not` must not carry to be structural.
fn nested_violations(node: &Value, path: &str, out: &mut Vec<Violation>) {
    for key in [
        "type",
        "default",
        "title",
        "description",
        "additionalProperties",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-list-type",
        "x-kubernetes-map-type",
        "x-kubernetes-validations",
    ] {
        if node.get(key).is_some() {
            out.push(Violation {
                path: format!("{path}.{key}"),
                message: "must be empty to be structural".into(),
            });
        }
    }
    if is_true(node, "nullable") {
        out.push(Violation {
            path: format!("{path}.nullable"),
            message: "must be false to be structural".into(),
        });
    }
    if node
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| p.contains_key("metadata"))
    {
        out.push(Violation {
            path: format!("{path}.properties[metadata]"),
            message: "must not be specified in a nested context".into(),
        });
    }
    for (name, child) in node
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        nested_violations(child, &format!("{path}.properties[{name}]"), out);
    }
    if let Some(items) = node.get("items") {
        nested_violations(items, &format!("{path}.items"), out);
    }
}

fn has_type(v: &Value, ty: &str) -> bool {
    match ty {
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        _ => true,
    }
}

/// `ValidateDefaults`: the default is pruned and satisfies its own node's schema.
fn default_violations(default: &Value, node: &Value, path: &str, out: &mut Vec<Violation>) {
    if let Some(unknown) = unknown_field(default, node, "") {
        out.push(Violation {
            path: format!("{path}.default"),
            message: format!("must not have unknown fields ({unknown})"),
        });
    }
    // The local API validates a custom resource's top-level fields against the root's
    // `properties`: wrap the default as the only field of an object.
    let wrapped_schema = json!({"type": "object", "properties": {"default": node}});
    for e in fake_kube_apiserver::crd_validation::validate(
        &json!({ "default": default }),
        &wrapped_schema,
    ) {
        out.push(Violation {
            path: format!("{path}.{}", e.field),
            message: e.message,
        });
    }
}

/// The first field of `v` its schema would prune, as a dotted path.
fn unknown_field(v: &Value, schema: &Value, at: &str) -> Option<String> {
    if is_true(schema, "x-kubernetes-preserve-unknown-fields") {
        return None;
    }
    match v {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in map {
                let here = format!("{at}.{k}");
                match (props.and_then(|p| p.get(k)), extra) {
                    (Some(s), _) | (None, Some(s)) => {
                        if let Some(u) = unknown_field(child, s, &here) {
                            return Some(u);
                        }
                    }
                    (None, None) => return Some(here),
                }
            }
            None
        }
        Value::Array(items) => schema.get("items").and_then(|s| {
            items
                .iter()
                .enumerate()
                .find_map(|(i, item)| unknown_field(item, s, &format!("{at}[{i}]")))
        }),
        _ => None,
    }
}

/// The CRDs `gclb-operator crds` prints (the same documents `make crds` writes to crds/).
fn printed_crds() -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_gclb-operator"))
        .arg("crds")
        .output()
        .expect("running gclb-operator crds");
    assert!(
        out.status.success(),
        "gclb-operator crds failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8 YAML");
    let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("YAML document"))
        .filter(|doc: &Value| !doc.is_null())
        .collect();
    assert_eq!(docs.len(), 4, "four CRDs expected:\n{text}");
    docs
}

fn show(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| format!("  {}: {}", v.path, v.message))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn printed_crds_pass_every_rule_of_an_apiextensions_v1_server() {
    for crd in printed_crds() {
        let name = crd["metadata"]["name"].as_str().unwrap_or("?").to_string();
        assert_eq!(crd["apiVersion"], "apiextensions.k8s.io/v1", "{name}");
        let violations = crd_violations(&crd);
        assert!(
            violations.is_empty(),
            "CRD {name} would be refused by a real API server:\n{}",
            show(&violations)
        );
    }
}

#[test]
fn printed_crds_list_no_null_in_any_enum() {
    // Stricter than the server (which only makes such entries useless): kubectl's client-side
    // validation against older servers refuses the whole CRD.
    fn nulls(v: &Value, at: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if m.get("enum")
                    .and_then(Value::as_array)
                    .is_some_and(|e| e.iter().any(Value::is_null))
                {
                    out.push(at.to_string());
                }
                for (k, child) in m {
                    nulls(child, &format!("{at}.{k}"), out);
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    nulls(item, &format!("{at}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
    for crd in printed_crds() {
        let mut found = Vec::new();
        nulls(&crd, "", &mut found);
        assert!(found.is_empty(), "null in enums at {found:?}");
    }
}

/// The rules are not vacuous: the two faults the v0.1.0 BackendConfig CRD had (issue 15) and
/// the structural faults are each reported.
#[test]
fn the_rules_refuse_what_a_real_server_refuses() {
    let crd = |schema: Value| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "spec": {"versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": schema}}]}})
    };
    let spec = |props: Value| json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props}}});
    let cases = [
        (
            // NegativeCachingPolicy.code as v0.1.0 generated it.
            spec(
                json!({"code": {"type": "integer", "default": 0, "minimum": 300.0, "maximum": 599.0}}),
            ),
            "should be greater than or equal to 300",
        ),
        (
            spec(json!({"mode": {"type": "string", "enum": ["A", null]}})),
            "null listed in the enum",
        ),
        (
            spec(json!({"mode": {"type": "string", "enum": ["A", "B"], "default": "C"}})),
            "Unsupported value",
        ),
        (
            spec(
                json!({"o": {"type": "object", "properties": {"a": {"type": "string"}}, "default": {"b": "x"}}}),
            ),
            "must not have unknown fields",
        ),
        (
            spec(json!({"untyped": {"description": "x"}})),
            "must not be empty for specified object fields",
        ),
        (
            spec(json!({"list": {"type": "array"}})),
            "must be specified",
        ),
        (
            spec(json!({"m": {"type": "object", "additionalProperties": false}})),
            "cannot be set to false",
        ),
        (
            spec(
                json!({"x": {"type": "string", "anyOf": [{"type": "string", "description": "d"}]}}),
            ),
            "must be empty to be structural",
        ),
        (
            spec(json!({"x": {"type": "integer", "uniqueItems": true}})),
            "quadratic",
        ),
        (
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}}),
            "name and generateName",
        ),
        (json!({"type": "string"}), "must be object at the root"),
        (
            spec(
                json!({"h": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.a <= self.b", "message": "a must not exceed b"}],
                "default": {"a": 2, "b": 1}}}),
            ),
            "a must not exceed b",
        ),
    ];
    for (schema, expected) in cases {
        let violations = crd_violations(&crd(schema.clone()));
        assert!(
            violations.iter().any(|v| v.message.contains(expected)),
            "{schema} should be refused with {expected:?}, got:\n{}",
            show(&violations)
        );
    }
    // And a correct schema passes.
    let good = spec(
        json!({"code": {"type": "integer", "minimum": 300.0, "maximum": 599.0},
        "ttl": {"type": "integer", "default": 0, "minimum": 0.0},
        "mode": {"type": "string", "enum": ["A", "B"], "default": "A"}}),
    );
    assert!(crd_violations(&crd(good)).is_empty());
}
