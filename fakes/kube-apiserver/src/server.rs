//! The HTTPS server: binds the listener, generates the TLS identity and token, writes the
//! kubeconfig, and serves HTTP/1.1 and HTTP/2 connections with the handlers.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http::Request;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

use crate::auth::{self, audit::AuditLog, tokens::TokenIssuer, Auth};
use crate::handlers::{self, App};
use crate::openapi::OpenApi;
use crate::registry::Registry;
use crate::store::Store;
use crate::{kubeconfig, state_file, tls};

/// How long past its grace period a terminating Pod is kept when no kubelet deletes it.
pub const GRACE_MARGIN: Duration = Duration::from_secs(2);

/// Server options (the command line of `fake-kube-apiserver`).
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Listen address; must be a loopback address.
    pub listen: SocketAddr,
    /// Where to write the kubeconfig.
    pub kubeconfig_out: PathBuf,
    /// Optional state file.
    pub state_file: Option<PathBuf>,
    /// Changes kept for watch resumption (older resourceVersions get 410 Expired).
    pub watch_history: usize,
    /// Append one audit.k8s.io/v1 `Event` line per request here (see [`crate::auth::audit`]).
    pub audit_log: Option<PathBuf>,
}

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The listen address is not loopback.
    #[error("--listen {0} is not a loopback address; use 127.0.0.1:PORT or [::1]:PORT")]
    NotLoopback(SocketAddr),
    /// Binding failed.
    #[error("binding {addr}: {source}")]
    Bind {
        /// Address.
        addr: SocketAddr,
        /// I/O error.
        source: std::io::Error,
    },
    /// Certificate generation failed.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// Writing the kubeconfig failed.
    #[error(transparent)]
    Kubeconfig(#[from] kubeconfig::KubeconfigError),
    /// Loading the state file failed.
    #[error(transparent)]
    StateFile(#[from] state_file::StateFileError),
    /// The audit log could not be opened.
    #[error("opening the audit log {path}: {source}")]
    AuditLog {
        /// The path given.
        path: PathBuf,
        /// I/O error.
        source: std::io::Error,
    },
}

/// A running server.
pub struct RunningServer {
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// The kubeconfig that was written.
    pub kubeconfig: String,
    /// The shared store.
    pub store: Arc<Store>,
    /// The accept loop; runs until aborted.
    pub task: tokio::task::JoinHandle<()>,
}

/// Binds, writes the kubeconfig and starts serving on the current tokio runtime.
///
/// Errors: [`ServerError`] for a non-loopback address, bind, TLS, kubeconfig or state file errors.
pub async fn start(options: ServerOptions) -> Result<RunningServer, ServerError> {
    if !options.listen.ip().is_loopback() {
        return Err(ServerError::NotLoopback(options.listen));
    }
    let listener = TcpListener::bind(options.listen)
        .await
        .map_err(|source| ServerError::Bind {
            addr: options.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ServerError::Bind {
        addr: options.listen,
        source,
    })?;
    let identity = tls::generate()?;
    let token: String = {
        let bytes: [u8; 24] = rand::random();
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    };
    let url = format!("https://{addr}");
    let store = Store::new(Registry::new(), options.watch_history);
    if let Some(path) = &options.state_file {
        if state_file::load(&store, path)? {
            tracing::info!(path = %path.display(), "state loaded");
        }
        tokio::spawn(state_file::persist(store.clone(), path.clone()));
    }
    auth::bootstrap::ensure(&store);
    let audit = match &options.audit_log {
        Some(path) => Some(
            AuditLog::open(path).map_err(|source| ServerError::AuditLog {
                path: path.clone(),
                source,
            })?,
        ),
        None => None,
    };
    let config = kubeconfig::render(&url, &identity.ca_pem, &token);
    kubeconfig::write(&options.kubeconfig_out, &config)?;
    let app = Arc::new(App {
        store: store.clone(),
        openapi: Arc::new(OpenApi::new()),
        auth: Arc::new(Auth {
            admin_token: token,
            tokens: TokenIssuer::new(),
            audit,
        }),
        server_address: addr.to_string(),
    });
    let sweeper = store.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            tick.tick().await;
            sweeper.sweep(chrono::Duration::from_std(GRACE_MARGIN).unwrap_or_default());
        }
    });
    let acceptor = tokio_rustls::TlsAcceptor::from(identity.server_config);
    let task = tokio::spawn(accept_loop(listener, acceptor, app));
    tracing::info!(%url, "serving");
    Ok(RunningServer {
        url,
        kubeconfig: config,
        store,
        task,
    })
}

async fn accept_loop(listener: TcpListener, acceptor: tokio_rustls::TlsAcceptor, app: Arc<App>) {
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        tokio::spawn(async move {
            let tls = match acceptor.accept(tcp).await {
                Ok(t) => t,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
            };
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let app = app.clone();
                async move {
                    let (parts, body) = req.into_parts();
                    let bytes = match body.collect().await {
                        Ok(b) => b.to_bytes(),
                        Err(_) => Default::default(),
                    };
                    let resp = handlers::handle(
                        app,
                        parts.method,
                        parts.uri,
                        parts.headers,
                        bytes,
                        Some(peer),
                    )
                    .await;
                    Ok::<_, std::convert::Infallible>(resp.map(Body::new))
                }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            if let Err(e) = builder.serve_connection(TokioIo::new(tls), service).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
}
