//! Network Services API v1 `tlsRoutes` (`projects/{p}/locations/global/tlsRoutes/{name}`):
//! SNI-based routing of TLS connections to weighted backend services.
//!
//! Fields, as the Network Services API v1 reference defines `TlsRoute`: `name` (full resource
//! name, output), `selfLink`, `createTime`, `updateTime` (output), `description` (at most 1024
//! characters), `rules[]` (required; "the action taken will be the first rule to match"),
//! `rules[].matches[]` (required, OR-ed; each needs `sniHost` and/or `alpn`; at most 100 SNI hosts
//! and 5 ALPN values over all matches; "partial wildcards are not supported, and values like
//! `*w.example.com` are invalid"), `rules[].action.destinations[]` (required; `serviceName` a
//! backend service, `weight` "the proportion ... weight/Sum(weights in destinations)"),
//! `rules[].action.idleTimeout` (a duration, default 1 hour), `meshes[]`, `gateways[]`,
//! `targetProxies[]` (target TCP proxies the route attaches to), `labels`.
//!
//! The emulator serves global routes attached to `targetProxies`; `meshes` and `gateways`
//! (Traffic Director) are refused with 400 rather than accepted and ignored.

use serde_json::{Map, Value};

use crate::errors::ApiError;
use crate::snapshot::ResourceKey;
use crate::store::State;
use crate::validate::{self, Obj};

/// Most SNI hosts over all matches of one route (reference: "Up to 100 sni hosts across all
/// matches can be set").
pub const MAX_SNI_HOSTS: usize = 100;
/// Most ALPN values over all matches of one route.
pub const MAX_ALPNS: usize = 5;

/// The store key of a route: `projects/{project}/locations/{location}/tlsRoutes/{name}`.
pub fn key(project: &str, location: &str, name: &str) -> ResourceKey {
    format!("projects/{project}/locations/{location}/tlsRoutes/{name}")
}

/// Whether `key` is the key of a tlsRoute.
pub fn is_tls_route(key: &str) -> bool {
    key.contains("/locations/") && key.contains("/tlsRoutes/")
}

/// Validates a route body for `key` and normalises it into the stored resource: output-only
/// fields dropped, `name` set to the full resource name. `state` resolves references.
///
/// Errors: 400 `invalid` naming the field (missing rules, matches or destinations, a partial
/// wildcard, a reference of the wrong form, `meshes`/`gateways`), 404 for a backend service or
/// target TCP proxy that does not exist.
pub fn prepare(state: &State, project: &str, key: &str, body: &mut Obj) -> Result<(), ApiError> {
    for f in ["name", "selfLink", "createTime", "updateTime"] {
        body.remove(f);
    }
    if let Some(d) = validate::opt_str(body, "tls_route", "description")? {
        if d.chars().count() > 1024 {
            return Err(ApiError::invalid_value(
                "tls_route.description",
                "(too long)",
                "Max length is 1024 characters.",
            ));
        }
    }
    for f in ["meshes", "gateways"] {
        if !validate::str_list(body, "tls_route", f)?.is_empty() {
            return Err(ApiError::invalid_value(
                &format!("tls_route.{f}"),
                f,
                "Traffic Director meshes and gateways are not emulated; attach the route to targetProxies (target TCP proxies).",
            ));
        }
    }
    let proxies = validate::str_list(body, "tls_route", "targetProxies")?;
    for (i, p) in proxies.iter().enumerate() {
        compute_ref(
            state,
            project,
            &format!("tls_route.target_proxies[{i}]"),
            p,
            "targetTcpProxies",
        )?;
    }
    if let Some(labels) = body.get("labels") {
        if !labels
            .as_object()
            .is_some_and(|m| m.values().all(Value::is_string))
        {
            return Err(ApiError::invalid_value(
                "tls_route.labels",
                &validate::show(labels),
                "Expected a map of strings.",
            ));
        }
    }
    let rules = validate::array_mut(body, "tls_route", "rules")?
        .filter(|r| !r.is_empty())
        .ok_or_else(|| ApiError::required("tls_route.rules"))?;
    let (mut snis, mut alpns) = (0, 0);
    for (i, rule) in rules.iter_mut().enumerate() {
        let prefix = format!("tls_route.rules[{i}]");
        let rule = object(rule, &prefix)?;
        let matches = validate::array_mut(rule, &prefix, "matches")?
            .filter(|m| !m.is_empty())
            .ok_or_else(|| ApiError::required(&format!("{prefix}.matches")))?;
        for (j, m) in matches.iter_mut().enumerate() {
            let mp = format!("{prefix}.matches[{j}]");
            let m = object(m, &mp)?;
            let hosts = validate::str_list(m, &mp, "sniHost")?;
            let alpn = validate::str_list(m, &mp, "alpn")?;
            if hosts.is_empty() && alpn.is_empty() {
                return Err(ApiError::invalid_value(
                    &mp,
                    "{}",
                    "At least one of sni_host and alpn is required.",
                ));
            }
            for h in &hosts {
                check_sni_host(&format!("{mp}.sni_host"), h)?;
            }
            snis += hosts.len();
            alpns += alpn.len();
        }
        let ap = format!("{prefix}.action");
        let action = rule
            .get_mut("action")
            .ok_or_else(|| ApiError::required(&ap))?;
        let action = object(action, &ap)?;
        if let Some(t) = validate::opt_str(action, &ap, "idleTimeout")? {
            if parse_duration(t).is_none() {
                return Err(ApiError::invalid_value(
                    &format!("{ap}.idle_timeout"),
                    t,
                    "Expected a duration in seconds such as \"3600s\".",
                ));
            }
        }
        let dests = validate::array_mut(action, &ap, "destinations")?
            .filter(|d| !d.is_empty())
            .ok_or_else(|| ApiError::required(&format!("{ap}.destinations")))?;
        for (k, d) in dests.iter_mut().enumerate() {
            let dp = format!("{ap}.destinations[{k}]");
            let d = object(d, &dp)?;
            let service = validate::req_str(d, &dp, "serviceName")?.to_string();
            let bs = compute_ref(
                state,
                project,
                &format!("{dp}.service_name"),
                &service,
                "backendServices",
            )?;
            let protocol = state
                .resources
                .get(&bs)
                .and_then(|v| v["protocol"].as_str().map(str::to_string));
            if !matches!(protocol.as_deref(), Some("TCP" | "SSL")) {
                return Err(ApiError::invalid_value(
                    &format!("{dp}.service_name"),
                    &service,
                    "A TLS route's destination must be a backend service of protocol TCP or SSL.",
                ));
            }
            validate::int_field(d, &dp, "weight", 0, i64::from(i32::MAX), None)?;
        }
    }
    if snis > MAX_SNI_HOSTS || alpns > MAX_ALPNS {
        return Err(ApiError::invalid_value(
            "tls_route.rules",
            &format!("{snis} SNI hosts, {alpns} ALPN values"),
            "Up to 100 sni hosts and 5 alpns across all matches can be set.",
        ));
    }
    body.insert("name".into(), Value::String(key.to_string()));
    Ok(())
}

fn object<'a>(v: &'a mut Value, prefix: &str) -> Result<&'a mut Map<String, Value>, ApiError> {
    let shown = validate::show(v);
    v.as_object_mut()
        .ok_or_else(|| ApiError::invalid_value(prefix, &shown, "Expected an object."))
}

/// `*.example.com` or a plain host name; "partial wildcards are not supported".
fn check_sni_host(field: &str, h: &str) -> Result<(), ApiError> {
    let rest = h.strip_prefix("*.").unwrap_or(h);
    let ok = !rest.is_empty()
        && rest.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid_value(
            field,
            h,
            "Expected a host name or a wildcard such as *.example.com; partial wildcards like *w.example.com are not supported.",
        ))
    }
}

/// A `google.protobuf.Duration` in JSON (`"3600s"`, `"1.5s"`) as seconds.
pub fn parse_duration(s: &str) -> Option<f64> {
    s.strip_suffix('s')?
        .parse::<f64>()
        .ok()
        .filter(|x| *x >= 0.0)
}

/// Resolves a Network Services reference to a Compute resource of `collection` in this project
/// (`projects/{p}/locations/global/{collection}/{name}`, the form the API documents, or a Compute
/// URL) to its store key; 404 when it does not exist.
fn compute_ref(
    state: &State,
    project: &str,
    field: &str,
    reference: &str,
    collection: &str,
) -> Result<ResourceKey, ApiError> {
    let parts: Vec<&str> = reference
        .rsplit_once("/projects/")
        .map_or(reference, |(_, r)| r)
        .trim_start_matches("projects/")
        .split('/')
        .collect();
    let key = match parts.as_slice() {
        [p, "locations", "global", c, name] | [p, "global", c, name] if *c == collection => {
            format!("projects/{p}/global/{collection}/{name}")
        }
        _ => {
            return Err(ApiError::invalid_value(
                field,
                reference,
                &format!("Expected projects/{project}/locations/global/{collection}/NAME."),
            ))
        }
    };
    if !state.resources.contains_key(&key) {
        let mut e = ApiError::not_found(&key);
        e.field = Some(field.to_string());
        return Err(e);
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state() -> State {
        let mut s = State::new("http://h/compute/v1/".into());
        s.put(
            "projects/p/global/backendServices/tcp".into(),
            json!({"name": "tcp", "protocol": "TCP"}),
        );
        s.put(
            "projects/p/global/backendServices/web".into(),
            json!({"name": "web", "protocol": "HTTP"}),
        );
        s.put(
            "projects/p/global/targetTcpProxies/tp".into(),
            json!({"name": "tp"}),
        );
        s
    }

    fn route(sni: &str, service: &str) -> Obj {
        json!({
            "targetProxies": ["projects/p/locations/global/targetTcpProxies/tp"],
            "rules": [{"matches": [{"sniHost": [sni]}],
                       "action": {"destinations": [{"serviceName": format!("projects/p/locations/global/backendServices/{service}"), "weight": 3}]}}]
        })
        .as_object()
        .cloned()
        .unwrap()
    }

    #[test]
    fn valid_route_is_named_and_kept() {
        let s = state();
        let mut r = route("*.example.com", "tcp");
        r.insert("createTime".into(), json!("x"));
        prepare(&s, "p", &key("p", "global", "r"), &mut r).unwrap();
        assert_eq!(r["name"], "projects/p/locations/global/tlsRoutes/r");
        assert!(r.get("createTime").is_none());
    }

    #[test]
    fn refuses_what_the_api_refuses() {
        let s = state();
        let k = key("p", "global", "r");
        let e = prepare(&s, "p", &k, &mut route("*w.example.com", "tcp")).unwrap_err();
        assert_eq!((e.code, e.reason.as_str()), (400, "invalid"), "{e}");
        let e = prepare(&s, "p", &k, &mut route("a.example.com", "missing")).unwrap_err();
        assert_eq!(e.code, 404, "{e}");
        let e = prepare(&s, "p", &k, &mut route("a.example.com", "web")).unwrap_err();
        assert!(e.message.contains("protocol TCP or SSL"), "{e}");
        let mut no_match = route("a.example.com", "tcp");
        no_match["rules"][0]["matches"] = json!([{}]);
        let e = prepare(&s, "p", &k, &mut no_match).unwrap_err();
        assert!(e.message.contains("sni_host and alpn"), "{e}");
        let mut mesh = route("a.example.com", "tcp");
        mesh.insert(
            "meshes".into(),
            json!(["projects/p/locations/global/meshes/m"]),
        );
        assert_eq!(prepare(&s, "p", &k, &mut mesh).unwrap_err().code, 400);
        let mut bad_proxy = route("a.example.com", "tcp");
        bad_proxy["targetProxies"] = json!(["projects/p/locations/global/targetTcpProxies/nope"]);
        assert_eq!(prepare(&s, "p", &k, &mut bad_proxy).unwrap_err().code, 404);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("3600s"), Some(3600.0));
        assert_eq!(parse_duration("1.5s"), Some(1.5));
        assert_eq!(parse_duration("10"), None);
    }
}
