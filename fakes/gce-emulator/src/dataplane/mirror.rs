//! `routeAction.requestMirrorPolicy` (Compute API v1 reference, `RequestMirrorPolicy`): a copy of
//! the request goes to the mirror ("shadow") backend service, whose response is discarded; the
//! load balancer "does not wait for responses from the shadow service". As on Google's proxies,
//! the mirrored request's `Host` gets `-shadow` appended. `mirrorPercent` (default 100) is the
//! share of requests mirrored.
//!
//! Emulator limits: only requests without a body are mirrored (the body streams once, to the
//! chosen backend), and only to backend services of protocol HTTP.

use std::sync::Arc;

use bytes::Bytes;
use http::header::HOST;
use http::{HeaderValue, Request};
use http_body_util::Full;
use hyper::body::{Body as _, Incoming};
use hyper_util::rt::TokioIo;

use crate::dataplane::backend_service::{BackendProtocol, BackendService};

/// Sends a copy of `req` (as it will be forwarded: headers already rewritten) to an endpoint of
/// `mirror`, in the background, with probability `percent`/100.
pub fn spawn(mirror: &Arc<BackendService>, req: &Request<Incoming>, percent: f64) {
    if mirror.protocol != BackendProtocol::Http || !req.body().is_end_stream() {
        return;
    }
    if percent < 100.0 && rand::random::<f64>() * 100.0 >= percent {
        return;
    }
    let Some(pick) = mirror.pick(std::net::Ipv4Addr::LOCALHOST.into(), None, rand::random()) else {
        return;
    };
    let mut copy = Request::new(Full::new(Bytes::new()));
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req
        .uri()
        .path_and_query()
        .map(|pq| pq.as_str())
        .unwrap_or("/")
        .parse()
        .unwrap_or_default();
    *copy.headers_mut() = req.headers().clone();
    let host = req
        .headers()
        .get(HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let shadow = match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{h}-shadow:{port}")
        }
        _ => format!("{host}-shadow"),
    };
    if let Ok(v) = HeaderValue::from_str(&shadow) {
        copy.headers_mut().insert(HOST, v);
    }
    let addr = pick.endpoint.addr;
    tokio::spawn(async move {
        let Ok(tcp) = tokio::net::TcpStream::connect(addr).await else {
            return;
        };
        let Ok((mut send, conn)) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await
        else {
            return;
        };
        tokio::spawn(conn);
        let _ = send.send_request(copy).await;
    });
}
