//! The local DaemonSet controller (kubernetes/kubernetes `pkg/controller/daemon`,
//! `daemon_controller.go`, `update.go`, `util/daemonset_util.go`): one Pod per Node that should
//! run the daemon (the template's `nodeSelector` and required node affinity fit its labels, and
//! every `NoSchedule`/`NoExecute` taint is tolerated, [`node_fit`]), named
//! `<daemonset>-<random>`, owned by it (`controller: true`), labelled `controller-revision-hash`
//! (the hash of its ControllerRevision, [`controller_history`]) and `pod-template-generation`,
//! with the daemon tolerations added and pinned to its Node by the required node affinity
//! `metadata.name In [node]` (the scheduler binds it, as upstream's does).
//!
//! - A Node that should run the daemon and has none gets one; extra Pods on a Node go (the
//!   oldest stays); failed Pods are deleted and re-created; Pods on Nodes that should not run
//!   the daemon are deleted (a Node that only lost a `NoSchedule` toleration keeps its Pod).
//! - `updateStrategy: RollingUpdate` (`maxUnavailable`, default 1, a percentage of the desired
//!   Nodes rounded up; `maxSurge` is not supported and read as 0): old Pods that are not
//!   available are replaced at once, available ones while fewer than `maxUnavailable` Nodes lack
//!   an available Pod. `OnDelete`: a Pod changes only when deleted.
//! - `status`: `desiredNumberScheduled`, `currentNumberScheduled`, `numberMisscheduled`,
//!   `numberReady`, `numberAvailable` (Ready for `minReadySeconds`), `numberUnavailable`,
//!   `updatedNumberScheduled`, `observedGeneration`, so `kubectl rollout status daemonset/x`
//!   returns when a real cluster's would.
//!
//! Simplified (documented in docs/kube-apiserver-local.md): no `maxSurge`, no creation backoff
//! for Pods that keep failing, no adoption of orphans.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use super::controller_history::{self as history, Revision, CONTROLLER_REVISION_HASH};
use super::deployment_util::{self as util, is_pod_available, scaled_value};
use super::expectations::{version_of, Expectations, Expected};
use super::informer;
use super::node_fit;
use super::owner_refs::controller_ref;
use super::replica_set::owned_pods;

/// The field manager and Event reporter of this controller.
pub const CONTROLLER_NAME: &str = "daemonset-controller";
/// The deprecated label holding the DaemonSet's generation when the Pod was made.
pub const POD_TEMPLATE_GENERATION: &str = "pod-template-generation";

/// Errors of one reconcile (retried after a second).
#[derive(Debug, thiserror::Error)]
pub enum DaemonSetError {
    /// A request to the API failed.
    #[error("DaemonSet {daemon_set}: {action}: {source}")]
    Api {
        /// `namespace/name`.
        daemon_set: String,
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
    nodes: Store<Node>,
    revisions: Store<ControllerRevision>,
    expectations: Expectations,
    recorder: Recorder,
}

/// Runs the controller until the future is dropped.
pub async fn run(client: Client) {
    let (pods, pod_events) = informer::reflect_all::<Pod>(&client);
    let (nodes, node_events) = informer::reflect_all::<Node>(&client);
    let (revisions, cr_events) = informer::reflect_all::<ControllerRevision>(&client);
    let (sets, ds_events) = informer::reflect_all::<DaemonSet>(&client);
    let recorder = informer::recorder(&client, CONTROLLER_NAME);
    let context = Arc::new(Context {
        client,
        pods,
        nodes,
        revisions,
        expectations: Expectations::default(),
        recorder,
    });
    let all_sets = sets.clone();
    // Any Node change may change where every DaemonSet should run.
    let every_set = move |_node: Node| {
        all_sets
            .state()
            .into_iter()
            .map(|ds| ObjectRef::from_obj(ds.as_ref()))
            .collect::<Vec<_>>()
    };
    Controller::for_stream(ds_events, sets)
        .owns_stream(pod_events)
        .owns_stream(cr_events)
        .watches_stream(node_events, every_set)
        .run(reconcile, error_policy, context)
        .for_each(|_| async {})
        .await;
}

fn error_policy(_d: Arc<DaemonSet>, error: &DaemonSetError, _ctx: Arc<Context>) -> Action {
    tracing::info!(%error, "DaemonSet sync failed; retrying");
    Action::requeue(Duration::from_secs(1))
}

/// `NodeShouldRunDaemonPod`: (should run, should continue running) for a daemon Pod `pod`
/// (already pinned and tolerating as [`pod_for`] makes it) on `node`.
pub fn should_run(node: &Node, pod: &Pod) -> (bool, bool) {
    let spec = pod.spec.clone().unwrap_or_default();
    let labels = node.labels();
    if !node_fit::fits_node(&node.name_any(), labels, &spec) {
        return (false, false);
    }
    let tolerations = spec.tolerations.unwrap_or_default();
    let no_execute = node_fit::untolerated(node, &tolerations, "NoExecute");
    let no_schedule = node_fit::untolerated(node, &tolerations, "NoSchedule");
    (
        no_execute.is_empty() && no_schedule.is_empty(),
        no_execute.is_empty(),
    )
}

/// `NewPod` and `CreatePodsOnNodes`: the DaemonSet's Pod for `node` at `revision`.
pub fn pod_for(ds: &DaemonSet, revision: &Revision, node: &str) -> Pod {
    let meta = revision.template.metadata.clone().unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    labels.insert(CONTROLLER_REVISION_HASH.into(), revision.hash.clone());
    labels.insert(
        POD_TEMPLATE_GENERATION.into(),
        ds.metadata.generation.unwrap_or(0).to_string(),
    );
    let mut spec = revision.template.spec.clone().unwrap_or_default();
    node_fit::add_daemon_tolerations(&mut spec);
    node_fit::pin_to_node(&mut spec, node);
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", ds.name_any())),
            namespace: ds.namespace(),
            labels: Some(labels),
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![controller_ref(ds)]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.phase.as_deref())
}

fn creation_key(pod: &Pod) -> (i64, String) {
    let created = pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(0, |t| t.0.as_second());
    (created, pod.name_any())
}

/// The DaemonSet's Pods by the Node they run on or are pinned to (oldest first).
fn by_node(pods: &[Arc<Pod>]) -> BTreeMap<String, Vec<Arc<Pod>>> {
    let mut map: BTreeMap<String, Vec<Arc<Pod>>> = BTreeMap::new();
    for pod in pods {
        let node = pod
            .spec
            .as_ref()
            .and_then(node_fit::target_node)
            .unwrap_or_default();
        map.entry(node).or_default().push(pod.clone());
    }
    for list in map.values_mut() {
        list.sort_by_key(|p| creation_key(p));
    }
    map
}

/// `maxUnavailable` of the RollingUpdate strategy, scaled to `desired` Nodes (rounded up; at
/// least 1, as upstream's fencepost when `maxSurge` is 0).
pub fn max_unavailable(ds: &DaemonSet, desired: i32) -> i32 {
    let value = ds
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.rolling_update.as_ref())
        .and_then(|r| r.max_unavailable.clone())
        .unwrap_or(IntOrString::Int(1));
    scaled_value(Some(&value), desired, true)
        .unwrap_or(1)
        .max(1)
}

/// One reconcile's view of a DaemonSet.
struct SetSync<'a> {
    ctx: &'a Context,
    ds: &'a DaemonSet,
    key: String,
    pods_api: Api<Pod>,
    update: Revision,
}

impl SetSync<'_> {
    fn error(&self, action: String) -> impl FnOnce(kube::Error) -> DaemonSetError {
        let daemon_set = self.key.clone();
        move |source| DaemonSetError::Api {
            daemon_set,
            action,
            source,
        }
    }

    fn expect(&self, pod: &str, resource_version: u64, deletion: bool) {
        let ns = self.ds.namespace().unwrap_or_default();
        self.ctx.expectations.expect(
            &self.key,
            Expected {
                key: format!("{ns}/{pod}"),
                resource_version,
                deletion,
            },
        );
    }

    async fn create(&self, node: &str) -> Result<(), DaemonSetError> {
        let pod = pod_for(self.ds, &self.update, node);
        let created = self
            .pods_api
            .create(&PostParams::default(), &pod)
            .await
            .map_err(self.error(format!("creating a Pod on Node {node}")))?;
        let name = created.name_any();
        self.expect(
            &name,
            version_of(created.metadata.resource_version.as_deref()),
            false,
        );
        self.record("SuccessfulCreate", format!("Created pod: {name}"))
            .await;
        Ok(())
    }

    async fn delete(&self, pod: &Pod) -> Result<(), DaemonSetError> {
        let name = pod.name_any();
        let rv = match self.pods_api.delete(&name, &DeleteParams::default()).await {
            Ok(either) => either.left().map_or(u64::MAX, |p| {
                version_of(p.metadata.resource_version.as_deref())
            }),
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            Err(e) => return Err(self.error(format!("deleting Pod {name}"))(e)),
        };
        self.expect(&name, rv, true);
        self.record("SuccessfulDelete", format!("Deleted pod: {name}"))
            .await;
        Ok(())
    }

    async fn record(&self, reason: &str, note: String) {
        let reference: ObjectReference = self.ds.object_ref(&());
        let event = Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(note),
            action: reason.into(),
            secondary: None,
        };
        if let Err(error) = self.ctx.recorder.publish(&event, &reference).await {
            tracing::debug!(%error, "cannot publish DaemonSet Event");
        }
    }

    fn is_updated(&self, pod: &Pod) -> bool {
        pod.labels().get(CONTROLLER_REVISION_HASH) == Some(&self.update.hash)
    }

    /// `manage` then `rollingUpdate`; returns whether anything was written.
    async fn sync(&self, nodes: &[Arc<Node>], pods: &[Arc<Pod>]) -> Result<(), DaemonSetError> {
        let now = Timestamp::now();
        let min_ready = self
            .ds
            .spec
            .as_ref()
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0);
        let mut placed = by_node(pods);
        let mut wrote = false;
        let mut desired: Vec<(String, Vec<Arc<Pod>>)> = vec![];
        for node in nodes {
            let name = node.name_any();
            let on_node = placed.remove(&name).unwrap_or_default();
            let (run, keep) = should_run(node, &pod_for(self.ds, &self.update, &name));
            let live: Vec<&Arc<Pod>> = on_node.iter().filter(|p| !is_terminating(p)).collect();
            if run {
                let mut running = vec![];
                for pod in live {
                    if phase(pod) == Some("Failed") {
                        self.delete(pod).await?;
                        wrote = true;
                    } else {
                        running.push(pod);
                    }
                }
                if running.is_empty() {
                    self.create(&name).await?;
                    wrote = true;
                }
                for extra in running.iter().skip(1) {
                    self.delete(extra).await?;
                    wrote = true;
                }
                desired.push((name, on_node));
            } else if !keep {
                for pod in live {
                    self.delete(pod).await?;
                    wrote = true;
                }
            }
        }
        // Pods of Nodes that no longer exist (the Pod garbage collector's job upstream).
        for pod in placed.values().flatten().filter(|p| !is_terminating(p)) {
            self.delete(pod).await?;
            wrote = true;
        }
        let rolling = self
            .ds
            .spec
            .as_ref()
            .and_then(|s| s.update_strategy.as_ref())
            .and_then(|u| u.type_.as_deref())
            .is_none_or(|t| t == "RollingUpdate");
        if wrote || !rolling {
            return Ok(());
        }
        let budget = max_unavailable(self.ds, desired.len() as i32);
        let mut unavailable = 0;
        let (mut replace_now, mut candidates) = (vec![], vec![]);
        for (_, on_node) in &desired {
            let live: Vec<&Arc<Pod>> = on_node.iter().filter(|p| !is_terminating(p)).collect();
            let new = live.iter().find(|p| self.is_updated(p));
            let old = live.iter().find(|p| !self.is_updated(p));
            match (new, old) {
                (Some(new), None) => {
                    if !is_pod_available(new, min_ready, now) {
                        unavailable += 1;
                    }
                }
                (None, Some(old)) if !is_pod_available(old, min_ready, now) => {
                    replace_now.push(*old)
                }
                (None, Some(old)) => candidates.push(*old),
                _ => unavailable += 1,
            }
        }
        let room = usize::try_from(budget - unavailable - replace_now.len() as i32).unwrap_or(0);
        for pod in replace_now
            .into_iter()
            .chain(candidates.into_iter().take(room))
        {
            self.delete(pod).await?;
        }
        Ok(())
    }
}

async fn reconcile(ds: Arc<DaemonSet>, ctx: Arc<Context>) -> Result<Action, DaemonSetError> {
    let ns = ds.namespace().unwrap_or_default();
    let name = ds.name_any();
    let key = format!("{ns}/{name}");
    let uid = ds.uid().unwrap_or_default();
    if ds.metadata.deletion_timestamp.is_some() {
        ctx.expectations.forget(&key);
        return Ok(Action::await_change());
    }
    let fail = |action: &str| {
        let daemon_set = key.clone();
        let action = action.to_string();
        move |source| DaemonSetError::Api {
            daemon_set,
            action,
            source,
        }
    };
    let cr_api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    let owned = history::owned_revisions(&ctx.revisions, &ns, &uid);
    let template = ds
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let update = history::ensure_revision(&cr_api, ds.as_ref(), &owned, &template, CONTROLLER_NAME)
        .await
        .map_err(fail("recording the update revision"))?;
    let pods: Vec<Arc<Pod>> = owned_pods(&ctx.pods, &ns, &uid)
        .into_iter()
        .filter(|p| !matches!(phase(p), Some("Succeeded")))
        .collect();
    let mut nodes = ctx.nodes.state();
    nodes.sort_by_key(|n| n.name_any());
    let sync = SetSync {
        ctx: &ctx,
        ds: &ds,
        key: key.clone(),
        pods_api: Api::namespaced(ctx.client.clone(), &ns),
        update,
    };
    let cached = |pod_key: &str| {
        let (pns, pname) = pod_key.split_once('/').unwrap_or_default();
        ctx.pods
            .get(&reflector::ObjectRef::new(pname).within(pns))
            .map(|p| version_of(p.metadata.resource_version.as_deref()))
    };
    if ctx.expectations.satisfied(&key, cached) {
        sync.sync(&nodes, &pods).await?;
    }
    let limit = ds
        .spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .unwrap_or(10);
    let hashes: Vec<&str> = pods
        .iter()
        .filter_map(|p| p.labels().get(CONTROLLER_REVISION_HASH).map(String::as_str))
        .collect();
    let live: Vec<String> = owned
        .iter()
        .map(|r| r.name_any())
        .filter(|n| hashes.iter().any(|h| n.ends_with(&format!("-{h}"))))
        .chain([sync.update.name.clone()])
        .collect();
    let live: Vec<&str> = live.iter().map(String::as_str).collect();
    history::truncate_history(&cr_api, &owned, &live, limit).await;
    let (status, next) = status_of(&ds, &nodes, &pods, &sync.update);
    let old = serde_json::to_value(ds.status.clone().unwrap_or_default()).unwrap_or_default();
    let zero = json!(0);
    let stale = status
        .as_object()
        .into_iter()
        .flatten()
        .any(|(k, v)| old.get(k).unwrap_or(&zero) != if v.is_null() { &zero } else { v });
    if stale {
        let params = PatchParams {
            field_manager: Some(CONTROLLER_NAME.into()),
            ..PatchParams::default()
        };
        Api::<DaemonSet>::namespaced(ctx.client.clone(), &ns)
            .patch_status(&name, &params, &Patch::Merge(json!({"status": status})))
            .await
            .map_err(fail("writing status"))?;
    }
    Ok(match next {
        Some(seconds) => Action::requeue(Duration::from_secs(seconds.max(1) as u64)),
        None => Action::requeue(Duration::from_secs(30)),
    })
}

/// `updateDaemonSetStatus`: the status for the DaemonSet's Pods on `nodes`, and the seconds
/// until a Ready Pod becomes available (while one waits out `minReadySeconds`).
fn status_of(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    pods: &[Arc<Pod>],
    update: &Revision,
) -> (serde_json::Value, Option<i64>) {
    let now = Timestamp::now();
    let min_ready = ds
        .spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0);
    let placed = by_node(pods);
    let (mut desired, mut current, mut misscheduled) = (0, 0, 0);
    let (mut ready, mut available, mut updated) = (0, 0, 0);
    let mut next: Option<i64> = None;
    for node in nodes {
        let name = node.name_any();
        let (run, _) = should_run(node, &pod_for(ds, update, &name));
        let on_node = placed.get(&name).map(Vec::as_slice).unwrap_or_default();
        if !run {
            misscheduled += usize::from(!on_node.is_empty());
            continue;
        }
        desired += 1;
        // Upstream looks at the oldest Pod of a Node, preferring a running one.
        let Some(pod) = on_node
            .iter()
            .find(|p| phase(p) == Some("Running"))
            .or(on_node.first())
        else {
            continue;
        };
        current += 1;
        if util::ready_since(pod).is_some() {
            ready += 1;
            if is_pod_available(pod, min_ready, now) {
                available += 1;
            }
        }
        if pod.labels().get(CONTROLLER_REVISION_HASH) == Some(&update.hash) {
            updated += 1;
        }
        if let Some(s) = util::seconds_until_available(pod, min_ready, now) {
            next = Some(next.map_or(s, |n| n.min(s)));
        }
    }
    let omit_zero = |n: usize| if n == 0 { json!(null) } else { json!(n) };
    let status = json!({
        "desiredNumberScheduled": desired,
        "currentNumberScheduled": current,
        "numberMisscheduled": misscheduled,
        "numberReady": ready,
        "numberAvailable": omit_zero(available),
        "numberUnavailable": omit_zero(desired - available),
        "updatedNumberScheduled": omit_zero(updated),
        "observedGeneration": ds.metadata.generation.unwrap_or(0),
    });
    (status, next)
}

#[cfg(test)]
mod tests;
