//! HTTP/3 over QUIC for target HTTPS proxies with `quicOverride: ENABLE` (Compute API v1
//! `targetHttpsProxies`: "the load balancer uses QUIC when possible"), with the well-kept
//! `quinn` (QUIC) and `h3` (HTTP/3) crates.
//!
//! - `ENABLE`: a UDP socket at the forwarding rule's address and port (the same local port as
//!   its TCP listener, after the port map) accepts QUIC with the proxy's certificates (chosen
//!   by SNI, as on TCP) and ALPN `h3`; TLS 1.3 only, as QUIC requires. Every response of the
//!   TCP listener, HTTP/1.1 or HTTP/2, advertises it with `Alt-Svc: h3=":PORT"; ma=2592000` (the
//!   header and max-age Google's front ends send; they also list the draft `h3-29`, which quinn
//!   does not speak, so the emulator leaves it out).
//! - `DISABLE`: no QUIC: nothing listens on the UDP port and no `Alt-Svc` is sent ("the load
//!   balancer doesn't use QUIC").
//! - `NONE` (the default): "Google manages whether QUIC is used"; the emulator then does not
//!   offer QUIC, as for `DISABLE`, so a test that needs HTTP/3 says `ENABLE`.
//!
//! Requests arriving over HTTP/3 are served by the same proxy as TCP ones (routing, headers,
//! timeouts): each QUIC connection is bridged to the proxy through an in-memory HTTP/2
//! connection (hyper's client on one end, the listener's HTTP/2 server on the other), so
//! HTTP/3 costs nothing on the TCP path. Bodies and trailers stream both ways.

use std::net::SocketAddr;
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use bytes::{Buf, Bytes};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio_util::sync::CancellationToken;

use crate::dataplane::compile::Frontend;
use crate::dataplane::exchange::ConnInfo;
use crate::dataplane::proxy::Connection;
use crate::dataplane::serve::{self, Serving};
use crate::dataplane::tls::TLS_HANDSHAKE_TIMEOUT;

/// Buffer of the in-memory HTTP/2 connection between a QUIC connection and the proxy.
const BRIDGE_BUFFER: usize = 256 * 1024;

pub use crate::dataplane::exchange::{advertise, ALT_SVC_MAX_AGE};

/// A QUIC endpoint serving HTTP/3 for one forwarding rule; closed on [`QuicListener::close`]
/// or drop.
pub struct QuicListener {
    endpoint: quinn::Endpoint,
    stop: CancellationToken,
}

impl std::fmt::Debug for QuicListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicListener")
            .field("local_addr", &self.endpoint.local_addr().ok())
            .finish()
    }
}

/// The QUIC server configuration of a proxy's TLS configuration: its certificates and SNI
/// selection, ALPN `h3`.
fn quic_config(tls: &rustls::ServerConfig) -> Result<Arc<quinn::ServerConfig>, String> {
    let mut tls = tls.clone();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.max_early_data_size = 0;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
        .map_err(|e| format!("no QUIC with this TLS configuration: {e}"))?;
    Ok(Arc::new(quinn::ServerConfig::with_crypto(Arc::new(crypto))))
}

/// The TLS configuration of the frontend in `slot`, when it asks for QUIC.
fn current_tls(slot: &ArcSwapOption<Frontend>) -> Option<Arc<rustls::ServerConfig>> {
    let fe = slot.load_full()?;
    match (&fe.tls, fe.quic) {
        (Some(Ok(cfg)), true) => Some(cfg.clone()),
        _ => None,
    }
}

impl QuicListener {
    /// Binds UDP `addr` and serves HTTP/3 for the frontend in `slot` (read per connection, so
    /// certificate changes apply to new connections).
    ///
    /// Errors: the UDP socket cannot be bound, or the proxy has no TLS configuration QUIC can
    /// use.
    pub fn open(
        addr: SocketAddr,
        slot: Arc<ArcSwapOption<Frontend>>,
        serving: Arc<Serving>,
        parent: &CancellationToken,
    ) -> std::io::Result<QuicListener> {
        let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
        let tls = current_tls(&slot).ok_or_else(|| invalid("no TLS configuration".into()))?;
        let config = quic_config(&tls).map_err(invalid)?;
        let socket = std::net::UdpSocket::bind(addr)?;
        let endpoint = quinn::Endpoint::new(
            quinn::EndpointConfig::default(),
            Some((*config).clone()),
            socket,
            Arc::new(quinn::TokioRuntime),
        )?;
        let stop = parent.child_token();
        tokio::spawn(accept_loop(
            endpoint.clone(),
            (Arc::as_ptr(&tls) as usize, config),
            slot,
            serving,
            stop.clone(),
        ));
        Ok(QuicListener { endpoint, stop })
    }

    /// The UDP socket bound.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// Stops accepting; open connections finish their requests and close.
    pub fn close(&self) {
        self.stop.cancel();
    }
}

impl Drop for QuicListener {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn accept_loop(
    endpoint: quinn::Endpoint,
    mut cached: (usize, Arc<quinn::ServerConfig>),
    slot: Arc<ArcSwapOption<Frontend>>,
    serving: Arc<Serving>,
    stop: CancellationToken,
) {
    loop {
        let incoming = tokio::select! {
            _ = stop.cancelled() => break,
            i = endpoint.accept() => match i { Some(i) => i, None => break },
        };
        let Some(tls) = current_tls(&slot) else {
            incoming.refuse();
            continue;
        };
        if Arc::as_ptr(&tls) as usize != cached.0 {
            match quic_config(&tls) {
                Ok(c) => cached = (Arc::as_ptr(&tls) as usize, c),
                Err(e) => {
                    tracing::warn!(error = %e, "QUIC connection refused");
                    incoming.refuse();
                    continue;
                }
            }
        }
        let Some(permit) = serving.permits.clone().try_acquire_owned().ok() else {
            incoming.refuse();
            continue;
        };
        let connecting = match incoming.accept_with(cached.1.clone()) {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e, "QUIC handshake failed");
                continue;
            }
        };
        let (slot, serving, stop) = (slot.clone(), serving.clone(), stop.clone());
        let local_port = endpoint.local_addr().map(|a| a.port()).unwrap_or(0);
        tokio::spawn(async move {
            serve_connection(connecting, local_port, slot, serving, stop).await;
            drop(permit);
        });
    }
    endpoint.close(0u32.into(), b"listener closed");
}

async fn serve_connection(
    connecting: quinn::Connecting,
    local_port: u16,
    slot: Arc<ArcSwapOption<Frontend>>,
    serving: Arc<Serving>,
    stop: CancellationToken,
) {
    let conn = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, connecting).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "QUIC handshake failed");
            return;
        }
        Err(_) => return,
    };
    let Some(lb_ip) = slot.load().as_ref().map(|fe| fe.ip) else {
        return;
    };
    let sni = conn
        .handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|d| d.server_name);
    let info = Arc::new(Connection {
        info: ConnInfo::new(
            conn.remote_address(),
            lb_ip,
            Some((sni, Some("TLSv1_3".to_string()))),
            local_port,
        ),
        frontend: slot,
    });
    // The proxy's end of the in-memory HTTP/2 connection.
    let (ours, theirs) = tokio::io::duplex(BRIDGE_BUFFER);
    let proxy_stop = stop.clone();
    tokio::spawn(async move {
        serve::drive(TokioIo::new(theirs), true, info, &serving, &proxy_stop).await;
    });
    let sender =
        match hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(ours)).await
        {
            Ok((sender, bridge)) => {
                tokio::spawn(bridge);
                sender
            }
            Err(e) => {
                tracing::warn!(error = %e, "HTTP/3: cannot reach the proxy");
                return;
            }
        };
    let mut h3 = match h3::server::builder()
        .build::<_, Bytes>(h3_quinn::Connection::new(conn))
        .await
    {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(error = %e, "HTTP/3 connection setup failed");
            return;
        }
    };
    loop {
        tokio::select! {
            _ = stop.cancelled() => {
                let _ = h3.shutdown(0).await;
                break;
            }
            accepted = h3.accept() => match accepted {
                Ok(Some(resolver)) => {
                    let sender = sender.clone();
                    tokio::spawn(async move {
                        if let Err(e) = serve_request(resolver, sender).await {
                            tracing::debug!(error = %e, "HTTP/3 request ended with an error");
                        }
                    });
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(error = %e, "HTTP/3 connection ended");
                    break;
                }
            },
        }
    }
}

type Resolver = h3::server::RequestResolver<h3_quinn::Connection, Bytes>;

/// One HTTP/3 request: forwarded to the proxy over the bridge, its response streamed back
/// (headers, data, trailers).
async fn serve_request(
    resolver: Resolver,
    mut proxy: hyper::client::conn::http2::SendRequest<RequestBody>,
) -> Result<(), String> {
    let (req, stream) = resolver
        .resolve_request()
        .await
        .map_err(|e| format!("request headers: {e}"))?;
    let (mut send, recv) = stream.split();
    let (mut parts, ()) = req.into_parts();
    parts.version = http::Version::HTTP_2;
    let req = http::Request::from_parts(parts, RequestBody::new(recv));
    let resp = proxy
        .send_request(req)
        .await
        .map_err(|e| format!("proxy: {e}"))?;
    let (parts, mut body) = resp.into_parts();
    send.send_response(http::Response::from_parts(parts, ()))
        .await
        .map_err(|e| format!("response headers: {e}"))?;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("response body: {e}"))?;
        match frame.into_data() {
            Ok(data) => send
                .send_data(data)
                .await
                .map_err(|e| format!("response body: {e}"))?,
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    send.send_trailers(trailers)
                        .await
                        .map_err(|e| format!("response trailers: {e}"))?;
                }
            }
        }
    }
    send.finish().await.map_err(|e| format!("finish: {e}"))
}

/// An HTTP/3 request body as an HTTP body: data frames, then the trailers if any.
pub struct RequestBody {
    recv: h3::server::RequestStream<h3_quinn::RecvStream, Bytes>,
    data_done: bool,
    done: bool,
}

impl RequestBody {
    fn new(recv: h3::server::RequestStream<h3_quinn::RecvStream, Bytes>) -> Self {
        RequestBody {
            recv,
            data_done: false,
            done: false,
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = h3::error::StreamError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        use std::task::Poll;
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if !this.data_done {
            match std::task::ready!(this.recv.poll_recv_data(cx)) {
                Ok(Some(mut buf)) => {
                    let bytes = buf.copy_to_bytes(buf.remaining());
                    return Poll::Ready(Some(Ok(Frame::data(bytes))));
                }
                Ok(None) => this.data_done = true,
                Err(e) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
        let r = std::task::ready!(this.recv.poll_recv_trailers(cx));
        this.done = true;
        Poll::Ready(match r {
            Ok(Some(t)) => Some(Ok(Frame::trailers(t))),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        })
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
