//! The Ingress and Service annotations translation reads, and their parsing
//! (inventory §1 and §2; the user-facing reference is `docs/annotations.md`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Service, ServicePort};
use kube::ResourceExt;

use super::{ObjectKey, TranslateError};

/// Service: port name -> `HTTP` | `HTTPS` | `HTTP2`, the protocol to the Pods.
pub const APP_PROTOCOLS: &str = "cloud.google.com/app-protocols";
/// Service: legacy spelling of [`APP_PROTOCOLS`], read first as GKE does.
pub const APP_PROTOCOLS_ALPHA: &str = "service.alpha.kubernetes.io/app-protocols";
/// Service: `{"default": "bc"}` and/or `{"ports": {"http": "bc1", "443": "bc2"}}`.
pub const BACKEND_CONFIG: &str = "cloud.google.com/backend-config";
/// Service: legacy spelling of [`BACKEND_CONFIG`], used when that one is absent.
pub const BACKEND_CONFIG_BETA: &str = "beta.cloud.google.com/backend-config";
/// Service: NEG `maxRatePerEndpoint` of the backend (default 1).
pub const MAX_RATE_PER_ENDPOINT: &str = "networking.gke.io/max-rate-per-endpoint";
/// Service: NEG `capacityScaler` of the backend, 0..1 (default 1).
pub const CAPACITY_SCALER: &str = "networking.gke.io/capacity-scaler";
/// Ingress: `"false"` removes the HTTP proxy and forwarding rule.
pub const ALLOW_HTTP: &str = "kubernetes.io/ingress.allow-http";
/// Ingress: name of a reserved global Address for the forwarding rules.
pub const GLOBAL_STATIC_IP_NAME: &str = "kubernetes.io/ingress.global-static-ip-name";
/// Ingress (internal and regional external classes): name of a reserved regional Address of
/// the cluster's region for the forwarding rules (INTERNAL for `gce-internal`, EXTERNAL for
/// `gce-regional-external`; inventory §1).
pub const REGIONAL_STATIC_IP_NAME: &str = "kubernetes.io/ingress.regional-static-ip-name";
/// Ingress: comma-separated names of existing global sslCertificates.
pub const PRE_SHARED_CERT: &str = "ingress.gcp.kubernetes.io/pre-shared-cert";
/// Ingress: comma-separated ManagedCertificate names in the Ingress's namespace.
pub const MANAGED_CERTIFICATES: &str = "networking.gke.io/managed-certificates";
/// Ingress: FrontendConfig name in the Ingress's namespace.
pub const FRONTEND_CONFIG: &str = "networking.gke.io/v1beta1.FrontendConfig";

/// The protocol the load balancer speaks to the Pods of a Service port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum AppProtocol {
    /// HTTP/1.1 in clear text (the default).
    #[default]
    Http,
    /// HTTP/1.1 over TLS.
    Https,
    /// HTTP/2 over TLS.
    Http2,
}

impl AppProtocol {
    /// The Compute enum name (`HTTP`, `HTTPS`, `HTTP2`), used for both the backend service
    /// protocol and the health check type.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "HTTP",
            Self::Https => "HTTPS",
            Self::Http2 => "HTTP2",
        }
    }
}

/// An annotation's value on any object.
pub fn get<'a, K: ResourceExt>(object: &'a K, key: &str) -> Option<&'a str> {
    object.annotations().get(key).map(String::as_str)
}

fn invalid(
    kind: &'static str,
    object: ObjectKey,
    annotation: &str,
    reason: String,
) -> TranslateError {
    TranslateError::InvalidAnnotation {
        kind,
        object: object.to_string(),
        annotation: annotation.to_owned(),
        reason,
    }
}

/// The app protocol of a Service port, by port name (GKE `pkg/annotations/service.go`).
///
/// # Errors
/// Bad JSON, or a value other than `HTTP`, `HTTPS`, `HTTP2`.
pub fn app_protocol(service: &Service, port: &ServicePort) -> Result<AppProtocol, TranslateError> {
    let (key, raw) = match (
        get(service, APP_PROTOCOLS_ALPHA),
        get(service, APP_PROTOCOLS),
    ) {
        (Some(v), _) => (APP_PROTOCOLS_ALPHA, v),
        (None, Some(v)) => (APP_PROTOCOLS, v),
        (None, None) => return Ok(AppProtocol::Http),
    };
    let map: BTreeMap<String, String> = serde_json::from_str(raw).map_err(|e| {
        invalid(
            "Service",
            ObjectKey::of(service),
            key,
            format!(
            "{e}; expected a JSON object from port name to protocol, e.g. {{\"https\":\"HTTPS\"}}"
        ),
        )
    })?;
    let Some(value) = port.name.as_ref().and_then(|n| map.get(n)) else {
        return Ok(AppProtocol::Http);
    };
    match value.as_str() {
        "HTTP" => Ok(AppProtocol::Http),
        "HTTPS" => Ok(AppProtocol::Https),
        "HTTP2" => Ok(AppProtocol::Http2),
        other => Err(invalid(
            "Service",
            ObjectKey::of(service),
            key,
            format!(
                "protocol {other:?} for port {:?} is not one of HTTP, HTTPS, HTTP2",
                port.name.as_deref().unwrap_or_default()
            ),
        )),
    }
}

#[derive(serde::Deserialize)]
struct BackendConfigAnnotation {
    #[serde(default)]
    default: Option<String>,
    #[serde(default)]
    ports: BTreeMap<String, String>,
}

/// The BackendConfig bound to a Service port: by port name, then port number, then `default`
/// (GKE `pkg/backendconfig/utils.go`). `None` when the Service binds none.
///
/// # Errors
/// Bad JSON in the annotation.
pub fn backend_config_name(
    service: &Service,
    port: &ServicePort,
) -> Result<Option<String>, TranslateError> {
    let (key, raw) = match (
        get(service, BACKEND_CONFIG),
        get(service, BACKEND_CONFIG_BETA),
    ) {
        (Some(v), _) => (BACKEND_CONFIG, v),
        (None, Some(v)) => (BACKEND_CONFIG_BETA, v),
        (None, None) => return Ok(None),
    };
    let parsed: BackendConfigAnnotation = serde_json::from_str(raw).map_err(|e| {
        invalid("Service", ObjectKey::of(service), key, format!(
            "{e}; expected {{\"default\":\"<name>\"}} or {{\"ports\":{{\"<port name or number>\":\"<name>\"}}}}"
        ))
    })?;
    let by_name = port.name.as_ref().and_then(|n| parsed.ports.get(n));
    let by_number = parsed.ports.get(&port.port.to_string());
    Ok(by_name.or(by_number).or(parsed.default.as_ref()).cloned())
}

/// A float annotation on a Service within `range`, or `default` when absent.
///
/// # Errors
/// Not a number, or out of range.
pub fn service_f32(
    service: &Service,
    key: &str,
    default: f32,
    range: std::ops::RangeInclusive<f32>,
) -> Result<f32, TranslateError> {
    let Some(raw) = get(service, key) else {
        return Ok(default);
    };
    match raw.trim().parse::<f32>() {
        Ok(v) if range.contains(&v) => Ok(v),
        _ => Err(invalid(
            "Service",
            ObjectKey::of(service),
            key,
            format!(
                "{raw:?} is not a number in {}..={}",
                range.start(),
                range.end()
            ),
        )),
    }
}

/// A comma-separated list annotation, trimmed, empty entries dropped.
pub fn list<K: ResourceExt>(object: &K, key: &str) -> Vec<String> {
    get(object, key)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// `kubernetes.io/ingress.allow-http`: only a parsable `false` disables HTTP (GKE treats an
/// unparsable value as true, like Go's `strconv.ParseBool`).
pub fn allow_http<K: ResourceExt>(ingress: &K) -> bool {
    !matches!(
        get(ingress, ALLOW_HTTP).map(str::trim),
        Some("false" | "False" | "FALSE" | "f" | "F" | "0")
    )
}
