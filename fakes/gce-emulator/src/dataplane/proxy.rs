//! Request handling, like Google's front ends for the classic Application Load Balancer:
//! route by URL map, apply the backend service's security policy, pick a healthy endpoint and
//! forward with `X-Forwarded-For: <client>, <LB IP>` (appended to any value sent),
//! `X-Forwarded-Proto`, `Via: 1.1 google` and the `Host` preserved (Compute docs, "HTTP(S) load
//! balancing headers"). Failures answer 502 (504 when `timeoutSec` elapses) with Google's error
//! page, naming the reason as Cloud Logging's `statusDetails` does (`failed_to_pick_backend`,
//! `backend_timeout`, `failed_to_connect_to_backend`); requests [`request_checks`] refuses get
//! 400, 414 or 501 and are never forwarded.
//!
//! No healthy endpoint: the classic Application Load Balancer answers 502
//! (`failed_to_pick_backend`); it does not fail open to unhealthy endpoints.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONNECTION, HOST, LOCATION, SET_COOKIE, TE, UPGRADE};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::{Either, Full};
use hyper::body::Incoming;

use crate::dataplane::access_log::{AccessLog, AccessRecord};
use crate::dataplane::backend_service::{
    affinity_cookie_value, BackendProtocol, BackendService, Endpoint, SessionAffinity,
};
use crate::dataplane::coarse_timer::CoarseTimer;
use crate::dataplane::compile::Frontend;
use crate::dataplane::grpc;
use crate::dataplane::quic;
use crate::dataplane::request_checks;
use crate::dataplane::security_policy::Verdict;
use crate::dataplane::upstream::{Upstream, UpstreamBody};
use crate::dataplane::url_map::{
    normalize_path, redirect_location, rewrite_path, RequestView, RouteAction,
};

/// Response body: the endpoint's streamed body or a local one.
pub type Body = Either<UpstreamBody, Full<Bytes>>;

static VIA: HeaderValue = HeaderValue::from_static("1.1 google");
static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
static VIA_NAME: HeaderName = HeaderName::from_static("via");
/// Hop-by-hop headers (RFC 9110 section 7.6.1) a proxy must not forward, then `Connection`.
static HOP_BY_HOP: [HeaderName; 7] = [
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    http::header::TE,
    http::header::TRAILER,
    http::header::TRANSFER_ENCODING,
    http::header::PROXY_AUTHENTICATE,
    CONNECTION,
];

/// The index of `name` in [`HOP_BY_HOP`]. A `match` on the string compiles to a switch on its
/// length, so the usual names are passed over at once.
fn hop_by_hop_index(name: &str) -> Option<usize> {
    match name {
        "keep-alive" => Some(0),
        "proxy-connection" => Some(1),
        "te" => Some(2),
        "trailer" => Some(3),
        "transfer-encoding" => Some(4),
        "proxy-authenticate" => Some(5),
        "connection" => Some(6),
        _ => None,
    }
}

/// Removes hop-by-hop headers, and `Connection` too unless `keep_connection` (an upgrade needs
/// it). One pass over the names present (a handful on most messages) notes which to remove, so
/// only those cost a hashed removal; a lookup per hop-by-hop name cost more than all the rest
/// of the header rewriting.
fn remove_hop_by_hop(h: &mut http::HeaderMap, keep_connection: bool) {
    let mut found = [false; HOP_BY_HOP.len()];
    for k in h.keys() {
        if let Some(i) = hop_by_hop_index(k.as_str()) {
            found[i] = true;
        }
    }
    found[HOP_BY_HOP.len() - 1] &= !keep_connection;
    for (n, _) in HOP_BY_HOP.iter().zip(found).filter(|(_, f)| *f) {
        h.remove(n);
    }
}

/// What the proxy knows of one client connection.
#[derive(Debug)]
pub struct ConnInfo {
    /// Client socket.
    pub client: SocketAddr,
    /// The frontend slot of the listener (read per request so changes apply live).
    pub frontend: Arc<ArcSwapOption<Frontend>>,
    /// Whether the client connected with TLS.
    pub https: bool,
    /// SNI the client sent.
    pub sni: Option<String>,
    /// Negotiated TLS version, e.g. `TLSv1_3`.
    pub tls_version: Option<String>,
    /// `<client IP>, <LB IP>`: what this connection appends to `X-Forwarded-For`.
    pub forwarded_for: String,
    /// The same as a header value.
    pub forwarded_for_value: HeaderValue,
    /// The listener's local port: where `Alt-Svc` points HTTP/3 clients (quic.rs).
    pub local_port: u16,
}

impl ConnInfo {
    /// Connection facts for a client of the listener on `lb_ip`.
    pub fn new(
        client: SocketAddr,
        lb_ip: std::net::IpAddr,
        frontend: Arc<ArcSwapOption<Frontend>>,
        tls: Option<(Option<String>, Option<String>)>,
        local_port: u16,
    ) -> ConnInfo {
        let forwarded_for = format!("{}, {lb_ip}", client.ip());
        let forwarded_for_value =
            HeaderValue::from_str(&forwarded_for).unwrap_or(HeaderValue::from_static(""));
        let https = tls.is_some();
        let (sni, tls_version) = tls.unwrap_or_default();
        ConnInfo {
            client,
            frontend,
            https,
            sni,
            tls_version,
            forwarded_for,
            forwarded_for_value,
            local_port,
        }
    }
}

/// Shared by every request.
#[derive(Debug)]
pub struct ProxyContext {
    /// Upstream pools.
    pub upstream: Upstream,
    /// Access log, when configured.
    pub access_log: Option<AccessLog>,
    /// Per-request deadlines (`timeoutSec`, hyper's header read timeout).
    pub timer: CoarseTimer,
}

fn local(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Either::Right(Full::new(body.into())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut().insert(VIA_NAME.clone(), VIA.clone());
    r
}

/// Cloud Logging's `statusDetails` of a response the proxy made itself (a response extension
/// the access log reads).
#[derive(Clone, Copy, Debug)]
pub struct StatusDetails(pub &'static str);

/// An answer of the load balancer itself, as Google's error page (request_checks.rs), with its
/// `statusDetails` for the access log.
fn error_response(status: StatusCode, detail: &'static str, why: &str) -> Response<Body> {
    let mut r = local(status, request_checks::error_page(status, detail, why));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=UTF-8"),
    );
    r.extensions_mut().insert(StatusDetails(detail));
    r
}

fn bad_gateway(detail: &'static str, why: String) -> Response<Body> {
    error_response(StatusCode::BAD_GATEWAY, detail, &why)
}

/// The request host as sent: the URI authority (HTTP/2, absolute form) or the `Host` header.
/// Returned as a cheap clone of the request's bytes so the request can be changed afterwards.
fn request_host(req: &Request<Incoming>) -> Option<HeaderValue> {
    match req.uri().authority() {
        Some(a) => HeaderValue::from_str(a.as_str()).ok(),
        None => req.headers().get(HOST).cloned(),
    }
}

/// `host` without its `:port` (an IPv6 literal keeps its brackets).
pub(crate) fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host
            .split_once(']')
            .map(|(h, _)| &host[..h.len() + 1])
            .unwrap_or(host);
    }
    host.rsplit_once(':')
        .filter(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()))
        .map(|(h, _)| h)
        .unwrap_or(host)
}

/// Substitutes the custom header variables that make sense locally; geographic ones are empty
/// (the value Google uses when it cannot determine them).
fn expand(template: &str, conn: &ConnInfo, version: http::Version) -> String {
    if !template.contains('{') {
        return template.to_string();
    }
    let proto = match version {
        http::Version::HTTP_2 => "HTTP/2",
        http::Version::HTTP_10 => "HTTP/1.0",
        _ => "HTTP/1.1",
    };
    template
        .replace("{client_region}", "")
        .replace("{client_region_subdivision}", "")
        .replace("{client_city}", "")
        .replace("{client_city_lat_long}", "")
        .replace("{client_rtt_msec}", "0")
        .replace(
            "{client_encrypted}",
            if conn.https { "true" } else { "false" },
        )
        .replace("{client_protocol}", proto)
        .replace("{client_ip_address}", &conn.client.ip().to_string())
        .replace("{tls_sni_hostname}", conn.sni.as_deref().unwrap_or(""))
        .replace("{tls_version}", conn.tls_version.as_deref().unwrap_or(""))
}

struct InFlight(Arc<Endpoint>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Handles one request from `conn`.
pub async fn handle(
    ctx: Arc<ProxyContext>,
    conn: Arc<ConnInfo>,
    req: Request<Incoming>,
) -> Result<Response<Body>, std::convert::Infallible> {
    let start = Instant::now();
    let Some(fe) = conn.frontend.load_full() else {
        return Ok(local(
            StatusCode::SERVICE_UNAVAILABLE,
            "503 Service Unavailable: the forwarding rule was deleted\n",
        ));
    };
    let mut rec = ctx
        .access_log
        .as_ref()
        .map(|_| AccessRecord::new(&fe.rule, &conn, &req));
    let (mut resp, backend) = match request_checks::check(&req) {
        Err(r) => (error_response(r.status, r.status_details, &r.why), None),
        Ok(()) => forward(&ctx, &conn, &fe, req, rec.as_mut()).await,
    };
    if fe.quic {
        quic::advertise(resp.headers_mut(), conn.local_port);
    }
    let status = resp.status().as_u16();
    let secs = start.elapsed().as_secs_f64();
    fe.metrics.observe(status, secs);
    if let Some(bs) = backend {
        bs.metrics.observe(status, secs);
    }
    if let (Some(log), Some(mut rec)) = (&ctx.access_log, rec) {
        rec.status = status;
        if let Some(d) = resp.extensions().get::<StatusDetails>() {
            rec.status_details = d.0;
        }
        rec.latency_ms = secs * 1000.0;
        log.write(rec);
    }
    Ok(resp)
}

async fn forward(
    ctx: &ProxyContext,
    conn: &ConnInfo,
    fe: &Frontend,
    mut req: Request<Incoming>,
    mut rec: Option<&mut AccessRecord>,
) -> (Response<Body>, Option<Arc<BackendService>>) {
    let routing = match &fe.routing {
        Ok(r) => r,
        Err(e) => return (bad_gateway("invalid_url_map", e.clone()), None),
    };
    let host_value_in = request_host(&req);
    let host_full = host_value_in
        .as_ref()
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let host = strip_port(host_full);
    let orig_uri = req.uri().clone();
    // Routed and forwarded normalized (dot segments, unreserved escapes): see normalize_path.
    let normalized = normalize_path(orig_uri.path());
    let path: &str = &normalized;
    let query = orig_uri.query();
    let route = routing.route(&RequestView {
        host,
        path,
        query,
        headers: req.headers(),
    });
    if let Some(r) = rec.as_deref_mut() {
        r.url_map_rule = route.rule.to_string();
    }
    let fwd = match route.action {
        RouteAction::Unavailable(why) => {
            return (bad_gateway("failed_to_pick_backend", why.clone()), None)
        }
        RouteAction::Redirect(rd) => {
            let scheme = if conn.https { "https" } else { "http" };
            let loc = redirect_location(rd, scheme, host_full, path, query, route.matched_prefix);
            let mut resp = local(
                StatusCode::from_u16(rd.status).unwrap_or(StatusCode::MOVED_PERMANENTLY),
                "",
            );
            if let Ok(v) = HeaderValue::from_str(&loc) {
                resp.headers_mut().insert(LOCATION, v);
            }
            return (resp, None);
        }
        RouteAction::Forward(f) => f,
    };
    let bs = fe.services[fwd.pick(if fwd.services.len() > 1 {
        rand::random()
    } else {
        0
    })]
    .clone();
    if let Some(r) = rec.as_deref_mut() {
        r.backend_service = bs.key.clone();
    }
    if let Some(policy) = &bs.security_policy {
        if let Verdict::Deny(code) = policy.evaluate(conn.client.ip()) {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::FORBIDDEN);
            return (
                local(status, format!("{status}: denied_by_security_policy\n")),
                Some(bs),
            );
        }
    }
    // Only GENERATED_COOKIE affinity reads the `GCLB` cookie: skip parsing cookies otherwise.
    let cookie = match bs.affinity {
        SessionAffinity::GeneratedCookie { .. } => affinity_cookie_value(req.headers()),
        _ => None,
    };
    let Some(pick) = bs.pick(conn.client.ip(), cookie, rand::random()) else {
        let why = format!("backend service {} has no healthy endpoint", bs.key);
        return (bad_gateway("failed_to_pick_backend", why), Some(bs));
    };
    let ep = pick.endpoint.clone();
    if let Some(r) = rec {
        r.endpoint = ep.addr.to_string();
    }
    if !ep.admission.traffic() {
        // The firewall drops the connection from Google's front end (dataplane/firewall.rs).
        let why = format!(
            "endpoint {} of backend service {}: {}",
            ep.addr,
            bs.key,
            ep.admission.reason()
        );
        return (bad_gateway("failed_to_connect_to_backend", why), Some(bs));
    }

    // The upstream request: same method, headers and body.
    let mut rewritten: Option<http::uri::PathAndQuery> = None;
    let mut host_value = None;
    if let Some(rw) = &fwd.rewrite {
        if let Some(prefix) = &rw.path_prefix_rewrite {
            let mut p = rewrite_path(prefix, path, route.matched_prefix);
            if let Some(q) = query {
                p.push('?');
                p.push_str(q);
            }
            match p.parse() {
                Ok(pq) => rewritten = Some(pq),
                Err(e) => {
                    let why = format!("pathPrefixRewrite gives an invalid path {p:?}: {e}");
                    return (bad_gateway("invalid_url_rewrite", why), Some(bs));
                }
            }
        }
        host_value = rw
            .host_rewrite
            .as_deref()
            .and_then(|h| HeaderValue::from_str(h).ok());
    }
    if let (None, std::borrow::Cow::Owned(p)) = (&rewritten, &normalized) {
        let pq = match query {
            Some(q) => format!("{p}?{q}"),
            None => p.clone(),
        };
        rewritten = pq.parse().ok();
    }
    // Origin form (`/path?query`); upstream::send adds scheme and authority where its client
    // needs them. An origin-form request that was not rewritten keeps its URI as it is.
    let origin_form = match rewritten {
        Some(pq) => Some(pq),
        None if orig_uri.authority().is_some() => Some(
            orig_uri
                .path_and_query()
                .cloned()
                .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/")),
        ),
        None => None,
    };
    if let Some(pq) = origin_form {
        *req.uri_mut() = Uri::from(pq);
    }
    let upgrade = req.headers().contains_key(UPGRADE);
    let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));
    let version = req.version();
    let te_trailers =
        bs.protocol == BackendProtocol::Http2 && grpc::asks_for_trailers(req.headers());
    let headers = req.headers_mut();
    remove_hop_by_hop(headers, upgrade);
    if let Some(h) = host_value {
        headers.insert(HOST, h);
    } else if !headers.contains_key(HOST) {
        if let Some(h) = host_value_in.clone() {
            headers.insert(HOST, h);
        }
    }
    let xff = match headers.get(&X_FORWARDED_FOR).and_then(|v| v.to_str().ok()) {
        Some(prev) => HeaderValue::from_str(&format!("{prev}, {}", conn.forwarded_for)).ok(),
        None => Some(conn.forwarded_for_value.clone()),
    };
    if let Some(v) = xff {
        headers.insert(X_FORWARDED_FOR.clone(), v);
    }
    headers.insert(
        X_FORWARDED_PROTO.clone(),
        HeaderValue::from_static(if conn.https { "https" } else { "http" }),
    );
    headers.append(VIA_NAME.clone(), VIA.clone());
    for (name, template) in &bs.custom_request_headers {
        if let Ok(v) = HeaderValue::from_str(&expand(template, conn, version)) {
            headers.insert(name.clone(), v);
        }
    }
    // HTTP/2 backends (gRPC): `te: trailers` goes through, and timeoutSec bounds the whole
    // stream (grpc.rs). Nothing of this runs for HTTP and HTTPS backends.
    let stream_start = if bs.protocol == BackendProtocol::Http2 {
        *req.version_mut() = http::Version::HTTP_2;
        if te_trailers {
            req.headers_mut().insert(TE, grpc::TE_TRAILERS.clone());
        }
        Some(Instant::now())
    } else {
        *req.version_mut() = http::Version::HTTP_11;
        None
    };

    ep.in_flight.fetch_add(1, Ordering::Relaxed);
    let guard = InFlight(ep.clone());
    // Pinned here, in this future's state: handed to the timeout by value, the send future
    // (1.7 KiB) was stored twice more and copied on every request.
    let send = std::pin::pin!(ctx.upstream.send(bs.protocol, &ep, req));
    let sent = ctx.timer.timeout(bs.timeout, send).await;
    let mut resp = match sent {
        Err(_) => {
            let why = format!(
                "endpoint {} did not answer within timeoutSec={} of backend service {}",
                ep.addr,
                bs.timeout.as_secs(),
                bs.key
            );
            return (
                error_response(StatusCode::GATEWAY_TIMEOUT, "backend_timeout", &why),
                Some(bs),
            );
        }
        Ok(Err(_)) if ep.drained.is_cancelled() => {
            let why = format!(
                "endpoint {} left backend service {} and its connectionDraining.drainingTimeoutSec={} elapsed",
                ep.addr,
                bs.key,
                ep.draining_timeout_sec.load(Ordering::Relaxed)
            );
            return (
                bad_gateway("backend_connection_closed_before_data_sent_to_client", why),
                Some(bs),
            );
        }
        Ok(Err(e)) if request_checks::client_body_failed(&e) => {
            let why = format!("the request body broke its framing: {e}");
            let resp = error_response(StatusCode::BAD_REQUEST, "client_error", &why);
            return (resp, Some(bs));
        }
        Ok(Err(e)) => {
            let why = format!("endpoint {} of backend service {}: {e}", ep.addr, bs.key);
            let detail = if e.is_connect() {
                "failed_to_connect_to_backend"
            } else {
                "backend_connection_closed_before_data_sent_to_client"
            };
            return (bad_gateway(detail, why), Some(bs));
        }
        Ok(Ok(r)) => r,
    };
    drop(guard);
    if let Some(start) = stream_start {
        resp.body_mut()
            .limit(grpc::stream_deadline(bs.timeout, start.elapsed()));
    }

    if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
        if let Some(client_upgrade) = client_upgrade {
            let backend_upgrade = hyper::upgrade::on(&mut resp);
            let limit = bs.timeout;
            let drained = ep.drained.clone();
            tokio::spawn(async move {
                let (Ok(c), Ok(b)) = (client_upgrade.await, backend_upgrade.await) else {
                    return;
                };
                let mut c = hyper_util::rt::TokioIo::new(c);
                let mut b = hyper_util::rt::TokioIo::new(b);
                // timeoutSec bounds the life of a WebSocket connection, as on Google's proxies,
                // and so does the end of the endpoint's connection draining.
                let copy = tokio::io::copy_bidirectional(&mut c, &mut b);
                let _ = drained
                    .run_until_cancelled(tokio::time::timeout(limit, copy))
                    .await;
            });
        }
    }
    let switching = resp.status() == StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    remove_hop_by_hop(h, switching);
    h.append(VIA_NAME.clone(), VIA.clone());
    for (name, template) in &bs.custom_response_headers {
        if let Ok(v) = HeaderValue::from_str(&expand(template, conn, version)) {
            h.insert(name.clone(), v);
        }
    }
    if pick.set_cookie {
        if let Ok(v) = HeaderValue::from_str(&bs.affinity_cookie(&ep)) {
            h.append(SET_COOKIE, v);
        }
    }
    (resp.map(Either::Left), Some(bs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_ports() {
        assert_eq!(strip_port("shop.example:8080"), "shop.example");
        assert_eq!(strip_port("shop.example"), "shop.example");
        assert_eq!(strip_port("[::1]:80"), "[::1]");
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> http::HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (HeaderName::from_static(k), HeaderValue::from_static(v)))
            .collect()
    }

    fn names(h: &http::HeaderMap) -> Vec<&str> {
        let mut n: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        n.sort_unstable();
        n
    }

    #[test]
    fn hop_by_hop_index_matches_the_name_list() {
        for (i, name) in HOP_BY_HOP.iter().enumerate() {
            assert_eq!(hop_by_hop_index(name.as_str()), Some(i), "{name}");
        }
        assert_eq!(hop_by_hop_index("host"), None);
        assert_eq!(hop_by_hop_index("upgrade"), None);
    }

    #[test]
    fn removes_only_hop_by_hop_headers() {
        let mut h = headers(&[
            ("host", "shop.example"),
            ("connection", "keep-alive"),
            ("keep-alive", "timeout=5"),
            ("transfer-encoding", "chunked"),
            ("te", "trailers"),
            ("x-request-id", "7"),
        ]);
        remove_hop_by_hop(&mut h, false);
        assert_eq!(names(&h), ["host", "x-request-id"]);

        // An upgrade keeps `Connection: upgrade`; the other hop-by-hop headers still go.
        let mut h = headers(&[
            ("connection", "upgrade"),
            ("upgrade", "websocket"),
            ("proxy-connection", "keep-alive"),
        ]);
        remove_hop_by_hop(&mut h, true);
        assert_eq!(names(&h), ["connection", "upgrade"]);

        // Nothing to remove: untouched.
        let mut h = headers(&[("host", "shop.example"), ("accept", "*/*")]);
        remove_hop_by_hop(&mut h, false);
        assert_eq!(names(&h), ["accept", "host"]);
    }
}
