//! The responses handlers answer with: JSON with a status code, and a watch's stream.

use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use http::{header, StatusCode};
use serde_json::Value;

/// JSON response with a status code.
pub fn json_response(code: StatusCode, value: &Value) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_default();
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// A response body from a stream, for watches.
pub fn streaming(
    stream: impl futures::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static,
) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CACHE_CONTROL, "no-cache, private")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
