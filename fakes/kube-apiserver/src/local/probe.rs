//! Readiness probes as the kubelet runs them: `httpGet` (HTTP or HTTPS without certificate
//! verification, success = status 200..=399, `User-Agent: kube-probe/1.34`, Host from
//! `httpHeaders` when given) and `tcpSocket` (success = connection opened), each with its
//! `timeoutSeconds`, repeated every `periodSeconds` after `initialDelaySeconds`, with
//! `successThreshold`/`failureThreshold` consecutive results flipping readiness.
//! Defaults are the API's: period 10 s, timeout 1 s, success 1, failure 3.
//!
//! Simplified: `exec` and `grpc` probes cannot run here (there is no process); they count as
//! success and are logged once. A readiness result starts as failure, as in the kubelet.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// Errors of probe set-up and execution.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// A named probe port is not among the container's ports.
    #[error("container {container}: readinessProbe port {port:?} names no containerPort; name a port of spec.containers[].ports or give a number")]
    UnknownPort {
        /// Container name.
        container: String,
        /// The port as written.
        port: String,
    },
    /// The probe failed (connection, TLS, HTTP or status).
    /// Worded like the kubelet's probe messages (they become `Unhealthy` Event notes).
    #[error("{reason}")]
    Failed {
        /// What was probed, e.g. `http://127.64.0.1:8080/healthz`.
        target: String,
        /// Why.
        reason: String,
    },
}

/// What a probe does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeAction {
    /// `httpGet`.
    HttpGet {
        /// Whether `scheme: HTTPS`.
        https: bool,
        /// Address probed.
        addr: SocketAddr,
        /// Path and query (default `/`).
        path: String,
        /// `httpHeaders` as `(name, value)`.
        headers: Vec<(String, String)>,
    },
    /// `tcpSocket`.
    TcpSocket {
        /// Address probed.
        addr: SocketAddr,
    },
    /// `exec` or `grpc`: counted as success.
    Unsupported(&'static str),
}

/// A readiness probe with its timings resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSpec {
    /// The action.
    pub action: ProbeAction,
    /// `initialDelaySeconds`.
    pub initial_delay: Duration,
    /// `periodSeconds` (minimum 1 s).
    pub period: Duration,
    /// `timeoutSeconds` (minimum 1 s).
    pub timeout: Duration,
    /// `successThreshold` (minimum 1).
    pub success_threshold: u32,
    /// `failureThreshold` (minimum 1).
    pub failure_threshold: u32,
}

impl ProbeSpec {
    /// Resolves a container's probe against the Pod IP. Errors: [`ProbeError::UnknownPort`].
    pub fn new(
        probe: &Probe,
        container: &Container,
        pod_ip: std::net::Ipv4Addr,
    ) -> Result<ProbeSpec, ProbeError> {
        let resolve = |port: &IntOrString| -> Result<u16, ProbeError> {
            let unknown = |p: String| ProbeError::UnknownPort {
                container: container.name.clone(),
                port: p,
            };
            match port {
                IntOrString::Int(n) => u16::try_from(*n).map_err(|_| unknown(n.to_string())),
                IntOrString::String(s) => match s.parse::<u16>() {
                    Ok(n) => Ok(n),
                    Err(_) => container
                        .ports
                        .iter()
                        .flatten()
                        .find(|p| p.name.as_deref() == Some(s.as_str()))
                        .and_then(|p| u16::try_from(p.container_port).ok())
                        .ok_or_else(|| unknown(s.clone())),
                },
            }
        };
        let action = if let Some(get) = &probe.http_get {
            let port = resolve(&get.port)?;
            // A `host` field other than the Pod IP cannot be reached here; the Pod IP is used.
            let mut path = get.path.clone().unwrap_or_default();
            if !path.starts_with('/') {
                path.insert(0, '/');
            }
            ProbeAction::HttpGet {
                https: get
                    .scheme
                    .as_deref()
                    .is_some_and(|s| s.eq_ignore_ascii_case("HTTPS")),
                addr: SocketAddr::from((pod_ip, port)),
                path,
                headers: get
                    .http_headers
                    .iter()
                    .flatten()
                    .map(|h| (h.name.clone(), h.value.clone()))
                    .collect(),
            }
        } else if let Some(tcp) = &probe.tcp_socket {
            ProbeAction::TcpSocket {
                addr: SocketAddr::from((pod_ip, resolve(&tcp.port)?)),
            }
        } else if probe.grpc.is_some() {
            ProbeAction::Unsupported("grpc")
        } else {
            ProbeAction::Unsupported("exec")
        };
        let secs = |v: Option<i32>, default: i32, min: i32| {
            Duration::from_secs(v.unwrap_or(default).max(min) as u64)
        };
        Ok(ProbeSpec {
            action,
            initial_delay: secs(probe.initial_delay_seconds, 0, 0),
            period: secs(probe.period_seconds, 10, 1),
            timeout: secs(probe.timeout_seconds, 1, 1),
            success_threshold: probe.success_threshold.unwrap_or(1).max(1) as u32,
            failure_threshold: probe.failure_threshold.unwrap_or(3).max(1) as u32,
        })
    }
}

/// Consecutive-result bookkeeping of one readiness probe (pure).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbeState {
    ready: bool,
    successes: u32,
    failures: u32,
}

impl ProbeState {
    /// The current readiness.
    pub fn ready(&self) -> bool {
        self.ready
    }

    /// Records one result; returns true when readiness flipped.
    pub fn record(&mut self, success: bool, spec: &ProbeSpec) -> bool {
        if success {
            self.successes += 1;
            self.failures = 0;
        } else {
            self.failures += 1;
            self.successes = 0;
        }
        let next = if self.ready {
            self.failures < spec.failure_threshold
        } else {
            self.successes >= spec.success_threshold
        };
        let flipped = next != self.ready;
        self.ready = next;
        flipped
    }
}

/// Runs one probe attempt within the spec's timeout. Errors: [`ProbeError::Failed`].
pub async fn run(spec: &ProbeSpec) -> Result<(), ProbeError> {
    match &spec.action {
        ProbeAction::Unsupported(_) => Ok(()),
        ProbeAction::TcpSocket { addr } => {
            let failed = |reason: String| ProbeError::Failed {
                target: format!("tcp://{addr}"),
                reason,
            };
            match tokio::time::timeout(spec.timeout, TcpStream::connect(addr)).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(failed(format!("dial tcp {addr}: {e}"))),
                Err(_) => Err(failed(format!("dial tcp {addr}: i/o timeout"))),
            }
        }
        ProbeAction::HttpGet {
            https,
            addr,
            path,
            headers,
        } => {
            let scheme = if *https { "https" } else { "http" };
            let failed = |reason: String| ProbeError::Failed {
                target: format!("{scheme}://{addr}{path}"),
                reason,
            };
            let mut all = vec![
                ("user-agent".to_string(), "kube-probe/1.34".to_string()),
                ("accept".to_string(), "*/*".to_string()),
            ];
            all.extend(headers.iter().cloned());
            match tokio::time::timeout(spec.timeout, http_get(*addr, *https, path, &all)).await {
                Ok(Ok((status, _))) if (200..400).contains(&status.as_u16()) => Ok(()),
                Ok(Ok((status, _))) => Err(failed(format!(
                    "HTTP probe failed with statuscode: {}",
                    status.as_u16()
                ))),
                Ok(Err(e)) => Err(failed(format!("Get \"{scheme}://{addr}{path}\": {e}"))),
                Err(_) => Err(failed(format!(
                    "Get \"{scheme}://{addr}{path}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
                ))),
            }
        }
    }
}

/// The kubelet reads at most this much of a probe's response body.
const MAX_PROBE_BODY: usize = 10 * 1024;

/// One HTTP/1.1 GET to `addr` (HTTPS without certificate verification when `https`), returning
/// status and at most 10 KiB of body. `headers` may set `host`; otherwise Host is `addr`.
/// Errors are returned as text (the caller wraps them with the target).
pub async fn http_get(
    addr: SocketAddr,
    https: bool,
    path: &str,
    headers: &[(String, String)],
) -> Result<(StatusCode, Bytes), String> {
    let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    if https {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
            .with_no_client_auth();
        let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, stream)
            .await
            .map_err(|e| e.to_string())?;
        send_get(tls, addr, path, headers).await
    } else {
        send_get(stream, addr, path, headers).await
    }
}

async fn send_get<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    stream: S,
    addr: SocketAddr,
    path: &str,
    headers: &[(String, String)],
) -> Result<(StatusCode, Bytes), String> {
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(conn);
    let mut request = Request::get(path);
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        request = request.header(http::header::HOST, addr.to_string());
    }
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let request = request
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let body = Limited::new(response.into_body(), MAX_PROBE_BODY)
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    driver.abort();
    Ok((status, body))
}

/// Probes skip certificate verification, as the kubelet does for HTTPS probes.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(success: u32, failure: u32) -> ProbeSpec {
        ProbeSpec {
            action: ProbeAction::Unsupported("exec"),
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(1),
            // Not what these tests check: long enough that a probe of a local server that
            // should pass never times out on a loaded machine.
            timeout: Duration::from_secs(30),
            success_threshold: success,
            failure_threshold: failure,
        }
    }

    #[test]
    fn thresholds_need_consecutive_results() {
        let s = spec(2, 3);
        let mut state = ProbeState::default();
        assert!(!state.record(true, &s));
        assert!(!state.record(false, &s), "a failure resets the success run");
        assert!(!state.record(true, &s));
        assert!(state.record(true, &s) && state.ready());
        assert!(!state.record(false, &s) && !state.record(false, &s));
        assert!(!state.record(true, &s), "a success resets the failure run");
        assert!(!state.record(false, &s) && !state.record(false, &s));
        assert!(state.record(false, &s) && !state.ready());
    }

    #[test]
    fn spec_resolves_named_ports_and_defaults() {
        let container: Container = serde_json::from_value(json!({
            "name": "app",
            "ports": [{"name": "http", "containerPort": 8080}],
            "readinessProbe": {"httpGet": {"path": "healthz", "port": "http", "scheme": "HTTPS",
                "httpHeaders": [{"name": "Host", "value": "example.com"}]}}
        }))
        .unwrap();
        let ip = "127.64.0.5".parse().unwrap();
        let s =
            ProbeSpec::new(container.readiness_probe.as_ref().unwrap(), &container, ip).unwrap();
        assert_eq!(
            s.action,
            ProbeAction::HttpGet {
                https: true,
                addr: "127.64.0.5:8080".parse().unwrap(),
                path: "/healthz".to_string(),
                headers: vec![("Host".to_string(), "example.com".to_string())],
            }
        );
        assert_eq!(
            (
                s.period,
                s.timeout,
                s.success_threshold,
                s.failure_threshold
            ),
            (Duration::from_secs(10), Duration::from_secs(1), 1, 3)
        );

        let bad: Probe = serde_json::from_value(json!({"tcpSocket": {"port": "nope"}})).unwrap();
        let err = ProbeSpec::new(&bad, &container, ip).unwrap_err();
        assert!(
            err.to_string().contains("\"nope\"") && err.to_string().contains("app"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn tcp_probe_fails_on_a_closed_port_and_passes_on_an_open_one() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut s = spec(1, 1);
        s.action = ProbeAction::TcpSocket { addr };
        assert!(run(&s).await.is_ok());
        drop(listener);
        let err = run(&s).await.unwrap_err();
        assert!(err.to_string().contains(&addr.to_string()), "{err}");
    }

    #[tokio::test]
    async fn http_probe_passes_2xx_and_fails_5xx_with_the_kubelet_message() {
        use crate::local::annotations::PodControls;
        use crate::local::echo::{tls_config, EchoServer, PodIdentity};
        use crate::local::images::App;
        let identity = Arc::new(PodIdentity::bare(
            "p",
            "default",
            std::net::Ipv4Addr::LOCALHOST,
            App::Echo,
        ));
        let (controls, rx) = tokio::sync::watch::channel(PodControls::default());
        let tls = tls_config(&identity).unwrap();
        let plain = EchoServer::start(identity.clone(), 0, None, rx.clone()).unwrap();
        let secure = EchoServer::start(identity, 0, Some(tls), rx).unwrap();
        let http_spec = |addr, https| ProbeSpec {
            action: ProbeAction::HttpGet {
                https,
                addr,
                path: "/healthz".to_string(),
                headers: vec![],
            },
            ..spec(1, 1)
        };
        assert!(run(&http_spec(plain.addr(), false)).await.is_ok());
        assert!(
            run(&http_spec(secure.addr(), true)).await.is_ok(),
            "HTTPS probes skip verification"
        );
        controls.send_modify(|c| {
            c.fail_paths.insert("/healthz".to_string());
        });
        let err = run(&http_spec(plain.addr(), false)).await.unwrap_err();
        assert_eq!(err.to_string(), "HTTP probe failed with statuscode: 500");
    }
}
