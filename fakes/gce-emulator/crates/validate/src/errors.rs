//! Errors in Google's JSON error shape, as every Compute API v1 client parses them.
//!
//! Shape (reference/gce-clients.md, "Shared rules"):
//! `{"error":{"code":404,"message":"...","status":"NOT_FOUND","errors":[{"message":"...","domain":"global","reason":"notFound"}]}}`.
//! `status` is required: the Rust client maps only `error.status` to its error code.

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::{json, Value};

/// One API error: HTTP status, Google `reason` and a message that names the object and field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code (400, 404, 409, 412, ...).
    pub code: u16,
    /// Google error reason (`notFound`, `alreadyExists`, `invalid`, ...).
    pub reason: String,
    /// Human-readable message, printed by gcloud as is.
    pub message: String,
    /// The request field at fault (`resource.name`), reported as a `fieldViolations` detail.
    pub field: Option<String>,
    /// No answer at all: over HTTP the connection is closed without a response (fault
    /// injection's `drop`); inside a batch the part reads as this 503.
    pub dropped: bool,
    /// `google.rpc` details (`ErrorInfo` ...) of an API that answers a bare `google.rpc.Status`
    /// (the Network Services API's 403): when set, the body is `{code, message, status,
    /// details}` with no Compute-style `errors[]`.
    pub details: Vec<Value>,
}

impl ApiError {
    /// An error with any code and reason (used by fault injection too).
    pub fn new(code: u16, reason: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason: reason.into(),
            message: message.into(),
            field: None,
            dropped: false,
            details: Vec::new(),
        }
    }

    /// No answer for a call of `method`: the connection closes (see `dropped`).
    pub fn dropped(method: &str) -> ApiError {
        ApiError {
            dropped: true,
            ..ApiError::new(
                503,
                "backendError",
                format!("Injected fault: {method} got no answer"),
            )
        }
    }

    /// 404 `notFound` for the resource `key` (`projects/p/global/urlMaps/um1`), in the real text.
    pub fn not_found(key: &str) -> ApiError {
        ApiError::new(
            404,
            "notFound",
            format!("The resource '{key}' was not found"),
        )
    }

    /// 409 `alreadyExists` for the resource `key`.
    pub fn already_exists(key: &str) -> ApiError {
        ApiError::new(
            409,
            "alreadyExists",
            format!("The resource '{key}' already exists"),
        )
    }

    /// 400 `resourceInUseByAnotherResource`: `key` is referenced by `user`.
    pub fn in_use(key: &str, user: &str) -> ApiError {
        ApiError::new(
            400,
            "resourceInUseByAnotherResource",
            format!("The resource '{key}' is already being used by '{user}'"),
        )
    }

    /// 400 `invalid` for `field` (`resource.name`) holding `value`, with the rule it broke.
    pub fn invalid_value(field: &str, value: &str, why: &str) -> ApiError {
        ApiError {
            field: Some(field.to_string()),
            ..ApiError::new(
                400,
                "invalid",
                format!("Invalid value for field '{field}': '{value}'. {why}"),
            )
        }
    }

    /// 400 `required`: `field` is missing.
    pub fn required(field: &str) -> ApiError {
        ApiError {
            field: Some(field.to_string()),
            ..ApiError::new(
                400,
                "required",
                format!("Required field '{field}' not specified"),
            )
        }
    }

    /// 400 `invalid` for an enum value outside the documented set, as Google's JSON decoder
    /// reports it (`Invalid value at 'resource.protocol' (...), "FOO"`), plus the allowed values.
    pub fn bad_enum(field: &str, value: &str, allowed: &[&str]) -> ApiError {
        ApiError {
            field: Some(field.to_string()),
            ..ApiError::new(
                400,
                "invalid",
                format!(
                    "Invalid value at '{field}' (TYPE_ENUM), \"{value}\"; expected one of {}",
                    allowed.join(", ")
                ),
            )
        }
    }

    /// 400 `parseError`: the body is not JSON of the expected shape.
    pub fn parse(detail: &str) -> ApiError {
        ApiError::new(
            400,
            "parseError",
            format!("Invalid JSON payload received. {detail}"),
        )
    }

    /// 412 `conditionNotMet`: the request's `field` fingerprint is stale.
    pub fn stale_fingerprint(field: &str, key: &str) -> ApiError {
        ApiError {
            field: Some(field.to_string()),
            ..ApiError::new(
                412,
                "conditionNotMet",
                format!(
                    "Invalid fingerprint. Supplied {field} does not match the current {field} of '{key}'; get the resource again and retry"
                ),
            )
        }
    }

    /// The canonical status name for the HTTP code (`NOT_FOUND`), as Google sends in `error.status`.
    pub fn status(&self) -> &'static str {
        canonical_status(self.code)
    }

    /// The error body.
    pub fn to_json(&self) -> Value {
        if !self.details.is_empty() {
            return json!({"error": {
                "code": self.code,
                "message": self.message,
                "status": self.status(),
                "details": self.details,
            }});
        }
        let mut err = json!({
            "code": self.code,
            "message": self.message,
            "status": self.status(),
            "errors": [{"message": self.message, "domain": "global", "reason": self.reason}],
        });
        if let Some(field) = &self.field {
            err["details"] = json!([{
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{"field": field, "description": self.message}],
            }]);
        }
        json!({ "error": err })
    }

    /// The HTTP status code, falling back to 500 for out-of-range codes.
    pub fn http_status(&self) -> StatusCode {
        StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

/// Google's canonical status name for an HTTP status code (google.rpc.Code mapping).
pub fn canonical_status(code: u16) -> &'static str {
    match code {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ALREADY_EXISTS",
        412 => "FAILED_PRECONDITION",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        501 => "UNIMPLEMENTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        500..=599 => "INTERNAL",
        _ => "UNKNOWN",
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.dropped {
            // A body that fails before its first byte: hyper closes the connection, and the
            // client gets no complete answer.
            let fail = futures::stream::once(async {
                Err::<bytes::Bytes, _>(std::io::Error::other("injected: no answer"))
            });
            return (
                StatusCode::OK,
                [(http::header::CONTENT_LENGTH, "2")],
                axum::body::Body::from_stream(fail),
            )
                .into_response();
        }
        (self.http_status(), axum::Json(self.to_json())).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_body_has_status_reason_and_field() {
        let e = ApiError::invalid_value("resource.name", "Bad", "Must be a match of regex");
        let v = e.to_json();
        assert_eq!(v["error"]["code"], 400);
        assert_eq!(v["error"]["status"], "INVALID_ARGUMENT");
        assert_eq!(v["error"]["errors"][0]["reason"], "invalid");
        assert_eq!(
            v["error"]["details"][0]["fieldViolations"][0]["field"],
            "resource.name"
        );
        assert_eq!(
            ApiError::not_found("projects/p/global/urlMaps/x").to_json()["error"]["status"],
            "NOT_FOUND"
        );
    }
}
