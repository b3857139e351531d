//! The desired load balancer of one Gateway: Compute resources (the same `google_cloud_compute_v1`
//! model values Ingress translation produces, synced by the same `sync/` modules) and Network
//! Services tlsRoutes.

use std::collections::BTreeMap;

use google_cloud_compute_v1::model;
use google_cloud_networkservices_v1::model as ns;

use crate::translate::DesiredBackend;

/// Where the Gateway's IP address comes from (`spec.addresses`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddressPlan {
    /// No address requested: a global address the controller reserves and owns.
    Managed(String),
    /// `type: NamedAddress`: a reserved global address of that name (the user's).
    Named(String),
    /// `type: IPAddress`: a reserved global address holding this IP (the user's).
    Ip(String),
}

/// One port of the Gateway: a forwarding rule and what it targets.
#[derive(Clone, Debug, PartialEq)]
pub enum PortTarget {
    /// HTTP listeners: a target HTTP proxy and its URL map.
    Http {
        /// The URL map.
        url_map: model::UrlMap,
        /// The target HTTP proxy.
        proxy: model::TargetHttpProxy,
    },
    /// HTTPS listeners: a target HTTPS proxy, its URL map and certificates.
    Https {
        /// The URL map.
        url_map: model::UrlMap,
        /// The target HTTPS proxy.
        proxy: model::TargetHttpsProxy,
    },
    /// TLS Passthrough listeners: a target TCP proxy (routes: [`DesiredGateway::tls_routes`]).
    Passthrough {
        /// The target TCP proxy.
        proxy: model::TargetTcpProxy,
        /// Its `service`: a backend service with no backends (no route: connection closed).
        no_match: model::BackendService,
    },
    /// TLS Terminate listeners: a target SSL proxy.
    Terminate {
        /// The target SSL proxy.
        proxy: model::TargetSslProxy,
        /// A backend service with no backends when no route is attached.
        no_match: Option<model::BackendService>,
    },
}

/// One port.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredPort {
    /// The target.
    pub target: PortTarget,
    /// The global forwarding rule (`IPAddress` filled in by sync).
    pub forwarding_rule: model::ForwardingRule,
}

/// A Network Services tlsRoute: its resource id and body.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredTlsRoute {
    /// Resource id (`tlsRouteId`).
    pub name: String,
    /// Body (`name` empty: the API sets it).
    pub route: ns::TlsRoute,
}

/// The whole desired state of one Gateway.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredGateway {
    /// Backends (health check, NEGs, backend service), by backend service name.
    pub backends: BTreeMap<String, DesiredBackend>,
    /// The IP address.
    pub address: AddressPlan,
    /// Self-managed certificates of HTTPS and TLS Terminate listeners (they hold private keys:
    /// never log them).
    pub ssl_certificates: Vec<model::SslCertificate>,
    /// Ports.
    pub ports: BTreeMap<u16, DesiredPort>,
    /// tlsRoutes of the Passthrough ports.
    pub tls_routes: Vec<DesiredTlsRoute>,
}

impl DesiredGateway {
    /// Every Compute resource name this Gateway wants (for garbage collection), by collection
    /// segment (`urlMaps`, `backendServices`, ...), plus `tlsRoutes`.
    pub fn names(&self) -> BTreeMap<&'static str, Vec<String>> {
        let mut out: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
        let mut add = |k: &'static str, n: &Option<String>| {
            if let Some(n) = n {
                out.entry(k).or_default().push(n.clone());
            }
        };
        for b in self.backends.values() {
            add("backendServices", &b.backend_service.name);
            add("healthChecks", &b.health_check.name);
            for n in &b.negs {
                add("networkEndpointGroups", &n.neg.name);
            }
        }
        for c in &self.ssl_certificates {
            add("sslCertificates", &c.name);
        }
        if let AddressPlan::Managed(n) = &self.address {
            add("addresses", &Some(n.clone()));
        }
        for p in self.ports.values() {
            add("forwardingRules", &p.forwarding_rule.name);
            match &p.target {
                PortTarget::Http { url_map, proxy } => {
                    add("urlMaps", &url_map.name);
                    add("targetHttpProxies", &proxy.name);
                }
                PortTarget::Https { url_map, proxy } => {
                    add("urlMaps", &url_map.name);
                    add("targetHttpsProxies", &proxy.name);
                }
                PortTarget::Passthrough { proxy, no_match } => {
                    add("targetTcpProxies", &proxy.name);
                    add("backendServices", &no_match.name);
                }
                PortTarget::Terminate { proxy, no_match } => {
                    add("targetSslProxies", &proxy.name);
                    if let Some(bs) = no_match {
                        add("backendServices", &bs.name);
                    }
                }
            }
        }
        for r in &self.tls_routes {
            add("tlsRoutes", &Some(r.name.clone()));
        }
        out
    }
}
