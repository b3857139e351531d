//! The scenarios of the IAM permission report (issue 43, tests/iam_permission_report_e2e.rs):
//! each one a kind of load balancer the operator builds, written so that every run is in a
//! namespace of its own (fresh names for the Ingress or Gateway, its Services, NEGs and backend
//! services, so an earlier run's refusals and backoff do not matter), with what "it serves"
//! and "it is collected" mean for it; its update phase, what is changed once it serves and
//! how the change is seen served, is in tests/support/iam_updates.rs.
//!
//! What the stack holds before any scenario (made as the local admin, not the operator): the
//! CRDs, GKE's default backend, the cluster's subnet and the proxy-only subnet of
//! [`REGION`], a pre-shared certificate, an SSL policy, a Cloud Armor policy, and reserved
//! global and regional addresses ([`prepare`]).

use anyhow::{bail, Result};
use serde_json::{json, Value};

use crate::support::compute::GLOBAL;
use crate::support::regional::REGION;
use crate::support::tls::self_signed;
use crate::support::{repo_root, wait_for, System, DEADLINE, PROJECT, ZONE};

/// One scenario: a kind of load balancer the operator builds from one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// An external Ingress over one Service (HTTP), with `ncp/whitelist-source-range` (a Cloud
    /// Armor policy the operator creates).
    Http,
    /// An external Ingress with a `spec.tls` Secret and a pre-shared certificate (HTTPS).
    Https,
    /// A FrontendConfig (sslPolicy, redirectToHttps) and a BackendConfig (health check, Cloud
    /// Armor securityPolicy, timeoutSec, CDN, connection draining, session affinity).
    Features,
    /// An external Ingress on a reserved global address (`global-static-ip-name`); deleted
    /// while the operator is stopped and collected by the next process
    /// ([`Scenario::deleted_while_stopped`]).
    StaticIp,
    /// Class `gce-internal` (regional internal Application Load Balancer), HTTPS only, with a
    /// `spec.tls` Secret.
    Internal,
    /// Class `gce-regional-external` on a reserved regional address, with a `spec.tls` Secret.
    RegionalExternal,
    /// A Gateway with HTTP, HTTPS, TLS Passthrough and TLS Terminate listeners (`--gateway-api`).
    Gateway,
}

/// Every scenario, in the order the report tries them.
pub const ALL: &[Scenario] = &[
    Scenario::Http,
    Scenario::Https,
    Scenario::Features,
    Scenario::StaticIp,
    Scenario::Internal,
    Scenario::RegionalExternal,
    Scenario::Gateway,
];

/// The pre-shared certificate, SSL policy, Cloud Armor policy and addresses of [`prepare`].
pub const PRE_SHARED: &str = "iam-pre-shared";
/// See [`PRE_SHARED`].
pub const SSL_POLICY: &str = "iam-ssl-policy";
/// See [`PRE_SHARED`].
pub const ARMOR: &str = "iam-armor";
/// See [`PRE_SHARED`].
pub const STATIC_IP: &str = "iam-static-ip";
/// See [`PRE_SHARED`].
pub const REGIONAL_IP: &str = "iam-regional-ip";

/// The Host every scenario's requests carry.
pub const HOST: &str = "iam.example";

/// What the local admin makes once per stack (see the module docs); the Gateway API CRDs and
/// GatewayClass too when `gateway`.
pub fn prepare(sys: &System, gateway: bool) -> Result<()> {
    sys.apply_crds()?;
    sys.apply_basics()?;
    if gateway {
        let root = repo_root();
        sys.kubectl_ok(&[
            "apply",
            "-k",
            &root.join("crds/gateway-api").to_string_lossy(),
        ])?;
        wait_for("the Gateway API kinds", DEADLINE, || {
            sys.kubectl_ok(&["get", "gatewayclasses,gateways,httproutes,tlsroutes", "-A"])
                .map(Some)
        })?;
        sys.apply_path(&root.join("deploy/gateway/gatewayclass.yaml"))?;
        sys.apply_path(&root.join("deploy/gateway/rbac.yaml"))?;
    }
    let p = format!("compute/v1/projects/{PROJECT}");
    let r = format!("{p}/regions/{REGION}");
    let (crt, key, _) = self_signed("pre.iam.example")?;
    for (path, body) in [
        (
            format!("{r}/subnetworks"),
            json!({"name": "nodes", "network": "global/networks/default", "ipCidrRange": "10.1.2.0/24"}),
        ),
        (
            format!("{r}/subnetworks"),
            json!({"name": "proxy-only", "network": "global/networks/default",
                "ipCidrRange": "10.129.0.0/23", "purpose": "REGIONAL_MANAGED_PROXY", "role": "ACTIVE"}),
        ),
        (
            format!("{p}/global/sslCertificates"),
            json!({"name": PRE_SHARED, "certificate": crt, "privateKey": key}),
        ),
        (
            format!("{p}/global/sslPolicies"),
            json!({"name": SSL_POLICY, "profile": "MODERN", "minTlsVersion": "TLS_1_2"}),
        ),
        (
            format!("{p}/global/securityPolicies"),
            json!({"name": ARMOR}),
        ),
        (format!("{p}/global/addresses"), json!({"name": STATIC_IP})),
        (
            format!("{r}/addresses"),
            json!({"name": REGIONAL_IP, "networkTier": "PREMIUM"}),
        ),
    ] {
        sys.compute_post(&path, &body)?;
    }
    Ok(())
}

/// A Service `name` on port 80 with one echo Pod (HTTP on 8080, or TLS with `tls`).
pub fn app(ns: &str, name: &str, tls: bool) -> String {
    let tls_ann = if tls {
        ", local.gclb-operator.dev/tls-ports: '8080'"
    } else {
        ""
    };
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  type: NodePort\n  selector: {{app: {name}}}\n  ports:\n  - {{name: http, protocol: TCP, port: 80, targetPort: 8080}}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}-1\n  namespace: {ns}\n  labels: {{app: {name}}}\n  annotations: {{local.gclb-operator.dev/run: echo{tls_ann}}}\nspec:\n  containers:\n  - name: echo\n    image: registry.k8s.io/e2e-test-images/agnhost:2.39\n    ports:\n    - {{name: http, containerPort: 8080}}\n---\n"
    )
}

/// A `kubernetes.io/tls` Secret `name` in `ns` holding a fresh self-signed certificate for
/// `host`, as YAML ending with `---`.
pub fn tls_secret(ns: &str, name: &str, host: &str) -> Result<String> {
    use base64::Engine as _;
    let (crt, key, _) = self_signed(host)?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    Ok(format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {ns}}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n---\n",
        b64(&crt),
        b64(&key)
    ))
}

/// An Ingress `web` in `ns` to Service `web:80` for [`HOST`], with `annotations` and extra
/// `spec` lines (indented by two spaces).
fn ingress(ns: &str, annotations: &[(&str, &str)], spec: &str) -> String {
    let mut ann = String::from("  annotations:\n");
    for (k, v) in annotations {
        ann.push_str(&format!("    {k}: '{v}'\n"));
    }
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web\n  namespace: {ns}\n{ann}spec:\n{spec}  rules:\n  - host: {HOST}\n    http:\n      paths:\n      - {{path: /, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}\n---\n"
    )
}

const GATEWAY_CLASS: &str = "gclb-l7-global-external-managed";

impl Scenario {
    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Http => "http",
            Scenario::Https => "https",
            Scenario::Features => "features",
            Scenario::StaticIp => "static-ip",
            Scenario::Internal => "internal",
            Scenario::RegionalExternal => "regional-external",
            Scenario::Gateway => "gateway",
        }
    }

    /// Whether its delete phase runs with the operator stopped: the object deleted then (its
    /// finalizer holds it), collected once a new operator process starts, as after an
    /// upgrade or a crash (garbage collection from a cold cache).
    pub fn deleted_while_stopped(self) -> bool {
        self == Scenario::StaticIp
    }

    /// The kind of its object (`Ingress` or `Gateway`; named `web` in the run's namespace).
    pub fn kind(self) -> &'static str {
        match self {
            Scenario::Gateway => "Gateway",
            _ => "Ingress",
        }
    }

    /// Everything of one run in namespace `ns`: the namespace, Services and Pods, Secrets,
    /// configs, and the Ingress or Gateway with its routes.
    pub fn manifest(self, ns: &str) -> Result<String> {
        let mut y = format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n---\n");
        y += &app(ns, "web", false);
        let tls = |secret: &str| format!("  tls:\n  - {{hosts: [{HOST}], secretName: {secret}}}\n");
        match self {
            Scenario::Http => {
                y += &ingress(ns, &[("ncp/whitelist-source-range", "127.0.0.0/8")], "");
            }
            Scenario::Https => {
                y += &tls_secret(ns, "web-tls", HOST)?;
                y += &ingress(
                    ns,
                    &[("ingress.gcp.kubernetes.io/pre-shared-cert", PRE_SHARED)],
                    &tls("web-tls"),
                );
            }
            Scenario::Features => {
                y += &tls_secret(ns, "web-tls", HOST)?;
                y += &format!(
                    "apiVersion: networking.gke.io/v1beta1\nkind: FrontendConfig\nmetadata: {{name: fc, namespace: {ns}}}\nspec:\n  sslPolicy: {SSL_POLICY}\n  redirectToHttps: {{enabled: true}}\n---\n\
                     apiVersion: cloud.google.com/v1\nkind: BackendConfig\nmetadata: {{name: bc, namespace: {ns}}}\nspec:\n  timeoutSec: 40\n  healthCheck: {{checkIntervalSec: 5, requestPath: /, type: HTTP}}\n  securityPolicy: {{name: {ARMOR}}}\n  cdn: {{enabled: true}}\n  connectionDraining: {{drainingTimeoutSec: 10}}\n  sessionAffinity: {{affinityType: CLIENT_IP}}\n---\n"
                );
                y = y.replace(
                    "metadata: {name: web, namespace",
                    "metadata: {annotations: {cloud.google.com/backend-config: '{\"default\": \"bc\"}'}, name: web, namespace",
                );
                y += &ingress(
                    ns,
                    &[("networking.gke.io/v1beta1.FrontendConfig", "fc")],
                    &tls("web-tls"),
                );
            }
            Scenario::StaticIp => {
                y += &ingress(
                    ns,
                    &[("kubernetes.io/ingress.global-static-ip-name", STATIC_IP)],
                    "",
                );
            }
            Scenario::Internal => {
                y += &tls_secret(ns, "web-tls", HOST)?;
                y += &ingress(
                    ns,
                    // HTTP beside HTTPS needs a reserved address on this class.
                    &[
                        ("kubernetes.io/ingress.class", "gce-internal"),
                        ("kubernetes.io/ingress.allow-http", "false"),
                    ],
                    &tls("web-tls"),
                );
            }
            Scenario::RegionalExternal => {
                y += &tls_secret(ns, "web-tls", HOST)?;
                y += &ingress(
                    ns,
                    &[
                        ("kubernetes.io/ingress.class", "gce-regional-external"),
                        ("kubernetes.io/ingress.regional-static-ip-name", REGIONAL_IP),
                    ],
                    &tls("web-tls"),
                );
            }
            Scenario::Gateway => {
                y += &app(ns, "tls-pass", true);
                y += &app(ns, "tls-term", false);
                y += &tls_secret(ns, "web-tls", HOST)?;
                y += &format!(
                    "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  gatewayClassName: {GATEWAY_CLASS}\n  listeners:\n  - {{name: http, protocol: HTTP, port: 80}}\n  - name: https\n    protocol: HTTPS\n    port: 443\n    tls: {{mode: Terminate, certificateRefs: [{{name: web-tls}}]}}\n  - name: pass\n    protocol: TLS\n    port: 8443\n    tls: {{mode: Passthrough}}\n    allowedRoutes: {{kinds: [{{kind: TLSRoute}}]}}\n  - name: term\n    protocol: TLS\n    port: 9443\n    tls: {{mode: Terminate, certificateRefs: [{{name: web-tls}}]}}\n    allowedRoutes: {{kinds: [{{kind: TLSRoute}}]}}\n---\n\
                     apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  parentRefs: [{{name: web, sectionName: http}}, {{name: web, sectionName: https}}]\n  hostnames: [{HOST}]\n  rules:\n  - backendRefs: [{{name: web, port: 80}}]\n---\n\
                     apiVersion: gateway.networking.k8s.io/v1\nkind: TLSRoute\nmetadata: {{name: pass, namespace: {ns}}}\nspec:\n  parentRefs: [{{name: web, sectionName: pass}}]\n  hostnames: [pass.{HOST}]\n  rules:\n  - backendRefs: [{{name: tls-pass, port: 80}}]\n---\n\
                     apiVersion: gateway.networking.k8s.io/v1\nkind: TLSRoute\nmetadata: {{name: term, namespace: {ns}}}\nspec:\n  parentRefs: [{{name: web, sectionName: term}}]\n  hostnames: [term.{HOST}]\n  rules:\n  - backendRefs: [{{name: tls-term, port: 80}}]\n---\n"
                );
            }
        }
        Ok(y)
    }

    /// The address of the run's object, once its status has one.
    pub fn address(self, sys: &System, ns: &str) -> Result<Option<String>> {
        let v = match self {
            Scenario::Gateway => sys.get_json(&["gateway", "-n", ns, "web"])?["status"]
                ["addresses"][0]["value"]
                .clone(),
            _ => sys.get_json(&["ingress", "-n", ns, "web"])?["status"]["loadBalancer"]["ingress"]
                [0]["ip"]
                .clone(),
        };
        Ok(v.as_str().map(str::to_string))
    }

    /// Whether the run in `ns` is built: an address in its status and the emulator listening
    /// there on each port the scenario serves; for the external HTTP scenarios, a request
    /// through port 80 answered 200 by the echo Pod.
    pub fn serves(self, sys: &System, ns: &str) -> Result<bool> {
        let Some(ip) = self.address(sys, ns)? else {
            return Ok(false);
        };
        let ports: &[u16] = match self {
            Scenario::Http | Scenario::StaticIp => &[80],
            Scenario::Internal => &[443],
            Scenario::Gateway => &[80, 443, 8443, 9443],
            _ => &[80, 443],
        };
        for port in ports {
            if sys.listener_for(&ip, *port)?.is_none() {
                return Ok(false);
            }
        }
        if matches!(self, Scenario::Http | Scenario::StaticIp | Scenario::Https) {
            let socket = sys.listener_for(&ip, 80)?.unwrap_or_default();
            return Ok(sys
                .http_get(&socket, HOST, "/")
                .is_ok_and(|(s, body)| s == 200 && body.contains("web-1")));
        }
        if self == Scenario::Gateway {
            let v = sys.get_json(&["gateway", "-n", ns, "web"])?;
            return Ok(v["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Programmed" && c["status"] == "True"));
        }
        Ok(true)
    }

    /// Deletes the run's object (and the Gateway's routes), not waiting.
    pub fn delete(self, sys: &System, ns: &str) -> Result<()> {
        let what: &[&str] = match self {
            Scenario::Gateway => &[
                "gateway/web",
                "httproute/web",
                "tlsroute/pass",
                "tlsroute/term",
            ],
            _ => &["ingress/web"],
        };
        let mut args = vec!["delete", "-n", ns, "--wait=false", "--ignore-not-found"];
        args.extend_from_slice(what);
        sys.kubectl_ok(&args).map(drop)
    }

    /// Whether the run's object is gone.
    pub fn object_gone(self, sys: &System, ns: &str) -> Result<bool> {
        let kind = self.kind().to_lowercase();
        let out = sys.kubectl_ok(&["get", &kind, "-n", ns, "-o", "name"])?;
        Ok(!out.contains("/web"))
    }

    /// Changes an annotation of the run's object, so a reconcile backed off after a refusal
    /// runs now (an Ingress's finalizer holds it while it is being deleted).
    pub fn touch(self, sys: &System, ns: &str, n: u32) -> Result<()> {
        let kind = self.kind().to_lowercase();
        let out = sys.kubectl(&[
            "annotate",
            "-n",
            ns,
            &kind,
            "web",
            "--overwrite",
            &format!("iam-report/touch={n}"),
        ])?;
        if !out.status.success() && !String::from_utf8_lossy(&out.stderr).contains("NotFound") {
            bail!("touch: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(())
    }

    /// How the operator told the user, on the run's object, that `permission` was refused, if
    /// it did: a Warning `PermissionDenied` Event naming it (an Ingress); for the firewall
    /// rule, which a security admin may own (Shared VPC), the `XPN` Event with the gcloud
    /// command instead (docs/operator.md, "Firewall on a Shared VPC"); a Gateway, which has no
    /// Events, in its `Programmed` condition's message.
    pub fn told(self, sys: &System, ns: &str, permission: &str) -> Result<Option<&'static str>> {
        let needle = format!("'{permission}'");
        if self == Scenario::Gateway {
            let v: Value = match sys.get_json(&["gateway", "-n", ns, "web"]) {
                Ok(v) => v,
                Err(_) => return Ok(None),
            };
            let named = v["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["message"].as_str().is_some_and(|m| m.contains(&needle)));
            return Ok(named.then_some("Programmed condition names it"));
        }
        let events = sys.events_for(ns, "Ingress", "web")?;
        if events
            .iter()
            .any(|e| e.starts_with("Warning PermissionDenied") && e.contains(&needle))
        {
            return Ok(Some("PermissionDenied Event names it"));
        }
        let firewall = permission.starts_with("compute.firewalls.")
            || permission == "compute.networks.updatePolicy";
        let xpn = events
            .iter()
            .any(|e| e.contains(" XPN: ") && e.contains("gcloud compute firewall-rules"));
        Ok((firewall && xpn).then_some("XPN Event with the firewall command"))
    }
}

/// Deletes `left` (labels of [`System::project_resources`]) as the local admin, users before what they
/// use (in [`GLOBAL`]'s order, for the global and regional collections alike; NEGs last), each
/// tried once.
pub fn admin_delete(sys: &System, left: &[String]) -> Result<()> {
    let rank = |r: &String| {
        GLOBAL
            .iter()
            .position(|c| r.contains(&format!("/{c}/")))
            .unwrap_or(GLOBAL.len())
    };
    let mut sorted: Vec<&String> = left.iter().collect();
    sorted.sort_by_key(|r| rank(r));
    for r in sorted {
        let path = if let Some(rest) = r.strip_prefix("regions/") {
            format!("regions/{REGION}/{rest}")
        } else if let Some(rest) = r.strip_prefix("zones/") {
            format!("zones/{ZONE}/{rest}")
        } else {
            r.clone()
        };
        sys.compute_delete(&format!("compute/v1/projects/{PROJECT}/{path}"))?;
    }
    Ok(())
}
