//! The Compute resources the emulator serves, one module per collection, named as the API names
//! it; a collection that exists in several scopes (`backendServices` and
//! `regionBackendServices`, `addresses` and `globalAddresses` ...) is one module taking the scope
//! as a parameter. Each module validates and normalises a request body into the stored wire JSON
//! (`prepare`), following the Compute Engine API v1 reference for that resource.
//!
//! Layers, from the top (crates/architecture checks them): this module, which dispatches a
//! request to its collection's `prepare` and holds the per-collection tables the methods read
//! ([`output_only`], [`setter`]); the collections and the rules between them
//! ([`load_balancing_schemes`], [`reference_scopes`]); at the bottom what every collection
//! shares: the table of collections ([`collections`]) and [`Prepare`] with the references it
//! resolves ([`references`]). Nothing below imports this module.

pub mod addresses;
pub mod backend_services;
pub mod collections;
pub mod default_network;
pub mod firewalls;
pub mod forwarding_rules;
pub mod health_checks;
pub mod instance_groups;
pub mod instances;
pub mod load_balancing_schemes;
pub mod network_endpoint_groups;
pub mod networks;
pub mod projects;
pub mod reference_scopes;
pub mod references;
pub mod security_policies;
pub mod ssl_certificates;
pub mod ssl_policies;
pub mod subnetworks;
pub mod target_http_proxies;
pub mod target_https_proxies;
pub mod target_ssl_proxies;
pub mod target_tcp_proxies;
pub mod tls_routes;
pub mod url_maps;
pub mod zones;

#[cfg(test)]
#[path = "scope_tests.rs"]
mod scope_tests;

pub use collections::{
    all, collection, collection_of_key, name_of, Collection, Scope, COLLECTIONS, READ_ONLY,
};
pub use references::Prepare;

use serde_json::Value;

use crate::errors::ApiError;
use crate::validate::{self, Obj};

/// The answer to a write (insert, update, patch, delete, custom verb) to a collection that
/// is not [`Collection::writable`]: 400 `invalid` saying what the emulator serves instead.
pub fn refuse_write(coll: &Collection) -> ApiError {
    match coll.scope {
        Scope::Zonal if coll.segment == "instanceGroups" => instance_groups::refuse_write(),
        _ => ApiError::new(
            400,
            "invalid",
            format!("{} are read-only in the emulator.", coll.segment),
        ),
    }
}

/// Validates and normalises `body` into the resource stored at `cx.key`; `body` already has
/// output-only fields removed and a valid name. A regional resource (in region `cx.zone`: the
/// router puts the region there) must reference resources of its region only
/// ([`reference_scopes::same_region_references`]) and gets its `region` URL stamped; any other
/// must not reference a regional load balancing resource
/// ([`reference_scopes::refuse_regional_references`]). Errors: the collection's own (400
/// `invalid`, 404 `notFound` ...), 405 for a collection that cannot be written.
pub fn prepare(coll: &Collection, cx: &Prepare<'_>, body: &mut Obj) -> Result<(), ApiError> {
    validate::labels(body, "resource")?;
    let scope = coll.scope;
    let regional = scope == Scope::Regional;
    if regional {
        body.remove("region");
    }
    let done = match coll.segment {
        "networks" if !regional => networks::prepare(cx, body),
        "firewalls" if !regional => firewalls::prepare(cx, body),
        "instances" if !regional => instances::prepare(cx, body),
        "networkEndpointGroups" if !regional => network_endpoint_groups::prepare(cx, body),
        "securityPolicies" if !regional => security_policies::prepare(cx, body),
        "sslPolicies" if !regional => ssl_policies::prepare(cx, body),
        "targetTcpProxies" if !regional => target_tcp_proxies::prepare(cx, body),
        "targetSslProxies" if !regional => target_ssl_proxies::prepare(cx, body),
        "subnetworks" if regional => subnetworks::prepare(cx, body),
        "healthChecks" => health_checks::prepare(cx, body),
        "backendServices" => backend_services::prepare(cx, body, scope),
        "urlMaps" => url_maps::prepare(cx, body),
        "sslCertificates" => ssl_certificates::prepare(cx, body, scope),
        "targetHttpProxies" => target_http_proxies::prepare(cx, body),
        "targetHttpsProxies" => target_https_proxies::prepare(cx, body, scope),
        "addresses" => addresses::prepare(cx, body, scope),
        "forwardingRules" => forwarding_rules::prepare(cx, body, scope),
        _ => Err(ApiError::new(
            405,
            "badRequest",
            if regional {
                format!("regional {} cannot be written", coll.segment)
            } else {
                format!("{} cannot be written", coll.segment)
            },
        )),
    };
    done?;
    if !regional {
        return reference_scopes::refuse_regional_references(body);
    }
    let region = cx.zone.unwrap_or_default();
    reference_scopes::same_region_references(cx, region, body)?;
    body.insert(
        "region".into(),
        Value::String(cx.url(&format!("projects/{}/regions/{region}", cx.project))),
    );
    Ok(())
}

/// Fields clients may send but the server owns; dropped from request bodies.
pub fn output_only(coll: &Collection) -> &'static [&'static str] {
    match coll.segment {
        "addresses" => &[
            "id",
            "kind",
            "selfLink",
            "creationTimestamp",
            "status",
            "users",
            "labelFingerprint",
        ],
        "sslCertificates" => &[
            "id",
            "kind",
            "selfLink",
            "creationTimestamp",
            "expireTime",
            "subjectAlternativeNames",
        ],
        "networkEndpointGroups" => &[
            "id",
            "kind",
            "selfLink",
            "creationTimestamp",
            "size",
            "zone",
        ],
        "instances" => &[
            "id",
            "kind",
            "selfLink",
            "creationTimestamp",
            "zone",
            "status",
            "statusMessage",
            "cpuPlatform",
            "lastStartTimestamp",
            "lastStopTimestamp",
            "startRestricted",
            "labelFingerprint",
            "satisfiesPzi",
            "satisfiesPzs",
        ],
        "sslPolicies" => &[
            "id",
            "kind",
            "selfLink",
            "creationTimestamp",
            "enabledFeatures",
            "warnings",
        ],
        "forwardingRules" => &[
            "id",
            "kind",
            "selfLink",
            "creationTimestamp",
            "labelFingerprint",
            "pscConnectionId",
            "pscConnectionStatus",
            "region",
        ],
        _ => &["id", "kind", "selfLink", "creationTimestamp"],
    }
}

/// Custom verbs that just set fields: `(collection, verb) -> body fields copied onto the
/// resource`, as the reference documents each (`targetHttpsProxies.setSslCertificates` takes
/// `{"sslCertificates":[...]}`).
pub fn setter(segment: &str, verb: &str) -> Option<&'static [&'static str]> {
    Some(match (segment, verb) {
        ("targetHttpProxies" | "targetHttpsProxies", "setUrlMap") => &["urlMap"],
        ("targetHttpsProxies", "setSslCertificates") => &["sslCertificates"],
        ("targetHttpsProxies", "setSslPolicy") => &["sslPolicy"],
        ("targetHttpsProxies", "setQuicOverride") => &["quicOverride"],
        ("targetHttpsProxies" | "targetHttpProxies", "setCertificateMap") => return None,
        ("forwardingRules", "setTarget") => &["target"],
        ("targetTcpProxies" | "targetSslProxies", "setBackendService") => &["service"],
        ("targetTcpProxies" | "targetSslProxies", "setProxyHeader") => &["proxyHeader"],
        ("targetSslProxies", "setSslCertificates") => &["sslCertificates"],
        ("targetSslProxies", "setSslPolicy") => &["sslPolicy"],
        ("forwardingRules" | "addresses" | "securityPolicies" | "instances", "setLabels") => {
            &["labels"]
        }
        ("backendServices", "setSecurityPolicy") => &["securityPolicy"],
        ("backendServices", "setEdgeSecurityPolicy") => &["edgeSecurityPolicy"],
        _ => return None,
    })
}
