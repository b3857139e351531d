//! A prepared request's exchange with its endpoint: the send, bounded by the backend
//! service's `timeoutSec` (or the route's `timeout`), the load balancer's own answer when the
//! endpoint fails (502 with Cloud Logging's `statusDetails`, 504 on the timeout), and the
//! endpoint's response rewritten for the client (hop-by-hop headers, `Via: 1.1 google`, custom
//! response headers, `headerAction`, the affinity cookie, a WebSocket upgrade, a CDN fill).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use http::header::{HeaderValue, SET_COOKIE};
use http::{Request, Response, StatusCode};
use http_body_util::Either;
use hyper::body::Incoming;

use super::answer::{bad_gateway, error_response, Answer};
use super::headers::{expand, remove_hop_by_hop};
use crate::dataplane::access_log::AccessRecord;
use crate::dataplane::backend_service::{BackendService, Endpoint};
use crate::dataplane::cdn;
use crate::dataplane::coarse_timer::Elapsed;
use crate::dataplane::exchange::{Body, ConnInfo, VIA, VIA_NAME};
use crate::dataplane::grpc;
use crate::dataplane::proxy_context::ProxyContext;
use crate::dataplane::request_checks;
use crate::dataplane::upstream::{UpstreamBody, UpstreamError};
use crate::dataplane::url_map::header_action::HeaderAction;

/// Counts a request in flight to an endpoint (LEAST_REQUEST reads it) until dropped.
pub(super) struct InFlight(pub(super) Arc<Endpoint>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What a prepared request keeps for its exchange with the endpoint: the backend service and
/// endpoint picked, and what the response's rewriting needs.
pub(super) struct Pending {
    pub(super) bs: Arc<BackendService>,
    pub(super) ep: Arc<Endpoint>,
    /// `timeoutSec` of the backend service, or the route's `timeout`.
    pub(super) limit: std::time::Duration,
    /// GENERATED_COOKIE affinity picked a new endpoint: the response sets the cookie.
    pub(super) set_cookie: bool,
    /// `headerAction`s of the weighted backend service and of the route rule.
    pub(super) header_actions: [Option<Arc<HeaderAction>>; 2],
    /// The client's side of an `Upgrade` (WebSocket).
    pub(super) client_upgrade: Option<hyper::upgrade::OnUpgrade>,
    /// The client's HTTP version (for custom header variables).
    pub(super) version: http::Version,
    /// When an HTTP/2 backend's stream started (grpc.rs bounds it by `timeoutSec`).
    pub(super) stream_start: Option<Instant>,
    pub(super) guard: Option<InFlight>,
    /// The cache entry the response fills (Cloud CDN missed).
    pub(super) fill: Option<Box<cdn::Fill>>,
}

impl Pending {
    /// Sends `req` to the endpoint and rewrites its response for the client; the answer when
    /// the endpoint fails, times out or was drained. Written as a function returning its future
    /// so that `self` and `req` are stored in it once (an `async fn` keeps its arguments twice).
    #[allow(clippy::manual_async_fn)] // an `async fn` would store `self` and `req` twice
    pub(super) fn exchange<'a>(
        mut self,
        ctx: &'a ProxyContext,
        conn: &'a ConnInfo,
        req: Request<Incoming>,
        rec: &'a mut Option<Box<AccessRecord>>,
    ) -> impl std::future::Future<Output = Answer> + Send + 'a {
        async move {
            let sent = {
                // Pinned here, in this future's state: handed to the timeout by value, the send
                // future was stored twice more and copied on every request.
                let send = std::pin::pin!(ctx.upstream.send(self.bs.protocol, &self.ep, req));
                ctx.timer.timeout(self.limit, send).await
            };
            let resp = match self.response(conn, sent) {
                Ok(resp) => resp,
                Err(answer) => return answer,
            };
            match self.fill {
                Some(f) => (Box::pin((*f).store(resp, rec)).await, Some(self.bs)),
                None => (resp, Some(self.bs)),
            }
        }
    }

    /// The endpoint's response rewritten for the client, or the load balancer's answer when
    /// the exchange failed.
    #[allow(clippy::result_large_err)] // both sides are a response: boxing one buys nothing
    fn response(
        &mut self,
        conn: &ConnInfo,
        sent: Result<Result<Response<UpstreamBody>, UpstreamError>, Elapsed>,
    ) -> Result<Response<Body>, Answer> {
        let (bs, ep, limit) = (&self.bs, &self.ep, self.limit);
        let mut resp = match sent {
            Err(_) => {
                let why = format!(
                "endpoint {} did not answer within {:?} (timeoutSec={} of backend service {}, or the route's timeout)",
                ep.addr,
                limit,
                bs.timeout.as_secs(),
                bs.key
            );
                return Err((
                    error_response(StatusCode::GATEWAY_TIMEOUT, "backend_timeout", &why),
                    Some(bs.clone()),
                ));
            }
            Ok(Err(_)) if ep.drained.is_cancelled() => {
                let why = format!(
                "endpoint {} left backend service {} and its connectionDraining.drainingTimeoutSec={} elapsed",
                ep.addr,
                bs.key,
                ep.draining_timeout_sec.load(Ordering::Relaxed)
            );
                return Err((
                    bad_gateway("backend_connection_closed_before_data_sent_to_client", why),
                    Some(bs.clone()),
                ));
            }
            Ok(Err(e)) if request_checks::client_body_failed(&e) => {
                let why = format!("the request body broke its framing: {e}");
                let resp = error_response(StatusCode::BAD_REQUEST, "client_error", &why);
                return Err((resp, Some(bs.clone())));
            }
            Ok(Err(e)) => {
                let why = format!("endpoint {} of backend service {}: {e}", ep.addr, bs.key);
                let detail = if e.is_connect() {
                    "failed_to_connect_to_backend"
                } else {
                    "backend_connection_closed_before_data_sent_to_client"
                };
                return Err((bad_gateway(detail, why), Some(bs.clone())));
            }
            Ok(Ok(r)) => r,
        };
        self.guard = None;
        // The status line carries the load balancer's own version, not the endpoint's: an
        // intermediary sends its own HTTP-version in what it forwards (RFC 9110 section 6.2, and
        // section 7.6 on message forwarding), as the `Via: 1.1 google` it adds says. hyper writes
        // a response's version as it is, so an HTTP/1.0 endpoint's answer would go out as
        // `HTTP/1.0 200 OK`. (hyper still answers a client that itself sent HTTP/1.0 in HTTP/1.0.)
        // HTTP/2 and HTTP/3 connections frame the answer in their own version.
        *resp.version_mut() = http::Version::HTTP_11;
        if let Some(start) = self.stream_start {
            resp.body_mut()
                .limit(grpc::stream_deadline(bs.timeout, start.elapsed()));
        }

        if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
            if let Some(client_upgrade) = self.client_upgrade.take() {
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
            if let Ok(v) = HeaderValue::from_str(&expand(template, conn, self.version)) {
                h.insert(name.clone(), v);
            }
        }
        for ha in self.header_actions.iter().flatten() {
            ha.apply_response(h);
        }
        if self.set_cookie {
            if let Ok(v) = HeaderValue::from_str(&bs.affinity_cookie(ep)) {
                h.append(SET_COOKIE, v);
            }
        }
        Ok(resp.map(Either::Left))
    }
}
