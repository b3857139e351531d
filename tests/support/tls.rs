//! HTTPS clients for the end-to-end tests: one GET over a new TLS connection with a given SNI,
//! either recording the leaf certificate the load balancer served (any certificate accepted:
//! the test compares it with the one it expects) or verifying the chain and name against
//! given roots.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};

/// Accepts any server certificate and records the leaf it was shown.
#[derive(Debug)]
struct Recorder {
    leaf: Mutex<Option<Vec<u8>>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for Recorder {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        *self.leaf.lock().unwrap() = Some(end_entity.to_vec());
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// One HTTPS GET over a new connection to `socket` with SNI and Host `sni`, verified by
/// `config`. Returns the raw HTTP/1.1 response.
pub fn https_get_with(
    config: Arc<ClientConfig>,
    socket: &str,
    sni: &str,
    path: &str,
) -> Result<String> {
    let name = ServerName::try_from(sni.to_string())?;
    let conn = rustls::ClientConnection::new(config, name)?;
    let tcp = TcpStream::connect(socket)?;
    tcp.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    tls.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n").as_bytes(),
    )?;
    tls.flush()?;
    let mut out = Vec::new();
    match tls.read_to_end(&mut out) {
        Ok(_) => {}
        // Some servers close without close_notify; the response is complete by then.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !out.is_empty() => {}
        Err(e) => return Err(e.into()),
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// One HTTPS GET that accepts any certificate; returns (served leaf DER, raw response).
pub fn https_get(socket: &str, sni: &str, path: &str) -> Result<(Vec<u8>, String)> {
    let recorder = Arc::new(Recorder {
        leaf: Mutex::new(None),
        provider: provider(),
    });
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(recorder.clone())
        .with_no_client_auth();
    let response = https_get_with(Arc::new(config), socket, sni, path)?;
    let leaf = recorder
        .leaf
        .lock()
        .unwrap()
        .clone()
        .ok_or_else(|| anyhow!("no certificate was served"))?;
    Ok((leaf, response))
}

/// A client configuration that trusts only the PEM certificates in `roots_pem` (a self-signed
/// certificate is its own root), so a handshake succeeds only when the server shows a
/// certificate chaining to one of them and valid for the SNI name.
pub fn trusting(roots_pem: &str) -> Result<Arc<ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut roots_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    Ok(Arc::new(
        ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth(),
    ))
}

/// A self-signed certificate for `host`: (PEM certificate, PEM key, DER certificate).
pub fn self_signed(host: &str) -> Result<(String, String, Vec<u8>)> {
    let ck = rcgen::generate_simple_self_signed(vec![host.to_string()])?;
    Ok((
        ck.cert.pem(),
        ck.signing_key.serialize_pem(),
        ck.cert.der().to_vec(),
    ))
}
