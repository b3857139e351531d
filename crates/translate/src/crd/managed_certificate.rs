//! ManagedCertificate (`networking.gke.io/v1`, short name `mcrt`): Google-managed certificates
//! for Ingress, bound with the Ingress annotation `networking.gke.io/managed-certificates`
//! (inventory section 3c; gke-managed-certs `deploy/managedcertificates-crd.yaml`).

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// Spec of a ManagedCertificate: the domains to provision a certificate for.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "networking.gke.io",
    version = "v1",
    kind = "ManagedCertificate",
    namespaced,
    shortname = "mcrt",
    status = "ManagedCertificateStatus",
    doc = "ManagedCertificate asks for a Google-managed SSL certificate for the listed domains.",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.certificateStatus"}"#,
    printcolumn = r#"{"name":"Domains","type":"string","jsonPath":".spec.domains"}"#,
    printcolumn = r#"{"name":"Certificate","type":"string","jsonPath":".status.certificateName","priority":1}"#,
    printcolumn = r#"{"name":"Expires","type":"string","jsonPath":".status.expireTime","priority":1}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ManagedCertificateSpec {
    /// Fully qualified domain names, without wildcards: 1 to 100 items of at most 63
    /// characters each.
    #[schemars(length(min = 1, max = 100))]
    #[schemars(inner(length(min = 1, max = 63)))]
    #[schemars(inner(regex(
        pattern = r"^(([a-zA-Z0-9]+|[a-zA-Z0-9][-a-zA-Z0-9]*[a-zA-Z0-9])\.)+[a-zA-Z][-a-zA-Z0-9]*[a-zA-Z0-9]\.?$"
    )))]
    pub domains: Vec<String>,
}

/// Status written by the ManagedCertificate controller from the Compute `sslCertificate`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ManagedCertificateStatus {
    /// `Active`, `Provisioning`, `ProvisioningFailed`, `ProvisioningFailedPermanently`,
    /// `RenewalFailed` or `""` (from `managed.status`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_status: Option<String>,
    /// Per-domain status, sorted by domain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub domain_status: Vec<DomainStatus>,
    /// Name of the Compute sslCertificate (`mcrt-<uuid>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_name: Option<String>,
    /// RFC 3339 expiry time of the certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_time: Option<String>,
}

/// Provisioning status of one domain.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct DomainStatus {
    /// The domain.
    pub domain: String,
    /// `Active`, `Provisioning`, `FailedNotVisible`, `FailedCaaChecking`,
    /// `FailedCaaForbidden` or `FailedRateLimited`.
    pub status: String,
}

/// Maps a Compute `managed.status` value to the ManagedCertificate `certificateStatus` value
/// (gke-managed-certs `pkg/config/config.go`). `None` for an unknown value.
pub fn certificate_status_from_compute(status: &str) -> Option<&'static str> {
    Some(match status {
        "ACTIVE" => "Active",
        "MANAGED_CERTIFICATE_STATUS_UNSPECIFIED" | "" => "",
        "PROVISIONING" => "Provisioning",
        "PROVISIONING_FAILED" => "ProvisioningFailed",
        "PROVISIONING_FAILED_PERMANENTLY" => "ProvisioningFailedPermanently",
        "RENEWAL_FAILED" => "RenewalFailed",
        _ => return None,
    })
}

/// Maps a Compute `managed.domainStatus` value to the ManagedCertificate `domainStatus[].status`
/// value (gke-managed-certs `pkg/config/config.go`). `None` for an unknown value.
pub fn domain_status_from_compute(status: &str) -> Option<&'static str> {
    Some(match status {
        "ACTIVE" => "Active",
        "DOMAIN_STATUS_UNSPECIFIED" | "" => "",
        "FAILED_CAA_CHECKING" => "FailedCaaChecking",
        "FAILED_CAA_FORBIDDEN" => "FailedCaaForbidden",
        "FAILED_NOT_VISIBLE" => "FailedNotVisible",
        "FAILED_RATE_LIMITED" => "FailedRateLimited",
        "PROVISIONING" => "Provisioning",
        _ => return None,
    })
}
