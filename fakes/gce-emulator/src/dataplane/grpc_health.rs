//! Health checks of type `GRPC` and `GRPC_WITH_TLS` (Compute API v1 `healthChecks`,
//! `grpcHealthCheck` / `grpcTlsHealthCheck`): a real call of the standard gRPC health checking
//! protocol, `grpc.health.v1.Health/Check` with `service` = `grpcServiceName` (empty: the
//! server as a whole), made with tonic's client over HTTP/2: clear text (h2c, prior knowledge)
//! for `GRPC`, TLS with ALPN `h2` and no certificate verification for `GRPC_WITH_TLS`, like
//! Google's probers. The endpoint is healthy when it answers `SERVING`; `NOT_SERVING`,
//! `SERVICE_UNKNOWN`, `UNKNOWN`, any gRPC error status (such as NOT_FOUND for an unknown
//! service) and any transport failure count as failures.

use std::net::SocketAddr;

use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

use crate::dataplane::upstream;

/// One `grpc.health.v1.Health/Check` call over `tcp` (already connected to `addr`), with TLS
/// when `tls`. `Err` says why the endpoint is not SERVING.
pub async fn probe(
    tcp: TcpStream,
    addr: SocketAddr,
    tls: bool,
    service: &str,
) -> Result<(), String> {
    let sender = if tls {
        let io = upstream::tls_connect(tcp, addr, &[b"h2"]).await?;
        handshake(TokioIo::new(io)).await?
    } else {
        handshake(TokioIo::new(tcp)).await?
    };
    let svc = tower::service_fn(move |req: http::Request<tonic::body::Body>| {
        let mut sender = sender.clone();
        async move { sender.send_request(req).await }
    });
    let scheme = if tls { "https" } else { "http" };
    let origin: http::Uri = format!("{scheme}://{addr}")
        .parse()
        .map_err(|e| format!("endpoint {addr}: {e}"))?;
    let mut client = HealthClient::with_origin(svc, origin);
    let reply = client
        .check(HealthCheckRequest {
            service: service.to_string(),
        })
        .await
        .map_err(|s| {
            format!(
                "grpc.health.v1.Health/Check(service={service:?}) failed: {:?}: {}",
                s.code(),
                s.message()
            )
        })?
        .into_inner();
    match ServingStatus::try_from(reply.status) {
        Ok(ServingStatus::Serving) => Ok(()),
        Ok(other) => Err(format!(
            "grpc.health.v1.Health/Check(service={service:?}) answered {}",
            other.as_str_name()
        )),
        Err(_) => Err(format!(
            "grpc.health.v1.Health/Check(service={service:?}) answered the unknown status {}",
            reply.status
        )),
    }
}

async fn handshake<I>(
    io: I,
) -> Result<hyper::client::conn::http2::SendRequest<tonic::body::Body>, String>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
        .await
        .map_err(|e| format!("h2 handshake: {e}"))?;
    tokio::spawn(conn);
    Ok(sender)
}
