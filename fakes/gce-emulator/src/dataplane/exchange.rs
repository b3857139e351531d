//! What every step of a request shares, at the bottom of the data plane's modules: the
//! response body type, the facts of the client connection, and the responses the load balancer
//! makes itself. The features (armor/, cdn/, iap/, logging/, grpc.rs, mirror.rs) and the proxy
//! on top of them import these from here, never from the proxy, so no feature depends on the
//! code that calls it (docs/emulator-dataplane.md, "How traffic flows").

use std::net::SocketAddr;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::{Either, Full};

use crate::dataplane::upstream::UpstreamBody;

/// `Via: 1.1 google`, on requests and responses (Compute docs, "HTTP(S) load balancing headers").
pub static VIA: HeaderValue = HeaderValue::from_static("1.1 google");
/// The `Via` header name.
pub static VIA_NAME: HeaderName = HeaderName::from_static("via");

/// Response body: the endpoint's streamed body or a local one.
pub type Body = Either<UpstreamBody, Full<Bytes>>;

/// What the proxy knows of one client connection.
#[derive(Debug)]
pub struct ConnInfo {
    /// Client socket.
    pub client: SocketAddr,
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
    /// Connection facts for a client of the listener on `lb_ip`; `tls` is (SNI, TLS version)
    /// for a TLS connection.
    pub fn new(
        client: SocketAddr,
        lb_ip: std::net::IpAddr,
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
            https,
            sni,
            tls_version,
            forwarded_for,
            forwarded_for_value,
            local_port,
        }
    }
}

/// A response made by the proxy itself (`text/plain`, `Via: 1.1 google`).
pub fn local(status: StatusCode, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Either::Right(Full::new(body.into())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r.headers_mut().insert(VIA_NAME.clone(), VIA.clone());
    r
}

/// Adds the `Alt-Svc` header that advertises HTTP/3 on UDP `port`.
pub fn advertise(headers: &mut http::HeaderMap, port: u16) {
    if let Ok(v) = HeaderValue::from_str(&format!("h3=\":{port}\"; ma={ALT_SVC_MAX_AGE}")) {
        headers.insert(http::header::ALT_SVC, v);
    }
}

/// `ma` of the `Alt-Svc` header: 30 days, as Google's front ends send.
pub const ALT_SVC_MAX_AGE: u32 = 2_592_000;
