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
pub mod user;

use http::{HeaderMap, Method, Uri};

use crate::status::ApiError;
use crate::store::Store;
pub use rbac::forbidden;
pub use user::{RequestContext, UserInfo};

/// The server's credentials and audit sink.
pub struct Auth {
    /// The admin bearer token written to the kubeconfig.
    pub admin_token: String,
    /// Signs and verifies ServiceAccount tokens.
    pub tokens: tokens::TokenIssuer,
    /// `--audit-log`, when given.
    pub audit: Option<audit::AuditLog>,
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
