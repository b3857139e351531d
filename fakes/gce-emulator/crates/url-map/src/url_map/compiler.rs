//! What compiling a URL map shares across its parts: the compiler (the URL map's name and the
//! service resolver), the field readers, the errors, and the view of a request routing reads.

use http::HeaderMap;
use serde_json::Value;

/// Errors compiling a URL map. Each names the field at fault.
#[derive(Debug, thiserror::Error)]
pub enum UrlMapError {
    /// A `regexMatch` is not a valid RE2 expression.
    #[error("urlMap {url_map}: {field}: invalid regular expression {regex:?}: {source}")]
    Regex {
        url_map: String,
        field: String,
        regex: String,
        #[source]
        source: Box<regex::Error>,
    },
    /// A host rule names a path matcher that does not exist.
    #[error("urlMap {url_map}: hostRules[{index}].pathMatcher names missing path matcher {name:?}; add it to pathMatchers or fix the name")]
    MissingPathMatcher {
        url_map: String,
        index: usize,
        name: String,
    },
}

/// The parts of a request routing looks at.
#[derive(Debug, Clone, Copy)]
pub struct RequestView<'a> {
    /// Request method (`GET`), for `:method` header matches.
    pub method: &'a str,
    /// Host without port, as sent (matched case-insensitively).
    pub host: &'a str,
    /// Path, without query.
    pub path: &'a str,
    /// Query string without `?`, if any.
    pub query: Option<&'a str>,
    /// Request headers.
    pub headers: &'a HeaderMap,
}

/// Maps a service reference (full URL) to a backend service index, or explains why it cannot.
pub type ServiceResolver<'a> = dyn FnMut(&str) -> Result<usize, String> + 'a;

pub(super) struct Compiler<'r, 'a> {
    pub(super) url_map: String,
    pub(super) resolve: &'r mut ServiceResolver<'a>,
}

pub(super) fn s<'v>(v: &'v Value, field: &str) -> Option<&'v str> {
    v.get(field).and_then(Value::as_str)
}

pub(super) fn arr<'v>(v: &'v Value, field: &str) -> &'v [Value] {
    v.get(field)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}
