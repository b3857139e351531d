//! The local kubelet: runs Pods that opt in with the annotation
//! `local.gclb-operator.dev/run: "echo"` (or `"default-backend"`) as built-in servers on a
//! loopback Pod IP, on the local Nodes ([`super::node_agent`]), and reports their status the way
//! a kubelet does.
//!
//! For each opted-in Pod (not terminal, not bound to a Node this kubelet does not serve) it
//! 1. schedules it when unbound ([`NodeSet::schedule`]: `spec.nodeSelector`, round-robin; a Pod
//!    no Node fits stays Pending with a `FailedScheduling` Event and is retried when the Nodes
//!    change) and binds it (`pods/binding`, falling back to a merge patch of `spec.nodeName`,
//!    leaving it unset if the server refuses both);
//! 2. picks a random bindable Pod IP from its Node's `spec.podCIDR` and starts an
//!    [`echo::EchoServer`] on every TCP container port (HTTPS for ports named `https*` or listed
//!    in `local.gclb-operator.dev/tls-ports`); `status.hostIP` is the Node's InternalIP;
//! 3. runs each container's readinessProbe ([`super::probe`]) and writes `status` with a
//!    strategic merge patch holding only the kubelet's own conditions ([`super::pod_status`]),
//!    so readiness-gate conditions written by others survive; `Ready` follows containers AND
//!    gates;
//! 4. applies annotation changes (test controls) live, and records Events like the kubelet
//!    (`Scheduled`, `Started`, `Unhealthy` when a readiness probe makes a container not ready,
//!    `Killing` on deletion);
//! 5. on deletion runs [`termination`]: keeps serving, runs the preStop hook as a delay, stops
//!    the servers at the end of the grace period (or right after the preStop hook with
//!    `local.gclb-operator.dev/on-sigterm: exit`), then deletes the Pod with
//!    `gracePeriodSeconds: 0` (uid precondition), as the kubelet does once containers are gone.

mod pod_worker;
pub mod termination;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Resource, ResourceExt};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::annotations::RunMode;
use super::echo;
use super::node_set::{LocalNode, NodeSet};

pub use termination::{grace_period_seconds, pre_stop_delay};

/// The field manager of the kubelet's writes.
pub const FIELD_MANAGER: &str = "kubelet";

/// Errors starting a local Pod.
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    /// No Pod IP could be allocated.
    #[error("Pod {pod}: {source}")]
    PodIp {
        /// `namespace/name`.
        pod: String,
        /// The allocation error.
        source: super::pod_ip::PodIpError,
    },
    /// A container port could not be served.
    #[error(transparent)]
    Echo(#[from] echo::EchoError),
}

struct Kubelet {
    client: Client,
    /// How long a status write lags what caused it ([`super::LocalOptions`]).
    status_delay: std::time::Duration,
    /// Events to publish, drained by one task so Pod workers never wait on the API.
    events: mpsc::UnboundedSender<(ObjectReference, Event)>,
}

impl Kubelet {
    fn record(&self, pod: &Pod, type_: EventType, reason: &str, action: &str, note: String) {
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: None,
        };
        let _ = self.events.send((pod.object_ref(&()), event));
    }
}

/// Publishes the kubelet's Events (events.k8s.io/v1, reporting controller `kubelet`).
async fn publish_events(
    recorder: Recorder,
    mut events: mpsc::UnboundedReceiver<(ObjectReference, Event)>,
) {
    while let Some((reference, event)) = events.recv().await {
        if let Err(error) = recorder.publish(&event, &reference).await {
            tracing::debug!(%error, reason = %event.reason, "cannot publish kubelet Event");
        }
    }
}

struct Worker {
    updates: watch::Sender<Arc<Pod>>,
    /// The Node the Pod runs on.
    node: String,
    _task: JoinHandle<()>,
}

/// What the kubelet tracks between Pod events.
#[derive(Default)]
struct Tracked {
    /// Running Pods by uid. Dropping a Worker closes its channel: the Pod's task stops its
    /// servers and exits.
    workers: HashMap<String, Worker>,
    /// Opted-in unbound Pods no Node fits yet, by uid (retried when the Nodes change), with
    /// the last `FailedScheduling` message recorded for them.
    pending: HashMap<String, (Pod, String)>,
}

/// Watches all Pods and runs the opted-in ones on the served Nodes until the watch stream
/// ends (never: errors are retried with backoff). Each status write lags its cause by
/// `status_delay`.
pub async fn run(client: Client, nodes: Arc<NodeSet>, status_delay: std::time::Duration) {
    let (events, queue) = mpsc::unbounded_channel();
    let reporter = Reporter {
        controller: "kubelet".to_string(),
        instance: nodes.all().first().map(|n| n.name().to_string()),
    };
    tokio::spawn(publish_events(
        Recorder::new(client.clone(), reporter),
        queue,
    ));
    let kubelet = Arc::new(Kubelet {
        client: client.clone(),
        status_delay,
        events,
    });
    let pods: Api<Pod> = Api::all(client);
    let mut tracked = Tracked::default();
    let mut relisted: HashSet<String> = HashSet::new();
    let mut node_changes = nodes.subscribe();
    let mut events = watcher(pods, watcher::Config::default())
        .default_backoff()
        .boxed();
    loop {
        let event = tokio::select! {
            event = events.next() => match event {
                Some(event) => event,
                None => return,
            },
            changed = node_changes.changed() => {
                if changed.is_ok() {
                    node_change(&kubelet, &nodes, &mut tracked);
                }
                continue;
            }
        };
        match event {
            Ok(watcher::Event::Init) => relisted.clear(),
            Ok(watcher::Event::InitApply(pod)) => {
                relisted.insert(pod.uid().unwrap_or_default());
                observe(&kubelet, &nodes, &mut tracked, pod);
            }
            Ok(watcher::Event::InitDone) => {
                tracked.workers.retain(|uid, _| relisted.contains(uid));
                tracked.pending.retain(|uid, _| relisted.contains(uid));
            }
            Ok(watcher::Event::Apply(pod)) => observe(&kubelet, &nodes, &mut tracked, pod),
            Ok(watcher::Event::Delete(pod)) => {
                let uid = pod.uid().unwrap_or_default();
                tracked.workers.remove(&uid);
                tracked.pending.remove(&uid);
            }
            Err(error) => tracing::debug!(%error, "kubelet Pod watch interrupted"),
        }
    }
}

/// The served Nodes changed: Pods of a Node no longer served stop, pending Pods try again.
fn node_change(kubelet: &Arc<Kubelet>, nodes: &NodeSet, tracked: &mut Tracked) {
    tracked
        .workers
        .retain(|_, worker| nodes.get(&worker.node).is_some());
    let pending: Vec<Pod> = tracked.pending.values().map(|(p, _)| p.clone()).collect();
    for pod in pending {
        observe(kubelet, nodes, tracked, pod);
    }
}

fn observe(kubelet: &Arc<Kubelet>, nodes: &NodeSet, tracked: &mut Tracked, pod: Pod) {
    let Some(uid) = pod.uid() else { return };
    if let Some(worker) = tracked.workers.get(&uid) {
        worker.updates.send_replace(Arc::new(pod));
        return;
    }
    let Some(mode) = RunMode::from_annotations(pod.metadata.annotations.as_ref()) else {
        tracked.pending.remove(&uid);
        return;
    };
    let bound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty());
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded") | Some("Failed")) {
        tracked.pending.remove(&uid);
        return;
    }
    let node: Arc<LocalNode> = match bound {
        Some(name) => match nodes.get(name) {
            Some(node) => node,
            // Bound to a Node this kubelet does not serve: another kubelet's Pod.
            None => return,
        },
        None if pod.metadata.deletion_timestamp.is_some() => return,
        None => match nodes.schedule(&pod) {
            Ok(node) => node,
            Err(message) => {
                let repeated = tracked
                    .pending
                    .get(&uid)
                    .is_some_and(|(_, last)| *last == message);
                if !repeated {
                    tracing::info!(pod = %pod.name_any(), %message, "local Pod cannot be scheduled yet");
                    kubelet.record(
                        &pod,
                        EventType::Warning,
                        "FailedScheduling",
                        "Scheduling",
                        message.clone(),
                    );
                }
                tracked.pending.insert(uid, (pod, message));
                return;
            }
        },
    };
    tracked.pending.remove(&uid);
    let (updates, receiver) = watch::channel(Arc::new(pod));
    let task = tokio::spawn(pod_worker::run_pod(
        kubelet.clone(),
        node.clone(),
        mode,
        receiver,
    ));
    tracked.workers.insert(
        uid,
        Worker {
            updates,
            node: node.name().to_string(),
            _task: task,
        },
    );
}
