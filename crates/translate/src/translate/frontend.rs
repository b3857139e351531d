//! The per-Ingress frontend: URL maps, target proxies, forwarding rules and certificates
//! (inventory §1, §3b, §4; reference 000 "TLS", "HTTP to HTTPS redirects").
//!
//! - HTTP: target HTTP proxy `k8s2-tp-` and forwarding rule `k8s2-fr-` on `80-80`, unless
//!   `kubernetes.io/ingress.allow-http: "false"`.
//! - HTTPS: target HTTPS proxy `k8s2-ts-` and forwarding rule `k8s2-fs-` on `443-443`, when
//!   there is at least one certificate. Both rules use the same address: the static one when
//!   named, else the one the API allocated for the HTTP rule (filled in by `sync`).
//! - FrontendConfig `redirectToHttps`: the HTTP proxy points at a redirect URL map `k8s2-rm-`.
//! - `ncp/http-redirect: "true"` (reference 002): the same redirect URL map (301), and it wins
//!   over `allow-http: "false"` as NCP documents (the HTTP frontend exists only to redirect).
//!   Without any certificate it is refused, as NCP marks such an Ingress INVALID_INGRESS.
//! - FrontendConfig `sslPolicy`: absent leaves the proxy's policy alone (`ssl_policy: None`),
//!   `""` removes it (`Some("")`), a name sets `projects/{p}/global/sslPolicies/{name}`.

use google_cloud_compute_v1::model::{self, forwarding_rule, http_redirect_action};
use k8s_openapi::api::networking::v1::Ingress;

use super::annotations;
use super::certificates::{certificates, MAX_CERTIFICATES};
use super::namer::{self, FrontendNamer};
use super::ncp::{self, NcpOptions};
use super::url_map::{frontend_description, owned_description};
use super::{
    ClusterSnapshot, DesiredFrontend, Finding, ObjectKey, TranslateConfig, TranslateError,
};

/// Builds the frontend around an already built URL map.
///
/// # Errors
/// HTTP disabled without any certificate; more than 15 certificates; an invalid pre-shared
/// certificate or static IP name.
pub fn frontend(
    snapshot: &ClusterSnapshot,
    config: &TranslateConfig,
    ingress: &Ingress,
    namer: &FrontendNamer,
    url_map: model::UrlMap,
    ncp_options: &NcpOptions,
    findings: &mut Vec<Finding>,
) -> Result<DesiredFrontend, TranslateError> {
    let key = ObjectKey::of(ingress);
    let description = frontend_description(config.mode.scheme(), &key);
    let ncp_redirect = ncp_options.http_redirect;
    let allow_http = annotations::allow_http(ingress) || ncp_redirect;
    let certs = certificates(snapshot, config, ingress, namer)?;
    findings.extend(certs.findings);
    if certs.references.len() > MAX_CERTIFICATES {
        return Err(TranslateError::TooManyCertificates {
            ingress: key.to_string(),
            count: certs.references.len(),
            max: MAX_CERTIFICATES,
        });
    }
    if ncp_redirect && certs.references.is_empty() {
        return Err(TranslateError::InvalidAnnotation {
            kind: "Ingress",
            object: key.to_string(),
            annotation: ncp::HTTP_REDIRECT.to_owned(),
            reason: "the Ingress has no certificate to redirect to (no spec.tls Secret, pre-shared or managed certificate); add one or remove the annotation".to_owned(),
        });
    }
    if !allow_http && certs.references.is_empty() {
        return Err(TranslateError::HttpAndHttpsDisabled {
            ingress: key.to_string(),
        });
    }

    let frontend_config = match annotations::get(ingress, annotations::FRONTEND_CONFIG) {
        None => None,
        Some(name) => {
            let fc_key = ObjectKey::new(key.namespace.clone(), name);
            let found = snapshot.frontend_configs.get(&fc_key);
            if found.is_none() {
                findings.push(Finding {
                    warning: true,
                    reason: "Sync".to_owned(),
                    message: format!(
                        "Error: no FrontendConfig for Ingress exists: Ingress {key}: annotation {} names FrontendConfig {fc_key} which does not exist; create it or fix the annotation",
                        annotations::FRONTEND_CONFIG
                    ),
                });
            }
            found.map(|fc| fc.spec.clone())
        }
    };
    let url_map_ref = config.global_ref("urlMaps", &namer.url_map());

    let from_frontend_config = frontend_config
        .as_ref()
        .and_then(|fc| fc.redirect_to_https.as_ref())
        .filter(|r| r.enabled && allow_http)
        .map(|r| r.response_code_name.unwrap_or_default());
    let redirect_url_map = from_frontend_config
        .or(ncp_redirect.then(Default::default))
        .map(|code| {
            let mut action = model::HttpRedirectAction::default();
            action.https_redirect = Some(true);
            action.redirect_response_code = Some(http_redirect_action::RedirectResponseCode::from(
                code.as_str(),
            ));
            let mut um = model::UrlMap::default();
            um.name = Some(namer.redirect_url_map());
            um.description = owned_description(config.mode.scheme(), &key);
            um.default_url_redirect = Some(action);
            um
        });

    let static_ip_name = annotations::get(ingress, annotations::GLOBAL_STATIC_IP_NAME)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    if let Some(name) = static_ip_name
        .as_deref()
        .filter(|n| !namer::is_valid_name(n))
    {
        return Err(TranslateError::InvalidAnnotation {
            kind: "Ingress",
            object: key.to_string(),
            annotation: annotations::GLOBAL_STATIC_IP_NAME.to_owned(),
            reason: format!("{name:?} is not a valid global Address name (lower-case letters, digits and `-`, at most 63 characters); fix the name"),
        });
    }
    let mut out = DesiredFrontend {
        static_ip_name,
        ..DesiredFrontend::default()
    };
    if allow_http {
        let mut proxy = model::TargetHttpProxy::default();
        proxy.name = Some(namer.target_http_proxy());
        proxy.description = Some(description.clone());
        proxy.url_map = Some(match &redirect_url_map {
            Some(rm) => config.global_ref("urlMaps", rm.name.as_deref().unwrap_or_default()),
            None => url_map_ref.clone(),
        });
        out.http_forwarding_rule = Some(forwarding_rule_for(
            namer.http_forwarding_rule(),
            "80-80",
            config.global_ref("targetHttpProxies", &namer.target_http_proxy()),
            &description,
        ));
        out.target_http_proxy = Some(proxy);
    }
    if !certs.references.is_empty() {
        let mut proxy = model::TargetHttpsProxy::default();
        proxy.name = Some(namer.target_https_proxy());
        proxy.description = Some(description.clone());
        proxy.url_map = Some(url_map_ref);
        proxy.ssl_certificates = certs.references;
        proxy.ssl_policy = frontend_config
            .as_ref()
            .and_then(|fc| fc.ssl_policy.as_deref())
            .map(|p| {
                if p.is_empty() {
                    String::new()
                } else {
                    config.global_ref("sslPolicies", p)
                }
            });
        out.https_forwarding_rule = Some(forwarding_rule_for(
            namer.https_forwarding_rule(),
            "443-443",
            config.global_ref("targetHttpsProxies", &namer.target_https_proxy()),
            &description,
        ));
        out.target_https_proxy = Some(proxy);
        out.ssl_certificates = certs.self_managed;
    }
    out.url_map = Some(url_map);
    out.redirect_url_map = redirect_url_map;
    Ok(out)
}

/// A classic external global forwarding rule; `IPAddress` is left unset (the API allocates,
/// or `sync` fills in the static or already allocated address).
fn forwarding_rule_for(
    name: String,
    port_range: &str,
    target: String,
    description: &str,
) -> model::ForwardingRule {
    let mut fr = model::ForwardingRule::default();
    fr.name = Some(name);
    fr.description = Some(description.to_owned());
    fr.ip_protocol = Some(forwarding_rule::IPProtocol::from("TCP"));
    fr.port_range = Some(port_range.to_owned());
    fr.target = Some(target);
    fr.load_balancing_scheme = Some(forwarding_rule::LoadBalancingScheme::from("EXTERNAL"));
    fr
}
