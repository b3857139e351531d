//! Host rules (`hostRules[].hosts`): which path matcher a request's host goes to.
//!
//! Compute API reference, `HostRule.hosts`: host patterns are host names with an optional port;
//! `*` matches any string of `[a-z0-9-.]`, is the first character, and is followed by `-` or
//! `.` when anything follows. So `*.foo.com` matches `bar.foo.com` and `baz.bar.foo.com` alike
//! (any number of labels), but not `foo.com`. An exact host beats a wildcard, a longer wildcard
//! suffix beats a shorter one, and `*` matches every host. Hosts compare case-insensitively; the
//! request's port is not part of the match (the data plane strips it).

use std::collections::HashMap;

use serde_json::Value;

use super::trace::{common_suffix, RouteTrace};
use super::{arr, s, UrlMapError};

/// Compiled host rules: path matcher indices by host.
#[derive(Debug, Default)]
pub(super) struct HostTable {
    exact: HashMap<String, usize>,
    /// (suffix starting with `.` or `-`, matcher), longest first.
    wildcards: Vec<(String, usize)>,
    any: Option<usize>,
    /// (lower-case pattern, `hostRules` index), in `hostRules` order: names rules in traces.
    patterns: Vec<(String, usize)>,
}

impl HostTable {
    /// Compiles `hostRules`; `matcher` gives the index of a path matcher by name.
    ///
    /// Errors: [`UrlMapError::MissingPathMatcher`] for a host rule naming no path matcher.
    pub(super) fn compile(
        url_map: &Value,
        url_map_name: &str,
        matcher: impl Fn(&str) -> Option<usize>,
    ) -> Result<HostTable, UrlMapError> {
        let mut t = HostTable::default();
        for (i, hr) in arr(url_map, "hostRules").iter().enumerate() {
            let pm = s(hr, "pathMatcher").unwrap_or("");
            let Some(idx) = matcher(pm) else {
                return Err(UrlMapError::MissingPathMatcher {
                    url_map: url_map_name.to_string(),
                    index: i,
                    name: pm.to_string(),
                });
            };
            for h in arr(hr, "hosts").iter().filter_map(Value::as_str) {
                // A port in the pattern is not matched (requests are matched without theirs).
                let h = h
                    .rsplit_once(':')
                    .filter(|(_, port)| port.parse::<u16>().is_ok())
                    .map_or(h, |(host, _)| host)
                    .to_ascii_lowercase();
                t.patterns.push((h.clone(), i));
                if h == "*" {
                    t.any.get_or_insert(idx);
                } else if let Some(suffix) = h.strip_prefix('*') {
                    t.wildcards.push((suffix.to_string(), idx));
                } else {
                    t.exact.entry(h).or_insert(idx);
                }
            }
        }
        t.wildcards.sort_by_key(|w| std::cmp::Reverse(w.0.len()));
        Ok(t)
    }

    /// The path matcher for `host` (without port), if any host rule matches it; records the
    /// host rule (or the closest one) in `trace` when given.
    pub(super) fn matcher(&self, host: &str, trace: Option<&mut RouteTrace>) -> Option<usize> {
        let lowered;
        let host = if host.bytes().any(|b| b.is_ascii_uppercase()) {
            lowered = host.to_ascii_lowercase();
            lowered.as_str()
        } else {
            host
        };
        if let Some(&i) = self.exact.get(host) {
            if let Some(t) = trace {
                self.note(t, host, "exact");
            }
            return Some(i);
        }
        let wildcard_chars = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        };
        for (suffix, i) in &self.wildcards {
            if let Some(head) = host.strip_suffix(suffix.as_str()) {
                if wildcard_chars(head) {
                    if let Some(t) = trace {
                        self.note(t, &format!("*{suffix}"), "wildcard");
                    }
                    return Some(*i);
                }
            }
        }
        if let Some(t) = trace {
            if self.any.is_some() {
                self.note(t, "*", "any host");
            } else {
                self.miss(t, host);
            }
        }
        self.any
    }

    fn note(&self, t: &mut RouteTrace, pattern: &str, how: &str) {
        let index = self
            .patterns
            .iter()
            .find(|p| p.0 == pattern)
            .map_or(0, |p| p.1);
        t.host_rule = format!("hostRules[{index}] host {pattern:?} ({how})");
    }

    /// No host rule matched: every pattern is a rule tried; closeness is the common suffix.
    fn miss(&self, t: &mut RouteTrace, host: &str) {
        t.host_rule = format!("no hostRules entry matches host {host:?}: the URL map's default");
        for (pattern, index) in &self.patterns {
            let why = match pattern.strip_prefix('*') {
                Some(suffix) if host.ends_with(suffix) => {
                    format!("the part before {suffix:?} is empty or not [a-z0-9-.]")
                }
                Some(suffix) => format!("host does not end with {suffix:?}"),
                None => format!("host is not {pattern:?}"),
            };
            t.tried(
                format!("hostRules[{index}] host {pattern:?}"),
                why,
                common_suffix(pattern, host),
            );
        }
    }
}
