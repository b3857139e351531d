//! The webhook's HTTPS listener: rustls (ring) over tokio, one hyper connection per client.
//!
//! The API server only calls webhooks over HTTPS and verifies the serving certificate against
//! the configuration's `caBundle` (filled by cert-manager's CA injector, see
//! `deploy/webhook/README.md`). The certificate must name the Service DNS name
//! `<service>.<namespace>.svc`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// Errors setting up TLS.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or parsed.
    #[error("cannot read {what} from {path}: {message}; pass --webhook-tls-cert/--webhook-tls-key pointing at PEM files (tls.crt/tls.key of the webhook's Secret)")]
    Pem {
        /// `certificate chain` or `private key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// rustls refused the certificate/key pair.
    #[error("certificate {cert} and key {key} do not form a usable TLS identity: {source}")]
    Identity {
        /// Certificate file.
        cert: PathBuf,
        /// Key file.
        key: PathBuf,
        /// rustls error.
        source: rustls::Error,
    },
}

/// A rustls server config (HTTP/1.1 and HTTP/2 via ALPN) serving the PEM certificate chain and
/// PEM private key (PKCS#8, PKCS#1 or SEC1) at these paths. The files are read now (so a bad
/// pair fails at start) and read again when their modification time changes, so a certificate
/// rotated by cert-manager is served without a restart; a rotation that cannot be loaded is
/// logged and the previous certificate stays in use.
///
/// Errors: [`TlsError`] naming the file and the fix.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let resolver = ReloadingCert::load(cert, key, provider.clone())?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|source| TlsError::Identity {
            cert: cert.to_owned(),
            key: key.to_owned(),
            source,
        })?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Reads a certificate/key pair from PEM files into a rustls `CertifiedKey`.
fn read_pair(
    cert: &Path,
    key: &Path,
    provider: &rustls::crypto::CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let pem_err = |what: &'static str, path: &Path, message: String| TlsError::Pem {
        what,
        path: path.to_owned(),
        message,
    };
    let cert_pem =
        std::fs::read(cert).map_err(|e| pem_err("certificate chain", cert, e.to_string()))?;
    let key_pem = std::fs::read(key).map_err(|e| pem_err("private key", key, e.to_string()))?;
    let chain = rustls_pemfile::certs(&mut cert_pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_err("certificate chain", cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(pem_err(
            "certificate chain",
            cert,
            "no CERTIFICATE block".into(),
        ));
    }
    let private_key = rustls_pemfile::private_key(&mut key_pem.as_slice())
        .map_err(|e| pem_err("private key", key, e.to_string()))?
        .ok_or_else(|| pem_err("private key", key, "no PRIVATE KEY block".into()))?;
    CertifiedKey::from_der(chain, private_key, provider).map_err(|source| TlsError::Identity {
        cert: cert.to_owned(),
        key: key.to_owned(),
        source,
    })
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Serves the pair at `cert`/`key`, reloading it when either file's modification time changes
/// (checked at each handshake: webhook traffic is a few requests per second at most).
#[derive(Debug)]
struct ReloadingCert {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<rustls::crypto::CryptoProvider>,
    current: Mutex<(Option<SystemTime>, Option<SystemTime>, Arc<CertifiedKey>)>,
}

impl ReloadingCert {
    fn load(
        cert: &Path,
        key: &Path,
        provider: Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<Self, TlsError> {
        let stamps = (modified(cert), modified(key));
        let pair = read_pair(cert, key, &provider)?;
        Ok(Self {
            cert: cert.to_owned(),
            key: key.to_owned(),
            provider,
            current: Mutex::new((stamps.0, stamps.1, Arc::new(pair))),
        })
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let stamps = (modified(&self.cert), modified(&self.key));
        if (stamps.0, stamps.1) != (current.0, current.1) {
            match read_pair(&self.cert, &self.key, &self.provider) {
                Ok(pair) => {
                    tracing::info!(cert = %self.cert.display(), "webhook certificate reloaded");
                    *current = (stamps.0, stamps.1, Arc::new(pair));
                }
                // A half-written rotation: keep serving the old pair, retry next handshake.
                Err(err) => tracing::warn!(error = %err, "webhook certificate reload failed"),
            }
        }
        Some(current.2.clone())
    }
}

/// Serves `router` over TLS on `listener` until the future is dropped. Handshake and
/// connection errors are logged and only end that connection.
pub async fn serve(listener: TcpListener, tls: Arc<rustls::ServerConfig>, router: Router) {
    let acceptor = TlsAcceptor::from(tls);
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                tracing::warn!(error = %err, "webhook accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let stream = match acceptor.accept(tcp).await {
                Ok(s) => s,
                Err(err) => {
                    tracing::debug!(%peer, error = %err, "webhook TLS handshake failed");
                    return;
                }
            };
            if let Err(err) = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(%peer, error = %err, "webhook connection ended with an error");
            }
        });
    }
}
