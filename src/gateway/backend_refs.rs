//! backendRefs -> Service ports -> backend services (Gateway API `BackendRef`, `ResolvedRefs`
//! reasons `InvalidKind`, `RefNotPermitted`, `BackendNotFound`; ReferenceGrant for a Service in
//! another namespace).
//!
//! A Service port becomes, on the same zonal NEGs (one per zone, `GCE_VM_IP_PORT`):
//! - for HTTPRoutes, the backend service the Ingress translation builds for it (health check
//!   from the readiness probe, BackendConfig, app protocol annotations), renamed into the Gateway
//!   namespace of names and with `loadBalancingScheme: EXTERNAL_MANAGED`;
//! - for TLSRoutes, a `TCP` backend service (`EXTERNAL_MANAGED`, balancing mode CONNECTION) with
//!   a TCP health check on the serving port: the proxy never looks inside the stream.

use std::collections::BTreeMap;

use google_cloud_compute_v1::model::{self, backend, backend_service, health_check};
use serde_json::{json, Value};

use super::conditions::{reasons, types, Cond};
use super::inputs::{GatewayInputs, RouteKind, GROUP};
use super::namer;
use crate::translate::backends::desired_backend;
use crate::translate::service_ports::{resolve, PortRef, ResolvedBackend};
use crate::translate::{DesiredBackend, ObjectKey, ServicePortKey, TranslateConfig};

/// One weighted backend of a rule.
#[derive(Clone, Debug, PartialEq)]
pub struct WeightedBackend {
    /// `projects/p/global/backendServices/x`.
    pub service_ref: String,
    /// `weight` (default 1).
    pub weight: u32,
    /// The backendRef's header filters as a Compute `headerAction`.
    pub header_action: Option<Value>,
}

/// The backends of one rule after resolution.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResolvedRule {
    /// Valid backendRefs.
    pub backends: Vec<WeightedBackend>,
    /// Sum of the weights of invalid backendRefs (their share of requests gets 500).
    pub invalid_weight: u32,
    /// RequestMirror: (backend service reference, percent).
    pub mirror: Option<(String, f64)>,
}

/// A reference as the API writes it.
#[derive(Clone, Debug)]
pub struct Ref<'a> {
    /// `group` (default core `""`).
    pub group: Option<&'a str>,
    /// `kind` (default `Service`).
    pub kind: Option<&'a str>,
    /// `namespace` (default: the route's).
    pub namespace: Option<&'a str>,
    /// `name`.
    pub name: &'a str,
    /// `port`.
    pub port: Option<i32>,
}

/// Resolves one backendRef of a `route_kind` in `route_ns`; on failure the `ResolvedRefs`
/// condition to report.
pub fn resolve_ref<'a>(
    inputs: &'a GatewayInputs,
    route_kind: RouteKind,
    route: &ObjectKey,
    r: &Ref<'_>,
) -> Result<ResolvedBackend<'a>, Cond> {
    let group = r.group.unwrap_or("");
    let kind = r.kind.unwrap_or("Service");
    if !group.is_empty() || kind != "Service" {
        return Err(Cond::no(
            types::RESOLVED_REFS,
            reasons::INVALID_KIND,
            format!(
                "backendRef {group}/{kind} {:?} is not a Service; only core Services are supported",
                r.name
            ),
        ));
    }
    let ns = r.namespace.unwrap_or(&route.namespace);
    if !inputs.reference_granted(
        (GROUP, route_kind.as_str(), &route.namespace),
        ("", "Service", ns, r.name),
    ) {
        return Err(Cond::no(
            types::RESOLVED_REFS,
            reasons::REF_NOT_PERMITTED,
            format!("backendRef to Service {ns}/{} needs a ReferenceGrant in namespace {ns} allowing {} from namespace {}", r.name, route_kind.as_str(), route.namespace),
        ));
    }
    let Some(port) = r.port else {
        return Err(Cond::no(
            types::RESOLVED_REFS,
            reasons::BACKEND_NOT_FOUND,
            format!(
                "backendRef to Service {ns}/{} has no port; set backendRefs[].port",
                r.name
            ),
        ));
    };
    resolve(
        &inputs.cluster,
        route,
        &ObjectKey::new(ns, r.name),
        &PortRef::Number(port),
        "backendRefs[].name",
        "backendRefs[].port",
    )
    .map_err(|e| {
        Cond::no(
            types::RESOLVED_REFS,
            reasons::BACKEND_NOT_FOUND,
            e.to_string(),
        )
    })
}

/// The HTTP backend of a Service port: Ingress translation's backend, renamed and made
/// EXTERNAL_MANAGED.
///
/// # Errors
/// The Ingress translation's errors for the Service (bad annotations, a missing BackendConfig).
pub fn http_backend(
    inputs: &GatewayInputs,
    config: &TranslateConfig,
    resolved: &ResolvedBackend<'_>,
) -> Result<DesiredBackend, crate::translate::TranslateError> {
    let mut b = desired_backend(&inputs.cluster, config, resolved)?;
    let k = &resolved.key;
    let name = namer::backend(&config.cluster_uid, &k.namespace, &k.service, k.port);
    rename(&mut b, config, &name, &name);
    b.backend_service.load_balancing_scheme = Some(backend_service::LoadBalancingScheme::from(
        "EXTERNAL_MANAGED",
    ));
    Ok(b)
}

fn rename(b: &mut DesiredBackend, config: &TranslateConfig, name: &str, neg: &str) {
    b.health_check.name = Some(name.to_owned());
    b.backend_service.name = Some(name.to_owned());
    b.backend_service.health_checks = vec![config.global_ref("healthChecks", name)];
    for (backend, n) in b.backend_service.backends.iter_mut().zip(b.negs.iter_mut()) {
        n.neg.name = Some(neg.to_owned());
        backend.group = Some(config.zonal_ref(&n.zone, "networkEndpointGroups", neg));
    }
}

/// The TCP backend of a Service port for TLSRoutes (see the module docs).
///
/// # Errors
/// As [`http_backend`].
pub fn tcp_backend(
    inputs: &GatewayInputs,
    config: &TranslateConfig,
    resolved: &ResolvedBackend<'_>,
) -> Result<DesiredBackend, crate::translate::TranslateError> {
    let mut b = desired_backend(&inputs.cluster, config, resolved)?;
    let k = &resolved.key;
    let neg = namer::backend(&config.cluster_uid, &k.namespace, &k.service, k.port);
    let name = namer::tcp_backend(&config.cluster_uid, &k.namespace, &k.service, k.port);
    rename(&mut b, config, &name, &neg);
    let old_hc = b.health_check.clone();
    let mut hc = model::HealthCheck::default();
    hc.name = Some(name.clone());
    hc.description = old_hc.description;
    hc.r#type = Some(health_check::Type::from("TCP"));
    hc.check_interval_sec = old_hc.check_interval_sec;
    hc.timeout_sec = old_hc.timeout_sec;
    hc.healthy_threshold = old_hc.healthy_threshold;
    hc.unhealthy_threshold = old_hc.unhealthy_threshold;
    hc.tcp_health_check = Some(model::TCPHealthCheck::default().set_port_specification(
        model::tcp_health_check::PortSpecification::from("USE_SERVING_PORT"),
    ));
    b.health_check = hc;
    let mut bs = model::BackendService::default();
    bs.name = Some(name.clone());
    bs.description = b.backend_service.description.clone();
    bs.protocol = Some(backend_service::Protocol::from("TCP"));
    bs.load_balancing_scheme = Some(backend_service::LoadBalancingScheme::from(
        "EXTERNAL_MANAGED",
    ));
    bs.health_checks = vec![config.global_ref("healthChecks", &name)];
    bs.timeout_sec = Some(crate::translate::backends::DEFAULT_TIMEOUT_SEC);
    bs.backends = b
        .negs
        .iter()
        .map(|n| {
            let mut be = model::Backend::default();
            be.group = Some(config.zonal_ref(&n.zone, "networkEndpointGroups", &neg));
            be.balancing_mode = Some(backend::BalancingMode::from("CONNECTION"));
            be.max_connections_per_endpoint = Some(1000);
            be.capacity_scaler = Some(1.0);
            be
        })
        .collect();
    b.backend_service = bs;
    Ok(b)
}

/// A backend service with no backends for a TLS passthrough port's target TCP proxy: what no
/// TLS route matches finds no endpoint, and the connection is closed.
pub fn no_match_backend(name: &str) -> model::BackendService {
    let mut bs = model::BackendService::default();
    bs.name = Some(name.to_owned());
    bs.description =
        Some("gclb-operator: TLS connections whose SNI matches no TLSRoute are closed".to_owned());
    bs.protocol = Some(backend_service::Protocol::from("TCP"));
    bs.load_balancing_scheme = Some(backend_service::LoadBalancingScheme::from(
        "EXTERNAL_MANAGED",
    ));
    bs.timeout_sec = Some(crate::translate::backends::DEFAULT_TIMEOUT_SEC);
    bs
}

/// Everything the routes of one Gateway need, collected while resolving.
#[derive(Debug, Default)]
pub struct BackendSet {
    /// Desired backends by backend service name.
    pub backends: BTreeMap<String, DesiredBackend>,
    /// Problems building a backend (annotations, BackendConfig), by Service port.
    pub errors: BTreeMap<ServicePortKey, String>,
}

impl BackendSet {
    /// Adds the HTTP backend of `resolved`; its `projects/p/global/backendServices/x` reference.
    pub fn http(
        &mut self,
        inputs: &GatewayInputs,
        config: &TranslateConfig,
        resolved: &ResolvedBackend<'_>,
    ) -> Result<String, String> {
        self.add(resolved, || http_backend(inputs, config, resolved), config)
    }

    /// Adds the TCP backend of `resolved`.
    pub fn tcp(
        &mut self,
        inputs: &GatewayInputs,
        config: &TranslateConfig,
        resolved: &ResolvedBackend<'_>,
    ) -> Result<String, String> {
        self.add(resolved, || tcp_backend(inputs, config, resolved), config)
    }

    fn add(
        &mut self,
        resolved: &ResolvedBackend<'_>,
        build: impl FnOnce() -> Result<DesiredBackend, crate::translate::TranslateError>,
        config: &TranslateConfig,
    ) -> Result<String, String> {
        match build() {
            Ok(b) => {
                let name = b.backend_service.name.clone().unwrap_or_default();
                self.backends.entry(name.clone()).or_insert(b);
                Ok(config.global_ref("backendServices", &name))
            }
            Err(e) => {
                self.errors.insert(resolved.key.clone(), e.to_string());
                Err(e.to_string())
            }
        }
    }
}

/// A backendRef's RequestHeaderModifier/ResponseHeaderModifier filters as a `headerAction`.
pub fn backend_header_action(filters: &[Value]) -> Option<Value> {
    let mut req_add = Vec::new();
    let mut req_remove = Vec::new();
    let mut resp_add = Vec::new();
    let mut resp_remove = Vec::new();
    for f in filters {
        for (key, add, remove) in [
            ("requestHeaderModifier", &mut req_add, &mut req_remove),
            ("responseHeaderModifier", &mut resp_add, &mut resp_remove),
        ] {
            let m = &f[key];
            for h in m["set"].as_array().into_iter().flatten() {
                add.push(
                    json!({"headerName": h["name"], "headerValue": h["value"], "replace": true}),
                );
            }
            for h in m["add"].as_array().into_iter().flatten() {
                add.push(
                    json!({"headerName": h["name"], "headerValue": h["value"], "replace": false}),
                );
            }
            remove.extend(m["remove"].as_array().into_iter().flatten().cloned());
        }
    }
    let out = json!({
        "requestHeadersToAdd": req_add,
        "requestHeadersToRemove": req_remove,
        "responseHeadersToAdd": resp_add,
        "responseHeadersToRemove": resp_remove,
    });
    (!(req_add_empty(&out))).then_some(out)
}

fn req_add_empty(v: &Value) -> bool {
    [
        "requestHeadersToAdd",
        "requestHeadersToRemove",
        "responseHeadersToAdd",
        "responseHeadersToRemove",
    ]
    .iter()
    .all(|k| v[*k].as_array().is_none_or(Vec::is_empty))
}
