//! Ingress status and the `ingress.kubernetes.io/*` annotations GKE writes (inventory §1),
//! computed as patches that are empty when nothing changed (no write loops).

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::Ingress;
use serde_json::{json, Value};

use crate::translate::DesiredFrontend;

/// Annotation prefix of every status annotation.
pub const PREFIX: &str = "ingress.kubernetes.io/";
/// URL map name.
pub const URL_MAP: &str = "ingress.kubernetes.io/url-map";
/// HTTP forwarding rule name.
pub const FORWARDING_RULE: &str = "ingress.kubernetes.io/forwarding-rule";
/// HTTP target proxy name.
pub const TARGET_PROXY: &str = "ingress.kubernetes.io/target-proxy";
/// HTTPS forwarding rule name.
pub const HTTPS_FORWARDING_RULE: &str = "ingress.kubernetes.io/https-forwarding-rule";
/// HTTPS target proxy name.
pub const HTTPS_TARGET_PROXY: &str = "ingress.kubernetes.io/https-target-proxy";
/// Comma-joined certificate names.
pub const SSL_CERT: &str = "ingress.kubernetes.io/ssl-cert";
/// Redirect URL map name.
pub const REDIRECT_URL_MAP: &str = "ingress.kubernetes.io/redirect-url-map";
/// Name of the reserved global address the forwarding rules use (the user's
/// `global-static-ip-name`, or the managed one promoted for HTTP+HTTPS; inventory §1).
pub const STATIC_IP: &str = "ingress.kubernetes.io/static-ip";
/// JSON map backend service name -> HEALTHY / UNHEALTHY / Unknown.
pub const BACKENDS: &str = "ingress.kubernetes.io/backends";

/// Every key this module manages.
pub const MANAGED: [&str; 9] = [
    URL_MAP,
    FORWARDING_RULE,
    TARGET_PROXY,
    HTTPS_FORWARDING_RULE,
    HTTPS_TARGET_PROXY,
    SSL_CERT,
    REDIRECT_URL_MAP,
    STATIC_IP,
    BACKENDS,
];

fn name_of(v: Option<&Option<String>>) -> Option<String> {
    v.and_then(|n| n.clone())
}

/// The annotations the Ingress should carry: key -> value; keys of [`MANAGED`] that are absent
/// must be removed. `static_ip` names the reserved address in use, `health` maps backend
/// service name -> state.
pub fn wanted_annotations(
    frontend: &DesiredFrontend,
    static_ip: Option<&str>,
    health: &BTreeMap<String, String>,
) -> BTreeMap<&'static str, String> {
    let mut out = BTreeMap::new();
    let mut put = |key: &'static str, value: Option<String>| {
        if let Some(v) = value {
            out.insert(key, v);
        }
    };
    put(URL_MAP, name_of(frontend.url_map.as_ref().map(|m| &m.name)));
    put(
        REDIRECT_URL_MAP,
        name_of(frontend.redirect_url_map.as_ref().map(|m| &m.name)),
    );
    put(
        FORWARDING_RULE,
        name_of(frontend.http_forwarding_rule.as_ref().map(|r| &r.name)),
    );
    put(
        TARGET_PROXY,
        name_of(frontend.target_http_proxy.as_ref().map(|p| &p.name)),
    );
    put(
        HTTPS_FORWARDING_RULE,
        name_of(frontend.https_forwarding_rule.as_ref().map(|r| &r.name)),
    );
    put(
        HTTPS_TARGET_PROXY,
        name_of(frontend.target_https_proxy.as_ref().map(|p| &p.name)),
    );
    if let Some(proxy) = &frontend.target_https_proxy {
        let certs: Vec<&str> = proxy
            .ssl_certificates
            .iter()
            .map(|c| crate::compute::reference::last_segment(c))
            .collect();
        if !certs.is_empty() {
            put(SSL_CERT, Some(certs.join(",")));
        }
    }
    put(STATIC_IP, static_ip.map(str::to_string));
    put(
        BACKENDS,
        Some(serde_json::to_string(health).unwrap_or_else(|_| "Unknown".to_string())),
    );
    out
}

/// A JSON merge patch of `metadata.annotations` that sets `wanted` and removes managed keys
/// not in it; `None` when the Ingress already carries exactly that.
pub fn annotation_patch(
    ingress: &Ingress,
    wanted: &BTreeMap<&'static str, String>,
) -> Option<Value> {
    let empty = BTreeMap::new();
    let current = ingress.metadata.annotations.as_ref().unwrap_or(&empty);
    let mut patch = serde_json::Map::new();
    for key in MANAGED {
        match (wanted.get(key), current.get(key)) {
            (Some(w), Some(c)) if w == c => {}
            (Some(w), _) => {
                patch.insert(key.to_string(), Value::String(w.clone()));
            }
            (None, Some(_)) => {
                patch.insert(key.to_string(), Value::Null);
            }
            (None, None) => {}
        }
    }
    (!patch.is_empty()).then(|| json!({"metadata": {"annotations": patch}}))
}

/// The IPs in `status.loadBalancer.ingress[]`.
pub fn current_ips(ingress: &Ingress) -> Vec<String> {
    ingress
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .map(|list| list.iter().filter_map(|i| i.ip.clone()).collect())
        .unwrap_or_default()
}

/// A merge patch for the status subresource setting `ip`; `None` when it is already the only IP.
pub fn status_patch(ingress: &Ingress, ip: &str) -> Option<Value> {
    if current_ips(ingress) == [ip] {
        return None;
    }
    Some(json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}}))
}

/// A merge patch publishing `address` in `status.loadBalancer.ingress[]`: an IP as `ip`,
/// anything else (a DNS name) as `hostname`, as Contour's `--ingress-status-address` does
/// (reference 004, "Status"); `None` when it is already the only entry.
pub fn published_patch(ingress: &Ingress, address: &str) -> Option<Value> {
    if address.parse::<std::net::IpAddr>().is_ok() {
        return status_patch(ingress, address);
    }
    let entries = ingress
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref());
    let only_it = entries.is_some_and(|list| {
        list.len() == 1 && list[0].hostname.as_deref() == Some(address) && list[0].ip.is_none()
    });
    (!only_it).then(|| json!({"status": {"loadBalancer": {"ingress": [{"hostname": address}]}}}))
}

#[cfg(test)]
mod tests {
    use google_cloud_compute_v1::model;

    use super::*;

    #[test]
    fn annotations_patch_only_when_changed_and_remove_stale_keys() {
        let frontend = DesiredFrontend {
            url_map: Some(model::UrlMap::new().set_name("k8s2-um-x")),
            target_http_proxy: Some(model::TargetHttpProxy::new().set_name("k8s2-tp-x")),
            http_forwarding_rule: Some(model::ForwardingRule::new().set_name("k8s2-fr-x")),
            ..DesiredFrontend::default()
        };
        let health = BTreeMap::from([("k8s1-b".to_string(), "HEALTHY".to_string())]);
        let wanted = wanted_annotations(&frontend, None, &health);
        assert_eq!(wanted[BACKENDS], r#"{"k8s1-b":"HEALTHY"}"#);
        let mut ingress = Ingress::default();
        let patch = annotation_patch(&ingress, &wanted).expect("first write");
        assert_eq!(patch["metadata"]["annotations"][URL_MAP], "k8s2-um-x");
        let mut annotations: BTreeMap<String, String> = wanted
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        ingress.metadata.annotations = Some(annotations.clone());
        assert_eq!(annotation_patch(&ingress, &wanted), None, "no write loop");
        annotations.insert(HTTPS_TARGET_PROXY.to_string(), "k8s2-ts-x".to_string());
        ingress.metadata.annotations = Some(annotations);
        let patch = annotation_patch(&ingress, &wanted).expect("stale key removed");
        assert_eq!(
            patch["metadata"]["annotations"][HTTPS_TARGET_PROXY],
            Value::Null
        );
    }

    #[test]
    fn published_address_is_a_hostname_or_an_ip() {
        let mut ingress = Ingress::default();
        let patch = published_patch(&ingress, "lb.example.com").unwrap();
        assert_eq!(
            patch["status"]["loadBalancer"]["ingress"][0]["hostname"],
            "lb.example.com"
        );
        ingress.status = serde_json::from_value(patch["status"].clone()).unwrap();
        assert_eq!(published_patch(&ingress, "lb.example.com"), None);
        let patch = published_patch(&ingress, "192.0.2.7").unwrap();
        assert_eq!(
            patch["status"]["loadBalancer"]["ingress"][0]["ip"],
            "192.0.2.7"
        );
    }

    #[test]
    fn status_patch_only_when_ip_differs() {
        let mut ingress = Ingress::default();
        assert!(status_patch(&ingress, "127.130.0.1").is_some());
        ingress.status =
            serde_json::from_value(json!({"loadBalancer": {"ingress": [{"ip": "127.130.0.1"}]}}))
                .unwrap();
        assert_eq!(status_patch(&ingress, "127.130.0.1"), None);
    }
}
