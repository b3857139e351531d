//! The collections the emulator serves, as the Compute API v1 reference names them: each
//! collection's path segment, method-id name, `kind`s, scope (global, regional, zonal, project)
//! and which of the API's methods it has ([`COLLECTIONS`], [`READ_ONLY`]), and the lookups from a
//! stored key or a path to its collection. Pure data: the validation of each collection is in
//! its own module above this one (`resources::backend_services` ...).

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
/// [`crate::resources::refuse_write`]).
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
    // The regional collections (Compute API v1: `regionHealthChecks`, `regionBackendServices`,
    // ...) and the regional-only ones, for regional (internal and external managed) load
    // balancers; each is served by the same module as its global collection, with the scope
    // as a parameter, and `resources::reference_scopes` keeps their references in scope.
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
