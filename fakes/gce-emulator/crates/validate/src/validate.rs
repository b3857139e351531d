//! Field validation shared by every resource: names, enums, integer ranges, labels, CIDRs.
//!
//! Each helper takes the JSON object being validated, the dotted path of that object in the
//! request (`resource`, `resource.httpHealthCheck`) and a key, so every error names the exact
//! field, in the form the Compute API uses (`resource.httpHealthCheck.port`).

use std::net::Ipv4Addr;
use std::sync::LazyLock;

use ipnet::Ipv4Net;
use regex::Regex;
use serde_json::{Map, Value};

use crate::errors::ApiError;

/// A JSON object (request or stored resource).
pub type Obj = Map<String, Value>;

/// The resource name rule of the Compute API (RFC 1035 label, 1-63 characters).
pub const NAME_REGEX: &str = "[a-z]([-a-z0-9]{0,61}[a-z0-9])?";

static NAME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(&format!("^{NAME_REGEX}$")).expect("name regex"));
static LABEL_KEY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[\p{Ll}\p{Lo}][\p{Ll}\p{Lo}\p{N}_-]{0,62}$").expect("label key regex")
});
static LABEL_VALUE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[\p{Ll}\p{Lo}\p{N}_-]{0,63}$").expect("label value regex"));

/// `prefix.key`, the field path used in messages.
pub fn path(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Checks a resource name against [`NAME_REGEX`]; `field` is the request field (`resource.name`).
pub fn check_name(field: &str, name: &str) -> Result<(), ApiError> {
    if NAME.is_match(name) {
        Ok(())
    } else {
        Err(ApiError::invalid_value(
            field,
            name,
            &format!("Must be a match of regex '(?:{NAME_REGEX})'"),
        ))
    }
}

/// Renders a JSON value for an error message (strings without quotes).
pub fn show(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The string at `key`, `None` if absent or null; 400 if it is not a string.
pub fn opt_str<'a>(obj: &'a Obj, prefix: &str, key: &str) -> Result<Option<&'a str>, ApiError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ApiError::invalid_value(
            &path(prefix, key),
            &show(other),
            "Expected a string.",
        )),
    }
}

/// Like [`opt_str`] but the field must be present and non-empty.
pub fn req_str<'a>(obj: &'a Obj, prefix: &str, key: &str) -> Result<&'a str, ApiError> {
    match opt_str(obj, prefix, key)? {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(ApiError::required(&path(prefix, key))),
    }
}

/// Validates an enum field against `allowed`, filling `default` when absent.
pub fn enum_field(
    obj: &mut Obj,
    prefix: &str,
    key: &str,
    allowed: &[&str],
    default: Option<&str>,
) -> Result<(), ApiError> {
    match opt_str(obj, prefix, key)? {
        Some(v) if allowed.contains(&v) => Ok(()),
        Some(v) => Err(ApiError::bad_enum(&path(prefix, key), v, allowed)),
        None => {
            if let Some(d) = default {
                obj.insert(key.to_string(), Value::String(d.to_string()));
            }
            Ok(())
        }
    }
}

/// Validates an integer field (a JSON number or, as int64 fields are sent, a decimal string)
/// in `min..=max`, storing it as a number and filling `default` when absent.
pub fn int_field(
    obj: &mut Obj,
    prefix: &str,
    key: &str,
    min: i64,
    max: i64,
    default: Option<i64>,
) -> Result<Option<i64>, ApiError> {
    let field = path(prefix, key);
    let n = match obj.get(key) {
        None | Some(Value::Null) => match default {
            Some(d) => d,
            None => {
                obj.remove(key);
                return Ok(None);
            }
        },
        Some(Value::Number(n)) => n.as_i64().ok_or_else(|| {
            ApiError::invalid_value(&field, &n.to_string(), "Expected an integer.")
        })?,
        Some(Value::String(s)) => s
            .parse::<i64>()
            .map_err(|_| ApiError::invalid_value(&field, s, "Expected an integer."))?,
        Some(other) => {
            return Err(ApiError::invalid_value(
                &field,
                &show(other),
                "Expected an integer.",
            ))
        }
    };
    if n < min || n > max {
        return Err(ApiError::invalid_value(
            &field,
            &n.to_string(),
            &format!("Must be between {min} and {max}."),
        ));
    }
    obj.insert(key.to_string(), Value::from(n));
    Ok(Some(n))
}

/// Validates a number field in `min..=max` (floats such as `capacityScaler`), filling `default`.
pub fn float_field(
    obj: &mut Obj,
    prefix: &str,
    key: &str,
    min: f64,
    max: f64,
    default: Option<f64>,
) -> Result<(), ApiError> {
    let field = path(prefix, key);
    let n = match obj.get(key) {
        None | Some(Value::Null) => match default {
            Some(d) => d,
            None => return Ok(()),
        },
        Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
        Some(other) => {
            return Err(ApiError::invalid_value(
                &field,
                &show(other),
                "Expected a number.",
            ))
        }
    };
    if !(min..=max).contains(&n) {
        return Err(ApiError::invalid_value(
            &field,
            &n.to_string(),
            &format!("Must be between {min} and {max}."),
        ));
    }
    obj.insert(key.to_string(), Value::from(n));
    Ok(())
}

/// Validates a boolean field, filling `default` when absent.
pub fn bool_field(
    obj: &mut Obj,
    prefix: &str,
    key: &str,
    default: Option<bool>,
) -> Result<(), ApiError> {
    match obj.get(key) {
        None | Some(Value::Null) => {
            if let Some(d) = default {
                obj.insert(key.to_string(), Value::Bool(d));
            }
            Ok(())
        }
        Some(Value::Bool(_)) => Ok(()),
        Some(other) => Err(ApiError::invalid_value(
            &path(prefix, key),
            &show(other),
            "Expected a boolean.",
        )),
    }
}

/// The object at `key` (created empty when absent and `create`), for nested validation.
pub fn object_mut<'a>(
    obj: &'a mut Obj,
    prefix: &str,
    key: &str,
    create: bool,
) -> Result<Option<&'a mut Obj>, ApiError> {
    if create && matches!(obj.get(key), None | Some(Value::Null)) {
        obj.insert(key.to_string(), Value::Object(Obj::new()));
    }
    match obj.get_mut(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(o)) => Ok(Some(o)),
        Some(other) => Err(ApiError::invalid_value(
            &path(prefix, key),
            &show(other),
            "Expected an object.",
        )),
    }
}

/// The array at `key` (empty when absent); 400 if it is not an array.
pub fn array_mut<'a>(
    obj: &'a mut Obj,
    prefix: &str,
    key: &str,
) -> Result<Option<&'a mut Vec<Value>>, ApiError> {
    match obj.get_mut(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => Ok(Some(a)),
        Some(other) => Err(ApiError::invalid_value(
            &path(prefix, key),
            &show(other),
            "Expected a list.",
        )),
    }
}

/// The list item `v` at `field` (`resource.pathMatchers[0]`) as an object, for nested
/// validation; 400 `invalid` naming `field` ("Expected an object.") when it is not one.
pub fn object_item_mut<'a>(v: &'a mut Value, field: &str) -> Result<&'a mut Obj, ApiError> {
    match v {
        Value::Object(o) => Ok(o),
        other => Err(ApiError::invalid_value(
            field,
            &show(other),
            "Expected an object.",
        )),
    }
}

/// The strings of the array at `key` (empty when absent).
pub fn str_list(obj: &Obj, prefix: &str, key: &str) -> Result<Vec<String>, ApiError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(ApiError::invalid_value(
                    &format!("{}[{i}]", path(prefix, key)),
                    &show(other),
                    "Expected a string.",
                )),
            })
            .collect(),
        Some(other) => Err(ApiError::invalid_value(
            &path(prefix, key),
            &show(other),
            "Expected a list.",
        )),
    }
}

/// Validates `labels` (keys and values per the Compute label rules, at most 64).
pub fn labels(obj: &Obj, prefix: &str) -> Result<(), ApiError> {
    let field = path(prefix, "labels");
    match obj.get("labels") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Object(m)) => {
            if m.len() > 64 {
                return Err(ApiError::invalid_value(
                    &field,
                    &m.len().to_string(),
                    "At most 64 labels are allowed.",
                ));
            }
            for (k, v) in m {
                if !LABEL_KEY.is_match(k) {
                    return Err(ApiError::invalid_value(&format!("{field}.{k}"), k, "Label keys must start with a lowercase letter and contain only lowercase letters, digits, '_' and '-' (at most 63)."));
                }
                match v {
                    Value::String(s) if LABEL_VALUE.is_match(s) => {}
                    other => {
                        return Err(ApiError::invalid_value(&format!("{field}.{k}"), &show(other), "Label values contain only lowercase letters, digits, '_' and '-' (at most 63)."))
                    }
                }
            }
            Ok(())
        }
        Some(other) => Err(ApiError::invalid_value(
            &field,
            &show(other),
            "Expected a map of strings.",
        )),
    }
}

/// Parses an IPv4 CIDR (`10.0.0.0/8`, host bits allowed as the API allows them) or a bare
/// address (a /32): `(address, prefix length)`.
pub fn parse_cidr(s: &str) -> Option<(Ipv4Addr, u8)> {
    match s.parse::<Ipv4Net>() {
        Ok(net) => Some((net.addr(), net.prefix_len())),
        Err(_) => s.parse::<Ipv4Addr>().ok().map(|ip| (ip, 32)),
    }
}

/// Whether `ip` lies inside `cidr` (`false` for a prefix length over 32).
pub fn cidr_contains((net, len): (Ipv4Addr, u8), ip: Ipv4Addr) -> bool {
    Ipv4Net::new(net, len).is_ok_and(|net| net.contains(&ip))
}

/// Validates a list of source ranges (CIDRs); `allow_star` accepts `*` (security policy rules).
pub fn cidr_list(
    obj: &Obj,
    prefix: &str,
    key: &str,
    allow_star: bool,
) -> Result<Vec<String>, ApiError> {
    let list = str_list(obj, prefix, key)?;
    for (i, r) in list.iter().enumerate() {
        if !(allow_star && r == "*") && parse_cidr(r).is_none() {
            return Err(ApiError::invalid_value(
                &format!("{}[{i}]", path(prefix, key)),
                r,
                "Must be an IPv4 CIDR range such as 10.0.0.0/8.",
            ));
        }
    }
    Ok(list)
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
