//! The regional internal Application Load Balancer of a `gce-internal` Ingress (reference 000,
//! "internal Application Load Balancer"; docs/internal-load-balancers.md).
//!
//! An Ingress of the internal class ([`is_internal`]) is translated as any other
//! ([`super::translate_ingress`]) and then moved into its region by [`regionalize`]:
//! - health checks, backend services, the URL map, target HTTP(S) proxies and SSL certificates
//!   keep their names and move to the regional collections (`regionHealthChecks`, ...); every
//!   reference between them becomes `projects/{project}/regions/{region}/{collection}/{name}`;
//! - backend services get `loadBalancingScheme: INTERNAL_MANAGED`, on the same zonal NEGs as an
//!   external Ingress of the same Service port (NEGs are shared: one per Service port and zone);
//! - forwarding rules get `loadBalancingScheme: INTERNAL_MANAGED`, the cluster's network and
//!   (with `--subnetwork`) subnetwork; the API gives them an address of that subnet.
//!
//! What the internal load balancer cannot do is refused with a [`TranslateError`] naming the
//! feature (nothing is built), per the "What works where" table: Cloud CDN, a Cloud Armor
//! (global) security policy, `ncp/whitelist-source-range`, Google-managed certificates, the
//! HTTP-to-HTTPS redirect, a global static IP, an SSL policy (global) and HTTP/3.

use google_cloud_compute_v1::model;
use google_cloud_compute_v1::model::{backend_service, forwarding_rule};
use k8s_openapi::api::networking::v1::Ingress;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::annotations::{GLOBAL_STATIC_IP_NAME, MANAGED_CERTIFICATES};
use super::ownership::INGRESS_CLASS_ANNOTATION;
use super::{ClusterSnapshot, DesiredIngress, ObjectKey, TranslateConfig, TranslateError};

/// GKE's internal class (`kubernetes.io/ingress.class: gce-internal`), served in takeover mode.
pub const GCE_INTERNAL_CLASS: &str = "gce-internal";
/// The operator's own internal class beside GKE's controller.
pub const GCLB_INTERNAL_CLASS: &str = "gclb-internal";
/// `loadBalancingScheme` of the regional internal Application Load Balancer.
pub const INTERNAL_MANAGED: &str = "INTERNAL_MANAGED";

/// Collections whose references move from `global/` to `regions/{region}/`.
const REGIONAL_COLLECTIONS: &[&str] = &[
    "backendServices",
    "healthChecks",
    "urlMaps",
    "targetHttpProxies",
    "targetHttpsProxies",
    "sslCertificates",
];

/// Whether an owned Ingress asks for the internal load balancer: its
/// `kubernetes.io/ingress.class` annotation, else its `spec.ingressClassName`, else the name of
/// the default IngressClass, is [`TranslateConfig::internal_class`]. (An IngressClass of that
/// name with the operator's controller is how `ingressClassName` selects it.)
pub fn is_internal(
    snapshot: &ClusterSnapshot,
    ingress: &Ingress,
    config: &TranslateConfig,
) -> bool {
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
        });
    class.is_some_and(|c| c == config.internal_class)
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

/// Moves a translated Ingress into `region` as the internal load balancer (module docs), or
/// refuses what that load balancer does not support.
///
/// # Errors
/// [`TranslateError::UnsupportedOnInternal`] naming the first unsupported feature found.
pub fn regionalize(
    mut desired: DesiredIngress,
    ingress: &Ingress,
    config: &TranslateConfig,
    region: &str,
) -> Result<DesiredIngress, TranslateError> {
    refuse_unsupported(&desired, ingress, config)?;
    let project = &config.project;
    for backend in desired.backends.values_mut() {
        backend.health_check = moved(&backend.health_check, project, region);
        let mut bs: model::BackendService = moved(&backend.backend_service, project, region);
        bs.load_balancing_scheme =
            Some(backend_service::LoadBalancingScheme::from(INTERNAL_MANAGED));
        bs.enable_cdn = None;
        bs.cdn_policy = None;
        bs.security_policy = None;
        backend.backend_service = bs;
    }
    let f = &mut desired.frontend;
    f.url_map = f.url_map.as_ref().map(|m| moved(m, project, region));
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
        r.load_balancing_scheme =
            Some(forwarding_rule::LoadBalancingScheme::from(INTERNAL_MANAGED));
        r.network = Some(config.network_ref());
        r.subnetwork = subnetwork.clone();
        *rule = r;
    }
    desired.region = Some(region.to_string());
    Ok(desired)
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
) -> Result<(), TranslateError> {
    let key = ObjectKey::of(ingress);
    let refuse = |feature: String, fix: &str| TranslateError::UnsupportedOnInternal {
        ingress: key.to_string(),
        class: config.internal_class.clone(),
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
            "remove the annotation; the internal address comes from the cluster's subnetwork",
        ));
    }
    if desired.frontend.redirect_url_map.is_some() {
        return Err(refuse(
            "the HTTP-to-HTTPS redirect (FrontendConfig spec.redirectToHttps)".into(),
            "remove spec.redirectToHttps from the FrontendConfig",
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
