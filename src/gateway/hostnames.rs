//! Hostname intersection between a Listener and a route (Gateway API `HTTPRouteSpec.hostnames`,
//! GEP-2643 "Hostname intersection between Gateway and TLSRoutes"):
//! - a Listener `test.example.com` matches route hostnames `test.example.com` and
//!   `*.example.com`;
//! - a Listener `*.example.com` matches route hostnames that the wildcard covers
//!   (`test.example.com`, `*.example.com`, `*.foo.example.com`) but not `example.com`;
//! - route hostnames that match no Listener hostname are ignored for that Listener; none
//!   matching at all means the route does not attach (`NoMatchingListenerHostname`).
//!
//! The intersection keeps the more specific of each matching pair: that is the name traffic is
//! routed for.

/// Whether the wildcard `*.suffix` covers `host` (one or more labels before `.suffix`).
fn wildcard_covers(suffix: &str, host: &str) -> bool {
    host.len() > suffix.len() + 1
        && host.ends_with(suffix)
        && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
}

/// The more specific name when listener hostname `l` and route hostname `r` intersect.
pub fn intersect(l: &str, r: &str) -> Option<String> {
    let (l, r) = (l.to_ascii_lowercase(), r.to_ascii_lowercase());
    match (l.strip_prefix("*."), r.strip_prefix("*.")) {
        (None, None) => (l == r).then_some(r),
        (None, Some(rs)) => wildcard_covers(rs, &l).then_some(l),
        (Some(ls), None) => wildcard_covers(ls, &r).then_some(r),
        (Some(ls), Some(rs)) => {
            if ls == rs || wildcard_covers(ls, rs) {
                Some(r)
            } else if wildcard_covers(rs, ls) {
                Some(l)
            } else {
                None
            }
        }
    }
}

/// The hostnames a route serves on a Listener: `None` when they do not intersect (the route
/// does not attach); `Some(vec![])` means every hostname (neither names any).
pub fn effective(listener: Option<&str>, route: &[String]) -> Option<Vec<String>> {
    match (listener.filter(|h| !h.is_empty()), route.is_empty()) {
        (None, _) => Some(route.to_vec()),
        (Some(l), true) => Some(vec![l.to_ascii_lowercase()]),
        (Some(l), false) => {
            let mut out: Vec<String> = route.iter().filter_map(|r| intersect(l, r)).collect();
            out.sort();
            out.dedup();
            (!out.is_empty()).then_some(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(x: &[&str]) -> Vec<String> {
        x.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn intersections_follow_the_spec_examples() {
        assert_eq!(
            intersect("test.example.com", "*.example.com").as_deref(),
            Some("test.example.com")
        );
        assert_eq!(
            intersect("*.example.com", "test.example.com").as_deref(),
            Some("test.example.com")
        );
        assert_eq!(
            intersect("*.example.com", "*.example.com").as_deref(),
            Some("*.example.com")
        );
        assert_eq!(
            intersect("*.example.com", "*.foo.example.com").as_deref(),
            Some("*.foo.example.com")
        );
        assert_eq!(
            intersect("*.foo.example.com", "*.example.com").as_deref(),
            Some("*.foo.example.com")
        );
        assert_eq!(intersect("*.example.com", "example.com"), None);
        assert_eq!(intersect("*.example.com", "test.example.net"), None);
        assert_eq!(intersect("www.example.com", "www1.example.com"), None);
        assert_eq!(
            intersect("a.b.example.com", "*.example.com").as_deref(),
            Some("a.b.example.com")
        );
    }

    #[test]
    fn effective_hostnames() {
        assert_eq!(
            effective(
                Some("*.example.com"),
                &v(&["test.example.com", "test.example.net"])
            ),
            Some(v(&["test.example.com"]))
        );
        assert_eq!(
            effective(Some("www1.example.com"), &v(&["www.example.com"])),
            None
        );
        assert_eq!(effective(None, &v(&["a.com"])), Some(v(&["a.com"])));
        assert_eq!(effective(Some("a.com"), &[]), Some(v(&["a.com"])));
        assert_eq!(effective(None, &[]), Some(vec![]));
    }
}
