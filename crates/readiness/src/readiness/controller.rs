//! The readiness gate controller: watches gated Pods, polls NEG health while any waits, and
//! patches the `cloud.google.com/load-balancer-neg-ready` condition.
//!
//! Polling follows inventory section 7 (ingress-gce `pkg/neg/readiness/poller.go`): one
//! `listNetworkEndpoints` call per NEG per poll, only for NEGs that waiting Pods belong to,
//! every second while Pods wait, backing off after API errors (up to 100 s, GKE's retry after
//! an error). With no Pod waiting the controller makes no Compute call at all.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use backon::{BackoffBuilder, ExponentialBuilder};
use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Resource, ResourceExt};
use tokio::sync::Notify;

use super::condition::status_patch;
use super::neg::{EndpointHealth, NegRef};
use super::rules::{
    decide, gate_condition, is_current, needs_backend_services, needs_processing, pod_ips,
    NegCondition, NegObservation, Reason,
};
use super::{Context, ReadinessError};
use crate::translate::pod::PodRecord;

const LIST_ENDPOINTS: &str = "compute.networkEndpointGroups.listNetworkEndpoints";
const LIST_BACKEND_SERVICES: &str = "compute.backendServices.list";

/// Runs the controller until the future is dropped: a Pod watch (all namespaces) and the poll
/// loop. Waits for the Pod store and the [`super::NegLookup`] to sync before deciding anything,
/// so that an empty lookup is never mistaken for rule 3.
pub async fn run(ctx: Context) {
    let (store, writer) = reflector::store();
    let wake = Arc::new(Notify::new());
    let watch_wake = wake.clone();
    let api = Api::<PodRecord>::all(ctx.client.clone());
    let watch = reflector::reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .touched_objects()
        .for_each(move |pod| {
            match pod {
                Ok(pod) if needs_processing(&pod) => watch_wake.notify_one(),
                Ok(_) => {}
                Err(err) => tracing::warn!(error = %err, "Pod watch failed; retrying"),
            }
            futures::future::ready(())
        });
    tokio::select! {
        () = watch => tracing::warn!("Pod watch ended"),
        () = poll_loop(&ctx, store, Some(wake)) => {}
    }
}

/// Like [`run`], over a Pod store someone else keeps (e.g. the Ingress controller's), so the
/// cluster's Pods are watched once. Without watch notifications a new gated Pod is noticed at
/// the next `poll_interval` tick (a store read, no API call).
pub async fn run_with_pods(ctx: Context, pods: Store<PodRecord>) {
    poll_loop(&ctx, pods, None).await;
}

/// What the loop remembers between polls.
#[derive(Default)]
pub(crate) struct Memory {
    /// Condition last written per Pod UID (the store may lag behind our own patch).
    written: HashMap<String, NegCondition>,
    /// Pods that already got the "waiting too long" Event.
    slow_reported: HashSet<String>,
}

async fn poll_loop(ctx: &Context, store: Store<PodRecord>, wake: Option<Arc<Notify>>) {
    if store.wait_until_ready().await.is_err() {
        return;
    }
    ctx.lookup.wait_synced().await;
    tracing::info!(
        timeout_seconds = ctx.config.timeout.as_secs(),
        bypass = ctx.config.bypass,
        "readiness gate controller started"
    );
    let mut memory = Memory::default();
    // Delays after failed polls: jittered exponential from 2x the poll interval up to the cap.
    let error_backoff = || {
        ExponentialBuilder::default()
            .with_min_delay(ctx.config.poll_interval * 2)
            .with_max_delay(ctx.config.max_error_backoff)
            .with_jitter()
            .without_max_times()
            .build()
    };
    let mut error_delays = error_backoff();
    loop {
        let waiting: Vec<Arc<PodRecord>> = store
            .state()
            .into_iter()
            .filter(|p| needs_processing(p))
            .collect();
        let uids: HashSet<String> = waiting.iter().filter_map(|p| p.uid()).collect();
        memory.written.retain(|uid, _| uids.contains(uid));
        memory.slow_reported.retain(|uid| uids.contains(uid));
        if let Some(m) = &ctx.metrics {
            m.waiting_pods
                .set(i64::try_from(waiting.len()).unwrap_or(i64::MAX));
        }
        if waiting.is_empty() {
            error_delays = error_backoff();
            match &wake {
                Some(wake) => wake.notified().await,
                None => tokio::time::sleep(ctx.config.poll_interval).await,
            }
            continue;
        }
        let errors = poll_once(ctx, &waiting, &mut memory).await;
        let delay = if errors == 0 {
            error_delays = error_backoff();
            ctx.config.poll_interval
        } else {
            let next = error_delays.next().unwrap_or(ctx.config.max_error_backoff);
            tracing::warn!(
                errors,
                retry_in_ms = next.as_millis() as u64,
                "NEG health poll failed"
            );
            next
        };
        tokio::time::sleep(delay).await;
    }
}

/// One poll over all waiting Pods; returns the number of failed API calls.
pub(crate) async fn poll_once(
    ctx: &Context,
    waiting: &[Arc<PodRecord>],
    memory: &mut Memory,
) -> usize {
    let per_pod: Vec<(Arc<PodRecord>, Vec<NegRef>)> = waiting
        .iter()
        .map(|pod| {
            let negs = if ctx.config.bypass {
                Vec::new()
            } else {
                let ns = pod.namespace().unwrap_or_default();
                ctx.lookup.negs_for_pod(&ns, pod.labels())
            };
            (pod.clone(), negs)
        })
        .collect();
    let all: BTreeSet<NegRef> = per_pod
        .iter()
        .flat_map(|(_, n)| n.iter().cloned())
        .collect();
    let mut errors = 0;
    let polled: Vec<(NegRef, Result<Option<Vec<EndpointHealth>>, _>)> = futures::stream::iter(all)
        .map(|neg| async move {
            let result = ctx.health.list_network_endpoints(&neg).await;
            (neg, result)
        })
        .buffer_unordered(ctx.config.max_concurrent_polls.max(1))
        .collect()
        .await;
    let mut observed: BTreeMap<NegRef, NegObservation> = BTreeMap::new();
    for (neg, result) in polled {
        if let Some(m) = &ctx.metrics {
            m.call(LIST_ENDPOINTS, result.is_ok());
        }
        let endpoints = match result {
            Ok(endpoints) => endpoints,
            Err(err) => {
                errors += 1;
                tracing::warn!(neg = %neg.name, zone = %neg.zone, error = %err, "listNetworkEndpoints failed");
                None
            }
        };
        observed.insert(
            neg,
            NegObservation {
                endpoints,
                health_checked_by: None,
            },
        );
    }
    // Backend services are read only when some Pod's endpoint shows no health at all.
    let unknown: Vec<NegRef> = per_pod
        .iter()
        .flat_map(|(pod, negs)| {
            let ips = pod_ips(pod);
            let observed = &observed;
            negs.iter()
                .filter(move |n| {
                    observed
                        .get(*n)
                        .is_some_and(|o| needs_backend_services(&ips, o))
                })
                .cloned()
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if !unknown.is_empty() {
        let result = ctx.health.backend_services_using(&unknown).await;
        if let Some(m) = &ctx.metrics {
            m.call(LIST_BACKEND_SERVICES, result.is_ok());
        }
        match result {
            Ok(users) => {
                for (neg, services) in users {
                    if let Some(o) = observed.get_mut(&neg) {
                        o.health_checked_by = Some(services);
                    }
                }
            }
            Err(err) => {
                errors += 1;
                tracing::warn!(error = %err, "backendServices.list failed");
            }
        }
    }
    let now = Timestamp::now();
    let decisions: Vec<(Arc<PodRecord>, NegCondition, Timestamp)> = per_pod
        .into_iter()
        .map(|(pod, negs)| {
            let created = pod
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or(now, |t| t.0);
            let decided = if ctx.config.bypass {
                bypass_condition()
            } else {
                let views: BTreeMap<NegRef, NegObservation> = negs
                    .into_iter()
                    .map(|n| {
                        let o = observed.get(&n).cloned().unwrap_or_default();
                        (n, o)
                    })
                    .collect();
                decide(&pod_ips(&pod), created, &views, now, ctx.config.timeout)
            };
            (pod, decided, created)
        })
        .collect();
    // Pods are patched concurrently: a rollout of many Pods must not wait on one round trip each.
    let memory_view: &Memory = memory;
    let outcomes: Vec<Applied> = futures::stream::iter(decisions)
        .map(|(pod, decided, created)| async move {
            apply(ctx, &pod, decided, created, now, memory_view).await
        })
        .buffer_unordered(ctx.config.max_concurrent_polls.max(1))
        .collect()
        .await;
    for outcome in outcomes {
        if let Some(written) = outcome.written {
            memory.written.insert(outcome.uid.clone(), written);
        }
        if outcome.slow_reported {
            memory.slow_reported.insert(outcome.uid);
        }
    }
    errors
}

fn bypass_condition() -> NegCondition {
    NegCondition {
        status: true,
        reason: Reason::Ready,
        message: format!(
            "Readiness gate controller is in bypass mode (--readiness-gates=false): \
             load balancer health is not checked. Marking condition \"{}\" to True.",
            super::NEG_READINESS_GATE
        ),
    }
}

/// What [`apply`] did, for the loop's [`Memory`].
struct Applied {
    uid: String,
    /// The condition written, when a patch succeeded.
    written: Option<NegCondition>,
    /// The "waiting too long" Event was recorded.
    slow_reported: bool,
}

/// Writes the condition when it changed, then Events and metrics. Errors are logged.
async fn apply(
    ctx: &Context,
    pod: &PodRecord,
    decided: NegCondition,
    created: Timestamp,
    now: Timestamp,
    memory: &Memory,
) -> Applied {
    let uid = pod.uid().unwrap_or_default();
    let mut applied = Applied {
        uid: uid.clone(),
        written: None,
        slow_reported: false,
    };
    let name = pod.name_any();
    let namespace = pod.namespace().unwrap_or_default();
    let existing = gate_condition(pod);
    let waited = now.duration_since(created);
    let waited_secs = waited.as_secs_f64().max(0.0);
    let unchanged = is_current(existing, &decided) || memory.written.get(&uid) == Some(&decided);
    if !unchanged {
        let patch = status_patch(existing, &decided, now);
        let patched = Api::<PodRecord>::namespaced(ctx.client.clone(), &namespace)
            .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await;
        if let Err(source) = patched {
            let err = ReadinessError::PatchStatus {
                namespace,
                pod: name,
                source,
            };
            tracing::warn!(error = %err, "cannot update the readiness gate");
            return applied;
        }
        tracing::info!(
            pod = %name, namespace = %namespace, status = decided.status,
            reason = %decided.reason, waited_seconds = waited_secs,
            "readiness gate condition updated"
        );
        applied.written = Some(decided.clone());
        if decided.status {
            if let Some(m) = &ctx.metrics {
                m.gate_seconds
                    .get_or_create(&super::metrics::ReasonLabels {
                        reason: decided.reason.as_str().to_owned(),
                    })
                    .observe(waited_secs);
            }
            let type_ = if decided.reason == Reason::Timeout {
                EventType::Warning
            } else {
                EventType::Normal
            };
            publish(ctx, pod, type_, decided.reason, &decided.message).await;
        }
    }
    let slow = !decided.status
        && waited
            >= k8s_openapi::jiff::SignedDuration::try_from(ctx.config.slow_event_after)
                .unwrap_or(k8s_openapi::jiff::SignedDuration::MAX);
    if slow && !memory.slow_reported.contains(&uid) {
        applied.slow_reported = true;
        let message = format!(
            "{} for {}s; the load balancer health check has not reported this Pod HEALTHY. \
             Check the health check path and port (BackendConfig healthCheck or the readiness \
             probe) and that the Pod answers it; the gate opens anyway after {}s.",
            decided.message,
            waited.as_secs(),
            ctx.config.timeout.as_secs()
        );
        publish(ctx, pod, EventType::Warning, Reason::NotReady, &message).await;
    }
    applied
}

/// Posts an Event about `pod`. Each goes through a Recorder of its own: kube's Recorder keeps
/// every Event it posted for 6 minutes to fold repeats into a series, and these never repeat
/// (one decision per Pod, one slow-Pod Warning per Pod: [`Memory`]), so a shared one would hold
/// an Event per Pod of a whole rollout.
async fn publish(ctx: &Context, pod: &PodRecord, type_: EventType, reason: Reason, note: &str) {
    let event = Event {
        type_,
        reason: reason.as_str().to_owned(),
        note: Some(note.chars().take(1024).collect()),
        action: "ReadinessGate".to_owned(),
        secondary: None,
    };
    let recorder = Recorder::new(ctx.client.clone(), ctx.reporter.clone());
    if let Err(err) = recorder.publish(&event, &pod.object_ref(&())).await {
        tracing::warn!(pod = %pod.name_any(), error = %err, "cannot record Event");
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
