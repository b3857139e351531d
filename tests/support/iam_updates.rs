//! The UPDATE phase of the IAM permission report's scenarios (tests/support/iam_scenarios.rs,
//! issue 43): once a scenario serves, its objects are changed so that the operator must change
//! what it built in place rather than create or delete it, and the phase is done when traffic
//! (and, where traffic cannot tell, the Compute resources) shows the change:
//!
//! - http: a second host rule (`urlMaps.update`) and the echo Pod replaced (the NEG's
//!   `attachNetworkEndpoints` and `detachNetworkEndpoints`); done when the new host is answered
//!   by the new Pod and the NEG holds one endpoint;
//! - https: the `spec.tls` Secret switched and the pre-shared certificate dropped
//!   (`targetHttpsProxies.setSslCertificates`, the old certificate deleted); done when the new
//!   host's SNI is served the new certificate;
//! - features: BackendConfig changed (timeoutSec, health check interval, Cloud Armor policy
//!   detached with `securityPolicy: {name: ''}` (GKE leaves it attached when the field is
//!   absent), CDN off, connection draining, session affinity, logging, custom request headers:
//!   `backendServices.update`, `backendServices.setSecurityPolicy`, `healthChecks.update`) and
//!   FrontendConfig changed (SSL policy cleared, `sslPolicy: ''`: `targetHttpsProxies.setSslPolicy`; HTTPS redirect
//!   off: `targetHttpProxies.setUrlMap`); done when port 80 answers 200 (no redirect) and the
//!   backend service, health check and HTTPS proxy read as changed;
//! - internal and regional-external: the Secret switched, a second host rule and a
//!   BackendConfig on the Service (the regional `setSslCertificates`, `urlMaps.update`,
//!   `backendServices.update`, `healthChecks.update`); done when the new host's SNI is served
//!   the new certificate by the echo Pod and the regional backend service and health check read
//!   as changed;
//! - gateway: both Terminate listeners' certificate switched, a hostname added to the
//!   HTTPRoute and the Passthrough TLSRoute moved to another Service
//!   (`targetHttpsProxies.setSslCertificates`, `targetSslProxies.setSslCertificates`, the URL
//!   map's update; the Passthrough route's move changes its Network Services tlsRoute, not the
//!   TCP proxy, whose `service` is a fixed placeholder: src/gateway/ports.rs); done when ports
//!   443 and 9443 serve the new certificate and 8443 reaches the new Service's Pod. Moving the
//!   Terminate route too was tried: the Gateway loop then rebuilt the target SSL proxy (delete,
//!   insert) in some runs instead of setting its certificates, so it is left out;
//! - static-ip has no update phase.
//!
//! The BackendConfig and FrontendConfig fields are GKE's (reference/ingress-gce-inventory.md,
//! sections 2 and 3).

use anyhow::Result;
use serde_json::Value;

use crate::iam_scenarios::{app, tls_secret, Scenario, HOST};
use crate::support::regional::REGION;
use crate::support::tls::https_get;
use crate::support::{System, PROJECT, ZONE};

/// The second host an update adds, and the name the switched certificate is for.
pub const V2_HOST: &str = "v2.iam.example";

/// The BackendConfig an update gives the internal and regional classes' Service.
const REGIONAL_BC: &str =
    "spec:\n  timeoutSec: 50\n  healthCheck: {checkIntervalSec: 7, requestPath: /, type: HTTP}\n";

/// A host rule for [`V2_HOST`] to `web:80`, to insert after an Ingress's `  rules:` line.
const V2_RULE: &str = "  - host: v2.iam.example\n    http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n";

/// `s` with `from` replaced by `to`, failing when `from` is not in it (the manifest changed
/// under the update).
fn swap(s: &str, from: &str, to: &str) -> Result<String> {
    anyhow::ensure!(s.contains(from), "update: {from:?} not in the manifest");
    Ok(s.replace(from, to))
}

/// `collection` items (global, or regional in [`REGION`]) whose name holds `-{ns}-`.
fn items_of(sys: &System, collection: &str, regional: bool, ns: &str) -> Result<Vec<Value>> {
    let scope = match regional {
        true => format!("regions/{REGION}"),
        false => "global".into(),
    };
    let list = sys.compute_get(&format!(
        "compute/v1/projects/{PROJECT}/{scope}/{collection}"
    ))?;
    let needle = format!("-{ns}-");
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["name"].as_str().is_some_and(|n| n.contains(&needle)))
        .cloned()
        .collect())
}

/// Whether an HTTPS (or TLS) handshake with SNI `sni` at `socket` is served a certificate for
/// [`V2_HOST`], and (`http`) the request is answered 200 by the echo Pod.
fn serves_v2_cert(socket: &str, sni: &str, http: bool) -> bool {
    let v2 = V2_HOST.as_bytes();
    match https_get(socket, sni, "/") {
        Ok((leaf, response)) => {
            leaf.windows(v2.len()).any(|w| w == v2)
                && (!http || (response.starts_with("HTTP/1.1 200") && response.contains("web-1")))
        }
        Err(_) => false,
    }
}

impl Scenario {
    /// Whether the scenario has an update phase (all but static-ip).
    pub fn has_update(self) -> bool {
        self != Scenario::StaticIp
    }

    /// Changes the run in `ns` (see the module docs): applies the changed manifest, and for
    /// http deletes the first echo Pod.
    pub fn update(self, sys: &System, ns: &str) -> Result<()> {
        let mut y = self.manifest(ns)?;
        let switch = |y: &str| -> Result<String> {
            let y = y.replace("secretName: web-tls}", "secretName: web-tls2}");
            Ok(y + &tls_secret(ns, "web-tls2", V2_HOST)?)
        };
        match self {
            Scenario::StaticIp => return Ok(()),
            Scenario::Http => {
                y = swap(&y, "  rules:\n", &format!("  rules:\n{V2_RULE}"))?;
                y = swap(&y, "name: web-1\n", "name: web-2\n")?;
            }
            Scenario::Https => {
                y = swap(
                    &y,
                    &format!(
                        "    ingress.gcp.kubernetes.io/pre-shared-cert: '{}'\n",
                        crate::iam_scenarios::PRE_SHARED
                    ),
                    "",
                )?;
                y = swap(&y, "  rules:\n", &format!("  rules:\n{V2_RULE}"))?;
                y = switch(&y)?;
            }
            Scenario::Features => {
                let start = y.find("spec:\n  sslPolicy").unwrap_or_default();
                let end = start + y[start..].find("---\n").unwrap_or_default();
                y.replace_range(
                    start..end,
                    "spec:\n  sslPolicy: ''\n  redirectToHttps: {enabled: false}\n",
                );
                let start = y.find("spec:\n  timeoutSec: 40").unwrap_or_default();
                let end = start + y[start..].find("---\n").unwrap_or_default();
                y.replace_range(
                    start..end,
                    "spec:\n  timeoutSec: 50\n  securityPolicy: {name: ''}\n  healthCheck: {checkIntervalSec: 7, requestPath: /, type: HTTP}\n  cdn: {enabled: false}\n  connectionDraining: {drainingTimeoutSec: 20}\n  sessionAffinity: {affinityType: GENERATED_COOKIE, affinityCookieTtlSec: 60}\n  logging: {enable: true, sampleRate: 0.5}\n  customRequestHeaders: {headers: ['X-Iam-Report: update']}\n",
                );
            }
            Scenario::Internal | Scenario::RegionalExternal => {
                y = swap(&y, "  rules:\n", &format!("  rules:\n{V2_RULE}"))?;
                y = switch(&y)?;
                y = swap(
                    &y,
                    "metadata: {name: web, namespace",
                    "metadata: {annotations: {cloud.google.com/backend-config: '{\"default\": \"bc\"}'}, name: web, namespace",
                )?;
                y += &format!("apiVersion: cloud.google.com/v1\nkind: BackendConfig\nmetadata: {{name: bc, namespace: {ns}}}\n{REGIONAL_BC}---\n");
            }
            Scenario::Gateway => {
                y = y.replace(
                    "certificateRefs: [{name: web-tls}]",
                    "certificateRefs: [{name: web-tls2}]",
                );
                y = swap(
                    &y,
                    &format!("hostnames: [{HOST}]"),
                    &format!("hostnames: [{HOST}, {V2_HOST}]"),
                )?;
                y = swap(
                    &y,
                    "backendRefs: [{name: tls-pass, port: 80}]",
                    "backendRefs: [{name: tls-pass2, port: 80}]",
                )?;
                y += &tls_secret(ns, "web-tls2", V2_HOST)?;
                y += &app(ns, "tls-pass2", true);
            }
        }
        sys.apply(&y)?;
        if self == Scenario::Http {
            sys.kubectl_ok(&["delete", "pod", "-n", ns, "web-1", "--wait=false"])?;
        }
        Ok(())
    }

    /// Whether the update of the run in `ns` is served (see the module docs).
    pub fn updated(self, sys: &System, ns: &str) -> Result<bool> {
        let Some(ip) = self.address(sys, ns)? else {
            return Ok(false);
        };
        let socket = |port| sys.listener_for(&ip, port).map(Option::unwrap_or_default);
        match self {
            Scenario::StaticIp => self.serves(sys, ns),
            Scenario::Http => {
                let answered = sys
                    .http_get(&socket(80)?, V2_HOST, "/")
                    .is_ok_and(|(s, body)| s == 200 && body.contains("web-2"));
                if !answered {
                    return Ok(false);
                }
                let negs = sys.compute_get(&format!(
                    "compute/v1/projects/{PROJECT}/zones/{ZONE}/networkEndpointGroups"
                ))?;
                let needle = format!("-{ns}-");
                for neg in negs["items"].as_array().into_iter().flatten() {
                    let name = neg["name"].as_str().unwrap_or_default();
                    if name.contains(&needle) && neg["size"].as_u64() != Some(1) {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Scenario::Https => Ok(serves_v2_cert(&socket(443)?, V2_HOST, true)),
            Scenario::Features => {
                let answered = sys
                    .http_get(&socket(80)?, HOST, "/")
                    .is_ok_and(|(s, body)| s == 200 && body.contains("web-1"));
                let bs = items_of(sys, "backendServices", false, ns)?;
                let hc = items_of(sys, "healthChecks", false, ns)?;
                let tps = items_of(sys, "targetHttpsProxies", false, ns)?;
                Ok(answered
                    && !bs.is_empty()
                    && bs.iter().all(|b| {
                        b["timeoutSec"] == 50
                            && b["securityPolicy"].as_str().unwrap_or_default().is_empty()
                            && b["logConfig"]["enable"] == true
                    })
                    && hc.iter().all(|h| h["checkIntervalSec"] == 7)
                    && !tps.is_empty()
                    && tps
                        .iter()
                        .all(|t| t["sslPolicy"].as_str().unwrap_or_default().is_empty()))
            }
            Scenario::Internal | Scenario::RegionalExternal => {
                let bs = items_of(sys, "backendServices", true, ns)?;
                let hc = items_of(sys, "healthChecks", true, ns)?;
                Ok(serves_v2_cert(&socket(443)?, V2_HOST, true)
                    && !bs.is_empty()
                    && bs.iter().all(|b| b["timeoutSec"] == 50)
                    && hc.iter().all(|h| h["checkIntervalSec"] == 7))
            }
            Scenario::Gateway => {
                let passed = https_get(&socket(8443)?, &format!("pass.{HOST}"), "/")
                    .is_ok_and(|(_, response)| response.contains("tls-pass2-1"));
                Ok(passed
                    && serves_v2_cert(&socket(443)?, V2_HOST, true)
                    && serves_v2_cert(&socket(9443)?, &format!("term.{HOST}"), false))
            }
        }
    }
}
