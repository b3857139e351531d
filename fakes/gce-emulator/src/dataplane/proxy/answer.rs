//! The load balancer's own answers to a request: Google's error page with the status and the
//! Cloud Logging `statusDetails` that name why (request_checks.rs writes the page).

use std::sync::Arc;

use http::header::HeaderValue;
use http::{Response, StatusCode};

use crate::dataplane::access_log::StatusDetails;
use crate::dataplane::backend_service::BackendService;
use crate::dataplane::exchange::{local, Body};
use crate::dataplane::request_checks;

/// An answer of the load balancer itself, as Google's error page (request_checks.rs), with its
/// `statusDetails` for the access log.
pub(super) fn error_response(
    status: StatusCode,
    detail: &'static str,
    why: &str,
) -> Response<Body> {
    let mut r = local(status, request_checks::error_page(status, detail, why));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=UTF-8"),
    );
    r.extensions_mut().insert(StatusDetails(detail));
    r
}

pub(super) fn bad_gateway(detail: &'static str, why: String) -> Response<Body> {
    error_response(StatusCode::BAD_GATEWAY, detail, &why)
}

/// What the proxy answers for a request that does not reach an endpoint, with the backend
/// service it was routed to (for its metrics), if any.
pub(super) type Answer = (Response<Body>, Option<Arc<BackendService>>);
