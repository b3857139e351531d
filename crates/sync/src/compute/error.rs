//! Classified Compute API errors.
//!
//! The Compute API reports errors in two places: the HTTP response of a call (`{"error":{"code",
//! "message","status","errors":[{"reason"}]}}`) and, for mutations, the final Operation
//! (`error.errors[].code` plus `httpErrorStatusCode`). The Rust client's poller returns `Ok` even
//! for a failed DONE Operation (`reference/gce-clients.md`, "Rust gotchas"), so both paths are
//! mapped here into one [`ErrorKind`] that sync decides on.

use google_cloud_compute_v1::model;

/// What kind of failure a Compute call had; sync branches on this, never on message text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// 404 `notFound`: the resource does not exist (a delete of it counts as done).
    NotFound,
    /// 409 `alreadyExists`: an insert raced with another writer or a retried insert.
    AlreadyExists,
    /// 400 `resourceInUseByAnotherResource`: a delete of something still referenced.
    ResourceInUse,
    /// 412 `conditionNotMet`: a stale fingerprint; refetch and try again.
    ConditionNotMet,
    /// 401: the credentials were refused (a revoked, expired or unknown token: Google's reason
    /// `authError`; no token at all: `required`; status `UNAUTHENTICATED`). The Compute seam
    /// builds the credentials again and retries once ([`super::RefreshableCredentials`]).
    Unauthenticated,
    /// 403 `forbidden`: missing permission (for the firewall: the Shared VPC case).
    Forbidden,
    /// `rateLimitExceeded`: 429, or 403 with a quota message (Compute's rate quotas answer 403
    /// `rateLimitExceeded`, "Quota exceeded for quota group ..."): slow down and retry.
    RateLimited,
    /// 5xx `backendError`: retry with backoff.
    Server,
    /// 400 `invalid` and anything else the request itself got wrong.
    Invalid,
    /// No HTTP answer (connection refused, timeout, body that does not parse).
    Transport,
}

impl ErrorKind {
    /// Whether a retry of the same call can succeed (429, 5xx and transport errors).
    pub fn is_retryable(self) -> bool {
        matches!(self, Self::RateLimited | Self::Server | Self::Transport)
    }

    /// The label used in metrics and logs (the Compute `reason` spelling).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotFound => "notFound",
            Self::AlreadyExists => "alreadyExists",
            Self::ResourceInUse => "resourceInUseByAnotherResource",
            Self::ConditionNotMet => "conditionNotMet",
            Self::Unauthenticated => "authError",
            Self::Forbidden => "forbidden",
            Self::RateLimited => "rateLimitExceeded",
            Self::Server => "backendError",
            Self::Invalid => "invalid",
            Self::Transport => "transport",
        }
    }

    /// Classifies an HTTP status code and the error message (the message is consulted only to
    /// tell `resourceInUseByAnotherResource` from other 400s and a rate quota from other 403s,
    /// since the Rust client drops `errors[].reason`).
    pub fn from_http(status: u16, message: &str) -> Self {
        match status {
            404 => Self::NotFound,
            409 => Self::AlreadyExists,
            412 => Self::ConditionNotMet,
            401 => Self::Unauthenticated,
            403 if mentions_rate_quota(message) => Self::RateLimited,
            403 => Self::Forbidden,
            429 => Self::RateLimited,
            500..=599 => Self::Server,
            400 if mentions_in_use(message) => Self::ResourceInUse,
            _ => Self::Invalid,
        }
    }

    /// Classifies a failed Operation from `httpErrorStatusCode` and `error.errors[].code`
    /// (`RESOURCE_IN_USE_BY_ANOTHER_RESOURCE`, `RESOURCE_NOT_FOUND`, ...).
    pub fn from_operation(status: Option<i32>, codes: &[&str], message: &str) -> Self {
        for code in codes {
            let kind = match *code {
                "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE" => Some(Self::ResourceInUse),
                "RESOURCE_NOT_FOUND" | "NOT_FOUND" => Some(Self::NotFound),
                "RESOURCE_ALREADY_EXISTS" | "ALREADY_EXISTS" => Some(Self::AlreadyExists),
                "CONDITION_NOT_MET" => Some(Self::ConditionNotMet),
                "FORBIDDEN" | "PERMISSION_DENIED" => Some(Self::Forbidden),
                "UNAUTHENTICATED" => Some(Self::Unauthenticated),
                "RATE_LIMIT_EXCEEDED" | "QUOTA_EXCEEDED" => Some(Self::RateLimited),
                _ => None,
            };
            if let Some(kind) = kind {
                return kind;
            }
        }
        match status {
            Some(s) => Self::from_http(u16::try_from(s).unwrap_or(500), message),
            None => Self::Invalid,
        }
    }
}

/// Compute's rate-quota refusals: "Quota exceeded for quota metric 'Queries' and limit ...",
/// "Quota exceeded for quota group 'ReadGroup' ...", "Rate Limit Exceeded".
fn mentions_rate_quota(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("quota exceeded for quota") || m.contains("rate limit exceeded")
}

fn mentions_in_use(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("being used by") || m.contains("in use") || m.contains("resourceinuse")
}

/// Result of a Compute call.
pub type Result<T, E = ComputeError> = std::result::Result<T, E>;

/// A failed Compute call, with the method id (`compute.urlMaps.insert`) and the resource.
#[derive(Debug, thiserror::Error)]
pub enum ComputeError {
    /// The API answered the call itself with an error.
    #[error("{method} {resource}: {} (HTTP {status}): {message}", kind.as_str())]
    Api {
        /// Method id, e.g. `compute.urlMaps.insert`.
        method: &'static str,
        /// Resource name the call was about (empty for lists).
        resource: String,
        /// Classification.
        kind: ErrorKind,
        /// HTTP status code.
        status: u16,
        /// The API's message.
        message: String,
    },
    /// The mutation was accepted but its Operation finished with an error.
    #[error("{method} {resource}: operation {operation} failed: {} (HTTP {status}): {message}", kind.as_str())]
    Operation {
        /// Method id of the mutation.
        method: &'static str,
        /// Resource name.
        resource: String,
        /// Operation name.
        operation: String,
        /// Classification.
        kind: ErrorKind,
        /// `httpErrorStatusCode` of the Operation (0 when absent).
        status: i32,
        /// Joined `error.errors[].message`.
        message: String,
    },
    /// The Operation did not reach DONE before the deadline.
    #[error("{method} {resource}: operation {operation} not DONE after {seconds} s")]
    OperationTimeout {
        /// Method id of the mutation.
        method: &'static str,
        /// Resource name.
        resource: String,
        /// Operation name.
        operation: String,
        /// How long we waited, in seconds.
        seconds: u64,
    },
    /// No usable HTTP answer (connection, timeout, decoding).
    #[error("{method} {resource}: transport error: {source}")]
    Transport {
        /// Method id.
        method: &'static str,
        /// Resource name.
        resource: String,
        /// The client error.
        #[source]
        source: google_cloud_gax::error::Error,
    },
    /// A client for one Compute service could not be built (bad endpoint or credentials).
    #[error("building the Compute {service} client: {message}; check --compute-endpoint and the credentials")]
    ClientBuild {
        /// Service name, e.g. `UrlMaps`.
        service: &'static str,
        /// Builder error text.
        message: String,
    },
}

impl ComputeError {
    /// The classification of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Api { kind, .. } | Self::Operation { kind, .. } => *kind,
            Self::OperationTimeout { .. } | Self::Transport { .. } => ErrorKind::Transport,
            Self::ClientBuild { .. } => ErrorKind::Invalid,
        }
    }

    /// Shorthand for `kind() == NotFound`.
    pub fn is_not_found(&self) -> bool {
        self.kind() == ErrorKind::NotFound
    }

    /// Whether the API refused the call's credentials: HTTP 401 (`UNAUTHENTICATED`; Google's
    /// front end answers a revoked, expired or unknown token so). The Compute seam answers it
    /// with one credentials refresh and one retry (compute/credentials.rs).
    pub fn is_unauthenticated(&self) -> bool {
        matches!(self, Self::Api { status: 401, .. })
    }

    /// Maps a client error of `method` on `resource`.
    pub fn from_gax(
        method: &'static str,
        resource: &str,
        err: google_cloud_gax::error::Error,
    ) -> Self {
        match err.http_status_code() {
            Some(status) => {
                let message = err
                    .status()
                    .map(|s| s.message.clone())
                    .or_else(|| {
                        err.http_payload()
                            .map(|p| String::from_utf8_lossy(p).into_owned())
                    })
                    .unwrap_or_else(|| err.to_string());
                Self::Api {
                    method,
                    resource: resource.to_string(),
                    kind: ErrorKind::from_http(status, &message),
                    status,
                    message,
                }
            }
            None => Self::Transport {
                method,
                resource: resource.to_string(),
                source: err,
            },
        }
    }

    /// The error a DONE Operation carries, if any (`error.errors` or `httpErrorStatusCode >= 400`).
    pub fn from_operation(
        method: &'static str,
        resource: &str,
        op: &model::Operation,
    ) -> Option<Self> {
        let errors = op
            .error
            .as_ref()
            .map(|e| e.errors.as_slice())
            .unwrap_or(&[]);
        let status = op.http_error_status_code.filter(|s| *s >= 400);
        if errors.is_empty() && status.is_none() {
            return None;
        }
        let codes: Vec<&str> = errors.iter().filter_map(|e| e.code.as_deref()).collect();
        let mut message = errors
            .iter()
            .filter_map(|e| e.message.as_deref())
            .collect::<Vec<_>>()
            .join("; ");
        if message.is_empty() {
            message = op.http_error_message.clone().unwrap_or_default();
        }
        Some(Self::Operation {
            method,
            resource: resource.to_string(),
            operation: op.name.clone().unwrap_or_default(),
            kind: ErrorKind::from_operation(status, &codes, &message),
            status: status.unwrap_or(0),
            message,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_statuses_classify() {
        assert_eq!(ErrorKind::from_http(404, "x"), ErrorKind::NotFound);
        assert_eq!(ErrorKind::from_http(412, "x"), ErrorKind::ConditionNotMet);
        assert_eq!(ErrorKind::from_http(503, "x"), ErrorKind::Server);
        assert_eq!(ErrorKind::from_http(429, "x"), ErrorKind::RateLimited);
        let quota = "Quota exceeded for quota group 'ReadGroup' and limit 'Read requests per 100 seconds' of service 'compute.googleapis.com' for consumer 'project_number:1'.";
        assert_eq!(ErrorKind::from_http(403, quota), ErrorKind::RateLimited);
        assert_eq!(
            ErrorKind::from_http(403, "Required 'compute.firewalls.create' permission"),
            ErrorKind::Forbidden
        );
        assert_eq!(
            ErrorKind::from_http(
                400,
                "The backend_service resource 'b' is already being used by 'u'"
            ),
            ErrorKind::ResourceInUse
        );
        assert_eq!(ErrorKind::from_http(400, "bad path"), ErrorKind::Invalid);
        assert_eq!(
            ErrorKind::from_http(401, "Request had invalid authentication credentials."),
            ErrorKind::Unauthenticated
        );
        assert_eq!(ErrorKind::Unauthenticated.as_str(), "authError");
        assert!(!ErrorKind::Unauthenticated.is_retryable());
        assert!(ErrorKind::Server.is_retryable());
        assert!(!ErrorKind::ConditionNotMet.is_retryable());
    }

    #[test]
    fn operation_codes_win_over_status() {
        assert_eq!(
            ErrorKind::from_operation(Some(400), &["RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"], ""),
            ErrorKind::ResourceInUse
        );
        assert_eq!(
            ErrorKind::from_operation(Some(409), &["SOMETHING"], ""),
            ErrorKind::AlreadyExists
        );
    }
}
