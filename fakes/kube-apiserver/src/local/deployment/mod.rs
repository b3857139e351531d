//! The local Deployment controller (kubernetes/kubernetes `pkg/controller/deployment`): for each
//! Deployment it keeps one ReplicaSet per Pod template, named `<deployment>-<pod-template-hash>`
//! with the `pod-template-hash` label in its selector, template and Pods, and the
//! `deployment.kubernetes.io/revision` annotation (the Deployment carries its new ReplicaSet's);
//! it rolls from the old ReplicaSets to the new one by its strategy ([`rolling`]: RollingUpdate
//! with `maxSurge`/`maxUnavailable`, Recreate), scales proportionally when `spec.replicas`
//! changes mid-rollout, does nothing but scale while `spec.paused`, keeps
//! `revisionHistoryLimit` old ReplicaSets, and writes `status` with the `Available` and
//! `Progressing` conditions ([`progress`]). Availability is the ReplicaSets' own: Pods Ready
//! (readiness gates included) for `minReadySeconds`.
//!
//! A kube-runtime Controller, an ordinary client of the server, with [`Expectations`] so a
//! reconcile never acts on a cache that has not seen its own last writes.
//!
//! Simplified: no adoption of orphan ReplicaSets that match the selector; `kubectl rollout
//! undo` works the way kubectl does it today (it copies the old template into the Deployment),
//! the deprecated `spec.rollbackTo` is not read.

mod progress;
mod rolling;
mod sync;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector;
use kube::{Api, Client, ResourceExt};

use super::deployment_util as util;
use super::expectations::{version_of, Expectations};
use super::informer;
use super::owner_refs::controller_uid;
use sync::DeploymentSync;
pub use sync::{Context, DeploymentError, CONTROLLER_NAME};

/// Runs the controller until the future is dropped.
pub async fn run(client: Client) {
    let (replica_sets, rs_events) = informer::reflect_all::<ReplicaSet>(&client);
    let (pods, pod_events) = informer::reflect_all::<Pod>(&client);
    // Pod events matter to Recreate (old Pods gone); they reach the Deployment through their
    // ReplicaSet's owner reference, as upstream's `deletePod` handler does.
    let rs_of_pod = replica_sets.clone();
    let (deployments, d_events) = informer::reflect_all::<Deployment>(&client);
    let recorder = informer::recorder(&client, CONTROLLER_NAME);
    let context = Arc::new(Context {
        client,
        replica_sets,
        pods,
        expectations: Expectations::default(),
        recorder,
    });
    Controller::for_stream(d_events, deployments)
        .owns_stream(rs_events)
        .watches_stream(pod_events, move |pod: Pod| {
            let owner = controller_uid(&pod.metadata)?.to_string();
            let ns = pod.namespace()?;
            let rs = rs_of_pod
                .state()
                .into_iter()
                .find(|rs| rs.uid().as_deref() == Some(owner.as_str()))?;
            let d = rs
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|r| r.controller == Some(true) && r.kind == "Deployment")?;
            Some(reflector::ObjectRef::new(&d.name).within(&ns))
        })
        .run(reconcile, error_policy, context)
        .for_each(|_| async {})
        .await;
}

fn error_policy(_d: Arc<Deployment>, error: &DeploymentError, _ctx: Arc<Context>) -> Action {
    tracing::info!(%error, "Deployment sync failed; retrying");
    Action::requeue(Duration::from_secs(1))
}

async fn reconcile(d: Arc<Deployment>, ctx: Arc<Context>) -> Result<Action, DeploymentError> {
    let ns = d.namespace().unwrap_or_default();
    let key = format!("{ns}/{}", d.name_any());
    if d.metadata.deletion_timestamp.is_some() {
        ctx.expectations.forget(&key);
        return Ok(Action::await_change());
    }
    let cached = |rs_key: &str| {
        let (rns, rname) = rs_key.split_once('/').unwrap_or_default();
        ctx.replica_sets
            .get(&reflector::ObjectRef::new(rname).within(rns))
            .map(|rs| version_of(rs.metadata.resource_version.as_deref()))
    };
    if !ctx.expectations.satisfied(&key, cached) {
        return Ok(Action::requeue(Duration::from_millis(500)));
    }
    let uid = d.uid().unwrap_or_default();
    let mut owned: Vec<ReplicaSet> = ctx
        .replica_sets
        .state()
        .into_iter()
        .filter(|rs| rs.namespace().as_deref() == Some(ns.as_str()))
        .filter(|rs| controller_uid(&rs.metadata) == Some(uid.as_str()))
        .map(|rs| (*rs).clone())
        .collect();
    owned.sort_by_key(|rs| {
        (
            rs.metadata.creation_timestamp.as_ref().map(|t| t.0),
            rs.name_any(),
        )
    });
    let sync = DeploymentSync {
        ctx: &ctx,
        d: (*d).clone(),
        key,
        rs_api: Api::namespaced(ctx.client.clone(), &ns),
        d_api: Api::namespaced(ctx.client.clone(), &ns),
    };
    let paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
    let requeue = if paused || rolling::is_scaling_event(&sync.d, &owned) {
        rolling::sync_only(&sync, owned, paused).await?
    } else if util::is_rolling_update(&d) {
        rolling::rollout_rolling(&sync, owned).await?
    } else {
        rolling::rollout_recreate(&sync, owned).await?
    };
    Ok(match requeue {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    })
}
