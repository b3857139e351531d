//! CEL transition rules of custom resources: `x-kubernetes-validations` rules that use `oldSelf`
//! (Kubernetes documentation, "Extend the Kubernetes API with CustomResourceDefinitions",
//! section "Transition rules"; k8s.io/apiextensions-apiserver `pkg/apiserver/schema/cel`
//! `validation.go`). The Gateway API CRDs use one: GatewayClass `spec.controllerName` has
//! `self == oldSelf` ("Value is immutable").
//!
//! What the real server does, and this module with it:
//! - A transition rule is evaluated only where an old value exists to compare with: on update,
//!   at a node whose old value can be correlated with the new one. Object properties correlate
//!   by name, `additionalProperties` values by key, items of `x-kubernetes-list-type: map`
//!   lists by their `x-kubernetes-list-map-keys`; items of other lists (atomic, set) do not
//!   correlate, so rules under them are not evaluated. On create nothing correlates.
//! - `optionalOldSelf: true` rules are evaluated at every node, with `oldSelf` an optional
//!   (`optional.none()` without an old value, else `optional.of(old)`; the rule reads it with
//!   `oldSelf.hasValue()` / `oldSelf.value()`).
//! - Transition rules are never ratcheted: an unchanged value is still checked (they compare
//!   with the old value by design).
//!
//! Failures are reported as other CEL rules are ([`crate::crd_validation::check_rule`]):
//! `spec.controllerName: Invalid value: "string": Value is immutable`. Pure logic: no I/O.

use std::sync::Arc;

use serde_json::Value;

use crate::crd_validation::{check_rule, to_cel, FieldError};

/// The transition-rule errors of writing `obj` over `old` (`None` on create), both in client
/// form, against the CRD version's `openAPIV3Schema` node `schema`. `apiVersion`, `kind` and
/// `metadata` are not walked. Errors come in document order of `obj`.
pub fn validate(obj: &Value, old: Option<&Value>, schema: &Value) -> Vec<FieldError> {
    let mut out = Vec::new();
    rules(obj, old, schema, "", &mut out);
    let (Some(map), Some(props)) = (
        obj.as_object(),
        schema.get("properties").and_then(Value::as_object),
    ) else {
        return out;
    };
    for (k, v) in map {
        if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        if let Some(child) = props.get(k) {
            walk(v, old.and_then(|o| o.get(k)), child, k, &mut out);
        }
    }
    out
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Walks `v` and its correlated old value `old` under `schema`.
fn walk(v: &Value, old: Option<&Value>, schema: &Value, path: &str, out: &mut Vec<FieldError>) {
    if v.is_null() {
        return;
    }
    rules(v, old, schema, path, out);
    match v {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in map {
                let old_child = old.and_then(|o| o.get(k));
                if let Some(s) = props.and_then(|p| p.get(k)) {
                    walk(child, old_child, s, &join(path, k), out);
                } else if let Some(s) = additional {
                    walk(child, old_child, s, &format!("{path}[{k}]"), out);
                }
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = schema.get("items") else {
                return;
            };
            for (i, item) in items.iter().enumerate() {
                let old_item = old.and_then(|o| correlated_item(item, o, schema));
                walk(item, old_item, item_schema, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The item of the old list `old` that `item` correlates with: only in a
/// `x-kubernetes-list-type: map` list, the old item with the same values at every
/// `x-kubernetes-list-map-keys` key.
fn correlated_item<'a>(item: &Value, old: &'a Value, schema: &Value) -> Option<&'a Value> {
    if schema.get("x-kubernetes-list-type").and_then(Value::as_str) != Some("map") {
        return None;
    }
    let keys: Vec<&str> = schema
        .get("x-kubernetes-list-map-keys")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    old.as_array()?
        .iter()
        .find(|o| keys.iter().all(|k| o.get(k) == item.get(k)))
}

/// Evaluates the node's transition rules with `self` = `v` and `oldSelf` = `old`.
fn rules(v: &Value, old: Option<&Value>, schema: &Value, path: &str, out: &mut Vec<FieldError>) {
    let Some(list) = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    else {
        return;
    };
    for rule in list {
        let transition = rule
            .get("rule")
            .and_then(Value::as_str)
            .is_some_and(|r| r.contains("oldSelf"));
        if !transition {
            continue;
        }
        let optional = rule.get("optionalOldSelf").and_then(Value::as_bool) == Some(true);
        let old_self = match (old, optional) {
            (Some(o), false) => to_cel(o),
            (None, false) => continue,
            (o, true) => {
                let opt = match o {
                    Some(o) => cel::objects::OptionalValue::of(to_cel(o)),
                    None => cel::objects::OptionalValue::none(),
                };
                cel::Value::Opaque(Arc::new(opt))
            }
        };
        out.extend(check_rule(rule, v, Some(old_self), path));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The `openAPIV3Schema` of the vendored GatewayClass CRD (Gateway API v1.5.1, v1).
    fn gateway_class_schema() -> Value {
        let yaml =
            include_str!("../../../crds/gateway-api/gateway.networking.k8s.io_gatewayclasses.yaml");
        let crd: Value = serde_yaml::from_str(yaml).expect("the vendored CRD parses");
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
    }

    fn class(controller: &str, description: &str) -> Value {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "gclb"},
            "spec": {"controllerName": controller, "description": description}})
    }

    fn lines(errs: Vec<FieldError>) -> Vec<String> {
        errs.iter().map(FieldError::to_line).collect()
    }

    #[test]
    fn gateway_class_controller_name_is_immutable_on_update() {
        let schema = gateway_class_schema();
        let old = class("gclb-operator.dev/gateway-controller", "a");
        let new = class("example.net/other-controller", "a");
        assert_eq!(
            lines(validate(&new, Some(&old), &schema)),
            vec![r#"spec.controllerName: Invalid value: "string": Value is immutable"#]
        );
        // Other fields may change, and the same value passes.
        let described = class("gclb-operator.dev/gateway-controller", "b");
        assert_eq!(
            lines(validate(&described, Some(&old), &schema)),
            Vec::<String>::new()
        );
        // No old value (create): the rule is not evaluated.
        assert_eq!(lines(validate(&new, None, &schema)), Vec::<String>::new());
    }

    #[test]
    fn only_correlatable_list_items_are_compared() {
        let rule = json!([{"rule": "self == oldSelf", "message": "immutable"}]);
        let item = json!({"type": "object", "properties": {
            "name": {"type": "string"}, "v": {"type": "string", "x-kubernetes-validations": rule}}});
        let schema = |list_type: &str| {
            json!({"type": "object", "properties": {"spec": {
            "type": "object", "properties": {"items": {"type": "array", "items": item,
                "x-kubernetes-list-type": list_type, "x-kubernetes-list-map-keys": ["name"]}}}}})
        };
        let old = json!({"spec": {"items": [{"name": "a", "v": "1"}, {"name": "b", "v": "1"}]}});
        // Reordered, b changed, c new: the map list correlates by name.
        let new = json!({"spec": {"items": [{"name": "b", "v": "2"}, {"name": "a", "v": "1"}, {"name": "c", "v": "9"}]}});
        assert_eq!(
            lines(validate(&new, Some(&old), &schema("map"))),
            vec![r#"spec.items[0].v: Invalid value: "string": immutable"#]
        );
        // An atomic list's items do not correlate: nothing to compare.
        assert_eq!(
            lines(validate(&new, Some(&old), &schema("atomic"))),
            Vec::<String>::new()
        );
    }

    #[test]
    fn map_values_correlate_by_key_and_optional_old_self_sees_creates() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string",
                "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "fixed"}]}},
            "size": {"type": "integer", "x-kubernetes-validations": [{"optionalOldSelf": true,
                "rule": "!oldSelf.hasValue() ? self < 10 : self >= oldSelf.value()",
                "message": "starts below 10, never shrinks"}]}}}}});
        let old = json!({"spec": {"labels": {"a": "1"}, "size": 5}});
        let new = json!({"spec": {"labels": {"a": "2", "b": "3"}, "size": 4}});
        assert_eq!(
            lines(validate(&new, Some(&old), &schema)),
            vec![
                r#"spec.labels[a]: Invalid value: "string": fixed"#,
                r#"spec.size: Invalid value: "integer": starts below 10, never shrinks"#,
            ]
        );
        // On create the optionalOldSelf rule runs with oldSelf = optional.none().
        let created = json!({"spec": {"size": 12}});
        assert_eq!(
            lines(validate(&created, None, &schema)),
            vec![r#"spec.size: Invalid value: "integer": starts below 10, never shrinks"#]
        );
        assert_eq!(
            lines(validate(&json!({"spec": {"size": 3}}), None, &schema)),
            Vec::<String>::new()
        );
    }
}
