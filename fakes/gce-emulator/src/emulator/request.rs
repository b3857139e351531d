//! One Compute API request as the handlers pass it on ([`ApiRequest`]).

use bytes::Bytes;
use http::Method;

use super::version::ApiVersion;

/// One API request: method, API version, the path after `/compute/{version}/`, the decoded
/// query and the body.
#[derive(Clone, Debug)]
pub struct ApiRequest {
    /// HTTP method.
    pub method: Method,
    /// The API version the path names (`/compute/v1/`, `/compute/beta/`, `/compute/alpha/`).
    pub version: ApiVersion,
    /// Path after `/compute/{version}/` (`projects/p/global/urlMaps/um1`).
    pub path: String,
    /// Decoded query pairs, in order.
    pub query: Vec<(String, String)>,
    /// Raw body.
    pub body: Bytes,
    /// The bearer token the request carried, if any (for `--iam-grant`).
    pub token: Option<String>,
}
