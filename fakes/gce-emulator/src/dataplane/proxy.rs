//! Request handling, like Google's front ends for the classic Application Load Balancer:
//! route by URL map, run the backend service's edge features (request logs, Cloud CDN, Cloud
//! Armor, IAP: `proxy/edge.rs`), pick a healthy endpoint and forward with
//! `X-Forwarded-For: <client>, <LB IP>` (appended to any value sent), `X-Forwarded-Proto`,
//! `Via: 1.1 google` and the `Host` preserved (Compute docs, "HTTP(S) load balancing headers";
//! `proxy/headers.rs`). Failures answer 502 (504 when `timeoutSec` elapses) with Google's error
//! page, naming the reason as Cloud Logging's `statusDetails` does (`failed_to_pick_backend`,
//! `backend_timeout`, `failed_to_connect_to_backend`); requests [`request_checks`] refuses get
//! 400, 414 or 501 and are never forwarded.
//!
//! No healthy endpoint: the classic Application Load Balancer answers 502
//! (`failed_to_pick_backend`); it does not fail open to unhealthy endpoints.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwapOption;
use http::header::{HeaderValue, CONNECTION, HOST, LOCATION, TE};
use http::{Request, Response, StatusCode, Uri};
use hyper::body::Incoming;

use crate::dataplane::access_log::AccessRecord;
use crate::dataplane::backend_service::{
    affinity_cookie_value, BackendProtocol, BackendService, SessionAffinity,
};
use crate::dataplane::compile::Frontend;
use crate::dataplane::grpc;
use crate::dataplane::logging;
use crate::dataplane::mirror;
use crate::dataplane::request_checks;
use crate::dataplane::url_map::{
    normalize_path, redirect_location, rewrite_path, RequestView, RouteAction,
};

mod answer;
mod edge;
mod headers;
mod send;

use crate::dataplane::exchange::{VIA, VIA_NAME};
use answer::{bad_gateway, error_response, Answer};
pub(crate) use headers::strip_port;
use headers::{expand, remove_seen, request_host, X_FORWARDED_FOR, X_FORWARDED_PROTO};
use send::{InFlight, Pending};

pub use crate::dataplane::exchange::{local, Body, ConnInfo};
pub use crate::dataplane::proxy_context::ProxyContext;

/// One client connection as the proxy serves it: what features see of it ([`ConnInfo`]) and the
/// frontend slot of its listener, read per request so that changes apply live.
#[derive(Debug)]
pub struct Connection {
    /// Client, TLS and forwarding facts.
    pub info: ConnInfo,
    /// The frontend slot of the listener.
    pub frontend: Arc<ArcSwapOption<Frontend>>,
}

/// Handles one request from `conn`.
///
/// Its future is stored in hyper's per-connection slot and copied there once per request, so
/// it holds little across its awaits: the request's preparation ([`prepare`]) and its exchange
/// with the endpoint ([`Pending::exchange`]) are two futures that never live at once, the
/// access record is boxed, and nothing but the request itself is kept from the client's side
/// (`tests::the_request_future_stays_small`).
pub async fn handle(
    ctx: Arc<ProxyContext>,
    connection: Arc<Connection>,
    req: Request<Incoming>,
) -> Result<Response<Body>, std::convert::Infallible> {
    let start = Instant::now();
    let conn = &connection.info;
    let Some(fe) = connection.frontend.load_full() else {
        return Ok(local(
            StatusCode::SERVICE_UNAVAILABLE,
            "503 Service Unavailable: the forwarding rule was deleted\n",
        ));
    };
    let mut rec = None;
    // Each step's result is taken apart in its own statement: held to the end of a `match`
    // with an await in an arm, it would stay in this future's state.
    let (req, pending) = match prepare(&ctx, conn, &fe, req, &mut rec).await {
        Ok(prepared) => prepared,
        Err((resp, backend)) => return Ok(finish(&ctx, conn, &fe, start, rec, resp, backend)),
    };
    let (resp, backend) = pending.exchange(&ctx, conn, req, &mut rec).await;
    Ok(finish(&ctx, conn, &fe, start, rec, resp, backend))
}

/// The answer's last steps: HTTP/3's advertisement, the metrics, and the access record (Cloud
/// Logging's entry and the access log).
fn finish(
    ctx: &ProxyContext,
    conn: &ConnInfo,
    fe: &Frontend,
    start: Instant,
    rec: Option<Box<AccessRecord>>,
    mut resp: Response<Body>,
    backend: Option<Arc<BackendService>>,
) -> Response<Body> {
    if fe.quic {
        crate::dataplane::exchange::advertise(resp.headers_mut(), conn.local_port);
    }
    let status = resp.status().as_u16();
    let secs = start.elapsed().as_secs_f64();
    fe.metrics.observe(status, secs);
    if let Some(bs) = &backend {
        bs.metrics.observe(status, secs);
    }
    if let Some(mut rec) = rec {
        rec.status = status;
        rec.latency_ms = secs * 1000.0;
        rec.finish(&resp);
        if let (true, Some(bs)) = (rec.cloud_log, &backend) {
            let src = logging::Source {
                rule: &fe.rule,
                https: fe.tls.is_some(),
                ip: fe.ip,
                port: fe.port,
                url_map: &fe.url_map,
                target_proxy: &fe.target_proxy,
                backend_service: &bs.key,
                log_config: bs.log_config.as_ref(),
            };
            ctx.logs.record(&src, &rec);
        }
        if let Some(log) = &ctx.access_log {
            log.write(*rec);
        }
    }
    resp
}

/// The request's way to an endpoint up to sending it: the access record (when the access log is
/// on), the checks of [`request_checks`], routing by the URL map, the edge features, the
/// endpoint's pick and the upstream request's URI and headers. Errors: the answer that ends the
/// request here (a refusal, a redirect, a fault abort, an edge feature's answer, a 502).
async fn prepare(
    ctx: &ProxyContext,
    conn: &ConnInfo,
    fe: &Frontend,
    mut req: Request<Incoming>,
    rec: &mut Option<Box<AccessRecord>>,
) -> Result<(Request<Incoming>, Pending), Answer> {
    if ctx.access_log.is_some() {
        *rec = Some(Box::new(AccessRecord::new(&fe.rule, conn, &req)));
    }
    if let Err(r) = request_checks::check(&req) {
        let mut resp = error_response(r.status, r.status_details, &r.why);
        if r.close_connection {
            resp.headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
        }
        return Err((resp, None));
    }
    let routing = match &fe.routing {
        Ok(r) => r,
        Err(e) => return Err((bad_gateway("invalid_url_map", e.clone()), None)),
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
        method: req.method().as_str(),
        host,
        path,
        query,
        headers: req.headers(),
    });
    if let Some(r) = rec.as_mut() {
        r.url_map_rule = route.rule.to_string();
    }
    let fwd = match route.action {
        RouteAction::Unavailable(why) => {
            return Err((bad_gateway("failed_to_pick_backend", why.clone()), None))
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
            return Err((resp, None));
        }
        RouteAction::Forward(f) => f,
    };
    let at = fwd.pick_at(if fwd.services.len() > 1 {
        rand::random()
    } else {
        0
    });
    let bs = fe.services[fwd.services[at].0].clone();
    // Owned copies: `fwd` borrows the request, which is rewritten below.
    // headerAction: the weighted backend service's, then the route rule's (url_map/header_action.rs).
    let header_actions = [
        fwd.service_headers.get(at).cloned().flatten(),
        fwd.headers.clone(),
    ];
    let (mirror_to, route_timeout) = (fwd.mirror, fwd.timeout);
    // faultInjectionPolicy.abort: that share of requests is answered here with its status.
    if let Some((status, percent)) = fwd.abort {
        if rand::random::<f64>() * 100.0 < percent {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            return Err((
                local(status, format!("{status}: fault filter abort\n")),
                Some(bs),
            ));
        }
    }
    if let Some(r) = rec.as_mut() {
        r.backend_service = bs.key.clone();
    }
    // Request logs, Cloud Armor, IAP and Cloud CDN (edge.rs), boxed so that backend services
    // without them pay for neither the call nor its state in this future.
    let edge_facts = edge::Facts {
        rule: &fe.rule,
        host: host_full,
        path,
        query,
    };
    let edge = if edge::enabled(&bs) {
        match Box::pin(edge::apply(ctx, conn, &bs, &edge_facts, &req, rec)).await {
            Ok(e) => e,
            Err(resp) => return Err((resp, Some(bs))),
        }
    } else {
        edge::Edge::default()
    };
    // Only GENERATED_COOKIE affinity reads the `GCLB` cookie: skip parsing cookies otherwise.
    let cookie = match bs.affinity {
        SessionAffinity::GeneratedCookie { .. } => affinity_cookie_value(req.headers()),
        _ => None,
    };
    // Only RANDOM load balancing draws a random number.
    let random = if bs.draws_random() { rand::random() } else { 0 };
    let Some(pick) = bs.pick(conn.client.ip(), cookie, random) else {
        let why = format!("backend service {} has no healthy endpoint", bs.key);
        return Err((bad_gateway("failed_to_pick_backend", why), Some(bs)));
    };
    let set_cookie = pick.set_cookie;
    let ep = pick.endpoint;
    if let Some(r) = rec.as_mut() {
        r.endpoint = ep.addr.to_string();
    }
    // Only a backend service with an endpoint the firewall refuses looks (compile.rs).
    if bs.firewall_gated && !ep.admission.traffic() {
        // The firewall drops the connection from Google's front end (dataplane/firewall.rs).
        let why = format!(
            "endpoint {} of backend service {}: {}",
            ep.addr,
            bs.key,
            ep.admission.traffic_refusal()
        );
        return Err((bad_gateway("failed_to_connect_to_backend", why), Some(bs)));
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
                    return Err((bad_gateway("invalid_url_rewrite", why), Some(bs)));
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
    // One pass over the header names instead of a hashed lookup for each name asked about.
    let seen = headers::scan(req.headers());
    let upgrade = seen.upgrade;
    let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));
    let version = req.version();
    let te_trailers =
        bs.protocol == BackendProtocol::Http2 && grpc::asks_for_trailers(req.headers());
    let headers = req.headers_mut();
    remove_seen(headers, &seen, upgrade);
    if let Some(h) = host_value {
        headers.insert(HOST, h);
    } else if !seen.host {
        if let Some(h) = host_value_in.clone() {
            headers.insert(HOST, h);
        }
    }
    let previous = match seen.forwarded_for {
        true => headers.get(&X_FORWARDED_FOR).and_then(|v| v.to_str().ok()),
        false => None,
    };
    let xff = match previous {
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
    for (name, v) in edge.headers {
        headers.insert(name, v);
    }
    for ha in header_actions.iter().flatten() {
        ha.apply_request(headers);
    }
    if let Some((mirror, percent)) = mirror_to {
        mirror::spawn(&fe.services[mirror], &req, percent);
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

    // Requests in flight are counted only for LEAST_REQUEST, the one policy that reads them.
    let guard = bs.counts_in_flight().then(|| {
        ep.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(ep.clone())
    });
    Ok((
        req,
        Pending {
            // A route action's `timeout` replaces the backend service's `timeoutSec`.
            limit: route_timeout.unwrap_or(bs.timeout),
            bs,
            ep,
            set_cookie,
            header_actions,
            client_upgrade,
            version,
            stream_start,
            guard,
            fill: edge.fill,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of what `f` returns, here an `async fn`'s future.
    fn output_size<A, B, C, R>(_: fn(A, B, C) -> R) -> usize {
        std::mem::size_of::<R>()
    }

    /// hyper stores the proxy's future in its connection's slot and copies it there once per
    /// request, and one slot per client connection stays allocated while the request is in
    /// flight: every byte of it is paid per request. It was 5,168 bytes when the preparation,
    /// the exchange and a second copy of each argument were all held at once; it is 1,464 now.
    #[test]
    fn the_request_future_stays_small() {
        let size = output_size(handle);
        assert!(
            size <= 2048,
            "proxy::handle's future is {size} bytes: keep what lives across its awaits small"
        );
    }
}
