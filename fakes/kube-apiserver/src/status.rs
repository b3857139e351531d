//! API errors and their wire shape: a `meta.k8s.io/v1` `Status` object with `reason`, `code`
//! and `details`, as the Kubernetes API conventions define them.

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::{json, Value};

use crate::crd_validation::FieldError;

/// `Kind.group` (just `Kind` for core), as the real server names kinds in `Invalid` messages.
fn qualified_kind(kind: &str, group: &str) -> String {
    if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    }
}

/// One cause as is, several as `[a, b]` (the aggregate format of the real server).
/// Identical lines are shown once, as Go's `utilerrors.Aggregate` does.
fn joined(causes: &[FieldError]) -> String {
    let mut lines: Vec<String> = Vec::new();
    for line in causes.iter().map(FieldError::to_line) {
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    if lines.len() == 1 {
        lines[0].clone()
    } else {
        format!("[{}]", lines.join(", "))
    }
}

fn forbidden_text(group: &str, resource: &str, name: &str, message: &str) -> String {
    let qualified = if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    };
    if qualified.is_empty() {
        format!("forbidden: {message}")
    } else if name.is_empty() {
        format!("{qualified} is forbidden: {message}")
    } else {
        format!("{qualified} {name:?} is forbidden: {message}")
    }
}

/// An error returned to an API client. Each variant maps to one HTTP code and `Status.reason`.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// 401 `Unauthorized`: missing or wrong bearer token.
    #[error("Unauthorized")]
    Unauthorized,
    /// 404 `NotFound`: `{resource} "{name}" not found`.
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        /// Resource plural with group, e.g. `ingresses.networking.k8s.io`.
        resource: String,
        /// Object name.
        name: String,
        /// Group and kind for `details`.
        group: String,
    },
    /// 404 for a path that names no resource.
    #[error("the server could not find the requested resource")]
    NoRoute,
    /// 409 `AlreadyExists`.
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists {
        /// Resource plural with group.
        resource: String,
        /// Object name.
        name: String,
        /// API group.
        group: String,
    },
    /// 409 `Conflict`: stale resourceVersion.
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {message}")]
    Conflict {
        /// Resource plural with group.
        resource: String,
        /// Object name.
        name: String,
        /// API group.
        group: String,
        /// Why, e.g. "the object has been modified; please apply your changes to the latest version and try again".
        message: String,
    },
    /// 409 `Conflict` of server-side apply: fields another manager owns
    /// ([`crate::managed_fields::conflicts`]); `details` hold only the causes.
    #[error("{message}")]
    ApplyConflict {
        /// `Apply failed with 1 conflict: conflict with "m" using v1: .data.k`.
        message: String,
        /// One per conflicting field (`reason: FieldManagerConflict`).
        causes: Vec<FieldError>,
    },
    /// 422 `Invalid`: `{Kind}[.{group}] "{name}" is invalid: {field}: {message}`.
    #[error(
        "{} \"{name}\" is invalid: {field}: {message}",
        qualified_kind(kind, group)
    )]
    Invalid {
        /// Kind of the object.
        kind: String,
        /// Object name.
        name: String,
        /// API group.
        group: String,
        /// JSON path of the offending field, e.g. `metadata.name`.
        field: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// 422 `Invalid` with one cause per field error (schema validation of custom resources):
    /// `{Kind}.{group} "{name}" is invalid: {field}: {message}` or `...: [cause, cause]`.
    #[error(
        "{} \"{name}\" is invalid: {}",
        qualified_kind(kind, group),
        joined(causes)
    )]
    InvalidFields {
        /// Kind of the object.
        kind: String,
        /// Object name.
        name: String,
        /// API group.
        group: String,
        /// The field errors, at least one.
        causes: Vec<FieldError>,
    },
    /// 400 `BadRequest`.
    #[error("{0}")]
    BadRequest(String),
    /// 403 `Forbidden` (e.g. creating in a namespace that is terminating).
    #[error("{0}")]
    Forbidden(String),
    /// 403 `Forbidden` about a resource, as `apierrors.NewForbidden` words it:
    /// `{resource}.{group} "{name}" is forbidden: {message}` (without ` "{name}"` when the name
    /// is empty, and just `forbidden: {message}` when the resource is empty), with `details`
    /// naming group, resource (as `kind`) and name.
    #[error("{}", forbidden_text(group, resource, name, message))]
    ForbiddenResource {
        /// API group.
        group: String,
        /// Plural resource (`""` for non-resource requests).
        resource: String,
        /// Object name (may be empty).
        name: String,
        /// Why, e.g. `User "u" cannot get resource "pods" in API group "" in the namespace "a"`.
        message: String,
    },
    /// 405 `MethodNotAllowed`.
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    /// 406 `NotAcceptable`.
    #[error("{0}")]
    NotAcceptable(String),
    /// 410 `Expired`: a watch or list continue token older than the retained history.
    #[error("{0}")]
    Expired(String),
    /// 415 `UnsupportedMediaType`.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 500 `InternalError`.
    #[error("Internal error occurred: {0}")]
    Internal(String),
    /// 500 with no `reason`: a plain error the real server does not classify (its
    /// `ErrorToAPIStatus` gives it `StatusReasonUnknown`, which is empty and left out of the
    /// `Status`), e.g. server-side apply's `failed to create typed patch object (...)`.
    #[error("{0}")]
    Unclassified(String),
}

impl ApiError {
    /// The HTTP status code.
    pub fn code(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::NotFound { .. } | ApiError::NoRoute => StatusCode::NOT_FOUND,
            ApiError::AlreadyExists { .. }
            | ApiError::Conflict { .. }
            | ApiError::ApplyConflict { .. } => StatusCode::CONFLICT,
            ApiError::Invalid { .. } | ApiError::InvalidFields { .. } => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Forbidden(_) | ApiError::ForbiddenResource { .. } => StatusCode::FORBIDDEN,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            ApiError::Expired(_) => StatusCode::GONE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Internal(_) | ApiError::Unclassified(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The `Status.reason` value (empty for [`ApiError::Unclassified`], which has none).
    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::Unauthorized => "Unauthorized",
            ApiError::NotFound { .. } | ApiError::NoRoute => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } | ApiError::ApplyConflict { .. } => "Conflict",
            ApiError::Invalid { .. } | ApiError::InvalidFields { .. } => "Invalid",
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::Forbidden(_) | ApiError::ForbiddenResource { .. } => "Forbidden",
            ApiError::MethodNotAllowed => "MethodNotAllowed",
            ApiError::NotAcceptable(_) => "NotAcceptable",
            ApiError::Expired(_) => "Expired",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::Internal(_) => "InternalError",
            ApiError::Unclassified(_) => "",
        }
    }

    /// The `Status` object (`kind: Status`, `status: Failure`).
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code().as_u16(),
        });
        if self.reason().is_empty() {
            status.as_object_mut().map(|s| s.remove("reason"));
        }
        let details = match self {
            ApiError::NotFound {
                resource,
                name,
                group,
            }
            | ApiError::AlreadyExists {
                resource,
                name,
                group,
            }
            | ApiError::Conflict {
                resource,
                name,
                group,
                ..
            } => Some(json!({
                "name": name, "group": group, "kind": resource.split('.').next().unwrap_or(resource),
            })),
            ApiError::ForbiddenResource {
                group,
                resource,
                name,
                ..
            } => {
                let mut d = serde_json::Map::new();
                if !name.is_empty() {
                    d.insert("name".into(), json!(name));
                }
                if !group.is_empty() {
                    d.insert("group".into(), json!(group));
                }
                if !resource.is_empty() {
                    d.insert("kind".into(), json!(resource));
                }
                Some(Value::Object(d))
            }
            ApiError::Invalid {
                kind,
                name,
                group,
                field,
                message,
            } => Some(json!({
                "name": name, "group": group, "kind": kind,
                "causes": [{"reason": "FieldValueInvalid", "message": message, "field": field}],
            })),
            ApiError::ApplyConflict { causes, .. } => {
                let causes: Vec<Value> = causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect();
                Some(json!({"causes": causes}))
            }
            ApiError::InvalidFields {
                kind,
                name,
                group,
                causes,
            } => {
                let causes: Vec<Value> = causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect();
                Some(json!({"name": name, "group": group, "kind": kind, "causes": causes}))
            }
            _ => None,
        };
        if let Some(details) = details {
            status["details"] = details;
        }
        status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.to_status()).unwrap_or_default();
        (
            self.code(),
            [(http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    }
}

/// A `Status` with `status: Success`, as returned by some deletes.
pub fn success(kind: &str, name: &str, group: &str, uid: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": name, "group": group, "kind": kind, "uid": uid},
    })
}
