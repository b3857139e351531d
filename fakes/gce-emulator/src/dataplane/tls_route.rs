//! Proxy Network Load Balancers: global forwarding rules whose target is a `targetTcpProxies`
//! or a `targetSslProxies` resource. Each gets its own TCP listener (after the port map).
//!
//! - Target TCP proxy with Network Services `tlsRoutes` naming it in `targetProxies`: the
//!   listener reads the TLS ClientHello (parsed by rustls' `Acceptor`, which does not answer
//!   it), takes its SNI and ALPN, and picks the route: the SNI is tried as sent, then as each
//!   wildcard above it (`www.example.com`, `*.example.com`, `*.com`: Network Services API,
//!   `TlsRoute.RouteMatch.sniHost`), routes in name order, rules in order ("the action taken will
//!   be the first rule to match"). A destination is drawn by weight ("weight/Sum(weights in
//!   destinations)"), an endpoint of its backend service by the service's balancing policy among
//!   healthy endpoints; the bytes of the ClientHello are then sent to the endpoint and both
//!   directions are spliced. The proxy never decrypts: the client completes its TLS handshake
//!   with the endpoint. No route matches: the proxy's `service`.
//! - Target TCP proxy without routes: plain TCP to an endpoint of `service`.
//! - Target SSL proxy: TLS is terminated with the proxy's `sslCertificates` (chosen by SNI, as a
//!   target HTTPS proxy chooses) and `sslPolicy`, without ALPN; the decrypted bytes go over plain
//!   TCP to an endpoint of `service`.
//!
//! No eligible endpoint (or a ClientHello that cannot be read within the handshake timeout):
//! the connection is closed. `idleTimeout` of routes is not enforced (the default is an hour).

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use rustls::server::Acceptor;
use rustls::ServerConfig;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::dataplane::backend_service::BackendService;
use crate::dataplane::listener_info::ListenerInfo;
use crate::dataplane::tls::TLS_HANDSHAKE_TIMEOUT;
use crate::snapshot::{key_from_url, ResourceKey, Snapshot};

/// First port of a `portRange` such as `"80-80"` or `"443"`.
pub fn first_port(port_range: &str) -> Option<u16> {
    port_range.split('-').next()?.trim().parse().ok()
}

/// Largest ClientHello read before routing (a TLS record holds at most 16 KiB of plaintext;
/// a ClientHello over several records is accepted up to this many bytes).
pub const MAX_CLIENT_HELLO: usize = 64 * 1024;

/// One rule of one tlsRoute, compiled.
#[derive(Debug)]
pub struct SniRule {
    /// `route key/rules[i]`, for logs.
    pub name: String,
    /// `sniHost` of every match (lower case; `*.suffix` wildcards kept as written).
    pub hosts: Vec<String>,
    /// Matches with ALPN only: (alpn values), matched whatever the SNI.
    pub alpn_only: Vec<Vec<String>>,
    /// ALPN values of the matches that also name hosts (empty: any ALPN).
    pub alpn: Vec<String>,
    /// (backend service, weight > 0).
    pub destinations: Vec<(Arc<BackendService>, u32)>,
}

/// What a stream listener does with a connection.
#[derive(Debug)]
pub enum StreamMode {
    /// A target TCP proxy: SNI routing through `rules` (may be empty), else `service`.
    Passthrough {
        /// Compiled rules, in evaluation order.
        rules: Vec<SniRule>,
    },
    /// A target SSL proxy: TLS terminated with this configuration (or why there is none).
    Terminate(Result<Arc<ServerConfig>, String>),
}

/// Everything one proxy listener needs. Immutable; replaced as a whole.
#[derive(Debug)]
pub struct StreamFrontend {
    /// The global forwarding rule.
    pub rule: ResourceKey,
    /// `IPAddress`.
    pub ip: IpAddr,
    /// Port of `portRange`.
    pub port: u16,
    /// The proxy's `service` (absent when it cannot be compiled: connections are closed).
    pub service: Option<Arc<BackendService>>,
    /// Passthrough or terminate.
    pub mode: StreamMode,
}

/// Builds the TLS configuration of a target SSL proxy (key, resource), or why it cannot.
pub type TlsBuilder<'a> = dyn FnMut(&str, &Value) -> Result<Arc<ServerConfig>, String> + 'a;

/// Compiles the proxy frontends of `snap`. `services` maps backend service keys to the
/// compiled services (shared with the HTTP frontends, so health is the same); `tls` builds the
/// TLS configuration of a target SSL proxy.
pub fn compile(
    snap: &Snapshot,
    services: &HashMap<ResourceKey, Arc<BackendService>>,
    tls: &mut TlsBuilder<'_>,
) -> BTreeMap<ResourceKey, Arc<StreamFrontend>> {
    let mut out = BTreeMap::new();
    for (k, rule) in &snap.resources {
        if !k.contains("/global/forwardingRules/") {
            continue;
        }
        let Some(target_key) = rule["target"].as_str().and_then(key_from_url) else {
            continue;
        };
        let tcp = target_key.contains("/global/targetTcpProxies/");
        if !tcp && !target_key.contains("/global/targetSslProxies/") {
            continue;
        }
        let (Some(ip), Some(port)) = (
            rule["IPAddress"].as_str().and_then(|s| s.parse().ok()),
            rule["portRange"].as_str().and_then(first_port),
        ) else {
            continue;
        };
        let Some(proxy) = snap.get(&target_key) else {
            continue;
        };
        let service = proxy["service"]
            .as_str()
            .and_then(key_from_url)
            .and_then(|s| services.get(&s).cloned());
        let mode = if tcp {
            StreamMode::Passthrough {
                rules: sni_rules(snap, &target_key, services),
            }
        } else {
            StreamMode::Terminate(tls(&target_key, proxy))
        };
        out.insert(
            k.clone(),
            Arc::new(StreamFrontend {
                rule: k.clone(),
                ip,
                port,
                service,
                mode,
            }),
        );
    }
    out
}

/// The rules of every tlsRoute attached to the target TCP proxy `proxy_key`
/// (`projects/p/global/targetTcpProxies/x`, named `projects/p/locations/global/targetTcpProxies/x`
/// in `targetProxies`), routes in key order.
fn sni_rules(
    snap: &Snapshot,
    proxy_key: &str,
    services: &HashMap<ResourceKey, Arc<BackendService>>,
) -> Vec<SniRule> {
    let ns_form = proxy_key.replacen("/global/", "/locations/global/", 1);
    let mut rules = Vec::new();
    for (k, route) in &snap.resources {
        if !(k.contains("/locations/") && k.contains("/tlsRoutes/")) {
            continue;
        }
        let attached = route["targetProxies"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .any(|p| p.ends_with(&ns_form) || key_from_url(p).as_deref() == Some(proxy_key));
        if !attached {
            continue;
        }
        for (i, r) in route["rules"].as_array().into_iter().flatten().enumerate() {
            let mut rule = SniRule {
                name: format!("{k}/rules[{i}]"),
                hosts: Vec::new(),
                alpn_only: Vec::new(),
                alpn: Vec::new(),
                destinations: Vec::new(),
            };
            for m in r["matches"].as_array().into_iter().flatten() {
                let strs = |f: &str| -> Vec<String> {
                    m[f].as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(str::to_ascii_lowercase)
                        .collect()
                };
                let (hosts, alpn) = (strs("sniHost"), strs("alpn"));
                if hosts.is_empty() {
                    rule.alpn_only.push(alpn);
                } else {
                    rule.hosts.extend(hosts);
                    rule.alpn.extend(alpn);
                }
            }
            for d in r["action"]["destinations"].as_array().into_iter().flatten() {
                let weight = d["weight"].as_u64().unwrap_or(1) as u32;
                let key = d["serviceName"]
                    .as_str()
                    .map(|s| s.replacen("/locations/global/", "/global/", 1))
                    .and_then(|s| key_from_url(&s));
                match key.and_then(|k| services.get(&k).cloned()) {
                    Some(bs) if weight > 0 => rule.destinations.push((bs, weight)),
                    Some(_) => {}
                    None => {
                        tracing::warn!(rule = %rule.name, "destination backend service not found; skipped")
                    }
                }
            }
            rules.push(rule);
        }
    }
    rules
}

/// The names an SNI is matched as, most specific first: `www.example.com`, `*.example.com`,
/// `*.com`.
pub fn sni_candidates(sni: &str) -> Vec<String> {
    let sni = sni.trim_end_matches('.').to_ascii_lowercase();
    let mut out = vec![sni.clone()];
    let mut rest = sni.as_str();
    while let Some((_, parent)) = rest.split_once('.') {
        out.push(format!("*.{parent}"));
        rest = parent;
    }
    out
}

/// The rule for a ClientHello with `sni` and `alpn` offers, if any.
pub fn select<'r>(
    rules: &'r [SniRule],
    sni: Option<&str>,
    alpn: &[Vec<u8>],
) -> Option<&'r SniRule> {
    let offers = |want: &[String]| {
        want.is_empty() || want.iter().any(|w| alpn.iter().any(|a| a == w.as_bytes()))
    };
    if let Some(sni) = sni {
        for candidate in sni_candidates(sni) {
            if let Some(r) = rules
                .iter()
                .find(|r| r.hosts.contains(&candidate) && offers(&r.alpn))
            {
                return Some(r);
            }
        }
    }
    rules
        .iter()
        .find(|r| r.alpn_only.iter().any(|a| !a.is_empty() && offers(a)))
}

/// A weighted draw among `destinations` with the random number `r`.
pub fn draw(destinations: &[(Arc<BackendService>, u32)], r: u64) -> Option<&Arc<BackendService>> {
    let total: u64 = destinations.iter().map(|(_, w)| u64::from(*w)).sum();
    if total == 0 {
        return None;
    }
    let mut x = r % total;
    for (bs, w) in destinations {
        if x < u64::from(*w) {
            return Some(bs);
        }
        x -= u64::from(*w);
    }
    None
}

struct Open {
    requested: SocketAddr,
    local_addr: SocketAddr,
    slot: Arc<arc_swap::ArcSwap<StreamFrontend>>,
    stop: CancellationToken,
}

/// The open proxy listeners, by forwarding rule.
#[derive(Default)]
pub struct StreamListeners {
    open: HashMap<ResourceKey, Open>,
}

impl StreamListeners {
    /// Opens, updates and closes listeners to serve exactly `frontends`; `port_map` maps rule
    /// ports to local ports. Returns the effective sockets for `GET /_emulator/listeners`.
    pub fn apply(
        &mut self,
        frontends: &BTreeMap<ResourceKey, Arc<StreamFrontend>>,
        port_map: &BTreeMap<u16, u16>,
        parent: &CancellationToken,
    ) -> Vec<ListenerInfo> {
        self.open.retain(|rule, l| {
            let keep = frontends.contains_key(rule);
            if !keep {
                tracing::info!(forwarding_rule = %rule, "closing proxy listener");
                l.stop.cancel();
            }
            keep
        });
        for (rule, fe) in frontends {
            if !fe.ip.is_loopback() {
                tracing::error!(forwarding_rule = %rule, ip = %fe.ip, "IPAddress is not a loopback address; not listening");
                continue;
            }
            let port = port_map.get(&fe.port).copied().unwrap_or(fe.port);
            let requested = SocketAddr::new(fe.ip, port);
            if let Some(l) = self.open.get(rule) {
                if l.requested == requested {
                    l.slot.store(fe.clone());
                    continue;
                }
                l.stop.cancel();
                self.open.remove(rule);
            }
            match open(requested, fe.clone(), parent) {
                Ok(l) => {
                    tracing::info!(forwarding_rule = %rule, local_addr = %l.local_addr, "proxy listening");
                    self.open.insert(rule.clone(), l);
                }
                Err(e) => {
                    tracing::error!(forwarding_rule = %rule, addr = %requested, error = %e, "cannot listen; fix the address or use --port-map")
                }
            }
        }
        self.open
            .iter()
            .map(|(rule, l)| {
                let fe = l.slot.load();
                ListenerInfo {
                    forwarding_rule: rule.clone(),
                    ip_address: fe.ip.to_string(),
                    port: fe.port,
                    local_addr: l.local_addr,
                }
            })
            .collect()
    }
}

fn open(
    requested: SocketAddr,
    fe: Arc<StreamFrontend>,
    parent: &CancellationToken,
) -> std::io::Result<Open> {
    let socket = if requested.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(requested)?;
    let tcp = socket.listen(1024)?;
    let local_addr = tcp.local_addr()?;
    let slot = Arc::new(arc_swap::ArcSwap::new(fe));
    let stop = parent.child_token();
    let (s, st) = (slot.clone(), stop.clone());
    tokio::spawn(async move {
        loop {
            let (stream, client) = tokio::select! {
                _ = st.cancelled() => break,
                r = tcp.accept() => match r {
                    Ok(x) => x,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let fe = s.load_full();
            let conn_stop = st.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = conn_stop.cancelled() => {}
                    _ = serve(stream, client, fe) => {}
                }
            });
        }
    });
    Ok(Open {
        requested,
        local_addr,
        slot,
        stop,
    })
}

/// Connects to an eligible endpoint of `bs` for `client`.
async fn connect(bs: &BackendService, client: SocketAddr) -> Option<TcpStream> {
    let pick = bs.pick(client.ip(), None, rand::random())?;
    match TcpStream::connect(pick.endpoint.addr).await {
        Ok(s) => {
            let _ = s.set_nodelay(true);
            Some(s)
        }
        Err(e) => {
            tracing::debug!(endpoint = %pick.endpoint.addr, error = %e, "cannot connect to the endpoint; closing the client connection");
            None
        }
    }
}

async fn serve(mut client_stream: TcpStream, client: SocketAddr, fe: Arc<StreamFrontend>) {
    let _ = client_stream.set_nodelay(true);
    match &fe.mode {
        StreamMode::Passthrough { rules } if !rules.is_empty() => {
            let read =
                tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, read_client_hello(&mut client_stream))
                    .await;
            let Ok(Some((hello, sni, alpn))) = read else {
                tracing::debug!(%client, rule = %fe.rule, "no readable TLS ClientHello; closing");
                return;
            };
            let chosen = select(rules, sni.as_deref(), &alpn);
            let bs = match chosen {
                Some(r) => draw(&r.destinations, rand::random()).cloned(),
                None => fe.service.clone(),
            };
            tracing::debug!(%client, sni = ?sni, rule = ?chosen.map(|r| &r.name), "TLS route");
            let Some(bs) = bs else { return };
            let Some(mut upstream) = connect(&bs, client).await else {
                return;
            };
            if upstream.write_all(&hello).await.is_err() {
                return;
            }
            let _ = tokio::io::copy_bidirectional(&mut client_stream, &mut upstream).await;
        }
        StreamMode::Passthrough { .. } => {
            let Some(bs) = fe.service.clone() else { return };
            let Some(mut upstream) = connect(&bs, client).await else {
                return;
            };
            let _ = tokio::io::copy_bidirectional(&mut client_stream, &mut upstream).await;
        }
        StreamMode::Terminate(Err(_)) => {}
        StreamMode::Terminate(Ok(cfg)) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(cfg.clone());
            let Ok(Ok(mut tls)) =
                tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(client_stream)).await
            else {
                return;
            };
            let Some(bs) = fe.service.clone() else { return };
            let Some(mut upstream) = connect(&bs, client).await else {
                return;
            };
            let _ = tokio::io::copy_bidirectional(&mut tls, &mut upstream).await;
        }
    }
}

/// Reads until a whole ClientHello has arrived. Returns the bytes read (to replay to the
/// endpoint), the SNI and the ALPN offers; `None` when the stream is not TLS, closes early or
/// sends more than [`MAX_CLIENT_HELLO`] bytes without completing one.
async fn read_client_hello(s: &mut TcpStream) -> Option<(Vec<u8>, Option<String>, Vec<Vec<u8>>)> {
    let mut buf = Vec::with_capacity(2048);
    let mut acceptor = Acceptor::default();
    let mut fed = 0;
    loop {
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > MAX_CLIENT_HELLO {
            return None;
        }
        let mut rd = &buf[fed..];
        while !rd.is_empty() {
            match acceptor.read_tls(&mut rd) {
                Ok(0) => break,
                Ok(_) => {}
                Err(_) => return None,
            }
        }
        fed = buf.len();
        match acceptor.accept() {
            Ok(None) => continue,
            Ok(Some(accepted)) => {
                let hello = accepted.client_hello();
                let sni = hello.server_name().map(str::to_string);
                let alpn = hello
                    .alpn()
                    .map(|a| a.map(<[u8]>::to_vec).collect())
                    .unwrap_or_default();
                return Some((buf, sni, alpn));
            }
            Err(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_go_from_specific_to_wildcards() {
        assert_eq!(
            sni_candidates("WWW.Example.com."),
            vec!["www.example.com", "*.example.com", "*.com"]
        );
        assert_eq!(sni_candidates("localhost"), vec!["localhost"]);
    }
}
