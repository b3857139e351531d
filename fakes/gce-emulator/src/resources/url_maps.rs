//! `urlMaps`: host rules, path matchers and path rules, validated as the Compute reference
//! describes (paths start with `/`; `*` only as the final `/*`; hosts may start with `*`; every
//! host rule names an existing path matcher), plus `validate` and the url map's `tests`.

use std::collections::HashSet;

use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::resources::Prepare;
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
            if let Some(rules) = validate::array_mut(o, &prefix, "routeRules")? {
                for (j, rule) in rules.iter_mut().enumerate() {
                    let rp = format!("{prefix}.routeRules[{j}]");
                    let ro = as_obj(rule, &rp)?;
                    validate::int_field(ro, &rp, "priority", 0, 2_147_483_647, None)?;
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
    run_tests(r)
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

/// The backend service a request for `host` and `path` goes to: the host rule (exact host first,
/// then the longest matching wildcard), then the path matcher's longest matching path rule,
/// else the default service. `None` when the match ends in a redirect or route action.
pub fn route(um: &Value, host: &str, path: &str) -> Option<String> {
    let host = host.split(':').next().unwrap_or(host);
    let mut best: Option<(usize, &str)> = None;
    for hr in um["hostRules"].as_array().into_iter().flatten() {
        for h in hr["hosts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            let h = h.split(':').next().unwrap_or(h);
            let score = if h == host {
                Some(usize::MAX)
            } else if h == "*" {
                Some(0)
            } else if let Some(suffix) = h.strip_prefix('*') {
                host.ends_with(suffix).then_some(suffix.len())
            } else {
                None
            };
            if let (Some(s), Some(pm)) = (score, hr["pathMatcher"].as_str()) {
                if best.is_none_or(|(b, _)| s > b) {
                    best = Some((s, pm));
                }
            }
        }
    }
    let Some((_, pm_name)) = best else {
        return um["defaultService"].as_str().map(str::to_string);
    };
    let pm = um["pathMatchers"]
        .as_array()?
        .iter()
        .find(|pm| pm["name"] == pm_name)?;
    let mut best_rule: Option<(usize, &Value)> = None;
    for rule in pm["pathRules"].as_array().into_iter().flatten() {
        for p in rule["paths"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            let len = match p.strip_suffix('*') {
                Some(prefix)
                    if path.starts_with(prefix) || path == prefix.trim_end_matches('/') =>
                {
                    Some(prefix.len())
                }
                None if p == path => Some(usize::MAX),
                _ => None,
            };
            if let Some(l) = len {
                if best_rule.is_none_or(|(b, _)| l > b) {
                    best_rule = Some((l, rule));
                }
            }
        }
    }
    match best_rule {
        Some((_, rule)) => rule["service"].as_str().map(str::to_string),
        None => pm["defaultService"].as_str().map(str::to_string),
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
