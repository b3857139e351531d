//! The built-in server a local Pod runs on each container port: HTTP/1.1 and HTTP/2 (h2c, or
//! h2 over TLS via ALPN), optionally HTTPS with a self-signed certificate.
//!
//! The echo answers every request with a JSON body naming the Pod, the container and the request:
//! `{"pod","namespace","container","image","podIP","port","method","path","query","host",
//! "headers":{..},"bodyBytes","pathRequests"}`
//! and a header `x-pod-name`. Containers of a known image answer as that image does instead
//! ([`super::images`]). Run mode `default-backend` behaves like GKE's default backend
//! (reference 000_8e2dd831946c5b72.txt): 404 `default backend - 404` on every path and 200 `ok`
//! on `/healthz`. Both obey the live [`PodControls`] (fail paths with 500, added latency,
//! stopped = listener closed so connections are refused) and the per-request query parameters
//! `sleep_ms=N` (delay N ms), `status=N` (answer with status N) and, in mode `echo`,
//! `set_cookie=V` (a `Set-Cookie: V` response header). The echo body's `pathRequests` counts
//! the requests this port has answered for the path (this one included), so a test behind a
//! cache can tell how many reached the Pod.
//!
//! Requests with `content-type: application/grpc*` go to the gRPC services instead (see
//! [`grpc`]): the echo service `gclb.echo.v1.Echo` and the health service
//! `grpc.health.v1.Health`, on every port and in both run modes.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::annotations::PodControls;
use super::images::App;
use super::{agnhost, hello_app, user_command, whereami};

pub use super::pod_identity::PodIdentity;

pub mod grpc;
pub mod grpc_client;

/// Errors of the echo server.
#[derive(Debug, thiserror::Error)]
pub enum EchoError {
    /// The port could not be bound.
    #[error("Pod {pod}: cannot bind container port {addr}: {source}")]
    Bind {
        /// `namespace/name`.
        pod: String,
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The self-signed certificate could not be made.
    #[error("Pod {pod}: cannot make the self-signed serving certificate: {reason}")]
    Certificate {
        /// `namespace/name`.
        pod: String,
        /// The cause.
        reason: String,
    },
}

/// A running server on one container port; stops when dropped or on [`EchoServer::stop`].
#[derive(Debug)]
pub struct EchoServer {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

impl EchoServer {
    /// Binds `pod_ip:port` now (so a bind error is reported to the caller) and serves until
    /// stopped. `tls` is the server config for HTTPS ports (see [`tls_config`]). While
    /// `controls` says stopped, the listener is closed and open connections are dropped.
    ///
    /// Errors: [`EchoError::Bind`] when the address is taken.
    pub fn start(
        identity: Arc<PodIdentity>,
        port: u16,
        tls: Option<Arc<rustls::ServerConfig>>,
        controls: watch::Receiver<PodControls>,
    ) -> Result<EchoServer, EchoError> {
        let wanted = SocketAddr::from((identity.pod_ip, port));
        let bind_error = |source| EchoError::Bind {
            pod: identity.key(),
            addr: wanted,
            source,
        };
        let listener = bind(wanted).map_err(bind_error)?;
        // Port 0 (tests) becomes the ephemeral port chosen, which later rebinds reuse.
        let addr = listener.local_addr().map_err(bind_error)?;
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(serve(
            identity,
            addr,
            listener,
            tls,
            controls,
            shutdown.clone(),
        ));
        Ok(EchoServer {
            addr,
            shutdown,
            task,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Closes the listener and drops every open connection (like SIGKILL of the container).
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        let _ = (&mut self.task).await;
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    // Rebinding after a `stopped` period must not trip over TIME_WAIT sockets.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

async fn serve(
    identity: Arc<PodIdentity>,
    addr: SocketAddr,
    first_listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    mut controls: watch::Receiver<PodControls>,
    shutdown: CancellationToken,
) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let reporter = tonic_health::server::HealthReporter::new();
    let path_requests = Arc::new(PathRequests::default());
    let grpc = Arc::new(GrpcServices {
        echo: grpc::pb::echo_server::EchoServer::new(grpc::EchoService::new(
            identity.clone(),
            controls.clone(),
        )),
        health: tonic_health::pb::health_server::HealthServer::new(
            tonic_health::server::HealthService::from_health_reporter(reporter.clone()),
        ),
    });
    let _health = AbortOnDrop(tokio::spawn(grpc::follow_health(
        reporter,
        controls.clone(),
    )));
    let mut listener = Some(first_listener);
    loop {
        // While stopped, no listener exists: connections are refused.
        while controls.borrow_and_update().stopped {
            listener = None;
            tokio::select! {
                _ = shutdown.cancelled() => return,
                changed = controls.changed() => if changed.is_err() { return },
            }
        }
        let current = match listener.take() {
            Some(l) => l,
            None => match bind(addr) {
                Ok(l) => l,
                Err(error) => {
                    tracing::warn!(pod = %identity.key(), %addr, %error, "cannot rebind container port; retrying");
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        _ = tokio::time::sleep(Duration::from_millis(200)) => continue,
                    }
                }
            },
        };
        let epoch = shutdown.child_token();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                changed = controls.changed() => {
                    if changed.is_err() { return }
                    if controls.borrow().stopped { break }
                }
                accepted = current.accept() => {
                    let Ok((stream, _peer)) = accepted else { continue };
                    let _ = stream.set_nodelay(true);
                    let ctx = Arc::new(Ctx { identity: identity.clone(), port: addr.port(), controls: controls.clone(), grpc: grpc.clone(), path_requests: path_requests.clone() });
                    tokio::spawn(connection(stream, acceptor.clone(), ctx, epoch.clone()));
                }
            }
        }
        epoch.cancel();
        drop(current);
    }
}

struct Ctx {
    identity: Arc<PodIdentity>,
    port: u16,
    controls: watch::Receiver<PodControls>,
    grpc: Arc<GrpcServices>,
    path_requests: Arc<PathRequests>,
}

/// Requests answered per path on one port (the echo body's `pathRequests`). At most
/// [`PathRequests::MAX_PATHS`] paths are counted; past that the counts start over.
#[derive(Default)]
struct PathRequests(std::sync::Mutex<std::collections::HashMap<String, u64>>);

impl PathRequests {
    const MAX_PATHS: usize = 10_000;

    /// Counts one request for `path`; returns the count with it.
    fn count(&self, path: &str) -> u64 {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= Self::MAX_PATHS && !m.contains_key(path) {
            m.clear();
        }
        let n = m.entry(path.to_string()).or_default();
        *n += 1;
        *n
    }
}

/// The gRPC services of one port.
struct GrpcServices {
    echo: grpc::pb::echo_server::EchoServer<grpc::EchoService>,
    health: tonic_health::pb::health_server::HealthServer<tonic_health::server::HealthService>,
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A response body: the JSON echo's, or a gRPC service's.
type EchoBody = Either<Full<Bytes>, tonic::body::Body>;

/// Routes a request: gRPC by `content-type` to the service its path names (UNIMPLEMENTED for
/// others), anything else to the HTTP echo.
async fn route(req: Request<Incoming>, ctx: Arc<Ctx>) -> Result<Response<EchoBody>, Infallible> {
    use tower::ServiceExt;
    let is_grpc = req
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    if !is_grpc {
        return handle(req, ctx).await.map(|r| r.map(Either::Left));
    }
    let path = req.uri().path();
    let resp = if path.starts_with("/gclb.echo.v1.Echo/") {
        ctx.grpc.echo.clone().oneshot(req).await
    } else if path.starts_with("/grpc.health.v1.Health/") {
        ctx.grpc.health.clone().oneshot(req).await
    } else {
        Ok(tonic::Status::unimplemented(format!("no gRPC service serves {path}")).into_http())
    };
    Ok(resp.unwrap_or_else(|e| match e {}).map(Either::Right))
}

async fn connection(
    stream: tokio::net::TcpStream,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    ctx: Arc<Ctx>,
    cancel: CancellationToken,
) {
    let service = hyper::service::service_fn(move |req| route(req, ctx.clone()));
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let served = async {
        match acceptor {
            Some(acceptor) => {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let _ = builder.serve_connection(TokioIo::new(tls), service).await;
            }
            None => {
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            }
        }
    };
    tokio::select! {
        _ = served => {}
        _ = cancel.cancelled() => {}
    }
}

/// Largest request body read (to report `bodyBytes`); larger bodies are answered with 413.
const MAX_BODY_BYTES: usize = 1 << 20;

async fn handle(
    req: Request<Incoming>,
    ctx: Arc<Ctx>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let controls = ctx.controls.borrow().clone();
    let query = parse_query(req.uri().query());
    let mut delay = controls.latency;
    if let Some(ms) = query.get("sleep_ms").and_then(|v| v.parse::<u64>().ok()) {
        delay += Duration::from_millis(ms);
    }
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    if let App::Command { port } = ctx.identity.app {
        if controls.fails(req.uri().path()) {
            let text = format!("failing {} as asked by annotation\n", req.uri().path());
            return Ok(reply(
                &ctx.identity,
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain",
                text.into(),
            ));
        }
        let identity = &ctx.identity;
        return Ok(user_command::forward(&identity.name, &identity.image, port, req).await);
    }
    let path = req.uri().path().to_string();
    let method = req.method().to_string();
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
        .unwrap_or_default();
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in req.headers() {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        headers
            .entry(name.as_str().to_string())
            .and_modify(|v| v.push_str(&format!(", {value}")))
            .or_insert(value);
    }
    let body = Limited::new(req.into_body(), MAX_BODY_BYTES)
        .collect()
        .await;
    let identity = &ctx.identity;
    let Ok(body) = body else {
        return Ok(reply(
            identity,
            StatusCode::PAYLOAD_TOO_LARGE,
            "text/plain",
            "request body too large\n".into(),
        ));
    };
    let body_bytes = body.to_bytes().len();

    if controls.fails(&path) {
        return Ok(reply(
            identity,
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            format!("failing {path} as asked by annotation\n").into(),
        ));
    }
    let forced = query
        .get("status")
        .and_then(|s| s.parse::<u16>().ok())
        .and_then(|s| StatusCode::from_u16(s).ok());
    let text_reply = |status: StatusCode, text: String| {
        Ok(reply(
            identity,
            forced.unwrap_or(status),
            "text/plain; charset=utf-8",
            text.into(),
        ))
    };
    let now = || chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    match &identity.app {
        App::Echo => {}
        App::DefaultBackend => {
            return if path == "/healthz" {
                text_reply(StatusCode::OK, "ok".into())
            } else {
                text_reply(StatusCode::NOT_FOUND, "default backend - 404".into())
            };
        }
        App::HelloApp { version } => {
            return text_reply(StatusCode::OK, hello_app::body(version, &identity.name));
        }
        App::Whereami { metadata } => {
            if path == "/healthz" {
                return text_reply(StatusCode::OK, "OK".into());
            }
            let at = whereami::Whereabouts {
                pod_name: identity.name.clone(),
                pod_namespace: identity.namespace.clone(),
                pod_ip: identity.pod_ip.to_string(),
                node_name: identity.node.clone(),
                zone: identity.zone.clone(),
                service_account: identity.service_account.clone(),
                project_id: String::new(),
                metadata: metadata.clone(),
            };
            let mut text =
                serde_json::to_vec(&whereami::body(&at, &host, &now())).unwrap_or_default();
            text.push(b'\n');
            return Ok(reply(
                identity,
                forced.unwrap_or(StatusCode::OK),
                "application/json",
                text.into(),
            ));
        }
        App::NetExec => {
            let msg = query.get("msg").map(String::as_str);
            let (status, text) = agnhost::netexec(&path, msg, &identity.name, &now());
            return text_reply(status, text);
        }
        App::ServeHostname => {
            return text_reply(StatusCode::OK, agnhost::serve_hostname(&identity.name));
        }
        App::Command { .. } => {}
    }
    let json = serde_json::json!({
        "pod": identity.name,
        "namespace": identity.namespace,
        "container": identity.container,
        "image": identity.image,
        "podIP": identity.pod_ip.to_string(),
        "port": ctx.port,
        "method": method,
        "path": path,
        "query": query,
        "host": host,
        "headers": headers,
        "bodyBytes": body_bytes,
        "pathRequests": ctx.path_requests.count(&path),
    });
    let mut text = serde_json::to_vec(&json).unwrap_or_default();
    text.push(b'\n');
    let mut resp = reply(
        identity,
        forced.unwrap_or(StatusCode::OK),
        "application/json",
        text.into(),
    );
    if let Some(v) = query
        .get("set_cookie")
        .and_then(|v| header::HeaderValue::from_str(v).ok())
    {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    Ok(resp)
}

fn reply(
    identity: &PodIdentity,
    status: StatusCode,
    content_type: &str,
    body: Bytes,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        headers.insert(header::CONTENT_TYPE, v);
    }
    if let Ok(v) = header::HeaderValue::from_str(&identity.name) {
        headers.insert("x-pod-name", v);
    }
    response
}

fn parse_query(query: Option<&str>) -> BTreeMap<String, String> {
    url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

/// A rustls server config with a fresh self-signed certificate for the Pod (SANs: the Pod IP
/// and the Pod name), offering h2 and http/1.1 by ALPN.
///
/// Errors: [`EchoError::Certificate`] when rcgen or rustls refuse.
pub fn tls_config(identity: &PodIdentity) -> Result<Arc<rustls::ServerConfig>, EchoError> {
    let fail = |reason: String| EchoError::Certificate {
        pod: identity.key(),
        reason,
    };
    let certified = rcgen::generate_simple_self_signed(vec![
        identity.pod_ip.to_string(),
        identity.name.clone(),
    ])
    .map_err(|e| fail(e.to_string()))?;
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| fail(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .map_err(|e| fail(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests;
