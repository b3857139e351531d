//! One Service port -> its backend service, health check and NEGs (inventory §4 "Backend
//! names", "Per-Ingress vs shared resources"; §3a BackendConfig).
//!
//! Every field we manage is set explicitly, defaults included: timeoutSec 30,
//! connectionDraining 0, sessionAffinity NONE, affinityCookieTtlSec 0, logConfig enabled at
//! sample rate 1.0, CDN off, no custom headers, no security policy. A BackendConfig overrides
//! them; removing a BackendConfig field returns the backend service to the default (GKE
//! leaves the old value, ingress-gce #1706 and #2209). `securityPolicy` absent or `name: ""`
//! both mean "no policy" (`security_policy: None`).

use google_cloud_compute_v1::model::{self, backend, backend_service};

use super::annotations;
use super::endpoints::{neg_zones, service_endpoints};
use super::gke_fields as gke;
use super::health_check::{self, HealthCheckInputs};
use super::namer::Scheme;
use super::service_ports::ResolvedBackend;
use super::{
    ClusterSnapshot, DesiredBackend, DesiredNeg, Finding, ObjectKey, TranslateConfig,
    TranslateError,
};
use crate::crd::backend_config::{BackendConfigSpec, CacheMode, CdnConfig};

/// Backend service `timeoutSec` default, in seconds.
pub const DEFAULT_TIMEOUT_SEC: i32 = 30;
/// Backend `maxRatePerEndpoint` default (requests per second per endpoint).
pub const DEFAULT_MAX_RATE_PER_ENDPOINT: f32 = 1.0;
/// Reason of the Warning Event for an endpoint put in no NEG (its zone is unknown or not one of
/// `--zone`).
pub const ENDPOINT_ZONE_REASON: &str = "EndpointZone";
/// Backend `capacityScaler` default.
pub const DEFAULT_CAPACITY_SCALER: f32 = 1.0;

/// Builds the [`DesiredBackend`] of a resolved Service port.
///
/// # Errors
/// Bad Service annotations (`app-protocols`, `backend-config`, traffic-scaling) or a bound
/// BackendConfig that does not exist.
pub fn desired_backend(
    snapshot: &ClusterSnapshot,
    config: &TranslateConfig,
    resolved: &ResolvedBackend<'_>,
) -> Result<DesiredBackend, TranslateError> {
    let key = &resolved.key;
    let service_key = ObjectKey::new(key.namespace.clone(), key.service.clone());
    let name = config.backend_name(&key.namespace, &key.service, key.port);
    let protocol = annotations::app_protocol(resolved.service, resolved.port)?;
    let bc = backend_config(snapshot, resolved, &service_key)?;
    let bc_spec = bc.as_ref().map(|(_, spec)| spec);
    let iap = match &bc {
        Some((bc_key, spec)) => iap(snapshot, bc_key, spec)?,
        None => None,
    };

    let probe = health_check::probe_settings(snapshot, resolved.service, resolved.port, protocol);
    let from_probe = probe.is_some();
    let mut hc = health_check::health_check(&HealthCheckInputs {
        name: &name,
        protocol,
        probe,
        backend_config: bc_spec.and_then(|b| b.health_check.as_ref()),
        // Decided by the Service, not by how an Ingress refers to it, so every Ingress that
        // shares this backend wants the same health check.
        system_default: config
            .default_backend
            .as_ref()
            .is_some_and(|(ns, svc, _)| *ns == key.namespace && *svc == key.service),
    });

    if config.mode.scheme() == Scheme::Gke {
        hc.description = Some(gke::health_check_description(from_probe).to_owned());
    }

    let endpoints = service_endpoints(snapshot, config, &service_key, resolved.port);
    let zones = neg_zones(snapshot, config, endpoints.by_zone.keys());
    let negs: Vec<DesiredNeg> = zones
        .iter()
        .map(|zone| DesiredNeg {
            zone: zone.clone(),
            neg: {
                let mut n = neg(config, &name, &key.namespace, &key.service, key.port);
                n.subnetwork = config.subnetwork_ref(zone);
                n
            },
            endpoints: endpoints.by_zone.get(zone).cloned().unwrap_or_default(),
        })
        .collect();

    let max_rate = annotations::service_f32(
        resolved.service,
        annotations::MAX_RATE_PER_ENDPOINT,
        DEFAULT_MAX_RATE_PER_ENDPOINT,
        0.0..=f32::MAX,
    )?;
    let scaler = annotations::service_f32(
        resolved.service,
        annotations::CAPACITY_SCALER,
        DEFAULT_CAPACITY_SCALER,
        0.0..=1.0,
    )?;
    let backends = negs
        .iter()
        .map(|n| {
            let mut b = model::Backend::default();
            b.group = Some(config.zonal_ref(&n.zone, "networkEndpointGroups", &name));
            b.balancing_mode = Some(backend::BalancingMode::from("RATE"));
            b.max_rate_per_endpoint = Some(max_rate);
            b.capacity_scaler = Some(scaler);
            b
        })
        .collect();

    let mut bs = model::BackendService::default();
    bs.name = Some(name.clone());
    bs.description = Some(
        serde_json::json!({
            "kubernetes.io/service-name": format!("{}/{}", key.namespace, key.service),
            "kubernetes.io/service-port": key.port.to_string(),
        })
        .to_string(),
    );
    bs.protocol = Some(backend_service::Protocol::from(protocol.as_str()));
    if config.mode.scheme() == Scheme::Gke {
        let security_policy = bc_spec.is_some_and(|b| b.security_policy.is_some());
        bs.description = Some(gke::backend_service_description(
            resolved,
            protocol,
            security_policy,
        ));
        let node_port = resolved.port.node_port.unwrap_or(0);
        bs.port_name = Some(format!("port{node_port}"));
        // Deprecated in Compute, but GKE's controller sets it: without it the adopted backend
        // service would differ.
        #[allow(deprecated)]
        {
            bs.port = (node_port > 0).then_some(node_port);
        }
    }
    bs.load_balancing_scheme = Some(backend_service::LoadBalancingScheme::from("EXTERNAL"));
    bs.health_checks = vec![config.global_ref("healthChecks", &name)];
    bs.backends = backends;
    apply_backend_config(&mut bs, bc_spec, config);
    bs.iap = iap;

    let mut firewall_ports = endpoints.target_ports;
    if let Some(port) = bc_spec
        .and_then(|b| b.health_check.as_ref())
        .and_then(|h| h.port)
        .and_then(|p| u16::try_from(p).ok())
    {
        firewall_ports.insert(port);
    }
    let findings = endpoints
        .unplaced
        .iter()
        .map(|u| Finding {
            warning: true,
            reason: ENDPOINT_ZONE_REASON.to_owned(),
            message: format!("Service {}/{}: {u}", key.namespace, key.service),
        })
        .collect();
    Ok(DesiredBackend {
        findings,
        key: key.clone(),
        health_check: hc,
        backend_service: bs,
        negs,
        firewall_ports,
    })
}

fn backend_config(
    snapshot: &ClusterSnapshot,
    resolved: &ResolvedBackend<'_>,
    service_key: &ObjectKey,
) -> Result<Option<(ObjectKey, BackendConfigSpec)>, TranslateError> {
    let Some(name) = annotations::backend_config_name(resolved.service, resolved.port)? else {
        return Ok(None);
    };
    let key = ObjectKey::new(service_key.namespace.clone(), name);
    match snapshot.backend_configs.get(&key) {
        Some(bc) => {
            super::backend_config_checks::check(&key, &bc.spec)?;
            Ok(Some((key, bc.spec.clone())))
        }
        None => Err(TranslateError::BackendConfigNotFound {
            service: service_key.to_string(),
            backend_config: key.to_string(),
            port: resolved.port.port,
        }),
    }
}

/// The backend service `iap` block: `None` when the BackendConfig has no `iap` (not managed).
/// OAuth credentials come from the Secret's `client_id` and `client_secret` keys
/// (inventory §3a); without `oauthclientCredentials` Google's default OAuth client is used.
fn iap(
    snapshot: &ClusterSnapshot,
    bc_key: &ObjectKey,
    spec: &BackendConfigSpec,
) -> Result<Option<model::BackendServiceIAP>, TranslateError> {
    let Some(iap) = spec.iap.as_ref() else {
        return Ok(None);
    };
    let mut out = model::BackendServiceIAP::default();
    out.enabled = Some(iap.enabled);
    if let Some(creds) = iap.oauthclient_credentials.as_ref().filter(|_| iap.enabled) {
        let secret_key = ObjectKey::new(bc_key.namespace.clone(), creds.secret_name.clone());
        let fail = |reason: String| TranslateError::BackendConfigSecret {
            backend_config: bc_key.to_string(),
            field: "spec.iap.oauthclientCredentials.secretName".to_owned(),
            secret: secret_key.to_string(),
            reason,
        };
        let secret = snapshot
            .secrets
            .get(&secret_key)
            .ok_or_else(|| fail("does not exist".to_owned()))?;
        let value = |k: &str| {
            secret
                .data
                .as_ref()
                .and_then(|d| d.get(k))
                .and_then(|v| String::from_utf8(v.0.clone()).ok())
                .or_else(|| secret.string_data.as_ref().and_then(|d| d.get(k)).cloned())
                .ok_or_else(|| fail(format!("has no key {k}")))
        };
        out.oauth_2_client_id = Some(value("client_id")?);
        out.oauth_2_client_secret = Some(value("client_secret")?);
    }
    Ok(Some(out))
}

fn neg(
    config: &TranslateConfig,
    name: &str,
    namespace: &str,
    service: &str,
    port: i32,
) -> model::NetworkEndpointGroup {
    let mut neg = model::NetworkEndpointGroup::default();
    neg.name = Some(name.to_owned());
    neg.network_endpoint_type = Some("GCE_VM_IP_PORT".into());
    neg.network = Some(config.network_ref());
    neg.description = Some(match config.mode.scheme() {
        Scheme::Gke => gke::neg_description(&config.kube_system_uid, namespace, service, port),
        Scheme::Own => serde_json::json!({
            "cluster-uid": config.cluster_uid,
            "namespace": namespace,
            "service-name": service,
            "port": port.to_string(),
        })
        .to_string(),
    });
    neg
}

/// Sets the BackendConfig-controlled fields, falling back to the defaults for absent ones.
fn apply_backend_config(
    bs: &mut model::BackendService,
    bc: Option<&BackendConfigSpec>,
    config: &TranslateConfig,
) {
    let clamp = |v: i64| i32::try_from(v).unwrap_or(i32::MAX);
    let default = BackendConfigSpec::default();
    let bc = bc.unwrap_or(&default);
    bs.timeout_sec = Some(bc.timeout_sec.map(clamp).unwrap_or(DEFAULT_TIMEOUT_SEC));
    let mut draining = model::ConnectionDraining::default();
    draining.draining_timeout_sec = Some(
        bc.connection_draining
            .as_ref()
            .map_or(0, |d| clamp(d.draining_timeout_sec)),
    );
    bs.connection_draining = Some(draining);
    let affinity = bc.session_affinity.as_ref();
    let affinity_type = affinity
        .and_then(|a| a.affinity_type)
        .map_or("NONE", |t| t.as_str());
    bs.session_affinity = Some(backend_service::SessionAffinity::from(affinity_type));
    bs.affinity_cookie_ttl_sec = Some(
        affinity
            .and_then(|a| a.affinity_cookie_ttl_sec)
            .map_or(0, clamp),
    );
    bs.custom_request_headers = bc
        .custom_request_headers
        .as_ref()
        .map(|h| h.headers.clone())
        .unwrap_or_default();
    bs.custom_response_headers = bc
        .custom_response_headers
        .as_ref()
        .map(|h| h.headers.clone())
        .unwrap_or_default();
    bs.security_policy = bc
        .security_policy
        .as_ref()
        .filter(|p| !p.name.is_empty())
        .map(|p| config.global_ref("securityPolicies", &p.name));
    let mut log = model::BackendServiceLogConfig::default();
    log.enable = Some(bc.logging.as_ref().is_none_or(|l| l.enable));
    log.sample_rate = Some(
        bc.logging
            .as_ref()
            .and_then(|l| l.sample_rate)
            .map_or(1.0, |r| r as f32),
    );
    bs.log_config = Some(log);
    let cdn = bc.cdn.as_ref().filter(|c| c.enabled);
    bs.enable_cdn = Some(cdn.is_some());
    bs.cdn_policy = cdn.map(cdn_policy);
}

/// Cloud CDN policy with GKE's defaults (`pkg/backends/features/cdn.go`): CACHE_ALL_STATIC,
/// TTLs 3600/3600/86400, serveWhileStale 86400. Signed-URL keys are separate API calls and not
/// part of the desired resource.
fn cdn_policy(cdn: &CdnConfig) -> model::BackendServiceCdnPolicy {
    let clamp = |v: i64| i32::try_from(v).unwrap_or(i32::MAX);
    let mut p = model::BackendServiceCdnPolicy::default();
    let mode = match cdn.cache_mode.unwrap_or(CacheMode::CacheAllStatic) {
        CacheMode::CacheAllStatic => "CACHE_ALL_STATIC",
        CacheMode::UseOriginHeaders => "USE_ORIGIN_HEADERS",
        CacheMode::ForceCacheAll => "FORCE_CACHE_ALL",
    };
    p.cache_mode = Some(mode.into());
    if mode != "USE_ORIGIN_HEADERS" {
        p.client_ttl = Some(cdn.client_ttl.map_or(3600, clamp));
        p.default_ttl = Some(cdn.default_ttl.map_or(3600, clamp));
    }
    if mode == "CACHE_ALL_STATIC" {
        p.max_ttl = Some(cdn.max_ttl.map_or(86400, clamp));
    }
    p.serve_while_stale = Some(cdn.serve_while_stale.map_or(86400, clamp));
    p.negative_caching = cdn.negative_caching;
    p.negative_caching_policy = cdn
        .negative_caching_policy
        .iter()
        .map(|n| {
            let mut out = model::BackendServiceCdnPolicyNegativeCachingPolicy::default();
            out.code = Some(clamp(n.code));
            out.ttl = Some(clamp(n.ttl));
            out
        })
        .collect();
    p.request_coalescing = cdn.request_coalescing;
    p.signed_url_cache_max_age_sec = cdn.signed_url_cache_max_age_sec;
    p.bypass_cache_on_request_headers = cdn
        .bypass_cache_on_request_headers
        .iter()
        .map(|h| {
            let mut out = model::BackendServiceCdnPolicyBypassCacheOnRequestHeader::default();
            out.header_name = Some(h.header_name.clone());
            out
        })
        .collect();
    if let Some(key) = cdn.cache_policy.as_ref() {
        let mut out = model::CacheKeyPolicy::default();
        out.include_host = Some(key.include_host);
        out.include_protocol = Some(key.include_protocol);
        out.include_query_string = Some(key.include_query_string);
        out.query_string_blacklist = key.query_string_blacklist.clone();
        out.query_string_whitelist = key.query_string_whitelist.clone();
        p.cache_key_policy = Some(out);
    }
    p
}
