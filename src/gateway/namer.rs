//! Every Compute and Network Services resource name the Gateway controller uses.
//!
//! Scheme (GKE's Gateway controller names its resources `gkegw1-...`; this operator keeps that
//! recognisable prefix and adds the kind, as its Ingress names do):
//! - per-Gateway resources: `gkegw1-<kind>-<uid8>-<ns'>-<name'>-<hash8>[-<port>]`, `hash8` =
//!   `ContentHash("<kubeSystemUID>;<ns>;<name>", 8)`, kinds `ad` (address), `um` (URL map), `tp`
//!   (target HTTP proxy), `ts` (target HTTPS proxy), `tt` (target TCP proxy), `tl` (target SSL
//!   proxy), `fr` (forwarding rule), `nm` (the no-match backend service of a TLS passthrough
//!   port), `tr` (a Network Services tlsRoute, one per attached TLSRoute and port), `cr`
//!   (self-managed certificate, by certificate hash);
//! - per-Service-port backends: `gkegw1-<uid8>-<ns'>-<svc'>-<port>-<hash8>` (HTTP backend service,
//!   its health check and the NEG), `gkegw1t-...` (the TCP backend service and health check of
//!   TLS routes, on the same NEG).
//!
//! Every name is at most 63 characters and matches `[a-z]([-a-z0-9]*[a-z0-9])?` for valid
//! Kubernetes names; the hash of the full values keeps names unique when the readable part is
//! cut. Everything this cluster's Gateway controller owns starts with [`prefix`] or
//! [`backend_prefix`], which is what garbage collection looks for.

use crate::translate::namer::{content_hash, sha256_hex, trim_fields_evenly};

/// Budget of `ns' + name'` in per-Gateway names (room for kind, uid, hash and a port).
const GATEWAY_FIELDS_BUDGET: usize = 26;
/// Budget of `ns' + svc'` in backend names.
const BACKEND_FIELDS_BUDGET: usize = 30;

/// Names of one Gateway's resources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayNamer {
    uid8: String,
    lb: String,
}

impl GatewayNamer {
    /// The namer of Gateway `namespace/name` in the cluster whose kube-system UID is
    /// `kube_system_uid` (8-char form `uid8`).
    pub fn new(uid8: &str, kube_system_uid: &str, namespace: &str, name: &str) -> Self {
        let t = trim_fields_evenly(GATEWAY_FIELDS_BUDGET, &[namespace, name]);
        let hash = content_hash(&format!("{kube_system_uid};{namespace};{name}"), 8);
        Self {
            uid8: uid8.to_owned(),
            lb: format!("{uid8}-{}-{}-{hash}", t[0], t[1]),
        }
    }

    fn kind(&self, kind: &str) -> String {
        format!("gkegw1-{kind}-{}", self.lb)
    }

    /// The reserved global address every forwarding rule of the Gateway uses.
    pub fn address(&self) -> String {
        self.kind("ad")
    }
    /// URL map of an HTTP or HTTPS port.
    pub fn url_map(&self, port: u16) -> String {
        format!("{}-{port}", self.kind("um"))
    }
    /// Target HTTP proxy of a port.
    pub fn target_http_proxy(&self, port: u16) -> String {
        format!("{}-{port}", self.kind("tp"))
    }
    /// Target HTTPS proxy of a port.
    pub fn target_https_proxy(&self, port: u16) -> String {
        format!("{}-{port}", self.kind("ts"))
    }
    /// Target TCP proxy of a TLS passthrough port.
    pub fn target_tcp_proxy(&self, port: u16) -> String {
        format!("{}-{port}", self.kind("tt"))
    }
    /// Target SSL proxy of a TLS terminate port.
    pub fn target_ssl_proxy(&self, port: u16) -> String {
        format!("{}-{port}", self.kind("tl"))
    }
    /// Forwarding rule of a port.
    pub fn forwarding_rule(&self, port: u16) -> String {
        format!("{}-{port}", self.kind("fr"))
    }
    /// The backend service without backends that a passthrough port's target TCP proxy names
    /// as its `service`: connections no TLS route matches find no endpoint and are closed.
    pub fn no_match_backend(&self, port: u16) -> String {
        format!("{}-{port}", self.kind("nm"))
    }
    /// The Network Services tlsRoute of TLSRoute `namespace/name` on `port`.
    pub fn tls_route(&self, port: u16, namespace: &str, name: &str) -> String {
        let h = sha256_hex(
            format!("{};{port};{namespace};{name}", self.lb).as_bytes(),
            12,
        );
        format!("gkegw1-tr-{}-{h}", self.uid8)
    }
    /// The prefix of this Gateway's tlsRoute names is not derivable (they are hashed); the
    /// tlsRoutes of a Gateway carry this label value instead (`gclb-gateway`).
    pub fn label(&self) -> String {
        sha256_hex(self.lb.as_bytes(), 16)
    }
    /// A self-managed certificate of this Gateway, named by the certificate PEM's hash (a
    /// rotated Secret gives a new name: create, swap on the proxy, delete the old).
    pub fn ssl_certificate(&self, cert_pem: &[u8]) -> String {
        format!(
            "gkegw1-cr-{}-{}-{}",
            self.uid8,
            sha256_hex(self.lb.as_bytes(), 8),
            sha256_hex(cert_pem, 16)
        )
    }
}

/// Every per-Gateway Compute name of this cluster starts with `gkegw1-` and holds
/// `-<uid8>-` right after the kind: true for such names.
pub fn is_gateway_resource(uid8: &str, name: &str) -> bool {
    name.strip_prefix("gkegw1-")
        .and_then(|rest| rest.split_once('-'))
        .is_some_and(|(kind, rest)| kind.len() == 2 && rest.starts_with(&format!("{uid8}-")))
}

/// Prefix of this cluster's per-Service-port backend names (HTTP flavour).
pub fn backend_prefix(uid8: &str) -> String {
    format!("gkegw1-{uid8}-")
}

/// Prefix of this cluster's TCP-flavoured backend names.
pub fn tcp_backend_prefix(uid8: &str) -> String {
    format!("gkegw1t-{uid8}-")
}

fn backend_with(flavour: &str, uid8: &str, namespace: &str, service: &str, port: i32) -> String {
    let t = trim_fields_evenly(BACKEND_FIELDS_BUDGET, &[namespace, service]);
    let hash = sha256_hex(format!("{uid8};{namespace};{service};{port}").as_bytes(), 8);
    format!("{flavour}-{uid8}-{}-{}-{port}-{hash}", t[0], t[1])
}

/// HTTP backend service, health check and NEG of Service port `namespace/service:port`.
pub fn backend(uid8: &str, namespace: &str, service: &str, port: i32) -> String {
    backend_with("gkegw1", uid8, namespace, service, port)
}

/// TCP backend service and health check (TLS routes) of a Service port; its NEG is
/// [`backend`]'s.
pub fn tcp_backend(uid8: &str, namespace: &str, service: &str, port: i32) -> String {
    backend_with("gkegw1t", uid8, namespace, service, port)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::namer::is_valid_name;

    #[test]
    fn names_are_valid_short_and_recognised() {
        let long = "a-very-long-namespace-name-that-goes-on-and-on-for-quite-a-while";
        let n = GatewayNamer::new("abcd1234", "uid", long, long);
        for name in [
            n.address(),
            n.url_map(65535),
            n.target_https_proxy(443),
            n.forwarding_rule(65535),
            n.no_match_backend(65535),
            n.tls_route(443, long, long),
            n.ssl_certificate(b"pem"),
            backend("abcd1234", long, long, 65535),
            tcp_backend("abcd1234", long, long, 65535),
        ] {
            assert!(name.len() <= 63 && is_valid_name(&name), "{name}");
        }
        assert!(is_gateway_resource("abcd1234", &n.url_map(80)));
        assert!(is_gateway_resource("abcd1234", &n.tls_route(80, "a", "b")));
        assert!(!is_gateway_resource("zzzz9999", &n.url_map(80)));
        assert!(!is_gateway_resource(
            "abcd1234",
            &backend("abcd1234", "a", "b", 80)
        ));
        assert!(backend("abcd1234", "a", "b", 80).starts_with(&backend_prefix("abcd1234")));
        assert!(tcp_backend("abcd1234", "a", "b", 80).starts_with(&tcp_backend_prefix("abcd1234")));
        // Distinct Gateways that trim alike keep distinct names.
        let a = GatewayNamer::new("abcd1234", "uid", long, &format!("{long}-x"));
        assert_ne!(a.url_map(80), n.url_map(80));
    }
}
