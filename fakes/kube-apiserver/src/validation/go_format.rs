//! How Go's `fmt` prints the values a `field.Invalid` carries when they are not strings or
//! numbers (`%#v` of a map, a `metav1.LabelSelector`, an `intstr.IntOrString`): k8s.io/apimachinery
//! `pkg/util/validation/field/errors.go` `ErrorBody` falls back to `%#v` for a value with no
//! `String()` method. Go prints map keys sorted, which `serde_json`'s map order also is.

use serde_json::Value;

/// `%#v` of a `map[string]string` (`map[string]string(nil)` when absent).
pub fn string_map(v: &Value) -> String {
    match v.as_object() {
        None => "map[string]string(nil)".into(),
        Some(m) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{:?}:{:?}", k, v.as_str().unwrap_or_default()))
                .collect();
            format!("map[string]string{{{}}}", items.join(", "))
        }
    }
}

/// `%#v` of a `[]string` (`[]string(nil)` when absent).
pub fn string_slice(v: &Value) -> String {
    match v.as_array() {
        None => "[]string(nil)".into(),
        Some(a) => {
            let items: Vec<String> = a
                .iter()
                .map(|s| format!("{:?}", s.as_str().unwrap_or_default()))
                .collect();
            format!("[]string{{{}}}", items.join(", "))
        }
    }
}

/// `%#v` of a `metav1.LabelSelector` (the JSON form `{matchLabels, matchExpressions}`):
/// `v1.LabelSelector{MatchLabels:map[string]string{"app":"web"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}`.
pub fn label_selector(v: &Value) -> String {
    let exprs = match v["matchExpressions"].as_array() {
        None => "[]v1.LabelSelectorRequirement(nil)".to_string(),
        Some(a) => {
            let items: Vec<String> = a
                .iter()
                .map(|r| {
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{:?}, Operator:{:?}, Values:{}}}",
                        r["key"].as_str().unwrap_or_default(),
                        r["operator"].as_str().unwrap_or_default(),
                        string_slice(&r["values"])
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
    };
    format!(
        "v1.LabelSelector{{MatchLabels:{}, MatchExpressions:{}}}",
        string_map(&v["matchLabels"]),
        exprs
    )
}

/// `%#v` of an `intstr.IntOrString`: `intstr.IntOrString{Type:1, IntVal:0, StrVal:"50"}`.
pub fn int_or_string(v: &Value) -> String {
    match v {
        Value::String(s) => format!("intstr.IntOrString{{Type:1, IntVal:0, StrVal:{s:?}}}"),
        other => format!(
            "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
            other.as_i64().unwrap_or(0)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prints_as_go_does() {
        assert_eq!(
            string_map(&json!({"b": "2", "a": "1"})),
            r#"map[string]string{"a":"1", "b":"2"}"#
        );
        assert_eq!(
            label_selector(&json!({"matchLabels": {"app": "web"}})),
            r#"v1.LabelSelector{MatchLabels:map[string]string{"app":"web"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"#
        );
        assert_eq!(
            int_or_string(&json!(0)),
            r#"intstr.IntOrString{Type:0, IntVal:0, StrVal:""}"#
        );
        assert_eq!(
            int_or_string(&json!("50")),
            r#"intstr.IntOrString{Type:1, IntVal:0, StrVal:"50"}"#
        );
    }
}
