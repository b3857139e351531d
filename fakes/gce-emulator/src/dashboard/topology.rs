//! The dashboard's model: every load balancer as its chain forwarding rule -> target proxy ->
//! URL map (host rules, path matchers, path and route rules) -> backend services -> NEGs ->
//! endpoints, read from one snapshot (Compute API v1 wire JSON, the references the resources
//! hold), with each endpoint's health from the health table.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use crate::health_state::{HealthKey, HealthTable};
use crate::snapshot::{key_from_url, ResourceKey, Snapshot};

/// One load balancer (one forwarding rule and what it leads to).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancer {
    /// The forwarding rule.
    pub forwarding_rule: ResourceKey,
    /// `IPAddress:portRange`.
    pub address: String,
    /// The target proxy.
    pub target_proxy: ResourceKey,
    /// The proxy's certificates (target HTTPS proxies).
    pub certificates: Vec<ResourceKey>,
    /// The URL map.
    pub url_map: ResourceKey,
    /// Routing rules of the URL map, one line each: (where, what, service or action).
    pub rules: Vec<RuleLine>,
    /// The backend services the URL map uses.
    pub backend_services: Vec<Service>,
}

/// One routing rule of a URL map.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleLine {
    /// Hosts of the host rule (`*` for the URL map's default).
    pub hosts: String,
    /// The rule, e.g. `pathMatchers[web].pathRules[0]`.
    pub rule: String,
    /// What it matches, e.g. `/cart/*` or `prefixMatch "/api/" + header x-canary`.
    pub matches: String,
    /// The backend service key, or the redirect.
    pub target: String,
}

/// A backend service with its NEGs and endpoints.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Service {
    /// The backend service.
    pub key: ResourceKey,
    /// Its security policy, if any.
    pub security_policy: Option<ResourceKey>,
    /// Whether a health check is attached (without one, endpoints are not probed).
    pub health_checked: bool,
    /// Its NEGs, each with endpoints.
    pub groups: Vec<Group>,
}

/// A network endpoint group and its endpoints.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Group {
    /// The NEG.
    pub key: ResourceKey,
    /// Its endpoints.
    pub endpoints: Vec<EndpointView>,
}

/// One endpoint as the backend service sees it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointView {
    /// `ip:port`.
    pub address: String,
    /// Identity on the page: `backendService|neg|ip:port`.
    pub id: String,
    /// `HEALTHY`, `UNHEALTHY`, `DRAINING`, `UNKNOWN`, or `NOT_CHECKED` without a health check.
    pub health: String,
}

fn s<'v>(v: &'v Value, f: &str) -> Option<&'v str> {
    v.get(f).and_then(Value::as_str)
}

fn arr<'v>(v: &'v Value, f: &str) -> &'v [Value] {
    v.get(f)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn kind_of(key: &str) -> &str {
    key.rsplit('/').nth(1).unwrap_or("")
}

/// The service (or redirect) an object with `service`, `routeAction` and `urlRedirect` fields
/// sends to, and every backend service it names into `used`.
fn target(
    v: &Value,
    service: &str,
    action: &str,
    redirect: &str,
    used: &mut Vec<String>,
) -> String {
    if let Some(r) = v.get(redirect) {
        return format!("redirect {}", serde_json::to_string(r).unwrap_or_default());
    }
    if let Some(k) = s(v, service).and_then(key_from_url) {
        used.push(k.clone());
        return k;
    }
    let weighted: Vec<String> = v
        .get(action)
        .map(|a| arr(a, "weightedBackendServices"))
        .unwrap_or(&[])
        .iter()
        .filter_map(|w| {
            let k = s(w, "backendService").and_then(key_from_url)?;
            used.push(k.clone());
            Some(format!(
                "{k} ({})",
                w.get("weight").unwrap_or(&Value::from(1))
            ))
        })
        .collect();
    weighted.join(", ")
}

/// What a route rule's match rules test, in short.
fn describe_match_rules(rr: &Value) -> String {
    let parts: Vec<String> = arr(rr, "matchRules")
        .iter()
        .map(|m| {
            let mut p = ["prefixMatch", "fullPathMatch", "regexMatch"]
                .iter()
                .find_map(|f| s(m, f).map(|x| format!("{f} {x:?}")))
                .unwrap_or_else(|| "any path".into());
            for h in arr(m, "headerMatches") {
                p += &format!(" + header {}", s(h, "headerName").unwrap_or("?"));
            }
            for q in arr(m, "queryParameterMatches") {
                p += &format!(" + query {}", s(q, "name").unwrap_or("?"));
            }
            p
        })
        .collect();
    if parts.is_empty() {
        "anything".into()
    } else {
        parts.join(" | ")
    }
}

fn rules_of(um: &Value, used: &mut Vec<String>) -> Vec<RuleLine> {
    let mut lines = Vec::new();
    let default = target(
        um,
        "defaultService",
        "defaultRouteAction",
        "defaultUrlRedirect",
        used,
    );
    lines.push(RuleLine {
        hosts: "*".into(),
        rule: "defaultService".into(),
        matches: "anything no host rule takes".into(),
        target: default,
    });
    for pm in arr(um, "pathMatchers") {
        let name = s(pm, "name").unwrap_or("");
        let hosts: Vec<&str> = arr(um, "hostRules")
            .iter()
            .filter(|h| s(h, "pathMatcher") == Some(name))
            .flat_map(|h| arr(h, "hosts").iter().filter_map(Value::as_str))
            .collect();
        let hosts = hosts.join(" ");
        for (i, pr) in arr(pm, "pathRules").iter().enumerate() {
            let paths: Vec<&str> = arr(pr, "paths").iter().filter_map(Value::as_str).collect();
            lines.push(RuleLine {
                hosts: hosts.clone(),
                rule: format!("pathMatchers[{name}].pathRules[{i}]"),
                matches: paths.join(" "),
                target: target(pr, "service", "routeAction", "urlRedirect", used),
            });
        }
        for (i, rr) in arr(pm, "routeRules").iter().enumerate() {
            lines.push(RuleLine {
                hosts: hosts.clone(),
                rule: format!("pathMatchers[{name}].routeRules[{i}]"),
                matches: describe_match_rules(rr),
                target: target(rr, "service", "routeAction", "urlRedirect", used),
            });
        }
        lines.push(RuleLine {
            hosts,
            rule: format!("pathMatchers[{name}].defaultService"),
            matches: "anything else".into(),
            target: target(
                pm,
                "defaultService",
                "defaultRouteAction",
                "defaultUrlRedirect",
                used,
            ),
        });
    }
    lines
}

fn service(snap: &Snapshot, health: &HealthTable, key: &str) -> Service {
    let v = snap.get(key).cloned().unwrap_or(Value::Null);
    let health_checked = !arr(&v, "healthChecks").is_empty();
    let groups = arr(&v, "backends")
        .iter()
        .filter_map(|b| s(b, "group").and_then(key_from_url))
        .map(|neg| {
            let endpoints = snap
                .neg_endpoints
                .get(&neg)
                .into_iter()
                .flatten()
                .map(|ne| {
                    let hk = HealthKey {
                        backend_service: key.to_string(),
                        neg: neg.clone(),
                        ip_address: ne.ip_address.clone(),
                        port: ne.port,
                    };
                    let state = if !health_checked {
                        "NOT_CHECKED"
                    } else {
                        health.get(&hk).map_or("UNKNOWN", |h| h.as_str())
                    };
                    EndpointView {
                        address: format!("{}:{}", ne.ip_address, ne.port),
                        id: endpoint_id(&hk),
                        health: state.to_string(),
                    }
                })
                .collect();
            Group {
                key: neg,
                endpoints,
            }
        })
        .collect();
    Service {
        key: key.to_string(),
        security_policy: s(&v, "securityPolicy").and_then(key_from_url),
        health_checked,
        groups,
    }
}

/// The page identity of an endpoint: `backendService|neg|ip:port`.
pub fn endpoint_id(k: &HealthKey) -> String {
    format!(
        "{}|{}|{}:{}",
        k.backend_service, k.neg, k.ip_address, k.port
    )
}

/// Every load balancer of `snap`, sorted by forwarding rule.
pub fn load_balancers(snap: &Snapshot, health: &HealthTable) -> Vec<LoadBalancer> {
    let mut out = Vec::new();
    for (k, rule) in &snap.resources {
        if kind_of(k) != "forwardingRules" {
            continue;
        }
        let Some(proxy_key) = s(rule, "target").and_then(key_from_url) else {
            continue;
        };
        if !kind_of(&proxy_key).contains("Http") {
            continue;
        }
        let proxy = snap.get(&proxy_key).cloned().unwrap_or(Value::Null);
        let url_map = s(&proxy, "urlMap")
            .and_then(key_from_url)
            .unwrap_or_default();
        let mut used = Vec::new();
        let rules = snap
            .get(&url_map)
            .map(|um| rules_of(um, &mut used))
            .unwrap_or_default();
        let mut seen = BTreeSet::new();
        used.retain(|u| seen.insert(u.clone()));
        out.push(LoadBalancer {
            forwarding_rule: k.clone(),
            address: format!(
                "{}:{}",
                s(rule, "IPAddress").unwrap_or("?"),
                s(rule, "portRange").unwrap_or("?")
            ),
            target_proxy: proxy_key,
            certificates: arr(&proxy, "sslCertificates")
                .iter()
                .filter_map(|c| c.as_str().and_then(key_from_url))
                .collect(),
            url_map,
            rules,
            backend_services: used.iter().map(|u| service(snap, health, u)).collect(),
        });
    }
    out
}
