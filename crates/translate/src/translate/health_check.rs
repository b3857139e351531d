//! Health check derivation: BackendConfig `healthCheck` > the serving Pods' readiness probe >
//! the NEG defaults (reference 000 "Health checks"; inventory §6).
//!
//! Deliberate difference from GKE: GKE keeps interval, thresholds, timeout and path of an
//! existing health check (so probe changes and BackendConfig removals are ignored, ingress-gce
//! #39, #317). Here the health check always follows the current derivation, so a changed
//! readiness probe or a removed BackendConfig field takes effect on the next sync.
//!
//! Beyond GKE: BackendConfig `healthCheck.type: GRPC` (with `grpcServiceName`) gives a Compute
//! health check of type `GRPC_WITH_TLS` for HTTPS/HTTP2 ports and `GRPC` for HTTP ports, which
//! calls `grpc.health.v1.Health/Check`; `requestPath` and the readiness probe's path do not
//! apply to it.
//!
//! Defaults follow GKE's controller for NEG backends: interval 15 s, timeout 15 s (reference
//! 000's table says 5 s; the controller uses 15), healthy 1, unhealthy 2, serving port, path
//! `/` (`/healthz` for the system default backend). GCE refuses a timeout longer than the
//! interval, so the timeout is capped at the interval.

use google_cloud_compute_v1::model::{self, health_check, http_health_check};
use k8s_openapi::api::core::v1::{Probe, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::annotations::AppProtocol;
use super::pod::PodRecord;
use super::snapshot::in_namespace;
use super::ClusterSnapshot;
use crate::crd::backend_config::{HealthCheckConfig, HealthCheckType};

/// Default seconds between probes for NEG backends.
pub const DEFAULT_CHECK_INTERVAL_SEC: i32 = 15;
/// Default probe timeout in seconds for NEG backends.
pub const DEFAULT_TIMEOUT_SEC: i32 = 15;
/// Default healthy threshold.
pub const DEFAULT_HEALTHY_THRESHOLD: i32 = 1;
/// Default unhealthy threshold for NEG backends.
pub const DEFAULT_UNHEALTHY_THRESHOLD: i32 = 2;
/// Default request path.
pub const DEFAULT_REQUEST_PATH: &str = "/";
/// Request path of the system default backend.
pub const DEFAULT_BACKEND_REQUEST_PATH: &str = "/healthz";
/// Description GKE gives NEG health checks.
pub const HEALTH_CHECK_DESCRIPTION: &str =
    "Default kubernetes L7 Loadbalancing health check for NEG.";

/// Settings taken from a readiness probe.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbeSettings {
    /// `httpGet.path` with a leading `/`.
    pub request_path: Option<String>,
    /// The `Host` header of `httpGet.httpHeaders`.
    pub host: Option<String>,
    /// `periodSeconds`.
    pub check_interval_sec: Option<i32>,
    /// `timeoutSeconds`.
    pub timeout_sec: Option<i32>,
}

/// The readiness probe of the first qualifying container of the Service's Pods (sorted by
/// creation time, then name): the container must expose the Service's targetPort, and its
/// readinessProbe must be an `httpGet` on that same port, with no `host`, at most a `Host`
/// header, and scheme HTTPS for HTTPS/HTTP2 backends (HTTP otherwise).
pub fn probe_settings(
    snapshot: &ClusterSnapshot,
    service: &Service,
    port: &ServicePort,
    protocol: AppProtocol,
) -> Option<ProbeSettings> {
    let selector = service
        .spec
        .as_ref()?
        .selector
        .as_ref()
        .filter(|s| !s.is_empty())?;
    let namespace = service.metadata.namespace.as_deref().unwrap_or("");
    let mut pods: Vec<&PodRecord> = in_namespace(&snapshot.pods, namespace)
        .map(|(_, p)| p.as_ref())
        .filter(|p| {
            let labels = p.metadata.labels.as_ref();
            selector
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        })
        .collect();
    pods.sort_by(|a, b| {
        (
            a.metadata.creation_timestamp.as_ref().map(|t| t.0),
            &a.metadata.name,
        )
            .cmp(&(
                b.metadata.creation_timestamp.as_ref().map(|t| t.0),
                &b.metadata.name,
            ))
    });
    let target = port
        .target_port
        .clone()
        .unwrap_or(IntOrString::Int(port.port));
    let want_scheme = if protocol == AppProtocol::Http {
        "HTTP"
    } else {
        "HTTPS"
    };
    pods.iter()
        .flat_map(|p| p.spec.iter().flat_map(|s| s.containers.iter()))
        .find_map(|c| {
            let probe = c.readiness_probe.as_ref()?;
            let http = simple_http_get(probe)?;
            if http.scheme.as_deref().unwrap_or("HTTP") != want_scheme {
                return None;
            }
            c.ports.iter().flatten().find(|cp| {
                let serves_target = match &target {
                    IntOrString::Int(n) => cp.container_port == *n,
                    IntOrString::String(name) => cp.name.as_deref() == Some(name.as_str()),
                };
                let probes_it = match &http.port {
                    IntOrString::Int(n) => cp.container_port == *n,
                    IntOrString::String(name) => cp.name.as_deref() == Some(name.as_str()),
                };
                serves_target && probes_it
            })?;
            Some(ProbeSettings {
                request_path: http.path.as_deref().filter(|p| !p.is_empty()).map(|p| {
                    if p.starts_with('/') {
                        p.to_owned()
                    } else {
                        format!("/{p}")
                    }
                }),
                host: http
                    .http_headers
                    .iter()
                    .flatten()
                    .find(|h| h.name.eq_ignore_ascii_case("host"))
                    .map(|h| h.value.clone()),
                check_interval_sec: probe.period_seconds,
                timeout_sec: probe.timeout_seconds,
            })
        })
}

fn simple_http_get(probe: &Probe) -> Option<&k8s_openapi::api::core::v1::HTTPGetAction> {
    let http = probe.http_get.as_ref()?;
    if http.host.as_deref().is_some_and(|h| !h.is_empty()) {
        return None;
    }
    let headers = http.http_headers.as_deref().unwrap_or_default();
    let only_host =
        headers.is_empty() || (headers.len() == 1 && headers[0].name.eq_ignore_ascii_case("host"));
    only_host.then_some(http)
}

/// Inputs of [`health_check`].
#[derive(Clone, Debug)]
pub struct HealthCheckInputs<'a> {
    /// Resource name (equal to the backend service name).
    pub name: &'a str,
    /// The Service port's app protocol.
    pub protocol: AppProtocol,
    /// Settings from the readiness probe, if one qualified.
    pub probe: Option<ProbeSettings>,
    /// The BackendConfig's `healthCheck`, if any.
    pub backend_config: Option<&'a HealthCheckConfig>,
    /// Whether this is the system default backend (path `/healthz`).
    pub system_default: bool,
}

/// Builds the health check; every field we manage is set explicitly.
pub fn health_check(inputs: &HealthCheckInputs<'_>) -> model::HealthCheck {
    let probe = inputs.probe.clone().unwrap_or_default();
    let bc = inputs.backend_config.cloned().unwrap_or_default();
    let clamp = |v: i64| i32::try_from(v).unwrap_or(i32::MAX);
    let interval = bc
        .check_interval_sec
        .map(clamp)
        .or(probe.check_interval_sec)
        .filter(|v| *v > 0)
        .unwrap_or(DEFAULT_CHECK_INTERVAL_SEC);
    let timeout = bc
        .timeout_sec
        .map(clamp)
        .or(probe.timeout_sec)
        .filter(|v| *v > 0)
        .unwrap_or(DEFAULT_TIMEOUT_SEC)
        .min(interval);
    let type_name = match bc.type_ {
        Some(HealthCheckType::Http) => "HTTP",
        Some(HealthCheckType::Https) => "HTTPS",
        Some(HealthCheckType::Http2) => "HTTP2",
        // Beyond GKE: the gRPC health checking protocol, over TLS when the backend speaks TLS.
        Some(HealthCheckType::Grpc) if inputs.protocol == AppProtocol::Http => "GRPC",
        Some(HealthCheckType::Grpc) => "GRPC_WITH_TLS",
        None => inputs.protocol.as_str(),
    };
    let default_path = if inputs.system_default {
        DEFAULT_BACKEND_REQUEST_PATH
    } else {
        DEFAULT_REQUEST_PATH
    };
    let request_path = bc
        .request_path
        .clone()
        .or(probe.request_path)
        .unwrap_or_else(|| default_path.to_owned());
    let fixed_port = bc.port.and_then(|p| i32::try_from(p).ok());
    let spec = if fixed_port.is_some() {
        "USE_FIXED_PORT"
    } else {
        "USE_SERVING_PORT"
    };

    let mut hc = model::HealthCheck::default();
    hc.name = Some(inputs.name.to_owned());
    hc.description = Some(HEALTH_CHECK_DESCRIPTION.to_owned());
    hc.check_interval_sec = Some(interval);
    hc.timeout_sec = Some(timeout);
    hc.healthy_threshold = Some(
        bc.healthy_threshold
            .map(clamp)
            .unwrap_or(DEFAULT_HEALTHY_THRESHOLD),
    );
    hc.unhealthy_threshold = Some(
        bc.unhealthy_threshold
            .map(clamp)
            .unwrap_or(DEFAULT_UNHEALTHY_THRESHOLD),
    );
    hc.r#type = Some(health_check::Type::from(type_name));
    match type_name {
        "HTTPS" => {
            let mut h = model::HTTPSHealthCheck::default();
            h.port_specification = Some(spec.into());
            h.port = fixed_port;
            h.request_path = Some(request_path);
            h.host = probe.host;
            hc.https_health_check = Some(h);
        }
        "GRPC" => {
            let mut h = model::GRPCHealthCheck::default();
            h.port_specification = Some(spec.into());
            h.port = fixed_port;
            h.grpc_service_name = bc.grpc_service_name.clone().filter(|n| !n.is_empty());
            hc.grpc_health_check = Some(h);
        }
        "GRPC_WITH_TLS" => {
            let mut h = model::GRPCTLSHealthCheck::default();
            h.port_specification = Some(spec.into());
            h.port = fixed_port;
            h.grpc_service_name = bc.grpc_service_name.clone().filter(|n| !n.is_empty());
            hc.grpc_tls_health_check = Some(h);
        }
        "HTTP2" => {
            let mut h = model::HTTP2HealthCheck::default();
            h.port_specification = Some(spec.into());
            h.port = fixed_port;
            h.request_path = Some(request_path);
            h.host = probe.host;
            hc.http_2_health_check = Some(h);
        }
        _ => {
            let mut h = model::HTTPHealthCheck::default();
            h.port_specification = Some(http_health_check::PortSpecification::from(spec));
            h.port = fixed_port;
            h.request_path = Some(request_path);
            h.host = probe.host;
            hc.http_health_check = Some(h);
        }
    }
    hc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(protocol: AppProtocol, bc: &HealthCheckConfig) -> model::HealthCheck {
        health_check(&HealthCheckInputs {
            name: "k8s1-x",
            protocol,
            probe: Some(ProbeSettings {
                request_path: Some("/ready".into()),
                ..Default::default()
            }),
            backend_config: Some(bc),
            system_default: false,
        })
    }

    /// ingress-gce's `isSimpleHTTPProbe`: an HTTP GET with no host, and no header but `Host`.
    #[test]
    fn only_a_plain_http_get_probe_qualifies() {
        use k8s_openapi::api::core::v1::{HTTPGetAction, HTTPHeader, Probe};
        let probe = |host: Option<&str>, headers: &[&str]| Probe {
            http_get: Some(HTTPGetAction {
                host: host.map(str::to_owned),
                http_headers: (!headers.is_empty()).then(|| {
                    headers
                        .iter()
                        .map(|n| HTTPHeader {
                            name: n.to_string(),
                            value: "v".into(),
                        })
                        .collect()
                }),
                path: Some("/ready".into()),
                port: IntOrString::Int(8080),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(simple_http_get(&probe(None, &[])).is_some());
        assert!(
            simple_http_get(&probe(Some(""), &[])).is_some(),
            "an empty host is none"
        );
        assert!(simple_http_get(&probe(Some("10.0.0.1"), &[])).is_none());
        assert!(simple_http_get(&probe(None, &["Host"])).is_some());
        assert!(simple_http_get(&probe(None, &["host"])).is_some());
        assert!(simple_http_get(&probe(None, &["X-Custom"])).is_none());
        assert!(simple_http_get(&probe(None, &["Host", "X-Custom"])).is_none());
        assert!(simple_http_get(&Probe::default()).is_none());
    }

    /// A zero interval or timeout (a typed Pod's unset field) is no setting: the defaults.
    #[test]
    fn zero_intervals_and_timeouts_fall_back_to_the_defaults() {
        let hc = health_check(&HealthCheckInputs {
            name: "k8s1-x",
            protocol: AppProtocol::Http,
            probe: Some(ProbeSettings {
                check_interval_sec: Some(0),
                timeout_sec: Some(0),
                ..Default::default()
            }),
            backend_config: None,
            system_default: false,
        });
        assert_eq!(hc.check_interval_sec, Some(DEFAULT_CHECK_INTERVAL_SEC));
        assert_eq!(hc.timeout_sec, Some(DEFAULT_TIMEOUT_SEC));
    }

    #[test]
    fn grpc_type_probes_with_tls_as_the_backend_speaks() {
        let bc = HealthCheckConfig {
            type_: Some(HealthCheckType::Grpc),
            grpc_service_name: Some("shop.v1.Cart".into()),
            port: Some(9443),
            ..Default::default()
        };
        for protocol in [AppProtocol::Http2, AppProtocol::Https] {
            let hc = check(protocol, &bc);
            assert_eq!(hc.r#type.as_ref().unwrap().name(), Some("GRPC_WITH_TLS"));
            let g = hc.grpc_tls_health_check.as_ref().unwrap();
            assert_eq!(g.grpc_service_name.as_deref(), Some("shop.v1.Cart"));
            assert_eq!(g.port, Some(9443));
            assert!(hc.grpc_health_check.is_none() && hc.http_2_health_check.is_none());
        }
        let hc = check(AppProtocol::Http, &bc);
        assert_eq!(hc.r#type.as_ref().unwrap().name(), Some("GRPC"));
        let g = hc.grpc_health_check.as_ref().unwrap();
        assert_eq!(g.grpc_service_name.as_deref(), Some("shop.v1.Cart"));
        assert!(hc.http_health_check.is_none() && hc.grpc_tls_health_check.is_none());

        // No service name: the server as a whole (the field is left out, not sent empty).
        let whole = HealthCheckConfig {
            type_: Some(HealthCheckType::Grpc),
            grpc_service_name: Some(String::new()),
            ..Default::default()
        };
        let hc = check(AppProtocol::Http2, &whole);
        let g = hc.grpc_tls_health_check.as_ref().unwrap();
        assert_eq!(g.grpc_service_name, None);
        assert_eq!(
            g.port_specification.as_ref().unwrap().name(),
            Some("USE_SERVING_PORT")
        );
    }

    #[test]
    fn http2_ports_get_http2_checks_as_on_gke() {
        let hc = check(AppProtocol::Http2, &HealthCheckConfig::default());
        assert_eq!(hc.r#type.as_ref().unwrap().name(), Some("HTTP2"));
        let h = hc.http_2_health_check.as_ref().unwrap();
        assert_eq!(h.request_path.as_deref(), Some("/ready"));
    }
}
