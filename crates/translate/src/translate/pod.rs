//! [`PodRecord`]: what the operator keeps of a Pod (issue 18, "Memory"). The Pod store, the
//! Pod trigger of the Ingress controller, translation (readiness-probe health checks, NEG
//! endpoints waiting for the readiness gate) and the readiness-gate controller all read Pods
//! through it instead of the typed `k8s_openapi` `Pod`.
//!
//! Why not the typed `Pod` with its unread fields removed: its structs are large even when
//! empty (`PodSpec` and `Container` have dozens of optional fields each, `PodStatus` and every
//! `PodCondition` several more), so 10k pruned Pods still took 74 MiB (about 7.4 KiB each,
//! docs/performance.md "At scale"). A record with only the fields below deserialises straight
//! from the API's JSON; serde skips every other field without allocating it.
//!
//! Kept (the Pod's JSON field names):
//! - `metadata`: `name`, `namespace`, `uid`, `resourceVersion`, `creationTimestamp`,
//!   `deletionTimestamp`, `labels` (the rest is dropped by [`PodRecord::prune`], which the
//!   watch applies before an object is stored);
//! - `spec.nodeName`, `spec.readinessGates`, and of each of `spec.containers` its `name`,
//!   `ports` and `readinessProbe` (the health check is derived from them);
//! - `status.phase`, `status.podIP`, `status.podIPs`, and of `status.conditions` those the
//!   operator reads: `ContainersReady` and the NEG readiness gate's
//!   (`cloud.google.com/load-balancer-neg-ready`).
//!
//! It is a Kubernetes resource of its own for kube's `Api` and reflectors (kind `Pod`, core
//! `v1`, namespaced), so watches, patches (`pods/status`) and Events use it directly.

use k8s_openapi::api::core::v1::{ContainerPort, PodCondition, PodIP, PodReadinessGate, Probe};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize};

/// The Pod condition / readiness gate the operator drives from load-balancer health.
pub const NEG_READINESS_GATE: &str = "cloud.google.com/load-balancer-neg-ready";

/// The Pod condition type meaning every container passes its readiness probe.
pub const CONTAINERS_READY: &str = "ContainersReady";

/// A Pod as the operator caches it (module docs): the typed `Pod`'s shape and JSON field
/// names, with only the fields the operator reads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PodRecord {
    /// Identity, labels and timestamps (after [`PodRecord::prune`]).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `spec`: node, readiness gates, containers' ports and readiness probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodRecordSpec>,
    /// `status`: phase, IPs and the conditions the operator reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PodRecordStatus>,
}

/// The kept part of `PodSpec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodRecordSpec {
    /// `spec.nodeName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// `spec.readinessGates`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness_gates: Option<Vec<PodReadinessGate>>,
    /// `spec.containers` (init and ephemeral containers serve no Service port).
    #[serde(default)]
    pub containers: Vec<ContainerRecord>,
}

/// The kept part of a `Container`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecord {
    /// `name`.
    #[serde(default)]
    pub name: String,
    /// `ports`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<ContainerPort>>,
    /// `readinessProbe`, boxed: most containers of a big cluster have none or one the
    /// operator never reads, and `Probe` is a few hundred bytes inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<Box<Probe>>,
}

/// The kept part of `PodStatus`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodRecordStatus {
    /// `status.phase`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// `status.conditions` of type [`CONTAINERS_READY`] and the NEG readiness gate's; the
    /// others (`Ready`, `PodScheduled`, `Initialized`...) are dropped as they are read.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "read_conditions"
    )]
    pub conditions: Option<Vec<PodCondition>>,
    /// `status.podIP`.
    #[serde(default, rename = "podIP", skip_serializing_if = "Option::is_none")]
    pub pod_ip: Option<String>,
    /// `status.podIPs`.
    #[serde(default, rename = "podIPs", skip_serializing_if = "Option::is_none")]
    pub pod_ips: Option<Vec<PodIP>>,
}

/// Whether the operator reads Pod conditions of type `type_`.
pub fn reads_condition(type_: &str) -> bool {
    type_ == CONTAINERS_READY || type_ == NEG_READINESS_GATE
}

fn read_conditions<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<PodCondition>>, D::Error> {
    let conditions = Option::<Vec<PodCondition>>::deserialize(deserializer)?;
    Ok(conditions.map(|mut c| {
        c.retain(|c| reads_condition(&c.type_));
        c.shrink_to_fit();
        c
    }))
}

impl k8s_openapi::Resource for PodRecord {
    const API_VERSION: &'static str = "v1";
    const GROUP: &'static str = "";
    const KIND: &'static str = "Pod";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "pods";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for PodRecord {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl PodRecord {
    /// Drops the metadata the operator does not read (annotations, owner references,
    /// `managedFields`, finalizers...): applied by the watch before the record is stored.
    pub fn prune(&mut self) {
        let meta = std::mem::take(&mut self.metadata);
        self.metadata = ObjectMeta {
            name: meta.name,
            namespace: meta.namespace,
            uid: meta.uid,
            resource_version: meta.resource_version,
            creation_timestamp: meta.creation_timestamp,
            deletion_timestamp: meta.deletion_timestamp,
            labels: meta.labels,
            ..ObjectMeta::default()
        };
    }

    /// The record of a typed `Pod` (pruned), e.g. one an admission request or a test built.
    ///
    /// # Errors
    /// When the Pod does not serialise to JSON the record reads (not expected of a typed Pod).
    pub fn from_pod(pod: &k8s_openapi::api::core::v1::Pod) -> serde_json::Result<Self> {
        let mut record: Self = serde_json::from_value(serde_json::to_value(pod)?)?;
        record.prune();
        Ok(record)
    }
}

#[cfg(test)]
#[path = "pod_tests.rs"]
mod tests;
