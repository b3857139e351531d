//! Header and query parameter matching (`HttpHeaderMatch`, `HttpQueryParameterMatch`).

use regex::Regex;
use serde_json::Value;

use super::{s, Compiler, UrlMapError};

#[derive(Debug)]
pub(super) enum StringMatch {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Regex(Regex),
    Present(bool),
    Range(i64, i64),
}

impl StringMatch {
    pub(super) fn matches(&self, value: Option<&str>) -> bool {
        match (self, value) {
            (StringMatch::Present(p), v) => *p == v.is_some(),
            (_, None) => false,
            (StringMatch::Exact(e), Some(v)) => v == e,
            (StringMatch::Prefix(p), Some(v)) => v.starts_with(p.as_str()),
            (StringMatch::Suffix(s), Some(v)) => v.ends_with(s.as_str()),
            (StringMatch::Regex(r), Some(v)) => r.is_match(v),
            (StringMatch::Range(a, b), Some(v)) => {
                v.parse::<i64>().is_ok_and(|n| *a <= n && n < *b)
            }
        }
    }
}

/// What a header match reads: a header, or the pseudo-headers `:method` and `:authority`
/// ("For matching a request's method, use the headerName `:method`": Compute API reference,
/// `HttpHeaderMatch.headerName`).
#[derive(Debug)]
pub(super) enum HeaderKey {
    Header(http::HeaderName),
    Method,
    Authority,
}

impl HeaderKey {
    pub(super) fn parse(name: &str) -> Option<HeaderKey> {
        match name {
            ":method" => Some(HeaderKey::Method),
            ":authority" => Some(HeaderKey::Authority),
            n => http::HeaderName::from_bytes(n.as_bytes())
                .ok()
                .map(HeaderKey::Header),
        }
    }
}

#[derive(Debug)]
pub(super) struct HeaderMatch {
    pub(super) name: HeaderKey,
    pub(super) matcher: StringMatch,
    pub(super) invert: bool,
}

#[derive(Debug)]
pub(super) struct QueryMatch {
    pub(super) name: String,
    pub(super) matcher: StringMatch,
}

/// The pattern of a regex [`Compiler::regex`] compiled, as the URL map wrote it (without the
/// anchors compilation adds).
pub(super) fn written(r: &Regex) -> &str {
    let anchored = r.as_str();
    anchored
        .strip_prefix("^(?:")
        .and_then(|w| w.strip_suffix(")$"))
        .unwrap_or(anchored)
}

impl Compiler<'_, '_> {
    pub(super) fn regex(
        &self,
        field: String,
        re: &str,
        ignore_case: bool,
    ) -> Result<Regex, UrlMapError> {
        regex::RegexBuilder::new(&format!("^(?:{re})$"))
            .case_insensitive(ignore_case)
            .build()
            .map_err(|e| UrlMapError::Regex {
                url_map: self.url_map.clone(),
                field,
                regex: re.to_string(),
                source: Box::new(e),
            })
    }

    pub(super) fn string_match(&self, v: &Value, field: &str) -> Result<StringMatch, UrlMapError> {
        Ok(if let Some(x) = s(v, "exactMatch") {
            StringMatch::Exact(x.to_string())
        } else if let Some(x) = s(v, "prefixMatch") {
            StringMatch::Prefix(x.to_string())
        } else if let Some(x) = s(v, "suffixMatch") {
            StringMatch::Suffix(x.to_string())
        } else if let Some(x) = s(v, "regexMatch") {
            StringMatch::Regex(self.regex(format!("{field}.regexMatch"), x, false)?)
        } else if let Some(r) = v.get("rangeMatch") {
            let n = |f: &str| {
                r.get(f)
                    .and_then(|x| x.as_i64().or_else(|| x.as_str()?.parse().ok()))
                    .unwrap_or(0)
            };
            StringMatch::Range(n("rangeStart"), n("rangeEnd"))
        } else {
            StringMatch::Present(
                v.get("presentMatch")
                    .and_then(Value::as_bool)
                    .unwrap_or(true),
            )
        })
    }
}
