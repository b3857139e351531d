//! What the classic Application Load Balancer's URL maps may not hold (Compute API v1
//! reference, `urlMaps`), checked once the URL map's services are known.

use serde_json::Value;

use crate::errors::ApiError;
use crate::resources::references::Prepare;
use crate::snapshot::key_from_url;
use crate::validate::Obj;

/// The classic Application Load Balancer (backend services of loadBalancingScheme EXTERNAL, the
/// default): regular expressions "can only be used when the loadBalancingScheme is set to
/// INTERNAL_SELF_MANAGED, EXTERNAL_MANAGED (regional scope) or INTERNAL_MANAGED"; rangeMatch and
/// headerAction are "not supported for load balancers that have loadBalancingScheme set to
/// EXTERNAL"; and its URL maps "only support the urlRewrite action" in a route action (Compute
/// API reference: HttpHeaderMatch, HttpRouteRuleMatch, HttpQueryParameterMatch, HttpRouteRule).
pub fn classic_limits(cx: &Prepare<'_>, r: &Obj) -> Result<(), ApiError> {
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
