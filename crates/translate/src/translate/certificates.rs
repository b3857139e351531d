//! The certificates of a target HTTPS proxy (reference 000 "Certificate selection and
//! priority"; inventory §1, §3c, §4): pre-shared certificates first (annotation order), then
//! ManagedCertificates sorted by name, then `spec.tls` Secrets in order. The first one is the
//! default certificate for clients without a matching SNI name. At most 15.

use std::collections::BTreeSet;

use google_cloud_compute_v1::model;
use k8s_openapi::api::networking::v1::Ingress;

use super::annotations;
use super::namer::{self, FrontendNamer};
use super::secret_refs::tls_secrets;
use super::url_map::owned_description;
use super::{ClusterSnapshot, Finding, ObjectKey, TranslateConfig, TranslateError};

/// Event reason of a `spec.tls` Secret of another namespace that no TLSCertificateDelegation
/// delegates to the Ingress's namespace (`crate::translate::secret_refs`).
pub const DELEGATION_REFUSED: &str = "CertificateDelegationRefused";

/// Most certificates one target HTTPS proxy accepts.
pub const MAX_CERTIFICATES: usize = 15;

/// Certificates for one Ingress.
#[derive(Debug, Default)]
pub struct CertificatePlan {
    /// `sslCertificates` references for the proxy, in priority order.
    pub references: Vec<String>,
    /// Self-managed certificates to create from Secrets.
    pub self_managed: Vec<model::SslCertificate>,
    /// Missing or malformed Secrets and ManagedCertificates.
    pub findings: Vec<Finding>,
}

/// Collects the certificates of `ingress`. A missing or malformed Secret or ManagedCertificate
/// is a Warning finding and is skipped, so the Ingress keeps serving what it can; so is a
/// `spec.tls` Secret of another namespace without a TLSCertificateDelegation allowing it
/// (reason [`DELEGATION_REFUSED`], naming the field, the Secret and the delegation to create).
///
/// # Errors
/// A pre-shared certificate name that is not a valid Compute name (never sent to the API); an
/// `projectcontour.io/tls-cert-namespace` value that is not a namespace name.
pub fn certificates(
    snapshot: &ClusterSnapshot,
    config: &TranslateConfig,
    ingress: &Ingress,
    namer: &FrontendNamer,
) -> Result<CertificatePlan, TranslateError> {
    let key = ObjectKey::of(ingress);
    let mut plan = CertificatePlan::default();
    for name in annotations::list(ingress, annotations::PRE_SHARED_CERT) {
        if !namer::is_valid_name(&name) {
            return Err(TranslateError::InvalidAnnotation {
                kind: "Ingress",
                object: key.to_string(),
                annotation: annotations::PRE_SHARED_CERT.to_owned(),
                reason: format!("{name:?} is not a valid sslCertificate name (lower-case letters, digits and `-`, at most 63 characters); fix the name"),
            });
        }
        plan.references
            .push(config.global_ref("sslCertificates", &name));
    }
    let managed: BTreeSet<String> = annotations::list(ingress, annotations::MANAGED_CERTIFICATES)
        .into_iter()
        .collect();
    for name in managed {
        let mcrt_key = ObjectKey::new(key.namespace.clone(), name);
        match snapshot.managed_certificates.get(&mcrt_key) {
            None => plan.findings.push(warning(
                "MissingCertificate",
                format!(
                    "Ingress {key}: annotation {} names ManagedCertificate {mcrt_key} which does not exist; create it or fix the annotation",
                    annotations::MANAGED_CERTIFICATES
                ),
            )),
            Some(mcrt) => {
                // The certificate is attached once the ManagedCertificate controller has
                // created it and recorded its name.
                if let Some(cert) = mcrt.status.as_ref().and_then(|s| s.certificate_name.as_deref()) {
                    plan.references.push(config.global_ref("sslCertificates", cert));
                }
            }
        }
    }
    for tls in tls_secrets(snapshot, ingress)? {
        let (field, secret_key) = (&tls.field, &tls.key);
        if !tls.permitted {
            plan.findings.push(warning(
                DELEGATION_REFUSED,
                format!(
                    "Ingress {key}: {field} names Secret {secret_key} of another namespace, and no TLSCertificateDelegation in namespace {ns} delegates it to namespace {own}; \
                     HTTPS is served without it (default deny). To allow it, create in namespace {ns}: \
                     apiVersion: gclb-operator.dev/v1alpha1, kind: TLSCertificateDelegation, spec: {{delegations: [{{secretName: {name}, targetNamespaces: [{own}]}}]}}",
                    ns = secret_key.namespace,
                    own = key.namespace,
                    name = secret_key.name,
                ),
            ));
            continue;
        }
        match secret_pem(snapshot, secret_key) {
            Err(problem) => plan.findings.push(warning(
                "Sync",
                format!(
                    "Could not find TLS certificate: Ingress {key}: {field} names Secret {secret_key}, which {problem}; \
                     HTTPS is served without it (fix the Secret: type kubernetes.io/tls with PEM tls.crt and tls.key)"
                ),
            )),
            Ok((crt, private_key)) => {
                let name = namer.ssl_certificate(crt.as_bytes());
                let reference = config.global_ref("sslCertificates", &name);
                if plan.references.contains(&reference) {
                    continue;
                }
                let mut cert = model::SslCertificate::default();
                cert.name = Some(name);
                cert.description = owned_description(config.mode.scheme(), &key);
                cert.r#type = Some("SELF_MANAGED".into());
                cert.certificate = Some(crt);
                cert.private_key = Some(private_key);
                plan.references.push(reference);
                plan.self_managed.push(cert);
            }
        }
    }
    Ok(plan)
}

fn warning(reason: &str, message: String) -> Finding {
    Finding {
        warning: true,
        reason: reason.to_owned(),
        message,
    }
}

/// `tls.crt` and `tls.key` of a Secret as PEM text, or what is wrong with it.
pub fn secret_pem(
    snapshot: &ClusterSnapshot,
    key: &ObjectKey,
) -> Result<(String, String), &'static str> {
    let secret = snapshot.secrets.get(key).ok_or("does not exist")?;
    if secret
        .type_
        .as_deref()
        .is_some_and(|t| t != "kubernetes.io/tls" && t != "Opaque")
    {
        return Err("is not of type kubernetes.io/tls");
    }
    // `stringData` is write-only on a real API server (merged into `data`); read it too for
    // objects that never went through one.
    let text = |k: &str| {
        let from_data = secret
            .data
            .as_ref()
            .and_then(|d| d.get(k))
            .and_then(|v| String::from_utf8(v.0.clone()).ok());
        from_data
            .or_else(|| secret.string_data.as_ref().and_then(|d| d.get(k)).cloned())
            .filter(|s| s.contains("-----BEGIN "))
    };
    let crt = text("tls.crt").ok_or("has no PEM certificate under tls.crt")?;
    let private_key = text("tls.key").ok_or("has no PEM private key under tls.key")?;
    if !crt.contains("CERTIFICATE-----") {
        return Err("has no PEM certificate under tls.crt");
    }
    if !private_key.contains("PRIVATE KEY-----") {
        return Err("has no PEM private key under tls.key");
    }
    Ok((crt, private_key))
}
