//! Which readiness-gated NEGs a Pod belongs to (ingress-gce's `ReadinessGateEnabledNegs`).
//!
//! A Pod belongs to the NEGs of every Service port that an Ingress this operator owns routes to
//! (a rule backend, `spec.defaultBackend`, or the cluster default backend when the Ingress has
//! none), when the Service's selector matches the Pod's labels. NEG names come from
//! [`crate::translate::namer::backend`]; each NEG exists once per NEG zone (the `--zone`
//! override, else the zones of the cluster's Nodes: `translate::endpoints::neg_zones`).
//!
//! The same backends drive the webhook: a Pod gets the gate iff it is behind one
//! ([`NegLookup::gates_pod`]), whatever the zones (the webhook needs no Node cache).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;

use futures::future::BoxFuture;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::networking::v1::{Ingress, IngressServiceBackend};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client};

use super::neg::NegRef;
use crate::translate::endpoints::{neg_zones, node_zone};
use crate::translate::{owns_ingress, ClusterSnapshot, TranslateConfig};

/// Answers "which readiness-gated NEGs is a Pod with these labels in?".
pub trait NegLookup: Send + Sync {
    /// NEGs (one per zone) of Ingress-backed Service ports whose selector matches `labels` in
    /// `namespace`; sorted and without duplicates. Empty: the Pod is behind no owned Ingress.
    fn negs_for_pod(&self, namespace: &str, labels: &BTreeMap<String, String>) -> Vec<NegRef>;

    /// Whether a Pod with these labels in `namespace` is behind an Ingress-backed Service port
    /// (the webhook adds the gate), whatever zones its NEGs are in.
    fn gates_pod(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        !self.negs_for_pod(namespace, labels).is_empty()
    }

    /// Resolves when the answer reflects the cluster (the stores have listed once). Before
    /// that an empty answer means "not known yet", not rule 3.
    fn wait_synced(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// PURE: the NEGs a Pod belongs to, given the owned-Ingress inputs.
///
/// `ingresses` are all Ingresses (ownership is checked with `owns_ingress` against
/// `classes.ingress_classes`; the NEG zones come from `classes.node_zones`); `service` finds a
/// Service by namespace and name (an owned `Service` or an `Arc<Service>` from a store).
pub fn negs_for_pod<'a, S: std::borrow::Borrow<Service>>(
    ingresses: impl IntoIterator<Item = &'a Ingress>,
    service: impl Fn(&str, &str) -> Option<S>,
    classes: &ClusterSnapshot,
    config: &TranslateConfig,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> Vec<NegRef> {
    let zones = neg_zones(classes, config, []);
    let mut negs = BTreeSet::new();
    for name in gated_backends(ingresses, service, classes, config, namespace, labels) {
        for zone in &zones {
            negs.insert(NegRef::new(zone.clone(), name.clone()));
        }
    }
    negs.into_iter().collect()
}

/// PURE: the backend (= NEG) names of the Ingress-backed Service ports whose selector matches
/// a Pod with `labels` in `namespace` (see [`negs_for_pod`]).
pub fn gated_backends<'a, S: std::borrow::Borrow<Service>>(
    ingresses: impl IntoIterator<Item = &'a Ingress>,
    service: impl Fn(&str, &str) -> Option<S>,
    classes: &ClusterSnapshot,
    config: &TranslateConfig,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> BTreeSet<String> {
    let mut backends: BTreeSet<(String, String, PortRef)> = BTreeSet::new();
    for ingress in ingresses {
        if !owns_ingress(classes, ingress, config) {
            continue;
        }
        let ns = ingress.metadata.namespace.clone().unwrap_or_default();
        let spec = ingress.spec.as_ref();
        let default = spec
            .and_then(|s| s.default_backend.as_ref())
            .and_then(|b| b.service.as_ref());
        match default {
            Some(svc) => {
                backends.insert((ns.clone(), svc.name.clone(), PortRef::of(svc)));
            }
            None => {
                if let Some((dns, dname, dport)) = &config.default_backend {
                    let port = dport
                        .parse::<i32>()
                        .map_or_else(|_| PortRef::Name(dport.clone()), PortRef::Number);
                    backends.insert((dns.clone(), dname.clone(), port));
                }
            }
        }
        let paths = spec
            .and_then(|s| s.rules.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|r| r.http.as_ref())
            .flat_map(|h| h.paths.iter());
        for path in paths {
            if let Some(svc) = path.backend.service.as_ref() {
                backends.insert((ns.clone(), svc.name.clone(), PortRef::of(svc)));
            }
        }
    }
    let mut names = BTreeSet::new();
    for (ns, name, port) in backends {
        if ns != namespace {
            continue;
        }
        let Some(svc) = service(&ns, &name) else {
            continue;
        };
        let Some(spec) = svc.borrow().spec.as_ref() else {
            continue;
        };
        let selector = spec.selector.as_ref().filter(|s| !s.is_empty());
        let Some(selector) = selector else {
            continue;
        };
        if !selector.iter().all(|(k, v)| labels.get(k) == Some(v)) {
            continue;
        }
        let ports = spec.ports.iter().flatten();
        let number = match &port {
            PortRef::Number(n) => ports.clone().find(|p| p.port == *n).map(|p| p.port),
            PortRef::Name(n) => ports
                .clone()
                .find(|p| p.name.as_deref() == Some(n))
                .map(|p| p.port),
        };
        let Some(number) = number else {
            continue;
        };
        names.insert(config.backend_name(&ns, &name, number));
    }
    names
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum PortRef {
    Number(i32),
    Name(String),
}

impl PortRef {
    fn of(backend: &IngressServiceBackend) -> Self {
        let port = backend.port.as_ref();
        match (
            port.and_then(|p| p.number),
            port.and_then(|p| p.name.clone()),
        ) {
            (Some(n), _) => Self::Number(n),
            (None, Some(name)) => Self::Name(name),
            (None, None) => Self::Number(0),
        }
    }
}

/// Node metadata (name and labels: the zone), as the operator caches Nodes.
pub type NodeMeta = PartialObjectMeta<Node>;

/// [`NegLookup`] over kube-runtime reflector stores of Ingresses, Services and IngressClasses
/// (and Nodes for the NEG zones, when given: [`StoreLookup::with_nodes`]).
#[derive(Clone)]
pub struct StoreLookup {
    ingresses: Store<Ingress>,
    services: Store<Service>,
    classes: Store<k8s_openapi::api::networking::v1::IngressClass>,
    nodes: Option<Store<NodeMeta>>,
    config: TranslateConfig,
}

impl StoreLookup {
    /// A lookup over stores someone else keeps up to date (e.g. the Ingress controller's).
    pub fn new(
        ingresses: Store<Ingress>,
        services: Store<Service>,
        classes: Store<k8s_openapi::api::networking::v1::IngressClass>,
        config: TranslateConfig,
    ) -> Self {
        Self {
            ingresses,
            services,
            classes,
            nodes: None,
            config,
        }
    }

    /// Reads the NEG zones from this Node store (unless the config pins them with `--zone`).
    /// Without it, and without `--zone`, [`NegLookup::negs_for_pod`] knows no zone (the
    /// webhook's [`NegLookup::gates_pod`] does not need one).
    pub fn with_nodes(mut self, nodes: Store<NodeMeta>) -> Self {
        self.nodes = Some(nodes);
        self
    }

    /// Ingress classes and Node zones, as [`negs_for_pod`] reads them.
    fn classes_and_zones(&self) -> ClusterSnapshot {
        let mut snapshot = ClusterSnapshot::default();
        for class in self.classes.state() {
            snapshot.insert_shared(class);
        }
        for node in self.nodes.iter().flat_map(Store::state) {
            let labels = node.metadata.labels.clone().unwrap_or_default();
            if let (Some(name), Some(zone)) = (&node.metadata.name, node_zone(&labels)) {
                snapshot.node_zones.insert(name.clone(), zone.to_owned());
            }
        }
        snapshot
    }

    /// A lookup with its own watches (all namespaces). The returned future runs the three
    /// reflectors until dropped; spawn it next to the readiness controller / webhook.
    /// Watch errors are retried with kube-runtime's default backoff and logged.
    pub fn watch(client: Client, config: TranslateConfig) -> (Self, impl Future<Output = ()>) {
        let (ingresses, ingress_writer) = reflector::store();
        let (services, service_writer) = reflector::store();
        let (classes, class_writer) = reflector::store();
        let cfg = watcher::Config::default();
        let run_ingresses = reflector::reflector(
            ingress_writer,
            watcher(Api::<Ingress>::all(client.clone()), cfg.clone()),
        )
        .default_backoff()
        .for_each(|r| async move { log_watch_error("Ingress", r.err()) });
        let run_services = reflector::reflector(
            service_writer,
            watcher(Api::<Service>::all(client.clone()), cfg.clone()),
        )
        .default_backoff()
        .for_each(|r| async move { log_watch_error("Service", r.err()) });
        let run_classes = reflector::reflector(
            class_writer,
            watcher(
                Api::<k8s_openapi::api::networking::v1::IngressClass>::all(client),
                cfg,
            ),
        )
        .default_backoff()
        .for_each(|r| async move { log_watch_error("IngressClass", r.err()) });
        let run = async move {
            futures::join!(run_ingresses, run_services, run_classes);
        };
        (Self::new(ingresses, services, classes, config), run)
    }
}

fn log_watch_error(kind: &'static str, err: Option<watcher::Error>) {
    if let Some(err) = err {
        tracing::warn!(kind, error = %err, "watch failed; retrying");
    }
}

impl NegLookup for StoreLookup {
    fn negs_for_pod(&self, namespace: &str, labels: &BTreeMap<String, String>) -> Vec<NegRef> {
        let ingresses = self.ingresses.state();
        negs_for_pod(
            ingresses.iter().map(|i| i.as_ref()),
            |ns, name| self.services.get(&ObjectRef::new(name).within(ns)),
            &self.classes_and_zones(),
            &self.config,
            namespace,
            labels,
        )
    }

    fn gates_pod(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        let ingresses = self.ingresses.state();
        !gated_backends(
            ingresses.iter().map(|i| i.as_ref()),
            |ns, name| self.services.get(&ObjectRef::new(name).within(ns)),
            &self.classes_and_zones(),
            &self.config,
            namespace,
            labels,
        )
        .is_empty()
    }

    fn wait_synced(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            // An error only means the writer was dropped (shutdown): nothing to wait for.
            let _ = futures::join!(
                self.ingresses.wait_until_ready(),
                self.services.wait_until_ready(),
                self.classes.wait_until_ready()
            );
        })
    }
}

/// A fixed lookup for tests and tools: the same NEGs for every Pod whose labels contain
/// `selector` in `namespace`.
#[derive(Clone, Debug, Default)]
pub struct StaticLookup {
    /// `(namespace, selector, negs)` entries; a Pod gets the union of every matching entry.
    pub entries: Vec<(String, BTreeMap<String, String>, Vec<NegRef>)>,
}

impl NegLookup for StaticLookup {
    fn negs_for_pod(&self, namespace: &str, labels: &BTreeMap<String, String>) -> Vec<NegRef> {
        let set: BTreeSet<NegRef> = self
            .entries
            .iter()
            .filter(|(ns, sel, _)| {
                ns == namespace && sel.iter().all(|(k, v)| labels.get(k) == Some(v))
            })
            .flat_map(|(_, _, negs)| negs.iter().cloned())
            .collect();
        set.into_iter().collect()
    }
}

#[cfg(test)]
#[path = "lookup_tests.rs"]
mod tests;
