//! What a matched rule does: forward to weighted backend services (with an optional
//! `urlRewrite`, `headerAction`, `timeout`, `requestMirrorPolicy` and
//! `faultInjectionPolicy.abort`) or redirect (Compute API reference: `HttpRouteAction`,
//! `HttpRedirectAction`, `HttpFaultInjection`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::compiler::{arr, s, Compiler};
use super::header_action::HeaderAction;

/// What a rule routes to: its action, the rule's name, and the path prefix it matched.
#[derive(Debug)]
pub(super) struct Target {
    pub(super) action: RouteAction,
    pub(super) rule: String,
    pub(super) matched_prefix: String,
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
    /// `weightedBackendServices[].headerAction`, parallel to `services`.
    pub service_headers: Vec<Option<Arc<HeaderAction>>>,
    /// Sum of the weights.
    pub total_weight: u32,
    /// `routeAction.urlRewrite`.
    pub rewrite: Option<UrlRewrite>,
    /// The rule's `headerAction` (route rules only).
    pub headers: Option<Arc<HeaderAction>>,
    /// `routeAction.timeout`: replaces the backend service's `timeoutSec` for this route.
    pub timeout: Option<Duration>,
    /// `routeAction.requestMirrorPolicy`: (backend service index, `mirrorPercent` 0-100).
    pub mirror: Option<(usize, f64)>,
    /// `routeAction.faultInjectionPolicy.abort`: (`httpStatus`, `percentage` 0-100) of
    /// requests answered by the load balancer with that status instead of being forwarded.
    pub abort: Option<(u16, f64)>,
}

impl Forward {
    /// The position in `services` for a random draw `r` (any u32): weighted choice.
    pub fn pick_at(&self, r: u32) -> usize {
        if self.services.len() == 1 {
            return 0;
        }
        let mut x = r % self.total_weight;
        for (i, (_, w)) in self.services.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        0
    }

    /// The backend service for a random draw `r` (any u32): weighted choice.
    pub fn pick(&self, r: u32) -> usize {
        self.services[self.pick_at(r)].0
    }
}

/// A `google.protobuf.Duration` as the Compute API writes it: `{"seconds": "10", "nanos": 0}`.
fn duration(v: &Value) -> Option<Duration> {
    let secs = v
        .get("seconds")
        .and_then(|x| x.as_u64().or_else(|| x.as_str()?.parse().ok()))
        .unwrap_or(0);
    let nanos = v.get("nanos").and_then(Value::as_u64).unwrap_or(0);
    let d = Duration::from_secs(secs) + Duration::from_nanos(nanos);
    (!d.is_zero()).then_some(d)
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

pub(super) fn parse_redirect(v: &Value) -> Redirect {
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

pub(super) fn parse_rewrite(route_action: Option<&Value>) -> Option<UrlRewrite> {
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
    pub(super) fn action(
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
        let mut service_headers = Vec::new();
        if let Some(url) = s(v, service) {
            match (self.resolve)(url) {
                Ok(i) => services.push((i, 1)),
                Err(e) => return RouteAction::Unavailable(e),
            }
            service_headers.push(None);
        } else if let Some(ra) = ra {
            for w in arr(ra, "weightedBackendServices") {
                let Some(url) = s(w, "backendService") else {
                    continue;
                };
                let weight = w.get("weight").and_then(Value::as_u64).unwrap_or(1) as u32;
                match (self.resolve)(url) {
                    Ok(i) if weight > 0 => {
                        services.push((i, weight));
                        service_headers.push(HeaderAction::compile(w).map(Arc::new));
                    }
                    Ok(_) => {}
                    Err(e) => return RouteAction::Unavailable(e),
                }
            }
        }
        let mut mirror = None;
        if let Some(m) = ra.and_then(|ra| ra.get("requestMirrorPolicy")) {
            if let Some(url) = s(m, "backendService") {
                match (self.resolve)(url) {
                    Ok(i) => {
                        let pct = m
                            .get("mirrorPercent")
                            .and_then(Value::as_f64)
                            .unwrap_or(100.0);
                        mirror = Some((i, pct));
                    }
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
            service_headers,
            total_weight,
            rewrite,
            headers: HeaderAction::compile(v).map(Arc::new),
            timeout: ra.and_then(|ra| ra.get("timeout")).and_then(duration),
            mirror,
            abort: ra
                .and_then(|ra| ra.pointer("/faultInjectionPolicy/abort"))
                .and_then(|a| {
                    let status = u16::try_from(a.get("httpStatus")?.as_u64()?).ok()?;
                    Some((
                        status,
                        a.get("percentage").and_then(Value::as_f64).unwrap_or(0.0),
                    ))
                }),
        })
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
