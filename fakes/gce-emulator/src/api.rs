//! The HTTP surface: `/compute/{v1,beta,alpha}/...` (the API, one store seen through each
//! version), `POST /batch/compute/{version}` (gcloud's batch),
//! `/_emulator/...` (admin), the metadata server (`/computeMetadata/v1/...`), the OAuth token
//! endpoint (`/token`) and Resource Manager's project policy (`/v1/projects/P:getIamPolicy`).
//! Auth is optional (`--require-token`, `--iam`: identity.rs); the Host header is ignored,
//! since the Rust client sends it without a port (reference/gce-clients.md).
//!
//! This is the routing on top; the handlers of the other routes (admin.rs, batch.rs,
//! logging_api.rs, identity_api.rs) sit below it and share api_request.rs, never this file.

use std::sync::Arc;

use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, post};
use axum::Router;
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode, Uri};

use crate::api_request::{bearer_token, check_auth, decode_segments, parse_query, respond};
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
        token: bearer_token(&headers).map(str::to_string),
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
