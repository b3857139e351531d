//! Ingress v1 paths -> GCE URL-map paths (reference 001 "Path types"; inventory §5).
//!
//! GCE path rules: a path starts with `/`; `*` is allowed only as a final `/*` (prefix match);
//! a path without `*` is an exact match; `?` and `#` are not allowed. GCE picks the longest
//! matching path, which gives Ingress's "longest prefix wins" for free.

/// Why a path cannot become a GCE path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The path breaks a GCE path rule; the text says which.
    #[error("{0}")]
    Invalid(&'static str),
    /// `pathType` is not one of the three Ingress v1 types.
    #[error("unknown pathType {0:?}")]
    UnknownPathType(String),
}

/// The GCE paths one Ingress path becomes, in order:
/// - `Exact` `/foo` -> `["/foo"]` (no `*` allowed);
/// - `Prefix` `/` -> `["/*"]`; `/foo` or `/foo/` -> `["/foo", "/foo/*"]` (no `*` allowed);
/// - `ImplementationSpecific` (or no pathType) -> the path itself, checked against the GCE rules;
///   an empty path -> `["/*"]`.
///
/// # Errors
/// [`PathError::Invalid`] for a path GCE would refuse (e.g. `/foo/*/bar`),
/// [`PathError::UnknownPathType`] for any other pathType.
pub fn gce_paths(path_type: Option<&str>, path: Option<&str>) -> Result<Vec<String>, PathError> {
    let path = path.unwrap_or("");
    match path_type.unwrap_or("ImplementationSpecific") {
        "Exact" => {
            check_plain(path)?;
            Ok(vec![path.to_owned()])
        }
        "Prefix" => {
            check_plain(path)?;
            let trimmed = path.trim_end_matches('/');
            if trimmed.is_empty() {
                Ok(vec!["/*".to_owned()])
            } else {
                Ok(vec![trimmed.to_owned(), format!("{trimmed}/*")])
            }
        }
        "ImplementationSpecific" => {
            if path.is_empty() {
                return Ok(vec!["/*".to_owned()]);
            }
            check_gce(path)?;
            Ok(vec![path.to_owned()])
        }
        other => Err(PathError::UnknownPathType(other.to_owned())),
    }
}

/// Exact and Prefix paths: absolute, no wildcard.
fn check_plain(path: &str) -> Result<(), PathError> {
    if path.contains('*') {
        return Err(PathError::Invalid(
            "`*` is not allowed in Exact and Prefix paths (use pathType ImplementationSpecific with a final `/*`)",
        ));
    }
    check_gce(path)
}

/// The GCE rules for a path matcher path.
fn check_gce(path: &str) -> Result<(), PathError> {
    if !path.starts_with('/') {
        return Err(PathError::Invalid("a path must start with `/`"));
    }
    if path.contains('?') || path.contains('#') {
        return Err(PathError::Invalid("a path must not contain `?` or `#`"));
    }
    if let Some(star) = path.find('*') {
        if star != path.len() - 1 || !path[..star].ends_with('/') {
            return Err(PathError::Invalid("`*` is only allowed as a final `/*`"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(pt: Option<&str>, p: &str) -> Vec<String> {
        gce_paths(pt, Some(p)).unwrap()
    }

    #[test]
    fn prefix_paths_become_exact_plus_wildcard() {
        assert_eq!(ok(Some("Prefix"), "/"), ["/*"]);
        assert_eq!(ok(Some("Prefix"), "/foo"), ["/foo", "/foo/*"]);
        assert_eq!(ok(Some("Prefix"), "/foo/"), ["/foo", "/foo/*"]);
        assert_eq!(ok(Some("Prefix"), "/aaa/bbb"), ["/aaa/bbb", "/aaa/bbb/*"]);
    }

    #[test]
    fn exact_paths_pass_through() {
        assert_eq!(ok(Some("Exact"), "/foo"), ["/foo"]);
        assert_eq!(ok(Some("Exact"), "/foo/"), ["/foo/"]);
        assert!(gce_paths(Some("Exact"), Some("/foo/*")).is_err());
    }

    #[test]
    fn implementation_specific_follows_gce_wildcards() {
        assert_eq!(gce_paths(None, None).unwrap(), ["/*"]);
        assert_eq!(ok(Some("ImplementationSpecific"), ""), ["/*"]);
        assert_eq!(ok(None, "/*"), ["/*"]);
        assert_eq!(ok(None, "/foo/*"), ["/foo/*"]);
        assert_eq!(ok(None, "/foo"), ["/foo"]);
        for bad in ["/foo/*/bar", "/foo*", "*", "/*/", "foo", "/a?b", "/**"] {
            assert!(
                matches!(gce_paths(None, Some(bad)), Err(PathError::Invalid(_))),
                "{bad} should be rejected"
            );
        }
    }

    /// Whatever the input, an accepted path satisfies the GCE rules.
    #[test]
    fn accepted_paths_always_satisfy_gce_rules() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let alphabet = ['/', '*', 'a', 'b', '-', '.', '?', '#', '%'];
        for _ in 0..20_000 {
            let len = rng.random_range(0..8);
            let path: String = (0..len)
                .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                .collect();
            for pt in [
                None,
                Some("Exact"),
                Some("Prefix"),
                Some("ImplementationSpecific"),
            ] {
                let Ok(out) = gce_paths(pt, Some(&path)) else {
                    continue;
                };
                for p in out {
                    assert!(p.starts_with('/'), "{pt:?} {path:?} -> {p:?}");
                    assert!(
                        !p.contains('?') && !p.contains('#'),
                        "{pt:?} {path:?} -> {p:?}"
                    );
                    let stars = p.matches('*').count();
                    assert!(
                        stars == 0 || (stars == 1 && p.ends_with("/*")),
                        "{pt:?} {path:?} -> {p:?}"
                    );
                    if pt == Some("Exact") || pt == Some("Prefix") {
                        assert!(!path.contains('*'));
                    }
                }
            }
        }
    }

    #[test]
    fn unknown_path_type_is_an_error() {
        assert_eq!(
            gce_paths(Some("Regex"), Some("/")),
            Err(PathError::UnknownPathType("Regex".into()))
        );
    }
}
