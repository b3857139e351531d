//! Ingress rule hosts -> URL map host rules (reference 001 "Hostname wildcards"; inventory §5).
//!
//! - A rule without `host` matches every host: `*`.
//! - Hosts are compared case-insensitively (DNS names), so they are lower-cased; the Compute API
//!   refuses upper-case host patterns anyway.
//! - `*.foo.com` in Kubernetes matches exactly one DNS label (`bar.foo.com`, not
//!   `baz.bar.foo.com`, not `foo.com`). A URL map host rule `*.foo.com` matches any string of
//!   `[a-z0-9-.]` before `.foo.com` (Compute API reference, `HostRule.hosts`), so deeper names
//!   match it too. A route rule could tell them apart only with `headerMatches[].regexMatch`,
//!   which the API allows only for loadBalancingScheme INTERNAL_SELF_MANAGED, regional
//!   EXTERNAL_MANAGED and INTERNAL_MANAGED, not for the classic load balancer (EXTERNAL) that
//!   GKE Ingress uses. The rule is kept (GKE does the same) and [`wildcard_warning`] says so.

use super::{Finding, ObjectKey};

/// The URL map host pattern of an Ingress rule's `host`: `*` for none, lower-cased otherwise.
pub fn host_pattern(host: Option<&str>) -> String {
    match host.map(str::trim).filter(|h| !h.is_empty()) {
        None => "*".to_owned(),
        Some(h) => h.to_ascii_lowercase(),
    }
}

/// Whether `pattern` is a single-label wildcard such as `*.foo.com`.
pub fn is_wildcard(pattern: &str) -> bool {
    pattern.starts_with("*.")
}

/// The Warning for a wildcard host rule: deeper names are routed by it as well, which
/// Kubernetes would send to the hostless rules or the default backend.
pub fn wildcard_warning(key: &ObjectKey, field: &str, pattern: &str) -> Finding {
    let suffix = &pattern[1..];
    Finding {
        warning: true,
        reason: "Translate".to_owned(),
        message: format!(
            "Ingress {key}: {field} {pattern:?} matches one DNS label in Kubernetes (x{suffix}), \
             but a Google Cloud classic load balancer's host rule also matches deeper names \
             (x.y{suffix}) and cannot be told otherwise, so those are routed by this rule instead \
             of the default backend. Add a host rule for each deeper name you serve elsewhere"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_lower_cased_and_empty_is_any() {
        assert_eq!(host_pattern(None), "*");
        assert_eq!(host_pattern(Some("")), "*");
        assert_eq!(host_pattern(Some("Foo.Bar.COM")), "foo.bar.com");
        assert_eq!(host_pattern(Some("*.Foo.com")), "*.foo.com");
        assert!(is_wildcard("*.foo.com"));
        assert!(!is_wildcard("*"));
        assert!(!is_wildcard("foo.com"));
    }
}
