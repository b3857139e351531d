//! URL map routing, compiled from a `compute#urlMap` resource into lookup structures and kept
//! free of I/O so it can be unit tested.
//!
//! Semantics follow the Compute API v1 reference for `urlMaps` (fields `hostRules`,
//! `pathMatchers`, `pathRules`, `routeRules`, `matchRules`, `urlRewrite`, `urlRedirect`):
//! - host rules: an exact host beats a `*.suffix` wildcard, a longer wildcard suffix beats a
//!   shorter one, and `*` matches any host; the port of the `Host` header is ignored;
//! - path rules: `/p` matches exactly, `/p/*` matches every path starting with `/p/`; the longest
//!   match wins (an exact match of the whole path is always the longest);
//! - route rules: evaluated in ascending `priority`; a rule matches when any of its match rules
//!   does; a match rule needs its path match and all header and query parameter matches;
//! - without a match, the path matcher's default applies, and without a host rule the URL map's.

use std::collections::HashMap;

use http::HeaderMap;
use regex::Regex;
use serde_json::Value;

/// Errors compiling a URL map. Each names the field at fault.
#[derive(Debug, thiserror::Error)]
pub enum UrlMapError {
    /// A `regexMatch` is not a valid RE2 expression.
    #[error("urlMap {url_map}: {field}: invalid regular expression {regex:?}: {source}")]
    Regex {
        url_map: String,
        field: String,
        regex: String,
        #[source]
        source: Box<regex::Error>,
    },
    /// A host rule names a path matcher that does not exist.
    #[error("urlMap {url_map}: hostRules[{index}].pathMatcher names missing path matcher {name:?}; add it to pathMatchers or fix the name")]
    MissingPathMatcher {
        url_map: String,
        index: usize,
        name: String,
    },
}

/// What a matched rule does with a request.
#[derive(Debug, Clone)]
pub enum RouteAction {
    /// Forward to one of the weighted backend services (indices given by the resolver).
    Forward(Forward),
    /// Answer with a redirect.
    Redirect(Redirect),
    /// The rule names a service the data plane cannot serve (missing, or a backend bucket):
    /// the request gets 502 with this reason.
    Unavailable(String),
}

/// A forwarding action: backend services with weights, and an optional rewrite.
#[derive(Debug, Clone)]
pub struct Forward {
    /// (backend service index, weight); weights sum to `total_weight` (> 0).
    pub services: Vec<(usize, u32)>,
    /// Sum of the weights.
    pub total_weight: u32,
    /// `routeAction.urlRewrite`.
    pub rewrite: Option<UrlRewrite>,
}

impl Forward {
    /// The backend service for a random draw `r` (any u32): weighted choice.
    pub fn pick(&self, r: u32) -> usize {
        if self.services.len() == 1 {
            return self.services[0].0;
        }
        let mut x = r % self.total_weight;
        for (idx, w) in &self.services {
            if x < *w {
                return *idx;
            }
            x -= w;
        }
        self.services[0].0
    }
}

/// `urlRewrite` of a route action.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UrlRewrite {
    /// Replaces the matched path prefix.
    pub path_prefix_rewrite: Option<String>,
    /// Replaces the `Host` header.
    pub host_rewrite: Option<String>,
}

/// `urlRedirect` / `defaultUrlRedirect`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Redirect {
    /// `httpsRedirect`: the scheme becomes https.
    pub https_redirect: bool,
    /// `hostRedirect`.
    pub host_redirect: Option<String>,
    /// `pathRedirect`: replaces the whole path.
    pub path_redirect: Option<String>,
    /// `prefixRedirect`: replaces the matched prefix.
    pub prefix_redirect: Option<String>,
    /// HTTP status from `redirectResponseCode` (301 by default, `MOVED_PERMANENTLY_DEFAULT`).
    pub status: u16,
    /// `stripQuery`.
    pub strip_query: bool,
}

/// The parts of a request routing looks at.
#[derive(Debug, Clone, Copy)]
pub struct RequestView<'a> {
    /// Host without port, as sent (matched case-insensitively).
    pub host: &'a str,
    /// Path, without query.
    pub path: &'a str,
    /// Query string without `?`, if any.
    pub query: Option<&'a str>,
    /// Request headers.
    pub headers: &'a HeaderMap,
}

/// The result of routing one request.
#[derive(Debug, Clone, Copy)]
pub struct Route<'a> {
    /// What to do.
    pub action: &'a RouteAction,
    /// Which rule matched, e.g. `pathMatchers[web].pathRules[1]` or `defaultService`.
    pub rule: &'a str,
    /// The path prefix the rule matched (for `pathPrefixRewrite` and `prefixRedirect`).
    pub matched_prefix: &'a str,
}

#[derive(Debug)]
struct Target {
    action: RouteAction,
    rule: String,
    matched_prefix: String,
}

#[derive(Debug)]
enum PathMatch {
    Prefix(String),
    Full(String),
    Regex(Regex),
}

#[derive(Debug)]
enum StringMatch {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Regex(Regex),
    Present(bool),
    Range(i64, i64),
}

impl StringMatch {
    fn matches(&self, value: Option<&str>) -> bool {
        match (self, value) {
            (StringMatch::Present(p), v) => *p == v.is_some(),
            (_, None) => false,
            (StringMatch::Exact(e), Some(v)) => v == e,
            (StringMatch::Prefix(p), Some(v)) => v.starts_with(p.as_str()),
            (StringMatch::Suffix(s), Some(v)) => v.ends_with(s.as_str()),
            (StringMatch::Regex(r), Some(v)) => r.is_match(v),
            (StringMatch::Range(a, b), Some(v)) => {
                v.parse::<i64>().is_ok_and(|n| *a <= n && n < *b)
            }
        }
    }
}

#[derive(Debug)]
struct HeaderMatch {
    name: http::HeaderName,
    matcher: StringMatch,
    invert: bool,
}

#[derive(Debug)]
struct QueryMatch {
    name: String,
    matcher: StringMatch,
}

#[derive(Debug)]
struct MatchRule {
    path: Option<PathMatch>,
    ignore_case: bool,
    headers: Vec<HeaderMatch>,
    query: Vec<QueryMatch>,
}

#[derive(Debug)]
struct RouteRule {
    priority: i64,
    match_rules: Vec<MatchRule>,
    target: Target,
}

#[derive(Debug)]
struct PathMatcher {
    exact: HashMap<String, Target>,
    /// (prefix ending in `/`, target), longest first.
    prefixes: Vec<(String, Target)>,
    route_rules: Vec<RouteRule>,
    default: Target,
}

/// A compiled URL map. Cheap to query: hash lookups and short scans, no allocation.
#[derive(Debug)]
pub struct UrlMapTable {
    exact_hosts: HashMap<String, usize>,
    /// (suffix starting with `.` or `-`, matcher), longest first.
    wildcard_hosts: Vec<(String, usize)>,
    any_host: Option<usize>,
    matchers: Vec<PathMatcher>,
    default: Target,
}

/// Maps a service reference (full URL) to a backend service index, or explains why it cannot.
pub type ServiceResolver<'a> = dyn FnMut(&str) -> Result<usize, String> + 'a;

struct Compiler<'r, 'a> {
    url_map: String,
    resolve: &'r mut ServiceResolver<'a>,
}

fn s<'v>(v: &'v Value, field: &str) -> Option<&'v str> {
    v.get(field).and_then(Value::as_str)
}

fn arr<'v>(v: &'v Value, field: &str) -> &'v [Value] {
    v.get(field)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// HTTP status for `redirectResponseCode` (Compute API enum).
pub fn redirect_status(code: Option<&str>) -> u16 {
    match code {
        Some("FOUND") => 302,
        Some("SEE_OTHER") => 303,
        Some("TEMPORARY_REDIRECT") => 307,
        Some("PERMANENT_REDIRECT") => 308,
        _ => 301,
    }
}

fn parse_redirect(v: &Value) -> Redirect {
    Redirect {
        https_redirect: v
            .get("httpsRedirect")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        host_redirect: s(v, "hostRedirect").map(str::to_string),
        path_redirect: s(v, "pathRedirect").map(str::to_string),
        prefix_redirect: s(v, "prefixRedirect").map(str::to_string),
        status: redirect_status(s(v, "redirectResponseCode")),
        strip_query: v
            .get("stripQuery")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    }
}

fn parse_rewrite(route_action: Option<&Value>) -> Option<UrlRewrite> {
    let rw = route_action?.get("urlRewrite")?;
    let r = UrlRewrite {
        path_prefix_rewrite: s(rw, "pathPrefixRewrite").map(str::to_string),
        host_rewrite: s(rw, "hostRewrite").map(str::to_string),
    };
    (r != UrlRewrite::default()).then_some(r)
}

impl Compiler<'_, '_> {
    /// Builds the action of an object that may carry `service`/`defaultService`,
    /// `routeAction`/`defaultRouteAction` and `urlRedirect`/`defaultUrlRedirect`.
    fn action(
        &mut self,
        v: &Value,
        service: &str,
        route_action: &str,
        redirect: &str,
    ) -> RouteAction {
        if let Some(r) = v.get(redirect) {
            return RouteAction::Redirect(parse_redirect(r));
        }
        let ra = v.get(route_action);
        let rewrite = parse_rewrite(ra);
        let mut services = Vec::new();
        if let Some(url) = s(v, service) {
            match (self.resolve)(url) {
                Ok(i) => services.push((i, 1)),
                Err(e) => return RouteAction::Unavailable(e),
            }
        } else if let Some(ra) = ra {
            for w in arr(ra, "weightedBackendServices") {
                let Some(url) = s(w, "backendService") else {
                    continue;
                };
                let weight = w.get("weight").and_then(Value::as_u64).unwrap_or(1) as u32;
                match (self.resolve)(url) {
                    Ok(i) if weight > 0 => services.push((i, weight)),
                    Ok(_) => {}
                    Err(e) => return RouteAction::Unavailable(e),
                }
            }
        }
        if services.is_empty() {
            return RouteAction::Unavailable(format!(
                "urlMap {}: no service for this route",
                self.url_map
            ));
        }
        let total_weight = services.iter().map(|(_, w)| w).sum();
        RouteAction::Forward(Forward {
            services,
            total_weight,
            rewrite,
        })
    }

    fn regex(&self, field: String, re: &str, ignore_case: bool) -> Result<Regex, UrlMapError> {
        regex::RegexBuilder::new(&format!("^(?:{re})$"))
            .case_insensitive(ignore_case)
            .build()
            .map_err(|e| UrlMapError::Regex {
                url_map: self.url_map.clone(),
                field,
                regex: re.to_string(),
                source: Box::new(e),
            })
    }

    fn string_match(&self, v: &Value, field: &str) -> Result<StringMatch, UrlMapError> {
        Ok(if let Some(x) = s(v, "exactMatch") {
            StringMatch::Exact(x.to_string())
        } else if let Some(x) = s(v, "prefixMatch") {
            StringMatch::Prefix(x.to_string())
        } else if let Some(x) = s(v, "suffixMatch") {
            StringMatch::Suffix(x.to_string())
        } else if let Some(x) = s(v, "regexMatch") {
            StringMatch::Regex(self.regex(format!("{field}.regexMatch"), x, false)?)
        } else if let Some(r) = v.get("rangeMatch") {
            let n = |f: &str| {
                r.get(f)
                    .and_then(|x| x.as_i64().or_else(|| x.as_str()?.parse().ok()))
                    .unwrap_or(0)
            };
            StringMatch::Range(n("rangeStart"), n("rangeEnd"))
        } else {
            StringMatch::Present(
                v.get("presentMatch")
                    .and_then(Value::as_bool)
                    .unwrap_or(true),
            )
        })
    }

    fn match_rule(&self, v: &Value, field: &str) -> Result<MatchRule, UrlMapError> {
        let ignore_case = v
            .get("ignoreCase")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let path = if let Some(p) = s(v, "prefixMatch") {
            Some(PathMatch::Prefix(if ignore_case {
                p.to_lowercase()
            } else {
                p.to_string()
            }))
        } else if let Some(p) = s(v, "fullPathMatch") {
            Some(PathMatch::Full(if ignore_case {
                p.to_lowercase()
            } else {
                p.to_string()
            }))
        } else if let Some(p) = s(v, "regexMatch") {
            Some(PathMatch::Regex(self.regex(
                format!("{field}.regexMatch"),
                p,
                ignore_case,
            )?))
        } else {
            None
        };
        let mut headers = Vec::new();
        for (i, h) in arr(v, "headerMatches").iter().enumerate() {
            let Some(name) =
                s(h, "headerName").and_then(|n| http::HeaderName::from_bytes(n.as_bytes()).ok())
            else {
                continue;
            };
            headers.push(HeaderMatch {
                name,
                matcher: self.string_match(h, &format!("{field}.headerMatches[{i}]"))?,
                invert: h
                    .get("invertMatch")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            });
        }
        let mut query = Vec::new();
        for (i, q) in arr(v, "queryParameterMatches").iter().enumerate() {
            let Some(name) = s(q, "name") else { continue };
            query.push(QueryMatch {
                name: name.to_string(),
                matcher: self.string_match(q, &format!("{field}.queryParameterMatches[{i}]"))?,
            });
        }
        Ok(MatchRule {
            path,
            ignore_case,
            headers,
            query,
        })
    }

    fn path_matcher(&mut self, pm: &Value, name: &str) -> Result<PathMatcher, UrlMapError> {
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
            exact,
            prefixes,
            route_rules,
            default,
        })
    }
}

impl UrlMapTable {
    /// Compiles the wire JSON of a `compute#urlMap`. `resolve` maps each service URL to a
    /// backend service index (or a reason it cannot be served).
    pub fn compile(
        url_map: &Value,
        resolve: &mut ServiceResolver<'_>,
    ) -> Result<UrlMapTable, UrlMapError> {
        let name = s(url_map, "name").unwrap_or("?").to_string();
        let mut c = Compiler {
            url_map: name.clone(),
            resolve,
        };
        let default = Target {
            action: c.action(
                url_map,
                "defaultService",
                "defaultRouteAction",
                "defaultUrlRedirect",
            ),
            rule: "defaultService".to_string(),
            matched_prefix: String::new(),
        };
        let mut matchers = Vec::new();
        let mut by_name = HashMap::new();
        for pm in arr(url_map, "pathMatchers") {
            let pm_name = s(pm, "name").unwrap_or("");
            by_name.insert(pm_name.to_string(), matchers.len());
            matchers.push(c.path_matcher(pm, pm_name)?);
        }
        let mut exact_hosts = HashMap::new();
        let mut wildcard_hosts = Vec::new();
        let mut any_host = None;
        for (i, hr) in arr(url_map, "hostRules").iter().enumerate() {
            let pm = s(hr, "pathMatcher").unwrap_or("");
            let Some(&idx) = by_name.get(pm) else {
                return Err(UrlMapError::MissingPathMatcher {
                    url_map: name,
                    index: i,
                    name: pm.to_string(),
                });
            };
            for h in arr(hr, "hosts").iter().filter_map(Value::as_str) {
                let h = h.to_ascii_lowercase();
                if h == "*" {
                    any_host.get_or_insert(idx);
                } else if let Some(suffix) = h.strip_prefix('*') {
                    wildcard_hosts.push((suffix.to_string(), idx));
                } else {
                    exact_hosts.entry(h).or_insert(idx);
                }
            }
        }
        wildcard_hosts.sort_by_key(|w| std::cmp::Reverse(w.0.len()));
        Ok(UrlMapTable {
            exact_hosts,
            wildcard_hosts,
            any_host,
            matchers,
            default,
        })
    }

    fn host_matcher(&self, host: &str) -> Option<usize> {
        let lowered;
        let host = if host.bytes().any(|b| b.is_ascii_uppercase()) {
            lowered = host.to_ascii_lowercase();
            lowered.as_str()
        } else {
            host
        };
        if let Some(&i) = self.exact_hosts.get(host) {
            return Some(i);
        }
        for (suffix, i) in &self.wildcard_hosts {
            if host.len() > suffix.len() && host.ends_with(suffix.as_str()) {
                return Some(*i);
            }
        }
        self.any_host
    }

    /// Routes one request. Never fails: without a matching rule the URL map's default applies.
    pub fn route<'t>(&'t self, req: &RequestView<'t>) -> Route<'t> {
        let (target, matched_prefix) = match self.host_matcher(req.host) {
            None => (&self.default, ""),
            Some(i) => self.matchers[i].route(req),
        };
        Route {
            action: &target.action,
            rule: &target.rule,
            matched_prefix,
        }
    }
}

impl PathMatcher {
    /// The target and the path prefix it matched.
    fn route<'s>(&'s self, req: &RequestView<'s>) -> (&'s Target, &'s str) {
        if !self.route_rules.is_empty() {
            for rr in &self.route_rules {
                if rr.match_rules.is_empty() {
                    return (&rr.target, "");
                }
                for m in &rr.match_rules {
                    if m.matches(req) {
                        let prefix = match &m.path {
                            Some(PathMatch::Prefix(p)) | Some(PathMatch::Full(p)) => {
                                req.path.get(..p.len()).unwrap_or("")
                            }
                            _ => "",
                        };
                        return (&rr.target, prefix);
                    }
                }
            }
            return (&self.default, "");
        }
        let t = if let Some(t) = self.exact.get(req.path) {
            t
        } else {
            self.prefixes
                .iter()
                .find(|(prefix, _)| req.path.starts_with(prefix.as_str()))
                .map(|(_, t)| t)
                .unwrap_or(&self.default)
        };
        (t, &t.matched_prefix)
    }
}

impl MatchRule {
    fn matches(&self, req: &RequestView<'_>) -> bool {
        let path_ok = match &self.path {
            None => true,
            Some(PathMatch::Regex(r)) => r.is_match(req.path),
            Some(PathMatch::Prefix(p)) if self.ignore_case => {
                req.path.len() >= p.len()
                    && req.path.is_char_boundary(p.len())
                    && req.path[..p.len()].eq_ignore_ascii_case(p)
            }
            Some(PathMatch::Prefix(p)) => req.path.starts_with(p.as_str()),
            Some(PathMatch::Full(p)) if self.ignore_case => req.path.eq_ignore_ascii_case(p),
            Some(PathMatch::Full(p)) => req.path == p,
        };
        if !path_ok {
            return false;
        }
        for h in &self.headers {
            // Multiple values are matched joined by commas, as HTTP defines their combination.
            let mut values = req
                .headers
                .get_all(&h.name)
                .iter()
                .filter_map(|v| v.to_str().ok());
            let first = values.next();
            let joined;
            let value = match (first, values.next()) {
                (Some(a), Some(b)) => {
                    let mut j = format!("{a},{b}");
                    for v in values {
                        j.push(',');
                        j.push_str(v);
                    }
                    joined = j;
                    Some(joined.as_str())
                }
                (a, _) => a,
            };
            if h.matcher.matches(value) == h.invert {
                return false;
            }
        }
        for q in &self.query {
            let value = req.query.and_then(|qs| {
                url::form_urlencoded::parse(qs.as_bytes())
                    .find(|(k, _)| k == q.name.as_str())
                    .map(|(_, v)| v)
            });
            if !q.matcher.matches(value.as_deref()) {
                return false;
            }
        }
        true
    }
}

/// The `Location` of a redirect: scheme, host, path and query after applying `r` to a request
/// that matched `matched_prefix`.
pub fn redirect_location(
    r: &Redirect,
    scheme: &str,
    host: &str,
    path: &str,
    query: Option<&str>,
    matched_prefix: &str,
) -> String {
    let scheme = if r.https_redirect { "https" } else { scheme };
    let host = r.host_redirect.as_deref().unwrap_or(host);
    let mut loc = format!("{scheme}://{host}");
    if let Some(p) = &r.path_redirect {
        loc.push_str(p);
    } else if let Some(p) = &r.prefix_redirect {
        loc.push_str(p);
        loc.push_str(path.get(matched_prefix.len()..).unwrap_or(""));
    } else {
        loc.push_str(path);
    }
    if let (false, Some(q)) = (r.strip_query, query) {
        loc.push('?');
        loc.push_str(q);
    }
    loc
}

/// The path after `pathPrefixRewrite`: the matched prefix replaced by `rewrite`.
pub fn rewrite_path(rewrite: &str, path: &str, matched_prefix: &str) -> String {
    let rest = path.strip_prefix(matched_prefix).unwrap_or(path);
    let mut out = String::with_capacity(rewrite.len() + rest.len());
    out.push_str(rewrite);
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn table(v: Value) -> UrlMapTable {
        UrlMapTable::compile(&v, &mut |url: &str| {
            url.rsplit('/')
                .next()
                .and_then(|n| n.strip_prefix("bs"))
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("unknown {url}"))
        })
        .unwrap()
    }

    fn route(
        t: &UrlMapTable,
        host: &str,
        path: &str,
        headers: &[(&str, &str)],
        query: Option<&str>,
    ) -> (String, String) {
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        let r = t.route(&RequestView {
            host,
            path,
            query,
            headers: &h,
        });
        let a = match r.action {
            RouteAction::Forward(f) => format!("bs{}", f.services[0].0),
            RouteAction::Redirect(rd) => format!(
                "redirect {}",
                redirect_location(rd, "http", host, path, query, r.matched_prefix)
            ),
            RouteAction::Unavailable(e) => e.clone(),
        };
        (a, r.rule.to_string())
    }

    fn bs(n: u32) -> String {
        format!("https://x/compute/v1/projects/p/global/backendServices/bs{n}")
    }

    #[test]
    fn hosts_exact_wildcard_any_and_default() {
        let t = table(json!({
            "name": "um", "defaultService": bs(0),
            "hostRules": [
                {"hosts": ["shop.example"], "pathMatcher": "a"},
                {"hosts": ["*.example"], "pathMatcher": "b"},
                {"hosts": ["*.api.example"], "pathMatcher": "c"},
            ],
            "pathMatchers": [
                {"name": "a", "defaultService": bs(1)},
                {"name": "b", "defaultService": bs(2)},
                {"name": "c", "defaultService": bs(3)},
            ]
        }));
        assert_eq!(route(&t, "shop.example", "/", &[], None).0, "bs1");
        assert_eq!(route(&t, "SHOP.example", "/", &[], None).0, "bs1");
        assert_eq!(route(&t, "x.example", "/", &[], None).0, "bs2");
        assert_eq!(route(&t, "v1.api.example", "/", &[], None).0, "bs3");
        assert_eq!(route(&t, "example", "/", &[], None).0, "bs0");
        assert_eq!(
            route(&t, "other.test", "/", &[], None),
            ("bs0".into(), "defaultService".into())
        );
        let t2 = table(
            json!({"defaultService": bs(0), "hostRules": [{"hosts": ["*"], "pathMatcher": "a"}],
            "pathMatchers": [{"name": "a", "defaultService": bs(4)}]}),
        );
        assert_eq!(route(&t2, "anything", "/", &[], None).0, "bs4");
    }

    #[test]
    fn path_rules_longest_match_and_matcher_default() {
        let t = table(json!({
            "defaultService": bs(0),
            "hostRules": [{"hosts": ["h"], "pathMatcher": "m"}],
            "pathMatchers": [{"name": "m", "defaultService": bs(9), "pathRules": [
                {"paths": ["/a/*"], "service": bs(1)},
                {"paths": ["/a/b/*"], "service": bs(2)},
                {"paths": ["/a/b/c"], "service": bs(3)},
                {"paths": ["/a"], "service": bs(4)},
            ]}]
        }));
        assert_eq!(route(&t, "h", "/a/x", &[], None).0, "bs1");
        assert_eq!(route(&t, "h", "/a/", &[], None).0, "bs1");
        assert_eq!(route(&t, "h", "/a/b/x", &[], None).0, "bs2");
        assert_eq!(
            route(&t, "h", "/a/b/c", &[], None),
            ("bs3".into(), "pathMatchers[m].pathRules[2]".into())
        );
        assert_eq!(route(&t, "h", "/a", &[], None).0, "bs4");
        assert_eq!(
            route(&t, "h", "/ab", &[], None),
            ("bs9".into(), "pathMatchers[m].defaultService".into())
        );
    }

    #[test]
    fn route_rules_by_priority_with_regex_header_and_query() {
        let t = table(json!({
            "defaultService": bs(0),
            "hostRules": [{"hosts": ["*"], "pathMatcher": "m"}],
            "pathMatchers": [{"name": "m", "defaultService": bs(9), "routeRules": [
                {"priority": 10, "matchRules": [{"prefixMatch": "/", "headerMatches": [{"headerName": "x-canary", "exactMatch": "1"}]}], "service": bs(1)},
                {"priority": 5, "matchRules": [{"regexMatch": "/items/[0-9]+"}], "service": bs(2)},
                {"priority": 20, "matchRules": [{"fullPathMatch": "/q", "queryParameterMatches": [{"name": "v", "exactMatch": "2"}]}], "service": bs(3)},
                {"priority": 30, "matchRules": [{"prefixMatch": "/", "headerMatches": [{"headerName": "x-user", "presentMatch": true, "invertMatch": true}]}], "service": bs(4)},
            ]}]
        }));
        assert_eq!(
            route(&t, "h", "/items/12", &[("x-canary", "1")], None).0,
            "bs2"
        );
        assert_eq!(
            route(
                &t,
                "h",
                "/items/x",
                &[("x-canary", "1"), ("x-user", "u")],
                None
            )
            .0,
            "bs1"
        );
        assert_eq!(
            route(&t, "h", "/q", &[("x-user", "u")], Some("a=1&v=2")).0,
            "bs3"
        );
        assert_eq!(
            route(&t, "h", "/q", &[("x-user", "u")], Some("v=3")).0,
            "bs9"
        );
        assert_eq!(route(&t, "h", "/z", &[], None).0, "bs4");
    }

    #[test]
    fn redirects_and_rewrites() {
        let t = table(json!({
            "defaultUrlRedirect": {"httpsRedirect": true, "redirectResponseCode": "PERMANENT_REDIRECT"},
            "hostRules": [{"hosts": ["h"], "pathMatcher": "m"}],
            "pathMatchers": [{"name": "m", "defaultService": bs(1), "pathRules": [
                {"paths": ["/old/*"], "urlRedirect": {"prefixRedirect": "/new/", "redirectResponseCode": "FOUND", "stripQuery": true}},
                {"paths": ["/go"], "urlRedirect": {"hostRedirect": "other", "pathRedirect": "/landing", "redirectResponseCode": "SEE_OTHER"}},
                {"paths": ["/api/*"], "service": bs(2), "routeAction": {"urlRewrite": {"pathPrefixRewrite": "/v2/", "hostRewrite": "backend"}}},
            ]}]
        }));
        assert_eq!(
            route(&t, "x", "/p", &[], Some("a=1")).0,
            "redirect https://x/p?a=1"
        );
        assert_eq!(
            route(&t, "h", "/old/a/b", &[], Some("a=1")).0,
            "redirect http://h/new/a/b"
        );
        assert_eq!(
            route(&t, "h", "/go", &[], Some("a=1")).0,
            "redirect http://other/landing?a=1"
        );
        let mut hm = HeaderMap::new();
        hm.insert("a", "b".parse().unwrap());
        let r = t.route(&RequestView {
            host: "h",
            path: "/api/items",
            query: None,
            headers: &hm,
        });
        let RouteAction::Forward(f) = r.action else {
            panic!("forward expected")
        };
        let rw = f.rewrite.as_ref().unwrap();
        assert_eq!(
            rewrite_path(
                rw.path_prefix_rewrite.as_deref().unwrap(),
                "/api/items",
                r.matched_prefix
            ),
            "/v2/items"
        );
        assert_eq!(rw.host_rewrite.as_deref(), Some("backend"));
        for (code, want) in [
            ("MOVED_PERMANENTLY_DEFAULT", 301),
            ("FOUND", 302),
            ("SEE_OTHER", 303),
            ("TEMPORARY_REDIRECT", 307),
            ("PERMANENT_REDIRECT", 308),
        ] {
            assert_eq!(redirect_status(Some(code)), want);
        }
    }

    #[test]
    fn errors_name_the_field() {
        let v = json!({"defaultService": bs(0), "pathMatchers": [{"name": "m", "defaultService": bs(0),
            "routeRules": [{"priority": 1, "matchRules": [{"regexMatch": "("}], "service": bs(0)}]}]});
        let e = UrlMapTable::compile(&v, &mut |_: &str| Ok(0))
            .unwrap_err()
            .to_string();
        assert!(e.contains("routeRules[0].matchRules[0].regexMatch"), "{e}");
        let v =
            json!({"defaultService": bs(0), "hostRules": [{"hosts": ["a"], "pathMatcher": "zz"}]});
        let e = UrlMapTable::compile(&v, &mut |_: &str| Ok(0))
            .unwrap_err()
            .to_string();
        assert!(e.contains("hostRules[0].pathMatcher"), "{e}");
    }

    #[test]
    fn weighted_pick_follows_weights() {
        let f = Forward {
            services: vec![(0, 1), (1, 3)],
            total_weight: 4,
            rewrite: None,
        };
        let picks: Vec<usize> = (0..4).map(|r| f.pick(r)).collect();
        assert_eq!(picks, vec![0, 1, 1, 1]);
    }
}
