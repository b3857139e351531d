//! The settings translation needs ([`TranslateConfig`], built once from the command line), how
//! the operator shares a cluster with GKE's controller ([`Mode`]), and the IngressClass and
//! class names each mode serves.

use k8s_openapi::api::networking::v1::Ingress;

use super::namer;
use super::snapshot::ObjectKey;

/// The IngressClass controller value GKE's controller answers to (and this operator in
/// takeover mode).
pub const GCE_INGRESS_CONTROLLER: &str = "k8s.io/ingress-gce";
/// The IngressClass controller value this operator answers to beside GKE's controller.
pub const GCLB_INGRESS_CONTROLLER: &str = "gclb-operator.dev/gclb";
/// The class GKE's controller serves (takeover mode's default `--ingress-class`).
pub const GCE_CLASS: &str = "gce";
/// This operator's own class (the default `--ingress-class`).
pub const GCLB_CLASS: &str = "gclb";

/// How the operator shares a cluster with GKE's Ingress controller (`gclb-operator run
/// --takeover`; docs/install.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Beside GKE's controller (the HttpLoadBalancing add-on on, or no GKE at all): its own
    /// IngressClass controller [`GCLB_INGRESS_CONTROLLER`] and class [`GCLB_CLASS`], never the
    /// cluster default unless a user marks it so, its own finalizer and its own resource names
    /// ([`super::namer::Scheme::Own`]). Ingresses of class `gce`, and Ingresses without a class when
    /// no default IngressClass is ours, are GKE's and never touched.
    #[default]
    Coexist,
    /// In place of GKE's controller (the add-on disabled): class `gce`, the
    /// `kubernetes.io/ingress.class: gce` annotation and Ingresses without a class as GKE
    /// serves them, GKE's finalizer and GKE's names ([`super::namer::Scheme::Gke`]), so the load
    /// balancers GKE's controller built are adopted by name instead of built again.
    Takeover,
}

impl Mode {
    /// The IngressClass `spec.controller` value served.
    pub fn controller(self) -> &'static str {
        match self {
            Self::Coexist => GCLB_INGRESS_CONTROLLER,
            Self::Takeover => GCE_INGRESS_CONTROLLER,
        }
    }

    /// The class served by default (`--ingress-class`).
    pub fn default_class(self) -> &'static str {
        match self {
            Self::Coexist => GCLB_CLASS,
            Self::Takeover => GCE_CLASS,
        }
    }

    /// The internal load balancer's class served by default (`--internal-ingress-class`):
    /// GKE's `gce-internal` in takeover mode, `gclb-internal` beside GKE's controller.
    pub fn internal_class(self) -> &'static str {
        match self {
            Self::Coexist => GCLB_INTERNAL_CLASS,
            Self::Takeover => GCE_INTERNAL_CLASS,
        }
    }

    /// The regional external load balancer's class served by default
    /// (`--regional-external-ingress-class`): GKE's `gce-regional-external` in takeover mode,
    /// `gclb-regional-external` beside GKE's controller.
    pub fn regional_external_class(self) -> &'static str {
        match self {
            Self::Coexist => GCLB_REGIONAL_EXTERNAL_CLASS,
            Self::Takeover => GCE_REGIONAL_EXTERNAL_CLASS,
        }
    }

    /// The resource names used.
    pub fn scheme(self) -> namer::Scheme {
        match self {
            Self::Coexist => namer::Scheme::Own,
            Self::Takeover => namer::Scheme::Gke,
        }
    }
}

/// Operator-wide settings translation needs; built once by the controller from the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TranslateConfig {
    /// Google Cloud project ID that holds the load balancer.
    pub project: String,
    /// VPC network name (not URL), e.g. `default`.
    pub network: String,
    /// Project that owns the network, its subnetworks and its firewall rules: the Shared VPC
    /// host project on a Shared VPC cluster, else the cluster's own `project` (Google Cloud
    /// "Shared VPC overview": the network and firewall live in the host project).
    pub network_project: String,
    /// Subnetwork name (in the NEGs' region, owned by `network_project`) the NEGs name;
    /// `None` leaves `subnetwork` unset (the API picks the network's subnetwork of the zone).
    pub subnetwork: Option<String>,
    /// `--zone` override: NEGs in exactly these zones, endpoints of other zones in none. Empty
    /// (the default): the zones of the cluster's Nodes ([`super::endpoints::neg_zones`]).
    pub zones: Vec<String>,
    /// Cluster name (informational; not part of any resource name).
    pub cluster_name: String,
    /// 8-char cluster UID (ContentHash of the kube-system Namespace UID, inventory §4),
    /// computed by the controller via `namer::cluster_uid8(kube_system_uid)`.
    pub cluster_uid: String,
    /// UID of the kube-system Namespace (salt of the v2 frontend names).
    pub kube_system_uid: String,
    /// The cluster UID of GKE's v1 namer, which names backends (`k8s1-<first 8>-...`) and v1
    /// frontends (`...--<uid>`): in takeover mode the `uid` of ConfigMap
    /// `kube-system/ingress-uid` that GKE's controller keeps (ingress-gce
    /// `cmd/glbc/app/namer.go`; see `gclb-operator run --takeover`), else [`Self::cluster_uid`].
    pub gke_uid: String,
    /// What the L7 firewall rule is named after: in takeover mode the `provider-uid` of that
    /// ConfigMap (GKE falls back to its `uid`), else [`Self::cluster_uid`].
    pub firewall_uid: String,
    /// How the operator shares the cluster with GKE's controller: which IngressClass
    /// controller it answers to, whether "no class" can be its, and its resource names.
    pub mode: Mode,
    /// IngressClass name / `kubernetes.io/ingress.class` value this operator owns
    /// ([`Mode::default_class`] unless `--ingress-class` says otherwise); a comma-separated
    /// list serves each class in it, as Contour's `--ingress-class-name` does (reference 004,
    /// "IngressClass and IngressClass Name"; see [`TranslateConfig::serves_class`]).
    pub ingress_class: String,
    /// Default backend Service when an Ingress has no spec.defaultBackend (GKE:
    /// kube-system/default-http-backend, port name "http"): (namespace, service, port name or
    /// number).
    pub default_backend: Option<(String, String, String)>,
    /// Network tags of the cluster's nodes, the L7 firewall rule's `targetTags` (empty: the rule
    /// applies to every instance in the network).
    pub firewall_target_tags: Vec<String>,
    /// Class of the internal load balancer ([`super::regional`]): [`Mode::internal_class`] unless
    /// `--internal-ingress-class` says otherwise.
    pub internal_class: String,
    /// Class of the regional external load balancer ([`super::regional`]):
    /// [`Mode::regional_external_class`] unless `--regional-external-ingress-class` says
    /// otherwise.
    pub regional_external_class: String,
    /// `--region`: the region of internal and regional external load balancers; `None`: the region of the NEG zones
    /// ([`super::regional::cluster_region`]).
    pub region: Option<String>,
}

impl TranslateConfig {
    /// A config with GKE's defaults for everything but the project, network, zones and the
    /// kube-system Namespace UID: takeover mode (class `gce`, GKE's names), default backend
    /// `kube-system/default-http-backend:http`, no target tags. [`TranslateConfig::with_mode`]
    /// switches to the operator's own names and class.
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
            network_project: project.to_owned(),
            subnetwork: None,
            zones: zones.iter().map(|z| (*z).to_owned()).collect(),
            cluster_name: cluster_name.to_owned(),
            cluster_uid: namer::cluster_uid8(kube_system_uid),
            kube_system_uid: kube_system_uid.to_owned(),
            gke_uid: namer::cluster_uid8(kube_system_uid),
            firewall_uid: namer::cluster_uid8(kube_system_uid),
            mode: Mode::Takeover,
            ingress_class: GCE_CLASS.to_owned(),
            default_backend: Some((
                "kube-system".to_owned(),
                "default-http-backend".to_owned(),
                "http".to_owned(),
            )),
            firewall_target_tags: Vec::new(),
            internal_class: GCE_INTERNAL_CLASS.to_owned(),
            regional_external_class: GCE_REGIONAL_EXTERNAL_CLASS.to_owned(),
            region: None,
        }
    }

    /// This config in `mode`, serving that mode's default class.
    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self.ingress_class = mode.default_class().to_owned();
        self.internal_class = mode.internal_class().to_owned();
        self.regional_external_class = mode.regional_external_class().to_owned();
        self
    }

    /// Whether `class` (an annotation value, or an `ingressClassName` without an IngressClass
    /// object) is one of the comma-separated names of [`TranslateConfig::ingress_class`], or
    /// the internal or regional external class ([`TranslateConfig::internal_class`],
    /// [`TranslateConfig::regional_external_class`]).
    pub fn serves_class(&self, class: &str) -> bool {
        (!class.is_empty()
            && (class == self.internal_class || class == self.regional_external_class))
            || self
                .ingress_class
                .split(',')
                .map(str::trim)
                .any(|c| !c.is_empty() && c == class)
    }

    /// GKE's cluster UIDs as ConfigMap `kube-system/ingress-uid` holds them (`uid`, and
    /// `provider-uid` when set): backends, v1 frontends and the firewall rule are then named as
    /// GKE's controller names them in this cluster. The v2 frontends keep the kube-system UID.
    pub fn with_gke_uid(mut self, uid: &str, provider_uid: Option<&str>) -> Self {
        self.gke_uid = uid.to_owned();
        self.firewall_uid = provider_uid
            .filter(|p| !p.is_empty())
            .unwrap_or(uid)
            .to_owned();
        self
    }

    /// Names of one Ingress's frontend resources: in takeover mode v1 or v2 as its finalizer
    /// says ([`super::namer::FrontendVersion::of_finalizers`]), else the operator's own (v2 shape).
    pub fn ingress_namer(&self, ingress: &Ingress) -> namer::FrontendNamer {
        let key = ObjectKey::of(ingress);
        let finalizers = ingress.metadata.finalizers.iter().flatten();
        if self.mode == Mode::Takeover
            && namer::FrontendVersion::of_finalizers(finalizers.map(String::as_str))
                == namer::FrontendVersion::V1
        {
            return namer::FrontendNamer::v1(&self.gke_uid, &key.namespace, &key.name);
        }
        self.frontend_namer(&key.namespace, &key.name)
    }

    /// Names of one Ingress's frontend resources in the v2 shape.
    pub fn frontend_namer(&self, namespace: &str, name: &str) -> namer::FrontendNamer {
        namer::FrontendNamer::new(
            self.mode.scheme(),
            &self.cluster_uid,
            &self.kube_system_uid,
            namespace,
            name,
        )
    }

    /// Name of the backend service, health check and NEGs of one Service port.
    pub fn backend_name(&self, namespace: &str, service: &str, port: i32) -> String {
        namer::backend(self.mode.scheme(), &self.gke_uid, namespace, service, port)
    }

    /// Name of the backend service and health check of one Service port behind a regional
    /// external Ingress (`k8s1-<uid8>-e-...`, [`namer::regional_external_backend`]).
    pub fn regional_external_backend_name(
        &self,
        namespace: &str,
        service: &str,
        port: i32,
    ) -> String {
        namer::regional_external_backend(
            self.mode.scheme(),
            &self.gke_uid,
            namespace,
            service,
            port,
        )
    }

    /// Name of the shared L7 firewall rule.
    pub fn l7_firewall_name(&self) -> String {
        namer::l7_firewall(self.mode.scheme(), &self.firewall_uid)
    }

    /// `projects/{network_project}/global/networks/{network}`.
    pub fn network_ref(&self) -> String {
        format!(
            "projects/{}/global/networks/{}",
            self.network_project, self.network
        )
    }

    /// `projects/{network_project}/regions/{region of zone}/subnetworks/{subnetwork}`, when a
    /// subnetwork is configured.
    pub fn subnetwork_ref(&self, zone: &str) -> Option<String> {
        let region = zone.rsplit_once('-').map_or(zone, |(r, _)| r);
        self.subnetwork.as_ref().map(|s| {
            format!(
                "projects/{}/regions/{region}/subnetworks/{s}",
                self.network_project
            )
        })
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

/// GKE's internal class (`kubernetes.io/ingress.class: gce-internal`), served in takeover mode.
pub const GCE_INTERNAL_CLASS: &str = "gce-internal";
/// The operator's own internal class beside GKE's controller.
pub const GCLB_INTERNAL_CLASS: &str = "gclb-internal";
/// GKE's regional external class (`kubernetes.io/ingress.class: gce-regional-external`),
/// served in takeover mode.
pub const GCE_REGIONAL_EXTERNAL_CLASS: &str = "gce-regional-external";
/// The operator's own regional external class beside GKE's controller.
pub const GCLB_REGIONAL_EXTERNAL_CLASS: &str = "gclb-regional-external";
