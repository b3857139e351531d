//! Authentication, impersonation, RBAC authorization and audit of every request, in the order
//! a real kube-apiserver's filter chain runs them (authentication, audit, impersonation,
//! authorization), plus the API kinds that expose them: TokenRequest
//! (`serviceaccounts/{name}/token`), TokenReview, SelfSubjectAccessReview,
//! SubjectAccessReview, LocalSubjectAccessReview and SelfSubjectRulesReview (`reviews`).
//!
//! - [`authn`]: the admin token, ServiceAccount tokens ([`tokens`]) and anonymous requests.
//! - [`impersonation`]: `Impersonate-*` headers.
//! - [`request_info`]: verb/resource/namespace/name of a request.
//! - [`rbac`]: the authorizer over stored Roles, ClusterRoles and their bindings.
//! - [`bootstrap`]: the default ClusterRoles and bindings every real server creates.
//! - [`audit`]: the `--audit-log` writer (audit.k8s.io/v1 `Event` lines).

pub mod audit;
pub mod authn;
pub mod bootstrap;
pub mod impersonation;
pub mod rbac;
pub mod request_info;
pub mod reviews;
pub mod tokens;

use std::collections::BTreeMap;

use http::{HeaderMap, Method, Uri};

use crate::status::ApiError;
use crate::store::Store;
use request_info::RequestInfo;

/// An authenticated (or anonymous) user, `user.Info` of k8s.io/apiserver.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// User name, e.g. `admin` or `system:serviceaccount:ns:sa`.
    pub name: String,
    /// Uid (may be empty).
    pub uid: String,
    /// Groups, `system:authenticated` included for authenticated users.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The server's credentials and audit sink.
pub struct Auth {
    /// The admin bearer token written to the kubeconfig.
    pub admin_token: String,
    /// Signs and verifies ServiceAccount tokens.
    pub tokens: tokens::TokenIssuer,
    /// `--audit-log`, when given.
    pub audit: Option<audit::AuditLog>,
}

/// Who is asking what: the outcome of authentication and impersonation.
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// The authenticated user.
    pub authenticated: UserInfo,
    /// The impersonated user, when the request impersonates.
    pub impersonated: Option<UserInfo>,
    /// What the request asks to do.
    pub info: RequestInfo,
    /// Whether authorization allowed the request (audit annotation).
    pub allowed: bool,
    /// The authorization decision's reason (audit annotation).
    pub reason: String,
}

impl RequestContext {
    /// The user the request acts as (impersonated, else authenticated).
    pub fn user(&self) -> &UserInfo {
        self.impersonated.as_ref().unwrap_or(&self.authenticated)
    }
}

/// A 403 for `user` asking `info`, with the authorizer's `reason` appended as `: reason`, in
/// `responsewriters.Forbidden`'s format.
pub fn forbidden(user: &str, info: &RequestInfo, reason: &str) -> ApiError {
    let mut message = rbac::forbidden_message(user, info);
    if !reason.is_empty() {
        message = format!("{message}: {reason}");
    }
    ApiError::ForbiddenResource {
        group: info.api_group.clone(),
        resource: info.resource.clone(),
        name: info.name.clone(),
        message,
    }
}

impl Auth {
    /// Authenticates, applies impersonation and authorizes one request. The context is
    /// returned with the error too (for the audit log), when the user is known.
    ///
    /// Errors: 401 for a bad bearer token; 403 for a refused impersonation or request.
    pub fn check(
        &self,
        store: &Store,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
    ) -> (Option<RequestContext>, Result<(), ApiError>) {
        let info = request_info::resolve(method, uri);
        let authenticated =
            match authn::authenticate(&self.admin_token, &self.tokens, store, headers) {
                Ok(u) => u,
                Err(e) => {
                    tracing::debug!(error = %e, "authentication failed");
                    return (None, Err(ApiError::Unauthorized));
                }
            };
        let mut ctx = RequestContext {
            authenticated: authenticated.clone(),
            impersonated: None,
            info,
            allowed: false,
            reason: String::new(),
        };
        match impersonation::apply(store, &authenticated, headers) {
            Ok(u) => ctx.impersonated = u,
            Err(e) => return (Some(ctx), Err(e)),
        }
        let decision = rbac::authorize(store, ctx.user(), &ctx.info);
        ctx.reason = decision.reason().to_string();
        ctx.allowed = decision.allowed();
        if decision.allowed() {
            (Some(ctx), Ok(()))
        } else {
            let err = forbidden(&ctx.user().name, &ctx.info, decision.reason());
            (Some(ctx), Err(err))
        }
    }
}
