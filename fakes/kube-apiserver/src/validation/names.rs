//! Object name rules per kind, with the real messages (k8s.io/apimachinery
//! `pkg/util/validation/validation.go`, `pkg/api/validation/path/name.go`, and each kind's
//! `Validate*Name` in k8s.io/kubernetes `pkg/apis/*/validation`):
//!
//! - Namespaces: DNS-1123 label; Services: DNS-1035 label;
//! - Roles, ClusterRoles and their bindings: a path segment (`system:discovery` is fine);
//! - everything else (Pods, ConfigMaps, Secrets, Ingresses, custom resources...): DNS-1123
//!   subdomain.

use crate::registry::ResourceInfo;

const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

fn label_ok(l: &str) -> bool {
    !l.is_empty()
        && l.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !l.starts_with('-')
        && !l.ends_with('-')
}

/// `IsDNS1123Subdomain`: the messages for `value` (empty when valid).
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if !value.split('.').all(label_ok) {
        errs.push(SUBDOMAIN_MSG.to_string());
    }
    errs
}

/// `IsDNS1123Label`: the messages for `value` (empty when valid).
pub fn dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !label_ok(value) {
        errs.push(LABEL_MSG.to_string());
    }
    errs
}

/// `IsDNS1035Label`: the messages for `value` (empty when valid).
pub fn dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !label_ok(value) || !value.starts_with(|c: char| c.is_ascii_lowercase()) {
        errs.push(DNS1035_MSG.to_string());
    }
    errs
}

/// `IsValidPathSegmentName`: the messages for `value` (empty when valid).
pub fn path_segment(value: &str) -> Vec<String> {
    if value == "." || value == ".." {
        return vec![format!("may not be '{value}'")];
    }
    let mut errs = Vec::new();
    for c in ["/", "%"] {
        if value.contains(c) {
            errs.push(format!("may not contain '{c}'"));
        }
    }
    errs
}

const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
const PERCENT_MSG: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`: alphanumerics, `-`, `_`, `.`, alphanumeric at
/// both ends.
fn name_part_ok(name: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    alnum(name.chars().next())
        && alnum(name.chars().last())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// `IsQualifiedName` (apimachinery `pkg/util/validation/validation.go`): an optional DNS-1123
/// subdomain prefix and `/`, then a name of at most 63 alphanumerics, `-`, `_`, `.` that starts
/// and ends alphanumeric. Label keys, annotation keys (lower-cased first), finalizers, readiness
/// gate condition types. The messages for `value` (empty when valid).
pub fn qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_MSG_BODY} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )]
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".into());
    }
    if !name_part_ok(name) {
        errs.push(QUALIFIED_NAME_MSG.into());
    }
    errs
}

/// The body of `qualifiedNameErrMsg` as `IsQualifiedName` words it for a value with more than
/// one `/`.
const QUALIFIED_NAME_MSG_BODY: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// `IsValidLabelValue`: empty, or at most 63 characters of the name part's form.
pub fn label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !name_part_ok(value) {
        errs.push(LABEL_VALUE_MSG.to_string());
    }
    errs
}

/// `IsConfigMapKey` (ConfigMap and Secret data keys): at most 253 characters of `[-._a-zA-Z0-9]`,
/// not `.` or `..` and not starting with `..`.
pub fn config_key(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if value.is_empty()
        || !value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        errs.push(CONFIG_KEY_MSG.to_string());
    }
    if value == "." {
        errs.push("must not be '.'".to_string());
    } else if value == ".." {
        errs.push("must not be '..'".to_string());
    } else if value.starts_with("..") {
        errs.push("must not start with '..'".to_string());
    }
    errs
}

/// `IsValidPercent`: digits followed by `%`.
pub fn percent(value: &str) -> Vec<String> {
    let ok = value
        .strip_suffix('%')
        .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()));
    if ok {
        Vec::new()
    } else {
        vec![PERCENT_MSG.to_string()]
    }
}

/// The rule of `res`'s names, applied to `name` (with `prefix`, a `generateName`, which may end
/// in `-`, and is checked as if completed by a letter).
pub fn check(res: &ResourceInfo, name: &str, prefix: bool) -> Vec<String> {
    let completed;
    let value = if prefix && !name.is_empty() {
        completed = format!("{name}a");
        completed.as_str()
    } else {
        name
    };
    match (res.group.as_str(), res.plural.as_str()) {
        ("", "namespaces") => dns1123_label(value),
        ("", "services") => dns1035_label(value),
        ("rbac.authorization.k8s.io", _) => path_segment(name),
        _ => dns1123_subdomain(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_and_messages() {
        assert!(dns1123_subdomain("a.b-c").is_empty());
        assert_eq!(dns1123_subdomain("Ab"), vec![SUBDOMAIN_MSG]);
        assert!(dns1123_label("a-1").is_empty());
        assert_eq!(dns1123_label("a.b"), vec![LABEL_MSG]);
        assert_eq!(dns1035_label("1a"), vec![DNS1035_MSG]);
        assert!(path_segment("system:discovery").is_empty());
        assert_eq!(path_segment("a/b"), vec!["may not contain '/'"]);
        assert!(qualified_name("example.com/My_name.1").is_empty());
        assert_eq!(qualified_name("bad key"), vec![QUALIFIED_NAME_MSG]);
        assert_eq!(qualified_name("/x"), vec!["prefix part must be non-empty"]);
        assert_eq!(
            qualified_name(&"a".repeat(64)),
            vec!["name part must be no more than 63 characters"]
        );
        assert!(label_value("").is_empty());
        assert_eq!(label_value("-a"), vec![LABEL_VALUE_MSG]);
        assert_eq!(
            label_value(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
        assert!(config_key("a.B_c-1").is_empty());
        assert_eq!(config_key("a b"), vec![CONFIG_KEY_MSG]);
        assert_eq!(config_key(".."), vec!["must not be '..'"]);
        assert!(percent("25%").is_empty());
        assert_eq!(percent("25"), vec![PERCENT_MSG]);
        assert_eq!(
            dns1123_subdomain(&"a".repeat(254)),
            vec!["must be no more than 253 characters"]
        );
    }
}
