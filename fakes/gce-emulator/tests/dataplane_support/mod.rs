//! Shared helpers of the data plane tests: real backend HTTP servers on 127.0.0.1:0, snapshot
//! builders that write Compute API wire JSON, and polling with deadlines.
#![allow(dead_code)]

pub mod gcloud;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use gce_emulator::dataplane::{DataPlane, DataPlaneConfig, ListenerInfo};
use gce_emulator::health_state::{HealthKey, HealthState, HealthTable};
use gce_emulator::snapshot::{NetworkEndpoint, Snapshot};
use serde_json::{json, Value};
use tokio::sync::{watch, Notify};

pub const PROJECT: &str = "p";
pub const ZONE: &str = "us-central1-a";

/// Full URL of a resource path under the project, as the control plane stores references.
pub fn url(path: &str) -> String {
    format!("https://compute.googleapis.com/compute/v1/projects/{PROJECT}/{path}")
}

pub fn key(path: &str) -> String {
    format!("projects/{PROJECT}/{path}")
}

/// Polls `f` every 20 ms until it returns `Some`, or panics after `secs` seconds.
pub async fn poll<T>(what: &str, secs: u64, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {secs} s waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A real backend: answers every request with JSON describing it, `/healthz` with 200 or 503,
/// `/slow` after `slow_ms`, `/hold` once released; `/stream-hold` sends its headers and a first
/// body chunk `start` at once, and the rest (`end`) once released.
pub struct Backend {
    pub name: String,
    pub addr: SocketAddr,
    pub state: Arc<BackendState>,
}

pub struct BackendState {
    pub name: String,
    pub healthy: AtomicBool,
    pub health_probes: AtomicUsize,
    /// Probes answered 200 / 503 (counted by the answer given, so a flip of `healthy` while a
    /// probe is being answered cannot miscount).
    pub probes_passed: AtomicUsize,
    pub probes_failed: AtomicUsize,
    pub requests: AtomicUsize,
    pub held: AtomicUsize,
    pub release: Notify,
    pub slow_ms: AtomicUsize,
    /// Client ports of the connections requests (not probes) arrived on.
    pub conn_ports: std::sync::Mutex<std::collections::BTreeSet<u16>>,
}

async fn answer(
    State(s): State<Arc<BackendState>>,
    axum::extract::ConnectInfo(peer): axum::extract::ConnectInfo<SocketAddr>,
    req: Request,
) -> Response {
    let path = req.uri().path().to_string();
    if path == "/healthz" {
        s.health_probes.fetch_add(1, Ordering::SeqCst);
        return if s.healthy.load(Ordering::SeqCst) {
            s.probes_passed.fetch_add(1, Ordering::SeqCst);
            (axum::http::StatusCode::OK, "ok").into_response()
        } else {
            s.probes_failed.fetch_add(1, Ordering::SeqCst);
            (axum::http::StatusCode::SERVICE_UNAVAILABLE, "down").into_response()
        };
    }
    s.requests.fetch_add(1, Ordering::SeqCst);
    s.conn_ports.lock().unwrap().insert(peer.port());
    if path.starts_with("/slow") {
        tokio::time::sleep(Duration::from_millis(
            s.slow_ms.load(Ordering::SeqCst) as u64
        ))
        .await;
    }
    if path.starts_with("/stream-hold") {
        let chunks = futures::stream::unfold((0, s.clone()), |(step, s)| async move {
            let chunk = match step {
                0 => "start\n",
                1 => {
                    s.hold().await;
                    "end\n"
                }
                _ => return None,
            };
            Some((Ok::<_, std::io::Error>(chunk), (step + 1, s)))
        });
        return axum::body::Body::from_stream(chunks).into_response();
    }
    if path.starts_with("/hold") {
        s.hold().await;
    }
    let headers: BTreeMap<String, String> = req
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    axum::Json(json!({
        "backend": s.name,
        "uri": req.uri().to_string(),
        "headers": headers,
    }))
    .into_response()
}

impl BackendState {
    fn new(name: &str) -> Arc<BackendState> {
        Arc::new(BackendState {
            name: name.to_string(),
            healthy: AtomicBool::new(true),
            health_probes: AtomicUsize::new(0),
            probes_passed: AtomicUsize::new(0),
            probes_failed: AtomicUsize::new(0),
            requests: AtomicUsize::new(0),
            held: AtomicUsize::new(0),
            release: Notify::new(),
            slow_ms: AtomicUsize::new(0),
            conn_ports: Default::default(),
        })
    }

    /// Waits until the test releases held requests; counts the request as held meanwhile.
    async fn hold(&self) {
        let released = self.release.notified();
        self.held.fetch_add(1, Ordering::SeqCst);
        released.await;
    }
}

impl Backend {
    pub async fn start(name: &str) -> Backend {
        let state = BackendState::new(name);
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(state.clone());
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(tcp, app.into_make_service_with_connect_info::<SocketAddr>())
                .await
                .unwrap()
        });
        Backend {
            name: name.to_string(),
            addr,
            state,
        }
    }
}

/// The real `gce-emulator` binary, killed on drop.
pub struct EmulatorProcess {
    child: std::process::Child,
    /// Its API root without the trailing slash, e.g. `http://127.0.0.1:PORT`.
    pub base: String,
}

impl Drop for EmulatorProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `gce-emulator --listen 127.0.0.1:0 --port-map 80=0,443=0 ARGS` and reads its URL.
pub fn start_emulator(args: &[&std::ffi::OsStr]) -> EmulatorProcess {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gce-emulator"))
        .args(["--listen", "127.0.0.1:0", "--port-map", "80=0,443=0"])
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start gce-emulator");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line.trim().trim_end_matches('/').to_string();
    assert!(
        base.starts_with("http://127.0.0.1:"),
        "first stdout line: {line:?}"
    );
    EmulatorProcess { child, base }
}

/// `method` on `{api}/{path}` with `body`; asserts success and waits for a pending operation.
pub async fn compute_call(
    http: &reqwest::Client,
    api: &str,
    method: reqwest::Method,
    path: &str,
    body: Value,
) -> Value {
    let r = http
        .request(method, format!("{api}/{path}"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    let v: Value = r.json().await.unwrap();
    assert!(status.is_success(), "{path}: {v}");
    if v["kind"] == "compute#operation" && v["status"] != "DONE" {
        let link = v["selfLink"].as_str().unwrap();
        http.post(format!("{link}/wait")).send().await.unwrap();
    }
    v
}

/// A random load balancer address in 127.200.0.0/16 so parallel tests do not collide.
pub fn lb_ip() -> IpAddr {
    let r: u32 = rand::random();
    IpAddr::from([127, 200, (r >> 8) as u8, (r as u8).max(1)])
}

/// A set of resources published to a running data plane.
pub struct World {
    pub snap: Snapshot,
    tx: watch::Sender<Arc<Snapshot>>,
    pub dp: DataPlane,
    pub health: Arc<HealthTable>,
}

impl World {
    /// Starts a data plane binding every forwarding rule port to an ephemeral port.
    pub fn start() -> World {
        Self::start_with(DataPlaneConfig {
            port_map: [(80, 0), (443, 0)].into_iter().collect(),
            ..Default::default()
        })
    }

    pub fn start_with(config: DataPlaneConfig) -> World {
        let (tx, rx) = watch::channel(Arc::new(Snapshot::default()));
        let health = Arc::new(HealthTable::default());
        let dp = DataPlane::start(config, rx, health.clone());
        World {
            snap: Snapshot::default(),
            tx,
            dp,
            health,
        }
    }

    /// Stores `v` at `path` (e.g. `global/urlMaps/um`), adding `name`, `kind` and `selfLink`.
    pub fn put(&mut self, path: &str, mut v: Value) {
        let name = path.rsplit('/').next().unwrap().to_string();
        v["name"] = json!(name);
        v["selfLink"] = json!(url(path));
        self.snap.resources.insert(key(path), Arc::new(v));
    }

    pub fn remove(&mut self, path: &str) {
        self.snap.resources.remove(&key(path));
    }

    pub fn set_endpoints(&mut self, neg: &str, eps: &[SocketAddr]) {
        self.snap.neg_endpoints.insert(
            key(&format!("zones/{ZONE}/networkEndpointGroups/{neg}")),
            eps.iter()
                .map(|a| NetworkEndpoint {
                    ip_address: a.ip().to_string(),
                    port: a.port(),
                    instance: None,
                })
                .collect(),
        );
    }

    pub fn publish(&mut self) {
        self.snap.version += 1;
        self.tx.send_replace(Arc::new(self.snap.clone()));
    }

    /// A health check probing `/healthz` on the serving port every second.
    pub fn health_check(&mut self, name: &str, healthy: u32, unhealthy: u32) {
        self.put(
            &format!("global/healthChecks/{name}"),
            json!({"kind": "compute#healthCheck", "type": "HTTP", "checkIntervalSec": 1, "timeoutSec": 1,
                   "healthyThreshold": healthy, "unhealthyThreshold": unhealthy,
                   "httpHealthCheck": {"portSpecification": "USE_SERVING_PORT", "requestPath": "/healthz"}}),
        );
    }

    /// A NEG with `eps` and a backend service over it with health check `hc` (if any);
    /// `extra` fields are merged into the backend service.
    pub fn service(&mut self, name: &str, hc: Option<&str>, eps: &[SocketAddr], extra: Value) {
        let neg = format!("neg-{name}");
        self.put(&format!("zones/{ZONE}/networkEndpointGroups/{neg}"), json!({"kind": "compute#networkEndpointGroup", "networkEndpointType": "GCE_VM_IP_PORT"}));
        self.set_endpoints(&neg, eps);
        let mut bs = json!({"kind": "compute#backendService", "protocol": "HTTP", "timeoutSec": 30,
            "backends": [{"group": url(&format!("zones/{ZONE}/networkEndpointGroups/{neg}")), "balancingMode": "RATE", "maxRatePerEndpoint": 100}]});
        if let Some(hc) = hc {
            bs["healthChecks"] = json!([url(&format!("global/healthChecks/{hc}"))]);
        }
        if let (Some(o), Some(e)) = (bs.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                o.insert(k.clone(), v.clone());
            }
        }
        self.put(&format!("global/backendServices/{name}"), bs);
    }

    /// URL map `name` + target HTTP proxy + forwarding rule on `ip`:80.
    pub fn http_lb(&mut self, name: &str, ip: IpAddr, url_map: Value) {
        self.put(&format!("global/urlMaps/{name}"), url_map);
        self.put(&format!("global/targetHttpProxies/{name}"), json!({"kind": "compute#targetHttpProxy", "urlMap": url(&format!("global/urlMaps/{name}"))}));
        self.put(
            &format!("global/forwardingRules/{name}"),
            json!({"kind": "compute#forwardingRule", "IPAddress": ip.to_string(), "IPProtocol": "TCP", "portRange": "80-80",
                   "loadBalancingScheme": "EXTERNAL", "target": url(&format!("global/targetHttpProxies/{name}"))}),
        );
    }

    /// Waits for the listener of forwarding rule `name` and returns it.
    pub async fn listener(&self, name: &str) -> ListenerInfo {
        let k = key(&format!("global/forwardingRules/{name}"));
        poll(&format!("listener of {name}"), 30, async || {
            self.dp
                .listeners()
                .into_iter()
                .find(|l| l.forwarding_rule == k)
        })
        .await
    }

    pub fn state(&self, bs: &str, neg: &str, addr: SocketAddr) -> Option<HealthState> {
        self.health.get(&HealthKey {
            backend_service: key(&format!("global/backendServices/{bs}")),
            neg: key(&format!("zones/{ZONE}/networkEndpointGroups/{neg}")),
            ip_address: addr.ip().to_string(),
            port: addr.port(),
        })
    }

    /// Waits until the endpoint `addr` of `bs` (NEG `neg-{bs}`) is in `want`.
    pub async fn wait_state(&self, bs: &str, addr: SocketAddr, want: HealthState) {
        let neg = format!("neg-{bs}");
        poll(&format!("{bs} {addr} {want:?}"), 60, async || {
            (self.state(bs, &neg, addr) == Some(want)).then_some(())
        })
        .await
    }
}

impl World {
    /// What `explain` says of `GET url` with `headers` on forwarding rule `rule`.
    pub fn explain(
        &self,
        rule: &str,
        url: &str,
        headers: &[(&str, &str)],
    ) -> gce_emulator::dataplane::explain::Explanation {
        let req = gce_emulator::dataplane::explain::ExplainRequest {
            url: url.to_string(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            forwarding_rule: Some(rule.to_string()),
            ..Default::default()
        };
        gce_emulator::dataplane::explain::explain(
            &self.dp.frontends(),
            &self.snap,
            &self.health,
            &self.dp.armor(),
            &req,
        )
        .unwrap_or_else(|e| panic!("explain {url}: {e}"))
    }

    /// The backend (`a` for backend service `bs-a`) `explain` names for `url`, and the rule
    /// that came closest when a default decided.
    pub fn explained_backend(
        &self,
        rule: &str,
        url: &str,
        headers: &[(&str, &str)],
    ) -> (String, Option<String>) {
        let ex = self.explain(rule, url, headers);
        let bs = ex.backend_service.unwrap_or_default();
        let name = bs.rsplit('/').next().unwrap_or("");
        (
            name.strip_prefix("bs-").unwrap_or(name).to_string(),
            ex.routing.closest.map(|c| c.rule),
        )
    }
}

/// An HTTP client resolving `hosts` to the listener's IP (port from the URL).
pub fn client(l: &ListenerInfo, hosts: &[&str]) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(Duration::from_secs(60));
    for h in hosts {
        b = b.resolve(h, l.local_addr);
    }
    b.build().unwrap()
}

/// GET `http://{host}:{port}{path}` and the JSON the backend answered (or `Value::Null`).
pub async fn get(
    c: &reqwest::Client,
    l: &ListenerInfo,
    host: &str,
    path: &str,
) -> (u16, reqwest::header::HeaderMap, Value, String) {
    let r = c
        .get(format!("http://{host}:{}{path}", l.local_addr.port()))
        .send()
        .await
        .expect("request through the LB");
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let text = r.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or(Value::Null);
    (status, headers, v, text)
}

pub fn backend_of(v: &Value) -> &str {
    v["backend"].as_str().unwrap_or("")
}

/// A TLS backend (self-signed, ALPN h2 and http/1.1) answering JSON with its name and HTTP
/// version (`/healthz` too, with 200); `/hold` answers once released, `/stream-hold` sends
/// `start` at once and `end` once released (see [`Backend`]; only `held` and `release` of its
/// state are used).
pub async fn tls_backend(name: &'static str) -> Backend {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["backend.internal".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let der_key = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap();
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert.der().clone()], der_key)
    .unwrap();
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let state = BackendState::new(name);
    let served = state.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = tcp.accept().await {
            let (acceptor, state) = (acceptor.clone(), served.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(s).await else {
                    return;
                };
                let svc = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let state = state.clone();
                        async move {
                            Ok::<_, std::convert::Infallible>(tls_answer(name, &state, req).await)
                        }
                    },
                );
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    Backend {
        name: name.to_string(),
        addr,
        state,
    }
}

type TlsBody = http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>;

async fn tls_answer(
    name: &str,
    state: &Arc<BackendState>,
    req: hyper::Request<hyper::body::Incoming>,
) -> hyper::Response<TlsBody> {
    use http_body_util::BodyExt;
    let path = req.uri().path().to_string();
    if path == "/stream-hold" {
        let chunks = futures::stream::unfold((0, state.clone()), |(step, s)| async move {
            let chunk = match step {
                0 => "start\n",
                1 => {
                    s.hold().await;
                    "end\n"
                }
                _ => return None,
            };
            let frame = hyper::body::Frame::data(bytes::Bytes::from_static(chunk.as_bytes()));
            Some((Ok(frame), (step + 1, s)))
        });
        return hyper::Response::new(http_body_util::StreamBody::new(chunks).boxed());
    }
    if path == "/hold" {
        state.hold().await;
    }
    let body = json!({"backend": name, "version": format!("{:?}", req.version()), "uri": path});
    hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from(body.to_string())).boxed())
}
