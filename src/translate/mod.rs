//! Pure translation: a snapshot of cluster objects -> the desired load balancer. No I/O.
//!
//! Entry points: [`owns_ingress`] (is this Ingress ours?), [`translate_ingress`] (one Ingress
//! -> its [`DesiredIngress`]) and [`translate_firewall`] (all desired Ingresses -> the shared
//! L7 firewall rule). Every Compute resource name comes from [`namer`]. The same snapshot and
//! config always give identical output (all maps are ordered; nothing reads the clock or the
//! environment).

pub mod annotations;
pub mod backends;
pub mod certificates;
pub mod desired;
pub mod endpoints;
pub mod errors;
pub mod firewall;
pub mod frontend;
pub mod health_check;
pub mod hosts;
pub mod namer;
pub mod ownership;
pub mod paths;
pub mod service_ports;
pub mod snapshot;
pub mod url_map;

pub use desired::*;
pub use errors::TranslateError;
pub use firewall::{firewall_hint, translate_firewall, FirewallHintOp};
pub use ownership::owns_ingress;
pub use snapshot::{ClusterSnapshot, ObjectKey, SnapshotObject};

use k8s_openapi::api::networking::v1::Ingress;

/// The IngressClass controller value GKE's controller (and this operator) answers to.
pub const GCE_INGRESS_CONTROLLER: &str = "k8s.io/ingress-gce";

/// Operator-wide settings translation needs; built once by the controller from the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TranslateConfig {
    /// Google Cloud project ID that holds the load balancer.
    pub project: String,
    /// VPC network name (not URL), e.g. `default`.
    pub network: String,
    /// Zones the cluster's nodes run in; NEGs are created in each. Endpoints whose
    /// EndpointSlice `zone` is not one of these go to the first zone.
    pub zones: Vec<String>,
    /// Cluster name (informational; not part of any resource name).
    pub cluster_name: String,
    /// 8-char cluster UID (ContentHash of the kube-system Namespace UID, inventory §4),
    /// computed by the controller via `namer::cluster_uid8(kube_system_uid)`.
    pub cluster_uid: String,
    /// UID of the kube-system Namespace (salt of the v2 frontend names).
    pub kube_system_uid: String,
    /// IngressClass name / `kubernetes.io/ingress.class` value this operator owns (default "gce").
    pub ingress_class: String,
    /// Default backend Service when an Ingress has no spec.defaultBackend (GKE:
    /// kube-system/default-http-backend, port name "http"): (namespace, service, port name or
    /// number).
    pub default_backend: Option<(String, String, String)>,
    /// Network tags of the cluster's nodes, the L7 firewall rule's `targetTags` (empty: the rule
    /// applies to every instance in the network).
    pub firewall_target_tags: Vec<String>,
}

impl TranslateConfig {
    /// A config with GKE's defaults for everything but the project, network, zones and the
    /// kube-system Namespace UID: class `gce`, default backend
    /// `kube-system/default-http-backend:http`, no target tags.
    pub fn new(
        project: &str,
        network: &str,
        zones: &[&str],
        cluster_name: &str,
        kube_system_uid: &str,
    ) -> Self {
        Self {
            project: project.to_owned(),
            network: network.to_owned(),
            zones: zones.iter().map(|z| (*z).to_owned()).collect(),
            cluster_name: cluster_name.to_owned(),
            cluster_uid: namer::cluster_uid8(kube_system_uid),
            kube_system_uid: kube_system_uid.to_owned(),
            ingress_class: "gce".to_owned(),
            default_backend: Some((
                "kube-system".to_owned(),
                "default-http-backend".to_owned(),
                "http".to_owned(),
            )),
            firewall_target_tags: Vec::new(),
        }
    }

    /// `projects/{project}/global/networks/{network}`.
    pub fn network_ref(&self) -> String {
        format!("projects/{}/global/networks/{}", self.project, self.network)
    }

    /// `projects/{project}/global/{collection}/{name}`, e.g. collection `backendServices`.
    pub fn global_ref(&self, collection: &str, name: &str) -> String {
        format!("projects/{}/global/{collection}/{name}", self.project)
    }

    /// `projects/{project}/zones/{zone}/{collection}/{name}`.
    pub fn zonal_ref(&self, zone: &str, collection: &str, name: &str) -> String {
        format!("projects/{}/zones/{zone}/{collection}/{name}", self.project)
    }
}

/// Translates one Ingress into its desired load balancer.
///
/// # Errors
/// A [`TranslateError`] naming the Ingress, the field and the fix when the Ingress cannot be
/// built (bad path, missing Service or port, unsupported backend, ...). Problems that do not
/// stop the load balancer (path collisions, a missing TLS Secret) are returned as
/// [`Finding`]s inside the result instead.
pub fn translate_ingress(
    snapshot: &ClusterSnapshot,
    ingress: &Ingress,
    config: &TranslateConfig,
) -> Result<DesiredIngress, TranslateError> {
    let key = ObjectKey::of(ingress);
    let namer = namer::FrontendNamer::new(
        &config.cluster_uid,
        &config.kube_system_uid,
        &key.namespace,
        &key.name,
    );
    let default = default_backend(snapshot, ingress, config, &key)?;
    let default_name = namer::backend(
        &config.cluster_uid,
        &default.key.namespace,
        &default.key.service,
        default.key.port,
    );
    let default_ref = config.global_ref("backendServices", &default_name);
    let plan = url_map::url_map(snapshot, config, ingress, &namer.url_map(), &default_ref)?;
    let mut findings = plan.findings;

    let mut backends = std::collections::BTreeMap::new();
    for resolved in std::iter::once(&default).chain(plan.backends.iter()) {
        let desired = backends::desired_backend(snapshot, config, resolved)?;
        let name = desired.backend_service.name.clone().unwrap_or_default();
        backends.entry(name).or_insert(desired);
    }
    let frontend = frontend::frontend(
        snapshot,
        config,
        ingress,
        &namer,
        plan.url_map,
        &mut findings,
    )?;
    Ok(DesiredIngress {
        backends,
        frontend,
        findings,
    })
}

/// `spec.defaultBackend`, else the operator's system default backend.
fn default_backend<'a>(
    snapshot: &'a ClusterSnapshot,
    ingress: &Ingress,
    config: &TranslateConfig,
    key: &ObjectKey,
) -> Result<service_ports::ResolvedBackend<'a>, TranslateError> {
    if let Some(backend) = ingress
        .spec
        .as_ref()
        .and_then(|s| s.default_backend.as_ref())
    {
        return service_ports::resolve_ingress_backend(
            snapshot,
            key,
            backend,
            "spec.defaultBackend",
        );
    }
    let Some((namespace, service, port)) = config.default_backend.as_ref() else {
        return Err(TranslateError::NoDefaultBackend {
            ingress: key.to_string(),
            default_backend: "(none configured)".to_owned(),
        });
    };
    service_ports::resolve(
        snapshot,
        key,
        &ObjectKey::new(namespace.clone(), service.clone()),
        &service_ports::PortRef::parse(port),
        "spec.defaultBackend",
        "spec.defaultBackend",
    )
    .map_err(|_| TranslateError::NoDefaultBackend {
        ingress: key.to_string(),
        default_backend: format!("{namespace}/{service}:{port}"),
    })
}

#[cfg(test)]
mod backends_tests;
#[cfg(test)]
mod golden_tests;
#[cfg(test)]
mod invariants_tests;
#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;
