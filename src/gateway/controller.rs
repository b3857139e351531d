//! The Gateway controller's loop. Level-triggered and whole-cluster: every change of a watched
//! kind (GatewayClass, Gateway, HTTPRoute, TLSRoute, ReferenceGrant, Namespace, Service,
//! EndpointSlice, Pod, Secret, Node) wakes one loop that translates every Gateway of our classes from
//! the stores ([`super::translate`], pure), syncs each Gateway's load balancer, writes the
//! status of our GatewayClasses, Gateways and route parents (only where it changed), and then
//! collects garbage: the resources of Gateways and routes that are gone.
//!
//! One loop, one Gateway at a time: Gateways share backends (a Service behind two Gateways has
//! one backend service and one NEG), and collecting garbage while another sync is half done
//! could delete what it just made. Bursts of events are coalesced ([`COALESCE`]); a failed run
//! is retried after [`RETRY`]; everything is resynced every [`RESYNC`]. No finalizer is needed:
//! what no live Gateway wants is deleted by name, also after a restart.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use tokio::sync::Notify;

use super::api::gatewayclasses::GatewayClass;
use super::api::gateways::Gateway;
use super::api::httproutes::HttpRoute;
use super::api::referencegrants::ReferenceGrant;
use super::api::tlsroutes::TlsRoute;
use super::inputs::{GatewayInputs, RouteKind};
use super::network_services::NetworkServicesApi;
use super::status::{self, SyncOutcome};
use super::sync::{collect_garbage, sync_gateway, GatewaySyncError};
use super::translate::{our_classes, translate, GatewayConfig, Translation};
use crate::compute::Compute;
use crate::sync::firewalls::{self, FirewallOutcome, RuleState};
use crate::sync::ingress::BackendLocks;
use crate::translate::endpoints::{neg_zones, node_zone};
use crate::translate::{ClusterSnapshot, ObjectKey};

/// Pause after an event before a run, so that a burst of changes makes one run.
pub const COALESCE: Duration = Duration::from_millis(300);
/// Delay before retrying a run that failed.
pub const RETRY: Duration = Duration::from_secs(3);
/// Full resync period.
pub const RESYNC: Duration = Duration::from_secs(600);
/// How long to wait for a store's first list (a kind whose CRD is missing stays empty).
const FIRST_LIST: Duration = Duration::from_secs(30);

fn watch_store<K>(api: Api<K>, wake: Arc<Notify>) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let stream = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default()).default_backoff(),
    );
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(_) => wake.notify_one(),
                Err(e) => {
                    tracing::warn!(kind = %kind, error = %e, "watch failed; retrying (is the CRD installed?)")
                }
            }
        }
    });
    reader
}

struct Stores {
    classes: Store<GatewayClass>,
    gateways: Store<Gateway>,
    http_routes: Store<HttpRoute>,
    tls_routes: Store<TlsRoute>,
    grants: Store<ReferenceGrant>,
    namespaces: Store<Namespace>,
    services: Store<Service>,
    slices: Store<EndpointSlice>,
    pods: Store<crate::translate::pod::PodRecord>,
    secrets: Store<Secret>,
    nodes: Store<Node>,
}

fn keyed<K>(store: &Store<K>) -> BTreeMap<ObjectKey, Arc<K>>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store
        .state()
        .into_iter()
        .map(|o| (ObjectKey::of(o.as_ref()), o))
        .collect()
}

impl Stores {
    fn start(client: &Client, wake: &Arc<Notify>) -> Stores {
        let w = || wake.clone();
        Stores {
            classes: watch_store(Api::all(client.clone()), w()),
            gateways: watch_store(Api::all(client.clone()), w()),
            http_routes: watch_store(Api::all(client.clone()), w()),
            tls_routes: watch_store(Api::all(client.clone()), w()),
            grants: watch_store(Api::all(client.clone()), w()),
            namespaces: watch_store(Api::all(client.clone()), w()),
            services: watch_store(Api::all(client.clone()), w()),
            slices: watch_store(Api::all(client.clone()), w()),
            pods: watch_store(Api::all(client.clone()), w()),
            secrets: watch_store(Api::all(client.clone()), w()),
            nodes: watch_store(Api::all(client.clone()), w()),
        }
    }

    async fn wait_until_ready(&self) {
        macro_rules! wait {
            ($($s:ident),*) => {$(
                if tokio::time::timeout(FIRST_LIST, self.$s.wait_until_ready()).await.is_err() {
                    tracing::warn!(store = stringify!($s), "no first list yet; going on without it (is the CRD installed? does RBAC allow list and watch?)");
                }
            )*};
        }
        wait!(
            classes,
            gateways,
            http_routes,
            tls_routes,
            grants,
            namespaces,
            services,
            slices,
            pods,
            secrets,
            nodes
        );
    }

    fn inputs(&self) -> GatewayInputs {
        GatewayInputs {
            classes: self
                .classes
                .state()
                .into_iter()
                .map(|c| (c.name_any(), c))
                .collect(),
            gateways: keyed(&self.gateways),
            http_routes: keyed(&self.http_routes),
            tls_routes: keyed(&self.tls_routes),
            reference_grants: keyed(&self.grants),
            namespaces: self
                .namespaces
                .state()
                .into_iter()
                .map(|n| (n.name_any(), n.labels().clone()))
                .collect(),
            cluster: ClusterSnapshot {
                services: keyed(&self.services),
                endpoint_slices: keyed(&self.slices),
                pods: keyed(&self.pods),
                secrets: keyed(&self.secrets),
                // NEG zones follow the cluster's Nodes unless `--zone` pins them.
                node_zones: self
                    .nodes
                    .state()
                    .iter()
                    .filter_map(|n| {
                        let zone = node_zone(n.metadata.labels.as_ref()?)?;
                        Some((n.name_any(), zone.to_owned()))
                    })
                    .collect(),
                ..ClusterSnapshot::default()
            },
        }
    }
}

/// Runs the Gateway controller until the process ends.
pub async fn run(
    client: Client,
    compute: Arc<Compute>,
    netsvc: Arc<NetworkServicesApi>,
    config: GatewayConfig,
) {
    let wake = Arc::new(Notify::new());
    let stores = Stores::start(&client, &wake);
    stores.wait_until_ready().await;
    tracing::info!(controller_name = %config.controller_name, "Gateway controller started");
    let locks = BackendLocks::default();
    let mut firewall = RuleState::default();
    let mut delay = Duration::ZERO;
    loop {
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(if delay.is_zero() { RESYNC } else { delay }) => {}
        }
        tokio::time::sleep(COALESCE).await;
        let ok = run_once(
            &client,
            &compute,
            &netsvc,
            &config,
            &stores,
            &locks,
            &mut firewall,
        )
        .await;
        delay = if ok { Duration::ZERO } else { RETRY };
    }
}

/// One pass; `false` when something failed and a retry is due.
async fn run_once(
    client: &Client,
    compute: &Compute,
    netsvc: &NetworkServicesApi,
    config: &GatewayConfig,
    stores: &Stores,
    locks: &BackendLocks,
    firewall: &mut RuleState,
) -> bool {
    let inputs = stores.inputs();
    let t = translate(&inputs, config);
    let mut ok = true;
    let tc = &config.translate;
    let rule = super::firewall::desired(t.gateways.values().map(|p| &p.desired), tc);
    if let Some(rule) = &rule {
        let mut changes = Vec::new();
        match firewalls::ensure(compute, &tc.network_project, rule, firewall, &mut changes).await {
            Ok(FirewallOutcome::InSync) => {}
            Ok(FirewallOutcome::Forbidden { .. }) => tracing::warn!(
                rule = ?rule.name,
                "writing the Gateway firewall rule is forbidden (Shared VPC?); the security admin must create it"
            ),
            Err(e) => {
                ok = false;
                tracing::warn!(error = %e, "Gateway firewall rule sync failed; retrying");
            }
        }
        for c in &changes {
            tracing::info!(change = %c, "Gateway firewall");
        }
    }
    let mut outcomes = BTreeMap::new();
    for (key, plan) in &t.gateways {
        let mut changes = Vec::new();
        let outcome = match sync_gateway(compute, netsvc, locks, &plan.desired, &mut changes).await
        {
            Ok(s) => SyncOutcome::Ok(s.ip),
            Err(GatewaySyncError::Address(why)) => SyncOutcome::Address(why),
            Err(e) => {
                ok = false;
                tracing::warn!(gateway = %key, error = %e, "Gateway sync failed; retrying");
                SyncOutcome::Failed(e.to_string())
            }
        };
        for c in &changes {
            tracing::info!(gateway = %key, change = %c, "Gateway sync");
        }
        outcomes.insert(key.clone(), outcome);
    }
    if let Err(e) = write_status(client, config, &inputs, &t, &outcomes).await {
        ok = false;
        tracing::warn!(error = %e, "writing Gateway API status failed; retrying");
    }
    // Garbage: only after a pass in which every Gateway synced, so nothing a failed sync still
    // needs (an old certificate, a backend being replaced) goes early.
    if ok {
        let mut wanted: BTreeMap<&'static str, BTreeSet<String>> = BTreeMap::new();
        for plan in t.gateways.values() {
            for (coll, names) in plan.desired.names() {
                wanted.entry(coll).or_default().extend(names);
            }
        }
        let mut changes = Vec::new();
        let zones: Vec<String> = neg_zones(&inputs.cluster, tc, []).into_iter().collect();
        if let Err(e) = collect_garbage(
            compute,
            netsvc,
            &tc.cluster_uid,
            &zones,
            &wanted,
            &mut changes,
        )
        .await
        {
            ok = false;
            tracing::warn!(error = %e, "Gateway garbage collection failed; retrying");
        } else if rule.is_none() {
            let name = super::firewall::name(&tc.cluster_uid);
            if let Err(e) =
                firewalls::delete(compute, &tc.network_project, &name, firewall, &mut changes).await
            {
                ok = false;
                tracing::warn!(error = %e, "deleting the Gateway firewall rule failed; retrying");
            }
        }
        for c in &changes {
            tracing::info!(change = %c, "Gateway garbage collection");
        }
    }
    ok
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

async fn patch_status<K>(api: Api<K>, name: &str, status: Value) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .map(drop)
}

async fn write_status(
    client: &Client,
    config: &GatewayConfig,
    inputs: &GatewayInputs,
    t: &Translation,
    outcomes: &BTreeMap<ObjectKey, SyncOutcome>,
) -> Result<(), kube::Error> {
    let now = now();
    for name in our_classes(inputs, config) {
        let Some(c) = inputs.classes.get(&name) else {
            continue;
        };
        let previous = serde_json::to_value(&c.status).unwrap_or_default();
        let prev = previous["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let want = status::gateway_class(c.meta().generation, &prev, &now);
        if !same(&previous, &want) {
            patch_status(Api::<GatewayClass>::all(client.clone()), &name, want).await?;
        }
    }
    for (key, plan) in &t.gateways {
        let Some(gw) = inputs.gateways.get(key) else {
            continue;
        };
        let previous = serde_json::to_value(&gw.status).unwrap_or_default();
        let outcome = outcomes
            .get(key)
            .cloned()
            .unwrap_or(SyncOutcome::Failed("not synced".into()));
        let want = status::gateway(plan, &outcome, &previous, &now);
        if !same(&previous, &want) {
            patch_status(
                Api::<Gateway>::namespaced(client.clone(), &key.namespace),
                &key.name,
                want,
            )
            .await?;
        }
    }
    for route in inputs.routes() {
        let previous = match route.kind {
            RouteKind::Http => inputs
                .http_routes
                .get(&route.key)
                .map(|r| serde_json::to_value(&r.status)),
            RouteKind::Tls => inputs
                .tls_routes
                .get(&route.key)
                .map(|r| serde_json::to_value(&r.status)),
        }
        .and_then(Result::ok)
        .unwrap_or_default();
        let (generation, ours) = t
            .routes
            .get(&(route.kind, route.key.clone()))
            .cloned()
            .unwrap_or((route.generation, Vec::new()));
        let parents =
            status::route_parents(&config.controller_name, generation, &ours, &previous, &now);
        if previous["parents"].as_array().map_or(0, Vec::len) == 0 && ours.is_empty() {
            continue;
        }
        if previous["parents"] == parents {
            continue;
        }
        let ns = &route.key.namespace;
        let body = json!({ "parents": parents });
        match route.kind {
            RouteKind::Http => {
                patch_status(
                    Api::<HttpRoute>::namespaced(client.clone(), ns),
                    &route.key.name,
                    body,
                )
                .await?
            }
            RouteKind::Tls => {
                patch_status(
                    Api::<TlsRoute>::namespaced(client.clone(), ns),
                    &route.key.name,
                    body,
                )
                .await?
            }
        }
    }
    Ok(())
}

/// Whether `previous` already holds every field of `want` with the same value.
fn same(previous: &Value, want: &Value) -> bool {
    want.as_object()
        .is_some_and(|w| w.iter().all(|(k, v)| previous.get(k) == Some(v)))
}
