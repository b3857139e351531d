//! Listeners: one TCP socket per forwarding rule, at the rule's `IPAddress` and port (after the
//! port map), serving HTTP/1.1 and HTTP/2 (h2 by ALPN over TLS; no clear-text h2c, as on
//! Google's front ends).
//!
//! Each listener holds a frontend slot that the manager replaces when the configuration
//! changes; requests read it per request, so URL map, backend and certificate changes apply to
//! open connections too. Closing a listener stops accepting and lets open connections finish
//! their in-flight requests (graceful shutdown); other listeners are untouched.
//!
//! Limits against abuse: request headers at most [`MAX_HEADER_BYTES`]; a connection must send
//! its request headers within [`HEADER_READ_TIMEOUT`] (hyper starts this timer whenever it waits
//! for a request, so it is also the keep-alive idle timeout); TLS handshakes within
//! [`TLS_HANDSHAKE_TIMEOUT`]; at most `max_connections` client connections per data plane.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::dataplane::compile::Frontend;
use crate::dataplane::exchange::ConnInfo;
use crate::dataplane::head_tap::{HeadTap, HeadVerdicts};
use crate::dataplane::proxy::Connection;
use crate::dataplane::quic::QuicListener;
use crate::dataplane::serve;

pub use crate::dataplane::serve::{Serving, HEADER_READ_TIMEOUT, MAX_HEADER_BYTES};
pub use crate::dataplane::tls::TLS_HANDSHAKE_TIMEOUT;

/// An open listener.
pub struct Listener {
    /// The socket bound.
    pub local_addr: SocketAddr,
    /// The port asked for after the port map (0 = ephemeral), to detect changes.
    pub requested: SocketAddr,
    /// The frontend served.
    pub frontend: Arc<ArcSwapOption<Frontend>>,
    stop: CancellationToken,
    /// HTTP/3 on the same address and port, while the target proxy has `quicOverride: ENABLE`.
    quic: std::sync::Mutex<Option<QuicListener>>,
}

impl Listener {
    /// Binds `requested` and starts accepting. Fails when the address cannot be bound.
    pub fn open(
        requested: SocketAddr,
        frontend: Arc<Frontend>,
        serving: Arc<Serving>,
        parent: &CancellationToken,
    ) -> std::io::Result<Listener> {
        let socket = if requested.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        socket.bind(requested)?;
        let tcp = socket.listen(4096)?;
        let local_addr = tcp.local_addr()?;
        let slot = Arc::new(ArcSwapOption::from(Some(frontend)));
        let stop = parent.child_token();
        tokio::spawn(accept_loop(tcp, slot.clone(), serving, stop.clone()));
        Ok(Listener {
            local_addr,
            requested,
            frontend: slot,
            stop,
            quic: Default::default(),
        })
    }

    /// Stops accepting; open connections finish their in-flight requests and close.
    pub fn close(&self) {
        self.stop.cancel();
        if let Ok(mut q) = self.quic.lock() {
            if let Some(q) = q.take() {
                q.close();
            }
        }
    }

    /// Opens or closes the HTTP/3 listener as the current frontend asks (`quicOverride`).
    pub fn sync_quic(&self, serving: &Arc<Serving>) {
        let wants = self
            .frontend
            .load()
            .as_ref()
            .is_some_and(|fe| fe.quic && matches!(fe.tls, Some(Ok(_))));
        let Ok(mut quic) = self.quic.lock() else {
            return;
        };
        match (wants, quic.is_some()) {
            (true, false) => match QuicListener::open(
                self.local_addr,
                self.frontend.clone(),
                serving.clone(),
                &self.stop,
            ) {
                Ok(q) => {
                    tracing::info!(local_addr = %self.local_addr, "listening for HTTP/3 (QUIC)");
                    *quic = Some(q);
                }
                Err(e) => {
                    tracing::error!(local_addr = %self.local_addr, error = %e, "cannot listen for HTTP/3 (QUIC)")
                }
            },
            (false, true) => {
                if let Some(q) = quic.take() {
                    q.close();
                }
            }
            _ => {}
        }
    }
}

async fn accept_loop(
    tcp: TcpListener,
    slot: Arc<ArcSwapOption<Frontend>>,
    serving: Arc<Serving>,
    stop: CancellationToken,
) {
    let local_port = tcp.local_addr().map(|a| a.port()).unwrap_or(0);
    loop {
        let (stream, client) = tokio::select! {
            _ = stop.cancelled() => break,
            r = tcp.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // EMFILE and friends: back off briefly instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = serving.permits.clone().try_acquire_owned() else {
            tracing::warn!(%client, "connection refused: max connections reached");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let slot = slot.clone();
        let serving = serving.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            serve_connection(stream, client, local_port, slot, serving, stop).await;
            drop(permit);
        });
    }
}

async fn serve_connection(
    stream: TcpStream,
    client: SocketAddr,
    local_port: u16,
    slot: Arc<ArcSwapOption<Frontend>>,
    serving: Arc<Serving>,
    stop: CancellationToken,
) {
    let Some(fe) = slot.load_full() else { return };
    let lb_ip = fe.ip;
    match &fe.tls {
        None => {
            let conn = Arc::new(Connection {
                info: ConnInfo::new(client, lb_ip, None, local_port),
                frontend: slot,
            });
            let heads = Arc::new(HeadVerdicts::default());
            let io = TokioIo::new(HeadTap::new(stream, heads.clone(), MAX_HEADER_BYTES));
            serve::drive_tapped(io, false, conn, Some(heads), &serving, &stop).await;
        }
        Some(Err(_)) => {} // no usable certificate: refuse by closing
        Some(Ok(cfg)) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(cfg.clone());
            drop(fe);
            // Boxed, as is the HTTP/2 state in `drive`: a task is as large as its largest
            // state, and the TLS and HTTP/2 ones made every connection's task 7.3 KiB where
            // plain HTTP/1 needs under 1 KiB (release build). Fewer bytes per connection, fewer
            // cache misses with many connections.
            let tls = serve_tls(
                acceptor, stream, client, lb_ip, local_port, slot, &serving, &stop,
            );
            Box::pin(tls).await;
        }
    }
}

/// [`serve_connection`] for a listener with certificates: the handshake (bounded by
/// [`TLS_HANDSHAKE_TIMEOUT`]), then HTTP/2 if ALPN chose `h2`, else HTTP/1.1.
#[allow(clippy::too_many_arguments)]
async fn serve_tls(
    acceptor: tokio_rustls::TlsAcceptor,
    stream: TcpStream,
    client: SocketAddr,
    lb_ip: std::net::IpAddr,
    local_port: u16,
    slot: Arc<ArcSwapOption<Frontend>>,
    serving: &Arc<Serving>,
    stop: &CancellationToken,
) {
    let tls = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            tracing::debug!(%client, error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => return,
    };
    let (_, session) = tls.get_ref();
    let h2 = session.alpn_protocol() == Some(b"h2");
    let sni = session.server_name().map(str::to_string);
    let tls_version = session.protocol_version().map(|v| format!("{v:?}"));
    let conn = Arc::new(Connection {
        info: ConnInfo::new(client, lb_ip, Some((sni, tls_version)), local_port),
        frontend: slot,
    });
    if h2 {
        serve::drive(TokioIo::new(tls), true, conn, serving, stop).await;
    } else {
        let heads = Arc::new(HeadVerdicts::default());
        let io = TokioIo::new(HeadTap::new(tls, heads.clone(), MAX_HEADER_BYTES));
        serve::drive_tapped(io, false, conn, Some(heads), serving, stop).await;
    }
}
