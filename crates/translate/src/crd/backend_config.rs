//! BackendConfig (`cloud.google.com/v1`, short name `bc`): per-Service-port backend settings,
//! bound with the Service annotation `cloud.google.com/backend-config` (inventory section 3a,
//! ingress-gce `pkg/apis/backendconfig/v1/types.go`).
//!
//! Unlike GKE, removing a field returns the backend service to the default value (see
//! `docs/annotations.md`); translation reads these types in `translate::backends`.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// Spec of a BackendConfig. Every field is optional; an absent field means the default.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "cloud.google.com",
    version = "v1",
    kind = "BackendConfig",
    namespaced,
    shortname = "bc",
    doc = "BackendConfig configures the backend service and health check GKE Ingress creates for a Service port.",
    printcolumn = r#"{"name":"Timeout","type":"integer","jsonPath":".spec.timeoutSec"}"#,
    printcolumn = r#"{"name":"Affinity","type":"string","jsonPath":".spec.sessionAffinity.affinityType"}"#,
    printcolumn = r#"{"name":"HealthPath","type":"string","jsonPath":".spec.healthCheck.requestPath"}"#,
    printcolumn = r#"{"name":"SecurityPolicy","type":"string","jsonPath":".spec.securityPolicy.name","priority":1}"#,
    printcolumn = r#"{"name":"CDN","type":"boolean","jsonPath":".spec.cdn.enabled","priority":1}"#,
    printcolumn = r#"{"name":"IAP","type":"boolean","jsonPath":".spec.iap.enabled","priority":1}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[x_kube(validation = Rule::new("!(has(self.iap) && self.iap.enabled && has(self.cdn) && self.cdn.enabled)").message("iap and cdn cannot both be enabled on one BackendConfig (disable one of spec.iap.enabled or spec.cdn.enabled)"))]
#[serde(rename_all = "camelCase")]
pub struct BackendConfigSpec {
    /// Cloud CDN settings (`enableCDN` and `cdnPolicy` of the backend service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdn: Option<CdnConfig>,
    /// Identity-Aware Proxy settings (`iap` of the backend service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iap: Option<IapConfig>,
    /// Cloud Armor security policy: `name: ""` removes the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_policy: Option<SecurityPolicyConfig>,
    /// Backend service `timeoutSec`, in seconds (1..2147483647; default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 2147483647))]
    pub timeout_sec: Option<i64>,
    /// Connection draining on endpoint removal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_draining: Option<ConnectionDrainingConfig>,
    /// Session affinity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity: Option<SessionAffinityConfig>,
    /// Headers the load balancer adds to requests sent to the backends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_request_headers: Option<CustomHeadersConfig>,
    /// Headers the load balancer adds to responses sent to clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_response_headers: Option<CustomHeadersConfig>,
    /// Health check settings; they take priority over the readiness probe and the defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheckConfig>,
    /// Request logging of the backend service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<LogConfig>,
}

/// `spec.cdn` (defaults in ingress-gce `pkg/backends/features/cdn.go`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CdnConfig {
    /// Enables Cloud CDN.
    #[serde(default)]
    pub enabled: bool,
    /// Cache key policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_policy: Option<CacheKeyPolicy>,
    /// `CACHE_ALL_STATIC` (default), `USE_ORIGIN_HEADERS` or `FORCE_CACHE_ALL`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_mode: Option<CacheMode>,
    /// Client TTL in seconds (0..31622400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 31622400))]
    pub client_ttl: Option<i64>,
    /// Default TTL in seconds (0..31622400; default 3600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 31622400))]
    pub default_ttl: Option<i64>,
    /// Maximum TTL in seconds (0..31622400; default 86400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 31622400))]
    pub max_ttl: Option<i64>,
    /// Cache negative responses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub negative_caching: Option<bool>,
    /// TTL per negative response code.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub negative_caching_policy: Vec<NegativeCachingPolicy>,
    /// Coalesce concurrent cache-fill requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_coalescing: Option<bool>,
    /// Serve stale content for this many seconds while revalidating (0..604800; default 86400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 604800))]
    pub serve_while_stale: Option<i64>,
    /// Maximum age of signed-URL responses in the cache, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub signed_url_cache_max_age_sec: Option<i64>,
    /// Signed-URL keys (at most 3).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 3))]
    pub signed_url_keys: Vec<SignedUrlKey>,
    /// Request headers that bypass the cache (at most 5).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 5))]
    pub bypass_cache_on_request_headers: Vec<BypassCacheOnRequestHeader>,
}

/// Cloud CDN cache modes.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheMode {
    #[serde(rename = "CACHE_ALL_STATIC")]
    CacheAllStatic,
    #[serde(rename = "USE_ORIGIN_HEADERS")]
    UseOriginHeaders,
    #[serde(rename = "FORCE_CACHE_ALL")]
    ForceCacheAll,
}

/// `spec.cdn.cachePolicy`: which request parts make up the cache key.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CacheKeyPolicy {
    /// Include the host.
    #[serde(default)]
    pub include_host: bool,
    /// Include the protocol.
    #[serde(default)]
    pub include_protocol: bool,
    /// Include the query string.
    #[serde(default)]
    pub include_query_string: bool,
    /// Query parameters left out of the key (exclusive with the whitelist).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub query_string_blacklist: Vec<String>,
    /// Query parameters kept in the key (exclusive with the blacklist).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub query_string_whitelist: Vec<String>,
}

/// One negative-caching TTL.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NegativeCachingPolicy {
    /// HTTP status code (300..599).
    // Required (no `#[serde(default)]`): no code could serve as a default, and a `default: 0`
    // breaks the schema's own `minimum: 300`, which every apiextensions.k8s.io/v1 server
    // refuses when the CRD is created.
    #[schemars(range(min = 300, max = 599))]
    pub code: i64,
    /// TTL in seconds (0..1800).
    #[serde(default)]
    #[schemars(range(min = 0, max = 1800))]
    pub ttl: i64,
}

/// A signed-URL key: inline `keyValue` or a Secret with key `key_value`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SignedUrlKey {
    /// Key name.
    #[serde(default)]
    pub key_name: String,
    /// Base64url key value (16 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_value: Option<String>,
    /// Secret holding the key under `key_value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
}

/// A header whose presence bypasses the cache.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BypassCacheOnRequestHeader {
    /// Header name.
    #[serde(default)]
    pub header_name: String,
}

/// `spec.iap`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IapConfig {
    /// Enables IAP.
    #[serde(default)]
    pub enabled: bool,
    /// OAuth client; absent means Google's default OAuth client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauthclient_credentials: Option<OAuthClientCredentials>,
}

/// `spec.iap.oauthclientCredentials`: a Secret with keys `client_id` and `client_secret`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct OAuthClientCredentials {
    /// Secret in the BackendConfig's namespace.
    #[serde(rename = "secretName", default)]
    pub secret_name: String,
    /// Filled from the Secret by the controller.
    #[serde(rename = "clientID", default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Filled from the Secret by the controller.
    #[serde(
        rename = "clientSecret",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_secret: Option<String>,
}

/// `spec.securityPolicy`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct SecurityPolicyConfig {
    /// Name of a global Cloud Armor security policy; `""` removes the policy.
    #[serde(default)]
    #[schemars(length(max = 63), regex(pattern = r"^$|^[a-z]([-a-z0-9]*[a-z0-9])?$"))]
    pub name: String,
}

/// `spec.connectionDraining`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionDrainingConfig {
    /// Seconds in-flight requests may finish after an endpoint is removed (0..3600).
    #[serde(default)]
    #[schemars(range(min = 0, max = 3600))]
    pub draining_timeout_sec: i64,
}

/// `spec.sessionAffinity`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SessionAffinityConfig {
    /// `NONE`, `CLIENT_IP` or `GENERATED_COOKIE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity_type: Option<AffinityType>,
    /// Cookie lifetime in seconds for `GENERATED_COOKIE` (0..86400; 0 = session cookie).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 86400))]
    pub affinity_cookie_ttl_sec: Option<i64>,
}

/// Session affinity types GKE accepts in a BackendConfig.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AffinityType {
    #[serde(rename = "NONE")]
    None,
    #[serde(rename = "CLIENT_IP")]
    ClientIp,
    #[serde(rename = "GENERATED_COOKIE")]
    GeneratedCookie,
}

impl AffinityType {
    /// The Compute API enum name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "NONE",
            Self::ClientIp => "CLIENT_IP",
            Self::GeneratedCookie => "GENERATED_COOKIE",
        }
    }
}

/// `spec.customRequestHeaders` / `spec.customResponseHeaders`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct CustomHeadersConfig {
    /// Headers as `Name: value` strings (at most 16).
    #[serde(default)]
    #[schemars(length(max = 16))]
    #[schemars(inner(regex(pattern = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+:.*$")))]
    pub headers: Vec<String>,
}

/// `spec.healthCheck`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[x_kube(validation = Rule::new("!has(self.timeoutSec) || !has(self.checkIntervalSec) || self.timeoutSec <= self.checkIntervalSec").message("healthCheck.timeoutSec must not exceed healthCheck.checkIntervalSec"))]
#[x_kube(validation = Rule::new("!has(self.grpcServiceName) || (has(self.type) && self.type == 'GRPC')").message("healthCheck.grpcServiceName needs healthCheck.type GRPC"))]
#[x_kube(validation = Rule::new("!has(self.requestPath) || !has(self.type) || self.type != 'GRPC'").message("healthCheck.requestPath does not apply to healthCheck.type GRPC (use grpcServiceName)"))]
#[serde(rename_all = "camelCase")]
pub struct HealthCheckConfig {
    /// Seconds between probes (1..300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 300))]
    pub check_interval_sec: Option<i64>,
    /// Probe timeout in seconds (1..300, at most checkIntervalSec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 300))]
    pub timeout_sec: Option<i64>,
    /// Consecutive successes to become healthy (1..10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10))]
    pub healthy_threshold: Option<i64>,
    /// Consecutive failures to become unhealthy (1..10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10))]
    pub unhealthy_threshold: Option<i64>,
    /// `HTTP`, `HTTPS` or `HTTP2`; default: the Service port's app protocol. `GRPC` (beyond
    /// GKE, which accepts the first three only) probes with the gRPC health checking protocol
    /// (`grpc.health.v1.Health/Check`): a Compute health check of type `GRPC_WITH_TLS` for
    /// HTTPS and HTTP2 ports, `GRPC` (clear text) for HTTP ports.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<HealthCheckType>,
    /// With `type: GRPC`: the service asked about (`grpcServiceName`); empty or absent asks
    /// about the server as a whole. ASCII only, as Compute Engine requires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[\x20-\x7E]*$"), length(max = 1024))]
    pub grpc_service_name: Option<String>,
    /// Request path (must start with `/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^/"))]
    pub request_path: Option<String>,
    /// Fixed probe port (1..65535): sets portSpecification `USE_FIXED_PORT` and is opened in the
    /// L7 firewall rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i64>,
}

/// Health check protocols GKE accepts in a BackendConfig, and `GRPC` (this operator only): the
/// gRPC health checking protocol (`grpc.health.v1.Health/Check`), over TLS when the Service
/// port's app protocol is HTTPS or HTTP2.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum HealthCheckType {
    #[serde(rename = "HTTP")]
    Http,
    #[serde(rename = "HTTPS")]
    Https,
    #[serde(rename = "HTTP2")]
    Http2,
    #[serde(rename = "GRPC")]
    Grpc,
}

/// `spec.logging`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LogConfig {
    /// Enables request logging.
    #[serde(default)]
    pub enable: bool,
    /// Fraction of requests logged (0.0..1.0; default 1.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub sample_rate: Option<f64>,
}
