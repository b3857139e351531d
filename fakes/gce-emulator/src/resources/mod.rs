//! The Compute resources the emulator serves, one module per resource, named as the API names
//! it. Each module validates and normalises a request body into the stored wire JSON
//! (`prepare`), following the Compute Engine API v1 reference for that resource.

pub mod addresses;
pub mod backend_services;
pub mod firewalls;
pub mod forwarding_rules;
pub mod global_addresses;
pub mod global_forwarding_rules;
pub mod health_checks;
pub mod instance_groups;
pub mod instances;
pub mod load_balancing_schemes;
pub mod network_endpoint_groups;
pub mod networks;
pub mod projects;
pub mod region_backend_services;
pub mod region_health_checks;
pub mod region_ssl_certificates;
pub mod region_target_http_proxies;
pub mod region_target_https_proxies;
pub mod region_url_maps;
pub mod regional;
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

use serde_json::Value;

use crate::errors::ApiError;
use crate::snapshot::{key_in_project, ResourceKey};
use crate::store::State;
use crate::validate::{self, Obj};

/// Where a collection lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `projects/{p}/global/{collection}`.
    Global,
    /// `projects/{p}/zones/{zone}/{collection}`.
    Zonal,
    /// `projects/{p}/regions/{region}/{collection}` (the regional twin of a global collection,
    /// served by the same resource module).
    Regional,
    /// `projects/{p}/{collection}` (zones).
    Project,
}

/// Static description of one collection of the API.
#[derive(Debug)]
pub struct Collection {
    /// Path segment: `forwardingRules`.
    pub segment: &'static str,
    /// Resource name in method ids: `globalForwardingRules` (`compute.globalForwardingRules.insert`).
    pub api: &'static str,
    /// `kind` of one resource: `compute#forwardingRule`.
    pub kind: &'static str,
    /// `kind` of a list page: `compute#forwardingRuleList`.
    pub list_kind: &'static str,
    /// `kind` of an aggregated list.
    pub aggregated_kind: &'static str,
    /// Where the collection lives.
    pub scope: Scope,
    /// Whether the resource carries `fingerprint` (412 on a stale one).
    pub fingerprint: bool,
    /// Whether the resource carries `labelFingerprint` (setLabels).
    pub label_fingerprint: bool,
    /// Whether the API has `patch` and `update` for it.
    pub updatable: bool,
    /// Whether clients may insert and delete it (zones are read-only).
    pub writable: bool,
}

macro_rules! coll {
    ($seg:literal, $api:literal, $kind:literal, $scope:expr, fp = $fp:literal, lfp = $lfp:literal, upd = $upd:literal, w = $w:literal) => {
        Collection {
            segment: $seg,
            api: $api,
            kind: concat!("compute#", $kind),
            list_kind: concat!("compute#", $kind, "List"),
            aggregated_kind: concat!("compute#", $kind, "AggregatedList"),
            scope: $scope,
            fingerprint: $fp,
            label_fingerprint: $lfp,
            updatable: $upd,
            writable: $w,
        }
    };
}

/// A collection that answers `get` and `list` only (writes are refused: see
/// [`refuse_write`]).
#[rustfmt::skip]
macro_rules! read_only {
    ($seg:literal, $api:literal, $kind:literal, $scope:expr) => {
        coll!($seg, $api, $kind, $scope, fp = false, lfp = false, upd = false, w = false)
    };
}

/// Every collection served, in dependency order (referenced before referencing).
pub static COLLECTIONS: &[Collection] = &[
    coll!(
        "networks",
        "networks",
        "network",
        Scope::Global,
        fp = false,
        lfp = false,
        upd = true,
        w = true
    ),
    coll!(
        "firewalls",
        "firewalls",
        "firewall",
        Scope::Global,
        fp = false,
        lfp = false,
        upd = true,
        w = true
    ),
    coll!(
        "instances",
        "instances",
        "instance",
        Scope::Zonal,
        fp = true,
        lfp = true,
        upd = false,
        w = true
    ),
    coll!(
        "healthChecks",
        "healthChecks",
        "healthCheck",
        Scope::Global,
        fp = false,
        lfp = false,
        upd = true,
        w = true
    ),
    coll!(
        "networkEndpointGroups",
        "networkEndpointGroups",
        "networkEndpointGroup",
        Scope::Zonal,
        fp = false,
        lfp = false,
        upd = false,
        w = true
    ),
    coll!(
        "securityPolicies",
        "securityPolicies",
        "securityPolicy",
        Scope::Global,
        fp = true,
        lfp = true,
        upd = true,
        w = true
    ),
    coll!(
        "backendServices",
        "backendServices",
        "backendService",
        Scope::Global,
        fp = true,
        lfp = false,
        upd = true,
        w = true
    ),
    coll!(
        "urlMaps",
        "urlMaps",
        "urlMap",
        Scope::Global,
        fp = true,
        lfp = false,
        upd = true,
        w = true
    ),
    coll!(
        "sslCertificates",
        "sslCertificates",
        "sslCertificate",
        Scope::Global,
        fp = false,
        lfp = false,
        upd = false,
        w = true
    ),
    coll!(
        "sslPolicies",
        "sslPolicies",
        "sslPolicy",
        Scope::Global,
        fp = true,
        lfp = false,
        upd = true,
        w = true
    ),
    coll!(
        "targetHttpProxies",
        "targetHttpProxies",
        "targetHttpProxy",
        Scope::Global,
        fp = true,
        lfp = false,
        upd = true,
        w = true
    ),
    coll!(
        "targetHttpsProxies",
        "targetHttpsProxies",
        "targetHttpsProxy",
        Scope::Global,
        fp = true,
        lfp = false,
        upd = true,
        w = true
    ),
    coll!(
        "targetTcpProxies",
        "targetTcpProxies",
        "targetTcpProxy",
        Scope::Global,
        fp = false,
        lfp = false,
        upd = false,
        w = true
    ),
    coll!(
        "targetSslProxies",
        "targetSslProxies",
        "targetSslProxy",
        Scope::Global,
        fp = false,
        lfp = false,
        upd = false,
        w = true
    ),
    coll!(
        "addresses",
        "globalAddresses",
        "address",
        Scope::Global,
        fp = false,
        lfp = true,
        upd = false,
        w = true
    ),
    coll!(
        "forwardingRules",
        "globalForwardingRules",
        "forwardingRule",
        Scope::Global,
        fp = true,
        lfp = true,
        upd = true,
        w = true
    ),
    // Regional twins (Compute API v1: `regionHealthChecks`, `regionBackendServices`, ...) and
    // the regional-only collections, for regional (internal and external managed) load
    // balancers; `resources::regional` holds what they share.
    coll!(
        "subnetworks",
        "subnetworks",
        "subnetwork",
        Scope::Regional,
        fp = true,
        lfp = false,
        upd = true,
        w = true
    ),
    coll!(
        "healthChecks",
        "regionHealthChecks",
        "healthCheck",
        Scope::Regional,
        fp = false,
        lfp = false,
        upd = true,
        w = true
    ),
    coll!(
        "backendServices",
        "regionBackendServices",
        "backendService",
        Scope::Regional,
        fp = true,
        lfp = false,
        upd = true,
        w = true
    ),
    coll!(
        "urlMaps",
        "regionUrlMaps",
        "urlMap",
        Scope::Regional,
        fp = true,
        lfp = false,
        upd = true,
        w = true
    ),
    coll!(
        "sslCertificates",
        "regionSslCertificates",
        "sslCertificate",
        Scope::Regional,
        fp = false,
        lfp = false,
        upd = false,
        w = true
    ),
    coll!(
        "targetHttpProxies",
        "regionTargetHttpProxies",
        "targetHttpProxy",
        Scope::Regional,
        fp = true,
        lfp = false,
        upd = true,
        w = true
    ),
    coll!(
        "targetHttpsProxies",
        "regionTargetHttpsProxies",
        "targetHttpsProxy",
        Scope::Regional,
        fp = true,
        lfp = false,
        upd = true,
        w = true
    ),
    coll!(
        "addresses",
        "addresses",
        "address",
        Scope::Regional,
        fp = false,
        lfp = true,
        upd = false,
        w = true
    ),
    coll!(
        "forwardingRules",
        "forwardingRules",
        "forwardingRule",
        Scope::Regional,
        fp = true,
        lfp = true,
        upd = true,
        w = true
    ),
    coll!(
        "zones",
        "zones",
        "zone",
        Scope::Project,
        fp = false,
        lfp = false,
        upd = false,
        w = false
    ),
];

/// Collections served for `get` and `list` only: zonal instanceGroups (instance groups are
/// not emulated; NEGs are).
#[rustfmt::skip]
pub static READ_ONLY: &[Collection] = &[
    read_only!("instanceGroups", "instanceGroups", "instanceGroup", Scope::Zonal),
];

/// Every collection served: [`COLLECTIONS`], then [`READ_ONLY`].
pub fn all() -> impl Iterator<Item = &'static Collection> {
    COLLECTIONS.iter().chain(READ_ONLY)
}

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

/// The collection served at `segment` in `scope`.
pub fn collection(scope: Scope, segment: &str) -> Option<&'static Collection> {
    all().find(|c| c.scope == scope && c.segment == segment)
}

/// The collection a stored key belongs to (`projects/p/global/urlMaps/x` -> urlMaps).
pub fn collection_of_key(key: &str) -> Option<&'static Collection> {
    let parts: Vec<&str> = key.split('/').collect();
    match parts.as_slice() {
        ["projects", _, "global", seg, _] => collection(Scope::Global, seg),
        ["projects", _, "zones", _, seg, _] => collection(Scope::Zonal, seg),
        ["projects", _, "regions", _, seg, _] => collection(Scope::Regional, seg),
        _ => None,
    }
}

/// The last path segment of a key or URL (the resource name).
pub fn name_of(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or(key)
}

/// What a resource's `prepare` needs: read access to the store, where the resource lives, and
/// the previous version on update.
pub struct Prepare<'a> {
    /// The store as it is before this request.
    pub state: &'a State,
    /// Project of the request.
    pub project: &'a str,
    /// Zone of the request, for zonal collections.
    pub zone: Option<&'a str>,
    /// Key of the resource being written.
    pub key: &'a str,
    /// The stored resource this request replaces (update, patch, custom setters).
    pub old: Option<&'a Value>,
    /// Addresses may be allocated from this range (`--address-range`).
    pub address_range: (std::net::Ipv4Addr, u8),
}

impl Prepare<'_> {
    /// The emulator's public base (`http://127.0.0.1:PORT/compute/v1/`).
    pub fn base(&self) -> &str {
        &self.state.base
    }

    /// Full URL of a key.
    pub fn url(&self, key: &str) -> String {
        format!("{}{}", self.state.base, key)
    }

    /// Resolves a reference in `field` (any form clients send) to one of the `allowed`
    /// collections, checks that it exists, and returns it normalised as a full URL.
    ///
    /// Errors: 400 `invalid` naming `field` when the reference is malformed or names another
    /// collection; 404 `notFound` when the resource does not exist (as the real API).
    pub fn reference(
        &self,
        field: &str,
        reference: &str,
        allowed: &[&str],
    ) -> Result<String, ApiError> {
        let key = self.parse_reference(field, reference, allowed)?;
        if !self.state.resources.contains_key(&key) {
            let mut e = ApiError::not_found(&key);
            e.message = format!("{} (referenced by field '{field}')", e.message);
            e.field = Some(field.to_string());
            return Err(e);
        }
        Ok(self.url(&key))
    }

    /// Like [`Prepare::reference`] without the existence check; returns the key.
    pub fn parse_reference(
        &self,
        field: &str,
        reference: &str,
        allowed: &[&str],
    ) -> Result<ResourceKey, ApiError> {
        let malformed = || {
            ApiError::invalid_value(
                field,
                reference,
                &format!(
                    "The URL is malformed; expected a reference to {}.",
                    allowed.join(" or ")
                ),
            )
        };
        let key = key_in_project(self.project, reference).ok_or_else(malformed)?;
        let coll = collection_of_key(&key).ok_or_else(malformed)?;
        if !allowed.contains(&coll.segment) {
            return Err(malformed());
        }
        validate::check_name(field, name_of(&key)).map_err(|_| malformed())?;
        Ok(key)
    }

    /// Normalises the optional reference at `obj[key]` in place.
    pub fn ref_field(
        &self,
        obj: &mut Obj,
        prefix: &str,
        key: &str,
        allowed: &[&str],
    ) -> Result<Option<String>, ApiError> {
        let field = validate::path(prefix, key);
        match validate::opt_str(obj, prefix, key)? {
            None | Some("") => {
                obj.remove(key);
                Ok(None)
            }
            Some(r) => {
                let url = self.reference(&field, r, allowed)?;
                obj.insert(key.to_string(), Value::String(url.clone()));
                Ok(Some(url))
            }
        }
    }

    /// Normalises the list of references at `obj[key]` in place.
    pub fn ref_list(
        &self,
        obj: &mut Obj,
        prefix: &str,
        key: &str,
        allowed: &[&str],
    ) -> Result<Vec<String>, ApiError> {
        let list = validate::str_list(obj, prefix, key)?;
        let mut out = Vec::with_capacity(list.len());
        for (i, r) in list.iter().enumerate() {
            out.push(self.reference(
                &format!("{}[{i}]", validate::path(prefix, key)),
                r,
                allowed,
            )?);
        }
        if obj.contains_key(key) {
            obj.insert(key.to_string(), Value::from(out.clone()));
        }
        Ok(out)
    }

    /// Sets `network` to the project's `default` network when absent, else normalises it.
    /// A network of another project is accepted only when that project is a Shared VPC host
    /// this project is attached to (400 "Cross-project references for this resource are not
    /// allowed." otherwise, as the real API answers).
    pub fn network_field(&self, obj: &mut Obj) -> Result<(), ApiError> {
        match validate::opt_str(obj, "resource", "network")?.filter(|n| !n.is_empty()) {
            None => {
                obj.insert(
                    "network".into(),
                    Value::String(format!("projects/{}/global/networks/default", self.project)),
                );
            }
            Some(n) => {
                let key = self.parse_reference("resource.network", n, &["networks"])?;
                let owner = key.split('/').nth(1).unwrap_or_default();
                if owner != self.project && !projects::attached(self.state, owner, self.project) {
                    return Err(ApiError::invalid_value(
                        "resource.network",
                        n,
                        "Cross-project references for this resource are not allowed.",
                    ));
                }
            }
        }
        self.ref_field(obj, "resource", "network", &["networks"])?;
        Ok(())
    }
}

/// Validates and normalises `body` into the resource stored at `cx.key`; `body` already has
/// output-only fields removed and a valid name.
pub fn prepare(coll: &Collection, cx: &Prepare<'_>, body: &mut Obj) -> Result<(), ApiError> {
    validate::labels(body, "resource")?;
    if coll.scope == Scope::Regional {
        return regional::prepare(coll, cx, body);
    }
    let done = match coll.segment {
        "networks" => networks::prepare(cx, body),
        "firewalls" => firewalls::prepare(cx, body),
        "instances" => instances::prepare(cx, body),
        "healthChecks" => health_checks::prepare(cx, body),
        "networkEndpointGroups" => network_endpoint_groups::prepare(cx, body),
        "securityPolicies" => security_policies::prepare(cx, body),
        "backendServices" => backend_services::prepare(cx, body),
        "urlMaps" => url_maps::prepare(cx, body),
        "sslCertificates" => ssl_certificates::prepare(cx, body),
        "sslPolicies" => ssl_policies::prepare(cx, body),
        "targetHttpProxies" => target_http_proxies::prepare(cx, body),
        "targetHttpsProxies" => target_https_proxies::prepare(cx, body),
        "targetTcpProxies" => target_tcp_proxies::prepare(cx, body),
        "targetSslProxies" => target_ssl_proxies::prepare(cx, body),
        "addresses" => global_addresses::prepare(cx, body),
        "forwardingRules" => global_forwarding_rules::prepare(cx, body),
        _ => Err(ApiError::new(
            405,
            "badRequest",
            format!("{} cannot be written", coll.segment),
        )),
    };
    done?;
    regional::refuse_regional_references(body)
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
