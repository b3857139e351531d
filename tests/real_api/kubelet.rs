//! A stand-in scheduler and kubelet for one Node of the real-API tier (issue 40): the tier runs
//! a real kube-apiserver and kube-controller-manager but no kubelet or scheduler, so this plays
//! their parts for the Pods of one namespace, the way they do it in a cluster
//! (kubernetes/kubernetes `pkg/kubelet/status/status_manager.go`, `pkg/api/v1/pod/util.go`):
//!
//! - a Pod without `spec.nodeName` is bound to the Node (`pods/binding`, as the scheduler does);
//! - a bound Pod gets an IP from the Node's Pod CIDR (10.244.0.10 upwards, in the tier's private
//!   network namespace), and its "container" starts: an HTTP/1.1 keep-alive server on that IP
//!   and the first container port, answering every request 200 with the Pod's name (body and
//!   `x-pod-name` header, which `tests/support/load.rs` counts);
//! - its status follows after [`STATUS_LAG`] (a kubelet's status update lags what it watches by
//!   tens of milliseconds): `Running`, `podIP`, containers ready, and `Ready` = containers ready
//!   AND every readiness gate's condition True, re-evaluated whenever the Pod changes (the
//!   operator setting `cloud.google.com/load-balancer-neg-ready`), always after the same lag;
//! - a Pod being deleted keeps serving through its preStop hook (`exec: [sleep, N]`, at most the
//!   grace period), then its server stops (closing every connection, as a process that exits),
//!   its containers turn not ready, and the Pod is deleted with grace period 0, as the kubelet
//!   confirms a termination.
//!
//! Everything it does is recorded with a timestamp in [`Kubelet::events`], for failure messages.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a status update lags the change it reports (kubelet status manager).
pub const STATUS_LAG: Duration = Duration::from_millis(30);

/// The Node this kubelet serves.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    pub name: String,
    /// `InternalIP` (the instance's `networkIP`).
    pub internal_ip: Ipv4Addr,
    /// The first Pod IP handed out; later ones count up from it.
    pub first_pod_ip: Ipv4Addr,
}

/// A running stand-in kubelet; stops (and stops its Pods' servers) on drop.
pub struct Kubelet {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    /// `(seconds since start, what happened)`.
    pub events: Arc<Mutex<Vec<(f64, String)>>>,
}

struct Shared {
    api: Api<Pod>,
    node: NodeSpec,
    started: Instant,
    events: Arc<Mutex<Vec<(f64, String)>>>,
    /// Per Pod uid: its IP and the sender that stops its server.
    running: Mutex<HashMap<String, (Ipv4Addr, tokio::sync::watch::Sender<bool>)>>,
    /// Pod uids already bound, already terminating, with a status write pending.
    bound: Mutex<HashSet<String>>,
    terminating: Mutex<HashSet<String>>,
    pending: Mutex<HashSet<String>>,
    next_ip: Mutex<u32>,
}

impl Shared {
    fn note(&self, what: String) {
        let at = self.started.elapsed().as_secs_f64();
        self.events.lock().unwrap().push((at, what));
    }
}

impl Kubelet {
    /// Starts serving `node` for the Pods of `namespace`, with `kubeconfig`'s credentials.
    ///
    /// Errors: the kubeconfig cannot be read or its client built.
    pub fn start(kubeconfig: &Path, namespace: &str, node: NodeSpec) -> Result<Kubelet> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig)?;
        let events: Arc<Mutex<Vec<(f64, String)>>> = Arc::default();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
        let (ns, record) = (namespace.to_string(), events.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("tokio runtime");
            rt.block_on(async move {
                let options = kube::config::KubeConfigOptions::default();
                let client = match kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .map_err(anyhow::Error::from)
                    .and_then(|c| kube::Client::try_from(c).map_err(anyhow::Error::from))
                {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let first = u32::from(node.first_pod_ip);
                let shared = Arc::new(Shared {
                    api: Api::namespaced(client, &ns),
                    node,
                    started: Instant::now(),
                    events: record,
                    running: Mutex::default(),
                    bound: Mutex::default(),
                    terminating: Mutex::default(),
                    pending: Mutex::default(),
                    next_ip: Mutex::new(first),
                });
                let _ = ready_tx.send(Ok(()));
                run(shared.clone(), stopped).await;
                for (_, (_, stop)) in shared.running.lock().unwrap().drain() {
                    let _ = stop.send(true);
                }
            });
        });
        ready_rx
            .recv_timeout(Duration::from_secs(60))
            .map_err(|_| anyhow!("the stand-in kubelet did not start"))??;
        Ok(Kubelet {
            stop: Some(stop),
            thread: Some(thread),
            events,
        })
    }

    /// What it did so far, one line each (`12.345s what`).
    pub fn log(&self) -> String {
        self.events
            .lock()
            .unwrap()
            .iter()
            .map(|(t, w)| format!("{t:.3}s {w}"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn run(shared: Arc<Shared>, mut stopped: tokio::sync::oneshot::Receiver<()>) {
    use futures::StreamExt;
    use kube::runtime::watcher;
    let mut events = watcher(shared.api.clone(), watcher::Config::default()).boxed();
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            ev = events.next() => match ev {
                Some(Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p))) => {
                    observe(&shared, &p);
                }
                Some(Ok(watcher::Event::Delete(p))) => {
                    let uid = p.metadata.uid.clone().unwrap_or_default();
                    if let Some((ip, stop)) = shared.running.lock().unwrap().remove(&uid) {
                        let _ = stop.send(true);
                        shared.note(format!("{} gone: server on {ip} stopped", name(&p)));
                    }
                }
                Some(_) => {}
                None => return,
            }
        }
    }
}

fn name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

/// Reacts to one observed state of a Pod (see the module docs).
fn observe(shared: &Arc<Shared>, pod: &Pod) {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let spec = pod.spec.clone().unwrap_or_default();
    let deleting = pod.metadata.deletion_timestamp.is_some();
    match spec.node_name.as_deref() {
        None if !deleting => {
            if shared.bound.lock().unwrap().insert(uid) {
                tokio::spawn(bind(shared.clone(), name(pod)));
            }
            return;
        }
        Some(n) if n == shared.node.name => {}
        _ => return,
    }
    let running = shared.running.lock().unwrap().get(&uid).map(|r| r.0);
    let ip = match running {
        Some(ip) => ip,
        None if deleting => return,
        None => match start_container(shared, pod, &uid) {
            Ok(ip) => ip,
            Err(e) => {
                shared.note(format!("{}: could not start: {e:#}", name(pod)));
                return;
            }
        },
    };
    if deleting {
        if shared.terminating.lock().unwrap().insert(uid.clone()) {
            tokio::spawn(terminate(shared.clone(), pod.clone(), uid));
        }
        return;
    }
    if wants_status(pod, ip) && shared.pending.lock().unwrap().insert(uid.clone()) {
        tokio::spawn(write_status(shared.clone(), name(pod), uid, ip, true));
    }
}

async fn bind(shared: Arc<Shared>, pod: String) {
    let binding = json!({"apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": shared.node.name}});
    let r: kube::Result<Value> = shared
        .api
        .create_subresource("binding", &pod, &PostParams::default(), &binding)
        .await;
    shared.note(match r {
        Ok(_) => format!("{pod} bound to {}", shared.node.name),
        Err(e) => format!("{pod} binding failed: {e}"),
    });
}

/// Allocates the Pod's IP and starts its server on the first container port (8080 if none).
fn start_container(shared: &Arc<Shared>, pod: &Pod, uid: &str) -> Result<Ipv4Addr> {
    let port = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.ports.as_ref()?.first().map(|p| p.container_port))
        .unwrap_or(8080) as u16;
    let ip = {
        let mut next = shared.next_ip.lock().unwrap();
        let ip = Ipv4Addr::from(*next);
        *next += 1;
        ip
    };
    let listener = std::net::TcpListener::bind(SocketAddr::from((ip, port)))?;
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(serve(listener, name(pod), stop_rx));
    shared
        .running
        .lock()
        .unwrap()
        .insert(uid.to_string(), (ip, stop_tx));
    shared.note(format!("{} started: serving on {ip}:{port}", name(pod)));
    Ok(ip)
}

fn condition<'a>(pod: &'a Pod, t: &str) -> Option<&'a str> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t)
        .map(|c| c.status.as_str())
}

/// `Ready` as a kubelet computes it for running, ready containers: every readiness gate True.
fn ready_with_gates(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .into_iter()
        .flatten()
        .all(|g| condition(pod, &g.condition_type) == Some("True"))
}

/// Whether the Pod's status differs from what this kubelet would report.
fn wants_status(pod: &Pod, ip: Ipv4Addr) -> bool {
    let ip_written = pod.status.as_ref().and_then(|s| s.pod_ip.as_deref()) == Some(&ip.to_string());
    let ready = if ready_with_gates(pod) {
        "True"
    } else {
        "False"
    };
    !ip_written
        || condition(pod, "ContainersReady") != Some("True")
        || condition(pod, "Ready") != Some(ready)
}

/// After [`STATUS_LAG`], reads the Pod again and writes its status (`containers_ready`).
async fn write_status(
    shared: Arc<Shared>,
    pod: String,
    uid: String,
    ip: Ipv4Addr,
    containers_ready: bool,
) {
    tokio::time::sleep(STATUS_LAG).await;
    shared.pending.lock().unwrap().remove(&uid);
    let Ok(current) = shared.api.get(&pod).await else {
        return;
    };
    if current.metadata.uid.as_deref() != Some(uid.as_str()) {
        return;
    }
    let cr = if containers_ready { "True" } else { "False" };
    let ready = if containers_ready && ready_with_gates(&current) {
        "True"
    } else {
        "False"
    };
    let container = current
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
        .unwrap_or_default();
    let changed = |t: &str, want: &str| json!({"type": t, "status": want});
    let state = if containers_ready {
        json!({"running": {}})
    } else {
        json!({"terminated": {"exitCode": 0, "reason": "Completed"}})
    };
    let patch = json!({"status": {
        "phase": "Running", "hostIP": shared.node.internal_ip.to_string(),
        "podIP": ip.to_string(), "podIPs": [{"ip": ip.to_string()}],
        "conditions": [changed("Initialized", "True"), changed("PodScheduled", "True"),
            changed("ContainersReady", cr), changed("Ready", ready)],
        "containerStatuses": [{"name": container.0, "image": container.1, "imageID": "",
            "containerID": format!("containerd://{uid}"), "ready": containers_ready,
            "started": containers_ready, "restartCount": 0, "state": state}],
    }});
    let r = shared
        .api
        .patch_status(&pod, &PatchParams::default(), &Patch::Strategic(patch))
        .await;
    shared.note(match r {
        Ok(_) => format!("{pod} status: ContainersReady {cr}, Ready {ready}"),
        Err(e) => format!("{pod} status write failed: {e}"),
    });
}

/// The preStop `exec: [sleep, N]` seconds, at most the grace period.
fn pre_stop(pod: &Pod) -> Duration {
    let spec = pod.spec.as_ref();
    let sleep = spec
        .and_then(|s| s.containers.first())
        .and_then(|c| {
            c.lifecycle
                .as_ref()?
                .pre_stop
                .as_ref()?
                .exec
                .as_ref()?
                .command
                .clone()
        })
        .and_then(|cmd| match cmd.as_slice() {
            [s, n] if s == "sleep" => n.parse::<u64>().ok(),
            _ => None,
        })
        .unwrap_or(0);
    let grace = pod
        .metadata
        .deletion_grace_period_seconds
        .or_else(|| spec.and_then(|s| s.termination_grace_period_seconds))
        .unwrap_or(30)
        .max(0) as u64;
    Duration::from_secs(sleep.min(grace))
}

async fn terminate(shared: Arc<Shared>, pod: Pod, uid: String) {
    let (pod_name, hook) = (name(&pod), pre_stop(&pod));
    shared.note(format!("{pod_name} terminating: preStop {hook:?}"));
    tokio::time::sleep(hook).await;
    let entry = shared.running.lock().unwrap().remove(&uid);
    let Some((ip, stop)) = entry else {
        return;
    };
    let _ = stop.send(true);
    shared.note(format!(
        "{pod_name} container exited: server on {ip} stopped"
    ));
    write_status(shared.clone(), pod_name.clone(), uid.clone(), ip, false).await;
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let r = shared.api.delete(&pod_name, &dp).await;
    shared.note(match r {
        Ok(_) => format!("{pod_name} deleted (grace period 0)"),
        Err(e) => format!("{pod_name} final delete failed: {e}"),
    });
}

/// The "container": HTTP/1.1 with keep-alive until `stop` turns true, then every connection
/// is dropped (a process that exits closes its sockets).
async fn serve(
    listener: tokio::net::TcpListener,
    pod: String,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let body: Arc<str> = Arc::from(format!("hello from {pod}"));
    let pod: Arc<str> = Arc::from(pod);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            conn = listener.accept() => {
                let Ok((mut conn, _)) = conn else { continue };
                let (pod, body, mut stop) = (pod.clone(), body.clone(), stop.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        _ = stop.changed() => {}
                        _ = answer(&mut conn, &pod, &body) => {}
                    }
                });
            }
        }
    }
}

/// Answers requests on one connection until the client closes it or asks to.
async fn answer(conn: &mut tokio::net::TcpStream, pod: &str, body: &str) {
    let mut buf = Vec::with_capacity(4096);
    loop {
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        buf.drain(..end);
        let close = head.contains("\r\nconnection: close");
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nx-pod-name: {pod}\r\ncontent-length: {}\r\n{}\r\n{body}",
            body.len(),
            if close { "connection: close\r\n" } else { "" }
        );
        if conn.write_all(reply.as_bytes()).await.is_err() || close {
            return;
        }
    }
}
