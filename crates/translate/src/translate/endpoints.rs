//! EndpointSlices -> NEG endpoints per zone, and the target ports the firewall must open
//! (inventory §7; reference 001 "EndpointSlices"; reference 000 "Pod readiness").
//!
//! An endpoint is attached when its EndpointSlice condition `ready` is true (or unset, which
//! the API says to read as ready), or when its Pod carries the readiness gate
//! `cloud.google.com/load-balancer-neg-ready`, its containers are ready and it is not being
//! deleted ([`serving_behind_neg_gate`]), whatever the gate's own state: GKE attaches such Pods so
//! the load balancer can health-check them before they receive traffic, and keeps them attached
//! while the EndpointSlice entry catches up with the gate turning True (the kubelet's status
//! update and the EndpointSlice controller lag the gate by tens of milliseconds; detaching in that
//! window drops a HEALTHY endpoint and it comes back UNHEALTHY: issue 40). Terminating endpoints
//! are never attached.
//!
//! ingress-gce (`pkg/neg/syncers/utils.go` `toZoneNetworkEndpointMap`, `shouldPodBeInNeg`) goes
//! further: it attaches every not-ready address whose Pod is not terminating, gate or not,
//! containers ready or not. Here a Pod whose containers are not ready (its readiness probe fails)
//! and a not-ready Pod without the gate stay detached: the load balancer would only find them
//! unhealthy, and a Pod the kubelet withdraws stops receiving traffic at once.
//!
//! Zones (a NEG endpoint must be in its NEG's zone): an endpoint's zone is its EndpointSlice
//! `zone`, else the `topology.kubernetes.io/zone` label of its Node (`nodeName`), as the
//! EndpointSlice controller and GKE's NEG controller read them. The NEG zones ([`neg_zones`])
//! are the `--zone` override when given, else every zone of the cluster's Nodes and of the
//! Service's endpoints, so a zone whose first Node appears gets its NEG and a zone whose last
//! Node goes loses it. An endpoint whose zone is unknown, or not one of the override's zones,
//! is put in no NEG (never in another zone's): it is listed in
//! [`ServiceEndpoints::unplaced`] and reported as a Warning Event.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::ServicePort;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::pod::PodRecord;
use super::{ClusterSnapshot, NegEndpoint, ObjectKey, TranslateConfig};

// The readiness gate is the Pod's (pod.rs); endpoints read it, and callers name it here too.
pub use super::pod::NEG_READINESS_GATE;
/// EndpointSlice label naming its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// Node label naming its zone (well-known label, set by the cloud provider / kubelet).
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The deprecated twin of [`ZONE_LABEL`], still set on GKE nodes; read when the other is absent.
pub const LEGACY_ZONE_LABEL: &str = "failure-domain.beta.kubernetes.io/zone";

/// The zone of a Node from its labels ([`ZONE_LABEL`], else [`LEGACY_ZONE_LABEL`]).
pub fn node_zone(labels: &BTreeMap<String, String>) -> Option<&str> {
    labels
        .get(ZONE_LABEL)
        .or_else(|| labels.get(LEGACY_ZONE_LABEL))
        .map(String::as_str)
        .filter(|z| !z.is_empty())
}

/// The zones NEGs go in: the `--zone` override when set, else the zones of the cluster's
/// Nodes ([`ClusterSnapshot::node_zones`]) and `extra` (the zones of a Service's endpoints).
pub fn neg_zones<'a>(
    snapshot: &'a ClusterSnapshot,
    config: &TranslateConfig,
    extra: impl IntoIterator<Item = &'a String>,
) -> BTreeSet<String> {
    if !config.zones.is_empty() {
        return config.zones.iter().cloned().collect();
    }
    snapshot.node_zones.values().chain(extra).cloned().collect()
}

/// An endpoint put in no NEG, and why.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Unplaced {
    /// The endpoint's IP address.
    pub ip_address: String,
    /// `Pod namespace/name`, or the EndpointSlice when the endpoint names no Pod.
    pub target: String,
    /// The zone it is in, when known.
    pub zone: Option<String>,
}

impl std::fmt::Display for Unplaced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.zone {
            Some(zone) => write!(
                f,
                "endpoint {} ({}) is in zone {zone}, which is not one of the operator's --zone list; it is in no NEG. Add {zone} to --zone (GCLB_ZONES), or drop --zone to follow the cluster's Nodes",
                self.ip_address, self.target
            ),
            None => write!(
                f,
                "endpoint {} ({}) has no zone: its EndpointSlice entry has no zone and its Node has no topology.kubernetes.io/zone label; it is in no NEG (a NEG endpoint must be in the NEG's zone). Label the Node with its zone",
                self.ip_address, self.target
            ),
        }
    }
}

/// Endpoints of one Service port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceEndpoints {
    /// Endpoints per zone (only zones of [`neg_zones`] appear).
    pub by_zone: BTreeMap<String, BTreeSet<NegEndpoint>>,
    /// Attachable endpoints put in no NEG: zone unknown, or not one of the override's zones.
    pub unplaced: BTreeSet<Unplaced>,
    /// Target ports seen in the slices (or the Service's numeric targetPort when there are
    /// no slices yet).
    pub target_ports: BTreeSet<u16>,
}

/// Collects the endpoints of `service`'s `port` from the snapshot's EndpointSlices.
pub fn service_endpoints(
    snapshot: &ClusterSnapshot,
    config: &TranslateConfig,
    service: &ObjectKey,
    port: &ServicePort,
) -> ServiceEndpoints {
    let mut out = ServiceEndpoints::default();
    let port_name = port.name.as_deref().unwrap_or("");
    for slice in snapshot
        .endpoint_slices
        .values()
        .filter(|s| belongs_to(s, service))
    {
        if slice.address_type != "IPv4" {
            continue;
        }
        let target = slice
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref().unwrap_or("") == port_name)
            .and_then(|p| p.port);
        let Some(target) = target
            .and_then(|t| u16::try_from(t).ok())
            .filter(|t| *t > 0)
        else {
            continue;
        };
        out.target_ports.insert(target);
        for endpoint in slice
            .endpoints
            .iter()
            .filter(|e| attachable(snapshot, &service.namespace, e))
        {
            let zone = endpoint_zone(snapshot, endpoint);
            let placed =
                zone.filter(|z| config.zones.is_empty() || config.zones.iter().any(|c| c == z));
            match placed {
                Some(zone) => {
                    let set = out.by_zone.entry(zone.to_owned()).or_default();
                    for address in &endpoint.addresses {
                        set.insert(NegEndpoint {
                            ip_address: address.clone(),
                            port: i32::from(target),
                            instance: endpoint.node_name.clone(),
                        });
                    }
                }
                None => {
                    let target = match endpoint.target_ref.as_ref() {
                        Some(r) => format!(
                            "{} {}/{}",
                            r.kind.as_deref().unwrap_or("Pod"),
                            r.namespace.as_deref().unwrap_or(&service.namespace),
                            r.name.as_deref().unwrap_or_default()
                        ),
                        None => format!(
                            "EndpointSlice {}/{}",
                            service.namespace,
                            slice.metadata.name.as_deref().unwrap_or_default()
                        ),
                    };
                    for address in &endpoint.addresses {
                        out.unplaced.insert(Unplaced {
                            ip_address: address.clone(),
                            target: target.clone(),
                            zone: zone.map(str::to_owned),
                        });
                    }
                }
            }
        }
    }
    if out.target_ports.is_empty() {
        match &port.target_port {
            Some(IntOrString::Int(n)) => out.target_ports.extend(u16::try_from(*n).ok()),
            None => out.target_ports.extend(u16::try_from(port.port).ok()),
            Some(IntOrString::String(_)) => {}
        }
    }
    out
}

fn belongs_to(slice: &EndpointSlice, service: &ObjectKey) -> bool {
    slice.metadata.namespace.as_deref().unwrap_or("") == service.namespace
        && slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SERVICE_NAME_LABEL))
            .is_some_and(|n| *n == service.name)
}

/// The endpoint's zone: its own `zone`, else its Node's zone label.
fn endpoint_zone<'a>(snapshot: &'a ClusterSnapshot, endpoint: &'a Endpoint) -> Option<&'a str> {
    endpoint
        .zone
        .as_deref()
        .filter(|z| !z.is_empty())
        .or_else(|| {
            let node = endpoint.node_name.as_deref()?;
            snapshot.node_zones.get(node).map(String::as_str)
        })
}

fn attachable(snapshot: &ClusterSnapshot, namespace: &str, endpoint: &Endpoint) -> bool {
    let conditions = endpoint.conditions.as_ref();
    if conditions.and_then(|c| c.terminating) == Some(true) {
        return false;
    }
    if conditions.and_then(|c| c.ready) != Some(false) {
        return true;
    }
    endpoint
        .target_ref
        .as_ref()
        .filter(|r| r.kind.as_deref() == Some("Pod"))
        .and_then(|r| {
            let ns = r.namespace.clone().unwrap_or_else(|| namespace.to_owned());
            snapshot
                .pods
                .get(&ObjectKey::new(ns, r.name.clone().unwrap_or_default()))
        })
        .is_some_and(|pod| serving_behind_neg_gate(pod))
}

/// True when the Pod has the NEG readiness gate, its containers are ready (`ContainersReady`
/// True) and it is not being deleted, whatever the state of the gate's own condition: such a Pod
/// is attached while its EndpointSlice entry says not ready, both before the gate opens (so the
/// load balancer health-checks it) and in the moment after (until the EndpointSlice controller
/// writes `ready: true`).
pub fn serving_behind_neg_gate(pod: &PodRecord) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let gated = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|gates| gates.iter().any(|g| g.condition_type == NEG_READINESS_GATE));
    let conditions = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let status_of = |t: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == t)
            .map(|c| c.status.as_str())
    };
    gated && status_of("ContainersReady") == Some("True")
}

#[cfg(test)]
#[path = "endpoints_tests.rs"]
mod tests;
