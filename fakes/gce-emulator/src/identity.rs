//! The emulator as identity provider and IAM enforcer (`--iam`): who a request is
//! ([`Identity::authenticate`], 401) and whether it may ([`Identity::authorize`], 403), over
//! the pure models beside it: [`crate::tokens`] (access tokens, key files, JWTs),
//! [`crate::iam_roles`] (roles), [`crate::iam_policy`] (bindings) and
//! [`crate::iam_permissions`] (the method -> permission table shared with deploy/iam/).
//!
//! HTTP surface (identity_api.rs; docs/emulator.md, "Credentials and IAM"):
//! - `POST /token`: the OAuth 2.0 token endpoint, JWT bearer grant (RFC 7523); the key files'
//!   `token_uri`.
//! - `POST /v1/projects/{p}:getIamPolicy`, `:setIamPolicy`: Resource Manager v1's project
//!   policy, so `gcloud projects add-iam-policy-binding` works against the emulator
//!   (`CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDRESOURCEMANAGER=http://127.0.0.1:PORT/`).
//! - admin, under `/_emulator/iam`: `GET` (custom roles and every binding), `PUT
//!   projects/{p}/roles/{id}` (body: the role's YAML as `gcloud iam roles create --file` reads
//!   it), `GET|POST|DELETE projects/{p}/bindings` (`{"member", "role"}`), `POST
//!   serviceAccounts/{email}/keys` (a key file), `POST serviceAccounts/{email}/tokens`
//!   (`{"lifetimeSec"}` optional: an access token for helper clients), `POST
//!   tokens:revokeAll` (every issued access token is forgotten: its next use is 401).
//!
//! The recent refusals (401 and 403, the last [`RECENT_REFUSALS`]) are kept for the
//! dashboard's "who may do what" page (`/_emulator/dashboard/iam`) and `GET /_emulator/iam`.
//!
//! Without `--iam` tokens are issued all the same and any request is served, authenticated or
//! not (the `--require-token` and `--iam-grant` switches keep their meaning).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::errors::ApiError;
use crate::iam_permissions::Needed;
use crate::iam_policy::Policy;
use crate::tokens::Tokens;

/// How many refusals [`Identity::refusals`] keeps.
pub const RECENT_REFUSALS: usize = 50;

/// One refused call: 401 (no valid token; `permission` and `principal` empty) or 403 (the
/// principal lacks `permission` on `resource`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Refusal {
    /// HTTP status: 401 or 403.
    pub code: u16,
    /// Method id (`compute.backendServices.insert`); empty for a 401, refused before routing.
    pub method: String,
    /// The permission missing (403).
    pub permission: String,
    /// The resource it was checked on (403): `projects/p/global/backendServices/b`.
    pub resource: String,
    /// Who asked (`serviceAccount:EMAIL`, `anonymous`); empty for a 401.
    pub principal: String,
    /// Seconds since the Unix epoch.
    pub at: u64,
}

/// Tokens, roles and bindings of one emulator.
pub struct Identity {
    /// `--iam`: every API call needs a valid token and the permissions its method needs.
    pub enforce: bool,
    tokens: Mutex<Tokens>,
    policy: Mutex<Policy>,
    /// Checks made: principal -> permission -> (granted, denied) counts.
    usage: Mutex<Usage>,
    /// The last [`RECENT_REFUSALS`] refusals, oldest first, and how many 401s in all.
    refusals: Mutex<(VecDeque<Refusal>, u64)>,
}

/// Checks made per principal (`anonymous` without a token) and permission: `(granted, denied)`.
pub type Usage = BTreeMap<String, BTreeMap<String, (u64, u64)>>;

impl Identity {
    /// An identity provider whose tokens live `lifetime` and whose key files name
    /// `token_uri`; `enforce` is `--iam`.
    pub fn new(enforce: bool, lifetime: Duration, token_uri: String) -> Identity {
        Identity {
            enforce,
            tokens: Mutex::new(Tokens::new(lifetime, token_uri)),
            policy: Mutex::new(Policy::default()),
            usage: Mutex::new(BTreeMap::new()),
            refusals: Mutex::new((VecDeque::new(), 0)),
        }
    }

    /// The recent refusals, oldest first, and how many calls were refused 401 since start.
    pub fn refusals(&self) -> (Vec<Refusal>, u64) {
        let r = self.refusals.lock().expect("refusals poisoned");
        (r.0.iter().cloned().collect(), r.1)
    }

    fn refused(&self, refusal: Refusal) {
        let mut r = self.refusals.lock().expect("refusals poisoned");
        if refusal.code == 401 {
            r.1 += 1;
        }
        if r.0.len() == RECENT_REFUSALS {
            r.0.pop_front();
        }
        r.0.push_back(refusal);
    }

    /// Forgets every issued access token ([`Tokens::revoke_all`]); returns how many were live.
    pub fn revoke_all_tokens(&self) -> usize {
        let n = self.tokens().revoke_all();
        tracing::info!(revoked = n, "every issued access token revoked");
        n
    }

    /// The token store (locked).
    pub fn tokens(&self) -> MutexGuard<'_, Tokens> {
        self.tokens.lock().expect("tokens poisoned")
    }

    /// Custom roles and bindings (locked).
    pub fn policy(&self) -> MutexGuard<'_, Policy> {
        self.policy.lock().expect("policy poisoned")
    }

    /// The checks made so far (`GET /_emulator/iam`, `usage`): which permissions each
    /// principal was granted or denied, how often; `reset` clears them.
    pub fn usage(&self, reset: bool) -> Usage {
        let mut u = self.usage.lock().expect("usage poisoned");
        match reset {
            true => std::mem::take(&mut *u),
            false => u.clone(),
        }
    }

    /// A new access token for `email` (the metadata server's): `(token, expires_in seconds)`.
    pub fn issue(&self, email: &str) -> (String, u64) {
        self.tokens.lock().expect("tokens poisoned").issue(email)
    }

    /// How many access tokens were issued so far.
    pub fn issued_count(&self) -> u64 {
        self.tokens.lock().expect("tokens poisoned").issued_count()
    }

    /// The principal of a request: `Ok(None)` when IAM is off or the request carries no
    /// token and IAM lets `allUsers` in later; `Ok(Some("serviceAccount:..."))` for a valid
    /// token.
    ///
    /// Errors: 401 `required` without a token, 401 `authError` naming why a token is refused
    /// (Google's front end answers both in its error shape).
    pub fn authenticate(&self, token: Option<&str>) -> Result<Option<String>, ApiError> {
        if !self.enforce {
            return Ok(None);
        }
        let unauthenticated = Refusal {
            code: 401,
            method: String::new(),
            permission: String::new(),
            resource: String::new(),
            principal: String::new(),
            at: crate::tokens::unix_now(),
        };
        let Some(token) = token else {
            self.refused(unauthenticated);
            return Err(ApiError::new(401, "required", "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential."));
        };
        let principal = self
            .tokens
            .lock()
            .expect("tokens poisoned")
            .principal(token);
        match principal {
            Ok(p) => Ok(Some(p)),
            Err(e) => {
                self.refused(unauthenticated);
                Err(ApiError::new(
                    401,
                    "authError",
                    format!("Request had invalid authentication credentials: {e}. Expected OAuth 2 access token, login cookie or other valid authentication credential."),
                ))
            }
        }
    }

    /// Checks that `principal` holds every permission in `needed`, each in its project, for
    /// a call of `method`; counts each check in [`Self::usage`] and keeps a refusal in
    /// [`Self::refusals`].
    ///
    /// Errors: 403 `forbidden`, Compute's message: `Required 'compute.backendServices.create'
    /// permission for 'projects/p/global/backendServices/x'`.
    pub fn authorize(
        &self,
        method: &str,
        principal: Option<&str>,
        needed: &[Needed],
    ) -> Result<(), ApiError> {
        self.check(method, principal, needed).map_err(|n| {
            ApiError::new(
                403,
                "forbidden",
                format!(
                    "Required '{}' permission for '{}'",
                    n.permission, n.resource
                ),
            )
        })
    }

    /// [`Self::authorize`] without the answer's shape (each API words its 403 its own way):
    /// `Err` is the first permission `principal` lacks.
    pub fn check(
        &self,
        method: &str,
        principal: Option<&str>,
        needed: &[Needed],
    ) -> Result<(), Needed> {
        if !self.enforce {
            return Ok(());
        }
        let policy = self.policy.lock().expect("policy poisoned");
        let refused = needed
            .iter()
            .find(|n| !policy.allows(&n.project, principal, &n.permission));
        drop(policy);
        {
            let mut usage = self.usage.lock().expect("usage poisoned");
            let mine = usage
                .entry(principal.unwrap_or("anonymous").to_string())
                .or_default();
            for n in needed {
                let c = mine.entry(n.permission.clone()).or_default();
                match refused {
                    Some(r) if r.permission == n.permission => c.1 += 1,
                    // Checked in order: those before the refused one were granted.
                    Some(_) => {}
                    None => c.0 += 1,
                }
            }
            if let Some(r) = refused {
                for n in needed.iter().take_while(|n| n.permission != r.permission) {
                    mine.entry(n.permission.clone()).or_default().0 += 1;
                }
            }
        }
        match refused {
            None => Ok(()),
            Some(n) => {
                let who = principal.unwrap_or("anonymous");
                tracing::info!(principal = who, method, permission = %n.permission, resource = %n.resource, "IAM denied");
                self.refused(Refusal {
                    code: 403,
                    method: method.to_string(),
                    permission: n.permission.clone(),
                    resource: n.resource.clone(),
                    principal: who.to_string(),
                    at: crate::tokens::unix_now(),
                });
                Err(n.clone())
            }
        }
    }
}

/// The bearer token of `authorization: Bearer ...`, if any.
pub fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty())
}
