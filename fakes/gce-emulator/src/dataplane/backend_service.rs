//! Backend services as the data plane uses them: endpoints, load balancing, session affinity,
//! custom headers and the attached security policy. Endpoint choice is pure (given the shared
//! per-endpoint counters) and unit tested here.
//!
//! Fields read from `compute#backendService` (Compute API v1 reference): `protocol`,
//! `timeoutSec`, `sessionAffinity`, `affinityCookieTtlSec`, `localityLbPolicy`,
//! `connectionDraining.drainingTimeoutSec`, `customRequestHeaders`, `customResponseHeaders`,
//! `backends[].group`, `backends[].capacityScaler`, `healthChecks`, `securityPolicy`, `logConfig`, `enableCDN`, `cdnPolicy`, `iap`.

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use crate::dataplane::endpoint::Endpoint;
pub use crate::dataplane::upstream::BackendProtocol;

use crate::dataplane::armor::SecurityPolicy;
use crate::dataplane::cdn::Cdn;
use crate::dataplane::endpoint::stable_hash;
use crate::dataplane::iap::Iap;
use crate::dataplane::logging::LogConfig;
use crate::dataplane::metrics::BackendMetrics;
use crate::snapshot::ResourceKey;

/// The name of the cookie of `GENERATED_COOKIE` affinity (Compute API: "the cookie is named GCLB").
pub const AFFINITY_COOKIE: &str = "GCLB";

/// `sessionAffinity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionAffinity {
    /// `NONE`.
    None,
    /// `CLIENT_IP`: a hash of the client address picks the endpoint.
    ClientIp,
    /// `GENERATED_COOKIE`: the `GCLB` cookie names the endpoint; `ttl_sec` 0 = session cookie.
    GeneratedCookie { ttl_sec: u64 },
}

/// `localityLbPolicy` among healthy endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LbPolicy {
    /// `ROUND_ROBIN` (default, and for policies not emulated).
    RoundRobin,
    /// `LEAST_REQUEST`: fewest requests in flight.
    LeastRequest,
    /// `RANDOM`.
    Random,
}

/// A compiled backend service.
#[derive(Debug)]
pub struct BackendService {
    /// Its resource key.
    pub key: ResourceKey,
    /// How to talk to endpoints.
    pub protocol: BackendProtocol,
    /// `timeoutSec` (default 30 s): how long to wait for the response headers; for WebSocket,
    /// the longest life of the connection.
    pub timeout: Duration,
    /// `sessionAffinity`.
    pub affinity: SessionAffinity,
    /// `localityLbPolicy`.
    pub policy: LbPolicy,
    /// Endpoints that may take traffic when healthy (backends with `capacityScaler` 0 excluded).
    pub endpoints: Vec<Arc<Endpoint>>,
    /// Whether a health check is attached; without one every endpoint counts as healthy.
    pub health_checked: bool,
    /// `customRequestHeaders`, parsed as (name, value template).
    pub custom_request_headers: Vec<(http::HeaderName, String)>,
    /// `customResponseHeaders`.
    pub custom_response_headers: Vec<(http::HeaderName, String)>,
    /// The attached `securityPolicy`, if any.
    pub security_policy: Option<Arc<SecurityPolicy>>,
    /// `logConfig`, when `enable` is true.
    pub log_config: Option<LogConfig>,
    /// Cloud CDN, when `enableCDN` is true.
    pub cdn: Option<Arc<Cdn>>,
    /// IAP, when `iap.enabled` is true.
    pub iap: Option<Iap>,
    /// Whether any edge feature is on (request logs, Cloud CDN, Cloud Armor, IAP): decided by
    /// [`BackendService::seal_features`] when the snapshot is compiled, so a request to a
    /// backend service without them takes one branch past all four (proxy/edge.rs).
    pub edge: bool,
    /// Whether the firewall refuses proxied connections to any of its endpoints (set by the
    /// compiler from firewall.rs's verdicts); only then does a request check its endpoint's.
    pub firewall_gated: bool,
    /// Metrics handles.
    pub metrics: BackendMetrics,
    rr: AtomicUsize,
}

/// The choice of an endpoint for one request.
#[derive(Debug)]
pub struct Pick {
    /// The endpoint.
    pub endpoint: Arc<Endpoint>,
    /// Whether the response must set the `GCLB` cookie (new or stale affinity cookie).
    pub set_cookie: bool,
}

/// Parses `customRequestHeaders` / `customResponseHeaders` entries (`"Name: value"`).
pub fn parse_custom_headers(entries: &[serde_json::Value]) -> Vec<(http::HeaderName, String)> {
    entries
        .iter()
        .filter_map(|e| e.as_str())
        .filter_map(|e| {
            let (name, value) = e.split_once(':')?;
            let name = http::HeaderName::from_bytes(name.trim().as_bytes()).ok()?;
            Some((name, value.trim().to_string()))
        })
        .collect()
}

impl BackendService {
    /// A backend service with the given endpoints and defaults elsewhere (used by the compiler
    /// and by tests).
    pub fn new(
        key: ResourceKey,
        endpoints: Vec<Arc<Endpoint>>,
        metrics: BackendMetrics,
    ) -> BackendService {
        BackendService {
            key,
            protocol: BackendProtocol::Http,
            timeout: Duration::from_secs(30),
            affinity: SessionAffinity::None,
            policy: LbPolicy::RoundRobin,
            endpoints,
            health_checked: true,
            custom_request_headers: Vec::new(),
            custom_response_headers: Vec::new(),
            security_policy: None,
            log_config: None,
            cdn: None,
            iap: None,
            edge: false,
            firewall_gated: false,
            metrics,
            rr: AtomicUsize::new(0),
        }
    }

    /// Records which features are configured, once its fields are set: a request then pays
    /// only for those ([`BackendService::edge`]).
    pub fn seal_features(&mut self) {
        self.edge = self.log_config.is_some()
            || self.security_policy.is_some()
            || self.iap.is_some()
            || self.cdn.is_some();
    }

    /// Whether the load of each endpoint (requests in flight) must be counted: only
    /// `LEAST_REQUEST` reads it.
    pub fn counts_in_flight(&self) -> bool {
        self.policy == LbPolicy::LeastRequest
    }

    /// Whether picking needs a random number (`RANDOM`); the others take none.
    pub fn draws_random(&self) -> bool {
        self.policy == LbPolicy::Random
    }

    fn eligible(&self, e: &Endpoint) -> bool {
        !self.health_checked || e.healthy.load(Ordering::Relaxed)
    }

    /// Chooses an endpoint for a request from `client` carrying `cookie` (the `GCLB` value, if
    /// any); `random` is any random number. `None` when no endpoint is healthy.
    pub fn pick(&self, client: IpAddr, cookie: Option<&str>, random: u64) -> Option<Pick> {
        match self.affinity {
            SessionAffinity::ClientIp => {
                // Rendezvous hashing: the same client keeps its endpoint while it stays healthy,
                // and only clients of an endpoint that leaves move.
                let best = self
                    .endpoints
                    .iter()
                    .filter(|e| self.eligible(e))
                    .max_by_key(|e| stable_hash(&(client, e.addr)))?;
                return Some(Pick {
                    endpoint: best.clone(),
                    set_cookie: false,
                });
            }
            SessionAffinity::GeneratedCookie { .. } => {
                if let Some(c) = cookie {
                    if let Some(e) = self
                        .endpoints
                        .iter()
                        .find(|e| e.cookie == c && self.eligible(e))
                    {
                        return Some(Pick {
                            endpoint: e.clone(),
                            set_cookie: false,
                        });
                    }
                }
                let e = self.balance(random)?;
                return Some(Pick {
                    endpoint: e,
                    set_cookie: true,
                });
            }
            SessionAffinity::None => {}
        }
        Some(Pick {
            endpoint: self.balance(random)?,
            set_cookie: false,
        })
    }

    fn balance(&self, random: u64) -> Option<Arc<Endpoint>> {
        let n = self.endpoints.len();
        if n == 0 {
            return None;
        }
        let start = match self.policy {
            LbPolicy::Random => random as usize,
            _ => self.rr.fetch_add(1, Ordering::Relaxed),
        };
        if self.policy == LbPolicy::LeastRequest {
            let mut best: Option<&Arc<Endpoint>> = None;
            for i in 0..n {
                let e = &self.endpoints[(start + i) % n];
                if self.eligible(e)
                    && best.is_none_or(|b| {
                        e.in_flight.load(Ordering::Relaxed) < b.in_flight.load(Ordering::Relaxed)
                    })
                {
                    best = Some(e);
                }
            }
            return best.cloned();
        }
        (0..n)
            .map(|i| &self.endpoints[(start + i) % n])
            .find(|e| self.eligible(e))
            .cloned()
    }

    /// The `Set-Cookie` value for affinity to `e`, per `affinityCookieTtlSec`.
    pub fn affinity_cookie(&self, e: &Endpoint) -> String {
        match self.affinity {
            SessionAffinity::GeneratedCookie { ttl_sec } if ttl_sec > 0 => {
                format!(
                    "{AFFINITY_COOKIE}={}; Path=/; Max-Age={ttl_sec}; HttpOnly",
                    e.cookie
                )
            }
            _ => format!("{AFFINITY_COOKIE}={}; Path=/; HttpOnly", e.cookie),
        }
    }
}

/// The value of the `GCLB` cookie in a `Cookie` header, if present.
pub fn affinity_cookie_value(headers: &http::HeaderMap) -> Option<&str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == AFFINITY_COOKIE)
        .map(|(_, v)| v.trim_matches('"'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health_state::HealthKey;
    use std::net::SocketAddr;

    fn ep(port: u16, healthy: bool) -> Arc<Endpoint> {
        let key = HealthKey {
            backend_service: "bs".into(),
            neg: "neg".into(),
            ip_address: "127.0.0.1".into(),
            port,
        };
        let e = Endpoint::new(key, SocketAddr::from(([127, 0, 0, 1], port)));
        e.healthy.store(healthy, Ordering::Relaxed);
        Arc::new(e)
    }

    fn svc(eps: Vec<Arc<Endpoint>>) -> BackendService {
        BackendService::new("bs".into(), eps, BackendMetrics::default())
    }

    #[test]
    fn round_robin_skips_unhealthy() {
        let s = svc(vec![ep(1, true), ep(2, false), ep(3, true)]);
        let ports: Vec<u16> = (0..4)
            .map(|_| {
                s.pick([127, 0, 0, 1].into(), None, 0)
                    .unwrap()
                    .endpoint
                    .addr
                    .port()
            })
            .collect();
        assert!(!ports.contains(&2), "{ports:?}");
        assert!(ports.contains(&1) && ports.contains(&3), "{ports:?}");
    }

    #[test]
    fn none_healthy_gives_none_unless_unchecked() {
        let mut s = svc(vec![ep(1, false)]);
        assert!(s.pick([127, 0, 0, 1].into(), None, 0).is_none());
        s.health_checked = false;
        assert!(s.pick([127, 0, 0, 1].into(), None, 0).is_some());
    }

    #[test]
    fn least_request_prefers_idle() {
        let mut s = svc(vec![ep(1, true), ep(2, true)]);
        s.policy = LbPolicy::LeastRequest;
        s.endpoints[0].in_flight.store(5, Ordering::Relaxed);
        for _ in 0..3 {
            assert_eq!(
                s.pick([127, 0, 0, 1].into(), None, 0)
                    .unwrap()
                    .endpoint
                    .addr
                    .port(),
                2
            );
        }
    }

    #[test]
    fn cookie_and_client_ip_affinity_stick() {
        let mut s = svc(vec![ep(1, true), ep(2, true), ep(3, true)]);
        s.affinity = SessionAffinity::GeneratedCookie { ttl_sec: 60 };
        let first = s.pick([127, 0, 0, 1].into(), None, 0).unwrap();
        assert!(first.set_cookie);
        let cookie = first.endpoint.cookie.clone();
        for _ in 0..5 {
            let p = s.pick([127, 0, 0, 1].into(), Some(&cookie), 0).unwrap();
            assert_eq!(p.endpoint.addr, first.endpoint.addr);
            assert!(!p.set_cookie);
        }
        assert!(s.affinity_cookie(&first.endpoint).contains("Max-Age=60"));
        first.endpoint.healthy.store(false, Ordering::Relaxed);
        let moved = s.pick([127, 0, 0, 1].into(), Some(&cookie), 0).unwrap();
        assert_ne!(moved.endpoint.addr, first.endpoint.addr);
        assert!(moved.set_cookie);

        s.affinity = SessionAffinity::ClientIp;
        let a = s
            .pick([127, 9, 9, 9].into(), None, 0)
            .unwrap()
            .endpoint
            .addr;
        for _ in 0..5 {
            assert_eq!(
                s.pick([127, 9, 9, 9].into(), None, 0)
                    .unwrap()
                    .endpoint
                    .addr,
                a
            );
        }
    }

    #[test]
    fn cookie_header_parsing() {
        let mut h = http::HeaderMap::new();
        h.insert(
            http::header::COOKIE,
            "a=1; GCLB=\"abc\"; b=2".parse().unwrap(),
        );
        assert_eq!(affinity_cookie_value(&h), Some("abc"));
        let parsed = parse_custom_headers(&[
            serde_json::json!("X-Client-Region: {client_region}"),
            serde_json::json!("bad"),
        ]);
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].0.as_str(), "x-client-region");
        assert_eq!(parsed[0].1, "{client_region}");
    }
}
