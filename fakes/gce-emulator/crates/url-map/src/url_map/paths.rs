//! Path matchers: `pathRules` (`/p` matches exactly, `/p/*` every path starting with `/p/`,
//! longest first) or `routeRules`, then the matcher's default.

use std::collections::HashMap;

use serde_json::Value;

use super::trace::{common_prefix, RouteTrace};
use super::{arr, Compiler, PathMatch, RequestView, RouteRule, Target, UrlMapError};

#[derive(Debug)]
pub(super) struct PathMatcher {
    /// `pathMatchers[].name`.
    pub(super) name: String,
    pub(super) exact: HashMap<String, Target>,
    /// (prefix ending in `/`, target), longest first.
    pub(super) prefixes: Vec<(String, Target)>,
    pub(super) route_rules: Vec<RouteRule>,
    pub(super) default: Target,
}

impl Compiler<'_, '_> {
    pub(super) fn path_matcher(
        &mut self,
        pm: &Value,
        name: &str,
    ) -> Result<PathMatcher, UrlMapError> {
        let default = Target {
            action: self.action(
                pm,
                "defaultService",
                "defaultRouteAction",
                "defaultUrlRedirect",
            ),
            rule: format!("pathMatchers[{name}].defaultService"),
            matched_prefix: String::new(),
        };
        let mut exact = HashMap::new();
        let mut prefixes = Vec::new();
        for (i, rule) in arr(pm, "pathRules").iter().enumerate() {
            let action = self.action(rule, "service", "routeAction", "urlRedirect");
            for p in arr(rule, "paths").iter().filter_map(Value::as_str) {
                let label = format!("pathMatchers[{name}].pathRules[{i}]");
                if let Some(prefix) = p.strip_suffix('*') {
                    let t = Target {
                        action: action.clone(),
                        rule: label,
                        matched_prefix: prefix.to_string(),
                    };
                    prefixes.push((prefix.to_string(), t));
                } else {
                    let t = Target {
                        action: action.clone(),
                        rule: label,
                        matched_prefix: p.to_string(),
                    };
                    exact.entry(p.to_string()).or_insert(t);
                }
            }
        }
        prefixes.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
        let mut route_rules = Vec::new();
        for (i, rr) in arr(pm, "routeRules").iter().enumerate() {
            let field = format!("pathMatchers[{name}].routeRules[{i}]");
            let mut match_rules = Vec::new();
            for (j, m) in arr(rr, "matchRules").iter().enumerate() {
                match_rules.push(self.match_rule(m, &format!("{field}.matchRules[{j}]"))?);
            }
            let action = self.action(rr, "service", "routeAction", "urlRedirect");
            let priority = rr
                .get("priority")
                .and_then(|p| p.as_i64().or_else(|| p.as_str()?.parse().ok()))
                .unwrap_or(i as i64);
            route_rules.push(RouteRule {
                priority,
                match_rules,
                target: Target {
                    action,
                    rule: field,
                    matched_prefix: String::new(),
                },
            });
        }
        route_rules.sort_by_key(|r| r.priority);
        Ok(PathMatcher {
            name: name.to_string(),
            exact,
            prefixes,
            route_rules,
            default,
        })
    }
}

impl PathMatcher {
    /// The target and the path prefix it matched; records the rules tried in `trace`.
    pub(super) fn route<'s>(
        &'s self,
        req: &RequestView<'s>,
        mut trace: Option<&mut RouteTrace>,
    ) -> (&'s Target, &'s str) {
        if !self.route_rules.is_empty() {
            for rr in &self.route_rules {
                if rr.match_rules.is_empty() {
                    return (&rr.target, "");
                }
                for (j, m) in rr.match_rules.iter().enumerate() {
                    match m.check(req) {
                        Ok(()) => {
                            let prefix = match &m.path {
                                Some(PathMatch::Prefix(p)) | Some(PathMatch::Full(p)) => {
                                    req.path.get(..p.len()).unwrap_or("")
                                }
                                _ => "",
                            };
                            return (&rr.target, prefix);
                        }
                        Err(why) => {
                            if let Some(t) = trace.as_deref_mut() {
                                // A rule whose path matched is closer than any whose did not.
                                let score = match why {
                                    super::Mismatch::Path => m.path_closeness(req.path),
                                    _ => (1 << 30) + m.path_closeness(req.path),
                                };
                                t.tried(
                                    format!(
                                        "{}.matchRules[{j}] (priority {}, {})",
                                        rr.target.rule,
                                        rr.priority,
                                        m.describe_path()
                                    ),
                                    m.describe_mismatch(why),
                                    score,
                                );
                            }
                        }
                    }
                }
            }
            return (&self.default, "");
        }
        let t = if let Some(t) = self.exact.get(req.path) {
            t
        } else {
            if let Some(tr) = trace.as_deref_mut() {
                self.trace_exact_misses(tr, req.path);
            }
            let mut found = None;
            for (prefix, t) in &self.prefixes {
                if req.path.starts_with(prefix.as_str()) {
                    found = Some(t);
                    break;
                }
                if let Some(tr) = trace.as_deref_mut() {
                    tr.tried(
                        format!("{} \"{prefix}*\"", t.rule),
                        format!("path does not start with {prefix:?}"),
                        common_prefix(prefix, req.path),
                    );
                }
            }
            found.unwrap_or(&self.default)
        };
        (t, &t.matched_prefix)
    }

    /// Records every exact path rule (none matched `path`), sorted by rule for stable output.
    fn trace_exact_misses(&self, t: &mut RouteTrace, path: &str) {
        let mut exact: Vec<(&String, &Target)> = self.exact.iter().collect();
        exact.sort_by(|a, b| (&a.1.rule, a.0).cmp(&(&b.1.rule, b.0)));
        for (p, target) in exact {
            t.tried(
                format!("{} {p:?}", target.rule),
                format!("path is not exactly {p:?}"),
                common_prefix(p, path),
            );
        }
    }
}

/// The request path the data plane routes and forwards: RFC 3986 §6.2.2 syntax-based
/// normalization, which RFC 9110 §4.2.3 applies to `http(s)` URIs. Percent-encoded unreserved
/// characters are decoded (`%7E` -> `~`, `%2E` -> `.`), other escapes get upper-case hex, and
/// dot segments are removed (`/a/./b/../c` -> `/a/c`; `..` never climbs above `/`). `%2F` stays
/// encoded: it is data, not a segment separator. Repeated slashes are kept.
///
/// The Compute API reference does not say what the real load balancer does with such paths;
/// this is the emulator's assumption, chosen so that a path cannot reach one backend's rule by
/// naming another's prefix (`/public/../admin`). Borrowed (no allocation) when nothing changes.
pub fn normalize_path(path: &str) -> std::borrow::Cow<'_, str> {
    let dot_segment = |seg: &str| seg == "." || seg == "..";
    if is_normal(path.as_bytes()) {
        return std::borrow::Cow::Borrowed(path);
    }
    let decoded = normalize_escapes(path);
    let Some(rest) = decoded.strip_prefix('/') else {
        return std::borrow::Cow::Owned(decoded);
    };
    let segments: Vec<&str> = rest.split('/').collect();
    let last = segments.len() - 1;
    let mut out: Vec<&str> = Vec::with_capacity(segments.len());
    for (i, seg) in segments.iter().enumerate() {
        match *seg {
            "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s),
        }
        // A trailing `.` or `..` leaves a directory: `/a/b/..` is `/a/`.
        if i == last && dot_segment(seg) {
            out.push("");
        }
    }
    let normalized = format!("/{}", out.join("/"));
    if normalized == path {
        std::borrow::Cow::Borrowed(path)
    } else {
        std::borrow::Cow::Owned(normalized)
    }
}

/// Whether `path` has neither a `%` nor a dot segment (`.` or `..` between slashes or at either
/// end), so that [`normalize_path`] leaves it as it is. One pass over the bytes: a `contains`
/// and a `split` cost about 240 instructions on every request, most of them setting up their
/// searchers for a path of a few bytes.
pub(super) fn is_normal(path: &[u8]) -> bool {
    let mut segment_start = 0;
    for (i, &b) in path.iter().enumerate() {
        match b {
            b'%' => return false,
            b'/' => {
                if matches!(&path[segment_start..i], b"." | b"..") {
                    return false;
                }
                segment_start = i + 1;
            }
            _ => {}
        }
    }
    !matches!(&path[segment_start..], b"." | b"..")
}

/// Decodes `%XX` of unreserved characters (ALPHA, DIGIT, `-`, `.`, `_`, `~`) and upper-cases the
/// hex digits of the others; a `%` without two hex digits is kept as it is.
fn normalize_escapes(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(path.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                let c = (h * 16 + l) as u8;
                if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~') {
                    out.push(c as char);
                } else {
                    out.push('%');
                    out.push((bytes[i + 1] as char).to_ascii_uppercase());
                    out.push((bytes[i + 2] as char).to_ascii_uppercase());
                }
                i += 3;
                continue;
            }
        }
        // Copy one UTF-8 character (request paths are ASCII, but stay correct regardless).
        let ch = path[i..].chars().next().unwrap_or('\u{fffd}');
        out.push(ch);
        i += ch.len_utf8().max(1);
    }
    out
}
