//! The desired load balancer: what translation produces and what `sync` makes real.
//!
//! This is the seam between the pure `translate` module and the I/O in `sync`/`compute`.
//! Every resource is a `google_cloud_compute_v1::model` value with only the fields we manage
//! set (server-set fields such as `id`, `selfLink`, `fingerprint`, `creationTimestamp` and
//! `kind` stay `None`). Fields we manage are always set explicitly, defaults included, so that
//! removing a setting (for example a BackendConfig field) returns the cloud resource to the
//! default instead of leaving the old value behind (ingress-gce issues #1706 and #2209 in
//! `reference/ingress-gce-inventory.md` section 10).
//!
//! References between resources use the project-qualified path form
//! `projects/{project}/global/backendServices/{name}` (or `.../zones/{zone}/...`); `sync`
//! compares them with what the API returns after normalising both sides to that form.
//!
//! Maps are `BTreeMap`s keyed by resource name so that the same cluster snapshot always gives
//! byte-identical desired state (see DESIGN.md, "Data flow").

use std::collections::{BTreeMap, BTreeSet};

use google_cloud_compute_v1::model;

/// Kubernetes identity of one backend: a Service port that an Ingress routes to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServicePortKey {
    /// Namespace of the Service.
    pub namespace: String,
    /// Name of the Service.
    pub service: String,
    /// The Service port number (`spec.ports[].port`), resolved from a port name if the Ingress
    /// named it.
    pub port: i32,
}

/// One endpoint of a `GCE_VM_IP_PORT` NEG: a Pod IP and target port.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NegEndpoint {
    /// Pod IP address.
    pub ip_address: String,
    /// Container (target) port.
    pub port: i32,
    /// The node (VM instance) the Pod runs on, from `spec.nodeName`.
    pub instance: Option<String>,
}

/// A zonal network endpoint group and the endpoints it must hold.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredNeg {
    /// Zone of the NEG, e.g. `us-central1-a`.
    pub zone: String,
    /// The NEG resource (`networkEndpointType: GCE_VM_IP_PORT`, network, description).
    pub neg: model::NetworkEndpointGroup,
    /// Endpoints to attach: ready Pods, plus Pods with the
    /// `cloud.google.com/load-balancer-neg-ready` readiness gate whose containers are ready and
    /// that are not terminating, whatever the gate's state ([`super::endpoints`]).
    pub endpoints: BTreeSet<NegEndpoint>,
}

/// Everything that serves one Service port: shared by every Ingress that routes to it.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredBackend {
    /// Which Service port this is.
    pub key: ServicePortKey,
    /// Health check, named like the backend service (inventory section 4).
    pub health_check: model::HealthCheck,
    /// Backend service with its NEG backends (balancingMode RATE, maxRatePerEndpoint, capacityScaler).
    /// `securityPolicy: None` means the backend service must have no policy (BackendConfig
    /// `securityPolicy` absent or `name: ""`); `iap: None` means IAP is not managed. `iap` may
    /// hold an OAuth client secret: never log it.
    pub backend_service: model::BackendService,
    /// One NEG per zone.
    pub negs: Vec<DesiredNeg>,
    /// Target ports the L7 firewall rule must open for this backend (NEG target ports and a
    /// BackendConfig `healthCheck.port`).
    pub firewall_ports: BTreeSet<u16>,
    /// Warnings about this backend that do not stop it (an endpoint of unknown zone, ...);
    /// reported on every Ingress that uses it.
    pub findings: Vec<Finding>,
}

/// The frontend of one Ingress: URL maps, proxies, forwarding rules and certificates.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct DesiredFrontend {
    /// The URL map (`k8s2-um-...`).
    pub url_map: Option<model::UrlMap>,
    /// The HTTP-to-HTTPS redirect URL map (`k8s2-rm-...`), when a FrontendConfig asks for it.
    pub redirect_url_map: Option<model::UrlMap>,
    /// Target HTTP proxy (`k8s2-tp-...`); `None` when `kubernetes.io/ingress.allow-http: "false"`.
    pub target_http_proxy: Option<model::TargetHttpProxy>,
    /// Global forwarding rule on port 80 (`k8s2-fr-...`). `IPAddress` is unset: the API
    /// allocates one, or `sync` fills in the static address / the address already in use so
    /// the IP stays stable across updates.
    pub http_forwarding_rule: Option<model::ForwardingRule>,
    /// Self-managed certificates made from `spec.tls` Secrets (`k8s2-cr-...`, named by the
    /// certificate's hash: a rotated Secret gives a new name, so create the new one, swap it on
    /// the proxy, then delete the old). They hold the private key: never log them.
    pub ssl_certificates: Vec<model::SslCertificate>,
    /// Target HTTPS proxy (`k8s2-ts-...`), when the Ingress has any certificate.
    /// `sslCertificates` are in priority order (the first is the default certificate).
    /// `sslPolicy`: `None` = leave the proxy's policy alone (FrontendConfig has no
    /// `sslPolicy`), `Some("")` = remove the policy, `Some(path)` = set it.
    pub target_https_proxy: Option<model::TargetHttpsProxy>,
    /// Global forwarding rule on port 443 (`k8s2-fs-...`). `IPAddress` is unset: it must share
    /// the HTTP rule's address (or the static address), which `sync` fills in.
    pub https_forwarding_rule: Option<model::ForwardingRule>,
    /// Name of a reserved address to use: a global one
    /// (`kubernetes.io/ingress.global-static-ip-name`), or for a regional load balancer
    /// ([`DesiredIngress::region`]) a regional one of that region
    /// (`kubernetes.io/ingress.regional-static-ip-name`).
    pub static_ip_name: Option<String>,
}

/// A problem found while translating, reported as a Kubernetes Event on the Ingress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// `true` for Warning Events; `false` for Normal.
    pub warning: bool,
    /// Event reason users know from GKE: `Translate`, `Sync`, ...
    pub reason: String,
    /// Names the object, the field and the fix.
    pub message: String,
}

/// The whole desired load balancer for one Ingress.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct DesiredIngress {
    /// Backends this Ingress routes to (shared resources), keyed by backend service name.
    pub backends: BTreeMap<String, DesiredBackend>,
    /// Per-Ingress frontend resources.
    pub frontend: DesiredFrontend,
    /// The Cloud Armor policy of `ncp/whitelist-source-range` that some of `backends` name in
    /// `securityPolicy` (see `translate::source_ranges`); content-addressed, so never updated.
    pub security_policy: Option<model::SecurityPolicy>,
    /// Warnings that did not stop translation (path collisions, missing TLS Secret...).
    pub findings: Vec<Finding>,
    /// `None`: the global external load balancer. `Some(region)`: a regional Application Load
    /// Balancer in that region (`translate::regional`), internal or regional external as the
    /// backend services' and forwarding rules' `loadBalancingScheme` says (INTERNAL_MANAGED /
    /// EXTERNAL_MANAGED): health checks, backend services, URL map, proxies and certificates
    /// are regional resources.
    pub region: Option<String>,
}

/// Serialises a Compute model value (or `Option` of one; `None` gives `null`).
fn to_json_value<T: serde::Serialize>(x: &T) -> serde_json::Value {
    serde_json::to_value(x).unwrap_or(serde_json::Value::Null)
}

impl DesiredIngress {
    /// The whole desired state as JSON, in a stable shape for golden tests and debug logs:
    /// `{"backends": {name: {key, healthCheck, backendService, negs: [{zone, neg, endpoints}],
    /// firewallPorts}}, "frontend": {...}, "findings": [...]}`. Private keys of self-managed
    /// certificates and IAP OAuth client secrets are replaced by `"<redacted>"`.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::{json, Value};
        let backends: serde_json::Map<String, Value> = self
            .backends
            .iter()
            .map(|(name, b)| {
                let negs: Vec<Value> = b
                    .negs
                    .iter()
                    .map(|n| {
                        let endpoints: Vec<Value> = n
                            .endpoints
                            .iter()
                            .map(|e| json!({"ipAddress": e.ip_address, "port": e.port, "instance": e.instance}))
                            .collect();
                        json!({"zone": n.zone, "neg": to_json_value(&n.neg), "endpoints": endpoints})
                    })
                    .collect();
                let mut backend_service = b.backend_service.clone();
                if let Some(iap) = backend_service.iap.as_mut().filter(|i| i.oauth_2_client_secret.is_some()) {
                    iap.oauth_2_client_secret = Some("<redacted>".to_owned());
                }
                let body = json!({
                    "key": {"namespace": b.key.namespace, "service": b.key.service, "port": b.key.port},
                    "healthCheck": to_json_value(&b.health_check),
                    "backendService": to_json_value(&backend_service),
                    "negs": negs,
                    "firewallPorts": b.firewall_ports,
                });
                (name.clone(), body)
            })
            .collect();
        let f = &self.frontend;
        let certs: Vec<Value> = f
            .ssl_certificates
            .iter()
            .map(|c| {
                let mut c = c.clone();
                if c.private_key.is_some() {
                    c.private_key = Some("<redacted>".to_owned());
                }
                to_json_value(&c)
            })
            .collect();
        let frontend = json!({
            "urlMap": to_json_value(&f.url_map),
            "redirectUrlMap": to_json_value(&f.redirect_url_map),
            "targetHttpProxy": to_json_value(&f.target_http_proxy),
            "httpForwardingRule": to_json_value(&f.http_forwarding_rule),
            "sslCertificates": certs,
            "targetHttpsProxy": to_json_value(&f.target_https_proxy),
            "httpsForwardingRule": to_json_value(&f.https_forwarding_rule),
            "staticIpName": f.static_ip_name,
        });
        let findings: Vec<Value> = self
            .findings
            .iter()
            .map(|x| json!({"warning": x.warning, "reason": x.reason, "message": x.message}))
            .collect();
        let mut out = json!({"backends": backends, "frontend": frontend, "findings": findings});
        if let Some(policy) = &self.security_policy {
            out["securityPolicy"] = to_json_value(policy);
        }
        if let Some(region) = &self.region {
            out["region"] = json!(region);
        }
        out
    }
}
