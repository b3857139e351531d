//! The emulator's local certificate authority: it issues the certificates of MANAGED
//! sslCertificates, the way Google's CA does for Google-managed certificates.
//!
//! Keys are ECDSA P-256 (rcgen). Clients that should trust the emulator's managed certificates
//! add [`LocalCa::ca_pem`] (served at `GET /_emulator/ca.pem`) to their trust store.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256,
};

/// Validity of issued leaf certificates, like Google-managed certificates (90 days).
pub const LEAF_VALIDITY_DAYS: i64 = 90;

/// A certificate issued for a managed certificate's domains.
#[derive(Clone, Debug)]
pub struct IssuedCert {
    /// Leaf certificate PEM.
    pub cert_pem: String,
    /// Private key PEM (PKCS#8).
    pub key_pem: String,
    /// Expiry as RFC 3339, for `sslCertificate.expireTime`.
    pub expire_time: String,
}

/// Errors of the local CA.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// Generating or signing failed, or no domains were given.
    #[error("cannot issue a certificate: {0}")]
    Issue(String),
    /// A saved CA (state file) could not be loaded.
    #[error("cannot load the local CA from the state file: {0}; delete the CA entries to generate a new CA")]
    Load(String),
}

/// The local CA (an ECDSA P-256 root generated at start or loaded from the state file).
pub struct LocalCa {
    cert_pem: String,
    key_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for LocalCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalCa").finish_non_exhaustive()
    }
}

fn ca_params() -> CertificateParams {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "gce-emulator");
    dn.push(DnType::CommonName, "gce-emulator local CA");
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let now = time_now();
    p.not_before = now - rcgen_days(1);
    p.not_after = now + rcgen_days(3650);
    p
}

fn time_now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

fn rcgen_days(d: i64) -> time::Duration {
    time::Duration::days(d)
}

impl LocalCa {
    /// Generates a new CA (self-signed, valid ten years).
    pub fn generate() -> Result<LocalCa, CaError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)
            .map_err(|e| CaError::Issue(e.to_string()))?;
        let params = ca_params();
        let cert = params
            .self_signed(&key)
            .map_err(|e| CaError::Issue(e.to_string()))?;
        let key_pem = key.serialize_pem();
        Ok(LocalCa {
            cert_pem: cert.pem(),
            key_pem,
            issuer: Issuer::new(params, key),
        })
    }

    /// Loads a CA saved with [`LocalCa::to_pem_pair`].
    pub fn from_pem_pair(cert_pem: &str, key_pem: &str) -> Result<LocalCa, CaError> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| CaError::Load(format!("CA key: {e}")))?;
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key)
            .map_err(|e| CaError::Load(format!("CA certificate: {e}")))?;
        Ok(LocalCa {
            cert_pem: cert_pem.to_string(),
            key_pem: key_pem.to_string(),
            issuer,
        })
    }

    /// (CA certificate PEM, CA private key PEM), for the state file.
    pub fn to_pem_pair(&self) -> (String, String) {
        (self.cert_pem.clone(), self.key_pem.clone())
    }

    /// The CA certificate PEM that clients trust (`GET /_emulator/ca.pem`).
    pub fn ca_pem(&self) -> String {
        self.cert_pem.clone()
    }

    /// Issues a certificate for `domains` (the first is the subject common name; all are
    /// subject alternative names), valid [`LEAF_VALIDITY_DAYS`] days.
    pub fn issue(&self, domains: &[String]) -> Result<IssuedCert, CaError> {
        let first = domains.first().ok_or_else(|| {
            CaError::Issue("managed.domains is empty; give at least one domain".into())
        })?;
        let mut params = CertificateParams::new(domains.to_vec())
            .map_err(|e| CaError::Issue(format!("domains {domains:?}: {e}")))?;
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, first.as_str());
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let now = time_now();
        let not_after = now + rcgen_days(LEAF_VALIDITY_DAYS);
        params.not_before = now - rcgen_days(1);
        params.not_after = not_after;
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)
            .map_err(|e| CaError::Issue(e.to_string()))?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| CaError::Issue(e.to_string()))?;
        let expire_time =
            chrono::DateTime::<chrono::Utc>::from_timestamp(not_after.unix_timestamp(), 0)
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                .unwrap_or_default();
        Ok(IssuedCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            expire_time,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issues_leaf_signed_by_ca_and_round_trips() {
        let ca = LocalCa::generate().unwrap();
        let leaf = ca
            .issue(&["shop.example".into(), "www.shop.example".into()])
            .unwrap();
        let (cert, key) = ca.to_pem_pair();
        let again = LocalCa::from_pem_pair(&cert, &key).unwrap();
        let leaf2 = again.issue(&["a.example".into()]).unwrap();
        for pem in [&leaf.cert_pem, &leaf2.cert_pem] {
            let (_, p) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
            let c = p.parse_x509().unwrap();
            assert!(c.issuer().to_string().contains("gce-emulator local CA"));
            let (_, capem) = x509_parser::pem::parse_x509_pem(ca.ca_pem().as_bytes()).unwrap();
            let ca_cert = capem.parse_x509().unwrap();
            c.verify_signature(Some(ca_cert.public_key())).unwrap();
        }
        assert!(leaf.expire_time.ends_with('Z'), "{}", leaf.expire_time);
        assert!(ca.issue(&[]).is_err());
    }
}
