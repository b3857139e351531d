//! One reconcile's view of a Deployment and the steps every strategy shares
//! (kubernetes/kubernetes `pkg/controller/deployment/sync.go`): the new ReplicaSet found or
//! created with its revision (`getNewReplicaSet`), a ReplicaSet scaled with its Event
//! (`scaleReplicaSetAndRecordEvent`), old ReplicaSets beyond `revisionHistoryLimit` deleted
//! (`cleanupDeployment`). Below the strategies ([`super::rolling`]) and the status
//! ([`super::progress`]) that call it, and below the controller loop ([`super`]) that builds it.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::Store;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use super::super::deployment_util::{self as util, POD_TEMPLATE_HASH, REVISION};
use super::super::expectations::{version_of, Expectations, Expected};
use super::super::owner_refs::{controller_ref, controller_uid};

/// The field manager and Event reporter of this controller.
pub const CONTROLLER_NAME: &str = "deployment-controller";

/// Errors of one reconcile (retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum DeploymentError {
    /// A request to the API failed.
    #[error("Deployment {deployment}: {action}: {source}")]
    Api {
        /// `namespace/name`.
        deployment: String,
        /// What was being done.
        action: String,
        /// The client error.
        source: kube::Error,
    },
}

/// What the reconciles share.
pub struct Context {
    pub(super) client: Client,
    pub(super) replica_sets: Store<ReplicaSet>,
    pub(super) pods: Store<Pod>,
    pub(super) expectations: Expectations,
    pub(super) recorder: Recorder,
}

/// One reconcile's view: the Deployment and the API handles for its namespace.
pub(super) struct DeploymentSync<'a> {
    pub(super) ctx: &'a Context,
    pub(super) d: Deployment,
    pub(super) key: String,
    pub(super) rs_api: Api<ReplicaSet>,
    /// The Deployments of its namespace (its own annotations and status are written here).
    pub(super) d_api: Api<Deployment>,
}

impl DeploymentSync<'_> {
    /// Every write of this controller is made as [`CONTROLLER_NAME`].
    pub(super) fn params() -> PatchParams {
        PatchParams {
            field_manager: Some(CONTROLLER_NAME.into()),
            ..PatchParams::default()
        }
    }

    /// Merge-patches ReplicaSet `name` and expects the write (so the next reconcile waits for
    /// the cache to see it); `action` names it in an error.
    pub(super) async fn patch_rs(
        &self,
        name: &str,
        patch: serde_json::Value,
        action: String,
    ) -> Result<ReplicaSet, DeploymentError> {
        let updated = self
            .rs_api
            .patch(name, &Self::params(), &Patch::Merge(patch))
            .await
            .map_err(self.error(action))?;
        self.expect(&updated, false);
        Ok(updated)
    }

    pub(super) fn error(
        &self,
        action: impl Into<String>,
    ) -> impl FnOnce(kube::Error) -> DeploymentError {
        let deployment = self.key.clone();
        let action = action.into();
        move |source| DeploymentError::Api {
            deployment,
            action,
            source,
        }
    }

    pub(super) fn expect(&self, rs: &ReplicaSet, deletion: bool) {
        self.ctx.expectations.expect(
            &self.key,
            Expected {
                key: format!("{}/{}", rs.namespace().unwrap_or_default(), rs.name_any()),
                resource_version: version_of(rs.metadata.resource_version.as_deref()),
                deletion,
            },
        );
    }

    pub(super) async fn record(&self, reason: &str, note: String) {
        let reference: ObjectReference = self.d.object_ref(&());
        let event = Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(note),
            action: reason.into(),
            secondary: None,
        };
        if let Err(error) = self.ctx.recorder.publish(&event, &reference).await {
            tracing::debug!(%error, "cannot publish Deployment Event");
        }
    }

    /// Sets a ReplicaSet's size and its desired/max replicas annotations
    /// (`scaleReplicaSetAndRecordEvent`); true when it wrote.
    pub(super) async fn scale(
        &self,
        rs: &mut ReplicaSet,
        size: i32,
    ) -> Result<bool, DeploymentError> {
        let desired = util::replicas(&self.d).to_string();
        let max = (util::replicas(&self.d) + util::max_surge(&self.d)).to_string();
        let annotations = rs.metadata.annotations.clone().unwrap_or_default();
        let old = util::rs_replicas(rs);
        if old == size
            && annotations.get(util::DESIRED_REPLICAS) == Some(&desired)
            && annotations.get(util::MAX_REPLICAS) == Some(&max)
        {
            return Ok(false);
        }
        let patch = json!({
            "metadata": {"annotations": {util::DESIRED_REPLICAS: desired, util::MAX_REPLICAS: max}},
            "spec": {"replicas": size},
        });
        let updated = self
            .patch_rs(
                &rs.name_any(),
                patch,
                format!("scaling ReplicaSet {}", rs.name_any()),
            )
            .await?;
        if old != size {
            let direction = if size > old { "up" } else { "down" };
            self.record(
                "ScalingReplicaSet",
                format!(
                    "Scaled {direction} replica set {} from {old} to {size}",
                    rs.name_any()
                ),
            )
            .await;
        }
        *rs = updated;
        Ok(true)
    }

    /// The Pods of the given ReplicaSets (by owner uid).
    pub(super) fn pods_of(&self, sets: &[ReplicaSet]) -> Vec<Arc<Pod>> {
        let uids: Vec<String> = sets.iter().filter_map(|rs| rs.uid()).collect();
        let ns = self.d.namespace();
        self.ctx
            .pods
            .state()
            .into_iter()
            .filter(|p| p.metadata.namespace == ns)
            .filter(|p| controller_uid(&p.metadata).is_some_and(|u| uids.iter().any(|x| x == u)))
            .collect()
    }
}

/// `FindNewReplicaSet`: the oldest ReplicaSet whose template is the Deployment's (ignoring
/// the hash label); the rest are old.
pub(super) fn split_new_and_old(
    d: &Deployment,
    owned: Vec<ReplicaSet>,
) -> (Option<ReplicaSet>, Vec<ReplicaSet>) {
    let template = d
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let mut new = None;
    let mut old = Vec::new();
    for rs in owned {
        let matches = rs
            .spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .is_some_and(|t| util::equal_ignore_hash(t, &template));
        if matches && new.is_none() {
            new = Some(rs);
        } else {
            old.push(rs);
        }
    }
    (new, old)
}

/// Annotations copied from the Deployment to its ReplicaSets (`skipCopyAnnotation`).
fn copied_annotations(d: &Deployment) -> BTreeMap<String, String> {
    d.metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| {
            k != "kubectl.kubernetes.io/last-applied-configuration"
                && k != REVISION
                && k != util::REVISION_HISTORY
                && k != util::DESIRED_REPLICAS
                && k != util::MAX_REPLICAS
        })
        .collect()
}

/// `getNewReplicaSet`: the new ReplicaSet with its revision brought up to `max old + 1` (and
/// the Deployment's revision annotation with it), created when `create` and none exists.
pub(super) async fn new_replica_set(
    sync: &DeploymentSync<'_>,
    existing: Option<ReplicaSet>,
    old: &[ReplicaSet],
    create: bool,
) -> Result<Option<ReplicaSet>, DeploymentError> {
    let d = &sync.d;
    let max_old = old
        .iter()
        .map(|rs| util::revision(rs.metadata.annotations.as_ref()))
        .max()
        .unwrap_or(0);
    let revision = (max_old + 1).to_string();
    let min_ready = d.spec.as_ref().and_then(|s| s.min_ready_seconds);
    if let Some(mut rs) = existing {
        let annotations = rs.metadata.annotations.clone().unwrap_or_default();
        let current = util::revision(Some(&annotations));
        let rs_min_ready = rs.spec.as_ref().and_then(|s| s.min_ready_seconds);
        if current < max_old + 1 || rs_min_ready != min_ready {
            let mut set = json!({});
            if current < max_old + 1 {
                set[REVISION] = json!(revision);
                if current > 0 {
                    let mut history: Vec<String> = annotations
                        .get(util::REVISION_HISTORY)
                        .map(|h| h.split(',').map(str::to_string).collect())
                        .unwrap_or_default();
                    history.push(current.to_string());
                    set[util::REVISION_HISTORY] = json!(history.join(","));
                }
            }
            let patch =
                json!({"metadata": {"annotations": set}, "spec": {"minReadySeconds": min_ready}});
            rs = sync
                .patch_rs(
                    &rs.name_any(),
                    patch,
                    "updating the new ReplicaSet's revision".into(),
                )
                .await?;
        }
        let rs_revision = util::revision(rs.metadata.annotations.as_ref());
        set_deployment_revision(sync, rs_revision).await?;
        return Ok(Some(rs));
    }
    if !create {
        return Ok(None);
    }
    let spec = d.spec.clone().unwrap_or_default();
    let collision = d.status.as_ref().and_then(|s| s.collision_count);
    let hash = util::pod_template_hash(&spec.template, collision);
    let mut template = spec.template.clone();
    let template_meta = template.metadata.get_or_insert_with(ObjectMeta::default);
    template_meta
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(POD_TEMPLATE_HASH.into(), hash.clone());
    let mut selector: LabelSelector = spec.selector.clone();
    selector
        .match_labels
        .get_or_insert_with(BTreeMap::new)
        .insert(POD_TEMPLATE_HASH.into(), hash.clone());
    let mut annotations = copied_annotations(d);
    annotations.insert(REVISION.into(), revision.clone());
    let replicas = util::new_rs_new_replicas(d, old.iter().map(util::rs_replicas).sum::<i32>(), 0);
    annotations.insert(util::DESIRED_REPLICAS.into(), util::replicas(d).to_string());
    annotations.insert(
        util::MAX_REPLICAS.into(),
        (util::replicas(d) + util::max_surge(d)).to_string(),
    );
    let mut labels = template_meta.labels.clone().unwrap_or_default();
    labels.insert(POD_TEMPLATE_HASH.into(), hash.clone());
    let rs = ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!("{}-{hash}", d.name_any())),
            namespace: d.namespace(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![controller_ref(d)]),
            ..ObjectMeta::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            min_ready_seconds: min_ready,
            selector,
            template: Some(template),
        }),
        status: None,
    };
    let created = match sync.rs_api.create(&PostParams::default(), &rs).await {
        Ok(created) => created,
        Err(kube::Error::Api(s)) if s.code == 409 => {
            // A ReplicaSet of that name with another template (a hash collision): count it,
            // so the next hash differs (`status.collisionCount`).
            let count = collision.unwrap_or(0) + 1;
            sync.d_api
                .patch_status(
                    &d.name_any(),
                    &DeploymentSync::params(),
                    &Patch::Merge(json!({"status": {"collisionCount": count}})),
                )
                .await
                .map_err(sync.error("counting a pod-template-hash collision"))?;
            return Ok(None);
        }
        Err(e) => return Err(sync.error("creating the new ReplicaSet")(e)),
    };
    sync.expect(&created, false);
    if replicas > 0 {
        sync.record(
            "ScalingReplicaSet",
            format!(
                "Scaled up replica set {} from 0 to {replicas}",
                created.name_any()
            ),
        )
        .await;
    }
    set_deployment_revision(sync, util::revision(created.metadata.annotations.as_ref())).await?;
    Ok(Some(created))
}

/// Writes the Deployment's revision annotation when it differs.
async fn set_deployment_revision(
    sync: &DeploymentSync<'_>,
    revision: i64,
) -> Result<(), DeploymentError> {
    if util::revision(sync.d.metadata.annotations.as_ref()) == revision {
        return Ok(());
    }
    let patch = json!({"metadata": {"annotations": {REVISION: revision.to_string()}}});
    sync.d_api
        .patch(
            &sync.d.name_any(),
            &DeploymentSync::params(),
            &Patch::Merge(patch),
        )
        .await
        .map_err(sync.error("writing the revision annotation"))?;
    Ok(())
}

/// `cleanupDeployment`: deletes the oldest old ReplicaSets beyond `revisionHistoryLimit` that
/// have no Pods left.
pub(super) async fn cleanup(
    sync: &DeploymentSync<'_>,
    old: &[ReplicaSet],
) -> Result<(), DeploymentError> {
    let Some(limit) = sync.d.spec.as_ref().and_then(|s| s.revision_history_limit) else {
        return Ok(());
    };
    let mut cleanable: Vec<&ReplicaSet> = old
        .iter()
        .filter(|rs| rs.metadata.deletion_timestamp.is_none())
        .collect();
    let excess = cleanable.len() as i64 - i64::from(limit);
    if excess <= 0 {
        return Ok(());
    }
    cleanable.sort_by_key(|rs| util::revision(rs.metadata.annotations.as_ref()));
    for rs in cleanable.into_iter().take(excess as usize) {
        let status = rs.status.clone().unwrap_or_default();
        let observed = status.observed_generation.unwrap_or(0);
        if status.replicas != 0
            || util::rs_replicas(rs) != 0
            || rs.metadata.generation.unwrap_or(0) > observed
        {
            continue;
        }
        match sync
            .rs_api
            .delete(&rs.name_any(), &DeleteParams::default())
            .await
        {
            Ok(_) => sync.expect(rs, true),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(sync.error("deleting an old ReplicaSet")(e)),
        }
    }
    Ok(())
}
