//! FrontendConfig (`networking.gke.io/v1beta1`): per-Ingress frontend settings, bound with the
//! Ingress annotation `networking.gke.io/v1beta1.FrontendConfig` (inventory section 3b).

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// Spec of a FrontendConfig. Every field is optional.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "networking.gke.io",
    version = "v1beta1",
    kind = "FrontendConfig",
    namespaced,
    shortname = "fc",
    doc = "FrontendConfig configures the frontend (target proxies, redirect URL map) of GKE Ingress load balancers.",
    printcolumn = r#"{"name":"SslPolicy","type":"string","jsonPath":".spec.sslPolicy"}"#,
    printcolumn = r#"{"name":"RedirectToHttps","type":"boolean","jsonPath":".spec.redirectToHttps.enabled"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct FrontendConfigSpec {
    /// Name of a global sslPolicy for the target HTTPS proxy. Absent: the proxy's policy is left
    /// alone; `""`: the policy is removed; a name: `global/sslPolicies/<name>` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63), regex(pattern = r"^$|^[a-z]([-a-z0-9]*[a-z0-9])?$"))]
    pub ssl_policy: Option<String>,
    /// Redirect HTTP to HTTPS through a redirect URL map (`k8s2-rm-...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_to_https: Option<HttpsRedirectConfig>,
}

/// `spec.redirectToHttps`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HttpsRedirectConfig {
    /// Whether the HTTP side answers every request with a redirect to HTTPS.
    #[serde(default)]
    pub enabled: bool,
    /// Redirect status code by its Compute name: `MOVED_PERMANENTLY_DEFAULT` (301, the
    /// default), `FOUND` (302), `TEMPORARY_REDIRECT` (307), `PERMANENT_REDIRECT` (308).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_code_name: Option<RedirectResponseCode>,
}

/// Compute `HttpRedirectAction.redirectResponseCode` values.
#[derive(
    schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default,
)]
pub enum RedirectResponseCode {
    #[default]
    #[serde(rename = "MOVED_PERMANENTLY_DEFAULT")]
    MovedPermanentlyDefault,
    #[serde(rename = "FOUND")]
    Found,
    #[serde(rename = "TEMPORARY_REDIRECT")]
    TemporaryRedirect,
    #[serde(rename = "PERMANENT_REDIRECT")]
    PermanentRedirect,
}

impl RedirectResponseCode {
    /// The Compute API enum name, e.g. `FOUND`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MovedPermanentlyDefault => "MOVED_PERMANENTLY_DEFAULT",
            Self::Found => "FOUND",
            Self::TemporaryRedirect => "TEMPORARY_REDIRECT",
            Self::PermanentRedirect => "PERMANENT_REDIRECT",
        }
    }
}
