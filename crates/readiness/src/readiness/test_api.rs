//! Test support: an in-process Kubernetes API for Pods (list, watch, `pods/status` patch) and
//! Events, behind a real `kube::Client`, recording every write; and a scripted [`NegHealth`].

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use futures::channel::mpsc;
use futures::future::BoxFuture;
use futures::StreamExt;
use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use serde_json::{json, Value};

use super::neg::{EndpointHealth, NegHealth, NegHealthError, NegRef};

/// One recorded write.
#[derive(Clone, Debug)]
pub struct Write {
    /// Request path.
    pub path: String,
    /// `content-type` header.
    pub content_type: String,
    /// JSON body.
    pub body: Value,
}

#[derive(Default)]
struct State {
    pods: Vec<Value>,
    resource_version: u64,
    patches: Vec<Write>,
    events: Vec<Write>,
    watchers: Vec<mpsc::UnboundedSender<Bytes>>,
}

/// The fake API. Clone freely; all clones share state.
#[derive(Clone, Default)]
pub struct MockApi {
    state: Arc<Mutex<State>>,
}

type Body = BoxBody<Bytes, Infallible>;

fn full(status: StatusCode, value: &Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(value.to_string())).boxed())
        .unwrap()
}

impl MockApi {
    /// An API holding `pods` (each gets a resourceVersion).
    pub fn with_pods(pods: Vec<Value>) -> Self {
        let api = Self::default();
        {
            let mut s = api.state.lock().unwrap();
            for mut pod in pods {
                s.resource_version += 1;
                pod["metadata"]["resourceVersion"] = json!(s.resource_version.to_string());
                s.pods.push(pod);
            }
        }
        api
    }

    /// A `kube::Client` talking to this API.
    pub fn client(&self) -> kube::Client {
        let api = self.clone();
        let service = tower::service_fn(move |req: Request<kube::client::Body>| {
            let api = api.clone();
            async move { Ok::<_, Infallible>(api.handle(req).await) }
        });
        kube::Client::new(service, "default")
    }

    /// Adds `pod` and sends it to the open watches as `ADDED`.
    pub fn add_pod(&self, mut pod: Value) {
        let mut s = self.state.lock().unwrap();
        s.resource_version += 1;
        pod["metadata"]["resourceVersion"] = json!(s.resource_version.to_string());
        s.pods.push(pod.clone());
        let line = format!("{}\n", json!({"type": "ADDED", "object": pod}));
        s.watchers
            .retain(|w| w.unbounded_send(Bytes::from(line.clone())).is_ok());
    }

    /// Pod watches open now.
    pub fn watches(&self) -> usize {
        self.state.lock().unwrap().watchers.len()
    }

    /// `pods/status` patches so far.
    pub fn patches(&self) -> Vec<Write> {
        self.state.lock().unwrap().patches.clone()
    }

    /// Events created so far.
    pub fn events(&self) -> Vec<Write> {
        self.state.lock().unwrap().events.clone()
    }

    async fn handle(&self, req: Request<kube::client::Body>) -> Response<Body> {
        let method = req.method().clone();
        let path = req.uri().path().to_owned();
        let query = req.uri().query().unwrap_or_default().to_owned();
        let content_type = req
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let bytes = req
            .into_body()
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let mut s = self.state.lock().unwrap();
        match (method.as_str(), segments.as_slice()) {
            ("GET", ["api", "v1", "pods"]) if query.contains("watch=true") => {
                let (tx, rx) = mpsc::unbounded::<Bytes>();
                s.watchers.push(tx);
                let stream = rx.map(|b| Ok::<_, Infallible>(Frame::data(b)));
                Response::builder()
                    .header("content-type", "application/json")
                    .body(BodyExt::boxed(StreamBody::new(stream)))
                    .unwrap()
            }
            ("GET", ["api", "v1", "pods"]) => full(
                StatusCode::OK,
                &json!({"apiVersion": "v1", "kind": "PodList",
                        "metadata": {"resourceVersion": s.resource_version.to_string()},
                        "items": s.pods}),
            ),
            ("PATCH", ["api", "v1", "namespaces", ns, "pods", name, "status"]) => {
                s.patches.push(Write {
                    path: path.clone(),
                    content_type,
                    body: body.clone(),
                });
                s.resource_version += 1;
                let rv = s.resource_version.to_string();
                let Some(pod) = s.pods.iter_mut().find(|p| {
                    p["metadata"]["namespace"] == json!(ns) && p["metadata"]["name"] == json!(name)
                }) else {
                    return full(
                        StatusCode::NOT_FOUND,
                        &json!({"kind": "Status", "code": 404}),
                    );
                };
                // Strategic merge of status.conditions keyed by type.
                let mut conditions: Vec<Value> = pod["status"]["conditions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                for new in body["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    conditions.retain(|c| c["type"] != new["type"]);
                    conditions.push(new.clone());
                }
                pod["status"]["conditions"] = json!(conditions);
                pod["metadata"]["resourceVersion"] = json!(rv);
                let updated = pod.clone();
                let line = format!("{}\n", json!({"type": "MODIFIED", "object": updated}));
                s.watchers
                    .retain(|w| w.unbounded_send(Bytes::from(line.clone())).is_ok());
                full(StatusCode::OK, &updated)
            }
            ("POST", ["apis", "events.k8s.io", "v1", "namespaces", _, "events"]) => {
                s.events.push(Write {
                    path: path.clone(),
                    content_type,
                    body: body.clone(),
                });
                full(StatusCode::CREATED, &body)
            }
            _ => full(
                StatusCode::NOT_FOUND,
                &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "code": 404, "reason": "NotFound", "message": format!("{method} {path}")}),
            ),
        }
    }
}

type Responder =
    dyn Fn(&NegRef, usize) -> Result<Option<Vec<EndpointHealth>>, NegHealthError> + Send + Sync;

/// A scripted [`NegHealth`]: `respond(neg, n)` answers the `n`-th call (0-based) for that NEG.
pub struct FakeHealth {
    respond: Box<Responder>,
    users: BTreeMap<NegRef, Vec<String>>,
    calls: Mutex<HashMap<NegRef, usize>>,
    /// `backend_services_using` calls.
    pub backend_service_calls: AtomicUsize,
    /// When set, `backend_services_using` fails (503).
    pub fail_backend_services: AtomicBool,
}

impl FakeHealth {
    /// A fake answering with `respond`; backend services using each NEG from `users` (absent:
    /// none).
    pub fn new(
        respond: impl Fn(&NegRef, usize) -> Result<Option<Vec<EndpointHealth>>, NegHealthError>
            + Send
            + Sync
            + 'static,
        users: BTreeMap<NegRef, Vec<String>>,
    ) -> Self {
        Self {
            respond: Box::new(respond),
            users,
            calls: Mutex::default(),
            backend_service_calls: AtomicUsize::new(0),
            fail_backend_services: AtomicBool::new(false),
        }
    }

    /// `listNetworkEndpoints` calls made for `neg`.
    pub fn calls(&self, neg: &NegRef) -> usize {
        self.calls.lock().unwrap().get(neg).copied().unwrap_or(0)
    }

    /// All `listNetworkEndpoints` calls.
    pub fn total_calls(&self) -> usize {
        self.calls.lock().unwrap().values().sum()
    }
}

impl NegHealth for FakeHealth {
    fn list_network_endpoints<'a>(
        &'a self,
        neg: &'a NegRef,
    ) -> BoxFuture<'a, Result<Option<Vec<EndpointHealth>>, NegHealthError>> {
        let n = {
            let mut calls = self.calls.lock().unwrap();
            let c = calls.entry(neg.clone()).or_default();
            *c += 1;
            *c - 1
        };
        let answer = (self.respond)(neg, n);
        Box::pin(async move { answer })
    }

    fn backend_services_using<'a>(
        &'a self,
        negs: &'a [NegRef],
    ) -> BoxFuture<'a, Result<BTreeMap<NegRef, Vec<String>>, NegHealthError>> {
        self.backend_service_calls.fetch_add(1, Ordering::SeqCst);
        if self.fail_backend_services.load(Ordering::SeqCst) {
            return Box::pin(async {
                Err(NegHealthError::Api {
                    method: "compute.backendServices.list",
                    resource: "projects/p1".into(),
                    status: Some(503),
                    message: "backendError".into(),
                })
            });
        }
        let answer = negs
            .iter()
            .map(|n| (n.clone(), self.users.get(n).cloned().unwrap_or_default()))
            .collect();
        Box::pin(async move { Ok(answer) })
    }
}
