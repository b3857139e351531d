//! Endpoints as the proxy reaches them: where to connect, the health checker's verdict, the
//! firewall's admission, connection draining, and the pool of idle HTTP/1 connections. Shared
//! (by `Arc`) between the routing tables of successive snapshots and the health checker, so
//! health and load survive recompiles. Below backend_service.rs (which balances over
//! endpoints) and upstream.rs (which sends to them).

use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::client::conn::http1;
use tokio_util::sync::CancellationToken;

use crate::health_state::HealthKey;

/// Idle upstream connections are kept this long (Google's proxies keep backend connections for
/// 600 s; backends should use a longer keep-alive, see the load balancing docs).
pub const UPSTREAM_IDLE: Duration = Duration::from_secs(600);

/// One endpoint as seen by one backend service. Shared (by `Arc`) between routing tables of
/// successive snapshots and the health checker, so health and load survive recompiles.
#[derive(Debug)]
pub struct Endpoint {
    /// Its identity in the health table.
    pub key: HealthKey,
    /// Where to connect.
    pub addr: SocketAddr,
    /// `ip:port` as a URI authority, built once.
    pub authority: http::uri::Authority,
    /// Opaque `GCLB` cookie value that selects this endpoint (hex of a hash of the address).
    pub cookie: String,
    /// Written by the health checker: true once `healthyThreshold` probes passed.
    pub healthy: AtomicBool,
    /// Requests currently forwarded to it (for LEAST_REQUEST).
    pub in_flight: AtomicUsize,
    /// Its idle HTTP/1 connections.
    pub pool: Http1Pool,
    /// `connectionDraining.drainingTimeoutSec` that applies once it is removed: the largest
    /// over the backend services using its NEG (seconds; set at each compile).
    pub draining_timeout_sec: AtomicU64,
    /// Cancelled when its connection draining ends after it was removed (see
    /// [`crate::dataplane::draining`]): its upstream connections close and requests still in
    /// flight on it are cut.
    pub drained: CancellationToken,
    /// Whether the firewall of its network admits health-check probes and proxied connections
    /// (set at each compile by [`crate::dataplane::firewall`]).
    pub admission: crate::network::Admission,
}

impl Endpoint {
    /// A new endpoint; it starts UNHEALTHY, as in the Compute API, until its probes pass.
    pub fn new(key: HealthKey, addr: SocketAddr) -> Endpoint {
        let cookie = format!("{:016x}", stable_hash(&addr));
        let authority = addr
            .to_string()
            .parse()
            .expect("a socket address is a valid authority");
        Endpoint {
            key,
            addr,
            authority,
            cookie,
            healthy: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            pool: Default::default(),
            draining_timeout_sec: AtomicU64::new(0),
            drained: CancellationToken::new(),
            admission: Default::default(),
        }
    }
}

/// A hash that is stable for the process and across restarts (affinity cookies, CLIENT_IP).
pub fn stable_hash<T: Hash>(t: &T) -> u64 {
    // SipHash with fixed keys: stable for the process and across restarts.
    #[allow(deprecated)]
    let mut h = std::hash::SipHasher::new_with_keys(0x6763_6c62, 0x6166_6669);
    t.hash(&mut h);
    h.finish()
}

/// Most idle HTTP/1 connections kept per endpoint.
pub const MAX_IDLE_PER_ENDPOINT: usize = 1024;

/// Idle HTTP/1 connections to one endpoint, reused last-in first-out and dropped after
/// [`UPSTREAM_IDLE`]. A connection returns here when its response body has been read to the
/// end, so no task is spawned per request.
///
/// It also holds the abort handle of every connection's task, so that the end of the endpoint's
/// connection draining closes them all at once ([`Http1Pool::close_all`], draining.rs) without
/// the tasks watching a cancellation token on every poll, that is on every request.
#[derive(Debug, Default)]
pub struct Http1Pool {
    idle: std::sync::Mutex<Vec<(std::time::Instant, http1::SendRequest<Incoming>)>>,
    tasks: std::sync::Mutex<Vec<tokio::task::AbortHandle>>,
}

impl Http1Pool {
    pub(crate) fn take(&self) -> Option<http1::SendRequest<Incoming>> {
        let mut idle = self.idle.lock().ok()?;
        let (since, s) = idle.pop()?;
        if since.elapsed() > UPSTREAM_IDLE {
            // Every other entry is older still.
            idle.clear();
            return None;
        }
        Some(s)
    }

    pub(crate) fn put(&self, s: http1::SendRequest<Incoming>) {
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() < MAX_IDLE_PER_ENDPOINT && !s.is_closed() {
                idle.push((std::time::Instant::now(), s));
            }
        }
    }

    /// Keeps the handle of a new connection's task (once per connection, not per request),
    /// forgetting those of connections that have ended.
    pub(crate) fn track(&self, task: tokio::task::AbortHandle) {
        if let Ok(mut tasks) = self.tasks.lock() {
            if tasks.len() >= 64 && tasks.len().is_power_of_two() {
                tasks.retain(|t| !t.is_finished());
            }
            tasks.push(task);
        }
    }

    /// Closes every connection to the endpoint: idle ones are dropped, and the task of each
    /// busy one is aborted, which drops its socket; hyper then fails the request or response
    /// body still on it (connection draining's end, draining.rs).
    pub fn close_all(&self) {
        if let Ok(mut idle) = self.idle.lock() {
            idle.clear();
        }
        if let Ok(mut tasks) = self.tasks.lock() {
            for t in tasks.drain(..) {
                t.abort();
            }
        }
    }
}
