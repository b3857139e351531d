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
        assert_eq!(
            dns1123_subdomain(&"a".repeat(254)),
            vec!["must be no more than 253 characters"]
        );
    }
}
