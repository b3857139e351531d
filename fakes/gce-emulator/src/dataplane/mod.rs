//! The data plane: a real HTTP(S) load balancer behind the emulated resources.
//!
//! Seam (see docs/architecture.md): the control plane calls [`DataPlane::start`] once with the
//! receiving end of the snapshot channel and the shared [`HealthTable`]; the data plane opens,
//! changes and closes listeners as forwarding rules come and go, and the health checker keeps
//! the table current.
//!
//! Flow: each [`Snapshot`] is compiled ([`compile`]) into immutable frontends (URL map tables,
//! backend services, TLS configurations); each listener's frontend slot is swapped atomically
//! (`arc-swap`), so the request path takes no lock. See docs/emulator-dataplane.md.

pub mod access_log;
pub mod armor;
pub mod backend_service;
pub mod cdn;
pub mod coarse_timer;
pub mod compile;
pub mod draining;
pub mod endpoint;
pub mod exchange;
pub mod explain;
pub mod firewall;
pub mod grpc;
pub mod grpc_health;
pub mod head_tap;
pub mod health;
pub mod iap;
pub mod internal;
pub mod listener;
pub mod listener_info;
pub mod logging;
pub mod metrics;
pub mod mirror;
pub mod proxy;
pub mod proxy_context;
pub mod quic;
pub mod request_checks;
pub mod serve;
pub mod tls;
pub mod tls_route;
pub mod upstream;
/// URL map routing (the `gce-url-map` crate, crates/url-map), re-exported so
/// `crate::dataplane::url_map::..` keeps its path.
pub use gce_url_map::url_map;
#[cfg(test)]
#[path = "url_map_fuzz_tests.rs"]
mod url_map_fuzz_tests;

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::health_state::HealthTable;
use crate::snapshot::{ResourceKey, Snapshot};

use self::compile::Carry;
use self::health::HealthChecker;
use self::listener::{Listener, Serving};
pub use self::listener_info::ListenerInfo;
use self::metrics::Metrics;
use self::proxy_context::ProxyContext;

/// Default limit of concurrent client connections over all listeners.
pub const DEFAULT_MAX_CONNECTIONS: usize = 50_000;

/// Options of the data plane, from the command line.
#[derive(Clone, Debug, Default)]
pub struct DataPlaneConfig {
    /// Forwarding-rule port -> local port to bind instead (`--port-map 80=18080`); a local port
    /// of 0 binds an ephemeral port.
    pub port_map: BTreeMap<u16, u16>,
    /// Where to append the JSON-lines access log, if anywhere.
    pub access_log: Option<PathBuf>,
    /// Worker threads of the data plane's own Tokio runtime (`--dataplane-threads`); 0 runs the
    /// data plane on the caller's runtime.
    pub worker_threads: usize,
    /// Whether the VPC firewall decides which health-check probes and proxied connections reach
    /// endpoints (`--enforce-firewall`, on by default in the binary; [`firewall`]). Off here
    /// by default, for tests that feed the data plane snapshots without firewall rules.
    pub enforce_firewall: bool,
    /// Time a client connection has to send a request's headers, which is also its keep-alive
    /// idle time (`--header-read-timeout-sec`); `None` is [`listener::HEADER_READ_TIMEOUT`].
    pub header_read_timeout: Option<std::time::Duration>,
}

struct Shared {
    listeners: ArcSwap<Vec<ListenerInfo>>,
    frontends: ArcSwap<BTreeMap<ResourceKey, Arc<compile::Frontend>>>,
    access_log: Option<PathBuf>,
    metrics: Arc<Metrics>,
    armor: Arc<armor::State>,
    logs: Arc<logging::Store>,
    cdn: Arc<cdn::store::Store>,
    iap: Arc<iap::State>,
}

/// Handle to the running data plane. Dropping it stops the data plane (listeners close,
/// probes stop).
pub struct DataPlane {
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl DataPlane {
    /// Starts the data plane: on the current Tokio runtime (must be called inside one) when
    /// `config.worker_threads` is 0, else on its own runtime on a dedicated OS thread: a
    /// current-thread runtime for 1, a multi-thread runtime with that many workers above.
    /// Returns at once; listeners open as snapshots are compiled.
    pub fn start(
        config: DataPlaneConfig,
        snapshots: watch::Receiver<Arc<Snapshot>>,
        health: Arc<HealthTable>,
    ) -> DataPlane {
        let shared = Arc::new(Shared {
            listeners: ArcSwap::from_pointee(Vec::new()),
            frontends: ArcSwap::from_pointee(BTreeMap::new()),
            access_log: config.access_log.clone(),
            metrics: Arc::new(Metrics::default()),
            armor: Arc::default(),
            logs: Arc::default(),
            cdn: Arc::default(),
            iap: Arc::default(),
        });
        let stop = CancellationToken::new();
        let run = run(
            config.clone(),
            snapshots,
            health,
            shared.clone(),
            stop.clone(),
        );
        if config.worker_threads > 0 {
            let threads = config.worker_threads;
            let spawned = std::thread::Builder::new()
                .name("dataplane".into())
                .spawn(move || {
                    // One worker: a current-thread runtime on this dedicated thread is the same
                    // single thread without the work-stealing machinery (measurably cheaper).
                    let rt = if threads == 1 {
                        tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()
                    } else {
                        tokio::runtime::Builder::new_multi_thread()
                            .worker_threads(threads)
                            .thread_name("dataplane-worker")
                            .enable_all()
                            .build()
                    };
                    match rt {
                        Ok(rt) => rt.block_on(run),
                        Err(e) => {
                            tracing::error!(error = %e, "cannot start the data plane runtime")
                        }
                    }
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "cannot start the data plane thread");
            }
        } else {
            tokio::spawn(run);
        }
        DataPlane { shared, stop }
    }

    /// Every open listener, sorted by forwarding rule.
    pub fn listeners(&self) -> Vec<ListenerInfo> {
        self.shared.listeners.load().as_ref().clone()
    }

    /// Cloud Armor state: the region map behind `origin.region_code`, rate-limit counters.
    pub fn armor(&self) -> Arc<armor::State> {
        self.shared.armor.clone()
    }

    /// The request logs of backend services with `logConfig.enable`.
    pub fn logs(&self) -> Arc<logging::Store> {
        self.shared.logs.clone()
    }

    /// The Cloud CDN cache of every backend service (`urlMaps.invalidateCache` removes from it).
    pub fn cdn(&self) -> Arc<cdn::store::Store> {
        self.shared.cdn.clone()
    }

    /// IAP: the signing key (its JWK set) and the identities allowed through.
    pub fn iap(&self) -> Arc<iap::State> {
        self.shared.iap.clone()
    }

    /// The compiled frontend of every forwarding rule, as requests see them now (for
    /// [`explain`] and the dashboard).
    pub fn frontends(&self) -> Arc<BTreeMap<ResourceKey, Arc<compile::Frontend>>> {
        self.shared.frontends.load_full()
    }

    /// The access log file (`--access-log`), if any.
    pub fn access_log_path(&self) -> Option<PathBuf> {
        self.shared.access_log.clone()
    }

    /// Data plane metrics in the Prometheus text exposition format.
    pub fn metrics_text(&self) -> String {
        self.shared.metrics.encode()
    }
}

impl Drop for DataPlane {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn run(
    config: DataPlaneConfig,
    mut snapshots: watch::Receiver<Arc<Snapshot>>,
    health: Arc<HealthTable>,
    shared: Arc<Shared>,
    stop: CancellationToken,
) {
    let access_log = config.access_log.as_deref().and_then(|p| match access_log::AccessLog::open(p) {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::error!(path = %p.display(), error = %e, "cannot open the access log; continuing without it");
            None
        }
    });
    let ctx = Arc::new(ProxyContext {
        upstream: upstream::Upstream::default(),
        access_log,
        timer: coarse_timer::CoarseTimer::start(),
        armor: shared.armor.clone(),
        logs: shared.logs.clone(),
        cdn: shared.cdn.clone(),
        iap: shared.iap.clone(),
    });
    let header_read_timeout = config
        .header_read_timeout
        .unwrap_or(listener::HEADER_READ_TIMEOUT);
    let serving = Arc::new(Serving::new(
        ctx,
        DEFAULT_MAX_CONNECTIONS,
        header_read_timeout,
    ));
    let mut manager = Manager {
        port_map: config.port_map,
        enforce_firewall: config.enforce_firewall,
        listeners: HashMap::new(),
        streams: tls_route::StreamListeners::default(),
        carry: Carry::default(),
        checker: HealthChecker::new(health, shared.metrics.clone()),
        serving,
        shared,
        stop: stop.clone(),
    };
    loop {
        let snap = snapshots.borrow_and_update().clone();
        manager.apply(&snap);
        tokio::select! {
            _ = stop.cancelled() => break,
            r = snapshots.changed() => {
                if r.is_err() {
                    // The control plane is gone: keep serving the last configuration.
                    stop.cancelled().await;
                    break;
                }
            }
        }
    }
    for l in manager.listeners.values() {
        l.close();
    }
    manager
        .streams
        .apply(&Default::default(), &manager.port_map, &manager.stop);
}

struct Manager {
    port_map: BTreeMap<u16, u16>,
    enforce_firewall: bool,
    listeners: HashMap<ResourceKey, Listener>,
    streams: tls_route::StreamListeners,
    carry: Carry,
    checker: HealthChecker,
    serving: Arc<Serving>,
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl Manager {
    fn apply(&mut self, snap: &Snapshot) {
        let compiled = compile::compile(
            snap,
            &mut self.carry,
            &self.shared.metrics,
            self.enforce_firewall,
        );
        self.checker.reconcile(compiled.probes);
        for ep in &compiled.removed {
            draining::start(ep);
        }
        self.listeners.retain(|rule, l| {
            let keep = compiled.frontends.contains_key(rule);
            if !keep {
                tracing::info!(forwarding_rule = %rule, local_addr = %l.local_addr, "closing listener");
                l.close();
            }
            keep
        });
        for (rule, fe) in &compiled.frontends {
            // Internal (subnet) addresses are carried by loopback ones (internal.rs).
            let ip = if is_regional(rule) {
                internal::loopback_for(fe.ip)
            } else {
                fe.ip
            };
            if !is_loopback(ip) {
                tracing::error!(forwarding_rule = %rule, ip = %fe.ip, "IPAddress is not a loopback address; the emulator only listens on 127.0.0.0/8 and ::1");
                if let Some(l) = self.listeners.remove(rule) {
                    l.close();
                }
                continue;
            }
            let port = self.port_map.get(&fe.port).copied().unwrap_or(fe.port);
            let requested = SocketAddr::new(ip, port);
            if let Some(l) = self.listeners.get(rule) {
                if l.requested == requested {
                    l.frontend.store(Some(fe.clone()));
                    l.sync_quic(&self.serving);
                    continue;
                }
                l.close();
                self.listeners.remove(rule);
            }
            match Listener::open(requested, fe.clone(), self.serving.clone(), &self.stop) {
                Ok(l) => {
                    tracing::info!(forwarding_rule = %rule, local_addr = %l.local_addr, "listening");
                    l.sync_quic(&self.serving);
                    self.listeners.insert(rule.clone(), l);
                }
                Err(e) => {
                    tracing::error!(forwarding_rule = %rule, addr = %requested, error = %e, "cannot listen; fix the address or use --port-map")
                }
            }
        }
        let mut infos: Vec<ListenerInfo> = self
            .listeners
            .iter()
            .filter_map(|(rule, l)| {
                let fe = compiled.frontends.get(rule)?;
                Some(ListenerInfo {
                    forwarding_rule: rule.clone(),
                    ip_address: fe.ip.to_string(),
                    port: fe.port,
                    local_addr: l.local_addr,
                })
            })
            .collect();
        infos.extend(
            self.streams
                .apply(&compiled.streams, &self.port_map, &self.stop),
        );
        infos.sort_by(|a, b| a.forwarding_rule.cmp(&b.forwarding_rule));
        self.shared.listeners.store(Arc::new(infos));
        self.shared.frontends.store(Arc::new(compiled.frontends));
    }
}

/// Whether a forwarding rule key is a regional one (`projects/p/regions/r/forwardingRules/x`).
fn is_regional(rule: &str) -> bool {
    rule.split('/').nth(2) == Some("regions")
}

fn is_loopback(ip: IpAddr) -> bool {
    ip.is_loopback()
}
