//! One Pod's life on its Node: bind, pick a Pod IP from the Node's Pod CIDR, serve every TCP
//! container port, run readiness probes, write the kubelet's status, and stop on deletion.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior};

use super::super::annotations::{self, PodControls, RunMode};
use super::super::echo::{self, EchoServer, PodIdentity};
use super::super::images::{self, App};
use super::super::node_set::LocalNode;
use super::super::pod_status::{self, LocalPodState};
use super::super::probe::{self, ProbeSpec, ProbeState};
use super::super::user_command::{self, ImageCommands, UserProcess};
use super::context::{Kubelet, KubeletError, FIELD_MANAGER};
use super::termination::{finish_deletion, termination_deadline};

/// What runs for one Pod.
struct Running {
    ip: std::net::Ipv4Addr,
    servers: Vec<EchoServer>,
    /// Users' programs standing in for images; killed when dropped.
    programs: Vec<UserProcess>,
    /// Per container (spec order): the resolved readiness probe, `Err` when it cannot run.
    probes: Vec<Option<Result<ProbeSpec, String>>>,
}

/// Runs one Pod on `node` until its channel closes (the Pod is gone or no longer served).
pub(super) async fn run_pod(
    kubelet: Arc<Kubelet>,
    node: Arc<LocalNode>,
    mode: RunMode,
    mut updates: watch::Receiver<Arc<Pod>>,
) {
    let mut pod = updates.borrow_and_update().clone();
    let key = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
    let api: Api<Pod> =
        Api::namespaced(kubelet.client.clone(), &pod.namespace().unwrap_or_default());
    bind_to_node(&node, &api, &pod).await;

    let (controls, controls_rx) = watch::channel(PodControls::from_annotations(
        pod.metadata.annotations.as_ref(),
    ));
    let running = loop {
        match start(&node, mode, &pod, controls_rx.clone(), &kubelet.commands) {
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
        programs,
        probes,
    } = running;
    tracing::info!(pod = %key, pod_ip = %ip, ports = ?servers.iter().map(|s| s.addr().port()).collect::<Vec<_>>(), "local Pod running");
    kubelet.record(
        &pod,
        EventType::Normal,
        "Scheduled",
        "Binding",
        format!("Successfully assigned {key} to {}", node.name()),
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
        host_ip: node.config.internal_ip.to_string(),
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
            // A real kubelet's status write lags what it reacts to (issue 40): the status is
            // computed after the lag, from the Pod as it was when the write was triggered.
            if !kubelet.status_delay.is_zero() {
                tokio::time::sleep(kubelet.status_delay).await;
            }
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
    drop(programs);
    node.ips.release(ip);
    tracing::info!(pod = %key, "local Pod gone");
}

pub(super) fn containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
}

fn start(
    node: &LocalNode,
    mode: RunMode,
    pod: &Pod,
    controls: watch::Receiver<PodControls>,
    commands: &ImageCommands,
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
        let reused = previous.take().filter(|ip| node.ips.claim(*ip));
        let ip = match reused {
            Some(ip) => ip,
            None => node.ips.allocate().map_err(|source| KubeletError::PodIp {
                pod: key.clone(),
                source,
            })?,
        };
        let base = PodIdentity {
            name: pod.name_any(),
            namespace: pod.namespace().unwrap_or_default(),
            pod_ip: ip,
            app: App::Echo,
            container: String::new(),
            image: String::new(),
            node: node.name().to_string(),
            zone: node.config.zone.clone(),
            service_account: pod
                .spec
                .as_ref()
                .and_then(|s| s.service_account_name.clone())
                .unwrap_or_else(|| "default".to_string()),
        };
        let mut tls = None;
        let mut servers: Vec<EchoServer> = Vec::new();
        let mut failure = None;
        let mut seen = HashSet::new();
        let mut programs = Vec::new();
        'containers: for container in containers(pod) {
            let image = container.image.as_deref().unwrap_or_default();
            let app = match commands.command_for(image) {
                Some(command) if mode == RunMode::Image => {
                    let program = user_command::spawn(&command, container, &key, &pod.name_any())?;
                    let port = program.port;
                    programs.push(program);
                    App::Command { port }
                }
                _ => images::app_for(mode, container),
            };
            let identity = Arc::new(PodIdentity {
                app: app.clone(),
                container: container.name.clone(),
                image: container.image.clone().unwrap_or_default(),
                ..base.clone()
            });
            // A container that declares no port still listens where its image does.
            let declared: Vec<(String, i32, String)> = match &container.ports {
                Some(ports) if !ports.is_empty() => ports
                    .iter()
                    .map(|p| {
                        (
                            p.name.clone().unwrap_or_default(),
                            p.container_port,
                            p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                        )
                    })
                    .collect(),
                _ => app
                    .default_port(container)
                    .map(|p| (String::new(), i32::from(p), "TCP".to_string()))
                    .into_iter()
                    .collect(),
            };
            for (name, port, protocol) in declared {
                let Ok(number) = u16::try_from(port) else {
                    continue;
                };
                if protocol != "TCP" || !seen.insert(number) {
                    continue;
                }
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
                        break 'containers;
                    }
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
                    programs,
                    probes,
                });
            }
            // Another process may hold this address and port: try another address.
            Some(error) => {
                drop(servers);
                node.ips.release(ip);
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

async fn bind_to_node(node: &LocalNode, api: &Api<Pod>, pod: &Pod) {
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
        "target": {"apiVersion": "v1", "kind": "Node", "name": node.name()},
    });
    let bound = api
        .create_subresource::<_, Value>("binding", &name, &PostParams::default(), &binding)
        .await;
    if bound.is_ok() {
        return;
    }
    let patch = Patch::Merge(json!({"spec": {"nodeName": node.name()}}));
    if let Err(error) = api.patch(&name, &PatchParams::default(), &patch).await {
        tracing::debug!(pod = %name, %error, "cannot set spec.nodeName; the Pod stays unbound");
    }
}
