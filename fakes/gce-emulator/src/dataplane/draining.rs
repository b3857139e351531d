//! Connection draining: `connectionDraining.drainingTimeoutSec` of a backend service (0 to 3600,
//! default 0), as Google documents it ("Enabling connection draining", load balancing docs):
//! once an endpoint is removed from its zonal NEG, or its NEG from the backend service, the
//! load balancer sends it no new requests; requests already in flight on it may finish for up
//! to the draining timeout, then its remaining connections are closed. `0` disables draining:
//! they are closed at once. When several backend services use the same NEG, the largest of
//! their timeouts applies.
//!
//! How the data plane does it:
//! - The compiler ([`crate::dataplane::compile`]) leaves a removed endpoint out of the new
//!   routing tables, so no new request picks it, and returns it; [`start`] then cancels its
//!   [`Endpoint::drained`] token when its timeout ([`Endpoint::draining_timeout_sec`]) elapses.
//! - HTTP backends: when the token fires, the task of each upstream HTTP/1 connection to the
//!   endpoint is aborted (`upstream.rs`, `Http1Pool::close_all`), which closes the socket: the
//!   connections do not watch the token themselves, which cost a lock on every request. hyper then
//!   fails a request still waiting for its response headers (the client gets 502
//!   `backend_connection_closed_before_data_sent_to_client`) and a response body still being
//!   streamed (the client's connection or stream is aborted, never ended as if complete).
//! - HTTPS and HTTP2 backends share pooled connections per address, so each request races the
//!   token instead, and so does its response body
//!   ([`crate::dataplane::upstream::UpstreamBody`]).
//! - WebSocket connections to the endpoint are closed too (the copy task in `proxy.rs`).
//!
//! Deviation: Google notes that closing may take up to 60 s more after the timeout; here it
//! happens at the timeout.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::dataplane::backend_service::Endpoint;

/// Starts draining an endpoint that left the routing tables: its token is cancelled after
/// its `draining_timeout_sec` (at once for 0). Must be called inside a Tokio runtime.
pub fn start(ep: &Arc<Endpoint>) {
    let secs = ep.draining_timeout_sec.load(Ordering::Relaxed);
    tracing::info!(endpoint = %ep.addr, backend_service = %ep.key.backend_service, neg = %ep.key.neg, draining_timeout_sec = secs, "endpoint removed; draining");
    if secs == 0 {
        end(ep);
        return;
    }
    let ep = ep.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(secs)).await;
        end(&ep);
    });
}

/// The end of an endpoint's draining: its token is cancelled (HTTPS and HTTP2 requests, response
/// bodies and WebSockets race it) and its HTTP/1 connections are closed.
fn end(ep: &Endpoint) {
    ep.drained.cancel();
    ep.pool.close_all();
}
