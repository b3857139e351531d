//! What every handler is given: the server's shared state ([`App`]) and the request's target
//! ([`ResourcePath`], [`Query`]).

use std::collections::HashMap;
use std::sync::Arc;

use crate::auth::Auth;
use crate::openapi::OpenApi;
use crate::store::Store;

/// Shared state of the HTTP handlers.
pub struct App {
    /// The object store (with the registry of served resources).
    pub store: Arc<Store>,
    /// OpenAPI documents and schemas.
    pub openapi: Arc<OpenApi>,
    /// Authentication, authorization and audit.
    pub auth: Arc<Auth>,
    /// `host:port` the server listens on, for `/api`.
    pub server_address: String,
}

/// A parsed resource path.
#[derive(Debug, Clone)]
pub struct ResourcePath {
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Namespace from the path.
    pub namespace: Option<String>,
    /// Plural resource.
    pub plural: String,
    /// Object name.
    pub name: Option<String>,
    /// Subresource (`status`).
    pub subresource: Option<String>,
    /// Legacy `/watch/` path prefix.
    pub watch_prefix: bool,
}

/// Parsed query parameters (last value wins).
pub type Query = HashMap<String, String>;

/// Splits `/api/v1/...` or `/apis/{group}/{version}/...` into a [`ResourcePath`]; `None` for
/// discovery paths and anything else.
pub fn parse_resource_path(app: &App, path: &str) -> Option<ResourcePath> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, mut rest) = match segs.as_slice() {
        ["api", version, rest @ ..] if !rest.is_empty() => ("", *version, rest),
        ["apis", group, version, rest @ ..] if !rest.is_empty() => (*group, *version, rest),
        _ => return None,
    };
    let mut watch_prefix = false;
    if rest.first() == Some(&"watch") {
        watch_prefix = true;
        rest = &rest[1..];
    }
    let registry = &app.store.registry;
    let namespaced_child = rest.len() >= 3
        && rest[0] == "namespaces"
        && registry
            .find(group, version, rest[2])
            .is_some_and(|r| r.namespaced);
    let (namespace, rest) = if namespaced_child {
        (Some(rest[1].to_string()), &rest[2..])
    } else {
        (None, rest)
    };
    if rest.is_empty() || rest.len() > 3 {
        return None;
    }
    Some(ResourcePath {
        group: group.to_string(),
        version: version.to_string(),
        namespace,
        plural: rest[0].to_string(),
        name: rest.get(1).map(|s| s.to_string()),
        subresource: rest.get(2).map(|s| s.to_string()),
        watch_prefix,
    })
}
