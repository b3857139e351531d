//! What the proxy does differently for HTTP/2 backends (backend service `protocol: HTTP2`),
//! the protocol gRPC needs (gRPC "PROTOCOL-HTTP2"; GKE's "Using HTTP/2 for load balancing with
//! Ingress"): everything else about a gRPC call (streaming both ways without buffering, response
//! trailers such as `grpc-status`, `grpc-message` and custom ones, `grpc-timeout`, RST_STREAM
//! from either side) passes through hyper's HTTP/2 server and client unchanged.
//!
//! - `te: trailers` is kept towards the backend. `TE` is a hop-by-hop header (RFC 9110 §7.6.1),
//!   but RFC 9113 §8.2.2 lets an HTTP/2 request carry it with the single value `trailers`, and
//!   gRPC servers refuse calls without it (the header tells them that the proxies on the way
//!   forward trailers). It is kept only when the client sent `trailers` among its TE values.
//! - `timeoutSec` bounds the whole exchange, as Google defines the backend service timeout for
//!   the Application Load Balancer ("the maximum amount of time allowed between the load
//!   balancer sending the first byte of a request to the backend and the backend returning the
//!   last byte of the HTTP response"): for a stream (a gRPC server-streaming or bidirectional
//!   call) that is its longest life. Response headers still missing then: 504 `backend_timeout`
//!   (a gRPC client reads UNAVAILABLE). Headers sent and the body still streaming: the stream
//!   is reset towards the client (RST_STREAM; an HTTP/1.1 client's connection is closed) and
//!   cancelled towards the backend (RST_STREAM CANCEL), so the backend sees a cancelled call.
//!   HTTP and HTTPS backends keep the emulator's older rule (time to the response headers), a
//!   documented difference: their per-request cost stays as benchmarked.

use std::time::Duration;

use http::header::{HeaderMap, HeaderValue, TE};

pub use crate::dataplane::upstream::BodyEnd;
use crate::dataplane::upstream::UpstreamError;

/// Whether the request's `TE` header lists `trailers` (RFC 9110 §10.1.4: a comma-separated
/// list of transfer codings with optional parameters; names compare case-insensitively).
pub fn asks_for_trailers(headers: &HeaderMap) -> bool {
    headers.get_all(TE).iter().any(|v| {
        v.to_str().is_ok_and(|s| {
            s.split(',').any(|item| {
                item.split(';')
                    .next()
                    .is_some_and(|name| name.trim().eq_ignore_ascii_case("trailers"))
            })
        })
    })
}

/// The `TE` value an HTTP/2 request may carry (RFC 9113 §8.2.2).
pub static TE_TRAILERS: HeaderValue = HeaderValue::from_static("trailers");

/// The end of a stream whose exchange started `elapsed` ago under `timeoutSec` = `limit`:
/// resolves when the rest of `limit` has passed.
pub fn stream_deadline(limit: Duration, elapsed: Duration) -> BodyEnd {
    let rest = limit.saturating_sub(elapsed);
    Box::pin(async move {
        tokio::time::sleep(rest).await;
        UpstreamError::StreamTimeout(limit.as_secs())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn te(values: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(TE, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn trailers_among_te_values() {
        assert!(asks_for_trailers(&te(&["trailers"])));
        assert!(asks_for_trailers(&te(&["gzip;q=0.5, Trailers"])));
        assert!(asks_for_trailers(&te(&["gzip", "trailers"])));
        assert!(!asks_for_trailers(&te(&["gzip"])));
        assert!(!asks_for_trailers(&te(&["trailersx"])));
        assert!(!asks_for_trailers(&te(&[])));
    }

    #[tokio::test]
    async fn the_deadline_counts_from_the_start_of_the_exchange() {
        use futures::FutureExt;
        // The exchange already took all of timeoutSec (or more): the body ends at once.
        let e = stream_deadline(Duration::from_secs(10), Duration::from_secs(10)).await;
        assert!(matches!(e, UpstreamError::StreamTimeout(10)), "{e}");
        let e = stream_deadline(Duration::from_secs(1), Duration::from_secs(5)).await;
        assert!(matches!(e, UpstreamError::StreamTimeout(1)), "{e}");
        // Time left: still running.
        let mut pending = stream_deadline(Duration::from_secs(3600), Duration::from_secs(1));
        assert!((&mut pending).now_or_never().is_none());
    }
}
