//! `field.Error` constructors of k8s.io/apimachinery `pkg/util/validation/field`, producing the
//! same text: `Invalid value: "x": detail` (strings quoted, numbers and booleans bare),
//! `Required value[: detail]`, `Unsupported value: "x": supported values: "a", "b"`,
//! `Duplicate value: "x"`, `Too many: N: must have at most M items`.

use serde_json::Value;

use crate::crd_validation::FieldError;

/// How Go's `%v`/`%q` prints a JSON value in a field error (strings quoted).
pub fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "\"null\"".into(),
        other => other.to_string(),
    }
}

/// `field.Invalid(path, value, detail)`.
pub fn invalid(field: impl Into<String>, value: &Value, detail: impl AsRef<str>) -> FieldError {
    FieldError {
        reason: "FieldValueInvalid",
        field: field.into(),
        message: format!("Invalid value: {}: {}", go_value(value), detail.as_ref()),
    }
}

/// `field.Invalid` whose value Go prints raw (`%#v` of a struct or nil slice).
pub fn invalid_raw(field: impl Into<String>, raw: &str, detail: &str) -> FieldError {
    FieldError {
        reason: "FieldValueInvalid",
        field: field.into(),
        message: format!("Invalid value: {raw}: {detail}"),
    }
}

/// `field.Required(path, detail)`.
pub fn required(field: impl Into<String>, detail: &str) -> FieldError {
    FieldError {
        reason: "FieldValueRequired",
        field: field.into(),
        message: if detail.is_empty() {
            "Required value".into()
        } else {
            format!("Required value: {detail}")
        },
    }
}

/// `field.NotSupported(path, value, supported)` (supported values in the given order).
pub fn not_supported(field: impl Into<String>, value: &Value, supported: &[&str]) -> FieldError {
    let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    FieldError {
        reason: "FieldValueNotSupported",
        field: field.into(),
        message: format!(
            "Unsupported value: {}: supported values: {}",
            go_value(value),
            list.join(", ")
        ),
    }
}

/// `field.Duplicate(path, value)`.
pub fn duplicate(field: impl Into<String>, value: &Value) -> FieldError {
    FieldError {
        reason: "FieldValueDuplicate",
        field: field.into(),
        message: format!("Duplicate value: {}", go_value(value)),
    }
}

/// `field.Forbidden(path, detail)`.
pub fn forbidden(field: impl Into<String>, detail: &str) -> FieldError {
    FieldError {
        reason: "FieldValueForbidden",
        field: field.into(),
        message: format!("Forbidden: {detail}"),
    }
}

/// `field.TooMany(path, actual, max)`.
pub fn too_many(field: impl Into<String>, actual: usize, max: usize) -> FieldError {
    FieldError {
        reason: "FieldValueTooMany",
        field: field.into(),
        message: format!("Too many: {actual}: must have at most {max} items"),
    }
}

/// `IsValidPortNum`.
pub fn port_num(field: impl Into<String>, v: &Value) -> Option<FieldError> {
    let n = v.as_i64().unwrap_or(0);
    (!(1..=65535).contains(&n)).then(|| invalid(field, v, "must be between 1 and 65535, inclusive"))
}

/// `IsValidPortName` (IANA service name): the messages for `name`.
pub fn port_name(name: &str) -> Vec<&'static str> {
    let mut errs = Vec::new();
    if name.len() > 15 {
        errs.push("must be no more than 15 characters");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if name.contains("--") {
        errs.push("must not contain consecutive hyphens");
    }
    if !name.chars().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)");
    }
    if name.starts_with('-') || name.ends_with('-') {
        errs.push("must not begin or end with a hyphen");
    }
    errs
}

/// The string at `path` (`""` when absent or not a string).
pub fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_str().unwrap_or_default()
}

/// The array at `v` (empty when absent).
pub fn arr(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}
