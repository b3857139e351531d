//! `sslCertificates`: SELF_MANAGED certificates uploaded as PEM (validated: the key must match
//! the leaf certificate) and MANAGED certificates for `managed.domains`, which start
//! `PROVISIONING` and become `ACTIVE` once served by a forwarding rule (see `emulator.rs`).
//! `privateKey` is never returned; it goes to `Snapshot::private_keys` for the data plane.
//!
//! Also `regionSslCertificates`, the certificates of regional target HTTPS proxies (Compute API
//! v1 reference, `regionSslCertificates`): only self-managed certificates exist in a region,
//! Google-managed certificates are global ("Regional SSL certificates can only be
//! SELF_MANAGED").

use serde_json::{json, Map, Value};
use x509_parser::prelude::*;

use crate::errors::ApiError;
use crate::resources::collections::Scope;
use crate::resources::references::Prepare;
use crate::validate::{self, Obj};

/// Validates a certificate. SELF_MANAGED: `certificate` (PEM chain, leaf first) and `privateKey`
/// (PEM, PKCS#8, PKCS#1 or SEC1) are required and must match; `expireTime` and
/// `subjectAlternativeNames` are read from the leaf. MANAGED: 1-100 `managed.domains`.
/// The key stays in the body under `privateKey`; the store moves it out. A regional certificate
/// (`scope` Regional) of `type: MANAGED` is refused (400 `invalid`).
pub fn prepare(_cx: &Prepare<'_>, r: &mut Obj, scope: Scope) -> Result<(), ApiError> {
    if scope == Scope::Regional
        && (validate::opt_str(r, "resource", "type")? == Some("MANAGED")
            || r.contains_key("managed"))
    {
        return Err(ApiError::invalid_value(
            "resource.type",
            "MANAGED",
            "Regional SSL certificates can only be SELF_MANAGED.",
        ));
    }
    validate::opt_str(r, "resource", "description")?;
    let default = if r.contains_key("managed") {
        "MANAGED"
    } else {
        "SELF_MANAGED"
    };
    validate::enum_field(
        r,
        "resource",
        "type",
        &["SELF_MANAGED", "MANAGED"],
        Some(default),
    )?;
    if validate::opt_str(r, "resource", "type")? == Some("MANAGED") {
        return prepare_managed(r);
    }
    r.remove("managed");
    let cert_pem = validate::req_str(r, "resource", "certificate")?.to_string();
    let key_pem = validate::req_str(r, "resource", "privateKey")?.to_string();
    let info = check_pair(&cert_pem, &key_pem)?;
    r.insert("expireTime".into(), json!(info.expire_time));
    r.insert("subjectAlternativeNames".into(), json!(info.sans));
    Ok(())
}

fn prepare_managed(r: &mut Obj) -> Result<(), ApiError> {
    if r.get("certificate").is_some_and(|v| !v.is_null())
        || r.get("privateKey").is_some_and(|v| !v.is_null())
    {
        return Err(ApiError::invalid_value(
            "resource.certificate",
            "",
            "A MANAGED certificate cannot carry certificate or privateKey.",
        ));
    }
    let m = validate::object_mut(r, "resource", "managed", false)?
        .ok_or_else(|| ApiError::required("resource.managed.domains"))?;
    let domains = validate::str_list(m, "resource.managed", "domains")?;
    if domains.is_empty() {
        return Err(ApiError::required("resource.managed.domains"));
    }
    if domains.len() > 100 {
        return Err(ApiError::invalid_value(
            "resource.managed.domains",
            &domains.len().to_string(),
            "At most 100 domains.",
        ));
    }
    for (i, d) in domains.iter().enumerate() {
        let ok = d.len() <= 253
            && !d.ends_with('.')
            && d.split('.').count() >= 2
            && d.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    && !l.starts_with('-')
            });
        if !ok {
            return Err(ApiError::invalid_value(
                &format!("resource.managed.domains[{i}]"),
                d,
                "Must be a fully qualified domain name without wildcards.",
            ));
        }
    }
    let statuses: Map<String, Value> = domains
        .iter()
        .map(|d| (d.clone(), json!("PROVISIONING")))
        .collect();
    m.insert("status".into(), json!("PROVISIONING"));
    m.insert("domainStatus".into(), Value::Object(statuses));
    r.remove("expireTime");
    r.remove("subjectAlternativeNames");
    r.remove("certificate");
    Ok(())
}

/// What the API reports about a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    /// `expireTime`, RFC 3339.
    pub expire_time: String,
    /// DNS names (and the subject CN when there are none).
    pub sans: Vec<String>,
}

/// Parses a PEM certificate chain and private key and checks that the key belongs to the leaf.
/// Errors: 400 `invalid` naming `resource.certificate` or `resource.privateKey`.
pub fn check_pair(cert_pem: &str, key_pem: &str) -> Result<CertInfo, ApiError> {
    let bad_cert = |why: &str| ApiError::invalid_value("resource.certificate", "<PEM>", why);
    let bad_key = |why: &str| ApiError::invalid_value("resource.privateKey", "<redacted>", why);
    let certs: Vec<_> = rustls_pemfile::certs(&mut cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| bad_cert(&format!("The certificate is not valid PEM: {e}.")))?;
    let leaf = certs
        .first()
        .ok_or_else(|| bad_cert("No PEM certificate found."))?;
    let (_, x509) = X509Certificate::from_der(leaf.as_ref())
        .map_err(|e| bad_cert(&format!("The certificate cannot be parsed: {e}.")))?;
    let key = rustls_pemfile::private_key(&mut key_pem.as_bytes())
        .map_err(|e| bad_key(&format!("The private key is not valid PEM: {e}.")))?
        .ok_or_else(|| bad_key("No PEM private key found."))?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| bad_key(&format!("Unsupported or corrupt private key: {e}.")))?;
    let spki = signer
        .public_key()
        .ok_or_else(|| bad_key("The private key's public key cannot be derived."))?;
    if spki.as_ref() != x509.public_key().raw {
        return Err(bad_key("The private key does not match the certificate."));
    }
    let expire =
        chrono::DateTime::<chrono::Utc>::from_timestamp(x509.validity().not_after.timestamp(), 0)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, false))
            .unwrap_or_default();
    let mut sans = Vec::new();
    if let Ok(Some(ext)) = x509.subject_alternative_name() {
        for n in &ext.value.general_names {
            if let GeneralName::DNSName(d) = n {
                sans.push(d.to_string());
            }
        }
    }
    if sans.is_empty() {
        if let Some(cn) = x509
            .subject()
            .iter_common_name()
            .next()
            .and_then(|c| c.as_str().ok())
        {
            sans.push(cn.to_string());
        }
    }
    Ok(CertInfo {
        expire_time: expire,
        sans,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(name: &str) -> (String, String) {
        let c = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
        (c.cert.pem(), c.signing_key.serialize_pem())
    }

    #[test]
    fn matching_pair_is_accepted_and_mismatch_refused() {
        let (c1, k1) = pair("a.example.com");
        let (_, k2) = pair("b.example.com");
        let info = check_pair(&c1, &k1).unwrap();
        assert_eq!(info.sans, vec!["a.example.com".to_string()]);
        assert!(!info.expire_time.is_empty());
        assert_eq!(
            check_pair(&c1, &k2).unwrap_err().field.as_deref(),
            Some("resource.privateKey")
        );
        assert_eq!(
            check_pair("garbage", &k1).unwrap_err().field.as_deref(),
            Some("resource.certificate")
        );
        assert_eq!(
            check_pair(&c1, "garbage").unwrap_err().field.as_deref(),
            Some("resource.privateKey")
        );
    }
}
