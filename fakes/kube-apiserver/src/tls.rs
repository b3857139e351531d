//! The server's TLS identity: a fresh self-signed CA and a serving certificate for
//! `127.0.0.1` and `localhost`, generated with rcgen at every start.

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Errors while generating the certificates or building the rustls configuration.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rcgen could not generate a key or certificate.
    #[error("generating the {what}: {source}")]
    Generate {
        /// Which item was being generated.
        what: &'static str,
        /// The rcgen error.
        source: rcgen::Error,
    },
    /// rustls rejected the certificate or key.
    #[error("building the TLS server configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// A CA certificate (PEM, written into the kubeconfig) and the rustls configuration serving a
/// leaf certificate it signed (SAN `127.0.0.1`, `localhost`; ALPN `h2`, `http/1.1`).
pub struct TlsIdentity {
    /// The CA certificate in PEM, for `certificate-authority-data`.
    pub ca_pem: String,
    /// Server configuration for tokio-rustls.
    pub server_config: Arc<rustls::ServerConfig>,
}

/// Generates a new CA and serving certificate.
///
/// Errors: [`TlsError`] when rcgen or rustls fail (not expected with the fixed parameters).
pub fn generate() -> Result<TlsIdentity, TlsError> {
    let gen = |what| move |source| TlsError::Generate { what, source };
    let ca_key = KeyPair::generate().map_err(gen("CA key"))?;
    let mut ca_params =
        CertificateParams::new(Vec::<String>::new()).map_err(gen("CA parameters"))?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "fake-kube-apiserver CA");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params
        .self_signed(&ca_key)
        .map_err(gen("CA certificate"))?;
    let issuer = Issuer::new(ca_params, ca_key);

    let leaf_key = KeyPair::generate().map_err(gen("server key"))?;
    let mut leaf_params =
        CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .map_err(gen("server parameters"))?;
    leaf_params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let leaf_cert = leaf_params
        .signed_by(&leaf_key, &issuer)
        .map_err(gen("server certificate"))?;

    let chain = vec![CertificateDer::from(leaf_cert.der().to_vec())];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsIdentity {
        ca_pem: ca_cert.pem(),
        server_config: Arc::new(config),
    })
}
