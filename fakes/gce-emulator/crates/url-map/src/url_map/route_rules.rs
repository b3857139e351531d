//! Route rules (`pathMatchers[].routeRules`): evaluated in ascending `priority`; a rule matches
//! when any of its `matchRules` does; a match rule needs its path match and all of its header
//! and query parameter matches.

use regex::Regex;
use serde_json::Value;

use super::{
    arr, s, Compiler, HeaderKey, HeaderMatch, QueryMatch, RequestView, Target, UrlMapError,
};

#[derive(Debug)]
pub(super) enum PathMatch {
    Prefix(String),
    Full(String),
    Regex(Regex),
}

#[derive(Debug)]
pub(super) struct MatchRule {
    pub(super) path: Option<PathMatch>,
    pub(super) ignore_case: bool,
    pub(super) headers: Vec<HeaderMatch>,
    pub(super) query: Vec<QueryMatch>,
}

#[derive(Debug)]
pub(super) struct RouteRule {
    pub(super) priority: i64,
    pub(super) match_rules: Vec<MatchRule>,
    pub(super) target: Target,
}

impl Compiler<'_, '_> {
    pub(super) fn match_rule(&self, v: &Value, field: &str) -> Result<MatchRule, UrlMapError> {
        let ignore_case = v
            .get("ignoreCase")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let path = if let Some(p) = s(v, "prefixMatch") {
            Some(PathMatch::Prefix(if ignore_case {
                p.to_lowercase()
            } else {
                p.to_string()
            }))
        } else if let Some(p) = s(v, "fullPathMatch") {
            Some(PathMatch::Full(if ignore_case {
                p.to_lowercase()
            } else {
                p.to_string()
            }))
        } else if let Some(p) = s(v, "regexMatch") {
            Some(PathMatch::Regex(self.regex(
                format!("{field}.regexMatch"),
                p,
                ignore_case,
            )?))
        } else {
            None
        };
        let mut headers = Vec::new();
        for (i, h) in arr(v, "headerMatches").iter().enumerate() {
            let Some(name) = s(h, "headerName").and_then(HeaderKey::parse) else {
                continue;
            };
            headers.push(HeaderMatch {
                name,
                matcher: self.string_match(h, &format!("{field}.headerMatches[{i}]"))?,
                invert: h
                    .get("invertMatch")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            });
        }
        let mut query = Vec::new();
        for (i, q) in arr(v, "queryParameterMatches").iter().enumerate() {
            let Some(name) = s(q, "name") else { continue };
            query.push(QueryMatch {
                name: name.to_string(),
                matcher: self.string_match(q, &format!("{field}.queryParameterMatches[{i}]"))?,
            });
        }
        Ok(MatchRule {
            path,
            ignore_case,
            headers,
            query,
        })
    }
}

/// Which part of a match rule refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mismatch {
    /// The path match.
    Path,
    /// `headerMatches[i]`.
    Header(usize),
    /// `queryParameterMatches[i]`.
    Query(usize),
}

impl MatchRule {
    /// What the path match wants, for traces: `prefix "/api/"`, `full path "/x"`, ...
    pub(super) fn describe_path(&self) -> String {
        match &self.path {
            None => "any path".to_string(),
            Some(PathMatch::Prefix(p)) => format!("prefixMatch {p:?}"),
            Some(PathMatch::Full(p)) => format!("fullPathMatch {p:?}"),
            Some(PathMatch::Regex(r)) => format!("regexMatch {:?}", super::matches::written(r)),
        }
    }

    /// How much of `path` the path match agrees with, for a trace's closest rule.
    pub(super) fn path_closeness(&self, path: &str) -> usize {
        match &self.path {
            Some(PathMatch::Prefix(p)) | Some(PathMatch::Full(p)) => {
                super::trace::common_prefix(p, path)
            }
            _ => 0,
        }
    }

    /// Why the part `m` of the rule refused a request, for traces.
    pub(super) fn describe_mismatch(&self, m: Mismatch) -> String {
        match m {
            Mismatch::Path => format!("path does not satisfy {}", self.describe_path()),
            Mismatch::Header(i) => {
                let h = &self.headers[i];
                let inv = if h.invert { " (inverted)" } else { "" };
                let name = match &h.name {
                    HeaderKey::Header(n) => n.as_str(),
                    HeaderKey::Method => ":method",
                    HeaderKey::Authority => ":authority",
                };
                format!("header {name} does not satisfy {:?}{inv}", h.matcher)
            }
            Mismatch::Query(i) => format!(
                "query parameter {:?} does not satisfy {:?}",
                self.query[i].name, self.query[i].matcher
            ),
        }
    }

    /// `Ok` when `req` matches, else the first part that refused it.
    pub(super) fn check(&self, req: &RequestView<'_>) -> Result<(), Mismatch> {
        let path_ok = match &self.path {
            None => true,
            Some(PathMatch::Regex(r)) => r.is_match(req.path),
            Some(PathMatch::Prefix(p)) if self.ignore_case => {
                req.path.len() >= p.len()
                    && req.path.is_char_boundary(p.len())
                    && req.path[..p.len()].eq_ignore_ascii_case(p)
            }
            Some(PathMatch::Prefix(p)) => req.path.starts_with(p.as_str()),
            Some(PathMatch::Full(p)) if self.ignore_case => req.path.eq_ignore_ascii_case(p),
            Some(PathMatch::Full(p)) => req.path == p,
        };
        if !path_ok {
            return Err(Mismatch::Path);
        }
        for (i, h) in self.headers.iter().enumerate() {
            let name = match &h.name {
                HeaderKey::Header(n) => n,
                HeaderKey::Method => {
                    if h.matcher.matches(Some(req.method)) == h.invert {
                        return Err(Mismatch::Header(i));
                    }
                    continue;
                }
                HeaderKey::Authority => {
                    if h.matcher.matches(Some(req.host)) == h.invert {
                        return Err(Mismatch::Header(i));
                    }
                    continue;
                }
            };
            // Multiple values are matched joined by commas, as HTTP defines their combination.
            let mut values = req
                .headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok());
            let first = values.next();
            let joined;
            let value = match (first, values.next()) {
                (Some(a), Some(b)) => {
                    let mut j = format!("{a},{b}");
                    for v in values {
                        j.push(',');
                        j.push_str(v);
                    }
                    joined = j;
                    Some(joined.as_str())
                }
                (a, _) => a,
            };
            if h.matcher.matches(value) == h.invert {
                return Err(Mismatch::Header(i));
            }
        }
        for (i, q) in self.query.iter().enumerate() {
            let value = req.query.and_then(|qs| {
                url::form_urlencoded::parse(qs.as_bytes())
                    .find(|(k, _)| k == q.name.as_str())
                    .map(|(_, v)| v)
            });
            if !q.matcher.matches(value.as_deref()) {
                return Err(Mismatch::Query(i));
            }
        }
        Ok(())
    }
}
