//! The EndpointSlice controller: a kube-runtime `Controller` over Services that writes the
//! slices [`super::endpoint_slice::plan`] computes. Triggers: the Service itself, its owned
//! slices (a slice edited or deleted by someone else is put back), and Pods (mapped to the
//! Services that select them now or did at the last reconcile), and Nodes (every Service, when a
//! Node appears, goes or changes its zone label: endpoints carry their Node's zone). Each
//! reconcile reads the Pods, Nodes and slices fresh from the API (LISTs), so a trigger never
//! races a cache, and writes only when the plan is not empty.
//!
//! Deleted Services: a real cluster's garbage collector removes their slices through the
//! ownerReference; this controller also deletes managed slices whose owning Service is gone,
//! so the local server needs no garbage collector.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, ResourceExt};

use super::endpoint_slice::{
    self, EndpointSliceError, NodeZones, CONTROLLER_NAME, MANAGED_BY_LABEL,
};
use super::nodes::ZONE_LABEL;

/// Errors of one reconcile.
#[derive(Debug, thiserror::Error)]
pub enum EndpointSliceControllerError {
    /// An API call failed.
    #[error("EndpointSlices of Service {service}: {action}: {source}")]
    Api {
        /// `namespace/name`.
        service: String,
        /// What was being done.
        action: &'static str,
        /// The client error.
        source: kube::Error,
    },
    /// The Service could not be planned for.
    #[error(transparent)]
    Plan(#[from] EndpointSliceError),
}

type ServiceKey = (String, String);

struct Context {
    client: Client,
    /// How long each reconcile waits before reading the Pods ([`super::LocalOptions`]).
    delay: Duration,
    /// Pods (by name) each Service selected at its last reconcile, so a Pod whose labels stop
    /// matching still triggers the Service it left.
    members: Mutex<BTreeMap<ServiceKey, BTreeSet<String>>>,
}

/// Runs the controller and the orphan cleanup until an unrecoverable error (never, in
/// practice: watch errors are retried with backoff). Each reconcile starts `delay` after its
/// trigger, so the slices lag the Pods as kube-controller-manager's do.
pub async fn run(client: Client, delay: Duration) {
    let services: Api<Service> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    let slices: Api<EndpointSlice> = Api::all(client.clone());
    let managed =
        watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={CONTROLLER_NAME}"));
    let ctx = Arc::new(Context {
        client: client.clone(),
        delay,
        members: Mutex::new(BTreeMap::new()),
    });

    let controller = Controller::new(services.clone(), watcher::Config::default());
    let service_store = controller.store();
    let mapper_ctx = ctx.clone();
    let controller = controller.owns(slices, managed).watches(
        pods,
        watcher::Config::default(),
        move |pod: Pod| {
            let namespace = pod.namespace().unwrap_or_default();
            let name = pod.name_any();
            let members = mapper_ctx
                .members
                .lock()
                .map(|m| m.clone())
                .unwrap_or_default();
            service_store
                .state()
                .into_iter()
                .filter(|svc| {
                    let key = (svc.namespace().unwrap_or_default(), svc.name_any());
                    endpoint_slice::selects(svc, &pod)
                        || (key.0 == namespace
                            && members.get(&key).is_some_and(|m| m.contains(&name)))
                })
                .map(|svc| ObjectRef::from_obj(svc.as_ref()))
                .collect::<Vec<_>>()
        },
    );
    let controller = controller.reconcile_all_on(zone_changes(Api::all(client.clone())));
    let reconciling = controller
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "EndpointSlice reconcile did not complete");
            }
        });
    tokio::join!(reconciling, cleanup_orphans(client, services));
}

async fn reconcile(
    service: Arc<Service>,
    ctx: Arc<Context>,
) -> Result<Action, EndpointSliceControllerError> {
    let namespace = service.namespace().unwrap_or_default();
    let name = service.name_any();
    let key = format!("{namespace}/{name}");
    let api_error = |action| {
        let service = key.clone();
        move |source| EndpointSliceControllerError::Api {
            service,
            action,
            source,
        }
    };
    if !ctx.delay.is_zero() {
        tokio::time::sleep(ctx.delay).await;
    }
    let slices: Api<EndpointSlice> = Api::namespaced(ctx.client.clone(), &namespace);
    let existing = slices
        .list(&ListParams::default().labels(&endpoint_slice::slice_selector(&name)))
        .await
        .map_err(api_error("listing slices"))?
        .items;

    if !endpoint_slice::manages(&service) {
        // A Service without a selector gets its endpoints out of band: drop what we manage.
        for slice in existing.iter().filter_map(|s| s.metadata.name.as_deref()) {
            delete_slice(&slices, slice)
                .await
                .map_err(api_error("deleting slice"))?;
        }
        forget(&ctx, &namespace, &name);
        return Ok(Action::await_change());
    }

    let selector = service
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .cloned()
        .unwrap_or_default();
    let label_selector: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let pods = pods
        .list(&ListParams::default().labels(&label_selector.join(",")))
        .await
        .map_err(api_error("listing Pods"))?
        .items;

    let nodes: NodeZones = Api::<Node>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await
        .map_err(api_error("listing Nodes"))?
        .items
        .iter()
        .map(|n| (n.name_any(), n.labels().get(ZONE_LABEL).cloned()))
        .collect();
    let plan = endpoint_slice::plan(&service, &pods, &nodes, &existing)?;
    if !plan.is_empty() {
        tracing::info!(
            service = %key,
            create = plan.create.len(),
            update = plan.update.len(),
            delete = plan.delete.len(),
            "writing EndpointSlices"
        );
    }
    for slice in &plan.create {
        slices
            .create(&PostParams::default(), slice)
            .await
            .map_err(api_error("creating slice"))?;
    }
    for slice in &plan.update {
        let slice_name = slice.metadata.name.clone().unwrap_or_default();
        // The stored resourceVersion rides along: a concurrent change gives 409 and a retry.
        slices
            .replace(&slice_name, &PostParams::default(), slice)
            .await
            .map_err(api_error("updating slice"))?;
    }
    for slice_name in &plan.delete {
        delete_slice(&slices, slice_name)
            .await
            .map_err(api_error("deleting slice"))?;
    }

    let selected: BTreeSet<String> = pods
        .iter()
        .filter(|p| endpoint_slice::selects(&service, p))
        .map(|p| p.name_any())
        .collect();
    if let Ok(mut members) = ctx.members.lock() {
        members.insert((namespace, name), selected);
    }
    Ok(Action::await_change())
}

/// One item each time a Node appears, is deleted or changes its zone label (status heartbeats
/// do not count): endpoints carry their Node's zone, so every Service is reconciled then.
fn zone_changes(nodes: Api<Node>) -> impl futures::Stream<Item = ()> + Send {
    let mut seen = NodeZones::new();
    let mut relisted = NodeZones::new();
    watcher(nodes, watcher::Config::default())
        .default_backoff()
        .filter_map(move |event| {
            let changed = match event {
                Ok(watcher::Event::Init) => {
                    relisted.clear();
                    false
                }
                Ok(watcher::Event::InitApply(node)) => {
                    relisted.insert(node.name_any(), node.labels().get(ZONE_LABEL).cloned());
                    false
                }
                Ok(watcher::Event::InitDone) => {
                    let changed = relisted != seen;
                    seen = std::mem::take(&mut relisted);
                    changed
                }
                Ok(watcher::Event::Apply(node)) => {
                    let zone = node.labels().get(ZONE_LABEL).cloned();
                    seen.insert(node.name_any(), zone.clone()) != Some(zone)
                }
                Ok(watcher::Event::Delete(node)) => seen.remove(&node.name_any()).is_some(),
                Err(_) => false,
            };
            futures::future::ready(changed.then_some(()))
        })
}

fn error_policy(
    service: Arc<Service>,
    error: &EndpointSliceControllerError,
    _ctx: Arc<Context>,
) -> Action {
    tracing::warn!(service = %format!("{}/{}", service.namespace().unwrap_or_default(), service.name_any()), %error, "EndpointSlice reconcile failed; retrying");
    Action::requeue(Duration::from_secs(1))
}

fn forget(ctx: &Context, namespace: &str, name: &str) {
    if let Ok(mut members) = ctx.members.lock() {
        members.remove(&(namespace.to_string(), name.to_string()));
    }
}

async fn delete_slice(slices: &Api<EndpointSlice>, name: &str) -> Result<(), kube::Error> {
    match slices.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Deletes managed slices whose owning Service no longer exists: after each (re)list of
/// Services and after each Service deletion.
async fn cleanup_orphans(client: Client, services: Api<Service>) {
    let mut live: HashSet<String> = HashSet::new();
    let mut relisting: HashSet<String> = HashSet::new();
    let mut events = watcher(services, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = events.next().await {
        let sweep = match event {
            Ok(watcher::Event::Init) => {
                relisting.clear();
                false
            }
            Ok(watcher::Event::InitApply(svc)) => {
                relisting.insert(svc.uid().unwrap_or_default());
                false
            }
            Ok(watcher::Event::InitDone) => {
                live = std::mem::take(&mut relisting);
                true
            }
            Ok(watcher::Event::Apply(svc)) => {
                live.insert(svc.uid().unwrap_or_default());
                false
            }
            Ok(watcher::Event::Delete(svc)) => {
                live.remove(&svc.uid().unwrap_or_default());
                true
            }
            Err(error) => {
                tracing::debug!(%error, "Service watch for slice cleanup interrupted");
                false
            }
        };
        if sweep {
            if let Err(error) = sweep_orphans(&client, &live).await {
                tracing::warn!(%error, "cannot clean up EndpointSlices of deleted Services");
            }
        }
    }
}

async fn sweep_orphans(client: &Client, live: &HashSet<String>) -> Result<(), kube::Error> {
    let slices: Api<EndpointSlice> = Api::all(client.clone());
    let managed = ListParams::default().labels(&format!("{MANAGED_BY_LABEL}={CONTROLLER_NAME}"));
    for slice in slices.list(&managed).await?.items {
        let Some(owner) = slice
            .owner_references()
            .iter()
            .find(|o| o.kind == "Service")
            .cloned()
        else {
            continue;
        };
        if live.contains(&owner.uid) {
            continue;
        }
        // The watch may lag a Service created a moment ago: ask the API before deleting.
        let namespace = slice.namespace().unwrap_or_default();
        let services: Api<Service> = Api::namespaced(client.clone(), &namespace);
        let current = services.get_opt(&owner.name).await?;
        if current.is_none_or(|svc| svc.uid().as_deref() != Some(owner.uid.as_str())) {
            let namespaced: Api<EndpointSlice> = Api::namespaced(client.clone(), &namespace);
            tracing::info!(slice = %slice.name_any(), "deleting EndpointSlice of a deleted Service");
            delete_slice(&namespaced, &slice.name_any()).await?;
        }
    }
    Ok(())
}
