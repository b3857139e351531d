//! Reflector stores for every kind translation reads, and the [`ClusterSnapshot`] built from
//! them. Each store's watch is also the controller's trigger stream for its kind
//! ([`Stores::trigger_stream`]), so a reconcile never reads a store older than the change that
//! triggered it; only Nodes have a reflector of their own. The CRD kinds (BackendConfig,
//! FrontendConfig, ManagedCertificate, TLSCertificateDelegation) are optional: when their CRD
//! is not installed the store stays empty and a warning is logged.
//!
//! Readiness is published once through a `tokio::sync::watch` channel rather than by letting
//! every task call `Store::wait_until_ready`: kube-runtime 5's `DelayedInit` wraps a oneshot
//! receiver that keeps a single waker, so with several concurrent waiters on one store only the
//! last one to poll is woken and the others hang forever (seen as a missing "stores synced" line).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::ns_index::NamespaceIndex;
use super::prune;
use crate::crd::{BackendConfig, FrontendConfig, ManagedCertificate, TLSCertificateDelegation};
use crate::readiness::lookup::NodeMeta;
use crate::translate::endpoints::node_zone;
use crate::translate::pod::PodRecord;
use crate::translate::{ClusterSnapshot, SnapshotObject};

/// Read handles of every store.
#[derive(Clone)]
pub struct Stores {
    /// Ingresses (the controller's own store).
    pub ingresses: Store<Ingress>,
    /// Services.
    pub services: Store<Service>,
    /// EndpointSlices.
    pub endpoint_slices: Store<EndpointSlice>,
    /// Pods, as compact [`PodRecord`]s.
    pub pods: Store<PodRecord>,
    /// IngressClasses.
    pub ingress_classes: Store<IngressClass>,
    /// `kubernetes.io/tls` Secrets (for `spec.tls`; [`TLS_SECRETS`]).
    pub secrets: Store<Secret>,
    /// BackendConfigs (empty when the CRD is absent).
    pub backend_configs: Store<BackendConfig>,
    /// FrontendConfigs (empty when the CRD is absent).
    pub frontend_configs: Store<FrontendConfig>,
    /// ManagedCertificates (empty when the CRD is absent).
    pub managed_certificates: Store<ManagedCertificate>,
    /// TLSCertificateDelegations (empty when the CRD is absent: then no Secret of another
    /// namespace is ever used, default deny).
    pub tls_certificate_delegations: Store<TLSCertificateDelegation>,
    /// Nodes, metadata only (their zones).
    pub nodes: Store<NodeMeta>,
    /// The set of Node zones; changes when a zone gains its first Node or loses its last.
    pub zones: watch::Receiver<BTreeSet<String>>,
    /// The kinds a reconcile's snapshot takes by namespace ([`Stores::snapshot_for`]).
    by_namespace: ByNamespace,
    ready: Arc<tokio::sync::watch::Sender<bool>>,
}

/// Namespace indexes of the stores that grow with the cluster ([`NamespaceIndex`]).
#[derive(Clone)]
pub struct ByNamespace {
    /// Ingresses.
    pub ingresses: NamespaceIndex<Ingress>,
    /// Services.
    pub services: NamespaceIndex<Service>,
    /// EndpointSlices.
    pub endpoint_slices: NamespaceIndex<EndpointSlice>,
    /// Pods.
    pub pods: NamespaceIndex<PodRecord>,
    /// TLS Secrets.
    pub secrets: NamespaceIndex<Secret>,
}

/// How often a store's first-list wait is re-polled, so a wake-up taken by another waiter of the
/// same `DelayedInit` (single waker) is recovered.
const REPOLL: Duration = Duration::from_millis(200);

/// Waits for `store`'s first full list, robust to other tasks polling the same store; logs it.
fn first_list<K>(kind: &'static str, store: Store<K>) -> BoxFuture<'static, ()>
where
    K: kube::runtime::reflector::Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    async move {
        loop {
            match tokio::time::timeout(REPOLL, store.wait_until_ready()).await {
                Ok(Ok(())) => {
                    tracing::info!(
                        kind,
                        objects = store.state().len(),
                        "store synced: first list complete"
                    );
                    return;
                }
                Ok(Err(e)) => {
                    tracing::warn!(kind, error = %e, "store writer gone before its first list");
                    return;
                }
                Err(_) => continue,
            }
        }
    }
    .boxed()
}

/// The Secrets the store watches: `spec.tls` certificates (type `kubernetes.io/tls`).
/// RBAC cannot grant by type, so the list/watch grant covers every Secret, but with this
/// field selector (served for Secrets by every API server) no other Secret is ever sent to the
/// operator or cached by it. The few other Secrets translation reads (an `Opaque` `spec.tls`
/// Secret, the IAP OAuth client Secret) are read by name per reconcile ([`super::secrets`]).
pub const TLS_SECRETS: &str = "type=kubernetes.io/tls";

/// Watch settings of the Secret store and trigger: [`TLS_SECRETS`] only.
pub fn secrets_watch() -> watcher::Config {
    watcher::Config::default().fields(TLS_SECRETS)
}

/// A store, its [`NamespaceIndex`] and the reflector of the `K`s in the cluster that `config`
/// selects, which keeps both, each object `prune`d before it is stored: the controller's
/// trigger streams ([`Stores::ingress_stream`], [`Stores::trigger_stream`]) are made from its
/// watch events. The store is fed only as the
/// stream is polled (nothing is spawned).
fn trigger_reflector<K>(
    client: &Client,
    config: watcher::Config,
    prune: fn(&mut K),
) -> (
    NamespaceIndex<K>,
    impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (reader, writer) = reflector::store();
    let index = NamespaceIndex::new(reader);
    let seen = index.clone();
    let api: Api<K> = Api::all(client.clone());
    let events = reflector::reflector(writer, watcher(api, config).modify(prune))
        .inspect_ok(move |event| seen.apply(event));
    (index, events)
}

/// Starts the Node metadata reflector (names and labels are all the operator needs: the zone)
/// and returns its store and a channel holding the set of Node zones, changed only when that
/// set changes (a zone's first Node appears or its last one goes).
fn spawn_node_reflector(client: &Client) -> (Store<NodeMeta>, watch::Receiver<BTreeSet<String>>) {
    let (reader, writer) = reflector::store();
    let (zones_tx, zones_rx) = watch::channel(BTreeSet::new());
    let api: Api<NodeMeta> = Api::all(client.clone());
    let stream = watcher(api, watcher::Config::default())
        .modify(prune::metadata::<NodeMeta>)
        .default_backoff()
        .reflect(writer);
    let store = reader.clone();
    tokio::spawn(async move {
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(_) => {
                    let zones = node_zones(&store).into_values().collect::<BTreeSet<_>>();
                    zones_tx.send_if_modified(|old| {
                        let changed = *old != zones;
                        if changed {
                            tracing::info!(?zones, "the cluster's Node zones changed");
                            *old = zones;
                        }
                        changed
                    });
                }
                Err(e) => tracing::warn!(kind = "Node", error = %e, "watch error"),
            }
        }
    });
    (reader, zones_rx)
}

/// Zone of every Node that has one, by Node name.
fn node_zones(nodes: &Store<NodeMeta>) -> BTreeMap<String, String> {
    nodes
        .state()
        .iter()
        .filter_map(|n| {
            let labels = n.metadata.labels.as_ref()?;
            Some((n.metadata.name.clone()?, node_zone(labels)?.to_owned()))
        })
        .collect()
}

/// Whether the API serves `K` (for the optional CRD kinds).
async fn served<K>(client: &Client) -> bool
where
    K: Resource + Clone + DeserializeOwned + Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::all(client.clone());
    match api.list(&kube::api::ListParams::default().limit(1)).await {
        Ok(_) => true,
        Err(e) => {
            let kind = K::kind(&K::DynamicType::default()).to_string();
            tracing::warn!(%kind, error = %e, "{kind} is not served (CRD not installed?); continuing without it");
            false
        }
    }
}

/// A store that is never written, ready at once (an optional CRD kind the API does not serve).
fn empty_store<K>() -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (reader, mut writer) = reflector::store::<K>();
    writer.apply_watcher_event(&watcher::Event::InitDone);
    reader
}

/// The stores kept by the controller's trigger streams ([`Stores::trigger_stream`]), handed
/// to [`Stores::start`]; the kinds that grow with the cluster come with their namespace
/// indexes.
pub struct Triggered {
    /// Ingresses ([`Stores::ingress_stream`]).
    pub ingresses: NamespaceIndex<Ingress>,
    /// Pods, as compact [`PodRecord`]s ([`PodRecord::prune`]).
    pub pods: NamespaceIndex<PodRecord>,
    /// Services.
    pub services: NamespaceIndex<Service>,
    /// EndpointSlices.
    pub endpoint_slices: NamespaceIndex<EndpointSlice>,
    /// TLS Secrets ([`secrets_watch`], [`prune::secret`]).
    pub secrets: NamespaceIndex<Secret>,
    /// IngressClasses.
    pub ingress_classes: Store<IngressClass>,
    /// BackendConfigs ([`Stores::optional_trigger_stream`]).
    pub backend_configs: Store<BackendConfig>,
    /// FrontendConfigs.
    pub frontend_configs: Store<FrontendConfig>,
    /// ManagedCertificates.
    pub managed_certificates: Store<ManagedCertificate>,
    /// TLSCertificateDelegations.
    pub tls_certificate_delegations: Store<TLSCertificateDelegation>,
}

impl Stores {
    /// Starts the Node reflector (the only store that is not also a trigger stream) and the
    /// task that publishes readiness once every store has its first list; `triggered` holds
    /// the stores the controller's trigger streams keep ([`Stores::trigger_stream`]).
    pub fn start(client: &Client, triggered: Triggered) -> Self {
        let (nodes, zones) = spawn_node_reflector(client);
        Self {
            ingresses: triggered.ingresses.store(),
            services: triggered.services.store(),
            endpoint_slices: triggered.endpoint_slices.store(),
            pods: triggered.pods.store(),
            ingress_classes: triggered.ingress_classes,
            secrets: triggered.secrets.store(),
            backend_configs: triggered.backend_configs,
            frontend_configs: triggered.frontend_configs,
            managed_certificates: triggered.managed_certificates,
            tls_certificate_delegations: triggered.tls_certificate_delegations,
            nodes,
            zones,
            by_namespace: ByNamespace {
                ingresses: triggered.ingresses,
                services: triggered.services,
                endpoint_slices: triggered.endpoint_slices,
                pods: triggered.pods,
                secrets: triggered.secrets,
            },
            ready: Arc::new(tokio::sync::watch::channel(false).0),
        }
        .watch_first_lists()
    }

    /// The Ingress store's reflector, as the controller's main trigger stream: every Ingress
    /// applied, with `managedFields` and `last-applied-configuration` dropped before it is
    /// stored ([`prune::metadata`]; kube-runtime's own `Controller::new` would store them). The
    /// store is fed as the controller polls the stream (as with `Controller::new`).
    pub fn ingress_stream(
        client: &Client,
    ) -> (
        NamespaceIndex<Ingress>,
        impl futures::Stream<Item = Result<Ingress, watcher::Error>> + Send + 'static,
    ) {
        let (reader, events) = trigger_reflector(
            client,
            watcher::Config::default(),
            prune::metadata::<Ingress>,
        );
        (reader, events.applied_objects())
    }

    /// A store's reflector as a controller trigger stream of the objects it applied or deleted:
    /// the `K`s `config` selects, each `prune`d before it is stored ([`prune::metadata`] for
    /// most kinds). Every kind translation reads comes this way, except Nodes (they trigger
    /// through their zones). The reconcile a change triggers reads the store (through its
    /// index) only after the store has the change. With a second watch for the triggers
    /// (`Controller::watches`), a trigger could win the race against the store's own watch:
    /// the reconcile then translated the old object (a deleted Node's endpoint with its zone's
    /// NEG kept; the same for a rotated TLS Secret or an edited BackendConfig) and no later
    /// event came to correct it. The store is fed as the controller polls the stream.
    pub fn trigger_stream<K>(
        client: &Client,
        config: watcher::Config,
        prune: fn(&mut K),
    ) -> (
        NamespaceIndex<K>,
        impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
    )
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    {
        let (reader, events) = trigger_reflector(client, config, prune);
        (reader, events.touched_objects())
    }

    /// [`Stores::trigger_stream`] for an optional CRD kind: its store and trigger stream when
    /// the API serves `K`, else an empty store (ready at once) and no stream, with a warning.
    pub async fn optional_trigger_stream<K>(
        client: &Client,
    ) -> (
        Store<K>,
        Option<impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static>,
    )
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    {
        if served::<K>(client).await {
            let (index, events) =
                Self::trigger_stream(client, watcher::Config::default(), prune::metadata::<K>);
            (index.store(), Some(events))
        } else {
            (empty_store(), None)
        }
    }

    /// Spawns the one task that waits on every store's first list and then publishes readiness.
    fn watch_first_lists(self) -> Self {
        let waits = vec![
            first_list("Ingress", self.ingresses.clone()),
            first_list("Service", self.services.clone()),
            first_list("EndpointSlice", self.endpoint_slices.clone()),
            first_list("Pod", self.pods.clone()),
            first_list("IngressClass", self.ingress_classes.clone()),
            first_list("Secret", self.secrets.clone()),
            first_list("BackendConfig", self.backend_configs.clone()),
            first_list("FrontendConfig", self.frontend_configs.clone()),
            first_list("ManagedCertificate", self.managed_certificates.clone()),
            first_list(
                "TLSCertificateDelegation",
                self.tls_certificate_delegations.clone(),
            ),
            first_list("Node", self.nodes.clone()),
        ];
        // The indexes follow their stores: ready when they have (see `ns_index`).
        let by = self.by_namespace.clone();
        let waits = waits.into_iter().chain([async move {
            by.ingresses.wait_until_synced().await;
            by.services.wait_until_synced().await;
            by.endpoint_slices.wait_until_synced().await;
            by.pods.wait_until_synced().await;
            by.secrets.wait_until_synced().await;
        }
        .boxed()]);
        let ready = self.ready.clone();
        tokio::spawn(async move {
            futures::future::join_all(waits).await;
            ready.send_replace(true);
        });
        self
    }

    /// Waits until every store has its first full list; then [`Stores::is_ready`] is true.
    /// Any number of tasks may wait at once (a `watch` channel, not the stores' single waker).
    pub async fn wait_until_ready(&self) {
        let mut rx = self.ready.subscribe();
        // The sender lives in `self`, so this only ends once readiness is published.
        let _ = rx.wait_for(|ready| *ready).await;
    }

    /// Whether every store has synced once (`/readyz`).
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// A point-in-time copy of the stores for translating Ingresses of `namespaces` (an
    /// Ingress's own namespace, the default backend's and those its `spec.tls` delegation forms
    /// name: [`super::reconcile::translation_namespaces`]): Services, EndpointSlices, Pods and
    /// TLS Secrets of those namespaces only, the kinds that grow with the cluster; Ingresses of
    /// those namespaces only when `other_ingresses` (translation reads other Ingresses only
    /// for `ncp/whitelist-source-range`:
    /// [`crate::translate::source_ranges::reads_other_ingresses`]), else none; the small kinds
    /// (IngressClasses, the CRDs, Node zones) in full. Translation reads no others: an
    /// Ingress's Services (and their BackendConfigs, whose IAP Secret is in the Service's
    /// namespace) are in its own namespace or are the default backend, the Pods it reads are
    /// the ones its Services select or its EndpointSlices name (same namespace), and `spec.tls`
    /// Secrets are in its namespace or a delegating one.
    ///
    /// Per reconcile this costs O(objects of those namespaces), read from the stores'
    /// [`NamespaceIndex`]es, not O(cluster). Copying every Pod into every reconcile's snapshot
    /// kept both cores busy at 10k Pods, so the controller stopped draining its Ingress watch
    /// and reconciled stale Ingresses into 422s; scanning the stores for the namespaces' objects
    /// instead was still 41 % of the operator's CPU at 2000 Ingresses (docs/performance.md,
    /// issue 18).
    pub fn snapshot_for(&self, namespaces: &[String], other_ingresses: bool) -> ClusterSnapshot {
        fn fill<K>(s: &mut ClusterSnapshot, index: &NamespaceIndex<K>, namespaces: &[&String])
        where
            K: SnapshotObject + Clone + kube::runtime::reflector::Lookup,
            <K as kube::runtime::reflector::Lookup>::DynamicType:
                Eq + std::hash::Hash + Clone + Default,
        {
            for namespace in namespaces {
                for object in index.in_namespace(namespace) {
                    s.insert_shared(object);
                }
            }
        }
        let namespaces: BTreeSet<&String> = namespaces.iter().collect();
        let namespaces: Vec<&String> = namespaces.into_iter().collect();
        let by = &self.by_namespace;
        let mut s = self.snapshot_of_small_kinds();
        if other_ingresses {
            fill(&mut s, &by.ingresses, &namespaces);
        }
        fill(&mut s, &by.services, &namespaces);
        fill(&mut s, &by.endpoint_slices, &namespaces);
        fill(&mut s, &by.pods, &namespaces);
        fill(&mut s, &by.secrets, &namespaces);
        s
    }

    /// A point-in-time copy of every store (the whole-cluster jobs: garbage collection and the
    /// firewall rule translate every Ingress).
    pub fn snapshot(&self) -> ClusterSnapshot {
        let mut s = self.snapshot_of_small_kinds();
        fill_all(&mut s, &self.ingresses);
        fill_all(&mut s, &self.services);
        fill_all(&mut s, &self.endpoint_slices);
        fill_all(&mut s, &self.pods);
        fill_all(&mut s, &self.secrets);
        s
    }

    /// The kinds every snapshot holds in full: IngressClasses, the CRD kinds and Node zones.
    fn snapshot_of_small_kinds(&self) -> ClusterSnapshot {
        let mut s = ClusterSnapshot::default();
        fill_all(&mut s, &self.ingress_classes);
        fill_all(&mut s, &self.backend_configs);
        fill_all(&mut s, &self.frontend_configs);
        fill_all(&mut s, &self.managed_certificates);
        fill_all(&mut s, &self.tls_certificate_delegations);
        s.node_zones = node_zones(&self.nodes);
        s
    }
}

/// Every object of `store` into `s` (the stores' own `Arc`s: a snapshot shares the objects
/// instead of copying them).
fn fill_all<K>(s: &mut ClusterSnapshot, store: &Store<K>)
where
    K: SnapshotObject + Clone + kube::runtime::reflector::Lookup,
    <K as kube::runtime::reflector::Lookup>::DynamicType: Eq + std::hash::Hash + Clone,
{
    for object in store.state() {
        s.insert_shared(object);
    }
}

/// Stores holding the objects of `snapshot` (tests of what reads them).
#[cfg(test)]
pub(crate) fn stores_holding(snapshot: &ClusterSnapshot) -> Stores {
    fn store_of<K>(objects: impl Iterator<Item = K>) -> Store<K>
    where
        K: kube::runtime::reflector::Lookup + Clone + 'static,
        K::DynamicType: Eq + std::hash::Hash + Clone + Default,
    {
        let (reader, mut writer) = reflector::store();
        for object in objects {
            writer.apply_watcher_event(&watcher::Event::Apply(object));
        }
        reader
    }
    fn all<K: Clone>(
        map: &BTreeMap<crate::translate::ObjectKey, Arc<K>>,
    ) -> impl Iterator<Item = K> + '_ {
        map.values().map(|o| K::clone(o))
    }
    let by_namespace = ByNamespace {
        ingresses: NamespaceIndex::new(store_of(all(&snapshot.ingresses))),
        services: NamespaceIndex::new(store_of(all(&snapshot.services))),
        endpoint_slices: NamespaceIndex::new(store_of(all(&snapshot.endpoint_slices))),
        pods: NamespaceIndex::new(store_of(all(&snapshot.pods))),
        secrets: NamespaceIndex::new(store_of(all(&snapshot.secrets))),
    };
    Stores {
        ingresses: by_namespace.ingresses.store(),
        services: by_namespace.services.store(),
        endpoint_slices: by_namespace.endpoint_slices.store(),
        pods: by_namespace.pods.store(),
        ingress_classes: store_of(all(&snapshot.ingress_classes)),
        secrets: by_namespace.secrets.store(),
        backend_configs: store_of(all(&snapshot.backend_configs)),
        frontend_configs: store_of(all(&snapshot.frontend_configs)),
        managed_certificates: store_of(all(&snapshot.managed_certificates)),
        tls_certificate_delegations: store_of(all(&snapshot.tls_certificate_delegations)),
        nodes: store_of(std::iter::empty()),
        zones: watch::channel(BTreeSet::new()).1,
        by_namespace,
        ready: Arc::new(tokio::sync::watch::channel(true).0),
    }
}

#[cfg(test)]
#[path = "stores_tests.rs"]
mod tests;
