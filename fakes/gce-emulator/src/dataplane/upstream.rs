//! Connections from the proxy to endpoints: keep-alive connection pools per backend protocol
//! (HTTP, HTTPS, HTTP2) and TLS without certificate verification, as Google's proxies do not
//! verify backend certificates (Compute docs, "Encryption to the backends").

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::future::Either;
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

use crate::dataplane::endpoint::Endpoint;

pub use crate::dataplane::endpoint::{Http1Pool, MAX_IDLE_PER_ENDPOINT, UPSTREAM_IDLE};

#[derive(Debug)]
struct AcceptAnyCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A client TLS configuration that accepts any server certificate, offering `alpn`.
pub fn insecure_client_config(alpn: &[&[u8]]) -> ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnyCert(provider)))
        .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    cfg
}

/// TLS handshake over `tcp` to an endpoint, without verification (for health probes).
pub async fn tls_connect(
    tcp: TcpStream,
    addr: SocketAddr,
    alpn: &[&[u8]],
) -> Result<TlsStream<TcpStream>, String> {
    static CONFIGS: OnceLock<[Arc<ClientConfig>; 3]> = OnceLock::new();
    let configs = CONFIGS.get_or_init(|| {
        [
            Arc::new(insecure_client_config(&[])),
            Arc::new(insecure_client_config(&[b"http/1.1"])),
            Arc::new(insecure_client_config(&[b"h2"])),
        ]
    });
    let cfg = match alpn.first() {
        Some(&b"h2") => configs[2].clone(),
        Some(_) => configs[1].clone(),
        None => configs[0].clone(),
    };
    let name = ServerName::IpAddress(addr.ip().into());
    tokio_rustls::TlsConnector::from(cfg)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake with {addr}: {e}"))
}

type HttpsClient = Client<HttpsConnector<HttpConnector>, Incoming>;

/// The upstream connection pools.
#[derive(Clone)]
pub struct Upstream {
    https: HttpsClient,
    http2: HttpsClient,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Upstream")
    }
}

fn connector() -> HttpConnector {
    let mut c = HttpConnector::new();
    c.set_nodelay(true);
    c.enforce_http(false);
    c.set_connect_timeout(Some(Duration::from_secs(10)));
    c
}

impl Default for Upstream {
    fn default() -> Self {
        let mut b = Client::builder(TokioExecutor::new());
        b.pool_idle_timeout(UPSTREAM_IDLE)
            .pool_max_idle_per_host(4096)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new());
        // hyper-rustls sets ALPN itself from the enabled protocols.
        let https = b.build(
            hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(insecure_client_config(&[]))
                .https_only()
                .enable_http1()
                .wrap_connector(connector()),
        );
        let mut b2 = b.clone();
        b2.http2_only(true);
        let http2 = b2.build(
            hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(insecure_client_config(&[]))
                .https_only()
                .enable_http2()
                .wrap_connector(connector()),
        );
        Upstream { https, http2 }
    }
}

impl Upstream {
    /// Sends `req` (origin-form URI, `/path?query`) to `ep` over `protocol`: HTTP through the
    /// endpoint's own HTTP/1 pool, HTTPS and HTTP2 through the shared TLS clients (which take
    /// the absolute URI `https://ip:port/path?query` built here). The HTTP future is returned
    /// as it is and the TLS ones boxed, so that the proxy's future, which holds this one, is
    /// not as large as the largest of them (`proxy::tests::the_request_future_stays_small`).
    pub fn send<'a>(
        &'a self,
        protocol: BackendProtocol,
        ep: &'a Arc<Endpoint>,
        req: http::Request<Incoming>,
    ) -> impl Future<Output = Result<http::Response<UpstreamBody>, UpstreamError>> + Send + 'a {
        let client = match protocol {
            BackendProtocol::Http => return Either::Left(send_http1(ep, req)),
            BackendProtocol::Https => &self.https,
            BackendProtocol::Http2 => &self.http2,
        };
        Either::Right(Box::pin(send_pooled(client, ep, req)))
    }
}

/// [`Upstream::send`] through a shared TLS client.
async fn send_pooled(
    client: &HttpsClient,
    ep: &Arc<Endpoint>,
    mut req: http::Request<Incoming>,
) -> Result<http::Response<UpstreamBody>, UpstreamError> {
    let mut parts = http::uri::Parts::default();
    parts.scheme = Some(http::uri::Scheme::HTTPS);
    parts.authority = Some(ep.authority.clone());
    parts.path_and_query = req.uri().path_and_query().cloned();
    *req.uri_mut() = http::Uri::from_parts(parts).map_err(UpstreamError::Uri)?;
    // These pools share connections between endpoints of the same address, so draining
    // cuts the request and its body rather than the connection (see draining.rs).
    let resp = ep
        .drained
        .run_until_cancelled(client.request(req))
        .await
        .ok_or(UpstreamError::Drained)?
        .map_err(UpstreamError::Client)?;
    let drained = ep.drained.clone();
    let drain: Option<BodyEnd> = Some(Box::pin(async move {
        drained.cancelled_owned().await;
        UpstreamError::Drained
    }));
    Ok(resp.map(|inner| UpstreamBody {
        inner,
        ret: None,
        done: false,
        drain,
    }))
}

/// A future that ends a response body: the endpoint's connection draining or, for HTTP/2
/// backends, the end of `timeoutSec` (grpc.rs); its output is the error the body then fails
/// with.
pub type BodyEnd = std::pin::Pin<Box<dyn std::future::Future<Output = UpstreamError> + Send>>;

/// `protocol` of a backend service: how the proxy talks to endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendProtocol {
    /// HTTP/1.1 over TCP.
    Http,
    /// HTTP/1.1 over TLS (endpoint certificates are not verified, like Google's proxies).
    Https,
    /// HTTP/2 over TLS.
    Http2,
}

/// Why an upstream request failed.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The TCP connection could not be established.
    #[error("connect: {0}")]
    Connect(String),
    /// The HTTP/1 exchange failed.
    #[error("{0}")]
    Http(#[from] hyper::Error),
    /// The pooled TLS client failed.
    #[error("{0:?}")]
    Client(hyper_util::client::legacy::Error),
    /// The request's path cannot form a URI with the endpoint's address.
    #[error("invalid upstream URI: {0}")]
    Uri(http::uri::InvalidUriParts),
    /// The endpoint was removed and its connection draining timeout elapsed (draining.rs).
    #[error("the endpoint was removed and its connection draining timeout elapsed")]
    Drained,
    /// An HTTP/2 backend's response was still streaming when the backend service's
    /// `timeoutSec` (seconds) ended (grpc.rs).
    #[error("the response was still streaming when timeoutSec={0} of the backend service ended")]
    StreamTimeout(u64),
}

impl UpstreamError {
    /// Whether the endpoint could not be reached at all (Cloud Logging's
    /// `failed_to_connect_to_backend`).
    pub fn is_connect(&self) -> bool {
        match self {
            UpstreamError::Connect(_) => true,
            UpstreamError::Http(_)
            | UpstreamError::Uri(_)
            | UpstreamError::Drained
            | UpstreamError::StreamTimeout(_) => false,
            UpstreamError::Client(e) => e.is_connect(),
        }
    }
}

/// A new HTTP/1 connection to `ep`, driven by its own task until it closes or the endpoint's
/// connection draining ends (draining.rs aborts the task through [`Http1Pool::close_all`]).
async fn connect_http1(ep: &Endpoint) -> Result<http1::SendRequest<Incoming>, UpstreamError> {
    let addr = ep.addr;
    let tcp = match tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(addr)).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return Err(UpstreamError::Connect(format!("{addr}: {e}"))),
        Err(_) => {
            return Err(UpstreamError::Connect(format!(
                "{addr}: no answer within 10 s"
            )))
        }
    };
    let _ = tcp.set_nodelay(true);
    let (sender, conn) = http1::Builder::new()
        .writev(false)
        .handshake(TokioIo::new(tcp))
        .await?;
    // Aborting the task when draining ends drops the connection, which closes its socket; hyper
    // then fails the pending request or response body on it.
    let task = tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    ep.pool.track(task.abort_handle());
    if ep.drained.is_cancelled() {
        // Draining ended while this connection was being made.
        task.abort();
    }
    Ok(sender)
}

/// [`Upstream::send`] over HTTP: on a pooled connection that is still open, else a new one;
/// a request the pooled connection did not take (it was closing) goes once more on a new
/// connection. A function returning its future, so that `req` is stored in it once.
#[allow(clippy::manual_async_fn)] // an `async fn` would store `req` twice
fn send_http1(
    ep: &Arc<Endpoint>,
    req: http::Request<Incoming>,
) -> impl Future<Output = Result<http::Response<UpstreamBody>, UpstreamError>> + Send + '_ {
    async move {
        let (mut sender, fresh) = match pooled(ep).await {
            Some(s) => (s, false),
            None => (Box::pin(connect_http1(ep)).await?, true),
        };
        // The result is taken apart in its own statement: held to the end of a `match` with
        // an await in an arm, it would stay in this future's state (272 bytes).
        let e = match sender.try_send_request(req).await {
            Ok(resp) => return Ok(pooled_response(resp, sender, ep)),
            Err(e) => e,
        };
        // Boxed: its state (the request given back, a new connection) only exists here.
        Box::pin(send_again(ep, e, fresh)).await
    }
}

/// The first of the endpoint's pooled connections that is still open (one the endpoint closed
/// meanwhile fails `ready` and is dropped).
async fn pooled(ep: &Endpoint) -> Option<http1::SendRequest<Incoming>> {
    while let Some(mut s) = ep.pool.take() {
        if s.ready().await.is_ok() {
            return Some(s);
        }
    }
    None
}

/// After `try_send_request` failed with `e`: a request that was not sent (the idle connection
/// was closing) goes once on a new connection, unless it failed on a new one already.
async fn send_again(
    ep: &Arc<Endpoint>,
    mut e: hyper::client::conn::TrySendError<http::Request<Incoming>>,
    fresh: bool,
) -> Result<http::Response<UpstreamBody>, UpstreamError> {
    match e.take_message() {
        Some(req) if !fresh => {
            let mut sender = Box::pin(connect_http1(ep)).await?;
            let resp = sender.send_request(req).await?;
            Ok(pooled_response(resp, sender, ep))
        }
        _ => Err(UpstreamError::Http(e.into_error())),
    }
}

/// `resp` with a body that gives `sender` back to the endpoint's pool once read to the end,
/// unless the connection was upgraded (it belongs to the WebSocket then).
fn pooled_response(
    resp: http::Response<Incoming>,
    sender: http1::SendRequest<Incoming>,
    ep: &Arc<Endpoint>,
) -> http::Response<UpstreamBody> {
    let keep = resp.status() != http::StatusCode::SWITCHING_PROTOCOLS;
    let ret = keep.then(|| (sender, ep.clone()));
    resp.map(|inner| UpstreamBody {
        inner,
        ret,
        done: false,
        drain: None,
    })
}

/// A response body from an endpoint; when read to the end, its HTTP/1 connection goes back to
/// the endpoint's pool. From HTTPS and HTTP2 endpoints it fails once the endpoint's connection
/// draining ends (HTTP/1 connections are closed instead; see draining.rs), and from HTTP2
/// endpoints also at the end of `timeoutSec` ([`UpstreamBody::limit`]).
pub struct UpstreamBody {
    inner: Incoming,
    ret: Option<(http1::SendRequest<Incoming>, Arc<Endpoint>)>,
    done: bool,
    drain: Option<BodyEnd>,
}

impl UpstreamBody {
    /// Ends the body with the error `end` gives when it resolves first (besides connection
    /// draining): the backend service's `timeoutSec` for streams from HTTP/2 backends (grpc.rs).
    pub fn limit(&mut self, end: BodyEnd) {
        self.drain = Some(match self.drain.take() {
            None => end,
            Some(drain) => Box::pin(async move {
                tokio::select! {
                    e = drain => e,
                    e = end => e,
                }
            }),
        });
    }
}

impl std::fmt::Debug for UpstreamBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UpstreamBody")
    }
}

impl hyper::body::Body for UpstreamBody {
    type Data = bytes::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if let Some(drain) = &mut this.drain {
            if let std::task::Poll::Ready(e) = std::future::Future::poll(drain.as_mut(), cx) {
                this.drain = None;
                this.ret = None;
                return std::task::Poll::Ready(Some(Err(e.into())));
            }
        }
        let r = std::pin::Pin::new(&mut this.inner).poll_frame(cx);
        match &r {
            std::task::Poll::Ready(None) => this.done = true,
            std::task::Poll::Ready(Some(Err(_))) => this.ret = None,
            _ => {}
        }
        r.map(|f| f.map(|f| f.map_err(Into::into)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for UpstreamBody {
    fn drop(&mut self) {
        if let Some((sender, ep)) = self.ret.take() {
            if self.done || hyper::body::Body::is_end_stream(&self.inner) {
                ep.pool.put(sender);
            }
        }
    }
}
