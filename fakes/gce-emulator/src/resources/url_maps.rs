//! `urlMaps`: host rules, path matchers, path rules and route rules, validated as the Compute
//! API reference describes (paths start with `/`; `*` only as the final `/*`; hosts may start
//! with `*`; every host rule names an existing path matcher; a path matcher has `pathRules` or
//! `routeRules`, not both; route rule priorities are unique, 0..=2147483647; a match rule has
//! exactly one path match and each header or query match exactly one kind; for the classic load
//! balancer, backend services of scheme EXTERNAL, no `regexMatch`, `rangeMatch`, `headerAction`
//! or route actions other than `urlRewrite`; one `loadBalancingScheme` for all its services,
//! `load_balancing_schemes`), plus `validate` and the URL map's `tests`, routed
//! by the data plane's own matcher.

use std::collections::HashSet;

use serde_json::{json, Value};

use crate::dataplane::url_map::{normalize_path, RequestView, RouteAction, UrlMapTable};
use crate::errors::ApiError;
use crate::resources::{load_balancing_schemes, Prepare};
use crate::snapshot::key_from_url;
use crate::validate::{self, Obj};

const REDIRECT_CODES: &[&str] = &[
    "MOVED_PERMANENTLY_DEFAULT",
    "FOUND",
    "SEE_OTHER",
    "TEMPORARY_REDIRECT",
    "PERMANENT_REDIRECT",
];
const SERVICES: &[&str] = &["backendServices"];

/// Validates a URL map and normalises every service reference.
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    validate::opt_str(r, "resource", "description")?;
    default_action(cx, r, "resource", "defaultService")?;
    let mut matcher_names = HashSet::new();
    if let Some(pms) = validate::array_mut(r, "resource", "pathMatchers")? {
        for (i, pm) in pms.iter_mut().enumerate() {
            let prefix = format!("resource.pathMatchers[{i}]");
            let o = as_obj(pm, &prefix)?;
            let name = validate::req_str(o, &prefix, "name")?.to_string();
            validate::check_name(&format!("{prefix}.name"), &name)?;
            if !matcher_names.insert(name.clone()) {
                return Err(ApiError::invalid_value(
                    &format!("{prefix}.name"),
                    &name,
                    "Duplicate path matcher name.",
                ));
            }
            default_action(cx, o, &prefix, "defaultService")?;
            let mut seen = HashSet::new();
            if let Some(rules) = validate::array_mut(o, &prefix, "pathRules")? {
                for (j, rule) in rules.iter_mut().enumerate() {
                    let rp = format!("{prefix}.pathRules[{j}]");
                    let ro = as_obj(rule, &rp)?;
                    let paths = validate::str_list(ro, &rp, "paths")?;
                    if paths.is_empty() {
                        return Err(ApiError::required(&format!("{rp}.paths")));
                    }
                    for (k, p) in paths.iter().enumerate() {
                        check_path(&format!("{rp}.paths[{k}]"), p)?;
                        if !seen.insert(p.clone()) {
                            return Err(ApiError::invalid_value(
                                &format!("{rp}.paths[{k}]"),
                                p,
                                "Duplicate path in path matcher.",
                            ));
                        }
                    }
                    rule_action(cx, ro, &rp, "service")?;
                }
            }
            let has_path_rules = o
                .get("pathRules")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
            if let Some(rules) = validate::array_mut(o, &prefix, "routeRules")? {
                if has_path_rules && !rules.is_empty() {
                    return Err(ApiError::invalid_value(
                        &format!("{prefix}.routeRules"),
                        "",
                        "Within a given pathMatcher, only one of pathRules or routeRules must be set.",
                    ));
                }
                let mut priorities = HashSet::new();
                for (j, rule) in rules.iter_mut().enumerate() {
                    let rp = format!("{prefix}.routeRules[{j}]");
                    let ro = as_obj(rule, &rp)?;
                    // `null` is unset: int_field removes it, so presence is checked after.
                    validate::int_field(ro, &rp, "priority", 0, 2_147_483_647, None)?;
                    let Some(priority) = ro.get("priority").map(Value::to_string) else {
                        return Err(ApiError::required(&format!("{rp}.priority")));
                    };
                    if !priorities.insert(priority.clone()) {
                        return Err(ApiError::invalid_value(
                            &format!("{rp}.priority"),
                            &priority,
                            "You cannot configure two or more routeRules with the same priority.",
                        ));
                    }
                    if let Some(matches) = validate::array_mut(ro, &rp, "matchRules")? {
                        for (k, m) in matches.iter_mut().enumerate() {
                            let mp = format!("{rp}.matchRules[{k}]");
                            match_rule(as_obj(m, &mp)?, &mp)?;
                        }
                    }
                    rule_action(cx, ro, &rp, "service")?;
                }
            }
        }
    }
    let mut hosts_seen = HashSet::new();
    if let Some(hrs) = validate::array_mut(r, "resource", "hostRules")? {
        for (i, hr) in hrs.iter_mut().enumerate() {
            let prefix = format!("resource.hostRules[{i}]");
            let o = as_obj(hr, &prefix)?;
            let hosts = validate::str_list(o, &prefix, "hosts")?;
            if hosts.is_empty() {
                return Err(ApiError::required(&format!("{prefix}.hosts")));
            }
            for (k, h) in hosts.iter().enumerate() {
                check_host(&format!("{prefix}.hosts[{k}]"), h)?;
                if !hosts_seen.insert(h.clone()) {
                    return Err(ApiError::invalid_value(
                        &format!("{prefix}.hosts[{k}]"),
                        h,
                        "Duplicate host in host rules.",
                    ));
                }
            }
            let pm = validate::req_str(o, &prefix, "pathMatcher")?;
            if !matcher_names.contains(pm) {
                return Err(ApiError::invalid_value(
                    &format!("{prefix}.pathMatcher"),
                    pm,
                    "The host rule names a path matcher that does not exist in pathMatchers.",
                ));
            }
        }
    }
    load_balancing_schemes::check_url_map(cx, r)?;
    classic_limits(cx, r)?;
    run_tests(r)
}

/// Exactly one of `kinds` set in `o` (a string, or any value for `rangeMatch`/`presentMatch`).
fn exactly_one(o: &Obj, prefix: &str, kinds: &[&str]) -> Result<(), ApiError> {
    let set: Vec<&&str> = kinds
        .iter()
        .filter(|k| o.get(**k).is_some_and(|v| !v.is_null()))
        .collect();
    if set.len() == 1 {
        return Ok(());
    }
    Err(ApiError::invalid_value(
        prefix,
        &set.iter()
            .map(|k| k.to_string())
            .collect::<Vec<_>>()
            .join(","),
        &format!("Exactly one of {} must be set.", kinds.join(", ")),
    ))
}

/// `HttpRouteRuleMatch`: one of prefixMatch, fullPathMatch, regexMatch, pathTemplateMatch;
/// prefix and full paths start with `/` and are 1 to 1024 characters; no ignoreCase with a
/// regexMatch; each header match names a header and sets one kind; each query match names a
/// parameter and sets one of presentMatch, exactMatch, regexMatch.
fn match_rule(m: &mut Obj, mp: &str) -> Result<(), ApiError> {
    exactly_one(
        m,
        mp,
        &[
            "prefixMatch",
            "fullPathMatch",
            "regexMatch",
            "pathTemplateMatch",
        ],
    )?;
    for k in ["prefixMatch", "fullPathMatch", "pathTemplateMatch"] {
        if let Some(v) = validate::opt_str(m, mp, k)? {
            if !v.starts_with('/') || v.len() > 1024 {
                return Err(ApiError::invalid_value(
                    &validate::path(mp, k),
                    v,
                    "Must start with '/' and be 1 to 1024 characters.",
                ));
            }
        }
    }
    valid_regex(m, mp)?;
    validate::bool_field(m, mp, "ignoreCase", None)?;
    if m.get("regexMatch").is_some() && m.get("ignoreCase").is_some_and(|v| v == true) {
        return Err(ApiError::invalid_value(
            &validate::path(mp, "ignoreCase"),
            "true",
            "ignoreCase must not be used with regexMatch.",
        ));
    }
    if let Some(hms) = validate::array_mut(m, mp, "headerMatches")? {
        for (i, h) in hms.iter_mut().enumerate() {
            let hp = format!("{mp}.headerMatches[{i}]");
            let ho = as_obj(h, &hp)?;
            validate::req_str(ho, &hp, "headerName")?;
            exactly_one(
                ho,
                &hp,
                &[
                    "exactMatch",
                    "prefixMatch",
                    "suffixMatch",
                    "regexMatch",
                    "presentMatch",
                    "rangeMatch",
                ],
            )?;
            valid_regex(ho, &hp)?;
        }
    }
    if let Some(qms) = validate::array_mut(m, mp, "queryParameterMatches")? {
        for (i, q) in qms.iter_mut().enumerate() {
            let qp = format!("{mp}.queryParameterMatches[{i}]");
            let qo = as_obj(q, &qp)?;
            validate::req_str(qo, &qp, "name")?;
            exactly_one(qo, &qp, &["presentMatch", "exactMatch", "regexMatch"])?;
            valid_regex(qo, &qp)?;
        }
    }
    Ok(())
}

/// `regexMatch`, when set, "must be a valid RE2 regular expression" (Compute API reference:
/// HttpRouteRuleMatch, HttpHeaderMatch, HttpQueryParameterMatch); the data plane compiles it
/// with the RE2-syntax `regex` crate, so what it cannot compile is refused here, not accepted
/// and then left unserved.
fn valid_regex(m: &Obj, prefix: &str) -> Result<(), ApiError> {
    let Some(re) = validate::opt_str(m, prefix, "regexMatch")? else {
        return Ok(());
    };
    regex::Regex::new(&format!("^(?:{re})$")).map_err(|e| {
        ApiError::invalid_value(
            &validate::path(prefix, "regexMatch"),
            re,
            &format!("Must be a valid RE2 regular expression: {e}"),
        )
    })?;
    Ok(())
}

/// The classic Application Load Balancer (backend services of loadBalancingScheme EXTERNAL, the
/// default): regular expressions "can only be used when the loadBalancingScheme is set to
/// INTERNAL_SELF_MANAGED, EXTERNAL_MANAGED (regional scope) or INTERNAL_MANAGED"; rangeMatch and
/// headerAction are "not supported for load balancers that have loadBalancingScheme set to
/// EXTERNAL"; and its URL maps "only support the urlRewrite action" in a route action (Compute
/// API reference: HttpHeaderMatch, HttpRouteRuleMatch, HttpQueryParameterMatch, HttpRouteRule).
fn classic_limits(cx: &Prepare<'_>, r: &Obj) -> Result<(), ApiError> {
    let um = Value::Object(r.clone());
    let mut services = Vec::new();
    collect_services(&um, &mut services);
    let classic = services.iter().any(|url| {
        key_from_url(url)
            .and_then(|k| cx.state.resources.get(&k))
            .is_some_and(|bs| {
                bs.get("loadBalancingScheme")
                    .and_then(Value::as_str)
                    .unwrap_or("EXTERNAL")
                    == "EXTERNAL"
            })
    });
    if !classic {
        return Ok(());
    }
    let refuse = |field: String, what: &str| {
        Err(ApiError::invalid_value(
            &field,
            what,
            &format!("{what} is not supported for load balancers that have loadBalancingScheme set to EXTERNAL (the classic Application Load Balancer)."),
        ))
    };
    for (i, pm) in um["pathMatchers"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let prefix = format!("resource.pathMatchers[{i}]");
        for (key, rules) in [
            ("routeRules", &pm["routeRules"]),
            ("pathRules", &pm["pathRules"]),
        ] {
            for (j, rule) in rules.as_array().into_iter().flatten().enumerate() {
                let rp = format!("{prefix}.{key}[{j}]");
                if rule.get("headerAction").is_some() {
                    return refuse(format!("{rp}.headerAction"), "headerAction");
                }
                if let Some(ra) = rule.get("routeAction").and_then(Value::as_object) {
                    if let Some(other) = ra.keys().find(|k| k.as_str() != "urlRewrite") {
                        return refuse(format!("{rp}.routeAction.{other}"), other);
                    }
                }
                for (k, m) in rule["matchRules"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    let mp = format!("{rp}.matchRules[{k}]");
                    if m.get("regexMatch").is_some() {
                        return refuse(format!("{mp}.regexMatch"), "regexMatch");
                    }
                    for (h, hm) in m["headerMatches"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .enumerate()
                    {
                        for what in ["regexMatch", "rangeMatch"] {
                            if hm.get(what).is_some() {
                                return refuse(format!("{mp}.headerMatches[{h}].{what}"), what);
                            }
                        }
                    }
                    for (q, qm) in m["queryParameterMatches"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .enumerate()
                    {
                        if qm.get("regexMatch").is_some() {
                            return refuse(
                                format!("{mp}.queryParameterMatches[{q}].regexMatch"),
                                "regexMatch",
                            );
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// Every backend service URL the URL map names (default, path and route rules, weighted).
fn collect_services(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                match (k.as_str(), x) {
                    ("defaultService" | "service" | "backendService", Value::String(s)) => {
                        out.push(s.clone())
                    }
                    _ => collect_services(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_services(x, out)),
        _ => {}
    }
}

fn as_obj<'a>(v: &'a mut Value, prefix: &str) -> Result<&'a mut Obj, ApiError> {
    let shown = validate::show(v);
    v.as_object_mut()
        .ok_or_else(|| ApiError::invalid_value(prefix, &shown, "Expected an object."))
}

/// A default action: `defaultService`, `defaultUrlRedirect` or `defaultRouteAction` (one required).
fn default_action(
    cx: &Prepare<'_>,
    o: &mut Obj,
    prefix: &str,
    service_key: &str,
) -> Result<(), ApiError> {
    let svc = cx.ref_field(o, prefix, service_key, SERVICES)?;
    let redirect = redirect(o, prefix, "defaultUrlRedirect")?;
    let route = route_action(cx, o, prefix, "defaultRouteAction")?;
    match (svc.is_some(), redirect, route) {
        (false, false, false) => Err(ApiError::required(&validate::path(prefix, service_key))),
        (true, true, _) => Err(ApiError::invalid_value(
            &validate::path(prefix, "defaultUrlRedirect"),
            "",
            "Only one of defaultService and defaultUrlRedirect may be set.",
        )),
        _ => Ok(()),
    }
}

/// A rule's action: `service`, `urlRedirect` or `routeAction` (one required).
fn rule_action(
    cx: &Prepare<'_>,
    o: &mut Obj,
    prefix: &str,
    service_key: &str,
) -> Result<(), ApiError> {
    let svc = cx.ref_field(o, prefix, service_key, SERVICES)?;
    let redirect = redirect(o, prefix, "urlRedirect")?;
    let route = route_action(cx, o, prefix, "routeAction")?;
    if svc.is_none() && !redirect && !route {
        return Err(ApiError::required(&validate::path(prefix, service_key)));
    }
    Ok(())
}

fn redirect(o: &mut Obj, prefix: &str, key: &str) -> Result<bool, ApiError> {
    let p = validate::path(prefix, key);
    let Some(rd) = validate::object_mut(o, prefix, key, false)? else {
        return Ok(false);
    };
    validate::enum_field(
        rd,
        &p,
        "redirectResponseCode",
        REDIRECT_CODES,
        Some("MOVED_PERMANENTLY_DEFAULT"),
    )?;
    validate::bool_field(rd, &p, "httpsRedirect", Some(false))?;
    validate::bool_field(rd, &p, "stripQuery", Some(false))?;
    for k in ["pathRedirect", "prefixRedirect"] {
        if let Some(v) = validate::opt_str(rd, &p, k)? {
            if !v.starts_with('/') {
                return Err(ApiError::invalid_value(
                    &validate::path(&p, k),
                    v,
                    "Must start with '/'.",
                ));
            }
        }
    }
    Ok(true)
}

fn route_action(cx: &Prepare<'_>, o: &mut Obj, prefix: &str, key: &str) -> Result<bool, ApiError> {
    let p = validate::path(prefix, key);
    let Some(ra) = validate::object_mut(o, prefix, key, false)? else {
        return Ok(false);
    };
    if let Some(wbs) = validate::array_mut(ra, &p, "weightedBackendServices")? {
        for (i, w) in wbs.iter_mut().enumerate() {
            let wp = format!("{p}.weightedBackendServices[{i}]");
            let wo = as_obj(w, &wp)?;
            cx.ref_field(wo, &wp, "backendService", SERVICES)?;
            validate::int_field(wo, &wp, "weight", 0, 1000, None)?;
        }
    }
    Ok(true)
}

/// A path rule path: starts with `/`, no `?` or `#`, and `*` only as the final `/*`.
pub fn check_path(field: &str, p: &str) -> Result<(), ApiError> {
    let why = if !p.starts_with('/') {
        Some("A path must start with '/'.")
    } else if p.contains(['?', '#']) {
        Some("A path must not contain '?' or '#'.")
    } else if p.contains('*') && !(p.ends_with("/*") && p.matches('*').count() == 1) {
        Some("'*' is only allowed at the end of a path, following a '/' (as in /foo/*).")
    } else if p.len() > 1024 {
        Some("A path is at most 1024 characters.")
    } else {
        None
    };
    match why {
        Some(w) => Err(ApiError::invalid_value(field, p, w)),
        None => Ok(()),
    }
}

/// A host pattern: a host name with optional `:port`; `*` may only be the first character, and
/// must then be followed by `-` or `.` (or stand alone).
pub fn check_host(field: &str, h: &str) -> Result<(), ApiError> {
    let host = h
        .rsplit_once(':')
        .map(|(host, port)| if port.parse::<u16>().is_ok() { host } else { h })
        .unwrap_or(h);
    let rest = host.strip_prefix('*');
    let valid_chars = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    };
    let ok = match rest {
        Some("") => true,
        Some(r) => (r.starts_with('.') || r.starts_with('-')) && valid_chars(r) && !r.contains('*'),
        None => valid_chars(host),
    };
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid_value(field, h, "A host must be a valid host name, optionally starting with '*' followed by '-' or '.'."))
    }
}

/// The backend service a request for `host` and `path` goes to, decided by the data plane's
/// own matcher ([`UrlMapTable`]), so a URL map's `tests` pass exactly when real requests route
/// that way. `None` when the match ends in a redirect, or the URL map does not compile.
pub fn route(um: &Value, host: &str, path: &str) -> Option<String> {
    let mut services: Vec<String> = Vec::new();
    let table = UrlMapTable::compile(um, &mut |url: &str| {
        let i = services.iter().position(|s| s == url).unwrap_or_else(|| {
            services.push(url.to_string());
            services.len() - 1
        });
        Ok(i)
    })
    .ok()?;
    let headers = http::HeaderMap::new();
    let (path, query) = path
        .split_once('?')
        .map_or((path, None), |(p, q)| (p, Some(q)));
    let host = host.split(':').next().unwrap_or(host);
    let path = normalize_path(path);
    let route = table.route(&RequestView {
        method: "GET",
        host,
        path: &path,
        query,
        headers: &headers,
    });
    match route.action {
        RouteAction::Forward(f) => services.get(f.pick(0)).cloned(),
        _ => None,
    }
}

/// Runs the url map's `tests` (host, path, expected service). Errors: 400 `invalid` naming the
/// failing test.
fn run_tests(r: &Obj) -> Result<(), ApiError> {
    let um = Value::Object(r.clone());
    for (i, t) in um["tests"].as_array().into_iter().flatten().enumerate() {
        let (host, path) = (
            t["host"].as_str().unwrap_or_default(),
            t["path"].as_str().unwrap_or("/"),
        );
        let Some(want) = t["service"].as_str() else {
            continue;
        };
        let got = route(&um, host, path);
        if got.as_deref().and_then(key_from_url) != key_from_url(want) {
            return Err(ApiError::invalid_value(
                &format!("resource.tests[{i}]"),
                &format!("{host}{path}"),
                &format!(
                    "Test failed: expected service '{want}' but got '{}'.",
                    got.unwrap_or_default()
                ),
            ));
        }
    }
    Ok(())
}

/// `urlMaps.validate`: body `{"resource": UrlMap}`. Returns
/// `{"result":{"loadSucceeded":bool,"loadErrors":[...],"testPassed":bool}}`; never writes.
pub fn validate_verb(cx: &Prepare<'_>, body: &Obj) -> Value {
    let mut resource = match body.get("resource") {
        Some(Value::Object(o)) => o.clone(),
        _ => {
            return json!({"result": {"loadSucceeded": false, "loadErrors": ["Required field 'resource' not specified"], "testPassed": false}})
        }
    };
    match prepare(cx, &mut resource) {
        Ok(()) => json!({"result": {"loadSucceeded": true, "testPassed": true}}),
        Err(e) => {
            json!({"result": {"loadSucceeded": false, "loadErrors": [e.message], "testPassed": false}})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_patterns() {
        for ok in ["/", "/foo", "/foo/*", "/*", "/a/b/c/*"] {
            assert!(check_path("f", ok).is_ok(), "{ok}");
        }
        for bad in ["foo", "/foo*", "/*/bar", "/a/*/*", "/a?b", "/a#b", "/fo*o/"] {
            assert_eq!(
                check_path("f", bad).unwrap_err().field.as_deref(),
                Some("f"),
                "{bad}"
            );
        }
    }

    #[test]
    fn host_patterns() {
        for ok in [
            "example.com",
            "*",
            "*.example.com",
            "*-foo.example.com",
            "example.com:8080",
        ] {
            assert!(check_host("f", ok).is_ok(), "{ok}");
        }
        for bad in ["Example.com", "*example.com", "foo.*.com", "a_b.com", ""] {
            assert!(check_host("f", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn routing_prefers_exact_host_and_longest_path() {
        let um = json!({
            "defaultService": "d",
            "hostRules": [{"hosts": ["*.example.com"], "pathMatcher": "w"}, {"hosts": ["a.example.com"], "pathMatcher": "a"}],
            "pathMatchers": [
                {"name": "w", "defaultService": "wd"},
                {"name": "a", "defaultService": "ad", "pathRules": [{"paths": ["/api/*"], "service": "api"}, {"paths": ["/api/v2/*"], "service": "v2"}, {"paths": ["/x"], "service": "x"}]}
            ]
        });
        assert_eq!(
            route(&um, "a.example.com", "/api/v2/q").as_deref(),
            Some("v2")
        );
        assert_eq!(
            route(&um, "a.example.com", "/api/q").as_deref(),
            Some("api")
        );
        assert_eq!(route(&um, "a.example.com", "/x").as_deref(), Some("x"));
        assert_eq!(route(&um, "a.example.com", "/x/y").as_deref(), Some("ad"));
        assert_eq!(route(&um, "b.example.com", "/").as_deref(), Some("wd"));
        assert_eq!(route(&um, "other", "/").as_deref(), Some("d"));
    }
}
