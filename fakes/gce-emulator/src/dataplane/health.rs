//! The health checker: real probes against every endpoint of every backend service that names a
//! health check, with the check's `checkIntervalSec`, `timeoutSec`, `healthyThreshold` and
//! `unhealthyThreshold` (Compute API v1 reference, `healthChecks`; defaults 5 s, 5 s, 2, 2).
//!
//! - Probe types: HTTP, HTTPS, HTTP2 (GET `requestPath` with `Host` = `host` or the endpoint
//!   address, success = status 200 and, when `response` is set, a body starting with it), TCP
//!   (connect; with `request`/`response` the reply must start with `response`) and SSL (TLS
//!   handshake), GRPC and GRPC_WITH_TLS (`grpc.health.v1.Health/Check` for `grpcServiceName`,
//!   success = SERVING; grpc_health.rs). TLS probes do not verify certificates, like Google's
//!   probers.
//! - Port: `portSpecification: USE_SERVING_PORT` (and no port at all, as for NEG backends) probes
//!   the endpoint's port; `USE_FIXED_PORT` or a bare `port` probes that port.
//! - New endpoints start UNHEALTHY and become HEALTHY after `healthyThreshold` consecutive
//!   successes; HEALTHY ones become UNHEALTHY after `unhealthyThreshold` consecutive failures.
//!   Results go to the [`HealthTable`] per backend service and to the endpoint's flag the proxy
//!   reads; entries of detached endpoints are removed.
//! - Firewall: a probe the endpoint's network does not admit from 35.191.0.0/16
//!   ([`crate::dataplane::firewall`]) is a dropped packet: it fails after `timeoutSec`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::AbortHandle;

use crate::dataplane::backend_service::Endpoint;
use crate::dataplane::grpc_health;
use crate::dataplane::metrics::Metrics;
use crate::dataplane::upstream;
use crate::health_state::{HealthKey, HealthState, HealthTable};
use crate::snapshot::ResourceKey;

/// The probe protocol (`healthCheck.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    /// `HTTP`.
    Http,
    /// `HTTPS`.
    Https,
    /// `HTTP2` (over TLS).
    Http2,
    /// `TCP`.
    Tcp,
    /// `SSL`.
    Ssl,
    /// `GRPC`: `grpc.health.v1.Health/Check` over clear-text HTTP/2 (grpc_health.rs).
    Grpc,
    /// `GRPC_WITH_TLS`: the same call over TLS.
    GrpcTls,
}

/// How to probe, compiled from a `compute#healthCheck`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSpec {
    /// The health check.
    pub health_check: ResourceKey,
    /// Protocol.
    pub kind: ProbeKind,
    /// Fixed port, or `None` for the endpoint's serving port.
    pub port: Option<u16>,
    /// `requestPath` (HTTP kinds), default `/`.
    pub request_path: String,
    /// `host` (HTTP kinds).
    pub host: Option<String>,
    /// `request` (TCP).
    pub request: Option<String>,
    /// `response`: expected start of the reply.
    pub response: Option<String>,
    /// `grpcServiceName` (GRPC kinds): the service asked about; empty for the whole server.
    pub grpc_service_name: String,
    /// `checkIntervalSec`.
    pub interval: Duration,
    /// `timeoutSec`.
    pub timeout: Duration,
    /// `healthyThreshold`.
    pub healthy_threshold: u32,
    /// `unhealthyThreshold`.
    pub unhealthy_threshold: u32,
}

impl ProbeSpec {
    /// Compiles a `compute#healthCheck` (wire JSON). Unknown types probe as TCP.
    pub fn compile(key: &str, hc: &Value) -> ProbeSpec {
        let ty = hc.get("type").and_then(Value::as_str).unwrap_or("TCP");
        let (kind, block) = match ty {
            "HTTP" => (ProbeKind::Http, "httpHealthCheck"),
            "HTTPS" => (ProbeKind::Https, "httpsHealthCheck"),
            "HTTP2" => (ProbeKind::Http2, "http2HealthCheck"),
            "SSL" => (ProbeKind::Ssl, "sslHealthCheck"),
            "GRPC" => (ProbeKind::Grpc, "grpcHealthCheck"),
            "GRPC_WITH_TLS" => (ProbeKind::GrpcTls, "grpcTlsHealthCheck"),
            _ => (ProbeKind::Tcp, "tcpHealthCheck"),
        };
        let b = hc.get(block).cloned().unwrap_or(Value::Null);
        let sv = |f: &str| b.get(f).and_then(Value::as_str).map(str::to_string);
        let num = |v: &Value, f: &str, d: u64| {
            v.get(f)
                .and_then(|x| x.as_u64().or_else(|| x.as_str()?.parse().ok()))
                .unwrap_or(d)
        };
        let port = match sv("portSpecification").as_deref() {
            Some("USE_SERVING_PORT") => None,
            _ => b
                .get("port")
                .and_then(Value::as_u64)
                .and_then(|p| u16::try_from(p).ok())
                .filter(|p| *p > 0),
        };
        ProbeSpec {
            health_check: key.to_string(),
            kind,
            port,
            request_path: sv("requestPath").unwrap_or_else(|| "/".into()),
            host: sv("host").filter(|h| !h.is_empty()),
            request: sv("request").filter(|h| !h.is_empty()),
            response: sv("response").filter(|h| !h.is_empty()),
            grpc_service_name: sv("grpcServiceName").unwrap_or_default(),
            interval: Duration::from_secs(num(hc, "checkIntervalSec", 5).max(1)),
            timeout: Duration::from_secs(num(hc, "timeoutSec", 5).max(1)),
            healthy_threshold: num(hc, "healthyThreshold", 2).max(1) as u32,
            unhealthy_threshold: num(hc, "unhealthyThreshold", 2).max(1) as u32,
        }
    }
}

/// One endpoint to probe with one spec.
#[derive(Debug, Clone)]
pub struct ProbeTarget {
    /// The endpoint (shared with the routing table).
    pub endpoint: Arc<Endpoint>,
    /// How.
    pub spec: ProbeSpec,
}

/// Runs one probe task per (backend service, endpoint).
pub struct HealthChecker {
    table: Arc<HealthTable>,
    metrics: Arc<Metrics>,
    running: HashMap<HealthKey, (ProbeSpec, Arc<Endpoint>, AbortHandle)>,
}

impl HealthChecker {
    /// A checker writing into `table`.
    pub fn new(table: Arc<HealthTable>, metrics: Arc<Metrics>) -> HealthChecker {
        HealthChecker {
            table,
            metrics,
            running: HashMap::new(),
        }
    }

    /// Makes the running probes exactly `targets`: starts new ones (their endpoints UNHEALTHY
    /// until they pass), restarts changed ones keeping their state, stops and forgets the rest.
    pub fn reconcile(&mut self, targets: Vec<ProbeTarget>) {
        let mut next = HashMap::with_capacity(targets.len());
        for t in targets {
            let key = t.endpoint.key.clone();
            if let Some((spec, ep, abort)) = self.running.remove(&key) {
                if spec == t.spec && Arc::ptr_eq(&ep, &t.endpoint) {
                    next.insert(key, (spec, ep, abort));
                    continue;
                }
                abort.abort();
            }
            if self.table.get(&key).is_none() {
                self.table.set(key.clone(), HealthState::Unhealthy);
            }
            // A restarted probe carries the state the table holds.
            let healthy = self.table.get(&key) == Some(HealthState::Healthy);
            t.endpoint.healthy.store(healthy, Ordering::Relaxed);
            let task = tokio::spawn(probe_loop(
                t.spec.clone(),
                t.endpoint.clone(),
                self.table.clone(),
                self.metrics.clone(),
            ));
            next.insert(key, (t.spec, t.endpoint, task.abort_handle()));
        }
        for (_, (_, _, abort)) in self.running.drain() {
            abort.abort();
        }
        self.table.retain(|k| next.contains_key(k));
        self.running = next;
    }
}

impl Drop for HealthChecker {
    fn drop(&mut self) {
        for (_, (_, _, abort)) in self.running.drain() {
            abort.abort();
        }
    }
}

async fn probe_loop(
    spec: ProbeSpec,
    ep: Arc<Endpoint>,
    table: Arc<HealthTable>,
    metrics: Arc<Metrics>,
) {
    let mut healthy = ep.healthy.load(Ordering::Relaxed);
    let (mut passes, mut failures) = (0u32, 0u32);
    let mut tick = tokio::time::interval(spec.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let addr = SocketAddr::new(ep.addr.ip(), spec.port.unwrap_or(ep.addr.port()));
    loop {
        tick.tick().await;
        let result = if !ep.admission.probes() {
            // The firewall drops the probe's packets: no answer until timeoutSec runs out.
            tokio::time::sleep(spec.timeout).await;
            Err(format!(
                "no answer within timeoutSec={}: {}",
                spec.timeout.as_secs(),
                ep.admission.probe_refusal()
            ))
        } else {
            match tokio::time::timeout(spec.timeout, probe(&spec, addr)).await {
                Ok(r) => r,
                Err(_) => Err(format!(
                    "no answer within timeoutSec={}",
                    spec.timeout.as_secs()
                )),
            }
        };
        match result {
            Ok(()) => {
                failures = 0;
                passes = passes.saturating_add(1);
                if !healthy && passes >= spec.healthy_threshold {
                    healthy = true;
                    ep.healthy.store(true, Ordering::Relaxed);
                    table.set(ep.key.clone(), HealthState::Healthy);
                    metrics.health_transition(&ep.key.backend_service, "HEALTHY");
                    tracing::info!(backend_service = %ep.key.backend_service, endpoint = %addr, "endpoint became HEALTHY");
                }
            }
            Err(reason) => {
                passes = 0;
                failures = failures.saturating_add(1);
                if healthy && failures >= spec.unhealthy_threshold {
                    healthy = false;
                    ep.healthy.store(false, Ordering::Relaxed);
                    table.set(ep.key.clone(), HealthState::Unhealthy);
                    metrics.health_transition(&ep.key.backend_service, "UNHEALTHY");
                    tracing::info!(backend_service = %ep.key.backend_service, endpoint = %addr, %reason, "endpoint became UNHEALTHY");
                }
            }
        }
    }
}

/// Runs one probe against `addr`; `Err` says why it failed.
pub async fn probe(spec: &ProbeSpec, addr: SocketAddr) -> Result<(), String> {
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    match spec.kind {
        ProbeKind::Tcp => {
            let mut tcp = tcp;
            if let Some(req) = &spec.request {
                tcp.write_all(req.as_bytes())
                    .await
                    .map_err(|e| format!("send request: {e}"))?;
            }
            if let Some(want) = &spec.response {
                let mut buf = vec![0u8; want.len()];
                tcp.read_exact(&mut buf)
                    .await
                    .map_err(|e| format!("read response: {e}"))?;
                if buf != want.as_bytes() {
                    return Err("response does not match".into());
                }
            }
            Ok(())
        }
        ProbeKind::Ssl => upstream::tls_connect(tcp, addr, &[]).await.map(drop),
        ProbeKind::Grpc => grpc_health::probe(tcp, addr, false, &spec.grpc_service_name).await,
        ProbeKind::GrpcTls => grpc_health::probe(tcp, addr, true, &spec.grpc_service_name).await,
        ProbeKind::Http => http_probe(spec, addr, TokioIo::new(tcp), false).await,
        ProbeKind::Https => {
            http_probe(
                spec,
                addr,
                TokioIo::new(upstream::tls_connect(tcp, addr, &[b"http/1.1"]).await?),
                false,
            )
            .await
        }
        ProbeKind::Http2 => {
            http_probe(
                spec,
                addr,
                TokioIo::new(upstream::tls_connect(tcp, addr, &[b"h2"]).await?),
                true,
            )
            .await
        }
    }
}

async fn http_probe<I>(spec: &ProbeSpec, addr: SocketAddr, io: I, h2: bool) -> Result<(), String>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let host = spec.host.clone().unwrap_or_else(|| addr.to_string());
    let mut req = http::Request::get(&spec.request_path)
        .header(http::header::USER_AGENT, "GoogleHC/1.0")
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("requestPath {:?}: {e}", spec.request_path))?;
    let resp = if h2 {
        *req.uri_mut() = format!("https://{host}{}", spec.request_path)
            .parse()
            .map_err(|e| format!("requestPath: {e}"))?;
        let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .map_err(|e| format!("h2 handshake: {e}"))?;
        tokio::spawn(conn);
        send.send_request(req).await
    } else {
        req.headers_mut().insert(
            http::header::HOST,
            host.parse().map_err(|e| format!("host {host:?}: {e}"))?,
        );
        let (mut send, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(conn);
        send.send_request(req).await
    }
    .map_err(|e| format!("request: {e}"))?;
    if resp.status() != http::StatusCode::OK {
        return Err(format!("status {}", resp.status().as_u16()));
    }
    if let Some(want) = &spec.response {
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?
            .to_bytes();
        if !body.starts_with(want.as_bytes()) {
            return Err("response body does not start with `response`".into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compiles_ports_and_defaults() {
        let s = ProbeSpec::compile(
            "hc",
            &json!({"type": "HTTP", "httpHealthCheck": {"portSpecification": "USE_SERVING_PORT", "requestPath": "/healthz"}}),
        );
        assert_eq!(
            (s.kind, s.port, s.request_path.as_str()),
            (ProbeKind::Http, None, "/healthz")
        );
        assert_eq!(
            (s.interval, s.healthy_threshold, s.unhealthy_threshold),
            (Duration::from_secs(5), 2, 2)
        );
        let s = ProbeSpec::compile(
            "hc",
            &json!({"type": "TCP", "checkIntervalSec": 1, "tcpHealthCheck": {"port": 8080}}),
        );
        assert_eq!(
            (s.kind, s.port, s.interval),
            (ProbeKind::Tcp, Some(8080), Duration::from_secs(1))
        );
    }
}
