//! EndpointSlices -> NEG endpoints per zone, and the target ports the firewall must open
//! (inventory §7; reference 001 "EndpointSlices"; reference 000 "Pod readiness").
//!
//! An endpoint is attached when its EndpointSlice condition `ready` is true (or unset, which
//! the API says to read as ready), or when its Pod is not Ready only because the readiness gate
//! `cloud.google.com/load-balancer-neg-ready` is still pending: GKE attaches such Pods so the
//! load balancer can health-check them before they receive traffic. Terminating endpoints are
//! never attached. Zone: the endpoint's `zone` when it is one of the configured zones, else
//! the first configured zone.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Pod, ServicePort};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{ClusterSnapshot, NegEndpoint, ObjectKey, TranslateConfig};

/// The Pod condition / readiness gate the operator drives from load-balancer health.
pub const NEG_READINESS_GATE: &str = "cloud.google.com/load-balancer-neg-ready";
/// EndpointSlice label naming its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Endpoints of one Service port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceEndpoints {
    /// Endpoints per zone (only configured zones appear).
    pub by_zone: BTreeMap<String, BTreeSet<NegEndpoint>>,
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
            let zone = zone_for(config, endpoint.zone.as_deref());
            let Some(zone) = zone else { continue };
            let set = out.by_zone.entry(zone.to_owned()).or_default();
            for address in &endpoint.addresses {
                set.insert(NegEndpoint {
                    ip_address: address.clone(),
                    port: i32::from(target),
                    instance: endpoint.node_name.clone(),
                });
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

fn zone_for<'a>(config: &'a TranslateConfig, zone: Option<&str>) -> Option<&'a str> {
    config
        .zones
        .iter()
        .find(|z| Some(z.as_str()) == zone)
        .or_else(|| config.zones.first())
        .map(String::as_str)
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
        .is_some_and(|pod| waits_only_for_neg_gate(pod))
}

/// True when the Pod has the NEG readiness gate, its containers are ready, the gate's
/// condition is not yet True and the Pod is not being deleted.
pub fn waits_only_for_neg_gate(pod: &Pod) -> bool {
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
    gated
        && status_of("ContainersReady") == Some("True")
        && status_of(NEG_READINESS_GATE) != Some("True")
}
