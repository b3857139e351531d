//! Serving one client connection's HTTP: hyper's HTTP/1 and HTTP/2 servers calling the proxy
//! for each request, with the limits of listener.rs. Below the listeners of TCP (listener.rs)
//! and QUIC (quic.rs), which both hand their connections here.

use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper_util::rt::TokioExecutor;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::dataplane::head_tap::{AmbiguousFraming, HeadVerdicts};
use crate::dataplane::proxy::{self, Connection};
use crate::dataplane::proxy_context::ProxyContext;

/// Largest request header block accepted (64 KiB, Google's proxies allow about the same).
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// Time to receive a request's headers, and keep-alive idle time.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// Shared by every listener.
pub struct Serving {
    /// Proxy state.
    pub ctx: Arc<ProxyContext>,
    /// Connection permits (max connections).
    pub permits: Arc<Semaphore>,
    http1: http1::Builder,
    http2: http2::Builder<TokioExecutor>,
}

impl Serving {
    /// Serving state allowing `max_connections` client connections, each given
    /// `header_read_timeout` to send a request's headers (and to idle between requests).
    pub fn new(
        ctx: Arc<ProxyContext>,
        max_connections: usize,
        header_read_timeout: Duration,
    ) -> Serving {
        let mut h1 = http1::Builder::new();
        h1.timer(ctx.timer.clone())
            .header_read_timeout(header_read_timeout)
            .max_buf_size(MAX_HEADER_BYTES)
            // The buffer limit alone is not a head limit: one read can take the buffer past
            // it and complete a larger head. This refuses any head over the limit with 431.
            .max_header_size(MAX_HEADER_BYTES)
            // Small proxied messages: one flattened buffer beats a writev of several pieces.
            .writev(false)
            .keep_alive(true);
        let mut h2 = http2::Builder::new(TokioExecutor::new());
        h2.timer(ctx.timer.clone())
            .max_header_list_size(MAX_HEADER_BYTES as u32)
            .max_concurrent_streams(1000);
        Serving {
            ctx,
            permits: Arc::new(Semaphore::new(max_connections)),
            http1: h1,
            http2: h2,
        }
    }
}

/// Serves HTTP/1.1 (with upgrades), or HTTP/2 when TLS negotiated `h2`; clear-text HTTP/2
/// (h2c) is not offered, as on Google's front ends. On `stop`, in-flight requests finish.
/// HTTP/3 connections come here too, through an in-memory HTTP/2 connection (quic.rs).
pub(crate) async fn drive<I>(
    io: I,
    h2: bool,
    conn: Arc<Connection>,
    serving: &Arc<Serving>,
    stop: &CancellationToken,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    drive_tapped(io, h2, conn, None, serving, stop).await;
}

/// [`drive`] for an HTTP/1 connection read through a [`HeadTap`]: each request takes its head's
/// verdict, and one the tap found ambiguous is marked [`AmbiguousFraming`] (refused with 400 by
/// request_checks.rs) and answered with `Connection: close`, as nginx closes after such a 400.
pub(crate) async fn drive_tapped<I>(
    io: I,
    h2: bool,
    conn: Arc<Connection>,
    heads: Option<Arc<HeadVerdicts>>,
    serving: &Arc<Serving>,
    stop: &CancellationToken,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let ctx = serving.ctx.clone();
    // The proxy's future is returned as it is, not wrapped in another that adds
    // `Connection: close` after an ambiguous head (request_checks.rs's refusal does that): the
    // wrapper cost a copy of that future (several KiB) per request.
    let svc = service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
        if let Some(why) = heads.as_ref().and_then(|h| h.next()).flatten() {
            req.extensions_mut().insert(AmbiguousFraming(why));
        }
        proxy::handle(ctx.clone(), conn.clone(), req)
    });
    macro_rules! run {
        ($c:expr) => {{
            let c = $c;
            tokio::pin!(c);
            tokio::select! {
                r = c.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "client connection ended with an error");
                    }
                }
                _ = stop.cancelled() => {
                    c.as_mut().graceful_shutdown();
                    let _ = c.await;
                }
            }
        }};
    }
    if h2 {
        // Boxed: hyper's HTTP/2 connection is several times the size of its HTTP/1 one.
        Box::pin(async move { run!(serving.http2.serve_connection(io, svc)) }).await;
    } else {
        run!(serving.http1.serve_connection(io, svc).with_upgrades());
    }
}
