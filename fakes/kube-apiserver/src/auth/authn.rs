//! Authentication: who sends a request. As a real kube-apiserver with a static token file,
//! ServiceAccount tokens and anonymous requests enabled (its defaults):
//!
//! - the static admin token of the kubeconfig the server writes: user `admin` (uid `admin-uid`)
//!   in `system:masters` (the line `TOKEN,admin,admin-uid,system:masters` of a
//!   `--token-auth-file`);
//! - a ServiceAccount token (TokenRequest, `kubectl create token`, or a projected volume's
//!   token): user `system:serviceaccount:{ns}:{name}`, uid = the ServiceAccount's uid, groups
//!   `system:serviceaccounts`, `system:serviceaccounts:{ns}`. The ServiceAccount (same uid) and
//!   a bound Pod or Secret must still exist;
//! - no `Authorization: Bearer` header: `system:anonymous` in `system:unauthenticated`;
//! - any other bearer token: `401 Unauthorized`.
//!
//! Every authenticated user also gets `system:authenticated`. Source: k8s.io/apiserver
//! `pkg/authentication` (group adder, anonymous authenticator) and k8s.io/kubernetes
//! `pkg/serviceaccount/jwt.go`, `legacy.go` (the checks of the bound objects).

use http::{header, HeaderMap};
use serde_json::Value;

use super::tokens::{TokenError, TokenIssuer, ISSUER};
use super::user::UserInfo;
use crate::store::Store;

/// The admin user of the kubeconfig the server writes.
pub const ADMIN_USER: &str = "admin";
/// Its uid (as in the envtest convention's token file).
pub const ADMIN_UID: &str = "admin-uid";
/// The group RBAC never restricts.
pub const MASTERS: &str = "system:masters";
/// Added to every authenticated user.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of anonymous requests.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user of requests without credentials.
pub const ANONYMOUS: &str = "system:anonymous";

/// `system:serviceaccount:{namespace}:{name}`.
pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// Splits `system:serviceaccount:{namespace}:{name}` into namespace and name.
pub fn split_service_account_username(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

/// The groups of every ServiceAccount in `namespace`.
pub fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{namespace}"),
    ]
}

/// The admin identity.
pub fn admin() -> UserInfo {
    UserInfo {
        name: ADMIN_USER.into(),
        uid: ADMIN_UID.into(),
        groups: vec![MASTERS.into(), AUTHENTICATED.into()],
        ..Default::default()
    }
}

/// The anonymous identity.
pub fn anonymous() -> UserInfo {
    UserInfo {
        name: ANONYMOUS.into(),
        groups: vec![UNAUTHENTICATED.into()],
        ..Default::default()
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Checks a ServiceAccount token against the signing key and the live objects; returns the user.
///
/// Errors: [`TokenError`] when the signature, expiry or audience is wrong, or the
/// ServiceAccount (or the Pod or Secret it is bound to) is gone or was recreated.
pub fn service_account_user(
    issuer: &TokenIssuer,
    store: &Store,
    token: &str,
) -> Result<UserInfo, TokenError> {
    let claims = issuer.verify(token, ISSUER)?;
    let k = &claims.kubernetes;
    let uid_of = |storage: &str, name: &str| -> Option<String> {
        store
            .get_stored(storage, &k.namespace, name)
            .filter(|o: &Value| o["metadata"]["deletionTimestamp"].is_null())
            .and_then(|o| o["metadata"]["uid"].as_str().map(str::to_string))
    };
    let sa = &k.serviceaccount;
    if uid_of("/serviceaccounts", &sa.name).as_deref() != Some(sa.uid.as_str()) {
        return Err(TokenError::Invalid(format!(
            "service account {}/{} has been deleted",
            k.namespace, sa.name
        )));
    }
    for (storage, bound) in [("/pods", &k.pod), ("/secrets", &k.secret)] {
        if let Some(b) = bound {
            if uid_of(storage, &b.name).as_deref() != Some(b.uid.as_str()) {
                return Err(TokenError::Invalid(format!(
                    "the object {} the token is bound to has been deleted",
                    b.name
                )));
            }
        }
    }
    let mut groups = service_account_groups(&k.namespace);
    groups.push(AUTHENTICATED.into());
    Ok(UserInfo {
        name: service_account_username(&k.namespace, &sa.name),
        uid: sa.uid.clone(),
        groups,
        ..Default::default()
    })
}

/// Authenticates a request from its headers.
///
/// Errors: [`TokenError`] for a bearer token that is neither the admin token nor a valid
/// ServiceAccount token (the caller answers 401).
pub fn authenticate(
    admin_token: &str,
    issuer: &TokenIssuer,
    store: &Store,
    headers: &HeaderMap,
) -> Result<UserInfo, TokenError> {
    let Some(token) = bearer(headers) else {
        return Ok(anonymous());
    };
    if token == admin_token {
        return Ok(admin());
    }
    service_account_user(issuer, store, token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_account_names_round_trip() {
        let u = service_account_username("gclb-operator", "gclb-operator");
        assert_eq!(u, "system:serviceaccount:gclb-operator:gclb-operator");
        assert_eq!(
            split_service_account_username(&u),
            Some(("gclb-operator", "gclb-operator"))
        );
        assert_eq!(split_service_account_username("admin"), None);
        assert_eq!(
            split_service_account_username("system:serviceaccount:a"),
            None
        );
    }
}
