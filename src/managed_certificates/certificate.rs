//! Pure mapping between a ManagedCertificate and its Compute `sslCertificate` (inventory §3c;
//! gke-managed-certs `pkg/controller/sync/sync.go` and `pkg/controller/certificates/certificates.go`).

use google_cloud_compute_v1::model;

use crate::crd::managed_certificate::{
    certificate_status_from_compute, domain_status_from_compute, DomainStatus,
    ManagedCertificateStatus,
};

/// Errors turning a Compute certificate into a ManagedCertificate status.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StatusError {
    /// The Compute resource has a `managed.status` or `managed.domainStatus` value this
    /// controller does not know (GKE's controller treats it as an error too).
    #[error(
        "sslCertificate {certificate}: unknown {field} value {value:?}; upgrade gclb-operator"
    )]
    UnknownValue {
        /// Certificate name.
        certificate: String,
        /// `managed.status` or `managed.domainStatus[<domain>]`.
        field: String,
        /// The value Compute returned.
        value: String,
    },
}

/// The domains of a ManagedCertificate as Compute stores them: sorted, without duplicates.
pub fn normalized_domains(domains: &[String]) -> Vec<String> {
    let mut out: Vec<String> = domains.to_vec();
    out.sort();
    out.dedup();
    out
}

/// The global MANAGED `sslCertificate` to insert for a ManagedCertificate `namespace/name`
/// with `domains` under the Compute name `certificate`.
pub fn desired_certificate(
    certificate: &str,
    namespace: &str,
    name: &str,
    domains: &[String],
) -> model::SslCertificate {
    let managed =
        model::SslCertificateManagedSslCertificate::new().set_domains(normalized_domains(domains));
    let description = serde_json::json!({
        "kubernetes.io/managed-certificate": format!("{namespace}/{name}")
    })
    .to_string();
    model::SslCertificate::new()
        .set_name(certificate)
        .set_description(description)
        .set_type(model::ssl_certificate::Type::Managed)
        .set_managed(managed)
}

/// Whether the observed certificate covers exactly `domains` (compared sorted and deduplicated).
pub fn domains_match(observed: &model::SslCertificate, domains: &[String]) -> bool {
    let observed = observed
        .managed
        .as_ref()
        .map(|m| normalized_domains(&m.domains))
        .unwrap_or_default();
    observed == normalized_domains(domains)
}

/// Prefix shared by every certificate a ManagedCertificate ever had: its current name without
/// the trailing domain hash (`namer::managed_certificate` ends in `-<8 chars>`).
pub fn certificate_prefix(certificate: &str) -> &str {
    match certificate.rfind('-') {
        Some(i) => &certificate[..=i],
        None => certificate,
    }
}

/// The ManagedCertificate status for an observed Compute certificate: values mapped 1:1
/// (`FAILED_NOT_VISIBLE` -> `FailedNotVisible`, ...), `domainStatus` sorted by domain.
///
/// # Errors
/// [`StatusError::UnknownValue`] for a status value outside the Compute enum.
pub fn status_from_certificate(
    cert: &model::SslCertificate,
) -> Result<ManagedCertificateStatus, StatusError> {
    let name = cert.name.clone().unwrap_or_default();
    let unknown = |field: String, value: &str| StatusError::UnknownValue {
        certificate: name.clone(),
        field,
        value: value.to_owned(),
    };
    let managed = cert.managed.clone().unwrap_or_default();
    let raw_status = managed
        .status
        .as_ref()
        .and_then(|s| s.name())
        .unwrap_or_default();
    let certificate_status = certificate_status_from_compute(raw_status)
        .ok_or_else(|| unknown("managed.status".into(), raw_status))?;
    let mut domain_status = Vec::with_capacity(managed.domain_status.len());
    for (domain, status) in &managed.domain_status {
        let raw = status.name().unwrap_or_default();
        let mapped = domain_status_from_compute(raw)
            .ok_or_else(|| unknown(format!("managed.domainStatus[{domain}]"), raw))?;
        domain_status.push(DomainStatus {
            domain: domain.clone(),
            status: mapped.to_owned(),
        });
    }
    domain_status.sort_by(|a, b| a.domain.cmp(&b.domain));
    Ok(ManagedCertificateStatus {
        certificate_status: Some(certificate_status.to_owned()),
        domain_status,
        certificate_name: Some(name),
        expire_time: cert.expire_time.clone().filter(|t| !t.is_empty()),
    })
}

/// Whether the certificate is still being provisioned (the status must be polled again).
pub fn is_provisioning(status: &ManagedCertificateStatus) -> bool {
    status.certificate_status.as_deref() == Some("Provisioning")
        || status
            .domain_status
            .iter()
            .any(|d| d.status == "Provisioning")
}
