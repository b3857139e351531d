//! What Gateway translation reads: a point-in-time copy of the Gateway API objects and of the
//! core objects translation shares with Ingress (Services, EndpointSlices, Pods, Secrets), plus
//! the route and reference views the rest of the module works with.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::{Resource, ResourceExt};

use super::api::gatewayclasses::GatewayClass;
use super::api::gateways::Gateway;
use super::api::httproutes::HttpRoute;
use super::api::referencegrants::ReferenceGrant;
use super::api::tlsroutes::TlsRoute;
use crate::translate::{ClusterSnapshot, ObjectKey};

/// The Gateway API group.
pub const GROUP: &str = "gateway.networking.k8s.io";

/// Everything Gateway translation may look at. Maps are ordered, so output never depends on
/// insertion order.
#[derive(Clone, Debug, Default)]
pub struct GatewayInputs {
    /// GatewayClasses by name.
    pub classes: BTreeMap<String, Arc<GatewayClass>>,
    /// Gateways.
    pub gateways: BTreeMap<ObjectKey, Arc<Gateway>>,
    /// HTTPRoutes.
    pub http_routes: BTreeMap<ObjectKey, Arc<HttpRoute>>,
    /// TLSRoutes.
    pub tls_routes: BTreeMap<ObjectKey, Arc<TlsRoute>>,
    /// ReferenceGrants.
    pub reference_grants: BTreeMap<ObjectKey, Arc<ReferenceGrant>>,
    /// Namespace labels by namespace name (for `allowedRoutes.namespaces.from: Selector`).
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// Services, EndpointSlices, Pods and Secrets (the other maps stay empty).
    pub cluster: ClusterSnapshot,
}

/// The two route kinds this controller serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RouteKind {
    /// `HTTPRoute`.
    Http,
    /// `TLSRoute`.
    Tls,
}

impl RouteKind {
    /// The `kind` string.
    pub fn as_str(self) -> &'static str {
        match self {
            RouteKind::Http => "HTTPRoute",
            RouteKind::Tls => "TLSRoute",
        }
    }
}

/// One `parentRefs` entry with the spec's defaults applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParentRef {
    /// `group` (default `gateway.networking.k8s.io`).
    pub group: String,
    /// `kind` (default `Gateway`).
    pub kind: String,
    /// `namespace` (default: the route's).
    pub namespace: String,
    /// `name`.
    pub name: String,
    /// `sectionName`: a listener name.
    pub section_name: Option<String>,
    /// `port`.
    pub port: Option<i32>,
    /// The entry as written, echoed in `status.parents[].parentRef`.
    pub as_written: serde_json::Value,
}

impl ParentRef {
    /// The Gateway this entry names, if it names one.
    pub fn gateway(&self) -> Option<ObjectKey> {
        (self.group == GROUP && self.kind == "Gateway")
            .then(|| ObjectKey::new(self.namespace.clone(), self.name.clone()))
    }
}

/// The parts of a route every route kind has.
#[derive(Clone, Debug)]
pub struct RouteInfo {
    /// Kind.
    pub kind: RouteKind,
    /// Namespace and name.
    pub key: ObjectKey,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `metadata.creationTimestamp` as RFC 3339 (empty when unset): the older route wins ties.
    pub created: String,
    /// `spec.parentRefs`.
    pub parents: Vec<ParentRef>,
    /// `spec.hostnames`, lower case.
    pub hostnames: Vec<String>,
}

fn parent_refs(route_ns: &str, refs: impl Iterator<Item = serde_json::Value>) -> Vec<ParentRef> {
    refs.map(|v| ParentRef {
        group: v["group"].as_str().unwrap_or(GROUP).to_owned(),
        kind: v["kind"].as_str().unwrap_or("Gateway").to_owned(),
        namespace: v["namespace"].as_str().unwrap_or(route_ns).to_owned(),
        name: v["name"].as_str().unwrap_or_default().to_owned(),
        section_name: v["sectionName"].as_str().map(str::to_owned),
        port: v["port"].as_i64().and_then(|p| i32::try_from(p).ok()),
        as_written: v,
    })
    .collect()
}

fn created<K: ResourceExt>(o: &K) -> String {
    o.meta()
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default()
}

impl RouteInfo {
    /// The common parts of an HTTPRoute.
    pub fn http(r: &HttpRoute) -> RouteInfo {
        let key = ObjectKey::of(r);
        let refs = r
            .spec
            .parent_refs
            .iter()
            .flatten()
            .map(|p| serde_json::to_value(p).unwrap_or_default());
        RouteInfo {
            kind: RouteKind::Http,
            parents: parent_refs(&key.namespace, refs),
            hostnames: lower(r.spec.hostnames.iter().flatten()),
            generation: r.meta().generation,
            created: created(r),
            key,
        }
    }

    /// The common parts of a TLSRoute.
    pub fn tls(r: &TlsRoute) -> RouteInfo {
        let key = ObjectKey::of(r);
        let refs = r
            .spec
            .parent_refs
            .iter()
            .flatten()
            .map(|p| serde_json::to_value(p).unwrap_or_default());
        RouteInfo {
            kind: RouteKind::Tls,
            parents: parent_refs(&key.namespace, refs),
            hostnames: lower(r.spec.hostnames.iter()),
            generation: r.meta().generation,
            created: created(r),
            key,
        }
    }

    /// Precedence between routes: the oldest first, then by namespace/name (Gateway API,
    /// "Conflict resolution").
    pub fn order_key(&self) -> (String, ObjectKey) {
        (self.created.clone(), self.key.clone())
    }
}

fn lower<'a>(hosts: impl Iterator<Item = &'a String>) -> Vec<String> {
    hosts.map(|h| h.to_ascii_lowercase()).collect()
}

impl GatewayInputs {
    /// Whether a ReferenceGrant in `to_namespace` lets a `from_kind` (group `from_group`) in
    /// `from_namespace` refer to the `to_kind` object `to_name` (group `to_group`; core is
    /// `""`). Same-namespace references need no grant.
    pub fn reference_granted(
        &self,
        from: (&str, &str, &str),
        to: (&str, &str, &str, &str),
    ) -> bool {
        let (from_group, from_kind, from_namespace) = from;
        let (to_group, to_kind, to_namespace, to_name) = to;
        if from_namespace == to_namespace {
            return true;
        }
        self.reference_grants
            .iter()
            .filter(|(k, _)| k.namespace == to_namespace)
            .any(|(_, g)| {
                let from_ok = g.spec.from.iter().any(|f| {
                    f.group == from_group && f.kind == from_kind && f.namespace == from_namespace
                });
                let to_ok = g.spec.to.iter().any(|t| {
                    t.group == to_group
                        && t.kind == to_kind
                        && t.name.as_deref().is_none_or(|n| n == to_name)
                });
                from_ok && to_ok
            })
    }

    /// Every route of both kinds, in precedence order (oldest first).
    pub fn routes(&self) -> Vec<RouteInfo> {
        let mut out: Vec<RouteInfo> = self
            .http_routes
            .values()
            .map(|r| RouteInfo::http(r))
            .chain(self.tls_routes.values().map(|r| RouteInfo::tls(r)))
            .collect();
        out.sort_by_key(RouteInfo::order_key);
        out
    }
}
