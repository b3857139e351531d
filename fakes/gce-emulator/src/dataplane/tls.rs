//! TLS termination for target HTTPS proxies: certificate selection by SNI and sslPolicy.
//!
//! Selection follows the GKE Ingress guide (reference 000, "Certificate selection and
//! priority"): the certificate whose name is the closest match to the requested host name is
//! presented (an exact name beats a wildcard, a longer wildcard suffix beats a shorter one); with
//! no SNI or no match, the first certificate of the proxy's `sslCertificates` list is the default.
//! Names are the certificate's DNS subject alternative names and its subject common name.
//!
//! `sslPolicy` (Compute API `sslPolicies`): `minTlsVersion` TLS_1_3 allows only TLS 1.3; lower
//! values allow TLS 1.2 and 1.3. rustls implements neither TLS 1.0 nor 1.1, so those versions are
//! always refused, even under a TLS_1_0 policy (a documented difference). `profile: CUSTOM` keeps
//! only the TLS 1.2 cipher suites named in `customFeatures`; COMPATIBLE, MODERN and RESTRICTED
//! all contain every suite rustls offers (ECDHE with AEAD ciphers).

use std::sync::Arc;
use std::time::Duration;

use rustls::server::{ClientHello, ResolvesServerCert, ServerSessionMemoryCache};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use serde_json::Value;

/// Time to complete a TLS handshake.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Errors building a proxy's TLS configuration. Each names the object at fault.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The proxy lists no usable certificate.
    #[error("targetHttpsProxy {proxy}: no usable sslCertificates; attach a certificate with a private key (MANAGED ones become usable once ACTIVE)")]
    NoCertificates { proxy: String },
    /// A certificate could not be parsed or its key is unusable.
    #[error("sslCertificate {certificate}: {reason}")]
    Certificate { certificate: String, reason: String },
    /// rustls refused the protocol versions of the policy.
    #[error("sslPolicy {policy}: {reason}")]
    Policy { policy: String, reason: String },
}

/// One certificate with the names it serves.
#[derive(Debug)]
pub struct ServedCert {
    /// Lower-case DNS names (SANs and CN); wildcards keep their `*.` prefix.
    pub names: Vec<String>,
    /// The chain and signing key.
    pub key: Arc<CertifiedKey>,
}

/// Parses a PEM chain and PEM private key into a [`ServedCert`].
pub fn served_cert(
    certificate: &str,
    chain_pem: &str,
    key_pem: &str,
) -> Result<ServedCert, TlsError> {
    let err = |reason: String| TlsError::Certificate {
        certificate: certificate.to_string(),
        reason,
    };
    let chain: Vec<_> = rustls_pemfile::certs(&mut chain_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| err(format!("certificate: invalid PEM: {e}")))?;
    let first = chain
        .first()
        .ok_or_else(|| err("certificate: no CERTIFICATE block in the PEM".into()))?;
    let key = rustls_pemfile::private_key(&mut key_pem.as_bytes())
        .map_err(|e| err(format!("privateKey: invalid PEM: {e}")))?
        .ok_or_else(|| err("privateKey: no private key block in the PEM".into()))?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| err(format!("privateKey: {e}")))?;
    let (_, x509) =
        x509_parser::parse_x509_certificate(first).map_err(|e| err(format!("certificate: {e}")))?;
    let mut names = Vec::new();
    if let Ok(Some(san)) = x509.subject_alternative_name() {
        for n in &san.value.general_names {
            if let x509_parser::extensions::GeneralName::DNSName(d) = n {
                names.push(d.to_ascii_lowercase());
            }
        }
    }
    for cn in x509.subject().iter_common_name() {
        if let Ok(cn) = cn.as_str() {
            let cn = cn.to_ascii_lowercase();
            if !names.contains(&cn) {
                names.push(cn);
            }
        }
    }
    Ok(ServedCert {
        names,
        key: Arc::new(CertifiedKey::new(chain, signing)),
    })
}

/// Picks the index of the certificate for `sni` among `certs` (non-empty): exact name, else the
/// longest matching wildcard, else 0 (the default certificate).
pub fn select(certs: &[ServedCert], sni: Option<&str>) -> usize {
    let Some(sni) = sni.map(|s| s.to_ascii_lowercase()) else {
        return 0;
    };
    let mut best: Option<(usize, usize)> = None;
    for (i, c) in certs.iter().enumerate() {
        for n in &c.names {
            if *n == sni {
                return i;
            }
            if let Some(suffix) = n.strip_prefix('*') {
                // `*.example.com` covers exactly one more label.
                if sni.len() > suffix.len()
                    && sni.ends_with(suffix)
                    && !sni[..sni.len() - suffix.len()].contains('.')
                    && best.is_none_or(|(_, l)| suffix.len() > l)
                {
                    best = Some((i, suffix.len()));
                }
            }
        }
    }
    best.map(|(i, _)| i).unwrap_or(0)
}

#[derive(Debug)]
struct SniResolver {
    certs: Vec<ServedCert>,
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.certs[select(&self.certs, hello.server_name())]
                .key
                .clone(),
        )
    }
}

/// Builds the server configuration of a target HTTPS proxy from its certificates (in the
/// proxy's order) and optional `compute#sslPolicy`. ALPN offers h2 and http/1.1.
pub fn server_config(
    proxy: &str,
    certs: Vec<ServedCert>,
    policy: Option<&Value>,
) -> Result<Arc<ServerConfig>, TlsError> {
    if certs.is_empty() {
        return Err(TlsError::NoCertificates {
            proxy: proxy.to_string(),
        });
    }
    let mut provider = rustls::crypto::ring::default_provider();
    let mut versions: Vec<&'static rustls::SupportedProtocolVersion> =
        vec![&rustls::version::TLS13, &rustls::version::TLS12];
    let policy_name = policy
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    if let Some(p) = policy {
        if p.get("minTlsVersion").and_then(Value::as_str) == Some("TLS_1_3") {
            versions = vec![&rustls::version::TLS13];
        }
        if p.get("profile").and_then(Value::as_str) == Some("CUSTOM") {
            let features: Vec<&str> = p
                .get("customFeatures")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            provider.cipher_suites.retain(|s| {
                s.version() == &rustls::version::TLS13
                    || features.contains(&format!("{:?}", s.suite()).as_str())
            });
        }
    }
    let mut cfg = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&versions)
        .map_err(|e| TlsError::Policy {
            policy: policy_name,
            reason: e.to_string(),
        })?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(SniResolver { certs }));
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    cfg.session_storage = ServerSessionMemoryCache::new(16 * 1024);
    if let Ok(t) = rustls::crypto::ring::Ticketer::new() {
        cfg.ticketer = t;
    }
    Ok(Arc::new(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(names: &[&str]) -> ServedCert {
        let key = rcgen::KeyPair::generate().unwrap();
        let c =
            rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap()
                .self_signed(&key)
                .unwrap();
        served_cert("c", &c.pem(), &key.serialize_pem()).unwrap()
    }

    #[test]
    fn sni_exact_wildcard_default() {
        let certs = vec![
            cert(&["default.example"]),
            cert(&["*.shop.example"]),
            cert(&["api.shop.example"]),
            cert(&["*.example"]),
        ];
        assert_eq!(select(&certs, Some("api.shop.example")), 2);
        assert_eq!(select(&certs, Some("www.shop.example")), 1);
        assert_eq!(select(&certs, Some("x.example")), 3);
        assert_eq!(select(&certs, Some("a.b.other")), 0);
        assert_eq!(select(&certs, None), 0);
        assert!(server_config("p", vec![], None).is_err());
    }

    #[test]
    fn bad_pem_names_the_certificate() {
        let e = served_cert("projects/p/global/sslCertificates/c1", "nope", "nope")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("sslCertificates/c1") && e.contains("certificate"),
            "{e}"
        );
    }
}
