//! How the real server prints a value of an apply configuration in its typed-conversion errors
//! ([`crate::patch::typed`]) and in the paths of apply conflicts ([`crate::managed_fields`]). The configuration is decoded into Go's `interface{}` tree
//! (`map[string]interface {}`, `[]interface {}`, `string`, `bool`, `nil`, and numbers: `int64`
//! when integral and in range, else `float64`, so `1.0` and `1e6` are the integers `1` and
//! `1000000`), wrapped in structured-merge-diff's `*value.valueUnstructured`, and formatted
//! with Go's `fmt` verbs:
//!
//! - [`sharp_v`]: `%#v` of the wrapper, `&value.valueUnstructured{Value:map[string]interface
//!   {}{"a":1}}` (`expected string, got ...`);
//! - [`plain_v`]: `%v` of the wrapper, `&{map[a:1]}` (`expected map|list|boolean, got ...`);
//! - [`type_name`]: `%T` of the Go value, `map[string]interface {}` (`expected numeric ...`);
//! - [`to_string`]: structured-merge-diff's `value.ToString`, the form of list keys in paths,
//!   `"web"`, `5`, `[1,"a"]`, `a=1b="x"` (a map's fields concatenated).
//!
//! Checked against kube-apiserver v1.28.7 (structured-merge-diff v4.2.3). Go visits a map in
//! random order where `%v`/`%#v` sort its keys; [`to_string`] sorts them too.

use serde_json::{Number, Value};

/// A JSON number as Go's decoder holds it.
enum GoNumber {
    Int(i64),
    Float(f64),
}

fn go_number(n: &Number) -> GoNumber {
    if let Some(i) = n.as_i64() {
        return GoNumber::Int(i);
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    // -2^63 and 2^63 are exact as floats; integral floats between them become int64.
    let min = i64::MIN as f64;
    if f.fract() == 0.0 && (min..-min).contains(&f) {
        GoNumber::Int(f as i64)
    } else {
        GoNumber::Float(f)
    }
}

/// `%v` of a `float64` (`strconv.FormatFloat(f, 'g', -1, 64)`): the shortest digits, in
/// exponent form when the exponent is below -4 or at least 6 (`1e+06`, `1e-05`, `2.5`).
fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: `1.2345e-7`, `1e300`.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').expect("exponent form");
    let exp: i32 = exp.parse().expect("exponent");
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    format!("{f}")
}

fn number(n: &Number) -> String {
    match go_number(n) {
        GoNumber::Int(i) => i.to_string(),
        GoNumber::Float(f) => go_float(f),
    }
}

/// `strconv.Quote`: double quotes, `\"`, `\\`, the C escapes, `\xNN` for other control
/// characters, printable Unicode as is.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `%#v` of a Go `interface{}` holding `v`.
fn sharp_inner(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => quote(s),
        Value::Array(items) => format!(
            "[]interface {{}}{{{}}}",
            items.iter().map(sharp_inner).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", quote(k), sharp_inner(&m[k])))
                .collect();
            format!("map[string]interface {{}}{{{}}}", fields.join(", "))
        }
    }
}

/// `%v` of a Go `interface{}` holding `v`.
fn plain_inner(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => s.clone(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(plain_inner).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let fields: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", plain_inner(&m[k])))
                .collect();
            format!("map[{}]", fields.join(" "))
        }
    }
}

/// `%#v` of the `*value.valueUnstructured` holding `v`.
pub fn sharp_v(v: &Value) -> String {
    format!("&value.valueUnstructured{{Value:{}}}", sharp_inner(v))
}

/// `%v` of the `*value.valueUnstructured` holding `v`.
pub fn plain_v(v: &Value) -> String {
    format!("&{{{}}}", plain_inner(v))
}

/// `%T` of the Go value `v` decodes to.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) => match go_number(n) {
            GoNumber::Int(_) => "int64",
            GoNumber::Float(_) => "float64",
        },
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// structured-merge-diff's `value.ToString`: how a list key's value appears in a path.
pub fn to_string(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => quote(s),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(to_string).collect::<Vec<_>>().join(",")
        ),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            keys.into_iter()
                .map(|k| format!("{k}={}", to_string(&m[k])))
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The forms kube-apiserver v1.28.7 printed for these values in `failed to create typed
    /// patch object` errors (applied as `spec.containers[].name`, `image`, `hostNetwork`).
    #[test]
    fn values_print_as_the_real_server_prints_them() {
        let nested = json!([null, {"a": [1, {"b": null}]}, 2.5, true]);
        assert_eq!(
            sharp_v(&nested),
            r#"&value.valueUnstructured{Value:[]interface {}{interface {}(nil), map[string]interface {}{"a":[]interface {}{1, map[string]interface {}{"b":interface {}(nil)}}}, 2.5, true}}"#
        );
        assert_eq!(
            plain_v(&json!({"a": [1, "x"], "b": null})),
            "&{map[a:[1 x] b:<nil>]}"
        );
        assert_eq!(plain_v(&json!([1, "x", 2.5])), "&{[1 x 2.5]}");
        assert_eq!(to_string(&json!({"b": 1, "a": "x"})), r#"a="x"b=1"#);
        assert_eq!(to_string(&json!(["a", 1])), r#"["a",1]"#);
        let numbers = [
            (json!(1.0), "1"),
            (json!(1e6), "1000000"),
            (json!(2147483648_i64), "2147483648"),
            (json!(1e300), "1e+300"),
            (json!(0.00001), "1e-05"),
            (json!(0.5), "0.5"),
            (json!(1234567.5), "1.2345675e+06"),
            (json!(-0.000123), "-0.000123"),
            (json!(-1), "-1"),
        ];
        for (n, want) in numbers {
            assert_eq!(to_string(&n), want, "{n}");
        }
        assert_eq!(
            quote("nul\u{0}byte ü \"q\" \\"),
            r#""nul\x00byte ü \"q\" \\""#
        );
        assert_eq!(type_name(&json!("5")), "string");
        assert_eq!(type_name(&json!({})), "map[string]interface {}");
    }
}
