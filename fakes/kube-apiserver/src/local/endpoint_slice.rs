//! PURE: the EndpointSlices a Service with a selector should have, given the Pods it selects,
//! and the creates/updates/deletes that turn the existing slices into them.
//!
//! Behaviour follows the Kubernetes EndpointSlice controller as documented in
//! /work/shared/reference/001_3c625b06495f78fa.txt ("EndpointSlices": conditions, management,
//! ownership, distribution) and its public source (`ShouldPodBeInEndpoints`, `podToEndpoint`,
//! `FindPort`):
//! - a Pod is an endpoint when it is not terminal (phase Succeeded/Failed) and has a Pod IP;
//!   Pods being deleted stay, marked terminating;
//! - `serving` = the Pod's `Ready` condition is True (the kubelet has already folded the
//!   readiness gates into it, so a Pod whose gates are not yet True is not serving);
//!   `terminating` = the Pod has a deletionTimestamp; `ready` = serving and not terminating;
//!   with `spec.publishNotReadyAddresses` both `ready` and `serving` are always true;
//! - slice ports are the Service ports with `targetPort` resolved per Pod (a named targetPort
//!   is looked up in the Pod's container ports with the same protocol; a Pod without it is left
//!   out of that port), so Pods with different resolved ports land in different slices;
//! - an endpoint carries `nodeName` and `zone` (`podToEndpoint`): the zone is its Node's
//!   `topology.kubernetes.io/zone` label; a Pod whose Node does not exist is left out (the
//!   real reconciler skips it and retries) unless the Service publishes not-ready addresses;
//! - at most [`MAX_ENDPOINTS_PER_SLICE`] endpoints a slice; a Service with no endpoints keeps one
//!   empty placeholder slice.
//!
//! Simplified: the address type is always IPv4 (Pod IPs are loopback IPv4 here), and slices are
//! filled in a deterministic order (Pods sorted by name) rather than by the real controller's
//! minimal-churn packing; an unchanged input always yields no writes.

use std::collections::BTreeMap;

/// The cluster's Nodes as the EndpointSlice controller needs them: name -> the value of its
/// `topology.kubernetes.io/zone` label (`None` when it has none).
pub type NodeZones = BTreeMap<String, Option<String>>;

use k8s_openapi::api::core::v1::{ObjectReference, Pod, Service, ServicePort};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Label naming the Service a slice belongs to.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// Label naming the controller that manages a slice.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY_LABEL`] the Kubernetes EndpointSlice controller (and this one) sets.
pub const CONTROLLER_NAME: &str = "endpointslice-controller.k8s.io";
/// Label the real controller adds to slices of headless Services (`clusterIP: None`).
pub const HEADLESS_LABEL: &str = "service.kubernetes.io/headless";
/// The kube-controller-manager default of `--max-endpoints-per-slice`.
pub const MAX_ENDPOINTS_PER_SLICE: usize = 100;
/// The only address type this controller produces.
pub const ADDRESS_TYPE: &str = "IPv4";

/// Errors of the EndpointSlice computation.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EndpointSliceError {
    /// The Service lacks a field every stored object has (name, namespace, uid).
    #[error("Service {service}: metadata.{field} is missing; only Services read from the API server can be reconciled")]
    MissingServiceField {
        /// `namespace/name` as far as known.
        service: String,
        /// The missing metadata field.
        field: &'static str,
    },
}

/// Whether this controller manages slices for the Service: it has a non-empty selector and is
/// not of type ExternalName.
pub fn manages(service: &Service) -> bool {
    let Some(spec) = &service.spec else {
        return false;
    };
    spec.type_.as_deref() != Some("ExternalName")
        && spec.selector.as_ref().is_some_and(|s| !s.is_empty())
}

/// Whether the Service's selector selects the Pod (same namespace, every selector label equal).
pub fn selects(service: &Service, pod: &Pod) -> bool {
    if !manages(service) || service.metadata.namespace != pod.metadata.namespace {
        return false;
    }
    let selector = service.spec.as_ref().and_then(|s| s.selector.as_ref());
    let labels = pod.metadata.labels.as_ref();
    selector.is_some_and(|sel| {
        sel.iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
    })
}

/// `ShouldPodBeInEndpoints(pod, includeTerminating=true)`: not terminal and has an IP.
pub fn should_pod_be_in_endpoints(pod: &Pod) -> bool {
    let Some(status) = &pod.status else {
        return false;
    };
    let terminal = matches!(status.phase.as_deref(), Some("Succeeded") | Some("Failed"));
    let has_ip = status.pod_ip.as_deref().is_some_and(|ip| !ip.is_empty())
        || status
            .pod_ips
            .as_ref()
            .is_some_and(|ips| ips.iter().any(|ip| !ip.ip.is_empty()));
    !terminal && has_ip
}

/// `podutil.IsPodReady`: the Pod's `Ready` condition is True.
pub fn is_pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// `podutil.FindPort`: the container port a Service port targets on this Pod. `None` when a
/// named targetPort matches no container port of the same protocol.
pub fn find_port(pod: &Pod, service_port: &ServicePort) -> Option<i32> {
    let protocol = service_port.protocol.as_deref().unwrap_or("TCP");
    match &service_port.target_port {
        Some(IntOrString::String(name)) if name.parse::<i32>().is_err() => {
            let spec = pod.spec.as_ref()?;
            // Sidecars (init containers with restartPolicy Always) expose ports too.
            let sidecars = spec
                .init_containers
                .iter()
                .flatten()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"));
            spec.containers
                .iter()
                .chain(sidecars)
                .flat_map(|c| c.ports.iter().flatten())
                .find(|p| {
                    p.name.as_deref() == Some(name.as_str())
                        && p.protocol.as_deref().unwrap_or("TCP") == protocol
                })
                .map(|p| p.container_port)
        }
        Some(IntOrString::String(number)) => number.parse().ok(),
        Some(IntOrString::Int(n)) if *n != 0 => Some(*n),
        // The API server defaults an unset targetPort to the Service port.
        _ => Some(service_port.port),
    }
}

/// The slice ports of one Pod: every Service port whose target resolves on it, in Service order.
pub fn endpoint_ports(service: &Service, pod: &Pod) -> Vec<EndpointPort> {
    let ports = service.spec.as_ref().and_then(|s| s.ports.as_ref());
    ports
        .into_iter()
        .flatten()
        .filter_map(|sp| {
            find_port(pod, sp).map(|port| EndpointPort {
                name: Some(sp.name.clone().unwrap_or_default()),
                port: Some(port),
                protocol: Some(sp.protocol.clone().unwrap_or_else(|| "TCP".to_string())),
                app_protocol: sp.app_protocol.clone(),
            })
        })
        .collect()
}

/// `podToEndpoint`: the endpoint for one Pod, conditions computed as the module doc says.
pub fn endpoint_for(service: &Service, pod: &Pod) -> Endpoint {
    let publish_not_ready = service
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    let serving = publish_not_ready || is_pod_ready(pod);
    let terminating = pod.metadata.deletion_timestamp.is_some();
    let ready = publish_not_ready || (serving && !terminating);
    let status = pod.status.as_ref();
    let address = status
        .and_then(|s| s.pod_ip.clone().filter(|ip| !ip.is_empty()))
        .or_else(|| {
            status
                .and_then(|s| s.pod_ips.as_ref())
                .and_then(|ips| ips.first())
                .map(|ip| ip.ip.clone())
        })
        .unwrap_or_default();
    let spec = pod.spec.as_ref();
    // ShouldSetHostname: the Pod names itself under a subdomain equal to the Service name.
    let hostname = spec.and_then(|s| {
        let host = s.hostname.as_ref().filter(|h| !h.is_empty())?;
        (s.subdomain.as_deref() == service.metadata.name.as_deref()).then(|| host.clone())
    });
    Endpoint {
        addresses: vec![address],
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            serving: Some(serving),
            terminating: Some(terminating),
        }),
        hostname,
        node_name: spec
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty()),
        target_ref: Some(ObjectReference {
            kind: Some("Pod".to_string()),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            ..ObjectReference::default()
        }),
        ..Endpoint::default()
    }
}

/// Endpoints sharing one resolved port set.
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointGroup {
    /// The resolved slice ports, in Service order.
    pub ports: Vec<EndpointPort>,
    /// The endpoints, sorted by Pod name.
    pub endpoints: Vec<Endpoint>,
}

/// Groups the endpoints of the Pods the Service selects by their resolved port set. Pods not
/// selected, terminal, without an IP, or on a Node missing from `nodes` (unless the Service
/// has `publishNotReadyAddresses`) are skipped. Groups are ordered by port set.
pub fn endpoint_groups<'a>(
    service: &Service,
    pods: impl IntoIterator<Item = &'a Pod>,
    nodes: &NodeZones,
) -> Vec<EndpointGroup> {
    let publish_not_ready = service
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    let mut selected: Vec<&Pod> = pods
        .into_iter()
        .filter(|p| selects(service, p) && should_pod_be_in_endpoints(p))
        .filter(|p| publish_not_ready || nodes.contains_key(node_of(p)))
        .collect();
    selected.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut groups: BTreeMap<String, EndpointGroup> = BTreeMap::new();
    for pod in selected {
        let ports = endpoint_ports(service, pod);
        let key = serde_json::to_string(&ports).unwrap_or_default();
        groups
            .entry(key)
            .or_insert_with(|| EndpointGroup {
                ports,
                endpoints: Vec::new(),
            })
            .endpoints
            .push(Endpoint {
                zone: nodes.get(node_of(pod)).cloned().flatten(),
                ..endpoint_for(service, pod)
            });
    }
    groups.into_values().collect()
}

fn node_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

/// The writes that bring a Service's slices to the desired state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlicePlan {
    /// New slices (named with `metadata.generateName`).
    pub create: Vec<EndpointSlice>,
    /// Existing slices with new content (`metadata` carries name and resourceVersion).
    pub update: Vec<EndpointSlice>,
    /// Names of slices to delete.
    pub delete: Vec<String>,
}

impl SlicePlan {
    /// True when nothing needs writing.
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.update.is_empty() && self.delete.is_empty()
    }
}

/// Plans the writes for one Service (`nodes`: see [`endpoint_groups`]). `existing` are the slices labelled for this Service and
/// managed by this controller (see [`slice_selector`]); those owned by another object (e.g. an
/// earlier Service of the same name) are deleted. Slices whose content already matches are
/// kept untouched, so reconciling an unchanged state plans nothing.
///
/// Errors: [`EndpointSliceError::MissingServiceField`] when the Service has no name, namespace
/// or uid.
pub fn plan<'a>(
    service: &Service,
    pods: impl IntoIterator<Item = &'a Pod>,
    nodes: &NodeZones,
    existing: &[EndpointSlice],
) -> Result<SlicePlan, EndpointSliceError> {
    let meta = &service.metadata;
    let missing = |field| EndpointSliceError::MissingServiceField {
        service: format!(
            "{}/{}",
            meta.namespace.as_deref().unwrap_or(""),
            meta.name.as_deref().unwrap_or("")
        ),
        field,
    };
    let name = meta.name.as_deref().ok_or_else(|| missing("name"))?;
    meta.namespace
        .as_deref()
        .ok_or_else(|| missing("namespace"))?;
    let uid = meta.uid.as_deref().ok_or_else(|| missing("uid"))?;

    // Desired slice contents: (ports, endpoints) chunks; one empty placeholder when none.
    let mut desired: Vec<(Option<Vec<EndpointPort>>, Vec<Endpoint>)> = Vec::new();
    for group in endpoint_groups(service, pods, nodes) {
        for chunk in group.endpoints.chunks(MAX_ENDPOINTS_PER_SLICE) {
            desired.push((Some(group.ports.clone()), chunk.to_vec()));
        }
    }
    if desired.is_empty() {
        desired.push((None, Vec::new()));
    }

    let labels = slice_labels(service);
    let owner = owner_reference(name, uid);
    let mut plan = SlicePlan::default();
    let mut owned: Vec<&EndpointSlice> = Vec::new();
    for slice in existing {
        let owned_here = slice
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.uid == uid);
        match (&slice.metadata.name, owned_here) {
            (Some(_), true) => owned.push(slice),
            (Some(n), false) => plan.delete.push(n.clone()),
            (None, _) => {}
        }
    }
    owned.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));

    // First keep slices that already hold exactly a desired content.
    let mut unmatched_desired = Vec::new();
    for want in desired {
        match owned.iter().position(|s| same_content(s, &want.0, &want.1)) {
            Some(i) => {
                let slice = owned.remove(i);
                if !same_metadata(slice, &labels, &owner) {
                    plan.update.push(build_slice(
                        slice.metadata.clone(),
                        &labels,
                        &owner,
                        want.0,
                        want.1,
                    ));
                }
            }
            None => unmatched_desired.push(want),
        }
    }
    // Then rewrite leftover slices (same port set first), create the rest, delete the surplus.
    for (ports, endpoints) in unmatched_desired {
        let reuse = owned
            .iter()
            .position(|s| normalized_ports(&s.ports) == normalized_ports(&ports))
            .or(if owned.is_empty() { None } else { Some(0) });
        match reuse {
            Some(i) => {
                let slice = owned.remove(i);
                plan.update.push(build_slice(
                    slice.metadata.clone(),
                    &labels,
                    &owner,
                    ports,
                    endpoints,
                ));
            }
            None => {
                let metadata = ObjectMeta {
                    generate_name: Some(generate_name(name)),
                    namespace: meta.namespace.clone(),
                    ..ObjectMeta::default()
                };
                plan.create
                    .push(build_slice(metadata, &labels, &owner, ports, endpoints));
            }
        }
    }
    plan.delete
        .extend(owned.iter().filter_map(|s| s.metadata.name.clone()));
    Ok(plan)
}

/// The label selector (`kubernetes.io/service-name=NAME,endpointslice.kubernetes.io/managed-by=...`)
/// listing the slices this controller manages for a Service.
pub fn slice_selector(service_name: &str) -> String {
    format!("{SERVICE_NAME_LABEL}={service_name},{MANAGED_BY_LABEL}={CONTROLLER_NAME}")
}

fn slice_labels(service: &Service) -> BTreeMap<String, String> {
    let mut labels = service.metadata.labels.clone().unwrap_or_default();
    labels.remove(HEADLESS_LABEL);
    labels.insert(
        SERVICE_NAME_LABEL.to_string(),
        service.metadata.name.clone().unwrap_or_default(),
    );
    labels.insert(MANAGED_BY_LABEL.to_string(), CONTROLLER_NAME.to_string());
    if service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None") {
        labels.insert(HEADLESS_LABEL.to_string(), String::new());
    }
    labels
}

fn owner_reference(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".to_string(),
        kind: "Service".to_string(),
        name: name.to_string(),
        uid: uid.to_string(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// `<service>-`, truncated so the generated name stays within 63 characters.
fn generate_name(service_name: &str) -> String {
    let prefix: String = service_name.chars().take(57).collect();
    format!("{prefix}-")
}

fn build_slice(
    mut metadata: ObjectMeta,
    labels: &BTreeMap<String, String>,
    owner: &OwnerReference,
    ports: Option<Vec<EndpointPort>>,
    endpoints: Vec<Endpoint>,
) -> EndpointSlice {
    let mut merged = metadata.labels.take().unwrap_or_default();
    merged.extend(labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    metadata.labels = Some(merged);
    metadata.owner_references = Some(vec![owner.clone()]);
    EndpointSlice {
        address_type: ADDRESS_TYPE.to_string(),
        endpoints,
        metadata,
        ports,
    }
}

fn normalized_ports(ports: &Option<Vec<EndpointPort>>) -> &[EndpointPort] {
    ports.as_deref().unwrap_or_default()
}

fn same_content(
    slice: &EndpointSlice,
    ports: &Option<Vec<EndpointPort>>,
    endpoints: &[Endpoint],
) -> bool {
    slice.address_type == ADDRESS_TYPE
        && normalized_ports(&slice.ports) == normalized_ports(ports)
        && slice.endpoints == endpoints
}

fn same_metadata(
    slice: &EndpointSlice,
    labels: &BTreeMap<String, String>,
    owner: &OwnerReference,
) -> bool {
    let have = slice.metadata.labels.as_ref();
    labels
        .iter()
        .all(|(k, v)| have.and_then(|l| l.get(k)) == Some(v))
        && slice.metadata.owner_references.as_deref() == Some(std::slice::from_ref(owner))
}

#[cfg(test)]
mod tests;
