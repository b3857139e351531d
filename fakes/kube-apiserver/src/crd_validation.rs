//! Value validation of custom resources against their CRD version's `openAPIV3Schema`, as the
//! real apiserver does on create, update and patch (k8s.io/apiextensions-apiserver's schema
//! validation + `x-kubernetes-validations` CEL rules), with its wording per error type:
//!
//! - `type` / `nullable`: `Invalid value: "string": spec.port in body must be of type integer: "string"`
//! - `enum`: `Unsupported value: "STICKY": supported values: "NONE", "CLIENT_IP"`
//! - `pattern`: `Invalid value: "*.x": spec.domains[0] in body should match '^...$'`
//! - `minimum`/`maximum` (exclusive too): `... in body should be less than or equal to 86400`
//! - `minLength`: `... in body should be at least 1 chars long`; `maxLength`:
//!   `Too long: may not be more than 63 bytes`
//! - `minItems`: `... in body should have at least 1 items`; `maxItems`:
//!   `Too many: 101: must have at most 100 items`
//! - `required`: `Required value`
//! - CEL rules: `Invalid value: "object": <message>` (or `failed rule: <rule>`) at the rule's
//!   node (plus its `fieldPath`). Transition rules (those using `oldSelf`) are evaluated on
//!   update by [`crate::crd_transition_rules`].
//!
//! `x-kubernetes-int-or-string` accepts an integer or a string; `x-kubernetes-preserve-unknown-fields`
//! and `additionalProperties` only affect which fields are walked. Pure logic: no I/O.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

/// One field error, the shape of a `Status` `details.causes[]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// `FieldValueInvalid`, `FieldValueNotSupported`, `FieldValueRequired`,
    /// `FieldValueTypeInvalid`, `FieldValueTooLong`, `FieldValueTooMany`.
    pub reason: &'static str,
    /// JSON path, e.g. `spec.domains[0]`.
    pub field: String,
    /// The message without the field, e.g. `Required value`.
    pub message: String,
}

impl FieldError {
    /// `field: message`, as the real server joins them in `Status.message`.
    pub fn to_line(&self) -> String {
        format!("{}: {}", self.field, self.message)
    }
}

/// Validates a custom resource (client form) against `schema` (the `openAPIV3Schema` node).
/// Only `spec`, `status` and other non-metadata fields are checked; `apiVersion`, `kind` and
/// `metadata` are the server's business. Returns every error found, in document order.
pub fn validate(obj: &Value, schema: &Value) -> Vec<FieldError> {
    let mut out = Vec::new();
    let Some(map) = obj.as_object() else {
        return out;
    };
    let props = schema.get("properties").and_then(Value::as_object);
    for (k, v) in map {
        if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        if let Some(child) = props.and_then(|p| p.get(k)) {
            walk(v, child, k, &mut out);
        }
    }
    required(map, schema, "", &mut out);
    rules(obj, schema, "", &mut out);
    out
}

/// Validates `v` against `schema` with errors under `path` (the walk [`validate`] does per field).
pub fn validate_at(v: &Value, schema: &Value, path: &str) -> Vec<FieldError> {
    let mut out = Vec::new();
    walk(v, schema, path, &mut out);
    out
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The value as the real server quotes it in `Invalid value: ...` (Go's `%#v` subset).
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "\"null\"".into(),
        Value::Array(_) => "\"array\"".into(),
        Value::Object(_) => "\"object\"".into(),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn invalid(path: &str, v: &Value, detail: String) -> FieldError {
    FieldError {
        reason: "FieldValueInvalid",
        field: path.to_string(),
        message: format!("Invalid value: {}: {detail}", shown(v)),
    }
}

fn type_matches(v: &Value, ty: &str) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        _ => true,
    }
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

fn walk(v: &Value, schema: &Value, path: &str, out: &mut Vec<FieldError>) {
    if v.is_null() && flag(schema, "nullable") {
        return;
    }
    if flag(schema, "x-kubernetes-int-or-string") {
        if !(v.is_string() || v.is_i64() || v.is_u64()) {
            out.push(type_error(v, path, "integer,string"));
        }
    } else if let Some(ty) = schema.get("type").and_then(Value::as_str) {
        if !type_matches(v, ty) {
            out.push(type_error(v, path, ty));
            return;
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        if !allowed.contains(v) {
            let list: Vec<String> = allowed.iter().map(shown).collect();
            out.push(FieldError {
                reason: "FieldValueNotSupported",
                field: path.to_string(),
                message: format!(
                    "Unsupported value: {}: supported values: {}",
                    shown(v),
                    list.join(", ")
                ),
            });
        }
    }
    match v {
        Value::String(s) => string_checks(v, s, schema, path, out),
        Value::Number(n) => {
            if let Some(x) = n.as_f64() {
                number_checks(v, x, schema, path, out);
            }
        }
        Value::Array(items) => {
            let len = items.len() as u64;
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
                if len > max {
                    out.push(FieldError {
                        reason: "FieldValueTooMany",
                        field: path.to_string(),
                        message: format!("Too many: {len}: must have at most {max} items"),
                    });
                }
            }
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
                if len < min {
                    out.push(invalid(
                        path,
                        v,
                        format!("{path} in body should have at least {min} items"),
                    ));
                }
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk(item, item_schema, &format!("{path}[{i}]"), out);
                }
            }
        }
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, child) in map {
                if let Some(s) = props.and_then(|p| p.get(k)) {
                    walk(child, s, &join(path, k), out);
                } else if let Some(s) = additional {
                    walk(child, s, &format!("{path}[{k}]"), out);
                }
            }
            required(map, schema, path, out);
        }
        _ => {}
    }
    rules(v, schema, path, out);
}

fn type_error(v: &Value, path: &str, ty: &str) -> FieldError {
    let what = shown(v);
    FieldError {
        reason: "FieldValueTypeInvalid",
        field: path.to_string(),
        message: format!(
            "Invalid value: \"{}\": {path} in body must be of type {ty}: {what}",
            type_name(v)
        ),
    }
}

fn required(
    map: &serde_json::Map<String, Value>,
    schema: &Value,
    path: &str,
    out: &mut Vec<FieldError>,
) {
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !map.contains_key(name) {
            out.push(FieldError {
                reason: "FieldValueRequired",
                field: join(path, name),
                message: "Required value".into(),
            });
        }
    }
}

fn string_checks(v: &Value, s: &str, schema: &Value, path: &str, out: &mut Vec<FieldError>) {
    let chars = s.chars().count() as u64;
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
        if chars > max {
            out.push(FieldError {
                reason: "FieldValueTooLong",
                field: path.to_string(),
                message: format!("Too long: may not be more than {max} bytes"),
            });
        }
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
        if chars < min {
            out.push(invalid(
                path,
                v,
                format!("{path} in body should be at least {min} chars long"),
            ));
        }
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        // An unparsable pattern cannot have been accepted by a real server; skip it here.
        if let Ok(re) = regex::Regex::new(pattern) {
            if !re.is_match(s) {
                out.push(invalid(
                    path,
                    v,
                    format!("{path} in body should match '{pattern}'"),
                ));
            }
        }
    }
}

fn number_checks(v: &Value, x: f64, schema: &Value, path: &str, out: &mut Vec<FieldError>) {
    let bound = |k: &str| schema.get(k).and_then(Value::as_f64);
    // Go prints float64 bounds without a fraction when integral (`86400`, not `86400.0`).
    let shown_bound = |k: &str| bound(k).map(|b| b.to_string()).unwrap_or_default();
    if let Some(max) = bound("maximum") {
        if flag(schema, "exclusiveMaximum") && x >= max {
            let m = shown_bound("maximum");
            out.push(invalid(
                path,
                v,
                format!("{path} in body should be less than {m}"),
            ));
        } else if x > max {
            let m = shown_bound("maximum");
            out.push(invalid(
                path,
                v,
                format!("{path} in body should be less than or equal to {m}"),
            ));
        }
    }
    if let Some(min) = bound("minimum") {
        if flag(schema, "exclusiveMinimum") && x <= min {
            let m = shown_bound("minimum");
            out.push(invalid(
                path,
                v,
                format!("{path} in body should be greater than {m}"),
            ));
        } else if x < min {
            let m = shown_bound("minimum");
            out.push(invalid(
                path,
                v,
                format!("{path} in body should be greater than or equal to {m}"),
            ));
        }
    }
}

/// Applies the schema's `default`s to `obj` in place, as the real server's structural defaulting
/// does: a missing property (or a `null` one whose schema is not `nullable`) with a `default`
/// gets a copy of it (a disallowed `null` without a default is pruned); defaults apply inside objects that exist (or were just defaulted), in
/// array items and `additionalProperties` values. `apiVersion`, `kind` and `metadata` are left
/// alone.
pub fn apply_defaults(obj: &mut Value, schema: &Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (k, child) in props {
        if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        default_property(map, k, child);
    }
}

fn default_property(map: &mut serde_json::Map<String, Value>, key: &str, schema: &Value) {
    let missing = match map.get(key) {
        None => true,
        Some(Value::Null) => !flag(schema, "nullable"),
        Some(_) => false,
    };
    if missing {
        match schema.get("default") {
            Some(d) => {
                map.insert(key.to_string(), d.clone());
            }
            // `PruneNonNullableNullsWithoutDefaults`: a null the schema does not allow goes.
            None => {
                map.remove(key);
            }
        }
    }
    if let Some(v) = map.get_mut(key) {
        default_value(v, schema);
    }
}

fn default_value(v: &mut Value, schema: &Value) {
    match v {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, child) in props {
                    default_property(map, k, child);
                }
            } else if let Some(additional) =
                schema.get("additionalProperties").filter(|a| a.is_object())
            {
                for child in map.values_mut() {
                    default_value(child, additional);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    default_value(item, item_schema);
                }
            }
        }
        _ => {}
    }
}

/// Converts JSON to a CEL value the way Kubernetes' CEL sees objects: integers are `int`,
/// objects are maps with string keys.
pub(crate) fn to_cel(v: &Value) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => cel::Value::Int(i),
            None => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(a) => cel::Value::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(m) => {
            let map: HashMap<String, cel::Value> =
                m.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            cel::Value::from(map)
        }
    }
}

/// The CEL environment rules compile and run in: the standard library plus the strings
/// extension (`split`, `join`, `lowerAscii`, `indexOf`, `replace`, `substring`, `trim` ...), which
/// Kubernetes enables for `x-kubernetes-validations` (k8s.io/apiserver `cel/library`: `ext.Strings`;
/// the Gateway API CRDs use `key.split("/")` in their label and annotation rules). A function
/// neither provides fails the rule ("no such overload"), so the object is refused, never passed.
fn cel_env() -> Arc<cel::Env> {
    static ENV: std::sync::OnceLock<Arc<cel::Env>> = std::sync::OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = cel::Env::stdlib();
        if let Err(e) = env.add_extension(cel::extensions::strings) {
            tracing::error!(error = ?e, "registering the CEL strings extension");
        }
        Arc::new(env)
    })
    .clone()
}

/// Functions of Kubernetes' CEL libraries that CRDs use and the cel crate lacks: `isIP(string)`
/// (k8s.io/apiserver `library/ip.go`: a valid IPv4 or IPv6 address, without a zone and not an
/// IPv4-mapped IPv6 address; the Gateway API's TLSRoute `spec.hostnames` rule).
fn kubernetes_library(ctx: &mut cel::Context) {
    let is_ip = |s: Arc<String>| match s.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(v6)) => v6.to_ipv4_mapped().is_none(),
        Ok(_) => true,
        Err(_) => false,
    };
    if let Err(e) = ctx.add_function("isIP", is_ip) {
        tracing::error!(error = ?e, "registering the CEL function isIP");
    }
}

/// Evaluates the node's `x-kubernetes-validations` with `self` bound to `v`. Transition rules
/// (those using `oldSelf`) are left to [`crate::crd_transition_rules`], which knows the old value.
fn rules(v: &Value, schema: &Value, path: &str, out: &mut Vec<FieldError>) {
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
            out.extend(check_rule(rule, v, None, path));
        }
    }
}

/// Evaluates one `x-kubernetes-validations` entry (`rule`, `message`, `fieldPath`, `reason`) at
/// the node `path` with `self` bound to `v` and, when given, `oldSelf` bound to `old_self`.
/// Returns the field error the real server reports when the rule is false, does not evaluate
/// to a bool, fails, or does not compile; `None` when it holds (or has no `rule`).
pub(crate) fn check_rule(
    rule: &Value,
    v: &Value,
    old_self: Option<cel::Value>,
    path: &str,
) -> Option<FieldError> {
    let source = rule.get("rule").and_then(Value::as_str)?;
    let env = cel_env();
    let message = match env.compile(source) {
        Ok(program) => {
            let mut ctx = cel::Context::with_env(env);
            kubernetes_library(&mut ctx);
            ctx.add_variable_from_value("self", to_cel(v));
            if let Some(old) = old_self {
                ctx.add_variable_from_value("oldSelf", old);
            }
            match program.execute(&ctx) {
                Ok(cel::Value::Bool(true)) => return None,
                Ok(cel::Value::Bool(false)) => rule
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("failed rule: {source}")),
                Ok(other) => {
                    format!("rule did not evaluate to a bool ({other:?}) evaluating rule: {source}")
                }
                Err(e) => format!("{e} evaluating rule: {source}"),
            }
        }
        Err(e) => format!("compilation failed: {e} in rule: {source}"),
    };
    let field = match rule.get("fieldPath").and_then(Value::as_str) {
        Some(fp) => format!("{path}{fp}"),
        None => path.to_string(),
    };
    let reason = match rule.get("reason").and_then(Value::as_str) {
        Some("FieldValueForbidden") => "FieldValueForbidden",
        Some("FieldValueRequired") => "FieldValueRequired",
        Some("FieldValueDuplicate") => "FieldValueDuplicate",
        _ => "FieldValueInvalid",
    };
    Some(FieldError {
        reason,
        field,
        message: format!("Invalid value: {}: {message}", shown_type(v)),
    })
}

/// CEL rule failures quote the value's type, as the real server does: `"object"`, `"string"`.
fn shown_type(v: &Value) -> String {
    format!("\"{}\"", type_name(v))
}

#[cfg(test)]
mod tests;
