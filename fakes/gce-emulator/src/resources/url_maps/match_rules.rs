//! What a URL map matches requests on (Compute API v1 reference, `urlMaps`: `HostRule`,
//! `PathRule`, `HttpRouteRuleMatch`, `HttpHeaderMatch`, `HttpQueryParameterMatch`): host
//! patterns of host rules, paths of path rules, and the match rules of route rules.

use crate::errors::ApiError;
use crate::validate::{self, Obj};

/// Exactly one of `kinds` set in `o` (a string, or any value for `rangeMatch`/`presentMatch`).
fn exactly_one(o: &Obj, prefix: &str, kinds: &[&str]) -> Result<(), ApiError> {
    let set: Vec<&&str> = kinds
        .iter()
        .filter(|k| o.get(**k).is_some_and(|v| !v.is_null()))
        .collect();
    if set.len() == 1 {
        return Ok(());
    }
    Err(ApiError::invalid_value(
        prefix,
        &set.iter()
            .map(|k| k.to_string())
            .collect::<Vec<_>>()
            .join(","),
        &format!("Exactly one of {} must be set.", kinds.join(", ")),
    ))
}

/// `HttpRouteRuleMatch`: one of prefixMatch, fullPathMatch, regexMatch, pathTemplateMatch;
/// prefix and full paths start with `/` and are 1 to 1024 characters; no ignoreCase with a
/// regexMatch; each header match names a header and sets one kind; each query match names a
/// parameter and sets one of presentMatch, exactMatch, regexMatch.
pub fn match_rule(m: &mut Obj, mp: &str) -> Result<(), ApiError> {
    exactly_one(
        m,
        mp,
        &[
            "prefixMatch",
            "fullPathMatch",
            "regexMatch",
            "pathTemplateMatch",
        ],
    )?;
    for k in ["prefixMatch", "fullPathMatch", "pathTemplateMatch"] {
        if let Some(v) = validate::opt_str(m, mp, k)? {
            if !v.starts_with('/') || v.len() > 1024 {
                return Err(ApiError::invalid_value(
                    &validate::path(mp, k),
                    v,
                    "Must start with '/' and be 1 to 1024 characters.",
                ));
            }
        }
    }
    valid_regex(m, mp)?;
    validate::bool_field(m, mp, "ignoreCase", None)?;
    if m.get("regexMatch").is_some() && m.get("ignoreCase").is_some_and(|v| v == true) {
        return Err(ApiError::invalid_value(
            &validate::path(mp, "ignoreCase"),
            "true",
            "ignoreCase must not be used with regexMatch.",
        ));
    }
    if let Some(hms) = validate::array_mut(m, mp, "headerMatches")? {
        for (i, h) in hms.iter_mut().enumerate() {
            let hp = format!("{mp}.headerMatches[{i}]");
            let ho = validate::object_item_mut(h, &hp)?;
            validate::req_str(ho, &hp, "headerName")?;
            exactly_one(
                ho,
                &hp,
                &[
                    "exactMatch",
                    "prefixMatch",
                    "suffixMatch",
                    "regexMatch",
                    "presentMatch",
                    "rangeMatch",
                ],
            )?;
            valid_regex(ho, &hp)?;
        }
    }
    if let Some(qms) = validate::array_mut(m, mp, "queryParameterMatches")? {
        for (i, q) in qms.iter_mut().enumerate() {
            let qp = format!("{mp}.queryParameterMatches[{i}]");
            let qo = validate::object_item_mut(q, &qp)?;
            validate::req_str(qo, &qp, "name")?;
            exactly_one(qo, &qp, &["presentMatch", "exactMatch", "regexMatch"])?;
            valid_regex(qo, &qp)?;
        }
    }
    Ok(())
}

/// `regexMatch`, when set, "must be a valid RE2 regular expression" (Compute API reference:
/// HttpRouteRuleMatch, HttpHeaderMatch, HttpQueryParameterMatch); the data plane compiles it
/// with the RE2-syntax `regex` crate, so what it cannot compile is refused here, not accepted
/// and then left unserved.
fn valid_regex(m: &Obj, prefix: &str) -> Result<(), ApiError> {
    let Some(re) = validate::opt_str(m, prefix, "regexMatch")? else {
        return Ok(());
    };
    regex::Regex::new(&format!("^(?:{re})$")).map_err(|e| {
        ApiError::invalid_value(
            &validate::path(prefix, "regexMatch"),
            re,
            &format!("Must be a valid RE2 regular expression: {e}"),
        )
    })?;
    Ok(())
}

/// A path rule path: starts with `/`, no `?` or `#`, and `*` only as the final `/*`.
pub fn check_path(field: &str, p: &str) -> Result<(), ApiError> {
    let why = if !p.starts_with('/') {
        Some("A path must start with '/'.")
    } else if p.contains(['?', '#']) {
        Some("A path must not contain '?' or '#'.")
    } else if p.contains('*') && !(p.ends_with("/*") && p.matches('*').count() == 1) {
        Some("'*' is only allowed at the end of a path, following a '/' (as in /foo/*).")
    } else if p.len() > 1024 {
        Some("A path is at most 1024 characters.")
    } else {
        None
    };
    match why {
        Some(w) => Err(ApiError::invalid_value(field, p, w)),
        None => Ok(()),
    }
}

/// A host pattern: a host name with optional `:port`; `*` may only be the first character, and
/// must then be followed by `-` or `.` (or stand alone).
pub fn check_host(field: &str, h: &str) -> Result<(), ApiError> {
    let host = h
        .rsplit_once(':')
        .map(|(host, port)| if port.parse::<u16>().is_ok() { host } else { h })
        .unwrap_or(h);
    let rest = host.strip_prefix('*');
    let valid_chars = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    };
    let ok = match rest {
        Some("") => true,
        Some(r) => (r.starts_with('.') || r.starts_with('-')) && valid_chars(r) && !r.contains('*'),
        None => valid_chars(host),
    };
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid_value(field, h, "A host must be a valid host name, optionally starting with '*' followed by '-' or '.'."))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_patterns() {
        for ok in ["/", "/foo", "/foo/*", "/*", "/a/b/c/*"] {
            assert!(check_path("f", ok).is_ok(), "{ok}");
        }
        for bad in ["foo", "/foo*", "/*/bar", "/a/*/*", "/a?b", "/a#b", "/fo*o/"] {
            assert_eq!(
                check_path("f", bad).unwrap_err().field.as_deref(),
                Some("f"),
                "{bad}"
            );
        }
    }

    #[test]
    fn host_patterns() {
        for ok in [
            "example.com",
            "*",
            "*.example.com",
            "*-foo.example.com",
            "example.com:8080",
        ] {
            assert!(check_host("f", ok).is_ok(), "{ok}");
        }
        for bad in ["Example.com", "*example.com", "foo.*.com", "a_b.com", ""] {
            assert!(check_host("f", bad).is_err(), "{bad}");
        }
    }
}
