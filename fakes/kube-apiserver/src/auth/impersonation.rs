//! Impersonation (`kubectl --as=... --as-group=...`): the `Impersonate-User`,
//! `Impersonate-Group`, `Impersonate-Uid` and `Impersonate-Extra-{key}` headers. Each requested
//! identity part is authorized for the requesting user with verb `impersonate` on `users`,
//! `groups`, `serviceaccounts` (namespaced, for `system:serviceaccount:{ns}:{name}`), `uids` or
//! `userextras/{key}` in the core group; the first refusal is a 403 naming it. The new user gets
//! `system:authenticated` unless a given group says otherwise, and a ServiceAccount without
//! groups its fixed ServiceAccount groups. Port of k8s.io/apiserver
//! `pkg/endpoints/filters/impersonation.go`.

use std::collections::BTreeMap;

use http::HeaderMap;

use super::authn::{
    service_account_groups, split_service_account_username, ANONYMOUS, AUTHENTICATED,
    UNAUTHENTICATED,
};
use super::rbac;
use super::request_info::RequestInfo;
use super::user::UserInfo;
use crate::status::ApiError;
use crate::store::Store;

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA_PREFIX: &str = "impersonate-extra-";

/// One identity part to impersonate, as the authorization check sees it.
struct Part {
    resource: &'static str,
    subresource: String,
    namespace: String,
    name: String,
}

fn percent_decode(s: &str) -> String {
    url::form_urlencoded::parse(format!("k={}", s.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| s.to_string())
}

/// The user the impersonation headers ask for, `None` without such headers.
///
/// Errors: 403 `Forbidden` (`users "x" is forbidden: User "y" cannot impersonate resource
/// "users" in API group "" at the cluster scope`) for the first part not allowed; 500 for
/// groups, uid or extras without a user, as the real server answers.
pub fn apply(
    store: &Store,
    requestor: &UserInfo,
    headers: &HeaderMap,
) -> Result<Option<UserInfo>, ApiError> {
    let user_header = headers
        .get(USER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty());
    let groups_given: Vec<String> = headers
        .get_all(GROUP)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let uid = headers
        .get(UID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty());
    let mut extras: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix(EXTRA_PREFIX) {
            if let Ok(v) = value.to_str() {
                extras
                    .entry(percent_decode(key))
                    .or_default()
                    .push(v.to_string());
            }
        }
    }
    if user_header.is_none() {
        if groups_given.is_empty() && uid.is_none() && extras.is_empty() {
            return Ok(None);
        }
        return Err(ApiError::Internal(
            "requested impersonation of groups, uid or extras without impersonating a user".into(),
        ));
    }
    let user_name = user_header.unwrap_or_default().to_string();
    let mut parts = Vec::new();
    let mut groups = Vec::new();
    match split_service_account_username(&user_name) {
        Some((ns, name)) => {
            parts.push(Part {
                resource: "serviceaccounts",
                subresource: String::new(),
                namespace: ns.into(),
                name: name.into(),
            });
            if groups_given.is_empty() {
                groups = service_account_groups(ns);
            }
        }
        None => parts.push(Part {
            resource: "users",
            subresource: String::new(),
            namespace: String::new(),
            name: user_name.clone(),
        }),
    }
    for g in &groups_given {
        parts.push(Part {
            resource: "groups",
            subresource: String::new(),
            namespace: String::new(),
            name: g.clone(),
        });
        groups.push(g.clone());
    }
    for (key, values) in &extras {
        for v in values {
            parts.push(Part {
                resource: "userextras",
                subresource: key.clone(),
                namespace: String::new(),
                name: v.clone(),
            });
        }
    }
    if let Some(uid) = uid {
        parts.push(Part {
            resource: "uids",
            subresource: String::new(),
            namespace: String::new(),
            name: uid.to_string(),
        });
    }
    for part in parts {
        let info = RequestInfo {
            is_resource_request: true,
            verb: "impersonate".into(),
            api_version: "v1".into(),
            namespace: part.namespace,
            resource: part.resource.into(),
            subresource: part.subresource,
            name: part.name,
            ..Default::default()
        };
        let decision = rbac::authorize(store, requestor, &info);
        if !decision.allowed() {
            return Err(rbac::forbidden(&requestor.name, &info, decision.reason()));
        }
    }
    if user_name != ANONYMOUS {
        if !groups
            .iter()
            .any(|g| g == AUTHENTICATED || g == UNAUTHENTICATED)
        {
            groups.push(AUTHENTICATED.into());
        }
    } else if !groups.iter().any(|g| g == UNAUTHENTICATED) {
        groups.push(UNAUTHENTICATED.into());
    }
    Ok(Some(UserInfo {
        name: user_name,
        uid: uid.unwrap_or_default().to_string(),
        groups,
        extra: extras,
    }))
}
