//! The local kubelet and scheduler stand-in: runs every Pod (unless it opts out with the
//! annotation `local.gclb-operator.dev/run: none`) as built-in servers on a loopback Pod IP, on
//! the local Nodes ([`super::node_agent`]), and reports its status the way a kubelet does. What
//! each container serves follows its image ([`super::images`]); `local.gclb-operator.dev/run:
//! echo` (or `default-backend`) forces the echo server (or GKE's default backend).
//!
//! For each Pod (not opted out, not terminal, not bound to a Node this kubelet does not serve) it
//! 1. schedules it when unbound ([`NodeSet::schedule`]: `spec.nodeSelector`, round-robin; a Pod
//!    no Node fits stays Pending with a `FailedScheduling` Event and is retried when the Nodes
//!    change) and binds it (`pods/binding`, falling back to a merge patch of `spec.nodeName`,
//!    leaving it unset if the server refuses both);
//! 2. picks a random bindable Pod IP from its Node's `spec.podCIDR` and starts an
//!    [`super::echo::EchoServer`] on every TCP container port (the image's own port when a container
//!    declares none) (HTTPS for ports named `https*` or listed
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

mod context;
mod pod_worker;
pub mod termination;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::events::{EventType, Recorder, Reporter};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, ResourceExt};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::annotations::RunMode;
use super::node_set::{LocalNode, NodeSet};
use super::user_command::ImageCommands;

use context::{publish_events, Kubelet};
pub use context::{KubeletError, FIELD_MANAGER};
pub use termination::{grace_period_seconds, pre_stop_delay};

struct Worker {
    updates: watch::Sender<Arc<Pod>>,
    /// The Node the Pod runs on.
    node: String,
    /// The Node's zone.
    zone: String,
    /// The uid of the Pod's controller (ownerReference with `controller: true`), if any.
    owner: Option<String>,
    _task: JoinHandle<()>,
}

/// The uid of a Pod's controlling owner.
fn controller_uid(pod: &Pod) -> Option<String> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.clone())
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

/// Watches all Pods and runs those not opted out on the served Nodes (containers whose image
/// is in `commands` run that program) until the watch stream ends (never: errors are retried
/// with backoff). Each status write lags its cause by `status_delay`.
pub async fn run(
    client: Client,
    nodes: Arc<NodeSet>,
    status_delay: std::time::Duration,
    commands: Arc<ImageCommands>,
) {
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
        commands,
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
        None => match nodes.schedule_spread(&pod, |candidate| {
            // The default topology spread: a workload's replicas go to the zone, then the
            // Node, that runs fewest of them.
            let Some(owner) = controller_uid(&pod) else {
                return 0;
            };
            let siblings = tracked
                .workers
                .values()
                .filter(|w| w.owner.as_deref() == Some(owner.as_str()));
            siblings
                .map(|w| {
                    1000 * usize::from(w.zone == candidate.config.zone)
                        + usize::from(w.node == candidate.name())
                })
                .sum()
        }) {
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
    let owner = controller_uid(&pod);
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
            zone: node.config.zone.clone(),
            owner,
            _task: task,
        },
    );
}
