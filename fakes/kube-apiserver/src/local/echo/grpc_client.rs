//! A gRPC client connection for tests and tools: one HTTP/2 connection (h2 over TLS by ALPN,
//! or clear-text h2c) driven by hyper, as a service tonic's generated clients accept, e.g.
//! `pb::echo_client::EchoClient::with_origin(channel, origin)` or tonic-health's
//! `HealthClient`. Dropping a call's future resets its stream (RST_STREAM CANCEL), as any gRPC
//! client does when a call is cancelled.

use std::net::SocketAddr;
use std::sync::Arc;

use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

/// The connection as a tower service of `tonic::body::Body` requests.
pub type GrpcChannel = tower::util::BoxCloneService<
    http::Request<tonic::body::Body>,
    http::Response<hyper::body::Incoming>,
    hyper::Error,
>;

/// Connects to `addr`; with `tls`, a TLS handshake (the config must offer ALPN `h2`) naming
/// `server_name`. Returns the channel and the origin (`https://server_name` or
/// `http://server_name`) to give the generated client, whose authority (`:authority`) is what a
/// load balancer routes by.
///
/// Errors: connection refused, TLS handshake or HTTP/2 handshake failed.
pub async fn dial(
    addr: SocketAddr,
    server_name: &str,
    tls: Option<rustls::ClientConfig>,
) -> Result<(GrpcChannel, http::Uri), String> {
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let builder = hyper::client::conn::http2::Builder::new(TokioExecutor::new());
    let (sender, scheme) = match tls {
        Some(cfg) => {
            let name = rustls::pki_types::ServerName::try_from(server_name.to_string())
                .map_err(|e| format!("server name {server_name:?}: {e}"))?;
            let stream = tokio_rustls::TlsConnector::from(Arc::new(cfg))
                .connect(name, tcp)
                .await
                .map_err(|e| format!("TLS handshake with {addr}: {e}"))?;
            let (sender, conn) = builder
                .handshake(TokioIo::new(stream))
                .await
                .map_err(|e| format!("h2 handshake with {addr}: {e}"))?;
            tokio::spawn(conn);
            (sender, "https")
        }
        None => {
            let (sender, conn) = builder
                .handshake(TokioIo::new(tcp))
                .await
                .map_err(|e| format!("h2c handshake with {addr}: {e}"))?;
            tokio::spawn(conn);
            (sender, "http")
        }
    };
    let origin = format!("{scheme}://{server_name}")
        .parse()
        .map_err(|e| format!("origin for {server_name:?}: {e}"))?;
    let svc = tower::service_fn(move |req: http::Request<tonic::body::Body>| {
        let mut sender = sender.clone();
        async move { sender.send_request(req).await }
    });
    Ok((GrpcChannel::new(svc), origin))
}
