//! Compiles a [`Snapshot`] into immutable routing state: one [`Frontend`] per global forwarding
//! rule whose target is a targetHttpProxy or targetHttpsProxy, the backend services they route
//! to, and the health probes to run.
//!
//! Resource chain (Compute API v1): `forwardingRules.target` -> `target{Http,Https}Proxies.urlMap`
//! (+ `sslCertificates`, `sslPolicy`) -> `urlMaps` -> `backendServices.backends[].group` ->
//! zonal `networkEndpointGroups` (`GCE_VM_IP_PORT`) -> endpoints from `Snapshot::neg_endpoints`.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use serde_json::Value;

use crate::dataplane::armor::SecurityPolicy;
use crate::dataplane::backend_service::{
    parse_custom_headers, BackendProtocol, BackendService, Endpoint, LbPolicy, SessionAffinity,
};
use crate::dataplane::cdn::{policy::CdnPolicy, Cdn};
use crate::dataplane::health::{ProbeSpec, ProbeTarget};
use crate::dataplane::iap::Iap;
use crate::dataplane::logging::LogConfig;
use crate::dataplane::metrics::{Metrics, RequestMetrics};
use crate::dataplane::tls;
use crate::dataplane::url_map::UrlMapTable;
use crate::health_state::HealthKey;
use crate::snapshot::{key_from_url, ResourceKey, Snapshot};

/// Everything the proxy needs to serve one forwarding rule. Immutable; replaced as a whole.
#[derive(Debug)]
pub struct Frontend {
    /// The forwarding rule (global or regional).
    pub rule: ResourceKey,
    /// `IPAddress`.
    pub ip: IpAddr,
    /// First port of `portRange`.
    pub port: u16,
    /// The URL map key (for the access log).
    pub url_map: ResourceKey,
    /// The target proxy key (for request logs).
    pub target_proxy: ResourceKey,
    /// The compiled URL map, or why it could not be compiled (every request then gets 502).
    pub routing: Result<UrlMapTable, String>,
    /// Backend services indexed as the URL map's actions refer to them.
    pub services: Arc<Vec<Arc<BackendService>>>,
    /// TLS for targetHttpsProxies: the server configuration, or why there is none (handshakes
    /// are then refused). `None` for targetHttpProxies.
    pub tls: Option<Result<Arc<ServerConfig>, String>>,
    /// `quicOverride: ENABLE` on the target HTTPS proxy: HTTP/3 is served on the rule's UDP
    /// port and advertised with `Alt-Svc` (quic.rs).
    pub quic: bool,
    /// Per-rule metrics.
    pub metrics: RequestMetrics,
}

/// The result of compiling one snapshot.
#[derive(Debug, Default)]
pub struct Compiled {
    /// Frontends by forwarding rule.
    pub frontends: BTreeMap<ResourceKey, Arc<Frontend>>,
    /// Probes to run.
    pub probes: Vec<ProbeTarget>,
    /// Proxy Network Load Balancer frontends (target TCP and SSL proxies) by forwarding rule.
    pub streams: BTreeMap<ResourceKey, Arc<crate::dataplane::tls_route::StreamFrontend>>,
    /// Endpoints of the previous compile that are no longer in any backend service (detached
    /// from their NEG, or their NEG from the backend service, or the backend service deleted):
    /// they take no new requests and start connection draining (draining.rs).
    pub removed: Vec<Arc<Endpoint>>,
}

/// State carried from one compile to the next so that endpoint health and load, and TLS session
/// caches, survive configuration changes.
#[derive(Debug, Default)]
pub struct Carry {
    endpoints: HashMap<HealthKey, Arc<Endpoint>>,
    tls: HashMap<u64, Arc<ServerConfig>>,
}

fn str_field<'v>(v: &'v Value, f: &str) -> Option<&'v str> {
    v.get(f).and_then(Value::as_str)
}

fn num(v: &Value, f: &str) -> Option<u64> {
    v.get(f)
        .and_then(|x| x.as_u64().or_else(|| x.as_str()?.parse().ok()))
}

fn kind_of(key: &str) -> Option<&str> {
    // projects/p/global/KIND/name or projects/p/zones/z/KIND/name
    let parts: Vec<&str> = key.split('/').collect();
    parts.len().checked_sub(2).map(|i| parts[i])
}

pub use crate::dataplane::tls_route::first_port;

/// The NEG keys a backend service's `backends[].group` name.
fn backend_groups(v: &Value) -> impl Iterator<Item = (&Value, ResourceKey)> {
    v.get("backends")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|b| Some((b, str_field(b, "group").and_then(key_from_url)?)))
}

/// `connectionDraining.drainingTimeoutSec` per NEG: the largest over the backend services that
/// use it ("Enabling connection draining": with several backend services on one NEG, the
/// largest timeout applies).
fn draining_by_neg(snap: &Snapshot) -> HashMap<ResourceKey, u64> {
    let mut by_neg = HashMap::new();
    for (k, v) in &snap.resources {
        if kind_of(k) != Some("backendServices") {
            continue;
        }
        let secs = v
            .get("connectionDraining")
            .and_then(|d| num(d, "drainingTimeoutSec"))
            .unwrap_or(0);
        for (_, neg) in backend_groups(v) {
            let e = by_neg.entry(neg).or_insert(0);
            *e = (*e).max(secs);
        }
    }
    by_neg
}

#[allow(clippy::too_many_arguments)]
fn compile_backend_service(
    key: &str,
    v: &Value,
    snap: &Snapshot,
    draining: &HashMap<ResourceKey, u64>,
    carry: &mut Carry,
    next: &mut HashMap<HealthKey, Arc<Endpoint>>,
    metrics: &Metrics,
    probes: &mut Vec<ProbeTarget>,
) -> BackendService {
    let hc = v
        .get("healthChecks")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str)
        .and_then(|u| {
            key_from_url(u).and_then(|k| snap.get(&k).map(|hc| ProbeSpec::compile(&k, hc)))
        });
    let mut endpoints = Vec::new();
    for (b, neg_key) in backend_groups(v) {
        let neg_type = snap
            .get(&neg_key)
            .and_then(|n| str_field(n, "networkEndpointType"))
            .unwrap_or("GCE_VM_IP_PORT");
        if neg_type != "GCE_VM_IP_PORT" {
            tracing::warn!(backend_service = key, group = %neg_key, neg_type, "only GCE_VM_IP_PORT network endpoint groups carry traffic in the emulator");
            continue;
        }
        let serving = b
            .get("capacityScaler")
            .and_then(Value::as_f64)
            .unwrap_or(1.0)
            > 0.0;
        for ne in snap.neg_endpoints.get(&neg_key).into_iter().flatten() {
            let Ok(ip) = ne.ip_address.parse::<IpAddr>() else {
                continue;
            };
            let hk = HealthKey {
                backend_service: key.to_string(),
                neg: neg_key.clone(),
                ip_address: ne.ip_address.clone(),
                port: ne.port,
            };
            let ep = carry.endpoints.get(&hk).cloned().unwrap_or_else(|| {
                Arc::new(Endpoint::new(hk.clone(), SocketAddr::new(ip, ne.port)))
            });
            ep.draining_timeout_sec.store(
                draining.get(&neg_key).copied().unwrap_or(0),
                std::sync::atomic::Ordering::Relaxed,
            );
            next.insert(hk, ep.clone());
            if let Some(spec) = &hc {
                probes.push(ProbeTarget {
                    endpoint: ep.clone(),
                    spec: spec.clone(),
                });
            }
            if serving {
                endpoints.push(ep);
            }
        }
    }
    let mut bs = BackendService::new(key.to_string(), endpoints, metrics.for_backend(key));
    bs.health_checked = hc.is_some();
    bs.protocol = match str_field(v, "protocol") {
        Some("HTTPS") => BackendProtocol::Https,
        Some("HTTP2") => BackendProtocol::Http2,
        _ => BackendProtocol::Http,
    };
    bs.timeout = Duration::from_secs(num(v, "timeoutSec").unwrap_or(30).max(1));
    bs.affinity = match str_field(v, "sessionAffinity") {
        Some("CLIENT_IP") => SessionAffinity::ClientIp,
        Some("GENERATED_COOKIE") => SessionAffinity::GeneratedCookie {
            ttl_sec: num(v, "affinityCookieTtlSec").unwrap_or(0),
        },
        _ => SessionAffinity::None,
    };
    bs.policy = match str_field(v, "localityLbPolicy") {
        Some("LEAST_REQUEST") => LbPolicy::LeastRequest,
        Some("RANDOM") => LbPolicy::Random,
        _ => LbPolicy::RoundRobin,
    };
    let headers = |f: &str| {
        parse_custom_headers(
            v.get(f)
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[]),
        )
    };
    bs.custom_request_headers = headers("customRequestHeaders");
    bs.custom_response_headers = headers("customResponseHeaders");
    bs.security_policy = str_field(v, "securityPolicy").and_then(|u| {
        let k = key_from_url(u)?;
        let p = snap.get(&k)?;
        Some(Arc::new(SecurityPolicy::compile(&k, p)))
    });
    bs.log_config = LogConfig::compile(v);
    bs.iap = Iap::compile(key, v);
    if v.get("enableCDN").and_then(Value::as_bool) == Some(true) {
        bs.cdn = Some(Arc::new(Cdn {
            service: key.to_string(),
            policy: CdnPolicy::compile(v.get("cdnPolicy").unwrap_or(&Value::Null)),
            keys: signed_url_keys(snap, key),
        }));
    }
    bs.seal_features();
    bs
}

/// The signed URL keys of backend service `key`: stored by `addSignedUrlKey` as
/// `Snapshot::private_keys["{key}/signedUrlKeys/{name}"]`, base64url.
fn signed_url_keys(snap: &Snapshot, key: &str) -> Vec<(String, Vec<u8>)> {
    use base64::Engine as _;
    let prefix = format!("{key}/signedUrlKeys/");
    snap.private_keys
        .range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .filter_map(|(k, v)| {
            let value = base64::engine::general_purpose::URL_SAFE
                .decode(v.trim())
                .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(v.trim()))
                .ok()?;
            Some((k[prefix.len()..].to_string(), value))
        })
        .collect()
}

/// The certificates a target HTTPS proxy serves, in `sslCertificates` order: (key, PEM chain,
/// PEM private key). Certificates without both (MANAGED ones not yet ACTIVE) are left out.
pub fn certificate_inputs<'s>(
    proxy: &'s Value,
    snap: &'s Snapshot,
) -> Vec<(ResourceKey, &'s str, &'s str)> {
    let mut inputs = Vec::new();
    for url in proxy
        .get("sslCertificates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        let Some(k) = key_from_url(url) else { continue };
        let Some(cert) = snap.get(&k) else { continue };
        let pem = str_field(cert, "certificate").or_else(|| {
            cert.pointer("/selfManaged/certificate")
                .and_then(Value::as_str)
        });
        match (pem, snap.private_keys.get(&k)) {
            (Some(pem), Some(key)) => inputs.push((k, pem, key.as_str())),
            _ => {
                tracing::debug!(certificate = %k, "sslCertificate has no certificate or key yet (MANAGED and not ACTIVE?); not served")
            }
        }
    }
    inputs
}

fn tls_config(
    proxy_key: &str,
    proxy: &Value,
    snap: &Snapshot,
    carry: &Carry,
    next_tls: &mut HashMap<u64, Arc<ServerConfig>>,
) -> Result<Arc<ServerConfig>, String> {
    let inputs = certificate_inputs(proxy, snap);
    let policy = str_field(proxy, "sslPolicy").and_then(|u| snap.resolve(u));
    #[allow(deprecated)]
    let mut h = std::hash::SipHasher::new();
    inputs.hash(&mut h);
    policy.map(|p| p.to_string()).hash(&mut h);
    let fp = h.finish();
    if let Some(cfg) = carry.tls.get(&fp) {
        next_tls.insert(fp, cfg.clone());
        return Ok(cfg.clone());
    }
    let mut certs = Vec::new();
    for (k, pem, key) in inputs {
        match tls::served_cert(&k, pem, key) {
            Ok(c) => certs.push(c),
            Err(e) => tracing::warn!(error = %e, "sslCertificate not served"),
        }
    }
    let cfg = tls::server_config(proxy_key, certs, policy).map_err(|e| e.to_string())?;
    next_tls.insert(fp, cfg.clone());
    Ok(cfg)
}

/// A target SSL proxy carries bytes, not HTTP: the same certificates and policy, no ALPN.
fn without_alpn(cfg: Arc<ServerConfig>) -> Arc<ServerConfig> {
    let mut c = (*cfg).clone();
    c.alpn_protocols.clear();
    Arc::new(c)
}

/// Compiles `snap`. Problems in one load balancer are logged and confined to it. With
/// `enforce_firewall`, the VPC firewall decides which endpoints probes and proxied connections
/// reach (firewall.rs); else all are admitted.
pub fn compile(
    snap: &Snapshot,
    carry: &mut Carry,
    metrics: &Metrics,
    enforce_firewall: bool,
) -> Compiled {
    let mut next_eps = HashMap::new();
    let mut next_tls = HashMap::new();
    let mut probes = Vec::new();
    let draining = draining_by_neg(snap);
    // Every backend service (global and regional), used or not: getHealth reports on all.
    let mut services = Vec::new();
    let mut index = HashMap::new();
    for (k, v) in &snap.resources {
        if kind_of(k) == Some("backendServices") {
            index.insert(k.clone(), services.len());
            services.push(compile_backend_service(
                k,
                v,
                snap,
                &draining,
                carry,
                &mut next_eps,
                metrics,
                &mut probes,
            ));
        }
    }
    // The firewall's verdicts, before the backend services are sealed: each then knows whether
    // requests must look at them.
    crate::dataplane::firewall::admit(snap, &probes, &services, enforce_firewall);
    let services: Arc<Vec<Arc<BackendService>>> = Arc::new(
        services
            .into_iter()
            .map(|mut bs| {
                bs.firewall_gated = bs.endpoints.iter().any(|e| !e.admission.traffic());
                Arc::new(bs)
            })
            .collect(),
    );
    let mut frontends = BTreeMap::new();
    for (k, rule) in &snap.resources {
        if kind_of(k) != Some("forwardingRules") {
            continue;
        }
        let Some(target_key) = str_field(rule, "target").and_then(key_from_url) else {
            continue;
        };
        let https = match kind_of(&target_key) {
            Some("targetHttpProxies") => false,
            Some("targetHttpsProxies") => true,
            _ => continue,
        };
        let (Some(ip), Some(port)) = (
            str_field(rule, "IPAddress").and_then(|s| s.parse::<IpAddr>().ok()),
            str_field(rule, "portRange").and_then(first_port),
        ) else {
            tracing::warn!(forwarding_rule = %k, "forwarding rule without a usable IPAddress or portRange; no listener");
            continue;
        };
        let Some(proxy) = snap.get(&target_key) else {
            continue;
        };
        let url_map = str_field(proxy, "urlMap")
            .and_then(key_from_url)
            .unwrap_or_default();
        let routing = match snap.get(&url_map) {
            None => Err(format!(
                "targetProxy {target_key}: urlMap {url_map:?} not found"
            )),
            Some(um) => UrlMapTable::compile(um, &mut |url: &str| {
                let key = key_from_url(url)
                    .ok_or_else(|| format!("invalid service reference {url:?}"))?;
                if kind_of(&key) == Some("backendBuckets") {
                    return Err(format!(
                        "{key}: backend buckets are not served by the emulator"
                    ));
                }
                index
                    .get(&key)
                    .copied()
                    .ok_or_else(|| format!("backend service {key} not found"))
            })
            .map_err(|e| e.to_string()),
        };
        if let Err(e) = &routing {
            tracing::warn!(forwarding_rule = %k, error = %e, "URL map not usable; requests get 502");
        }
        let tls = https.then(|| {
            let r = tls_config(&target_key, proxy, snap, carry, &mut next_tls);
            if let Err(e) = &r {
                tracing::warn!(forwarding_rule = %k, error = %e, "no TLS configuration; handshakes are refused");
            }
            r
        });
        let fe = Frontend {
            rule: k.clone(),
            ip,
            port,
            url_map,
            target_proxy: target_key.clone(),
            routing,
            services: services.clone(),
            quic: https && str_field(proxy, "quicOverride") == Some("ENABLE"),
            tls,
            metrics: metrics.for_rule(k),
        };
        frontends.insert(k.clone(), Arc::new(fe));
    }
    let by_key: HashMap<ResourceKey, Arc<BackendService>> = index
        .iter()
        .map(|(k, i)| (k.clone(), services[*i].clone()))
        .collect();
    let streams = crate::dataplane::tls_route::compile(snap, &by_key, &mut |key, proxy| {
        tls_config(key, proxy, snap, carry, &mut next_tls).map(without_alpn)
    });
    let removed = carry
        .endpoints
        .iter()
        .filter(|(k, _)| !next_eps.contains_key(*k))
        .map(|(_, ep)| ep.clone())
        .collect();
    carry.endpoints = next_eps;
    carry.tls = next_tls;
    Compiled {
        frontends,
        streams,
        probes,
        removed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_and_kinds() {
        assert_eq!(first_port("80-80"), Some(80));
        assert_eq!(first_port("443"), Some(443));
        assert_eq!(first_port("x"), None);
        assert_eq!(
            kind_of("projects/p/global/backendServices/b"),
            Some("backendServices")
        );
    }
}
