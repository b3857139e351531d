//! What every API handler does with a request (the Compute API, gcloud's batch, Cloud
//! Logging's `entries:list`): check its credentials, decode its path and query, and answer in
//! Google's shape. Below the router (api.rs) and every handler.

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde_json::Value;

use crate::emulator::Emulator;
use crate::errors::ApiError;

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
