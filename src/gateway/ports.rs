//! The ports of one Gateway: each port's serving listeners become one global forwarding rule
//! (EXTERNAL_MANAGED) on the Gateway's address and its target:
//! - HTTP: target HTTP proxy + URL map ([`super::http_routes`]);
//! - HTTPS: target HTTPS proxy + URL map + the listeners' certificates (the first is the default
//!   certificate; the proxy picks one by SNI);
//! - TLS Passthrough: target TCP proxy whose `service` has no backends, plus one Network
//!   Services tlsRoute per attached TLSRoute: `targetProxies` the proxy, one rule matching the
//!   route's effective hostnames as `sniHost`, destinations its backends' TCP backend services
//!   with the backendRef weights. A hostname claimed by an older route is left out of newer
//!   routes (Gateway API conflict resolution: the oldest route wins);
//! - TLS Terminate: target SSL proxy with the listeners' certificates whose `service` is the TCP
//!   backend service of the attached TLSRoute. A target SSL proxy has one backend service, so a
//!   Terminate port serves one TLSRoute with one backendRef; other routes on it are
//!   `Accepted=False, UnsupportedValue`.

use std::collections::{BTreeMap, BTreeSet};

use google_cloud_compute_v1::model;
use serde_json::{json, Value};

use super::attach::AttachedRoute;
use super::backend_refs::{no_match_backend, BackendSet};
use super::conditions::{reasons, types, Cond};
use super::desired::{DesiredPort, DesiredTlsRoute, PortTarget};
use super::http_routes::{url_map, HostRoute};
use super::inputs::{GatewayInputs, RouteKind};
use super::listeners::{ListenerPlan, Mode};
use super::namer::GatewayNamer;
use crate::translate::service_ports::{resolve, PortRef};
use crate::translate::{ObjectKey, TranslateConfig};

/// What [`build`] produces.
#[derive(Debug, Default)]
pub struct Built {
    /// Ports.
    pub ports: BTreeMap<u16, DesiredPort>,
    /// Self-managed certificates.
    pub ssl_certificates: Vec<model::SslCertificate>,
    /// tlsRoutes.
    pub tls_routes: Vec<DesiredTlsRoute>,
    /// `Accepted` conditions replacing a route parent's (route, parentRef as written).
    pub route_overrides: Vec<((RouteKind, ObjectKey), (Value, Cond))>,
    /// Why the Gateway cannot be programmed, if something it needs is missing.
    pub not_programmable: Option<Cond>,
}

fn description(gw: &ObjectKey) -> String {
    json!({"gateway.networking.k8s.io/gateway": gw.to_string()}).to_string()
}

fn from_json<T: serde::de::DeserializeOwned + Default>(v: Value) -> T {
    serde_json::from_value(v).unwrap_or_else(|e| {
        tracing::error!(error = %e, "a translated resource does not fit the client's model; this is a bug");
        T::default()
    })
}

/// Builds the ports (see the module docs). `plans` are the Gateway's listeners, `routes` the
/// routes attached to them; backends are added to `set`.
pub fn build(
    inputs: &GatewayInputs,
    config: &TranslateConfig,
    gw: &ObjectKey,
    namer: &GatewayNamer,
    plans: &mut [ListenerPlan],
    routes: &[AttachedRoute],
    set: &mut BackendSet,
) -> Built {
    let mut out = Built::default();
    let mut by_port: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
    for (i, l) in plans.iter().enumerate() {
        if l.serves {
            by_port.entry(l.port).or_default().push(i);
        }
    }
    let desc = description(gw);
    let mut certs_seen = BTreeSet::new();
    for (port, idx) in by_port {
        let Some(mode) = plans[idx[0]].mode else {
            continue;
        };
        let on_port: Vec<&AttachedRoute> = routes
            .iter()
            .filter(|r| idx.contains(&r.attachment.listener))
            .collect();
        let mut cert_refs = Vec::new();
        if matches!(mode, Mode::Https | Mode::TlsTerminate) {
            for i in &idx {
                for c in &plans[*i].certificates {
                    let name = namer.ssl_certificate(c.cert_pem.as_bytes());
                    let r = config.global_ref("sslCertificates", &name);
                    if !cert_refs.contains(&r) {
                        cert_refs.push(r);
                    }
                    if certs_seen.insert(name.clone()) {
                        out.ssl_certificates.push(from_json(json!({
                            "name": name,
                            "description": desc,
                            "type": "SELF_MANAGED",
                            "certificate": c.cert_pem,
                            "privateKey": c.key_pem,
                        })));
                    }
                }
            }
        }
        let (target, target_ref) = match mode {
            Mode::Http | Mode::Https => {
                let Some(default_ref) = default_backend(inputs, config, set) else {
                    out.not_programmable = Some(Cond::no(
                        types::PROGRAMMED,
                        reasons::INVALID,
                        format!(
                            "the default backend Service {} (--default-backend-service) is missing; requests no route matches must get its 404",
                            config.default_backend.as_ref().map(|(n, s, p)| format!("{n}/{s}:{p}")).unwrap_or_default()
                        ),
                    ));
                    continue;
                };
                let mut hosts: BTreeMap<String, Vec<HostRoute<'_>>> = BTreeMap::new();
                let mut seen = BTreeSet::new();
                for r in on_port.iter().filter(|r| r.info.kind == RouteKind::Http) {
                    let Some(route) = inputs.http_routes.get(&r.info.key) else {
                        continue;
                    };
                    let names = if r.attachment.hostnames.is_empty() {
                        vec![String::new()]
                    } else {
                        r.attachment.hostnames.clone()
                    };
                    for h in names {
                        if seen.insert((h.clone(), r.info.key.clone())) {
                            hosts.entry(h).or_default().push(HostRoute {
                                route,
                                info: &r.info,
                                rules: &r.rules,
                            });
                        }
                    }
                }
                let um_name = namer.url_map(port);
                let um: model::UrlMap = from_json(url_map(&um_name, &desc, &hosts, &default_ref));
                let um_ref = config.global_ref("urlMaps", &um_name);
                if mode == Mode::Http {
                    let name = namer.target_http_proxy(port);
                    let proxy =
                        from_json(json!({"name": name, "description": desc, "urlMap": um_ref}));
                    (
                        PortTarget::Http { url_map: um, proxy },
                        config.global_ref("targetHttpProxies", &name),
                    )
                } else {
                    let name = namer.target_https_proxy(port);
                    let proxy = from_json(
                        json!({"name": name, "description": desc, "urlMap": um_ref, "sslCertificates": cert_refs}),
                    );
                    (
                        PortTarget::Https { url_map: um, proxy },
                        config.global_ref("targetHttpsProxies", &name),
                    )
                }
            }
            Mode::TlsPassthrough => {
                let nm = no_match_backend(&namer.no_match_backend(port));
                let name = namer.target_tcp_proxy(port);
                let proxy_ref = config.global_ref("targetTcpProxies", &name);
                let proxy = from_json(json!({
                    "name": name,
                    "description": desc,
                    "service": config.global_ref("backendServices", nm.name.as_deref().unwrap_or_default()),
                    "proxyHeader": "NONE",
                }));
                passthrough_routes(
                    config,
                    namer,
                    port,
                    &proxy_ref,
                    &on_port,
                    &mut out.tls_routes,
                );
                (
                    PortTarget::Passthrough {
                        proxy,
                        no_match: nm,
                    },
                    proxy_ref,
                )
            }
            Mode::TlsTerminate => {
                let name = namer.target_ssl_proxy(port);
                let mut chosen = None;
                let mut done: BTreeSet<ObjectKey> = BTreeSet::new();
                for r in on_port.iter().filter(|r| r.info.kind == RouteKind::Tls) {
                    if !done.insert(r.info.key.clone()) {
                        continue;
                    }
                    let rule = r.rules.first().cloned().unwrap_or_default();
                    let valid: Vec<_> = rule.backends.iter().filter(|b| b.weight > 0).collect();
                    let why = if chosen.is_some() {
                        Some(format!("a TLS Terminate listener is a Google Cloud target SSL proxy with one backend service; TLSRoute {} already serves port {port}", chosen.as_ref().map(|(k, _): &(ObjectKey, String)| k.to_string()).unwrap_or_default()))
                    } else if valid.len() > 1 || rule.invalid_weight > 0 && !valid.is_empty() {
                        Some("a TLS Terminate listener is a Google Cloud target SSL proxy with one backend service: use one backendRef".to_owned())
                    } else {
                        None
                    };
                    match (why, valid.first()) {
                        (Some(why), _) => out.route_overrides.push((
                            (RouteKind::Tls, r.info.key.clone()),
                            (
                                r.parent_ref.clone(),
                                Cond::no(types::ACCEPTED, reasons::UNSUPPORTED_VALUE, why),
                            ),
                        )),
                        (None, Some(b)) => {
                            chosen = Some((r.info.key.clone(), b.service_ref.clone()))
                        }
                        (None, None) => {}
                    }
                }
                let (service, no_match) = match chosen {
                    Some((_, s)) => (s, None),
                    None => {
                        let nm = no_match_backend(&namer.no_match_backend(port));
                        (
                            config.global_ref(
                                "backendServices",
                                nm.name.as_deref().unwrap_or_default(),
                            ),
                            Some(nm),
                        )
                    }
                };
                let proxy = from_json(json!({
                    "name": name,
                    "description": desc,
                    "service": service,
                    "sslCertificates": cert_refs,
                    "proxyHeader": "NONE",
                }));
                (
                    PortTarget::Terminate { proxy, no_match },
                    config.global_ref("targetSslProxies", &name),
                )
            }
        };
        let forwarding_rule = from_json(json!({
            "name": namer.forwarding_rule(port),
            "description": desc,
            "IPProtocol": "TCP",
            "portRange": format!("{port}-{port}"),
            "target": target_ref,
            "loadBalancingScheme": "EXTERNAL_MANAGED",
            "networkTier": "PREMIUM",
        }));
        out.ports.insert(
            port,
            DesiredPort {
                target,
                forwarding_rule,
            },
        );
    }
    out
}

/// The system default backend (404 for what no rule matches) as an HTTP backend.
fn default_backend(
    inputs: &GatewayInputs,
    config: &TranslateConfig,
    set: &mut BackendSet,
) -> Option<String> {
    let (ns, svc, port) = config.default_backend.as_ref()?;
    let resolved = resolve(
        &inputs.cluster,
        &ObjectKey::new(ns.clone(), svc.clone()),
        &ObjectKey::new(ns.clone(), svc.clone()),
        &PortRef::parse(port),
        "--default-backend-service",
        "--default-backend-port",
    )
    .ok()?;
    set.http(inputs, config, &resolved).ok()
}

/// Network Services form of a Compute reference: `projects/p/locations/global/{coll}/{name}`.
fn ns_ref(compute_ref: &str) -> String {
    compute_ref.replacen("/global/", "/locations/global/", 1)
}

fn passthrough_routes(
    config: &TranslateConfig,
    namer: &GatewayNamer,
    port: u16,
    proxy_ref: &str,
    on_port: &[&AttachedRoute],
    out: &mut Vec<DesiredTlsRoute>,
) {
    // Routes in precedence order (they arrive oldest first); hostnames per route.
    let mut order: Vec<ObjectKey> = Vec::new();
    let mut hosts: BTreeMap<ObjectKey, (BTreeSet<String>, &AttachedRoute)> = BTreeMap::new();
    for r in on_port.iter().filter(|r| r.info.kind == RouteKind::Tls) {
        let e = hosts.entry(r.info.key.clone()).or_insert_with(|| {
            order.push(r.info.key.clone());
            (BTreeSet::new(), r)
        });
        e.0.extend(r.attachment.hostnames.iter().cloned());
    }
    let mut claimed = BTreeSet::new();
    for key in order {
        let (names, r) = &hosts[&key];
        let mine: Vec<String> = names
            .iter()
            .filter(|h| claimed.insert((*h).clone()))
            .cloned()
            .collect();
        let rule = r.rules.first().cloned().unwrap_or_default();
        let destinations: Vec<Value> = rule
            .backends
            .iter()
            .filter(|b| b.weight > 0)
            .map(|b| json!({"serviceName": ns_ref(&b.service_ref), "weight": b.weight}))
            .collect();
        if mine.is_empty() || destinations.is_empty() {
            continue;
        }
        let name = namer.tls_route(port, &key.namespace, &key.name);
        let _ = config;
        let route = from_json(json!({
            "description": json!({"gateway.networking.k8s.io/tlsroute": key.to_string(), "port": port}).to_string(),
            "targetProxies": [ns_ref(proxy_ref)],
            "rules": [{
                "matches": [{"sniHost": mine}],
                "action": {"destinations": destinations},
            }],
        }));
        out.push(DesiredTlsRoute { name, route });
    }
}
