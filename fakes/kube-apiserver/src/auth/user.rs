//! Who is asking: the user a request authenticated as ([`UserInfo`]) and, with impersonation,
//! the user it acts as ([`RequestContext`]).

use std::collections::BTreeMap;

use super::request_info::RequestInfo;

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
