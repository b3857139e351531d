//! HTTPRoutes -> the URL map of one port of a global external Application Load Balancer
//! (EXTERNAL_MANAGED), with route rules (Compute API v1 reference, `UrlMap`, `HttpRouteRule`).
//!
//! Hosts: one host rule and path matcher per effective hostname (listener hostname intersected
//! with the route's); `*` when neither names one. Each (rule, match) of every route attached on
//! that hostname becomes route rules whose `priority` follows the Gateway API's precedence
//! (`HTTPRouteRule` "Precedence"): an Exact path before a PathPrefix, a longer prefix first, then
//! a method match, then more header matches, then more query parameter matches; ties go to the
//! oldest route, then namespace/name, then rule and match order.
//!
//! Matches: `Exact` -> `fullPathMatch`; `PathPrefix /p` -> `fullPathMatch /p` and
//! `prefixMatch /p/` (element-wise prefix: `/p` matches `/p` and `/p/x`, not `/px`), two route
//! rules so that prefix rewrites and redirects replace the right part; `RegularExpression` ->
//! `regexMatch` where the class's scheme has it (not on the global EXTERNAL_MANAGED load
//! balancer: `UnsupportedValue`, [`check_supported`]); headers and query parameters ->
//! `headerMatches`/`queryParameterMatches` (`exactMatch` or `regexMatch`); `method` -> a header
//! match on `:method`.
//!
//! Filters: RequestHeaderModifier/ResponseHeaderModifier -> `headerAction` (backendRef filters
//! -> `weightedBackendServices[].headerAction`); RequestRedirect -> `urlRedirect` (scheme,
//! hostname, ReplaceFullPath, ReplacePrefixMatch, status 301/302/303/307/308; a redirect `port`
//! has no Compute field and is `UnsupportedValue`); URLRewrite -> `urlRewrite` (hostname,
//! ReplacePrefixMatch, and ReplaceFullPath on Exact matches); RequestMirror ->
//! `requestMirrorPolicy` (one per rule, `mirrorPercent` from `percent`/`fraction`). CORS and
//! ExtensionRef are `UnsupportedValue`. `timeouts.request` (or `backendRequest`, whichever is
//! shorter) -> `routeAction.timeout`. Weighted backendRefs -> `weightedBackendServices` (weights
//! scaled into Compute's 0-1000); the share of invalid backendRefs answers 500 through
//! `faultInjectionPolicy.abort`, as the spec asks for requests to an invalid backend.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::api::httproutes::{
    HttpRoute, HttpRouteRules, HttpRouteRulesFiltersType, HttpRouteRulesMatches,
    HttpRouteRulesMatchesHeadersType, HttpRouteRulesMatchesPathType,
    HttpRouteRulesMatchesQueryParamsType,
};
use super::backend_refs::ResolvedRule;
use super::inputs::RouteInfo;
use crate::translate::{namer, ncp};

/// Largest weight a Compute `weightedBackendServices` entry takes.
const MAX_COMPUTE_WEIGHT: u64 = 1000;

/// One attached route on one hostname, with its resolved rules.
#[derive(Clone, Debug)]
pub struct HostRoute<'a> {
    /// The route.
    pub route: &'a HttpRoute,
    /// Its common parts (for precedence).
    pub info: &'a RouteInfo,
    /// Each rule's resolved backends and mirror, parallel to `spec.rules`.
    pub rules: &'a [ResolvedRule],
}

/// The load balancer every GatewayClass of this controller builds: `(loadBalancingScheme,
/// regional)`: a global external Application Load Balancer (`urlMaps`, EXTERNAL_MANAGED backend
/// services and forwarding rules: `ports.rs`, `backend_refs.rs`).
pub const CLASS_SCHEME: (&str, bool) = ("EXTERNAL_MANAGED", false);

/// The field of the first `RegularExpression` match (path, header or query parameter) of
/// `route`: `spec.rules[0].matches[1].headers[0]`.
fn first_regex_match(route: &HttpRoute) -> Option<String> {
    for (i, rule) in route.spec.rules.iter().flatten().enumerate() {
        for (j, m) in rule.matches.iter().flatten().enumerate() {
            let at = format!("spec.rules[{i}].matches[{j}]");
            if m.path.as_ref().and_then(|p| p.r#type.as_ref())
                == Some(&HttpRouteRulesMatchesPathType::RegularExpression)
            {
                return Some(format!("{at}.path"));
            }
            if let Some(k) =
                m.headers.iter().flatten().position(|h| {
                    h.r#type == Some(HttpRouteRulesMatchesHeadersType::RegularExpression)
                })
            {
                return Some(format!("{at}.headers[{k}]"));
            }
            if let Some(k) = m.query_params.iter().flatten().position(|q| {
                q.r#type == Some(HttpRouteRulesMatchesQueryParamsType::RegularExpression)
            }) {
                return Some(format!("{at}.queryParams[{k}]"));
            }
        }
    }
    None
}

/// Why a route cannot be programmed on a load balancer of `scheme` (`(loadBalancingScheme,
/// regional)`, [`CLASS_SCHEME`] for this controller's classes): `Accepted=False,
/// UnsupportedValue` with a message naming the field, or `Ok`. `RegularExpression` matches
/// need the URL map's `regexMatch`, which the Compute API accepts only on the schemes of
/// [`ncp::regex_supported`] ("Regular expressions can only be used when the loadBalancingScheme
/// is set to INTERNAL_SELF_MANAGED, EXTERNAL_MANAGED (regional scope) or INTERNAL_MANAGED",
/// Compute API v1 reference, `HttpRouteRuleMatch.regexMatch`), so not on the global external
/// Application Load Balancer; GKE's GatewayClass capabilities page likewise lists per class
/// which match types its Gateway controller programs.
pub fn check_supported(route: &HttpRoute, scheme: (&str, bool)) -> Result<(), String> {
    if !ncp::regex_supported(scheme.0, scheme.1) {
        if let Some(field) = first_regex_match(route) {
            let scope = if scheme.1 { "regional" } else { "global" };
            return Err(format!(
                "{field}: RegularExpression matches are not supported by this GatewayClass: its {scope} load balancer (loadBalancingScheme {}) has no URL map regexMatch (the Compute API accepts regular expressions only with INTERNAL_SELF_MANAGED, regional EXTERNAL_MANAGED or INTERNAL_MANAGED); use Exact or PathPrefix path matches and Exact header and query parameter matches",
                scheme.0
            ));
        }
    }
    for (i, rule) in route.spec.rules.iter().flatten().enumerate() {
        let mut mirrors = 0;
        for f in rule.filters.iter().flatten() {
            match f.r#type {
                HttpRouteRulesFiltersType::Cors | HttpRouteRulesFiltersType::ExtensionRef => {
                    return Err(format!(
                        "spec.rules[{i}].filters: {:?} filters are not supported on Google Cloud load balancers by this controller",
                        f.r#type
                    ))
                }
                HttpRouteRulesFiltersType::RequestRedirect
                    if f.request_redirect.as_ref().and_then(|r| r.port).is_some() =>
                {
                    return Err(format!("spec.rules[{i}].filters: RequestRedirect.port has no Compute URL map field (urlRedirect has no port); remove it"));
                }
                HttpRouteRulesFiltersType::RequestMirror => mirrors += 1,
                HttpRouteRulesFiltersType::UrlRewrite => {
                    let full = f
                        .url_rewrite
                        .as_ref()
                        .and_then(|u| u.path.as_ref())
                        .and_then(|p| p.replace_full_path.as_ref())
                        .is_some();
                    let all_exact = rule.matches.iter().flatten().all(|m| {
                        m.path.as_ref().and_then(|p| p.r#type.as_ref())
                            == Some(&HttpRouteRulesMatchesPathType::Exact)
                    }) && rule.matches.as_ref().is_some_and(|m| !m.is_empty());
                    if full && !all_exact {
                        return Err(format!("spec.rules[{i}].filters: URLRewrite ReplaceFullPath is supported on Exact path matches only (Compute's pathPrefixRewrite replaces the matched prefix)"));
                    }
                }
                _ => {}
            }
        }
        if mirrors > 1 {
            return Err(format!("spec.rules[{i}].filters: a Compute route rule has one requestMirrorPolicy; use one RequestMirror filter"));
        }
        for (j, b) in rule.backend_refs.iter().flatten().enumerate() {
            for f in b.filters.iter().flatten() {
                use super::api::httproutes::HttpRouteRulesBackendRefsFiltersType as T;
                if !matches!(
                    f.r#type,
                    T::RequestHeaderModifier | T::ResponseHeaderModifier
                ) {
                    return Err(format!("spec.rules[{i}].backendRefs[{j}].filters: only RequestHeaderModifier and ResponseHeaderModifier are supported on backendRefs"));
                }
            }
        }
    }
    Ok(())
}

/// A Gateway API duration (`1h`, `10s`, `500ms`, `1m30s`) as Compute's `{seconds, nanos}`.
pub fn duration(s: &str) -> Option<(u64, u32)> {
    let mut total_ms: u64 = 0;
    let mut num = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let n: u64 = num.parse().ok()?;
        num.clear();
        let unit = if c == 'm' && chars.peek() == Some(&'s') {
            chars.next();
            1
        } else {
            match c {
                'h' => 3_600_000,
                'm' => 60_000,
                's' => 1000,
                _ => return None,
            }
        };
        total_ms += n * unit;
    }
    if !num.is_empty() {
        return None;
    }
    Some((total_ms / 1000, ((total_ms % 1000) * 1_000_000) as u32))
}

fn header_action(
    add: impl Iterator<Item = (String, String)>,
    set: impl Iterator<Item = (String, String)>,
    remove: &[String],
    request: bool,
) -> Value {
    let adds: Vec<Value> = set
        .map(|(n, v)| json!({"headerName": n, "headerValue": v, "replace": true}))
        .chain(add.map(|(n, v)| json!({"headerName": n, "headerValue": v, "replace": false})))
        .collect();
    if request {
        json!({"requestHeadersToAdd": adds, "requestHeadersToRemove": remove})
    } else {
        json!({"responseHeadersToAdd": adds, "responseHeadersToRemove": remove})
    }
}

fn merge(into: &mut Value, from: Value) {
    if let (Some(a), Value::Object(b)) = (into.as_object_mut(), from) {
        for (k, v) in b {
            match (a.get_mut(&k), v) {
                (Some(Value::Array(x)), Value::Array(y)) => x.extend(y),
                (_, v) => {
                    a.insert(k, v);
                }
            }
        }
    }
}

/// The `headerAction` of a rule's filters, if any.
fn rule_header_action(rule: &HttpRouteRules) -> Option<Value> {
    let mut out = json!({});
    for f in rule.filters.iter().flatten() {
        if let Some(m) = &f.request_header_modifier {
            merge(
                &mut out,
                header_action(
                    m.add
                        .iter()
                        .flatten()
                        .map(|h| (h.name.clone(), h.value.clone())),
                    m.set
                        .iter()
                        .flatten()
                        .map(|h| (h.name.clone(), h.value.clone())),
                    m.remove.as_deref().unwrap_or_default(),
                    true,
                ),
            );
        }
        if let Some(m) = &f.response_header_modifier {
            merge(
                &mut out,
                header_action(
                    m.add
                        .iter()
                        .flatten()
                        .map(|h| (h.name.clone(), h.value.clone())),
                    m.set
                        .iter()
                        .flatten()
                        .map(|h| (h.name.clone(), h.value.clone())),
                    m.remove.as_deref().unwrap_or_default(),
                    false,
                ),
            );
        }
    }
    (out != json!({})).then_some(out)
}

/// Precedence of one match (smaller sorts first) and its path kind.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Precedence {
    path_class: u8,
    path_len: std::cmp::Reverse<usize>,
    no_method: bool,
    headers: std::cmp::Reverse<usize>,
    query: std::cmp::Reverse<usize>,
    route: (String, crate::translate::ObjectKey),
    rule: usize,
    matched: usize,
}

/// The path forms one Gateway match becomes: (`matchRules` path field, value, the prefix a
/// prefix rewrite or redirect replaces: `None` for the whole path).
fn path_forms(m: Option<&HttpRouteRulesMatches>) -> (u8, usize, Vec<(&'static str, String, bool)>) {
    let path = m.and_then(|m| m.path.as_ref());
    let kind = path
        .and_then(|p| p.r#type.clone())
        .unwrap_or(HttpRouteRulesMatchesPathType::PathPrefix);
    let value = path
        .and_then(|p| p.value.clone())
        .unwrap_or_else(|| "/".to_owned());
    match kind {
        HttpRouteRulesMatchesPathType::Exact => {
            (0, value.len(), vec![("fullPathMatch", value, true)])
        }
        HttpRouteRulesMatchesPathType::RegularExpression => {
            (2, value.len(), vec![("regexMatch", value, true)])
        }
        HttpRouteRulesMatchesPathType::PathPrefix => {
            let trimmed = value.trim_end_matches('/').to_owned();
            if trimmed.is_empty() {
                (1, 1, vec![("prefixMatch", "/".to_owned(), false)])
            } else {
                let len = trimmed.len();
                (
                    1,
                    len,
                    vec![
                        ("fullPathMatch", trimmed.clone(), true),
                        ("prefixMatch", format!("{trimmed}/"), false),
                    ],
                )
            }
        }
    }
}

/// Headers, query parameters and method of a match as Compute match fields.
fn conditions(m: Option<&HttpRouteRulesMatches>) -> (Vec<Value>, Vec<Value>) {
    let Some(m) = m else {
        return (Vec::new(), Vec::new());
    };
    let mut headers: Vec<Value> = m
        .headers
        .iter()
        .flatten()
        .map(|h| match h.r#type {
            Some(HttpRouteRulesMatchesHeadersType::RegularExpression) => {
                json!({"headerName": h.name.to_ascii_lowercase(), "regexMatch": h.value})
            }
            _ => json!({"headerName": h.name.to_ascii_lowercase(), "exactMatch": h.value}),
        })
        .collect();
    if let Some(method) = &m.method {
        let name = serde_json::to_value(method)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        headers.push(json!({"headerName": ":method", "exactMatch": name}));
    }
    let query = m
        .query_params
        .iter()
        .flatten()
        .map(|q| match q.r#type {
            Some(HttpRouteRulesMatchesQueryParamsType::RegularExpression) => {
                json!({"name": q.name, "regexMatch": q.value})
            }
            _ => json!({"name": q.name, "exactMatch": q.value}),
        })
        .collect();
    (headers, query)
}

/// The action part of a route rule for `rule` on the path form `(field, value, whole)`:
/// `urlRedirect`, or `routeAction` (+ `headerAction`), as JSON fields to merge into the rule.
fn action(
    rule: &HttpRouteRules,
    resolved: &ResolvedRule,
    form: &(&'static str, String, bool),
    default_service: &str,
) -> Value {
    let (_, value, whole) = form;
    let replace_prefix = |r: &str| -> String {
        if *whole {
            if r.is_empty() {
                "/".to_owned()
            } else {
                r.to_owned()
            }
        } else {
            format!("{}/", r.trim_end_matches('/'))
        }
    };
    let _ = value;
    let mut out = json!({});
    if let Some(ha) = rule_header_action(rule) {
        out["headerAction"] = ha;
    }
    for f in rule.filters.iter().flatten() {
        if let Some(r) = &f.request_redirect {
            let mut redirect = json!({"stripQuery": false});
            if let Some(h) = &r.hostname {
                redirect["hostRedirect"] = json!(h);
            }
            let scheme = r.scheme.as_ref().and_then(|s| serde_json::to_value(s).ok());
            redirect["httpsRedirect"] =
                json!(scheme.as_ref().and_then(Value::as_str) == Some("https"));
            if let Some(p) = &r.path {
                if let Some(full) = &p.replace_full_path {
                    redirect["pathRedirect"] = json!(full);
                } else if let Some(prefix) = &p.replace_prefix_match {
                    redirect["prefixRedirect"] = json!(replace_prefix(prefix));
                }
            }
            redirect["redirectResponseCode"] = json!(match r.status_code.unwrap_or(302) {
                301 => "MOVED_PERMANENTLY_DEFAULT",
                303 => "SEE_OTHER",
                307 => "TEMPORARY_REDIRECT",
                308 => "PERMANENT_REDIRECT",
                _ => "FOUND",
            });
            out["urlRedirect"] = redirect;
            return out;
        }
    }
    let mut ra = json!({});
    let total: u64 = resolved.backends.iter().map(|b| u64::from(b.weight)).sum();
    let invalid = u64::from(resolved.invalid_weight);
    let scale = |w: u64| -> u64 {
        let max = resolved
            .backends
            .iter()
            .map(|b| u64::from(b.weight))
            .max()
            .unwrap_or(1);
        if max > MAX_COMPUTE_WEIGHT {
            (w * MAX_COMPUTE_WEIGHT).div_ceil(max)
        } else {
            w
        }
    };
    let weighted: Vec<Value> = resolved
        .backends
        .iter()
        .filter(|b| b.weight > 0)
        .map(|b| {
            let mut w =
                json!({"backendService": b.service_ref, "weight": scale(u64::from(b.weight))});
            if let Some(ha) = &b.header_action {
                w["headerAction"] = ha.clone();
            }
            w
        })
        .collect();
    if weighted.is_empty() || total == 0 {
        // Nothing valid to send to: every request gets 500 (spec: requests to invalid backends).
        ra["weightedBackendServices"] = json!([{"backendService": default_service, "weight": 1}]);
        ra["faultInjectionPolicy"] = json!({"abort": {"httpStatus": 500, "percentage": 100.0}});
    } else {
        ra["weightedBackendServices"] = Value::Array(weighted);
        if invalid > 0 {
            let pct = invalid as f64 * 100.0 / (invalid + total) as f64;
            ra["faultInjectionPolicy"] = json!({"abort": {"httpStatus": 500, "percentage": pct}});
        }
    }
    for f in rule.filters.iter().flatten() {
        if let Some(u) = &f.url_rewrite {
            let mut rw = json!({});
            if let Some(h) = &u.hostname {
                rw["hostRewrite"] = json!(h);
            }
            if let Some(p) = &u.path {
                if let Some(full) = &p.replace_full_path {
                    rw["pathPrefixRewrite"] = json!(full);
                } else if let Some(prefix) = &p.replace_prefix_match {
                    rw["pathPrefixRewrite"] = json!(replace_prefix(prefix));
                }
            }
            ra["urlRewrite"] = rw;
        }
    }
    if let Some((service, percent)) = &resolved.mirror {
        ra["requestMirrorPolicy"] = json!({"backendService": service, "mirrorPercent": percent});
    }
    let timeouts = rule.timeouts.as_ref();
    let shortest = [
        timeouts.and_then(|t| t.request.as_deref()),
        timeouts.and_then(|t| t.backend_request.as_deref()),
    ]
    .into_iter()
    .flatten()
    .filter_map(duration)
    .filter(|d| *d != (0, 0))
    .min();
    if let Some((seconds, nanos)) = shortest {
        ra["timeout"] = json!({"seconds": seconds.to_string(), "nanos": nanos});
    }
    out["routeAction"] = ra;
    out
}

/// The URL map `name` for the routes attached on each hostname (`""` = any hostname).
/// `default_service` answers what no rule matches (the system default backend: 404).
pub fn url_map(
    name: &str,
    description: &str,
    hosts: &BTreeMap<String, Vec<HostRoute<'_>>>,
    default_service: &str,
) -> Value {
    let mut host_rules = Vec::new();
    let mut path_matchers = Vec::new();
    for (host, routes) in hosts {
        let host = if host.is_empty() { "*" } else { host.as_str() };
        let pm_name = namer::path_matcher(namer::Scheme::Own, host);
        let mut entries: Vec<(Precedence, Value)> = Vec::new();
        for hr in routes {
            for (ri, rule) in hr.route.spec.rules.iter().flatten().enumerate() {
                let Some(resolved) = hr.rules.get(ri) else {
                    continue;
                };
                let matches: Vec<Option<&HttpRouteRulesMatches>> = match rule.matches.as_deref() {
                    None | Some([]) => vec![None],
                    Some(ms) => ms.iter().map(Some).collect(),
                };
                for (mi, m) in matches.into_iter().enumerate() {
                    let (path_class, path_len, forms) = path_forms(m);
                    let (headers, query) = conditions(m);
                    let base = Precedence {
                        path_class,
                        path_len: std::cmp::Reverse(path_len),
                        no_method: m.and_then(|m| m.method.as_ref()).is_none(),
                        headers: std::cmp::Reverse(
                            m.and_then(|m| m.headers.as_ref()).map_or(0, Vec::len),
                        ),
                        query: std::cmp::Reverse(
                            m.and_then(|m| m.query_params.as_ref()).map_or(0, Vec::len),
                        ),
                        route: hr.info.order_key(),
                        rule: ri,
                        matched: mi,
                    };
                    for form in &forms {
                        let mut mr = json!({});
                        mr[form.0] = json!(form.1);
                        if !headers.is_empty() {
                            mr["headerMatches"] = json!(headers);
                        }
                        if !query.is_empty() {
                            mr["queryParameterMatches"] = json!(query);
                        }
                        let mut rr = json!({"matchRules": [mr]});
                        merge(&mut rr, action(rule, resolved, form, default_service));
                        entries.push((base.clone(), rr));
                    }
                }
            }
        }
        // Stable: the two forms of one PathPrefix match keep their order (exact form first).
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let route_rules: Vec<Value> = entries
            .into_iter()
            .enumerate()
            .map(|(i, (_, mut rr))| {
                rr["priority"] = json!(i);
                rr
            })
            .collect();
        host_rules.push(json!({"hosts": [host], "pathMatcher": pm_name}));
        path_matchers.push(json!({
            "name": pm_name,
            "defaultService": default_service,
            "routeRules": route_rules,
        }));
    }
    json!({
        "name": name,
        "description": description,
        "defaultService": default_service,
        "hostRules": host_rules,
        "pathMatchers": path_matchers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration("10s"), Some((10, 0)));
        assert_eq!(duration("500ms"), Some((0, 500_000_000)));
        assert_eq!(duration("1m30s"), Some((90, 0)));
        assert_eq!(duration("1h"), Some((3600, 0)));
        assert_eq!(duration("10"), None);
        assert_eq!(duration("1x"), None);
    }
}
