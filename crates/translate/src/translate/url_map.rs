//! Ingress rules -> the URL map (inventory §5; reference 001 "Ingress rules", "Path types",
//! "Multiple matches", "Hostname wildcards"; docs/routing.md has the resulting table).
//!
//! - Hosts: see [`super::hosts`] (`*` for none, lower-cased; single-label wildcards warn).
//! - All rules for one host are **merged** into one path matcher (GKE keeps only the last rule).
//! - Each Ingress path becomes GCE path patterns ([`gce_paths`]): `Exact /p` -> `/p`;
//!   `Prefix /p` -> `/p` and `/p/*`; ImplementationSpecific as GKE reads it (GCE patterns).
//!   GCE picks the longest matching pattern, which is Kubernetes' "longest path wins".
//! - One pattern claimed by several paths: the winner does not depend on the order of rules or
//!   paths: Exact before Prefix before ImplementationSpecific ("precedence is given to paths with
//!   an exact path type over prefix path type"), then the lower backend service name. Exact over
//!   Prefix on the same string is Kubernetes' own rule and silent; every other collision is a
//!   Warning [`Finding`] naming both fields.
//! - An exact pattern `/p/` and a wildcard `/p/*` with different backends both match `/p/`; the
//!   Compute API reference only says "longest-path-first", so such a path matcher uses
//!   `routeRules` instead of `pathRules`: every exact pattern as `fullPathMatch` first, then the
//!   wildcards as `prefixMatch`, longest first, with priorities in that order. First match then
//!   equals Kubernetes' precedence (the exact path is the longer one).
//! - Output is sorted (hosts, patterns), so the same Ingress gives the same URL map whatever
//!   order its rules and paths are in.
//! - pathMatcher names are `host` + a hash of the host (see [`namer::path_matcher`]).
//! - NCP annotations ([`super::ncp`]), reference 002: `ncp/use-regex: "true"` makes
//!   ImplementationSpecific paths regular expressions (`regexMatch`, RE2 syntax), the Ingress
//!   `path` only, never the host. As NCP: the expression must match the whole path (NCP adds
//!   `^` and `$`; Compute's `regexMatch` is matched against the whole path, query and anchor
//!   removed), and an omitted path means `/.*`. Precedence inside one host, NCP 3.0.2's order:
//!   every Exact path, then Prefix paths longest first, then regex paths, longest expression
//!   first ("the longest Ingress path wins"); first match wins (`routeRules` priorities).
//!   Where this project differs from NCP, and why:
//!   - Exact and Prefix paths keep their Kubernetes meaning under `use-regex`, and a Prefix
//!     `/foo` matches `/foo` itself, which NCP's Prefix does not (Kubernetes wins: the same
//!     manifest means the same under every conformant controller); ImplementationSpecific
//!     without `use-regex` is GKE's GCE path pattern, not NCP's Exact.
//!   - An expression with a top-level `|` (`/tea|/coffee`): NCP's textual `^/tea|/coffee$`
//!     anchors only the first operand's start and the last one's end; here every operand must
//!     match the whole path (Compute's whole-path match), which is what NCP's own advice,
//!     parentheses (`/(tea|coffee)`), gives on both. Such a path gets a Warning.
//!   - The host is chosen first (GCE `hostRules`): a request whose host has a rule is matched
//!     against that host's paths only, never against rules without a host (NCP's second tier).
//!   - Regular expressions need a load balancing scheme that accepts `regexMatch`
//!     ([`super::ncp::regex_supported`]); the classic class refuses `use-regex` with an Event.
//! - `ingress.kubernetes.io/rewrite-target` gives every path route a
//!   `urlRewrite.pathPrefixRewrite`: an exact pattern becomes the target, a prefix pattern `/p/`
//!   becomes the target with a trailing `/`, so `/p/rest` reaches the backend as
//!   `<target>/rest`; with a regex path it is refused (no regex substitution in Compute). Both
//!   force `routeRules`, the only carrier of regexes and rewrites.

use std::collections::BTreeMap;

use google_cloud_compute_v1::model;
use k8s_openapi::api::networking::v1::Ingress;

use super::hosts;
use super::ncp::{NcpOptions, REWRITE_TARGET};
use super::paths::{gce_paths, PathError};
use super::service_ports::{resolve_ingress_backend, ResolvedBackend};
use super::{namer, ClusterSnapshot, Finding, ObjectKey, TranslateConfig, TranslateError};

/// The URL map of one Ingress and the Service ports its rules route to.
#[derive(Debug)]
pub struct UrlMapPlan<'a> {
    /// The URL map, `defaultService` included.
    pub url_map: model::UrlMap,
    /// Service ports used by path rules, in order of first use (the default backend is not
    /// included).
    pub backends: Vec<ResolvedBackend<'a>>,
    /// Path collisions and wildcard hosts.
    pub findings: Vec<Finding>,
}

/// One Ingress path's claim on a GCE path pattern.
#[derive(Clone, Debug)]
struct Claim {
    /// 0 Exact, 1 Prefix, 2 ImplementationSpecific: the lower wins a shared pattern.
    rank: u8,
    /// Backend service name.
    backend: String,
    /// `spec.rules[i].http.paths[j]`.
    field: String,
}

/// The rank of a pathType (see [`Claim::rank`]).
fn rank(path_type: &str) -> u8 {
    match path_type {
        "Exact" => 0,
        "Prefix" => 1,
        _ => 2,
    }
}

/// Builds the URL map `name` for `ingress`, with `default_service` (a backend-service
/// reference) as URL-map and path-matcher default.
///
/// # Errors
/// Invalid paths, unknown pathTypes, and every backend resolution error, each naming its field.
pub fn url_map<'a>(
    snapshot: &'a ClusterSnapshot,
    config: &TranslateConfig,
    ingress: &Ingress,
    name: &str,
    default_service: &str,
    ncp: &NcpOptions,
) -> Result<UrlMapPlan<'a>, TranslateError> {
    let key = ObjectKey::of(ingress);
    // host -> GCE pattern -> claims
    let mut hosts: BTreeMap<String, BTreeMap<String, Vec<Claim>>> = BTreeMap::new();
    let mut backends: Vec<ResolvedBackend<'a>> = Vec::new();
    let mut findings = Vec::new();
    let rules = ingress
        .spec
        .as_ref()
        .and_then(|s| s.rules.as_deref())
        .unwrap_or_default();
    for (i, rule) in rules.iter().enumerate() {
        let host = hosts::host_pattern(rule.host.as_deref());
        if hosts::is_wildcard(&host) {
            let warning = hosts::wildcard_warning(&key, &format!("spec.rules[{i}].host"), &host);
            let seen = findings.iter().any(|f: &Finding| {
                f.message.contains(&format!("{host:?}")) && f.message.contains("one DNS label")
            });
            if !seen {
                findings.push(warning);
            }
        }
        let Some(http) = rule.http.as_ref() else {
            continue;
        };
        for (j, path) in http.paths.iter().enumerate() {
            let field = format!("spec.rules[{i}].http.paths[{j}]");
            let path_type = Some(path.path_type.as_str()).filter(|t| !t.is_empty());
            let regex = ncp.use_regex
                && path_type.unwrap_or("ImplementationSpecific") == "ImplementationSpecific";
            let gce = if regex {
                regex_pattern(&key, &field, path.path.as_deref(), ncp, &mut findings)?
            } else {
                gce_paths(path_type, path.path.as_deref()).map_err(|e| match e {
                    PathError::Invalid(reason) => TranslateError::InvalidPath {
                        ingress: key.to_string(),
                        field: format!("{field}.path"),
                        path: path.path.clone().unwrap_or_default(),
                        reason: reason.to_owned(),
                    },
                    PathError::UnknownPathType(t) => TranslateError::UnknownPathType {
                        ingress: key.to_string(),
                        field: format!("{field}.pathType"),
                        path_type: t,
                    },
                })?
            };
            let resolved = resolve_ingress_backend(
                snapshot,
                &key,
                &path.backend,
                &format!("{field}.backend"),
            )?;
            let bs_name = config.backend_name(
                &resolved.key.namespace,
                &resolved.key.service,
                resolved.key.port,
            );
            if !backends.iter().any(|b| b.key == resolved.key) {
                backends.push(resolved);
            }
            let patterns = hosts.entry(host.clone()).or_default();
            for p in gce {
                patterns.entry(p).or_default().push(Claim {
                    rank: rank(path_type.unwrap_or("ImplementationSpecific")),
                    backend: bs_name.clone(),
                    field: field.clone(),
                });
            }
        }
    }

    let mut um = model::UrlMap::default();
    um.name = Some(name.to_owned());
    um.description = owned_description(config.mode.scheme(), &key);
    um.default_service = Some(default_service.to_owned());
    for (host, patterns) in hosts {
        let routes: BTreeMap<String, String> = patterns
            .into_iter()
            .map(|(pattern, claims)| {
                let winner = settle(&key, &host, &pattern, claims, &mut findings);
                (pattern, winner)
            })
            .collect();
        let matcher = namer::path_matcher(config.mode.scheme(), &host);
        let mut rule = model::HostRule::default();
        rule.hosts = vec![host];
        rule.path_matcher = Some(matcher.clone());
        um.host_rules.push(rule);
        let mut pm = model::PathMatcher::default();
        pm.name = Some(matcher);
        pm.default_service = Some(default_service.to_owned());
        let service = |backend: &str| config.global_ref("backendServices", backend);
        let ncp_routes =
            ncp.rewrite_target.is_some() || routes.keys().any(|p| p.starts_with(REGEX_MARK));
        if ncp_routes || needs_route_rules(&routes) {
            pm.route_rules = route_rules(&routes, service, ncp.rewrite_target.as_deref());
        } else {
            pm.path_rules = routes
                .iter()
                .map(|(pattern, backend)| {
                    model::PathRule::new()
                        .set_paths([pattern.clone()])
                        .set_service(service(backend))
                })
                .collect();
        }
        um.path_matchers.push(pm);
    }
    Ok(UrlMapPlan {
        url_map: um,
        backends,
        findings,
    })
}

/// The backend that wins `pattern` among `claims` (see the module docs), with a Warning for
/// each losing claim to a different backend, unless it is a Prefix losing to an Exact path of
/// the same string (Kubernetes' own rule).
fn settle(
    key: &ObjectKey,
    host: &str,
    pattern: &str,
    mut claims: Vec<Claim>,
    findings: &mut Vec<Finding>,
) -> String {
    claims.sort_by(|a, b| (a.rank, &a.backend, &a.field).cmp(&(b.rank, &b.backend, &b.field)));
    let winner = claims[0].clone();
    for loser in &claims[1..] {
        let exact_over_prefix = winner.rank == 0 && loser.rank == 1;
        if loser.backend == winner.backend || exact_over_prefix {
            continue;
        }
        // One warning per pair of Ingress paths, even when a Prefix path collides on both of
        // its GCE paths (`/foo` and `/foo/*`).
        let message = format!(
            "Ingress {key}: host {host:?} path {pattern:?} is routed by both {} and {}; {} wins \
             (Exact before Prefix before ImplementationSpecific, then the lower backend service \
             name, whatever their order). Remove one of the two paths",
            winner.field, loser.field, winner.field
        );
        let pair = |f: &Finding| {
            f.message
                .contains(&format!("both {} and {}", winner.field, loser.field))
        };
        if !findings.iter().any(pair) {
            findings.push(Finding {
                warning: true,
                reason: "Translate".to_owned(),
                message,
            });
        }
    }
    winner.backend
}

/// Whether the path matcher has an exact pattern `/p/` and a wildcard `/p/*` that send a
/// request for `/p/` to different backends: then only route rules state which one wins.
fn needs_route_rules(routes: &BTreeMap<String, String>) -> bool {
    routes.iter().any(|(pattern, backend)| {
        pattern.ends_with('/')
            && routes
                .get(&format!("{pattern}*"))
                .is_some_and(|other| other != backend)
    })
}

/// Marks a pattern key that is a regular expression (GCE patterns always start with `/`).
const REGEX_MARK: char = '~';

/// NCP's meaning of an omitted `ncp/use-regex` path: every path (reference 002).
pub const REGEX_ANY_PATH: &str = "/.*";

/// The pattern key of an ImplementationSpecific path under `ncp/use-regex`: the path as a
/// regular expression ([`REGEX_ANY_PATH`] when omitted), checked to compile (RE2 syntax; it
/// must match the whole path), with a Warning in `findings` when a top-level `|` makes NCP's
/// textual `^...$` anchoring mean something else (module docs).
///
/// # Errors
/// An expression that does not compile, or a rewrite target beside it (Compute's
/// `pathPrefixRewrite` replaces a matched prefix; a regex route has none).
fn regex_pattern(
    key: &ObjectKey,
    field: &str,
    path: Option<&str>,
    ncp: &NcpOptions,
    findings: &mut Vec<Finding>,
) -> Result<Vec<String>, TranslateError> {
    let path = path.filter(|p| !p.is_empty()).unwrap_or(REGEX_ANY_PATH);
    let bad = |reason: String| TranslateError::InvalidPath {
        ingress: key.to_string(),
        field: format!("{field}.path"),
        path: path.to_owned(),
        reason,
    };
    if let Err(e) = regex::Regex::new(&format!("^(?:{path})$")) {
        return Err(bad(format!(
            "not a regular expression (ncp/use-regex): {e}"
        )));
    }
    if ncp.rewrite_target.is_some() {
        return Err(TranslateError::InvalidAnnotation {
            kind: "Ingress",
            object: key.to_string(),
            annotation: REWRITE_TARGET.to_owned(),
            reason: format!("{field} is an ncp/use-regex path; the Compute API's urlRewrite.pathPrefixRewrite rewrites prefix and full-path matches only, so a rewrite of a regex route is refused; use Prefix or Exact paths with the rewrite"),
        });
    }
    let top_level_alternation = matches!(
        regex_syntax::ast::parse::Parser::new().parse(path),
        Ok(regex_syntax::ast::Ast::Alternation(_))
    );
    if top_level_alternation {
        findings.push(Finding {
            warning: true,
            reason: "Translate".to_owned(),
            message: format!("Ingress {key}: {field}.path {path:?} (ncp/use-regex) has a top-level '|': here every alternative must match the whole path, while NCP's '^{path}$' anchors only the first alternative's start and the last one's end. Write it with parentheses, as NCP advises (for example /(tea|coffee)), to mean the same under both"),
        });
    }
    Ok(vec![format!("{REGEX_MARK}{path}")])
}

/// Route rules in first-match order: every exact pattern (`fullPathMatch`), then the wildcards
/// (`prefixMatch` of the pattern without `*`), longest first, then the regular expressions
/// (`regexMatch`), longest first; priorities 1, 2, ... in that order. With `rewrite`, each exact
/// and prefix rule carries `urlRewrite.pathPrefixRewrite` (see the module docs).
fn route_rules(
    routes: &BTreeMap<String, String>,
    service: impl Fn(&str) -> String,
    rewrite: Option<&str>,
) -> Vec<model::HttpRouteRule> {
    let mut ordered: Vec<(&String, &String)> = routes.iter().collect();
    ordered.sort_by_key(|(pattern, _)| {
        if let Some(re) = pattern.strip_prefix(REGEX_MARK) {
            (2, usize::MAX - re.len(), pattern.as_str())
        } else if let Some(prefix) = pattern.strip_suffix('*') {
            (1, usize::MAX - prefix.len(), pattern.as_str())
        } else {
            (0, 0, pattern.as_str())
        }
    });
    ordered
        .into_iter()
        .enumerate()
        .map(|(i, (pattern, backend))| {
            let (matcher, target) = if let Some(re) = pattern.strip_prefix(REGEX_MARK) {
                (model::HttpRouteRuleMatch::new().set_regex_match(re), None)
            } else if let Some(prefix) = pattern.strip_suffix('*') {
                let target = rewrite.map(|t| {
                    if t.ends_with('/') {
                        t.to_owned()
                    } else {
                        format!("{t}/")
                    }
                });
                (
                    model::HttpRouteRuleMatch::new().set_prefix_match(prefix),
                    target,
                )
            } else {
                (
                    model::HttpRouteRuleMatch::new().set_full_path_match(pattern.clone()),
                    rewrite.map(str::to_owned),
                )
            };
            let rule = model::HttpRouteRule::new()
                .set_priority(i as i32 + 1)
                .set_match_rules([matcher])
                .set_service(service(backend));
            match target {
                Some(t) => rule.set_route_action(
                    model::HttpRouteAction::new()
                        .set_url_rewrite(model::UrlRewrite::new().set_path_prefix_rewrite(t)),
                ),
                None => rule,
            }
        })
        .collect()
}

/// `{"kubernetes.io/ingress-name":"ns/name"}`, the description of per-Ingress resources.
pub fn ingress_description(key: &ObjectKey) -> String {
    serde_json::json!({ "kubernetes.io/ingress-name": key.to_string() }).to_string()
}

/// Description of an Ingress's target proxies and forwarding rules. GKE's scheme writes GKE's
/// own text, `{"kubernetes.io/ingress-name": "ns/name"}` with a space (ingress-gce
/// `L7.description`, Go `%q` of `ns/name`), so adopted resources are unchanged (a forwarding
/// rule's description cannot be changed at all); the operator's scheme
/// [`ingress_description`].
pub fn frontend_description(scheme: namer::Scheme, key: &ObjectKey) -> String {
    match scheme {
        namer::Scheme::Gke => format!(
            "{{\"kubernetes.io/ingress-name\": {}}}",
            serde_json::Value::String(key.to_string())
        ),
        namer::Scheme::Own => ingress_description(key),
    }
}

/// Description of an Ingress's URL maps and self-managed certificates: none in GKE's scheme
/// (GKE's controller writes none), else [`ingress_description`].
pub fn owned_description(scheme: namer::Scheme, key: &ObjectKey) -> Option<String> {
    match scheme {
        namer::Scheme::Gke => None,
        namer::Scheme::Own => Some(ingress_description(key)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{config, snapshot_from_yaml};
    use super::super::{translate_ingress, Mode, ObjectKey};

    /// In the operator's own scheme (`Coexist`) the URL map and the self-managed certificates
    /// name their Ingress in their description (what `gcloud compute url-maps describe` shows an
    /// admin); GKE's scheme (`Takeover`) writes none, as GKE's controller.
    #[test]
    fn owned_resources_name_their_ingress_in_the_own_scheme_only() {
        let snapshot = snapshot_from_yaml(include_str!("testdata/features.yaml"));
        let key = ObjectKey::new("default", "shop");
        for (mode, want) in [
            (
                Mode::Coexist,
                Some(r#"{"kubernetes.io/ingress-name":"default/shop"}"#.to_owned()),
            ),
            (Mode::Takeover, None),
        ] {
            let mut config = config();
            config.mode = mode;
            let desired = translate_ingress(&snapshot, &snapshot.ingresses[&key], &config).unwrap();
            let url_map = desired.frontend.url_map.unwrap();
            assert_eq!(url_map.description, want, "{mode:?}");
            assert!(!desired.frontend.ssl_certificates.is_empty());
            for cert in &desired.frontend.ssl_certificates {
                assert_eq!(cert.description, want, "{mode:?} {:?}", cert.name);
            }
        }
    }
}
