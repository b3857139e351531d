//! One `loadBalancingScheme` per load balancer: its forwarding rule, and the backend services
//! its target proxy reaches (through the URL map, or a target TCP/SSL proxy's `service`), share
//! one scheme. Google refuses a classic (`EXTERNAL`) part beside a global external Application
//! Load Balancer (`EXTERNAL_MANAGED`) part, and `INTERNAL_MANAGED` or `INTERNAL_SELF_MANAGED`
//! beside any other (Compute API v1 reference, `backendServices.loadBalancingScheme` and
//! `forwardingRules.loadBalancingScheme`: each scheme names one kind of load balancer; the
//! `urlMaps` resource: its backend services belong to one load balancer; the real API's answer
//! quoted at `rule_mismatch`, reported in
//! <https://github.com/GoogleCloudPlatform/cloud-foundation-fabric/issues/1065>).
//!
//! Checked where Google checks it: a forwarding rule's `insert` and `setTarget` (against the
//! services behind the target proxy), a URL map's `insert`, `update` and `patch` (its services
//! against each other, and against the forwarding rules already serving the URL map), and a
//! target HTTP(S) proxy's `setUrlMap` (the new URL map's services against the forwarding rules
//! serving the proxy: [`check_target_proxy`]). The scheme also decides whether a URL map may
//! hold `regexMatch` ([`regex_supported`]).

use serde_json::Value;

use crate::errors::ApiError;
use crate::resources::references::Prepare;
use crate::snapshot::key_from_url;
use crate::store::State;
use crate::validate::Obj;

/// A backend service reference found in a resource: the JSON path of the field
/// (`resource.pathMatchers[0].defaultService`), the reference as written, and the stored
/// service's scheme (services that do not exist are skipped: their reference is refused
/// elsewhere).
#[derive(Debug, Clone, PartialEq, Eq)]
struct ServiceRef {
    field: String,
    url: String,
    scheme: String,
}

/// The scheme of a stored backend service: its `loadBalancingScheme`, else the API's default
/// (`EXTERNAL` for global backend services, `INTERNAL` for regional ones).
fn scheme_of(key: &str, bs: &Value) -> String {
    match bs["loadBalancingScheme"].as_str() {
        Some(s) => s.to_string(),
        None if key.contains("/regions/") => "INTERNAL".into(),
        None => "EXTERNAL".into(),
    }
}

/// Every `defaultService`, `service` and `backendService` reference of `v` (a URL map, a
/// target TCP/SSL proxy) naming an existing backend service, in document order.
fn service_refs(state: &State, path: String, v: &Value, out: &mut Vec<ServiceRef>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                let field = format!("{path}.{k}");
                match (k.as_str(), x) {
                    ("defaultService" | "service" | "backendService", Value::String(url)) => {
                        let Some(key) =
                            key_from_url(url).filter(|k| k.contains("/backendServices/"))
                        else {
                            continue;
                        };
                        if let Some(bs) = state.resources.get(&key) {
                            out.push(ServiceRef {
                                field,
                                url: url.clone(),
                                scheme: scheme_of(&key, bs),
                            });
                        }
                    }
                    _ => service_refs(state, field, x, out),
                }
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                service_refs(state, format!("{path}[{i}]"), x, out);
            }
        }
        _ => {}
    }
}

/// The backend services behind the target proxy `target` (a URL): its URL map's, or its own
/// `service` (target TCP and SSL proxies).
fn services_behind(state: &State, target: &str) -> Vec<ServiceRef> {
    let get = |url: &str| key_from_url(url).and_then(|k| state.resources.get(&k).cloned());
    let Some(proxy) = get(target) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    match proxy["urlMap"].as_str().and_then(get) {
        Some(um) => service_refs(state, "urlMap".into(), &um, &mut out),
        None => service_refs(state, "target".into(), &proxy, &mut out),
    }
    out
}

/// The error Google answers for a forwarding rule whose scheme is not its backend services':
/// verbatim from a public report of the real API (GoogleCloudPlatform/cloud-foundation-fabric
/// issue 1065: "Invalid value for field 'resource.backendService': ''. Load balancing scheme
/// EXTERNAL_MANAGED does not match the backend service load balancing scheme EXTERNAL.").
fn rule_mismatch(rule_scheme: &str, service_scheme: &str) -> ApiError {
    ApiError::invalid_value(
        "resource.backendService",
        "",
        &format!(
            "Load balancing scheme {rule_scheme} does not match the backend service load balancing scheme {service_scheme}."
        ),
    )
}

/// Forwarding rule `insert` and `setTarget` (global and regional): `r` (normalised, with its
/// `loadBalancingScheme` and `target` URL) must have the scheme of every backend service
/// behind its target proxy. Errors: 400 `invalid` in Google's words (`rule_mismatch`).
pub fn check_forwarding_rule(cx: &Prepare<'_>, r: &Obj) -> Result<(), ApiError> {
    let scheme = r
        .get("loadBalancingScheme")
        .and_then(Value::as_str)
        .unwrap_or("EXTERNAL");
    let Some(target) = r.get("target").and_then(Value::as_str) else {
        return Ok(());
    };
    match services_behind(cx.state, target)
        .into_iter()
        .find(|s| s.scheme != scheme)
    {
        Some(s) => Err(rule_mismatch(scheme, &s.scheme)),
        None => Ok(()),
    }
}

/// URL map `insert`, `update` and `patch` (global and regional): every backend service of the
/// map has one scheme, and, when forwarding rules already serve the map (through a target
/// proxy), it is theirs. Errors: 400 `invalid` naming the field of the first service that
/// differs. No verbatim text of Google's answer to these two cases is public: the messages are
/// written in the style of `rule_mismatch`, which is.
pub fn check_url_map(cx: &Prepare<'_>, r: &Obj) -> Result<(), ApiError> {
    let mut refs = Vec::new();
    service_refs(
        cx.state,
        "resource".into(),
        &Value::Object(r.clone()),
        &mut refs,
    );
    let Some(first) = refs.first() else {
        return Ok(());
    };
    if let Some(other) = refs.iter().find(|s| s.scheme != first.scheme) {
        return Err(ApiError::invalid_value(
            &other.field,
            &other.url,
            &format!(
                "Load balancing scheme {} of the backend service does not match the load balancing scheme {} of the other backend services of the URL map.",
                other.scheme, first.scheme
            ),
        ));
    }
    check_regex(cx, r, &first.scheme)?;
    for proxy in cx.state.referrers(cx.key) {
        for rule in cx.state.referrers(proxy) {
            if !rule.contains("/forwardingRules/") {
                continue;
            }
            let Some(fr) = cx.state.resources.get(rule) else {
                continue;
            };
            let rule_scheme = fr["loadBalancingScheme"].as_str().unwrap_or("EXTERNAL");
            if rule_scheme != first.scheme {
                return Err(ApiError::invalid_value(
                    &first.field,
                    &first.url,
                    &format!(
                        "Load balancing scheme {} of the backend service does not match the load balancing scheme {rule_scheme} of forwarding rule '{rule}', which serves this URL map.",
                        first.scheme
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Target HTTP(S) proxy `insert` and `setUrlMap` (global and regional): `r` (normalised, its
/// `urlMap` a URL) may name only a URL map whose backend services have the scheme of every
/// forwarding rule already serving the proxy (none on `insert`), as a forwarding rule's
/// `setTarget` may name only such a proxy ([`check_forwarding_rule`]): otherwise `setUrlMap`
/// would join two load balancers of different schemes. A URL map without backend services (a
/// redirect) fits any rule. Errors: 400 `invalid` on `resource.urlMap`; no verbatim text of
/// Google's answer to this case is public, so the message is written in the style of
/// `rule_mismatch`, which is.
pub fn check_target_proxy(cx: &Prepare<'_>, r: &Obj) -> Result<(), ApiError> {
    let Some(url_map) = r.get("urlMap").and_then(Value::as_str) else {
        return Ok(());
    };
    let Some(um) = key_from_url(url_map).and_then(|k| cx.state.resources.get(&k)) else {
        return Ok(());
    };
    let mut refs = Vec::new();
    service_refs(cx.state, "urlMap".into(), um, &mut refs);
    let Some(first) = refs.first() else {
        return Ok(());
    };
    for rule in cx.state.referrers(cx.key) {
        if !rule.contains("/forwardingRules/") {
            continue;
        }
        let Some(fr) = cx.state.resources.get(rule) else {
            continue;
        };
        let rule_scheme = fr["loadBalancingScheme"].as_str().unwrap_or("EXTERNAL");
        if rule_scheme != first.scheme {
            return Err(ApiError::invalid_value(
                "resource.urlMap",
                url_map,
                &format!(
                    "Load balancing scheme {} of the backend services of the URL map does not match the load balancing scheme {rule_scheme} of forwarding rule '{rule}', which serves this target proxy.",
                    first.scheme
                ),
            ));
        }
    }
    Ok(())
}

/// Whether a URL map of backend services of `scheme` accepts `regexMatch` (in `matchRules`,
/// `headerMatches` and `queryParameterMatches`): "Regular expressions can only be used when the
/// loadBalancingScheme is set to INTERNAL_SELF_MANAGED, EXTERNAL_MANAGED (regional scope) or
/// INTERNAL_MANAGED" (Compute API v1 reference, `urlMaps` and `regionUrlMaps`,
/// `HttpRouteRuleMatch.regexMatch`, `HttpHeaderMatch.regexMatch`,
/// `HttpQueryParameterMatch.regexMatch`). `regional`: a `regionUrlMaps` URL map. The operator
/// decides with the same rule (`gclb_translate::translate::ncp::regex_supported`).
pub fn regex_supported(scheme: &str, regional: bool) -> bool {
    match scheme {
        "INTERNAL_MANAGED" | "INTERNAL_SELF_MANAGED" => true,
        "EXTERNAL_MANAGED" => regional,
        _ => false,
    }
}

/// The JSON path of the first `regexMatch` inside `v`.
fn first_regex(path: String, v: &Value) -> Option<String> {
    match v {
        Value::Object(o) => o.iter().find_map(|(k, x)| {
            let field = format!("{path}.{k}");
            if k == "regexMatch" {
                Some(field)
            } else {
                first_regex(field, x)
            }
        }),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, x)| first_regex(format!("{path}[{i}]"), x)),
        _ => None,
    }
}

/// Refuses `regexMatch` on a global URL map of EXTERNAL_MANAGED backend services (the global
/// external Application Load Balancer; [`regex_supported`]). The classic scheme EXTERNAL is
/// refused by `url_maps` with its other limits. No verbatim error of the real API for this case
/// is public: the message is the reference's own sentence.
fn check_regex(cx: &Prepare<'_>, r: &Obj, scheme: &str) -> Result<(), ApiError> {
    let regional = cx.key.contains("/regions/");
    if scheme != "EXTERNAL_MANAGED" || regex_supported(scheme, regional) {
        return Ok(());
    }
    let um = Value::Object(r.clone());
    match first_regex("resource".into(), &um) {
        Some(field) => {
            let value = field
                .strip_prefix("resource")
                .and_then(|p| pointer_of(&um, p))
                .unwrap_or_default();
            Err(ApiError::invalid_value(
                &field,
                &value,
                "Regular expressions can only be used when the loadBalancingScheme is set to INTERNAL_SELF_MANAGED, EXTERNAL_MANAGED (regional scope) or INTERNAL_MANAGED.",
            ))
        }
        None => Ok(()),
    }
}

/// The string at a field path such as `.pathMatchers[0].routeRules[1].matchRules[0].regexMatch`.
fn pointer_of(v: &Value, path: &str) -> Option<String> {
    let pointer: String = path
        .chars()
        .filter(|c| *c != ']')
        .map(|c| if c == '.' || c == '[' { '/' } else { c })
        .collect();
    v.pointer(&pointer)
        .and_then(Value::as_str)
        .map(str::to_string)
}

#[cfg(test)]
#[path = "load_balancing_schemes_tests.rs"]
mod tests;
