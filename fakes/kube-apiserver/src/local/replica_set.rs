//! The local ReplicaSet controller (kubernetes/kubernetes `pkg/controller/replicaset`): keeps
//! `spec.replicas` active Pods for each ReplicaSet, made from its template (named
//! `<replicaset>-<random>`, owned by it with `controller: true` and `blockOwnerDeletion`),
//! deletes the surplus in upstream's order (unscheduled, then Pending, then not ready, then
//! the most recently ready, then the newest first), and writes `status` (`replicas`,
//! `fullyLabeledReplicas`, `readyReplicas`, `availableReplicas` = Ready for the ReplicaSet's
//! `minReadySeconds`, `observedGeneration`). It is a kube-runtime Controller, an ordinary client
//! of the server, with [`Expectations`] so it never acts twice on its own writes.
//!
//! It adopts orphan Pods its selector matches and releases its Pods whose labels stop matching
//! ([`pod_claims`], upstream's `ClaimPods`).
//!
//! Simplified: creations are not slow-started in batches; no `ReplicaFailure` condition
//! (documented in docs/kube-apiserver-local.md).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{self, Store};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use super::deployment_util::{self as util, is_pod_active, is_pod_available};
use super::expectations::{version_of, Expectations, Expected};
use super::informer;
use super::owner_refs::{controller_ref, controller_uid};
use super::pod_claims;

/// The field manager and Event reporter of this controller.
pub const CONTROLLER_NAME: &str = "replicaset-controller";

/// Errors of one reconcile (retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum ReplicaSetError {
    /// A write to the API failed.
    #[error("ReplicaSet {replica_set}: {action}: {source}")]
    Api {
        /// `namespace/name`.
        replica_set: String,
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
    expectations: Expectations,
    recorder: Recorder,
}

/// Runs the controller until the future is dropped.
pub async fn run(client: Client) {
    let (pods, pod_events) = informer::reflect_all::<Pod>(&client);
    let (sets, rs_events) = informer::reflect_all::<ReplicaSet>(&client);
    let recorder = informer::recorder(&client, CONTROLLER_NAME);
    let context = Arc::new(Context {
        client,
        pods,
        expectations: Expectations::default(),
        recorder,
    });
    Controller::for_stream(rs_events, sets)
        .owns_stream(pod_events)
        .run(reconcile, error_policy, context)
        .for_each(|_| async {})
        .await;
}

fn error_policy(_rs: Arc<ReplicaSet>, error: &ReplicaSetError, _ctx: Arc<Context>) -> Action {
    tracing::info!(%error, "ReplicaSet sync failed; retrying");
    Action::requeue(Duration::from_secs(1))
}

/// The Pods a ReplicaSet controls (by owner uid), in its namespace.
pub fn owned_pods(pods: &Store<Pod>, namespace: &str, uid: &str) -> Vec<Arc<Pod>> {
    pods.state()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
        .filter(|p| controller_uid(&p.metadata) == Some(uid))
        .collect()
}

async fn reconcile(rs: Arc<ReplicaSet>, ctx: Arc<Context>) -> Result<Action, ReplicaSetError> {
    let ns = rs.namespace().unwrap_or_default();
    let name = rs.name_any();
    let key = format!("{ns}/{name}");
    if rs.metadata.deletion_timestamp.is_some() {
        ctx.expectations.forget(&key);
        return Ok(Action::await_change());
    }
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let fail = |action: String| {
        let replica_set = key.clone();
        move |source: kube::Error| ReplicaSetError::Api {
            replica_set,
            action,
            source,
        }
    };
    let cached = |pod_key: &str| {
        let (pns, pname) = pod_key.split_once('/').unwrap_or_default();
        ctx.pods
            .get(&reflector::ObjectRef::new(pname).within(pns))
            .map(|p| version_of(p.metadata.resource_version.as_deref()))
    };
    let active: Vec<Arc<Pod>> = claim_pods(&ctx, &rs, &pods_api)
        .await
        .map_err(fail("adopting or releasing Pods".into()))?
        .into_iter()
        .filter(|p| is_pod_active(p))
        .collect();
    let wanted = usize::try_from(util::rs_replicas(&rs)).unwrap_or(0);
    let mut changed = false;
    if ctx.expectations.satisfied(&key, cached) {
        if active.len() < wanted {
            for _ in active.len()..wanted {
                let pod = pod_from_template(&rs);
                let created = pods_api
                    .create(&PostParams::default(), &pod)
                    .await
                    .map_err(fail("creating a Pod".into()))?;
                ctx.expectations.expect(
                    &key,
                    Expected {
                        key: format!("{ns}/{}", created.name_any()),
                        resource_version: version_of(created.metadata.resource_version.as_deref()),
                        deletion: false,
                    },
                );
                record(
                    &ctx,
                    &rs,
                    "SuccessfulCreate",
                    format!("Created pod: {}", created.name_any()),
                )
                .await;
            }
            changed = true;
        } else if active.len() > wanted {
            let now = Timestamp::now();
            let mut ranked = active.clone();
            ranked.sort_by_key(|p| deletion_rank(p, now));
            for pod in ranked.into_iter().take(active.len() - wanted) {
                let deleted = pods_api
                    .delete(&pod.name_any(), &DeleteParams::default())
                    .await;
                let resource_version = match &deleted {
                    Ok(either) => either.as_ref().left().map_or(u64::MAX, |p| {
                        version_of(p.metadata.resource_version.as_deref())
                    }),
                    Err(kube::Error::Api(s)) if s.code == 404 => continue,
                    Err(_) => u64::MAX,
                };
                deleted.map_err(fail(format!("deleting Pod {}", pod.name_any())))?;
                ctx.expectations.expect(
                    &key,
                    Expected {
                        key: format!("{ns}/{}", pod.name_any()),
                        resource_version,
                        deletion: true,
                    },
                );
                record(
                    &ctx,
                    &rs,
                    "SuccessfulDelete",
                    format!("Deleted pod: {}", pod.name_any()),
                )
                .await;
            }
            changed = true;
        }
    }
    let (status, next) = status_of(&rs, &active);
    let current = serde_json::to_value(rs.status.clone().unwrap_or_default()).unwrap_or_default();
    let zero = json!(0);
    let stale = status
        .as_object()
        .into_iter()
        .flatten()
        .any(|(k, v)| current.get(k).unwrap_or(&zero) != if v.is_null() { &zero } else { v });
    if stale {
        let patch = json!({"status": status});
        let params = PatchParams {
            field_manager: Some(CONTROLLER_NAME.into()),
            ..PatchParams::default()
        };
        Api::<ReplicaSet>::namespaced(ctx.client.clone(), &ns)
            .patch_status(&name, &params, &Patch::Merge(patch))
            .await
            .map_err(fail("writing status".into()))?;
    }
    Ok(match next {
        Some(seconds) => Action::requeue(Duration::from_secs(seconds.max(1) as u64)),
        None if changed => Action::requeue(Duration::from_secs(5)),
        None => Action::await_change(),
    })
}

/// `ClaimPods` ([`pod_claims`]): the Pods the ReplicaSet controls after adopting the orphans
/// its selector matches and releasing its Pods that no longer match. A Pod that changed or went
/// meanwhile (409, 404) is left for the next sync.
///
/// Errors: any other refusal of an adoption or release patch.
async fn claim_pods(
    ctx: &Context,
    rs: &ReplicaSet,
    pods_api: &Api<Pod>,
) -> Result<Vec<Arc<Pod>>, kube::Error> {
    let uid = rs.uid().unwrap_or_default();
    let selector = rs
        .spec
        .as_ref()
        .map(|s| s.selector.clone())
        .unwrap_or_default();
    let ns = rs.namespace().unwrap_or_default();
    let claims = pod_claims::plan(&ctx.pods, &ns, &uid, &selector, false);
    let mut owned = claims.owned;
    let skip_gone = |r: Result<Pod, kube::Error>| match r {
        Ok(pod) => Ok(Some(pod)),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(None),
        Err(e) => Err(e),
    };
    for pod in claims.adopt {
        let adopted = pod_claims::adopt(pods_api, &pod, &controller_ref(rs), CONTROLLER_NAME).await;
        if let Some(pod) = skip_gone(adopted)? {
            owned.push(Arc::new(pod));
        }
    }
    for pod in claims.release {
        skip_gone(pod_claims::release(pods_api, &pod, &uid, CONTROLLER_NAME).await)?;
    }
    Ok(owned)
}

/// The ReplicaSet status for its active Pods, and the seconds until a Ready Pod becomes
/// available (when one is waiting out `minReadySeconds`).
fn status_of(rs: &ReplicaSet, active: &[Arc<Pod>]) -> (serde_json::Value, Option<i64>) {
    let now = Timestamp::now();
    let min_ready = rs
        .spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0);
    let template_labels: BTreeMap<String, String> = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let fully = active
        .iter()
        .filter(|p| {
            let labels = p.metadata.labels.clone().unwrap_or_default();
            template_labels
                .iter()
                .all(|(k, v)| labels.get(k) == Some(v))
        })
        .count();
    let ready = active
        .iter()
        .filter(|p| util::ready_since(p).is_some())
        .count();
    let available = active
        .iter()
        .filter(|p| is_pod_available(p, min_ready, now))
        .count();
    let next = active
        .iter()
        .filter_map(|p| util::seconds_until_available(p, min_ready, now))
        .min();
    let mut status = json!({
        "replicas": active.len(),
        "fullyLabeledReplicas": fully,
        "readyReplicas": ready,
        "availableReplicas": available,
        "observedGeneration": rs.metadata.generation.unwrap_or(0),
    });
    // Zero counts are absent from a real status (omitempty): a merge patch null removes them.
    if let Some(map) = status.as_object_mut() {
        for (k, v) in map.iter_mut() {
            if k != "replicas" && v == &json!(0) {
                *v = serde_json::Value::Null;
            }
        }
    }
    (status, next)
}

/// Upstream's deletion order (`ActivePodsWithRanks`): lower sorts first and is deleted first.
fn deletion_rank(pod: &Pod, now: Timestamp) -> (bool, u8, bool, i64, i64) {
    let assigned = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    let phase = match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Pending") | None => 0,
        Some("Running") => 2,
        _ => 1,
    };
    let ready = util::ready_since(pod);
    // Ready for a shorter time first; then newer first.
    let ready_for = ready.map_or(0, |t| now.as_second() - t.as_second());
    let created = pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(0, |t| t.0.as_second());
    (assigned, phase, ready.is_some(), ready_for, -created)
}

/// A Pod from the ReplicaSet's template (`GetPodFromTemplate`).
fn pod_from_template(rs: &ReplicaSet) -> Pod {
    let template = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", rs.name_any())),
            namespace: rs.namespace(),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![controller_ref(rs)]),
            ..ObjectMeta::default()
        },
        spec: template.spec,
        status: None,
    }
}

async fn record(ctx: &Context, rs: &ReplicaSet, reason: &str, note: String) {
    let reference: ObjectReference = rs.object_ref(&());
    let event = Event {
        type_: EventType::Normal,
        reason: reason.into(),
        note: Some(note),
        action: reason.into(),
        secondary: None,
    };
    if let Err(error) = ctx.recorder.publish(&event, &reference).await {
        tracing::debug!(%error, "cannot publish ReplicaSet Event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(node: Option<&str>, phase: &str, ready_at: Option<i64>, created: i64) -> Pod {
        let mut conditions = vec![];
        if let Some(t) = ready_at {
            conditions.push(json!({"type": "Ready", "status": "True",
                "lastTransitionTime": Timestamp::from_second(t).unwrap().to_string()}));
        }
        serde_json::from_value(json!({
            "metadata": {"name": format!("p{created}"),
                "creationTimestamp": Timestamp::from_second(created).unwrap().to_string()},
            "spec": {"containers": [], "nodeName": node},
            "status": {"phase": phase, "conditions": conditions},
        }))
        .unwrap()
    }

    #[test]
    fn surplus_pods_go_unscheduled_pending_unready_then_newest_first() {
        let now = Timestamp::from_second(10_000).unwrap();
        let mut pods = [
            pod(Some("n"), "Running", Some(1_000), 100),
            pod(Some("n"), "Running", Some(9_000), 200),
            pod(Some("n"), "Running", None, 300),
            pod(Some("n"), "Pending", None, 400),
            pod(None, "Pending", None, 500),
            pod(Some("n"), "Running", Some(9_000), 250),
        ];
        pods.sort_by_key(|p| deletion_rank(p, now));
        let order: Vec<String> = pods.iter().map(|p| p.name_any()).collect();
        assert_eq!(order, ["p500", "p400", "p300", "p250", "p200", "p100"]);
    }

    #[test]
    fn pods_are_named_after_and_owned_by_their_replica_set() {
        let rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": "web-5d9c7b", "namespace": "shop", "uid": "u1"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": "5d9c7b"}},
                    "spec": {"containers": [{"name": "c", "image": "hello-app:1.0"}]}}},
        }))
        .unwrap();
        let pod = pod_from_template(&rs);
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("web-5d9c7b-"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(controller_uid(&pod.metadata), Some("u1"));
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.api_version.as_str()),
            ("ReplicaSet", "apps/v1")
        );
        assert_eq!(owner.block_owner_deletion, Some(true));
        assert_eq!(pod.metadata.labels.unwrap()["pod-template-hash"], "5d9c7b");
        let (status, _) = status_of(&rs, &[]);
        assert_eq!(
            status,
            json!({"replicas": 0, "fullyLabeledReplicas": null, "readyReplicas": null,
                "availableReplicas": null, "observedGeneration": null})
        );
    }
}
