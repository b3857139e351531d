//! The regional Application Load Balancers of `gce-internal` and `gce-regional-external`
//! Ingresses (reference 000, "internal Application Load Balancer"; inventory §1, §4;
//! docs/internal-load-balancers.md).
//!
//! An Ingress of a regional class ([`regional_class`]) is translated as any other
//! ([`super::translate_ingress`]) and then moved into its region by [`regionalize`]:
//! - health checks, backend services, the URL map, target HTTP(S) proxies and SSL certificates
//!   keep their names and move to the regional collections (`regionHealthChecks`, ...); every
//!   reference between them becomes `projects/{project}/regions/{region}/{collection}/{name}`;
//! - backend services get the class's `loadBalancingScheme` ([`RegionalClass::scheme`]:
//!   INTERNAL_MANAGED or EXTERNAL_MANAGED), on the same zonal NEGs as an external Ingress of the
//!   same Service port (NEGs are shared: one per Service port and zone);
//! - a backend service has one scheme, so the two classes' backend services of one Service port
//!   in one region are two: the internal class keeps the NEG's name (`k8s1-<uid8>-...`), the
//!   regional external class's backend service and health check are named
//!   `k8s1-<uid8>-e-...` ([`super::namer::regional_external_backend`]), as GKE names them
//!   (ingress-gce `pkg/utils/serviceport.go` `BackendName`: `RXLBBackendName` when
//!   `L7XLBRegionalEnabled`), and every reference to them follows
//!   ([`name_regional_external_backends`]);
//! - forwarding rules get that scheme and the cluster's network (the API finds the region's
//!   proxy-only subnet through it). Internal ones also get the `--subnetwork` (the API gives
//!   them an address of that subnet); regional external ones get `networkTier: PREMIUM` (the
//!   reserved address's tier when one is named) and an external regional address;
//! - `kubernetes.io/ingress.regional-static-ip-name` becomes
//!   [`super::DesiredFrontend::static_ip_name`]: the name of a regional address, resolved (and
//!   its type checked) at sync time.
//!
//! What a regional load balancer cannot do, or what this operator does not build on one, is
//! refused with a [`TranslateError::UnsupportedOnRegional`] naming the feature (nothing is
//! built), per the "What works where" table: for both classes Cloud CDN, a Cloud Armor (global)
//! security policy, `ncp/whitelist-source-range`, Google-managed certificates, a global static
//! IP, an SSL policy (global) and HTTP/3; for the regional external class also IAP (ingress-gce
//! rejects CDN and IAP there, inventory §2).
//!
//! Both classes build FrontendConfig `redirectToHttps` (and `ncp/http-redirect`) as Google
//! documents for each load balancer ("Set up an HTTP-to-HTTPS redirect for regional external
//! Application Load Balancers", `load-balancing/docs/https/setting-up-reg-http-https-redirect`;
//! "Set up HTTP-to-HTTPS redirect for regional internal Application Load Balancers",
//! `load-balancing/docs/l7-internal/setting-up-http-to-https-redirect`: a partial HTTP load
//! balancer, only a frontend, whose URL map redirects to the HTTPS one on the same reserved
//! shared internal address): the redirect URL map `k8s2-rm-` moves to `regionUrlMaps` (a
//! `defaultUrlRedirect` with `httpsRedirect`, no backend service), the regional target HTTP
//! proxy points at it, and the HTTP forwarding rule on port 80 shares the HTTPS rule's address,
//! which on a regional load balancer is the reserved address of
//! `kubernetes.io/ingress.regional-static-ip-name`. (ingress-gce refuses the redirect with its
//! internal class, inventory §2; Google's load balancer supports it, so this operator builds
//! it.)

use std::collections::BTreeMap;

use google_cloud_compute_v1::model;
use google_cloud_compute_v1::model::{backend_service, forwarding_rule};
use k8s_openapi::api::networking::v1::Ingress;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::annotations::{GLOBAL_STATIC_IP_NAME, MANAGED_CERTIFICATES, REGIONAL_STATIC_IP_NAME};
use super::ownership::INGRESS_CLASS_ANNOTATION;
use super::{ClusterSnapshot, DesiredIngress, ObjectKey, TranslateConfig, TranslateError};

// The classes' names are settings (config.rs); named here too, beside what they select.
pub use super::config::{
    GCE_INTERNAL_CLASS, GCE_REGIONAL_EXTERNAL_CLASS, GCLB_INTERNAL_CLASS,
    GCLB_REGIONAL_EXTERNAL_CLASS,
};
/// `loadBalancingScheme` of the regional internal Application Load Balancer.
pub const INTERNAL_MANAGED: &str = "INTERNAL_MANAGED";
/// `loadBalancingScheme` of the regional external Application Load Balancer.
pub const EXTERNAL_MANAGED: &str = "EXTERNAL_MANAGED";
/// `networkTier` of a regional external forwarding rule without a reserved address (the
/// API's default tier; a reserved address's own tier is used when one is named).
pub const DEFAULT_NETWORK_TIER: &str = "PREMIUM";

/// Which regional Application Load Balancer an Ingress asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionalClass {
    /// The regional internal Application Load Balancer ([`TranslateConfig::internal_class`]).
    Internal,
    /// The regional external Application Load Balancer
    /// ([`TranslateConfig::regional_external_class`]).
    External,
}

impl RegionalClass {
    /// The `loadBalancingScheme` of its backend services and forwarding rules.
    pub fn scheme(self) -> &'static str {
        match self {
            Self::Internal => INTERNAL_MANAGED,
            Self::External => EXTERNAL_MANAGED,
        }
    }

    /// Its name in messages.
    pub fn load_balancer(self) -> &'static str {
        match self {
            Self::Internal => "internal Application Load Balancer",
            Self::External => "regional external Application Load Balancer",
        }
    }

    /// The class name `config` serves for it.
    pub fn class(self, config: &TranslateConfig) -> &str {
        match self {
            Self::Internal => &config.internal_class,
            Self::External => &config.regional_external_class,
        }
    }

    /// The `addressType` of the regional address it needs: `INTERNAL` for the internal class,
    /// `EXTERNAL` for the regional external one.
    pub fn address_type(self) -> &'static str {
        match self {
            Self::Internal => "INTERNAL",
            Self::External => "EXTERNAL",
        }
    }

    /// The class of a scheme name (`INTERNAL_MANAGED` / `EXTERNAL_MANAGED`).
    pub fn of_scheme(scheme: &str) -> Option<Self> {
        match scheme {
            INTERNAL_MANAGED => Some(Self::Internal),
            EXTERNAL_MANAGED => Some(Self::External),
            _ => None,
        }
    }
}

/// Collections whose references move from `global/` to `regions/{region}/`.
const REGIONAL_COLLECTIONS: &[&str] = &[
    "backendServices",
    "healthChecks",
    "urlMaps",
    "targetHttpProxies",
    "targetHttpsProxies",
    "sslCertificates",
];

/// Which regional load balancer an owned Ingress asks for, if any: its
/// `kubernetes.io/ingress.class` annotation, else its `spec.ingressClassName`, else the name of
/// the default IngressClass, is [`TranslateConfig::internal_class`] or
/// [`TranslateConfig::regional_external_class`]. (An IngressClass of that name with the
/// operator's controller is how `ingressClassName` selects it.)
pub fn regional_class(
    snapshot: &ClusterSnapshot,
    ingress: &Ingress,
    config: &TranslateConfig,
) -> Option<RegionalClass> {
    let class = ingress
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(INGRESS_CLASS_ANNOTATION))
        .filter(|c| !c.is_empty())
        .cloned()
        .or_else(|| {
            ingress
                .spec
                .as_ref()
                .and_then(|s| s.ingress_class_name.clone())
                .filter(|c| !c.is_empty())
        })
        .or_else(|| {
            snapshot
                .ingress_classes
                .values()
                .find(|c| {
                    c.metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(super::ownership::DEFAULT_CLASS_ANNOTATION))
                        .is_some_and(|v| v == "true")
                        && c.spec.as_ref().and_then(|s| s.controller.as_deref())
                            == Some(config.mode.controller())
                })
                .and_then(|c| c.metadata.name.clone())
        })?;
    [RegionalClass::Internal, RegionalClass::External]
        .into_iter()
        .find(|k| k.class(config) == class)
}

/// Whether an owned Ingress asks for the internal load balancer ([`regional_class`]).
pub fn is_internal(
    snapshot: &ClusterSnapshot,
    ingress: &Ingress,
    config: &TranslateConfig,
) -> bool {
    regional_class(snapshot, ingress, config) == Some(RegionalClass::Internal)
}

/// Whether an owned Ingress asks for a regional (internal or regional external) load balancer:
/// its resources are regional, not global.
pub fn is_regional(
    snapshot: &ClusterSnapshot,
    ingress: &Ingress,
    config: &TranslateConfig,
) -> bool {
    regional_class(snapshot, ingress, config).is_some()
}

/// The cluster's region: `--region`, else the region of the first NEG zone (the `--zone`
/// override, else the Nodes' zones: `us-central1-a` -> `us-central1`). `None` when neither
/// is known.
pub fn cluster_region(snapshot: &ClusterSnapshot, config: &TranslateConfig) -> Option<String> {
    if let Some(region) = config.region.as_ref().filter(|r| !r.is_empty()) {
        return Some(region.clone());
    }
    super::endpoints::neg_zones(snapshot, config, [])
        .into_iter()
        .next()
        .map(|zone| region_of_zone(&zone).to_string())
}

/// `us-central1-a` -> `us-central1`.
pub fn region_of_zone(zone: &str) -> &str {
    zone.rsplit_once('-').map_or(zone, |(r, _)| r)
}

/// Moves a translated Ingress into `region` as the `kind` load balancer (module docs), or
/// refuses what that load balancer does not support.
///
/// # Errors
/// [`TranslateError::UnsupportedOnRegional`] naming the first unsupported feature found.
pub fn regionalize(
    mut desired: DesiredIngress,
    ingress: &Ingress,
    config: &TranslateConfig,
    kind: RegionalClass,
    region: &str,
) -> Result<DesiredIngress, TranslateError> {
    refuse_unsupported(&desired, ingress, config, kind)?;
    let project = &config.project;
    let scheme = kind.scheme();
    for backend in desired.backends.values_mut() {
        backend.health_check = moved(&backend.health_check, project, region);
        let mut bs: model::BackendService = moved(&backend.backend_service, project, region);
        bs.load_balancing_scheme = Some(backend_service::LoadBalancingScheme::from(scheme));
        bs.enable_cdn = None;
        bs.cdn_policy = None;
        bs.security_policy = None;
        backend.backend_service = bs;
    }
    let f = &mut desired.frontend;
    f.url_map = f.url_map.as_ref().map(|m| moved(m, project, region));
    // The regional external class's HTTP-to-HTTPS redirect: a regional URL map with
    // `defaultUrlRedirect.httpsRedirect` behind the regional target HTTP proxy, whose
    // forwarding rule shares the HTTPS rule's (reserved regional) address ("Set up an
    // HTTP-to-HTTPS redirect for regional external Application Load Balancers").
    f.redirect_url_map = f
        .redirect_url_map
        .as_ref()
        .map(|m| moved(m, project, region));
    f.target_http_proxy = f
        .target_http_proxy
        .as_ref()
        .map(|p| moved(p, project, region));
    f.target_https_proxy = f.target_https_proxy.as_ref().map(|p| {
        let mut p: model::TargetHttpsProxy = moved(p, project, region);
        p.ssl_policy = None;
        p.quic_override = None;
        p
    });
    f.ssl_certificates = f
        .ssl_certificates
        .iter()
        .map(|c| moved(c, project, region))
        .collect();
    f.static_ip_name = super::annotations::get(ingress, REGIONAL_STATIC_IP_NAME)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    if let Some(name) = f
        .static_ip_name
        .as_deref()
        .filter(|n| !super::namer::is_valid_name(n))
    {
        return Err(TranslateError::InvalidAnnotation {
            kind: "Ingress",
            object: ObjectKey::of(ingress).to_string(),
            annotation: REGIONAL_STATIC_IP_NAME.to_owned(),
            reason: format!("{name:?} is not a valid regional Address name (lower-case letters, digits and `-`, at most 63 characters); fix the name"),
        });
    }
    let subnetwork = config.subnetwork.as_ref().map(|s| {
        format!(
            "projects/{}/regions/{region}/subnetworks/{s}",
            config.network_project
        )
    });
    for rule in [&mut f.http_forwarding_rule, &mut f.https_forwarding_rule]
        .into_iter()
        .flatten()
    {
        let mut r: model::ForwardingRule = moved(rule, project, region);
        r.load_balancing_scheme = Some(forwarding_rule::LoadBalancingScheme::from(scheme));
        r.network = Some(config.network_ref());
        match kind {
            RegionalClass::Internal => r.subnetwork = subnetwork.clone(),
            RegionalClass::External => {
                r.network_tier = Some(forwarding_rule::NetworkTier::from(DEFAULT_NETWORK_TIER));
            }
        }
        *rule = r;
    }
    desired.region = Some(region.to_string());
    if kind == RegionalClass::External {
        desired = name_regional_external_backends(desired, config, region);
    }
    Ok(desired)
}

/// Renames the backend services and health checks of a regional external Ingress `desired`
/// (already moved into `region`) to [`super::namer::regional_external_backend`]'s names, in the
/// backends' map, their `name`s and every reference to them (backend services' `healthChecks`,
/// the URL map's services). Their NEGs keep their names: the NEGs are shared by every class.
/// Pure and deterministic: the same input gives the same output.
fn name_regional_external_backends(
    mut desired: DesiredIngress,
    config: &TranslateConfig,
    region: &str,
) -> DesiredIngress {
    let project = &config.project;
    let regional = |collection: &str, name: &str| {
        format!("projects/{project}/regions/{region}/{collection}/{name}")
    };
    let mut refs: BTreeMap<String, String> = BTreeMap::new();
    let mut backends = BTreeMap::new();
    for (old, mut backend) in std::mem::take(&mut desired.backends) {
        let k = &backend.key;
        let new = config.regional_external_backend_name(&k.namespace, &k.service, k.port);
        for collection in ["backendServices", "healthChecks"] {
            refs.insert(regional(collection, &old), regional(collection, &new));
        }
        if let Some(hc) = backend.health_check.name.as_mut() {
            hc.clone_from(&new);
        }
        backend.backend_service.name = Some(new.clone());
        backends.insert(new, backend);
    }
    for backend in backends.values_mut() {
        backend.backend_service = renamed(&backend.backend_service, &refs);
    }
    desired.backends = backends;
    let f = &mut desired.frontend;
    f.url_map = f.url_map.as_ref().map(|m| renamed(m, &refs));
    desired
}

/// `value` with every string equal to a key of `refs` replaced by its value.
fn renamed<T: Serialize + DeserializeOwned + Clone>(
    value: &T,
    refs: &BTreeMap<String, String>,
) -> T {
    fn walk(v: &mut serde_json::Value, refs: &BTreeMap<String, String>) {
        match v {
            serde_json::Value::String(s) => {
                if let Some(new) = refs.get(s.as_str()) {
                    s.clone_from(new);
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|i| walk(i, refs)),
            serde_json::Value::Object(map) => map.values_mut().for_each(|i| walk(i, refs)),
            _ => {}
        }
    }
    let Ok(mut json) = serde_json::to_value(value) else {
        return value.clone();
    };
    walk(&mut json, refs);
    serde_json::from_value(json).unwrap_or_else(|_| value.clone())
}

/// `value` with every `.../global/{collection}/...` reference of [`REGIONAL_COLLECTIONS`] in
/// `project` made regional.
fn moved<T: Serialize + DeserializeOwned + Clone>(value: &T, project: &str, region: &str) -> T {
    let Ok(mut json) = serde_json::to_value(value) else {
        return value.clone();
    };
    rewrite(&mut json, project, region);
    serde_json::from_value(json).unwrap_or_else(|_| value.clone())
}

fn rewrite(v: &mut serde_json::Value, project: &str, region: &str) {
    match v {
        serde_json::Value::String(s) => {
            for coll in REGIONAL_COLLECTIONS {
                let global = format!("projects/{project}/global/{coll}/");
                if s.contains(&global) {
                    *s = s.replace(
                        &global,
                        &format!("projects/{project}/regions/{region}/{coll}/"),
                    );
                }
            }
        }
        serde_json::Value::Array(items) => {
            items.iter_mut().for_each(|i| rewrite(i, project, region))
        }
        serde_json::Value::Object(map) => {
            map.values_mut().for_each(|i| rewrite(i, project, region))
        }
        _ => {}
    }
}

fn refuse_unsupported(
    desired: &DesiredIngress,
    ingress: &Ingress,
    config: &TranslateConfig,
    kind: RegionalClass,
) -> Result<(), TranslateError> {
    let key = ObjectKey::of(ingress);
    let refuse = |feature: String, fix: &str| TranslateError::UnsupportedOnRegional {
        ingress: key.to_string(),
        load_balancer: kind.load_balancer().to_string(),
        class: kind.class(config).to_string(),
        feature,
        fix: fix.to_string(),
    };
    let annotation = |name: &str| {
        ingress
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(name))
            .filter(|v| !v.is_empty())
            .is_some()
    };
    for backend in desired.backends.values() {
        let bs = &backend.backend_service;
        let of = format!(
            "Service {}/{} port {}",
            backend.key.namespace, backend.key.service, backend.key.port
        );
        if bs.enable_cdn == Some(true) {
            return Err(refuse(
                format!("Cloud CDN (BackendConfig spec.cdn.enabled of {of})"),
                "remove spec.cdn from the BackendConfig, or use the external class",
            ));
        }
        if bs.security_policy.as_deref().is_some_and(|p| !p.is_empty()) {
            return Err(refuse(
                format!("a Cloud Armor security policy (BackendConfig spec.securityPolicy of {of})"),
                "regional security policies are not managed by this operator; remove spec.securityPolicy or use the external class",
            ));
        }
        if kind == RegionalClass::External && bs.iap.as_ref().and_then(|i| i.enabled) == Some(true)
        {
            return Err(refuse(
                format!("Identity-Aware Proxy (BackendConfig spec.iap.enabled of {of})"),
                "remove spec.iap from the BackendConfig, or use the external or internal class",
            ));
        }
    }
    if desired.security_policy.is_some() {
        return Err(refuse(
            "ncp/whitelist-source-range (a Cloud Armor security policy)".into(),
            "remove the annotation; restrict sources with VPC firewall rules instead",
        ));
    }
    if annotation(MANAGED_CERTIFICATES) {
        return Err(refuse(
            format!("Google-managed certificates (annotation {MANAGED_CERTIFICATES})"),
            "regional certificates are self-managed only: use spec.tls Secrets or ingress.gcp.kubernetes.io/pre-shared-cert with regional certificates",
        ));
    }
    if annotation(GLOBAL_STATIC_IP_NAME) {
        return Err(refuse(
            format!("a global static IP (annotation {GLOBAL_STATIC_IP_NAME})"),
            &format!("reserve a regional address and name it in {REGIONAL_STATIC_IP_NAME} instead, or remove the annotation"),
        ));
    }
    let f = &desired.frontend;
    if f.http_forwarding_rule.is_some()
        && f.https_forwarding_rule.is_some()
        && super::annotations::get(ingress, REGIONAL_STATIC_IP_NAME)
            .is_none_or(|v| v.trim().is_empty())
    {
        // Two regional forwarding rules share an IP only through a reserved address (GKE:
        // `WillNotConfigureFrontend`, inventory §6).
        let purpose = match kind {
            RegionalClass::Internal => " --purpose=SHARED_LOADBALANCER_VIP",
            RegionalClass::External => "",
        };
        return Err(refuse(
            "HTTP and HTTPS on one ephemeral address (spec.tls with HTTP allowed)".into(),
            &format!("reserve a regional {} address (gcloud compute addresses create NAME --region=REGION{}{purpose}) and name it in {REGIONAL_STATIC_IP_NAME}, or set kubernetes.io/ingress.allow-http: \"false\"", kind.address_type(), if kind == RegionalClass::Internal { " --subnet=SUBNET" } else { "" }),
        ));
    }
    if let Some(proxy) = &desired.frontend.target_https_proxy {
        if proxy.ssl_policy.as_deref().is_some_and(|p| !p.is_empty()) {
            return Err(refuse(
                "an SSL policy (FrontendConfig spec.sslPolicy)".into(),
                "remove spec.sslPolicy from the FrontendConfig (global SSL policies do not apply to regional proxies)",
            ));
        }
    }
    Ok(())
}

/// The regional load balancer a translated Ingress is ([`regionalize`] made it): the
/// `loadBalancingScheme` of its forwarding rules, else of its backend services; `None` for the
/// global external load balancer.
pub fn class_of(desired: &DesiredIngress) -> Option<RegionalClass> {
    desired.region.as_ref()?;
    let f = &desired.frontend;
    let rules = [&f.http_forwarding_rule, &f.https_forwarding_rule]
        .into_iter()
        .flatten()
        .filter_map(|r| r.load_balancing_scheme.as_ref().and_then(|s| s.name()));
    let services = desired.backends.values().filter_map(|b| {
        b.backend_service
            .load_balancing_scheme
            .as_ref()
            .and_then(|s| s.name())
    });
    rules.chain(services).find_map(RegionalClass::of_scheme)
}
