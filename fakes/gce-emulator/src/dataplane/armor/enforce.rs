//! The one point where the request path meets Cloud Armor: the attached policy decides, the
//! decision goes into the request's log record, and a denial becomes the response.
//!
//! Responses: `deny(STATUS)` and rate-limit denials answer STATUS with a short body naming
//! `denied_by_security_policy` (Cloud Logging's `statusDetails`); `redirect` answers 302 with
//! `Location`. An allowed request gets the rule's `headerAction` headers.

use std::time::Instant;

use http::header::LOCATION;
use http::{HeaderValue, Request, Response, StatusCode};
use hyper::body::Incoming;

use super::{SecurityPolicy, State, Verdict};
use crate::dataplane::access_log::{AccessRecord, StatusDetails};
use crate::dataplane::exchange::{local, Body, ConnInfo};

/// Connection and routing facts of the request.
#[derive(Debug)]
pub struct Facts<'a> {
    /// The client connection.
    pub conn: &'a ConnInfo,
    /// The normalized path.
    pub path: &'a str,
    /// The query, if any.
    pub query: Option<&'a str>,
}

/// Headers to set on the request sent to the backend.
pub type AddHeaders = Vec<(http::HeaderName, HeaderValue)>;

/// Applies `policy` to `req`: the `headerAction` headers to add when the request goes on, or
/// the response that ends it. Records the decision in `rec`.
pub fn enforce(
    state: &State,
    policy: &SecurityPolicy,
    f: &Facts<'_>,
    req: &Request<Incoming>,
    rec: &mut Option<Box<AccessRecord>>,
) -> Result<AddHeaders, Box<Response<Body>>> {
    let decision = policy.evaluate(
        &super::Request {
            client: (f.conn.client.ip(), f.conn.client.port()),
            method: req.method().as_str(),
            path: f.path,
            query: f.query.unwrap_or(""),
            scheme: if f.conn.https { "https" } else { "http" },
            headers: req.headers(),
            sni: f.conn.sni.as_deref().unwrap_or(""),
        },
        state,
        Instant::now(),
    );
    if let Some(r) = rec.as_mut() {
        r.enforced_security_policy = Some(decision.enforced.clone());
        r.preview_security_policy = decision.preview.clone();
    }
    match decision.verdict {
        Verdict::Allow(headers) => Ok(headers),
        Verdict::Respond { status, location } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::FORBIDDEN);
            let detail = if location.is_some() {
                "redirected_by_security_policy"
            } else {
                "denied_by_security_policy"
            };
            let mut resp = local(
                status,
                format!(
                    "{status}: {detail} (policy {}, rule priority {})\n",
                    decision.enforced.name, decision.enforced.priority
                ),
            );
            if let Some(v) = location.and_then(|l| HeaderValue::from_str(&l).ok()) {
                resp.headers_mut().insert(LOCATION, v);
            }
            resp.extensions_mut().insert(StatusDetails(detail));
            Err(Box::new(resp))
        }
    }
}
