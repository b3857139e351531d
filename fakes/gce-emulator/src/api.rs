//! The HTTP surface: `/compute/{v1,beta,alpha}/...` (the API, one store seen through each
//! version), `POST /batch/compute/{version}` (gcloud's batch),
//! `/_emulator/...` (admin), the metadata server (`/computeMetadata/v1/...`), the OAuth token
//! endpoint (`/token`) and Resource Manager's project policy (`/v1/projects/P:getIamPolicy`).
//! Auth is optional (`--require-token`, `--iam`: identity.rs); the Host header is ignored,
//! since the Rust client sends it without a port (reference/gce-clients.md).

use std::sync::Arc;

use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, post};
use axum::Router;
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode, Uri};
use serde_json::Value;

use crate::emulator::{ApiRequest, Emulator};
use crate::errors::ApiError;

/// Largest request body accepted, in bytes (10 MiB): Google's API front end refuses a larger
/// payload with 400 `Request payload size exceeds the limit: 10485760 bytes.`
pub const MAX_REQUEST_BYTES: usize = 10 * 1024 * 1024;

/// The whole router.
pub fn router(emu: Arc<Emulator>) -> Router {
    let issuer_emu = Arc::clone(&emu);
    let issue: crate::metadata::Issuer = Arc::new(move |email| issuer_emu.identity.issue(email));
    let r = Router::new().merge(crate::metadata::router(emu.config.metadata.clone(), issue));
    crate::identity_api::root_routes(r)
        .route("/compute/{version}/{*path}", any(compute))
        .route("/networkservices/v1/{*path}", any(network_services))
        .route("/batch/compute/{version}", post(crate::batch::handle))
        .route("/batch", post(crate::batch::handle))
        .route("/v2/entries:list", post(crate::logging_api::entries_list))
        .nest("/_emulator", crate::admin::router())
        .fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_REQUEST_BYTES))
        .with_state(emu)
}

async fn not_found(uri: Uri) -> Response {
    ApiError::new(
        404,
        "notFound",
        format!(
            "The requested URL {} was not found on this server.",
            uri.path()
        ),
    )
    .into_response()
}

/// Checks `authorization: Bearer ...` when `--require-token` or `--iam` is set (with `--iam`,
/// the token must be one the emulator issued and not expired, identity.rs). Errors: 401 in
/// Google's shape.
pub fn check_auth(emu: &Emulator, headers: &HeaderMap) -> Result<(), ApiError> {
    emu.identity.authenticate(bearer_token(headers))?;
    let Some(required) = &emu.config.require_token else {
        return Ok(());
    };
    let token = bearer_token(headers);
    match (token, required) {
        (None, _) => Err(ApiError::new(401, "required", "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential.")),
        (Some(t), Some(want)) if t != want => Err(ApiError::new(401, "authError", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")),
        _ => Ok(()),
    }
}

/// The bearer token of `authorization: Bearer ...`, if any.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    crate::identity::bearer_token(headers)
}

/// Percent-decodes each segment of a request path, as Google's front end does
/// (`urlMaps/x%2Dcanary` names `x-canary`). A segment whose escapes decode to a `/` or to
/// invalid UTF-8 is left as sent, so an escape never changes which collection is addressed.
pub fn decode_segments(path: &str) -> String {
    path.split('/')
        .map(
            |seg| match percent_encoding::percent_decode_str(seg).decode_utf8() {
                Ok(s) if !s.contains('/') => s.into_owned(),
                _ => seg.to_string(),
            },
        )
        .collect::<Vec<_>>()
        .join("/")
}

/// Decodes a query string into pairs (`+` is a space, percent-escapes decoded).
pub fn parse_query(q: Option<&str>) -> Vec<(String, String)> {
    url::form_urlencoded::parse(q.unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

/// Turns an API result into an HTTP response.
pub fn respond(result: Result<Value, ApiError>) -> Response {
    match result {
        Ok(v) => (StatusCode::OK, axum::Json(v)).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `/networkservices/v1/...`: see [`crate::emulator::network_services`].
async fn network_services(
    State(emu): State<Arc<Emulator>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(e) = check_auth(&emu, &headers) {
        return e.into_response();
    }
    let path = uri
        .path()
        .strip_prefix("/networkservices/v1/")
        .unwrap_or_default()
        .to_string();
    let req = crate::emulator::network_services::NetworkServicesRequest {
        method,
        path,
        query: parse_query(uri.query()),
        body,
    };
    respond(emu.handle_network_services(req).await)
}

async fn compute(
    State(emu): State<Arc<Emulator>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if let Err(e) = check_auth(&emu, &headers) {
        return e.into_response();
    }
    let body = match body {
        Ok(b) => b,
        Err(r) if r.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return ApiError::new(
                400,
                "badRequest",
                format!("Request payload size exceeds the limit: {MAX_REQUEST_BYTES} bytes."),
            )
            .into_response()
        }
        Err(r) => return ApiError::new(400, "badRequest", r.body_text()).into_response(),
    };
    let Some((version, path)) = crate::emulator::ApiVersion::split_path(uri.path()) else {
        return not_found(uri).await;
    };
    let req = ApiRequest {
        method,
        version,
        path: decode_segments(path),
        query: parse_query(uri.query()),
        token: bearer_token(&headers).map(str::to_string),
        body,
    };
    respond(emu.handle(req).await)
}
