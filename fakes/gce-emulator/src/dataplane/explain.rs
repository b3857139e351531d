//! `explain`: the path the data plane would take for one request, step by step: forwarding
//! rule, target proxy, the certificate chosen by SNI, host rule, path matcher, the rule that
//! matched and those tried before it (and why they did not match), redirect or rewrite, backend
//! service, security policy decision, and the endpoint chosen with its health.
//!
//! Every decision is made by the code that serves requests, on the frontend requests see now:
//! [`UrlMapTable::route_traced`](crate::dataplane::url_map::UrlMapTable::route_traced),
//! [`Forward::pick`], [`SecurityPolicy::evaluate`](crate::dataplane::security_policy),
//! [`BackendService::pick`](crate::dataplane::backend_service::BackendService::pick) and
//! [`tls::select`]; nothing is decided twice. Two things differ from a real request, by
//! nature: a weighted or load-balanced choice draws its own random number (the answer is one
//! possible choice, as for any request), and picking an endpoint advances a round-robin
//! backend service's position like a request would. The request checks that answer 400/414/501
//! before routing (request_checks.rs) are not run.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::Ordering;

use http::{HeaderMap, HeaderName, HeaderValue, Uri};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::dataplane::armor::{self, Verdict};
use crate::dataplane::backend_service::{affinity_cookie_value, SessionAffinity};
use crate::dataplane::compile::{certificate_inputs, Frontend};
use crate::dataplane::proxy::strip_port;
use crate::dataplane::tls;
use crate::dataplane::url_map::{
    normalize_path, redirect_location, rewrite_path, RequestView, RouteAction, RouteTrace,
};
use crate::health_state::HealthTable;
use crate::snapshot::{key_from_url, ResourceKey, Snapshot};

/// What to explain (the body of `POST /_emulator/explain`).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExplainRequest {
    /// `http://host[:port]/path?query` or `https://...` (the scheme sets the SNI and the
    /// redirect scheme). The path is taken as sent: dot segments are resolved as the data
    /// plane resolves them.
    pub url: String,
    /// HTTP method (default `GET`).
    #[serde(default)]
    pub method: Option<String>,
    /// Request headers; a `host` entry overrides the URL's host.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Client address, for security policies and CLIENT_IP affinity (default 127.0.0.1).
    #[serde(default)]
    pub client_ip: Option<IpAddr>,
    /// The forwarding rule: its name or `projects/P/global/forwardingRules/NAME`. When absent,
    /// `ipAddress` (and the URL's port or the scheme's default port) choose the rule.
    #[serde(default)]
    pub forwarding_rule: Option<String>,
    /// The load balancer's IP address.
    #[serde(default)]
    pub ip_address: Option<IpAddr>,
}

/// A certificate choice by SNI.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CertificateChoice {
    /// The SNI sent (the URL's host).
    pub sni: String,
    /// The sslCertificate presented.
    pub certificate: ResourceKey,
    /// Its DNS names.
    pub names: Vec<String>,
}

/// One endpoint of the chosen backend service.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EndpointInfo {
    /// `ip:port`.
    pub address: String,
    /// Its NEG.
    pub network_endpoint_group: ResourceKey,
    /// `HEALTHY`, `UNHEALTHY`, `DRAINING` or `UNKNOWN` (no health check: `UNKNOWN`).
    pub health_state: String,
    /// Whether the data plane would send it requests now (healthy, or not health checked).
    pub eligible: bool,
}

/// The path of one request through the data plane.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// The forwarding rule.
    pub forwarding_rule: ResourceKey,
    /// Its `IPAddress:port`.
    pub address: String,
    /// The rule's target proxy.
    pub target_proxy: ResourceKey,
    /// For target HTTPS proxies: the certificate SNI chose.
    pub certificate: Option<CertificateChoice>,
    /// The URL map.
    pub url_map: ResourceKey,
    /// Host and path as routed (port stripped, path normalized).
    pub host: String,
    /// The normalized path.
    pub path: String,
    /// Host rule, path matcher, rules tried, the matching rule and the closest one.
    pub routing: RouteTrace,
    /// `forward`, `redirect` or `unavailable`.
    pub action: String,
    /// A redirect's `Location`.
    pub redirect_location: Option<String>,
    /// The weighted backend services of the matched rule, with weights.
    pub weighted_backend_services: Vec<(ResourceKey, u32)>,
    /// The backend service chosen.
    pub backend_service: Option<ResourceKey>,
    /// The backend service's security policy and its decision (`allow`, `deny(403)`).
    pub security_policy: Option<(ResourceKey, String)>,
    /// Path and host after `urlRewrite`.
    pub rewritten_path: Option<String>,
    /// `hostRewrite`.
    pub rewritten_host: Option<String>,
    /// The endpoint chosen.
    pub endpoint: Option<EndpointInfo>,
    /// Every endpoint of the chosen backend service.
    pub endpoints: Vec<EndpointInfo>,
    /// The status the load balancer itself answers (redirect, deny, 502), or `None` when the
    /// endpoint answers.
    pub status: Option<u16>,
    /// One line: what happens.
    pub outcome: String,
}

/// Errors of `explain`: the request names no serving forwarding rule, or is malformed.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// `url` does not parse as an absolute http(s) URL.
    #[error("url {0:?}: expected http://HOST[:PORT]/PATH or https://...")]
    Url(String),
    /// A header name or value is invalid.
    #[error("headers: {0:?} is not a valid header")]
    Header(String),
    /// No forwarding rule matches.
    #[error("no serving forwarding rule {0}; list them with GET /_emulator/listeners")]
    NoRule(String),
}

/// Finds the frontend `req` names among `frontends`.
pub fn find_frontend<'f>(
    frontends: &'f BTreeMap<ResourceKey, std::sync::Arc<Frontend>>,
    req: &ExplainRequest,
    uri: &Uri,
) -> Result<&'f Frontend, ExplainError> {
    let https = uri.scheme_str() == Some("https");
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let found = if let Some(name) = &req.forwarding_rule {
        frontends
            .iter()
            .find(|(k, _)| *k == name || k.rsplit('/').next() == Some(name.as_str()))
            .ok_or_else(|| ExplainError::NoRule(format!("named {name:?}")))?
    } else {
        let ip = match req.ip_address {
            Some(ip) => ip,
            None => strip_port(uri.authority().map_or("", |a| a.as_str()))
                .trim_matches(['[', ']'])
                .parse()
                .map_err(|_| {
                    ExplainError::NoRule("given: set forwardingRule or ipAddress".into())
                })?,
        };
        let on_ip = || frontends.iter().filter(move |(_, f)| f.ip == ip);
        on_ip()
            .find(|(_, f)| f.port == port)
            .or_else(|| on_ip().find(|(_, f)| f.tls.is_some() == https))
            .or_else(|| on_ip().next())
            .ok_or_else(|| ExplainError::NoRule(format!("on {ip}")))?
    };
    Ok(found.1)
}

fn health_of(health: &HealthTable, ep: &crate::dataplane::backend_service::Endpoint) -> String {
    health
        .get(&ep.key)
        .map_or("UNKNOWN", |s| s.as_str())
        .to_string()
}

/// Explains `req` on the frontends requests see now. `snap` supplies the names of the proxy,
/// certificates and security policy; `health` the endpoints' health states; `armor` Cloud
/// Armor's region map and rate-limit counters (an explained request counts like a real one).
pub fn explain(
    frontends: &BTreeMap<ResourceKey, std::sync::Arc<Frontend>>,
    snap: &Snapshot,
    health: &HealthTable,
    armor: &armor::State,
    req: &ExplainRequest,
) -> Result<Explanation, ExplainError> {
    let uri: Uri = req
        .url
        .parse()
        .ok()
        .filter(|u: &Uri| matches!(u.scheme_str(), Some("http" | "https")))
        .ok_or_else(|| ExplainError::Url(req.url.clone()))?;
    let fe = find_frontend(frontends, req, &uri)?;
    let https = uri.scheme_str() == Some("https");
    let mut headers = HeaderMap::new();
    for (k, v) in &req.headers {
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) else {
            return Err(ExplainError::Header(format!("{k}: {v}")));
        };
        headers.append(name, value);
    }
    let host_full = match headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
    {
        Some(h) => h.to_string(),
        None => uri.authority().map_or(String::new(), |a| a.to_string()),
    };
    if let Ok(v) = HeaderValue::from_str(&host_full) {
        headers.insert(http::header::HOST, v);
    }
    let host = strip_port(&host_full).to_string();
    let normalized = normalize_path(uri.path()).into_owned();
    let query = uri.query();
    let client = req.client_ip.unwrap_or(IpAddr::from([127, 0, 0, 1]));
    let method = req.method.as_deref().unwrap_or("GET");

    let rule_json = snap.get(&fe.rule);
    let target_proxy = rule_json
        .and_then(|r| r.get("target"))
        .and_then(Value::as_str)
        .and_then(key_from_url)
        .unwrap_or_default();
    let mut ex = Explanation {
        forwarding_rule: fe.rule.clone(),
        address: std::net::SocketAddr::new(fe.ip, fe.port).to_string(),
        target_proxy: target_proxy.clone(),
        url_map: fe.url_map.clone(),
        host: host.clone(),
        path: normalized.clone(),
        ..Explanation::default()
    };
    if let (true, Some(proxy)) = (fe.tls.is_some(), snap.get(&target_proxy)) {
        let (keys, certs): (Vec<ResourceKey>, Vec<tls::ServedCert>) =
            certificate_inputs(proxy, snap)
                .into_iter()
                .filter_map(|(k, pem, key)| {
                    let c = tls::served_cert(&k, pem, key).ok()?;
                    Some((k, c))
                })
                .unzip();
        if !certs.is_empty() {
            let i = tls::select(&certs, https.then_some(host.as_str()));
            ex.certificate = Some(CertificateChoice {
                sni: host.clone(),
                certificate: keys[i].clone(),
                names: certs[i].names.clone(),
            });
        }
    }
    let routing = match &fe.routing {
        Ok(r) => r,
        Err(e) => {
            ex.action = "unavailable".into();
            ex.status = Some(502);
            ex.outcome = format!("502 invalid_url_map: {e}");
            return Ok(ex);
        }
    };
    let route = routing.route_traced(
        &RequestView {
            method,
            host: &host,
            path: &normalized,
            query,
            headers: &headers,
        },
        Some(&mut ex.routing),
    );
    let fwd = match route.action {
        RouteAction::Unavailable(why) => {
            ex.action = "unavailable".into();
            ex.status = Some(502);
            ex.outcome = format!("502 failed_to_pick_backend: {why}");
            return Ok(ex);
        }
        RouteAction::Redirect(rd) => {
            let scheme = if https { "https" } else { "http" };
            let loc = redirect_location(
                rd,
                scheme,
                &host_full,
                &normalized,
                query,
                route.matched_prefix,
            );
            ex.action = "redirect".into();
            ex.status = Some(rd.status);
            ex.outcome = format!("{} redirect to {loc}", rd.status);
            ex.redirect_location = Some(loc);
            return Ok(ex);
        }
        RouteAction::Forward(f) => f,
    };
    ex.action = "forward".into();
    ex.weighted_backend_services = fwd
        .services
        .iter()
        .map(|(i, w)| (fe.services[*i].key.clone(), *w))
        .collect();
    let bs = &fe.services[fwd.pick(if fwd.services.len() > 1 {
        rand::random()
    } else {
        0
    })];
    ex.backend_service = Some(bs.key.clone());
    if let Some(rw) = &fwd.rewrite {
        if let Some(prefix) = &rw.path_prefix_rewrite {
            ex.rewritten_path = Some(rewrite_path(prefix, &normalized, route.matched_prefix));
        }
        ex.rewritten_host = rw.host_rewrite.clone();
    }
    if let Some(policy) = &bs.security_policy {
        let name = snap
            .get(&bs.key)
            .and_then(|v| v.get("securityPolicy"))
            .and_then(Value::as_str)
            .and_then(key_from_url)
            .unwrap_or_default();
        let decision = policy.evaluate(
            &armor::Request {
                client: (client, 0),
                method,
                path: &normalized,
                query: query.unwrap_or(""),
                scheme: if https { "https" } else { "http" },
                headers: &headers,
                sni: &host,
            },
            armor,
            std::time::Instant::now(),
        );
        let (decision, status) = match decision.verdict {
            Verdict::Allow(_) => ("allow".to_string(), None),
            Verdict::Respond { status, .. } => (format!("deny({status})"), Some(status)),
        };
        ex.security_policy = Some((name, decision));
        if let Some(code) = status {
            ex.status = Some(code);
            ex.outcome = format!("{code} denied_by_security_policy for client {client}");
            return Ok(ex);
        }
    }
    let info = |ep: &crate::dataplane::backend_service::Endpoint| EndpointInfo {
        address: ep.addr.to_string(),
        network_endpoint_group: ep.key.neg.clone(),
        health_state: health_of(health, ep),
        eligible: !bs.health_checked || ep.healthy.load(Ordering::Relaxed),
    };
    ex.endpoints = bs.endpoints.iter().map(|e| info(e)).collect();
    let cookie = match bs.affinity {
        SessionAffinity::GeneratedCookie { .. } => affinity_cookie_value(&headers),
        _ => None,
    };
    let Some(pick) = bs.pick(client, cookie, rand::random()) else {
        ex.status = Some(502);
        ex.outcome = format!(
            "502 failed_to_pick_backend: backend service {} has no healthy endpoint",
            bs.key
        );
        return Ok(ex);
    };
    let ep = &pick.endpoint;
    ex.endpoint = Some(info(ep));
    if !ep.admission.traffic() {
        ex.status = Some(502);
        ex.outcome = format!(
            "502 failed_to_connect_to_backend: endpoint {}: {}",
            ep.addr,
            ep.admission.traffic_refusal()
        );
        return Ok(ex);
    }
    ex.outcome = format!(
        "{method} forwarded by {} to endpoint {} of backend service {}",
        ex.routing.matched, ep.addr, bs.key
    );
    Ok(ex)
}
