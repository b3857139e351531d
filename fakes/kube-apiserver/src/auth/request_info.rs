//! What a request asks to do, in the terms authorization and audit use: verb, API group,
//! version, resource, subresource, namespace and name for resource requests; lower-case HTTP
//! method and path for everything else. A port of k8s.io/apiserver's
//! `endpoints/request/requestinfo.go` (`RequestInfoFactory.NewRequestInfo`), so the verbs agree
//! with a real server's: `GET` of a collection is `list` (or `watch` with `watch=true`, or under
//! the legacy `/watch/` prefix), `DELETE` of a collection is `deletecollection`, a
//! `metadata.name=X` field selector on a list or watch names the object (so `resourceNames`
//! rules apply), and `/api/v1/namespaces/{name}` is in namespace `{name}`.

use http::{Method, Uri};

use crate::selectors::FieldSelector;

/// The attributes of one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// `true` for `/api/{version}/...` and `/apis/{group}/{version}/...` paths with a resource.
    pub is_resource_request: bool,
    /// The URL path, as non-resource rules match it (e.g. `/healthz`).
    pub path: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection` for
    /// resource requests; the lower-case HTTP method (`get`, `post`...) otherwise.
    pub verb: String,
    /// API group (`""` for core).
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Namespace (`""` when cluster-scoped or across all namespaces).
    pub namespace: String,
    /// Plural resource, e.g. `ingresses`.
    pub resource: String,
    /// Subresource, e.g. `status`, `token`.
    pub subresource: String,
    /// Object name (`""` for collections).
    pub name: String,
}

impl RequestInfo {
    /// `resource/subresource` or just `resource`, as RBAC rules name it.
    pub fn combined_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

fn split_path(path: &str) -> Vec<&str> {
    let trimmed = path.trim_matches('/');
    if trimmed.is_empty() {
        Vec::new()
    } else {
        trimmed.split('/').collect()
    }
}

/// The value of the first `key` query parameter.
fn query_param(uri: &Uri, key: &str) -> Option<String> {
    url::form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

/// Whether a name may be a path segment (`path.IsValidPathSegmentName`).
fn valid_path_segment(name: &str) -> bool {
    name != "." && name != ".." && !name.contains('/') && !name.contains('%')
}

/// Derives the request attributes from method and URL alone, as the real server does before it
/// knows which resources exist.
pub fn resolve(method: &Method, uri: &Uri) -> RequestInfo {
    let path = uri.path().to_string();
    let mut info = RequestInfo {
        path: path.clone(),
        verb: method.as_str().to_ascii_lowercase(),
        ..Default::default()
    };
    let mut parts = split_path(&path);
    if parts.len() < 3 || !matches!(parts[0], "api" | "apis") {
        return info;
    }
    let prefix = parts[0];
    parts.remove(0);
    if prefix == "apis" {
        if parts.len() < 3 {
            return info;
        }
        info.api_group = parts.remove(0).to_string();
    }
    info.is_resource_request = true;
    info.api_version = parts.remove(0).to_string();
    if matches!(parts[0], "watch" | "proxy") {
        if parts.len() < 2 {
            return info;
        }
        info.verb = parts.remove(0).to_string();
    } else {
        info.verb = match *method {
            Method::POST => "create",
            Method::GET | Method::HEAD => "get",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => "",
        }
        .to_string();
    }
    if parts[0] == "namespaces" && parts.len() > 1 {
        info.namespace = parts[1].to_string();
        if parts.len() > 2 && !matches!(parts[2], "status" | "finalize") {
            parts.drain(..2);
        }
    }
    if parts.len() >= 3 && info.verb != "proxy" {
        info.subresource = parts[2].to_string();
    }
    if parts.len() >= 2 {
        info.name = parts[1].to_string();
    }
    if !parts.is_empty() {
        info.resource = parts[0].to_string();
    }
    if info.name.is_empty() && info.verb == "get" {
        let watch = query_param(uri, "watch")
            .is_some_and(|w| !matches!(w.to_ascii_lowercase().as_str(), "false" | "0" | ""));
        info.verb = if watch { "watch" } else { "list" }.to_string();
        if let Some(selector) = query_param(uri, "fieldSelector") {
            if let Ok(fields) = FieldSelector::parse(&selector) {
                if let Some(name) = fields.name().filter(|n| valid_path_segment(n)) {
                    info.name = name.to_string();
                }
            }
        }
    }
    if info.name.is_empty() && info.verb == "delete" {
        info.verb = "deletecollection".into();
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: Method, uri: &str) -> RequestInfo {
        resolve(&method, &uri.parse().unwrap())
    }

    #[test]
    fn verbs_follow_the_real_request_info_factory() {
        let i = info(
            Method::GET,
            "/apis/networking.k8s.io/v1/namespaces/a/ingresses",
        );
        assert_eq!(
            (i.verb.as_str(), i.api_group.as_str(), i.namespace.as_str()),
            ("list", "networking.k8s.io", "a")
        );
        let i = info(Method::GET, "/api/v1/pods?watch=true");
        assert_eq!((i.verb.as_str(), i.namespace.as_str()), ("watch", ""));
        let i = info(Method::GET, "/api/v1/watch/namespaces/a/pods/p");
        assert_eq!((i.verb.as_str(), i.name.as_str()), ("watch", "p"));
        let i = info(
            Method::PATCH,
            "/apis/networking.k8s.io/v1/namespaces/a/ingresses/x/status",
        );
        assert_eq!(i.combined_resource(), "ingresses/status");
        assert_eq!((i.verb.as_str(), i.name.as_str()), ("patch", "x"));
        let i = info(Method::DELETE, "/api/v1/namespaces/a/pods");
        assert_eq!(i.verb, "deletecollection");
        let i = info(
            Method::GET,
            "/apis/coordination.k8s.io/v1/namespaces/a/leases?fieldSelector=metadata.name%3Dl",
        );
        assert_eq!((i.verb.as_str(), i.name.as_str()), ("list", "l"));
        let i = info(Method::GET, "/api/v1/namespaces/kube-system");
        assert_eq!(
            (
                i.verb.as_str(),
                i.resource.as_str(),
                i.name.as_str(),
                i.namespace.as_str()
            ),
            ("get", "namespaces", "kube-system", "kube-system")
        );
        let i = info(
            Method::POST,
            "/api/v1/namespaces/a/serviceaccounts/sa/token",
        );
        assert_eq!(i.combined_resource(), "serviceaccounts/token");
    }

    #[test]
    fn discovery_and_health_are_not_resource_requests() {
        for p in [
            "/api",
            "/api/v1",
            "/apis/apps",
            "/apis/apps/v1",
            "/healthz",
            "/openapi/v2",
        ] {
            let i = info(Method::GET, p);
            assert!(!i.is_resource_request, "{p}");
            assert_eq!(i.verb, "get");
        }
    }
}
