//! The cluster objects translation reads: a point-in-time copy of the controller's stores.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::ResourceExt;

use super::pod::PodRecord;
use crate::crd::{BackendConfig, FrontendConfig, ManagedCertificate, TLSCertificateDelegation};

/// Identity of a Kubernetes object: namespace (`""` for cluster-scoped objects) and name.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// Namespace; empty for cluster-scoped objects such as IngressClass.
    pub namespace: String,
    /// Object name.
    pub name: String,
}

impl ObjectKey {
    /// Key from a namespace and a name.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// Key of an object from its metadata (`namespace` empty when unset).
    pub fn of<K: ResourceExt>(object: &K) -> Self {
        Self::new(object.namespace().unwrap_or_default(), object.name_any())
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

/// Everything translation may look at. All maps are keyed by [`ObjectKey`] and ordered, so
/// iteration (and therefore the output) never depends on insertion order.
#[derive(Clone, Debug, Default)]
pub struct ClusterSnapshot {
    /// Ingresses (all classes; ownership is decided by `owns_ingress`).
    pub ingresses: BTreeMap<ObjectKey, Arc<Ingress>>,
    /// Services.
    pub services: BTreeMap<ObjectKey, Arc<Service>>,
    /// EndpointSlices, keyed by the slice's own namespace/name; linked to their Service by the
    /// label `kubernetes.io/service-name`.
    pub endpoint_slices: BTreeMap<ObjectKey, Arc<EndpointSlice>>,
    /// Pods, as the operator caches them (for readiness probes and readiness gates).
    pub pods: BTreeMap<ObjectKey, Arc<PodRecord>>,
    /// IngressClasses (cluster scoped: namespace `""`).
    pub ingress_classes: BTreeMap<ObjectKey, Arc<IngressClass>>,
    /// Secrets: the controller's `kubernetes.io/tls` store, plus the other Secrets the Ingress
    /// being translated references, read by name (`crate::controller::secrets`).
    pub secrets: BTreeMap<ObjectKey, Arc<Secret>>,
    /// BackendConfigs.
    pub backend_configs: BTreeMap<ObjectKey, Arc<BackendConfig>>,
    /// FrontendConfigs.
    pub frontend_configs: BTreeMap<ObjectKey, Arc<FrontendConfig>>,
    /// ManagedCertificates.
    pub managed_certificates: BTreeMap<ObjectKey, Arc<ManagedCertificate>>,
    /// TLSCertificateDelegations: which Secrets of their namespace other namespaces may use
    /// (`crate::translate::secret_refs`).
    pub tls_certificate_delegations: BTreeMap<ObjectKey, Arc<TLSCertificateDelegation>>,
    /// Zone of each Node that has one (`topology.kubernetes.io/zone`), by Node name: where
    /// NEGs go and the zone of endpoints whose EndpointSlice entry names none.
    pub node_zones: BTreeMap<String, String>,
}

impl ClusterSnapshot {
    /// Inserts an object into the map for its kind, keyed by its metadata.
    pub fn insert<K: SnapshotObject>(&mut self, object: K) {
        K::insert_into(Arc::new(object), self);
    }

    /// Inserts a shared object (a reflector store's own `Arc`: no copy of the object).
    pub fn insert_shared<K: SnapshotObject>(&mut self, object: Arc<K>) {
        K::insert_into(object, self);
    }
}

/// The entries of one namespace in an [`ObjectKey`]-keyed map, in name order, without
/// scanning the other namespaces (keys sort by namespace first).
pub fn in_namespace<'a, V>(
    map: &'a BTreeMap<ObjectKey, V>,
    namespace: &'a str,
) -> impl Iterator<Item = (&'a ObjectKey, &'a V)> + 'a {
    map.range(ObjectKey::new(namespace, "")..)
        .take_while(move |(k, _)| k.namespace == namespace)
}

/// Kinds a [`ClusterSnapshot`] holds; lets tests and the controller insert generically.
pub trait SnapshotObject: ResourceExt + Sized {
    /// Inserts `object` into the right map of `snapshot`.
    fn insert_into(object: Arc<Self>, snapshot: &mut ClusterSnapshot);
}

macro_rules! snapshot_object {
    ($kind:ty, $field:ident) => {
        impl SnapshotObject for $kind {
            fn insert_into(object: Arc<Self>, snapshot: &mut ClusterSnapshot) {
                snapshot.$field.insert(ObjectKey::of(&*object), object);
            }
        }
    };
}

snapshot_object!(Ingress, ingresses);
snapshot_object!(Service, services);
snapshot_object!(EndpointSlice, endpoint_slices);
snapshot_object!(PodRecord, pods);
snapshot_object!(IngressClass, ingress_classes);
snapshot_object!(Secret, secrets);
snapshot_object!(BackendConfig, backend_configs);
snapshot_object!(FrontendConfig, frontend_configs);
snapshot_object!(ManagedCertificate, managed_certificates);
snapshot_object!(TLSCertificateDelegation, tls_certificate_delegations);
