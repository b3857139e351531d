//! The local StatefulSet controller (kubernetes/kubernetes `pkg/controller/statefulset`,
//! `stateful_set_control.go` and `stateful_set_utils.go`): for each StatefulSet it keeps Pods
//! with stable names `<statefulset>-<ordinal>` for the ordinals `start .. start + replicas`
//! (`spec.ordinals.start`, default 0), owned by it (`controller: true`), labelled
//! `statefulset.kubernetes.io/pod-name`, `apps.kubernetes.io/pod-index` and
//! `controller-revision-hash` (the name of their ControllerRevision, [`controller_history`]),
//! with `hostname` = the Pod name and `subdomain` = `spec.serviceName`.
//!
//! - `podManagementPolicy: OrderedReady` (default): ordinal N is created only when every lower
//!   ordinal is Running and Ready (for `minReadySeconds`); scale-down deletes the highest
//!   ordinal first, one at a time, each only once the others are healthy.
//! - `Parallel`: every missing Pod is created, and every surplus one deleted, at once.
//! - `updateStrategy: RollingUpdate`: once the set is healthy, the Pod of the highest ordinal
//!   (at or above `partition`) not at the update revision is deleted and re-created from the
//!   new template, one at a time, waiting for each to be Ready; Pods below `partition` stay (and
//!   are re-created) at the current revision. `OnDelete`: a Pod changes only when deleted.
//! - Failed Pods are deleted and re-created.
//! - `status`: `replicas`, `readyReplicas`, `availableReplicas`, `currentReplicas`,
//!   `updatedReplicas`, `currentRevision` (becomes the update revision once every Pod is
//!   updated and Ready), `updateRevision`, `collisionCount`, `observedGeneration`, so `kubectl
//!   rollout status statefulset/x` returns when a real cluster's would.
//!
//! Simplified (documented in docs/kube-apiserver-local.md): `volumeClaimTemplates` become Pod
//! volumes naming the claims `<template>-<pod>`, but no PersistentVolumeClaims are created; no
//! `maxUnavailable` (one Pod at a time, as without the alpha feature); no adoption of orphans.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{self, Store};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use super::controller_history::{self as history, Revision, CONTROLLER_REVISION_HASH};
use super::deployment_util::{self as util, is_pod_available};
use super::expectations::{version_of, Expectations, Expected};
use super::informer;
use super::owner_refs::controller_ref;
use super::replica_set::owned_pods;

/// The field manager and Event reporter of this controller.
pub const CONTROLLER_NAME: &str = "statefulset-controller";
/// The label holding a StatefulSet Pod's name.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The label holding a StatefulSet Pod's ordinal (GA in Kubernetes 1.32).
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// Errors of one reconcile (retried after a second).
#[derive(Debug, thiserror::Error)]
pub enum StatefulSetError {
    /// A request to the API failed.
    #[error("StatefulSet {stateful_set}: {action}: {source}")]
    Api {
        /// `namespace/name`.
        stateful_set: String,
        /// What was being done.
        action: String,
        /// The client error.
        source: kube::Error,
    },
}

/// What the reconciles share.
pub struct Context {
    client: Client,
    pods: Store<Pod>,
    revisions: Store<ControllerRevision>,
    expectations: Expectations,
    recorder: Recorder,
}

/// Runs the controller until the future is dropped.
pub async fn run(client: Client) {
    let (pods, pod_events) = informer::reflect_all::<Pod>(&client);
    let (revisions, cr_events) = informer::reflect_all::<ControllerRevision>(&client);
    let (sets, sts_events) = informer::reflect_all::<StatefulSet>(&client);
    let recorder = informer::recorder(&client, CONTROLLER_NAME);
    let context = Arc::new(Context {
        client,
        pods,
        revisions,
        expectations: Expectations::default(),
        recorder,
    });
    Controller::for_stream(sts_events, sets)
        .owns_stream(pod_events)
        .owns_stream(cr_events)
        .run(reconcile, error_policy, context)
        .for_each(|_| async {})
        .await;
}

fn error_policy(_s: Arc<StatefulSet>, error: &StatefulSetError, _ctx: Arc<Context>) -> Action {
    tracing::info!(%error, "StatefulSet sync failed; retrying");
    Action::requeue(Duration::from_secs(1))
}

/// The ordinal of a Pod named `<set>-<ordinal>`.
pub fn ordinal_of(set: &str, pod: &str) -> Option<i32> {
    let n = pod.strip_prefix(set)?.strip_prefix('-')?;
    n.parse()
        .ok()
        .filter(|o: &i32| *o >= 0 && !n.starts_with('+'))
}

fn is_running_and_ready(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        && util::ready_since(pod).is_some()
}

fn is_healthy(pod: &Pod, min_ready: i32, now: Timestamp) -> bool {
    is_running_and_ready(pod)
        && pod.metadata.deletion_timestamp.is_none()
        && is_pod_available(pod, min_ready, now)
}

fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

fn is_failed(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Failed" | "Succeeded")
    )
}

fn revision_label(pod: &Pod) -> Option<&str> {
    pod.labels()
        .get(CONTROLLER_REVISION_HASH)
        .map(String::as_str)
}

/// The spec fields a sync reads, with upstream's defaults.
struct Shape {
    start: i32,
    replicas: i32,
    monotonic: bool,
    rolling: bool,
    partition: i32,
    min_ready: i32,
}

impl Shape {
    fn of(sts: &StatefulSet) -> Shape {
        let spec = sts.spec.clone().unwrap_or_default();
        let strategy = spec.update_strategy.unwrap_or_default();
        Shape {
            start: spec.ordinals.and_then(|o| o.start).unwrap_or(0),
            replicas: spec.replicas.unwrap_or(1),
            monotonic: spec.pod_management_policy.as_deref() != Some("Parallel"),
            rolling: strategy
                .type_
                .as_deref()
                .is_none_or(|t| t == "RollingUpdate"),
            partition: strategy
                .rolling_update
                .and_then(|r| r.partition)
                .unwrap_or(0),
            min_ready: spec.min_ready_seconds.unwrap_or(0),
        }
    }
}

/// `newVersionedStatefulSetPod`: the Pod of `ordinal` from `revision`'s template.
pub fn pod_for(sts: &StatefulSet, revision: &Revision, ordinal: i32) -> Pod {
    let set = sts.name_any();
    let name = format!("{set}-{ordinal}");
    let meta = revision.template.metadata.clone().unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    labels.insert(POD_NAME_LABEL.into(), name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    labels.insert(CONTROLLER_REVISION_HASH.into(), revision.name.clone());
    let spec = sts.spec.clone().unwrap_or_default();
    let mut pod_spec = revision.template.spec.clone().unwrap_or_default();
    pod_spec.hostname = Some(name.clone());
    if !spec.service_name.as_deref().unwrap_or_default().is_empty() {
        pod_spec.subdomain = spec.service_name.clone();
    }
    // `updateStorage`: each claim template becomes a volume naming the Pod's claim.
    for claim in spec.volume_claim_templates.iter().flatten() {
        let claim_name = claim.metadata.name.clone().unwrap_or_default();
        let volumes = pod_spec.volumes.get_or_insert_with(Vec::new);
        volumes.retain(|v| v.name != claim_name);
        volumes.push(
            serde_json::from_value::<Volume>(json!({"name": claim_name,
                "persistentVolumeClaim": {"claimName": format!("{claim_name}-{name}")}}))
            .unwrap_or_default(),
        );
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: sts.namespace(),
            labels: Some(labels),
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![controller_ref(sts)]),
            ..ObjectMeta::default()
        },
        spec: Some(pod_spec),
        status: None,
    }
}

/// One reconcile's view of a StatefulSet.
struct SetSync<'a> {
    ctx: &'a Context,
    sts: &'a StatefulSet,
    key: String,
    pods_api: Api<Pod>,
    shape: Shape,
    current: Revision,
    update: Revision,
    status_current_replicas: i32,
}

impl SetSync<'_> {
    fn error(&self, action: String) -> impl FnOnce(kube::Error) -> StatefulSetError {
        let stateful_set = self.key.clone();
        move |source| StatefulSetError::Api {
            stateful_set,
            action,
            source,
        }
    }

    fn expect(&self, pod: &str, resource_version: u64, deletion: bool) {
        let ns = self.sts.namespace().unwrap_or_default();
        self.ctx.expectations.expect(
            &self.key,
            Expected {
                key: format!("{ns}/{pod}"),
                resource_version,
                deletion,
            },
        );
    }

    /// Creates the Pod of `ordinal` at the revision upstream picks for it: the current one
    /// below the partition (RollingUpdate), the update revision otherwise.
    async fn create(&self, ordinal: i32) -> Result<(), StatefulSetError> {
        let s = &self.shape;
        let below = if self.shape_has_rolling_params() {
            ordinal < s.start + s.partition
        } else {
            ordinal < s.start + self.status_current_replicas
        };
        let revision = if s.rolling && below {
            &self.current
        } else {
            &self.update
        };
        let pod = pod_for(self.sts, revision, ordinal);
        let name = pod.name_any();
        match self.pods_api.create(&PostParams::default(), &pod).await {
            Ok(created) => {
                self.expect(
                    &name,
                    version_of(created.metadata.resource_version.as_deref()),
                    false,
                );
            }
            Err(kube::Error::Api(e)) if e.code == 409 => return Ok(()),
            Err(e) => return Err(self.error(format!("creating Pod {name}"))(e)),
        }
        let set = self.sts.name_any();
        self.record(
            "SuccessfulCreate",
            format!("create Pod {name} in StatefulSet {set} successful"),
        )
        .await;
        Ok(())
    }

    fn shape_has_rolling_params(&self) -> bool {
        self.sts
            .spec
            .as_ref()
            .and_then(|s| s.update_strategy.as_ref())
            .is_some_and(|u| u.rolling_update.is_some())
    }

    async fn delete(&self, pod: &Pod) -> Result<(), StatefulSetError> {
        let name = pod.name_any();
        let rv = match self.pods_api.delete(&name, &DeleteParams::default()).await {
            Ok(either) => either.left().map_or(u64::MAX, |p| {
                version_of(p.metadata.resource_version.as_deref())
            }),
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            Err(e) => return Err(self.error(format!("deleting Pod {name}"))(e)),
        };
        self.expect(&name, rv, true);
        let set = self.sts.name_any();
        self.record(
            "SuccessfulDelete",
            format!("delete Pod {name} in StatefulSet {set} successful"),
        )
        .await;
        Ok(())
    }

    async fn record(&self, reason: &str, note: String) {
        let reference: ObjectReference = self.sts.object_ref(&());
        let event = Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(note),
            action: reason.into(),
            secondary: None,
        };
        if let Err(error) = self.ctx.recorder.publish(&event, &reference).await {
            tracing::debug!(%error, "cannot publish StatefulSet Event");
        }
    }

    /// `updateStatefulSet`'s steps, stopping after the first write in `OrderedReady` (and
    /// before the rolling update in either policy when anything was written).
    async fn sync(&self, pods: &[Arc<Pod>]) -> Result<(), StatefulSetError> {
        let s = &self.shape;
        let now = Timestamp::now();
        let set = self.sts.name_any();
        let range = s.start..s.start + s.replicas.max(0);
        let mut replicas: BTreeMap<i32, &Pod> = BTreeMap::new();
        let mut condemned: Vec<(i32, &Pod)> = vec![];
        for pod in pods {
            match ordinal_of(&set, &pod.name_any()) {
                Some(o) if range.contains(&o) => {
                    replicas.insert(o, pod);
                }
                Some(o) => condemned.push((o, pod)),
                None => condemned.push((i32::MAX, pod)),
            }
        }
        let mut wrote = false;
        for ordinal in range.clone() {
            let healthy = match replicas.get(&ordinal) {
                None => {
                    self.create(ordinal).await?;
                    wrote = true;
                    false
                }
                Some(pod) if is_failed(pod) && !is_terminating(pod) => {
                    self.delete(pod).await?;
                    wrote = true;
                    false
                }
                Some(pod) => is_healthy(pod, s.min_ready, now),
            };
            if s.monotonic && !healthy {
                return Ok(());
            }
        }
        condemned.sort_by_key(|(o, _)| *o);
        let first_unhealthy = range
            .clone()
            .filter_map(|o| replicas.get(&o).map(|p| (o, *p)))
            .chain(condemned.iter().copied())
            .find(|(_, p)| !is_running_and_ready(p))
            .map(|(_, p)| p.name_any());
        for (_, pod) in condemned.iter().rev() {
            if is_terminating(pod) {
                if s.monotonic {
                    return Ok(());
                }
                continue;
            }
            if s.monotonic
                && !is_running_and_ready(pod)
                && first_unhealthy.as_deref() != Some(pod.name_any().as_str())
            {
                return Ok(());
            }
            self.delete(pod).await?;
            wrote = true;
            if s.monotonic {
                return Ok(());
            }
        }
        if wrote || !s.rolling {
            return Ok(());
        }
        for ordinal in range.rev().take_while(|o| *o >= s.start + s.partition) {
            let Some(pod) = replicas.get(&ordinal) else {
                return Ok(());
            };
            if revision_label(pod) != Some(self.update.name.as_str()) && !is_terminating(pod) {
                return self.delete(pod).await;
            }
            if !is_healthy(pod, s.min_ready, now) {
                return Ok(());
            }
        }
        Ok(())
    }
}

async fn reconcile(sts: Arc<StatefulSet>, ctx: Arc<Context>) -> Result<Action, StatefulSetError> {
    let ns = sts.namespace().unwrap_or_default();
    let name = sts.name_any();
    let key = format!("{ns}/{name}");
    let uid = sts.uid().unwrap_or_default();
    if sts.metadata.deletion_timestamp.is_some() {
        ctx.expectations.forget(&key);
        return Ok(Action::await_change());
    }
    let fail = |action: &str| {
        let stateful_set = key.clone();
        let action = action.to_string();
        move |source| StatefulSetError::Api {
            stateful_set,
            action,
            source,
        }
    };
    let cr_api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    let owned = history::owned_revisions(&ctx.revisions, &ns, &uid);
    let template = sts
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let update =
        history::ensure_revision(&cr_api, sts.as_ref(), &owned, &template, CONTROLLER_NAME)
            .await
            .map_err(fail("recording the update revision"))?;
    let status = sts.status.clone().unwrap_or_default();
    let current = status
        .current_revision
        .as_deref()
        .and_then(|c| owned.iter().find(|r| r.name_any() == c))
        .and_then(|r| history::revision_of(r))
        .unwrap_or_else(|| update.clone());
    let pods = owned_pods(&ctx.pods, &ns, &uid);
    let sync = SetSync {
        ctx: &ctx,
        sts: &sts,
        key: key.clone(),
        pods_api: Api::namespaced(ctx.client.clone(), &ns),
        shape: Shape::of(&sts),
        current,
        update,
        status_current_replicas: status.current_replicas.unwrap_or(0),
    };
    let cached = |pod_key: &str| {
        let (pns, pname) = pod_key.split_once('/').unwrap_or_default();
        ctx.pods
            .get(&reflector::ObjectRef::new(pname).within(pns))
            .map(|p| version_of(p.metadata.resource_version.as_deref()))
    };
    if ctx.expectations.satisfied(&key, cached) {
        sync.sync(&pods).await?;
    }
    let (new_status, next) = status_of(&sts, &pods, &sync.current, &sync.update);
    let limit = sts
        .spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .unwrap_or(10);
    let mut live: Vec<&str> = pods.iter().filter_map(|p| revision_label(p)).collect();
    live.extend([sync.current.name.as_str(), sync.update.name.as_str()]);
    history::truncate_history(&cr_api, &owned, &live, limit).await;
    let old = serde_json::to_value(&status).unwrap_or_default();
    let zero = json!(0);
    let stale = new_status
        .as_object()
        .into_iter()
        .flatten()
        .any(|(k, v)| old.get(k).unwrap_or(&zero) != if v.is_null() { &zero } else { v });
    if stale {
        let params = PatchParams {
            field_manager: Some(CONTROLLER_NAME.into()),
            ..PatchParams::default()
        };
        Api::<StatefulSet>::namespaced(ctx.client.clone(), &ns)
            .patch_status(&name, &params, &Patch::Merge(json!({"status": new_status})))
            .await
            .map_err(fail("writing status"))?;
    }
    Ok(match next {
        Some(seconds) => Action::requeue(Duration::from_secs(seconds.max(1) as u64)),
        None => Action::requeue(Duration::from_secs(30)),
    })
}

/// `computeReplicaStatus` and `completeRollingUpdate`: the status for the set's Pods, and the
/// seconds until a Ready Pod becomes available (while one waits out `minReadySeconds`).
fn status_of(
    sts: &StatefulSet,
    pods: &[Arc<Pod>],
    current: &Revision,
    update: &Revision,
) -> (serde_json::Value, Option<i64>) {
    let now = Timestamp::now();
    let shape = Shape::of(sts);
    let count = |f: &dyn Fn(&Pod) -> bool| pods.iter().filter(|p| f(p)).count();
    let replicas = pods.len();
    let ready = count(&is_running_and_ready);
    let available =
        count(&|p| is_running_and_ready(p) && is_pod_available(p, shape.min_ready, now));
    let mut current_replicas =
        count(&|p| !is_terminating(p) && revision_label(p) == Some(current.name.as_str()));
    let updated = count(&|p| !is_terminating(p) && revision_label(p) == Some(update.name.as_str()));
    let mut current_revision = current.name.clone();
    if shape.rolling && updated == replicas && ready == replicas {
        current_replicas = updated;
        current_revision = update.name.clone();
    }
    let next = pods
        .iter()
        .filter_map(|p| util::seconds_until_available(p, shape.min_ready, now))
        .min();
    let omit_zero = |n: usize| if n == 0 { json!(null) } else { json!(n) };
    let status = json!({
        "replicas": replicas,
        "readyReplicas": omit_zero(ready),
        "availableReplicas": available,
        "currentReplicas": omit_zero(current_replicas),
        "updatedReplicas": omit_zero(updated),
        "currentRevision": current_revision,
        "updateRevision": update.name,
        "collisionCount": 0,
        "observedGeneration": sts.metadata.generation.unwrap_or(0),
    });
    (status, next)
}

#[cfg(test)]
mod tests;
