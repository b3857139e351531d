//! `urlMaps` and `regionUrlMaps`: host rules, path matchers, path rules and route rules,
//! validated as the Compute API reference describes (paths start with `/`; `*` only as the
//! final `/*`; hosts may start with `*`; every host rule names an existing path matcher; a path
//! matcher has `pathRules` or `routeRules`, not both; route rule priorities are unique,
//! 0..=2147483647; a match rule has exactly one path match and each header or query match
//! exactly one kind; for the classic load balancer, backend services of scheme EXTERNAL, no
//! `regexMatch`, `rangeMatch`, `headerAction` or route actions other than `urlRewrite`; one
//! `loadBalancingScheme` for all its services, `load_balancing_schemes`), plus `validate` and
//! the URL map's `tests`, routed by the data plane's own matcher.
//!
//! Both scopes are the same resource, validated the same way; a regional URL map's services
//! must be regional backend services of its region (`resources::reference_scopes`).
//!
//! The parts: [`match_rules`] (what requests are matched on), [`actions`] (what a match does),
//! [`classic_limits`] (what the classic load balancer refuses).

pub mod actions;
pub mod classic_limits;
pub mod match_rules;

use std::collections::HashSet;

use gce_url_map::url_map::{normalize_path, RequestView, RouteAction, UrlMapTable};
use serde_json::{json, Value};

use crate::errors::ApiError;
use crate::resources::load_balancing_schemes;
use crate::resources::references::Prepare;
use crate::snapshot::key_from_url;
use crate::validate::{self, Obj};

use self::actions::{default_action, rule_action};
use self::classic_limits::classic_limits;
use self::match_rules::{check_host, check_path, match_rule};

/// Validates a URL map of either scope and normalises every service reference. Errors: 400
/// `invalid` naming the field, 404 for a service that does not exist.
pub fn prepare(cx: &Prepare<'_>, r: &mut Obj) -> Result<(), ApiError> {
    validate::opt_str(r, "resource", "description")?;
    default_action(cx, r, "resource", "defaultService")?;
    let mut matcher_names = HashSet::new();
    if let Some(pms) = validate::array_mut(r, "resource", "pathMatchers")? {
        for (i, pm) in pms.iter_mut().enumerate() {
            let prefix = format!("resource.pathMatchers[{i}]");
            let o = validate::object_item_mut(pm, &prefix)?;
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
                    let ro = validate::object_item_mut(rule, &rp)?;
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
                    let ro = validate::object_item_mut(rule, &rp)?;
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
                            match_rule(validate::object_item_mut(m, &mp)?, &mp)?;
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
            let o = validate::object_item_mut(hr, &prefix)?;
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
