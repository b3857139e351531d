//! NCP-style problem annotations on the Ingress itself (reference 002, "错误": NCP writes
//! `ncp/error.loadbalancer` and `ncp/warning.loadbalancer`), under this project's own prefix and
//! in addition to the Events: the error of a translation that failed, the warnings of one that
//! succeeded. Unlike NCP's SECRET_NOT_FOUND warning, which stays for the Ingress's life, both are
//! removed as soon as the problem is fixed. Patches are `None` when nothing changes (no write
//! loops).

use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{json, Value};

use crate::translate::Finding;

/// Why the Ingress has no (updated) load balancer: `INVALID_INGRESS: <what and how to fix>`.
pub const ERROR: &str = "gclb-operator.dev/error.loadbalancer";
/// Problems that did not stop the load balancer, ` | `-separated.
pub const WARNING: &str = "gclb-operator.dev/warning.loadbalancer";
/// Longest value written (characters); a longer text ends with `...`.
pub const MAX_VALUE: usize = 2000;

fn cap(mut s: String) -> String {
    if s.chars().count() > MAX_VALUE {
        s = s.chars().take(MAX_VALUE - 3).collect::<String>() + "...";
    }
    s
}

/// The value of [`ERROR`] for a translation error.
pub fn error_value(error: &impl std::fmt::Display) -> String {
    cap(format!("INVALID_INGRESS: {error}"))
}

/// The value of [`WARNING`] for the findings of a translation, `None` without warnings.
pub fn warning_value(findings: &[Finding]) -> Option<String> {
    let warnings: Vec<&str> = findings
        .iter()
        .filter(|f| f.warning)
        .map(|f| f.message.as_str())
        .collect();
    (!warnings.is_empty()).then(|| cap(warnings.join(" | ")))
}

/// A merge patch setting `key` to `value` (removing it for `None`), `None` when the Ingress
/// already carries exactly that.
pub fn patch(ingress: &Ingress, key: &str, value: Option<&str>) -> Option<Value> {
    let current = ingress
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str);
    (current != value).then(|| json!({"metadata": {"annotations": {key: value}}}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_only_changes_and_removes_when_fixed() {
        let mut ingress = Ingress::default();
        assert_eq!(patch(&ingress, ERROR, None), None);
        let set = patch(&ingress, ERROR, Some("INVALID_INGRESS: x")).unwrap();
        assert_eq!(set["metadata"]["annotations"][ERROR], "INVALID_INGRESS: x");
        ingress.metadata.annotations =
            Some([(ERROR.to_owned(), "INVALID_INGRESS: x".to_owned())].into());
        assert_eq!(patch(&ingress, ERROR, Some("INVALID_INGRESS: x")), None);
        let cleared = patch(&ingress, ERROR, None).unwrap();
        assert_eq!(cleared["metadata"]["annotations"][ERROR], Value::Null);
        assert_eq!(error_value(&"y".repeat(5000)).chars().count(), MAX_VALUE);
    }
}
