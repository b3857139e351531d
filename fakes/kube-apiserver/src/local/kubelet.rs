//! The local kubelet: runs Pods that opt in with the annotation
//! `local.gclb-operator.dev/run: "echo"` (or `"default-backend"`) as built-in servers on a
//! loopback Pod IP, and reports their status the way a kubelet does.
//!
//! For each opted-in Pod (not terminal, not bound to another node) it
//! 1. binds the Pod to the local node (`pods/binding`, falling back to a merge patch of
//!    `spec.nodeName`, leaving it unset if the server refuses both);
//! 2. picks a random bindable Pod IP ([`PodIpAllocator`]) and starts an [`EchoServer`] on every
//!    TCP container port (HTTPS for ports named `https*` or listed in
//!    `local.gclb-operator.dev/tls-ports`);
//! 3. runs each container's readinessProbe ([`probe`]) and writes `status` with a strategic
//!    merge patch holding only the kubelet's own conditions ([`pod_status`]), so readiness-gate
//!    conditions written by others survive; `Ready` follows containers AND gates;
//! 4. applies annotation changes (test controls) live, and records Events like the kubelet
//!    (`Scheduled`, `Started`, `Unhealthy` when a readiness probe makes a container not ready,
//!    `Killing` on deletion);
//! 5. on deletion (deletionTimestamp set) keeps serving, runs the preStop hook as a delay
//!    (only `sleep` is emulated: `lifecycle.preStop.sleep.seconds`, or an exec command
//!    containing `sleep N`), then stops the servers when `terminationGracePeriodSeconds` (or the
//!    delete's `gracePeriodSeconds`) has passed since the deletion was seen, or right after the
//!    preStop hook with `local.gclb-operator.dev/on-sigterm: exit`; finally deletes the Pod with
//!    `gracePeriodSeconds: 0` (uid precondition), as the kubelet does once containers are gone.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{Instant, MissedTickBehavior};

use super::annotations::{self, PodControls, RunMode};
use super::echo::{self, EchoServer, PodIdentity};
use super::pod_ip::PodIpAllocator;
use super::pod_status::{self, LocalPodState};
use super::probe::{self, ProbeSpec, ProbeState};

/// The node name local Pods are bound to.
pub const NODE_NAME: &str = "local-node-1";
/// The `status.hostIP` of local Pods.
pub const HOST_IP: &str = "127.0.0.1";
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

/// The node the local kubelet pretends to be.
#[derive(Clone, Debug)]
pub struct Node {
    /// `spec.nodeName` given to local Pods, e.g. `local-node-1`.
    pub name: String,
    /// `status.hostIP` of local Pods.
    pub host_ip: String,
}

struct Kubelet {
    client: Client,
    ips: PodIpAllocator,
    node: Node,
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
    _task: JoinHandle<()>,
}

/// Watches all Pods and runs the opted-in ones until the watch stream ends (never: errors are
/// retried with backoff).
pub async fn run(client: Client, ips: PodIpAllocator, node: Node) {
    let (events, queue) = mpsc::unbounded_channel();
    let reporter = Reporter {
        controller: "kubelet".to_string(),
        instance: Some(node.name.clone()),
    };
    tokio::spawn(publish_events(
        Recorder::new(client.clone(), reporter),
        queue,
    ));
    let kubelet = Arc::new(Kubelet {
        client: client.clone(),
        ips,
        node,
        events,
    });
    let pods: Api<Pod> = Api::all(client);
    // Dropping a Worker closes its channel: the Pod's task stops its servers and exits.
    let mut workers: HashMap<String, Worker> = HashMap::new();
    let mut relisted: HashSet<String> = HashSet::new();
    let mut events = watcher(pods, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Init) => relisted.clear(),
            Ok(watcher::Event::InitApply(pod)) => {
                relisted.insert(pod.uid().unwrap_or_default());
                observe(&kubelet, &mut workers, pod);
            }
            Ok(watcher::Event::InitDone) => workers.retain(|uid, _| relisted.contains(uid)),
            Ok(watcher::Event::Apply(pod)) => observe(&kubelet, &mut workers, pod),
            Ok(watcher::Event::Delete(pod)) => {
                workers.remove(&pod.uid().unwrap_or_default());
            }
            Err(error) => tracing::debug!(%error, "kubelet Pod watch interrupted"),
        }
    }
}

fn observe(kubelet: &Arc<Kubelet>, workers: &mut HashMap<String, Worker>, pod: Pod) {
    let Some(uid) = pod.uid() else { return };
    if let Some(worker) = workers.get(&uid) {
        worker.updates.send_replace(Arc::new(pod));
        return;
    }
    let Some(mode) = RunMode::from_annotations(pod.metadata.annotations.as_ref()) else {
        return;
    };
    let spec = pod.spec.as_ref();
    let node = spec
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default();
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if (!node.is_empty() && node != kubelet.node.name)
        || matches!(phase, Some("Succeeded") | Some("Failed"))
    {
        return;
    }
    let (updates, receiver) = watch::channel(Arc::new(pod));
    let task = tokio::spawn(run_pod(kubelet.clone(), mode, receiver));
    workers.insert(
        uid,
        Worker {
            updates,
            _task: task,
        },
    );
}

/// What runs for one Pod.
struct Running {
    ip: std::net::Ipv4Addr,
    servers: Vec<EchoServer>,
    /// Per container (spec order): the resolved readiness probe, `Err` when it cannot run.
    probes: Vec<Option<Result<ProbeSpec, String>>>,
}

async fn run_pod(kubelet: Arc<Kubelet>, mode: RunMode, mut updates: watch::Receiver<Arc<Pod>>) {
    let mut pod = updates.borrow_and_update().clone();
    let key = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
    let api: Api<Pod> =
        Api::namespaced(kubelet.client.clone(), &pod.namespace().unwrap_or_default());
    bind_to_node(&kubelet, &api, &pod).await;

    let (controls, controls_rx) = watch::channel(PodControls::from_annotations(
        pod.metadata.annotations.as_ref(),
    ));
    let running = loop {
        match start(&kubelet, mode, &pod, controls_rx.clone()) {
            Ok(running) => break running,
            Err(error) => {
                tracing::warn!(pod = %key, %error, "cannot start local Pod; retrying");
                tokio::select! {
                    changed = updates.changed() => if changed.is_err() { return },
                    _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                }
                pod = updates.borrow_and_update().clone();
            }
        }
    };
    let Running {
        ip,
        mut servers,
        probes,
    } = running;
    tracing::info!(pod = %key, pod_ip = %ip, ports = ?servers.iter().map(|s| s.addr().port()).collect::<Vec<_>>(), "local Pod running");
    kubelet.record(
        &pod,
        EventType::Normal,
        "Scheduled",
        "Binding",
        format!("Successfully assigned {key} to {}", kubelet.node.name),
    );
    for container in containers(&pod) {
        kubelet.record(
            &pod,
            EventType::Normal,
            "Started",
            "Started",
            format!("Started container {}", container.name),
        );
    }

    let (results_tx, mut results) = mpsc::channel::<(usize, Result<(), String>)>(64);
    let mut probers = JoinSet::new();
    for (index, spec) in probes.iter().enumerate() {
        match spec {
            Some(Ok(spec)) => {
                probers.spawn(run_prober(
                    key.clone(),
                    index,
                    spec.clone(),
                    results_tx.clone(),
                ));
            }
            Some(Err(error)) => {
                tracing::warn!(pod = %key, %error, "readiness probe cannot run; container stays not ready")
            }
            None => {}
        }
    }
    let mut states = vec![ProbeState::default(); probes.len()];
    let state = |states: &[ProbeState], pod: &Pod, start_time: &Time| LocalPodState {
        pod_ip: ip.to_string(),
        host_ip: kubelet.node.host_ip.clone(),
        start_time: start_time.clone(),
        containers_ready: containers(pod)
            .iter()
            .zip(&probes)
            .zip(states)
            .map(|((c, probe), s)| (c.name.clone(), probe.is_none() || s.ready()))
            .collect(),
    };

    let start_time = Time(k8s_openapi::jiff::Timestamp::now());
    let mut last_sent: Option<Value> = None;
    let mut pending = true;
    let mut stop_at: Option<Instant> = None;
    let mut stopped = false;
    let mut deleted = false;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut resync = tokio::time::interval(Duration::from_secs(30));
    resync.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        if pending && !stopped {
            let desired = state(&states, &pod, &start_time);
            pending = !write_status(&api, &key, &pod, &desired, &mut last_sent).await;
        }
        if stopped && !deleted {
            deleted = finish_deletion(&api, &key, &pod).await;
        }
        let wake = stop_at
            .filter(|_| !stopped)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            changed = updates.changed() => {
                if changed.is_err() {
                    break;
                }
                pod = updates.borrow_and_update().clone();
                let next = PodControls::from_annotations(pod.metadata.annotations.as_ref());
                controls.send_if_modified(|c| if *c == next { false } else { *c = next; true });
                if pod.metadata.deletion_timestamp.is_some() && stop_at.is_none() {
                    stop_at = Some(termination_deadline(&pod, controls.borrow().exit_on_sigterm));
                    tracing::info!(pod = %key, stop_in = ?stop_at.map(|t| t.saturating_duration_since(Instant::now())), "local Pod terminating");
                    for container in containers(&pod) {
                        kubelet.record(&pod, EventType::Normal, "Killing", "Killing", format!("Stopping container {}", container.name));
                    }
                }
                pending = true;
            }
            Some((index, outcome)) = results.recv() => {
                let Some(Some(Ok(spec))) = probes.get(index) else { continue };
                if states[index].record(outcome.is_ok(), spec) {
                    tracing::info!(pod = %key, container = index, ready = states[index].ready(), "container readiness changed");
                    pending = true;
                    // The kubelet reports each failure; one Event per transition keeps writes low.
                    if let Err(error) = outcome {
                        kubelet.record(&pod, EventType::Warning, "Unhealthy", "Probe", format!("Readiness probe failed: {error}"));
                    }
                }
            }
            _ = tokio::time::sleep_until(wake), if stop_at.is_some() && !stopped => {
                probers.abort_all();
                for server in servers.drain(..) {
                    server.stop().await;
                }
                stopped = true;
                tracing::info!(pod = %key, "local Pod stopped");
            }
            _ = tick.tick() => {}
            _ = resync.tick() => {
                last_sent = None;
                pending = true;
            }
        }
    }
    probers.abort_all();
    for server in servers.drain(..) {
        server.stop().await;
    }
    kubelet.ips.release(ip);
    tracing::info!(pod = %key, "local Pod gone");
}

fn containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
}

fn start(
    kubelet: &Kubelet,
    mode: RunMode,
    pod: &Pod,
    controls: watch::Receiver<PodControls>,
) -> Result<Running, KubeletError> {
    let key = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
    let tls_ports = annotations::tls_ports(pod.metadata.annotations.as_ref());
    // A Pod that already has an IP (the server restarted from --state-file) keeps it if it can,
    // so load balancer endpoints stay valid across restarts.
    let mut previous = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.as_deref())
        .and_then(|ip| ip.parse().ok());
    let mut attempts = 0;
    loop {
        attempts += 1;
        let reused = previous.take().filter(|ip| kubelet.ips.claim(*ip));
        let ip = match reused {
            Some(ip) => ip,
            None => kubelet
                .ips
                .allocate()
                .map_err(|source| KubeletError::PodIp {
                    pod: key.clone(),
                    source,
                })?,
        };
        let identity = Arc::new(PodIdentity {
            name: pod.name_any(),
            namespace: pod.namespace().unwrap_or_default(),
            pod_ip: ip,
            mode,
        });
        let mut tls = None;
        let mut servers: Vec<EchoServer> = Vec::new();
        let mut failure = None;
        let mut seen = HashSet::new();
        for port in containers(pod)
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
        {
            let protocol = port.protocol.as_deref().unwrap_or("TCP");
            let Ok(number) = u16::try_from(port.container_port) else {
                continue;
            };
            if protocol != "TCP" || !seen.insert(number) {
                continue;
            }
            let name = port.name.clone().unwrap_or_default();
            let https = name.starts_with("https")
                || tls_ports.contains(&name)
                || tls_ports.contains(&number.to_string());
            let config = if https {
                match &tls {
                    Some(c) => Some(Arc::clone(c)),
                    None => {
                        let c = echo::tls_config(&identity)?;
                        tls = Some(c.clone());
                        Some(c)
                    }
                }
            } else {
                None
            };
            match EchoServer::start(identity.clone(), number, config, controls.clone()) {
                Ok(server) => servers.push(server),
                Err(error) => {
                    failure = Some(error);
                    break;
                }
            }
        }
        match failure {
            None => {
                let probes = containers(pod)
                    .iter()
                    .map(|c| {
                        c.readiness_probe
                            .as_ref()
                            .map(|p| ProbeSpec::new(p, c, ip).map_err(|e| e.to_string()))
                    })
                    .collect();
                return Ok(Running {
                    ip,
                    servers,
                    probes,
                });
            }
            // Another process may hold this address and port: try another address.
            Some(error) => {
                drop(servers);
                kubelet.ips.release(ip);
                if attempts >= 5 {
                    return Err(error.into());
                }
            }
        }
    }
}

async fn run_prober(
    pod: String,
    index: usize,
    spec: ProbeSpec,
    results: mpsc::Sender<(usize, Result<(), String>)>,
) {
    if let probe::ProbeAction::Unsupported(kind) = spec.action {
        tracing::info!(%pod, container = index, kind, "readiness probe kind cannot run locally; counted as success");
    }
    tokio::time::sleep(spec.initial_delay).await;
    let mut period = tokio::time::interval(spec.period);
    period.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        period.tick().await;
        let outcome = probe::run(&spec).await;
        if let Err(error) = &outcome {
            tracing::debug!(%pod, container = index, %error, "readiness probe failed");
        }
        if results
            .send((index, outcome.map_err(|e| e.to_string())))
            .await
            .is_err()
        {
            return;
        }
    }
}

/// Writes the kubelet-owned status when it differs from the Pod's; true when nothing is left to
/// write. An identical patch is not sent twice in a row (a server that drops a field must not
/// cause a write storm); the 30 s resync clears that guard.
async fn write_status(
    api: &Api<Pod>,
    key: &str,
    pod: &Pod,
    desired: &LocalPodState,
    last_sent: &mut Option<Value>,
) -> bool {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let Some(patch) = pod_status::status_patch(pod, desired, &now) else {
        return true;
    };
    let fingerprint = without_times(&patch);
    if last_sent.as_ref() == Some(&fingerprint) {
        return true;
    }
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    match api
        .patch_status(&pod.name_any(), &params, &Patch::Strategic(patch))
        .await
    {
        Ok(_) => {
            *last_sent = Some(fingerprint);
            true
        }
        Err(kube::Error::Api(status)) if status.code == 404 => true,
        Err(error) => {
            tracing::warn!(pod = %key, %error, "cannot write Pod status; retrying");
            false
        }
    }
}

fn without_times(patch: &Value) -> Value {
    let mut copy = patch.clone();
    if let Some(conditions) = copy
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        for condition in conditions {
            if let Some(map) = condition.as_object_mut() {
                map.remove("lastTransitionTime");
            }
        }
    }
    copy
}

async fn bind_to_node(kubelet: &Kubelet, api: &Api<Pod>, pod: &Pod) {
    if pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
    {
        return;
    }
    let name = pod.name_any();
    let binding = json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": pod.namespace()},
        "target": {"apiVersion": "v1", "kind": "Node", "name": kubelet.node.name},
    });
    let bound = api
        .create_subresource::<_, Value>("binding", &name, &PostParams::default(), &binding)
        .await;
    if bound.is_ok() {
        return;
    }
    let patch = Patch::Merge(json!({"spec": {"nodeName": kubelet.node.name}}));
    if let Err(error) = api.patch(&name, &PatchParams::default(), &patch).await {
        tracing::debug!(pod = %name, %error, "cannot set spec.nodeName; the Pod stays unbound");
    }
}

/// When to stop serving after the deletion was seen: at the end of the grace period, or right
/// after the preStop hook for applications that exit on SIGTERM.
fn termination_deadline(pod: &Pod, exit_on_sigterm: bool) -> Instant {
    let grace = Duration::from_secs(grace_period_seconds(pod));
    let now = Instant::now();
    if exit_on_sigterm {
        now + pre_stop_delay(pod).min(grace)
    } else {
        now + grace
    }
}

/// `metadata.deletionGracePeriodSeconds` (what the delete asked for), else
/// `spec.terminationGracePeriodSeconds`, else the API default of 30.
pub fn grace_period_seconds(pod: &Pod) -> u64 {
    pod.metadata
        .deletion_grace_period_seconds
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
        })
        .unwrap_or(30)
        .max(0) as u64
}

/// The longest preStop delay among the containers: `lifecycle.preStop.sleep.seconds`, or the
/// `N` of `sleep N` in a preStop exec command (the only command emulated).
pub fn pre_stop_delay(pod: &Pod) -> Duration {
    let pattern = regex::Regex::new(r"(?:^|[\s;&|])sleep\s+(\d+(?:\.\d+)?)").ok();
    containers(pod)
        .iter()
        .filter_map(|c| c.lifecycle.as_ref()?.pre_stop.as_ref())
        .filter_map(|hook| {
            if let Some(sleep) = &hook.sleep {
                return Some(Duration::from_secs(sleep.seconds.max(0) as u64));
            }
            let command = hook.exec.as_ref()?.command.as_ref()?.join(" ");
            let seconds: f64 = pattern
                .as_ref()?
                .captures(&command)?
                .get(1)?
                .as_str()
                .parse()
                .ok()?;
            Some(Duration::from_secs_f64(seconds))
        })
        .max()
        .unwrap_or_default()
}

/// Deletes the Pod with gracePeriodSeconds 0 once its servers are stopped; true when done.
async fn finish_deletion(api: &Api<Pod>, key: &str, pod: &Pod) -> bool {
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: pod.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&pod.name_any(), &params).await {
        Ok(_) => true,
        Err(kube::Error::Api(status)) if status.code == 404 => true,
        Err(error) => {
            tracing::warn!(pod = %key, %error, "cannot delete terminated Pod; retrying");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(value: Value) -> Pod {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn pre_stop_sleep_forms_are_recognised() {
        let p = pod(json!({"metadata": {"name": "a"}, "spec": {"containers": [
            {"name": "a", "lifecycle": {"preStop": {"exec": {"command": ["/bin/sh", "-c", "echo bye; sleep 5"]}}}},
            {"name": "b", "lifecycle": {"preStop": {"sleep": {"seconds": 7}}}},
            {"name": "c", "lifecycle": {"preStop": {"exec": {"command": ["nginx", "-s", "quit"]}}}}
        ]}}));
        assert_eq!(pre_stop_delay(&p), Duration::from_secs(7));
        let q = pod(json!({"metadata": {"name": "a"}, "spec": {"containers": [
            {"name": "a", "lifecycle": {"preStop": {"exec": {"command": ["sleep", "2.5"]}}}}
        ]}}));
        assert_eq!(pre_stop_delay(&q), Duration::from_millis(2500));
    }

    #[test]
    fn grace_period_prefers_the_delete_request() {
        let spec_only = pod(
            json!({"metadata": {"name": "a"}, "spec": {"terminationGracePeriodSeconds": 12, "containers": []}}),
        );
        assert_eq!(grace_period_seconds(&spec_only), 12);
        let asked = pod(
            json!({"metadata": {"name": "a", "deletionGracePeriodSeconds": 3}, "spec": {"terminationGracePeriodSeconds": 12, "containers": []}}),
        );
        assert_eq!(grace_period_seconds(&asked), 3);
        let default = pod(json!({"metadata": {"name": "a"}, "spec": {"containers": []}}));
        assert_eq!(grace_period_seconds(&default), 30);
    }
}
