//! VMware NSX NCP's Ingress annotations (reference 002, "功能注释" feature annotations and
//! "错误" errors), read under their original names so manifests move over unchanged, and
//! translated onto what the Compute API can express:
//!
//! | NCP annotation | Compute feature |
//! | --- | --- |
//! | `ncp/http-redirect: "true"` | the HTTP proxy's URL map is a `defaultUrlRedirect` with `httpsRedirect` (301) |
//! | `ingress.kubernetes.io/rewrite-target: /p` | `routeRules[].routeAction.urlRewrite.pathPrefixRewrite` |
//! | `ncp/use-regex: "true"` | `routeRules[].matchRules[].regexMatch` for ImplementationSpecific paths, on load balancing schemes that accept it ([`regex_supported`]: the internal class `gce-internal`, regional `EXTERNAL_MANAGED`); refused with an Event on the classic (`EXTERNAL`) load balancer ([`refuse_unsupported_regex`]) |
//! | `ncp/whitelist-source-range: a, b-c, d/n` | a Cloud Armor security policy (allow those `srcIpRanges`, deny(403) the rest) on the Ingress's backend services |
//!
//! NCP annotations the Compute API cannot express (`ncp/ssl-mode`, `ncp/jwt-*`), and keys of
//! other controllers' prefixes that are not read, give a Warning naming the annotation instead
//! of being ignored silently ([`unsupported_findings`]).

use std::net::IpAddr;

use google_cloud_compute_v1::model;
use ipnet::{IpNet, Ipv4Subnets, Ipv6Subnets};
use k8s_openapi::api::networking::v1::Ingress;
use kube::ResourceExt;

use super::annotations::get;
use super::{namer, DesiredIngress, Finding, ObjectKey, TranslateConfig, TranslateError};

/// Ingress: `"true"` redirects HTTP to HTTPS (needs TLS; wins over `allow-http: "false"`).
pub const HTTP_REDIRECT: &str = "ncp/http-redirect";
/// Ingress: `"true"` makes ImplementationSpecific paths whole-path regular expressions
/// (`url_map` module docs give NCP's semantics and where this project differs).
pub const USE_REGEX: &str = "ncp/use-regex";
/// Ingress: the path the backend sees instead of the matched path.
pub const REWRITE_TARGET: &str = "ingress.kubernetes.io/rewrite-target";
/// Ingress: comma-separated CIDRs, addresses and `a-b` address ranges allowed in.
pub const WHITELIST_SOURCE_RANGE: &str = "ncp/whitelist-source-range";

/// Whether a URL map of load balancing scheme `scheme` (a backend service's
/// `loadBalancingScheme`; none is `EXTERNAL`) accepts `routeRules[].matchRules[].regexMatch`:
/// "Regular expressions can only be used when the loadBalancingScheme is set to
/// INTERNAL_SELF_MANAGED, EXTERNAL_MANAGED (regional scope) or INTERNAL_MANAGED" (Compute API
/// reference, `HttpRouteRuleMatch.regexMatch`, urlMaps and regionUrlMaps). So: `INTERNAL_MANAGED`
/// (the internal class, regional; cross-region internal, global) and `INTERNAL_SELF_MANAGED`
/// at any scope, `EXTERNAL_MANAGED` only when `regional` (a `regionUrlMaps` URL map), never the
/// classic `EXTERNAL` load balancer. A function of the scheme, not of the Ingress class, so
/// every class built on an accepting scheme supports `ncp/use-regex`.
pub fn regex_supported(scheme: &str, regional: bool) -> bool {
    match scheme {
        "INTERNAL_MANAGED" | "INTERNAL_SELF_MANAGED" => true,
        "EXTERNAL_MANAGED" => regional,
        _ => false,
    }
}

/// Refuses `ncp/use-regex: "true"` when the load balancer `desired` is built on does not accept
/// `regexMatch` ([`regex_supported`] of its backend services' scheme and its scope), whatever
/// its paths: the annotation asks for regex semantics, and nothing is silently ignored. Runs
/// after the Ingress is translated for its class, when the scheme is known.
///
/// # Errors
/// [`TranslateError::InvalidAnnotation`] on `ncp/use-regex` naming the scheme and the fix.
pub fn refuse_unsupported_regex(
    ingress: &Ingress,
    desired: &DesiredIngress,
) -> Result<(), TranslateError> {
    if !flag(ingress, USE_REGEX)? {
        return Ok(());
    }
    let scheme = desired
        .backends
        .values()
        .find_map(|b| b.backend_service.load_balancing_scheme.as_ref())
        .map_or("EXTERNAL", |s| s.name().unwrap_or("EXTERNAL"));
    let regional = desired.region.is_some();
    if regex_supported(scheme, regional) {
        return Ok(());
    }
    let reason = if scheme == "EXTERNAL" {
        "routeRules[].matchRules[].regexMatch is not supported by the classic Application Load Balancer (loadBalancingScheme EXTERNAL) this Ingress class builds, so regex paths are refused; use Exact or Prefix paths, or the internal class (gce-internal), whose INTERNAL_MANAGED load balancer accepts regexMatch".to_owned()
    } else {
        let scope = if regional { "regional" } else { "global" };
        format!("routeRules[].matchRules[].regexMatch is not supported by loadBalancingScheme {scheme} at {scope} scope (the Compute API accepts it on INTERNAL_MANAGED, INTERNAL_SELF_MANAGED and regional EXTERNAL_MANAGED), so regex paths are refused; use Exact or Prefix paths")
    };
    Err(invalid(ingress, USE_REGEX, reason))
}

/// Priority of the first allow rule of a whitelist security policy (1000, 1001, ...).
pub const ALLOW_PRIORITY: i32 = 1000;
/// Priority of the default rule of every security policy (Compute API `securityPolicies`).
pub const DEFAULT_RULE_PRIORITY: i32 = 2_147_483_647;
/// Most `srcIpRanges` one security policy rule may hold (Compute API `securityPolicies`).
pub const MAX_RANGES_PER_RULE: usize = 10;

/// Annotations of other controllers the Compute API cannot express, and why.
const REFUSED: &[(&str, &str)] = &[
    ("ncp/ssl-mode", "the external HTTP(S) load balancer always terminates TLS (no passthrough; re-encryption follows the Service's cloud.google.com/app-protocols)"),
    ("ncp/jwt-alg", "the load balancer cannot validate JSON Web Tokens (Identity-Aware Proxy, BackendConfig spec.iap, is the Compute feature for authenticated access)"),
    ("ncp/jwt-secret", "the load balancer cannot validate JSON Web Tokens (Identity-Aware Proxy, BackendConfig spec.iap, is the Compute feature for authenticated access)"),
    ("ncp/jwt-token", "the load balancer cannot validate JSON Web Tokens (Identity-Aware Proxy, BackendConfig spec.iap, is the Compute feature for authenticated access)"),
];

/// Prefixes of other Ingress controllers' annotations: a key under one of them that this
/// operator does not read gets a Warning.
const FOREIGN_PREFIXES: &[&str] = &["ncp/", "nginx.ingress.kubernetes.io/", "projectcontour.io/"];

/// The NCP annotations of one Ingress, parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NcpOptions {
    /// `ncp/http-redirect: "true"`.
    pub http_redirect: bool,
    /// `ncp/use-regex: "true"`.
    pub use_regex: bool,
    /// `ingress.kubernetes.io/rewrite-target`, an absolute path.
    pub rewrite_target: Option<String>,
    /// `ncp/whitelist-source-range` as CIDRs (ranges split into the fewest CIDRs), sorted and
    /// deduplicated; empty when the annotation is absent.
    pub source_ranges: Vec<String>,
}

fn invalid(ingress: &Ingress, annotation: &str, reason: String) -> TranslateError {
    TranslateError::InvalidAnnotation {
        kind: "Ingress",
        object: ObjectKey::of(ingress).to_string(),
        annotation: annotation.to_owned(),
        reason,
    }
}

/// `true` / `false` (any case), as NCP documents; absent is `false`.
fn flag(ingress: &Ingress, key: &str) -> Result<bool, TranslateError> {
    match get(ingress, key).map(str::trim) {
        None => Ok(false),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(v) => Err(invalid(
            ingress,
            key,
            format!("{v:?} is neither \"true\" nor \"false\""),
        )),
    }
}

/// Parses the NCP annotations of `ingress` (whether the load balancer accepts what they ask
/// for is checked once its scheme is known, e.g. [`refuse_unsupported_regex`]).
///
/// # Errors
/// A flag that is not `true`/`false`; a rewrite target that is not an absolute path or holds
/// `$1`-style capture placeholders (Compute's `pathPrefixRewrite` is a fixed string); a source
/// range entry that is not a CIDR, an address or an `a-b` range of one address family.
pub fn options(ingress: &Ingress) -> Result<NcpOptions, TranslateError> {
    let rewrite_target = match get(ingress, REWRITE_TARGET).map(str::trim) {
        None => None,
        Some(t) if !t.starts_with('/') => {
            return Err(invalid(
                ingress,
                REWRITE_TARGET,
                format!("{t:?} is not an absolute path; write a path such as \"/\""),
            ))
        }
        Some(t) if t.contains('$') => {
            return Err(invalid(
                ingress,
                REWRITE_TARGET,
                format!("{t:?} uses capture placeholders; the Compute API's urlRewrite.pathPrefixRewrite replaces the matched path with a fixed string and has no regex substitution, so this is refused; use a fixed path"),
            ))
        }
        Some(t) => Some(t.to_owned()),
    };
    let source_ranges = match get(ingress, WHITELIST_SOURCE_RANGE) {
        None => Vec::new(),
        Some(raw) => source_ranges(raw).map_err(|r| invalid(ingress, WHITELIST_SOURCE_RANGE, r))?,
    };
    Ok(NcpOptions {
        http_redirect: flag(ingress, HTTP_REDIRECT)?,
        use_regex: flag(ingress, USE_REGEX)?,
        rewrite_target,
        source_ranges,
    })
}

/// `ncp/whitelist-source-range` -> CIDRs: `1.1.1.0/24` (host bits cleared), `2.2.2.2`
/// (`/32`, `/128` for IPv6) and `3.3.3.3-4.4.4.4` (the fewest CIDRs covering exactly that
/// range), sorted and deduplicated.
///
/// # Errors
/// The entry that is none of those, or an empty list, as a reason text.
pub fn source_ranges(raw: &str) -> Result<Vec<String>, String> {
    let mut out: Vec<IpNet> = Vec::new();
    for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = || {
            format!("entry {entry:?} is not a CIDR (10.0.0.0/8), an address (10.0.0.1) or a range (10.0.0.1-10.0.0.9)")
        };
        if let Some((a, b)) = entry.split_once('-') {
            let (a, b): (IpAddr, IpAddr) = (
                a.trim().parse().map_err(|_| bad())?,
                b.trim().parse().map_err(|_| bad())?,
            );
            match (a, b) {
                (IpAddr::V4(a), IpAddr::V4(b)) if a <= b => {
                    out.extend(Ipv4Subnets::new(a, b, 0).map(IpNet::V4));
                }
                (IpAddr::V6(a), IpAddr::V6(b)) if a <= b => {
                    out.extend(Ipv6Subnets::new(a, b, 0).map(IpNet::V6));
                }
                _ => {
                    return Err(format!(
                    "range {entry:?} must go from the lower to the higher address of one family"
                ))
                }
            }
        } else if let Ok(net) = entry.parse::<IpNet>() {
            out.push(net.trunc());
        } else {
            out.push(IpNet::from(entry.parse::<IpAddr>().map_err(|_| bad())?));
        }
    }
    if out.is_empty() {
        return Err("lists no address; give at least one CIDR, address or range".to_owned());
    }
    out.sort();
    out.dedup();
    Ok(out.iter().map(ToString::to_string).collect())
}

/// The security policy that allows only `ranges` (CIDRs from [`source_ranges`]): one `allow`
/// rule per [`MAX_RANGES_PER_RULE`] ranges from priority [`ALLOW_PRIORITY`], and the default
/// rule `deny(403)` for every other source. Its name is the cluster's `k8s2-sp-<uid8>-` prefix
/// and a hash of the ranges, so Ingresses with the same list share one policy and the policy
/// never needs an update (a new list is a new policy; GC deletes the old).
pub fn security_policy(config: &TranslateConfig, ranges: &[String]) -> model::SecurityPolicy {
    let name = format!(
        "{}{}",
        security_policy_prefix(config),
        namer::content_hash(&ranges.join(","), 16)
    );
    let rule = |priority: i32, action: &str, srcs: Vec<String>, description: &str| {
        let mut config = model::SecurityPolicyRuleMatcherConfig::default();
        config.src_ip_ranges = srcs;
        let mut matcher = model::SecurityPolicyRuleMatcher::default();
        matcher.versioned_expr = Some(model::security_policy_rule_matcher::VersionedExpr::from(
            "SRC_IPS_V1",
        ));
        matcher.config = Some(config);
        let mut rule = model::SecurityPolicyRule::default();
        rule.priority = Some(priority);
        rule.action = Some(action.to_owned());
        rule.description = Some(description.to_owned());
        rule.r#match = Some(matcher);
        rule
    };
    let mut policy = model::SecurityPolicy::default();
    policy.name = Some(name);
    policy.description = Some(format!(
        "gclb-operator: {WHITELIST_SOURCE_RANGE}: allow {}, deny the rest",
        ranges.join(", ")
    ));
    for (i, chunk) in ranges.chunks(MAX_RANGES_PER_RULE).enumerate() {
        policy.rules.push(rule(
            ALLOW_PRIORITY + i as i32,
            "allow",
            chunk.to_vec(),
            WHITELIST_SOURCE_RANGE,
        ));
    }
    policy.rules.push(rule(
        DEFAULT_RULE_PRIORITY,
        "deny(403)",
        vec!["*".to_owned()],
        "default rule: deny every source not allowed above",
    ));
    policy
}

/// Prefix of every whitelist security policy of this cluster, `k8s2-sp-<uid8>-` (for GC).
pub fn security_policy_prefix(config: &TranslateConfig) -> String {
    namer::frontend_prefix(config.mode.scheme(), "sp", &config.cluster_uid)
}

/// Warnings for annotations under other controllers' prefixes that are not read: the
/// [`REFUSED`] ones with the reason the Compute API cannot express them, any other with a
/// pointer to the migration table. `known` lists the keys that are read.
pub fn unsupported_findings(ingress: &Ingress, known: &[&str]) -> Vec<Finding> {
    let key = ObjectKey::of(ingress);
    ingress
        .annotations()
        .keys()
        .filter(|k| FOREIGN_PREFIXES.iter().any(|p| k.starts_with(p)))
        .filter(|k| !known.contains(&k.as_str()))
        .map(|k| {
            let why = REFUSED.iter().find(|(r, _)| r == k).map_or(
                "this operator does not read it; docs/annotations.md lists each supported name and its Compute equivalent",
                |(_, why)| why,
            );
            Finding {
                warning: true,
                reason: "Unsupported".to_owned(),
                message: format!("Ingress {key}: annotation {k} is not supported and has no effect: {why}"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The NCP flags read `true` and `false` in any case; anything else is an error naming the
    /// annotation.
    #[test]
    fn flags_read_true_and_false_in_any_case_and_refuse_the_rest() {
        let with = |value: &str| {
            let mut ingress = Ingress::default();
            ingress.metadata.name = Some("ing".to_owned());
            ingress.metadata.namespace = Some("default".to_owned());
            ingress.metadata.annotations = Some(
                [(USE_REGEX.to_owned(), value.to_owned())]
                    .into_iter()
                    .collect(),
            );
            options(&ingress).map(|o| o.use_regex)
        };
        assert!(with("TRUE").unwrap());
        assert!(!with("False").unwrap());
        assert!(!with(" false ").unwrap());
        let err = with("yes").unwrap_err().to_string();
        assert!(err.contains(USE_REGEX), "{err}");
    }

    /// `ingress.kubernetes.io/rewrite-target`: an absolute path is taken (trimmed); a relative
    /// one, or one with `$1`-style placeholders, is refused with an error naming the annotation
    /// and the value.
    #[test]
    fn rewrite_target_takes_an_absolute_fixed_path_only() {
        let with = |target: &str| {
            let mut ingress = Ingress::default();
            ingress.metadata.name = Some("ing".to_owned());
            ingress.metadata.namespace = Some("default".to_owned());
            ingress.metadata.annotations =
                Some([(REWRITE_TARGET.to_owned(), target.to_owned())].into());
            options(&ingress)
        };
        assert_eq!(options(&Ingress::default()).unwrap().rewrite_target, None);
        assert_eq!(
            with(" /api ").unwrap().rewrite_target.as_deref(),
            Some("/api")
        );
        for bad in ["api", "/v1/$1"] {
            match with(bad) {
                Err(TranslateError::InvalidAnnotation {
                    object,
                    annotation,
                    reason,
                    ..
                }) => {
                    assert_eq!(object, "default/ing");
                    assert_eq!(annotation, REWRITE_TARGET);
                    assert!(reason.contains(&format!("{bad:?}")), "{reason}");
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn source_ranges_accept_cidrs_addresses_and_ranges() {
        assert_eq!(
            source_ranges("192.168.128.7/17, 192.168.64.0-192.168.64.255, 192.168.16.32").unwrap(),
            ["192.168.16.32/32", "192.168.64.0/24", "192.168.128.0/17"]
        );
        assert_eq!(
            source_ranges("10.0.0.1-10.0.0.4").unwrap(),
            ["10.0.0.1/32", "10.0.0.2/31", "10.0.0.4/32"]
        );
        // A reversed range is refused, not read as empty, even beside a good entry.
        for reversed in [
            "10.0.0.9-10.0.0.1, 10.0.0.1",
            "2001:db8::2-2001:db8::1, 10.0.0.1",
        ] {
            let err = source_ranges(reversed).unwrap_err();
            assert!(err.contains("from the lower to the higher"), "{err}");
        }
        assert_eq!(
            source_ranges("2001:db8::1-2001:db8::2").unwrap(),
            ["2001:db8::1/128", "2001:db8::2/128"]
        );
        assert!(source_ranges("2001:db8::2-2001:db8::1").is_err());
        assert!(source_ranges("10.0.0.1-2001:db8::1").is_err());
        assert!(source_ranges("bogus").unwrap_err().contains("\"bogus\""));
        assert!(source_ranges(" , ").is_err());
    }

    #[test]
    fn security_policy_chunks_ranges_and_denies_the_rest() {
        let config = TranslateConfig::new("p", "default", &["z"], "c", "uid");
        let ranges: Vec<String> = (0..12).map(|i| format!("10.0.{i}.0/24")).collect();
        let p = security_policy(&config, &ranges);
        assert_eq!(p.rules.len(), 3);
        // The allow rules count up from ALLOW_PRIORITY, each below the default rule.
        assert_eq!(p.rules[0].priority, Some(ALLOW_PRIORITY));
        assert_eq!(p.rules[1].priority, Some(ALLOW_PRIORITY + 1));
        assert_eq!(p.rules[2].priority, Some(DEFAULT_RULE_PRIORITY));
        let srcs = |i: usize| {
            p.rules[i]
                .r#match
                .as_ref()
                .and_then(|m| m.config.as_ref())
                .map(|c| c.src_ip_ranges.clone())
                .unwrap_or_default()
        };
        assert_eq!(srcs(0).len(), 10);
        assert_eq!(srcs(1).len(), 2);
        assert_eq!(p.rules[2].action.as_deref(), Some("deny(403)"));
        assert_eq!(srcs(2), ["*"]);
        assert!(p
            .name
            .unwrap()
            .starts_with(&security_policy_prefix(&config)));
    }

    /// The GC prefix of whitelist policies: the scheme's frontend prefix, `sp`, the cluster.
    #[test]
    fn security_policy_prefixes_name_the_scheme_and_the_cluster() {
        let config = TranslateConfig::new("p", "default", &["z"], "c", "uid");
        let uid8 = &config.cluster_uid;
        assert_eq!(security_policy_prefix(&config), format!("k8s2-sp-{uid8}-"));
        let own = config.clone().with_mode(crate::translate::Mode::Coexist);
        assert_eq!(security_policy_prefix(&own), format!("gclb-sp-{uid8}-"));
    }

    /// Another controller's annotation this operator does not read is a Warning naming it (the
    /// refused ones with why); the ones it reads, and annotations outside those prefixes, none.
    #[test]
    fn other_controllers_annotations_not_read_are_warned_about() {
        let mut ingress = Ingress::default();
        ingress.metadata.name = Some("ing".to_owned());
        ingress.metadata.namespace = Some("default".to_owned());
        ingress.metadata.annotations = Some(
            [
                ("ncp/jwt-alg", "HS256"),
                ("nginx.ingress.kubernetes.io/ssl-redirect", "true"),
                ("projectcontour.io/websocket-routes", "/"),
                (USE_REGEX, "true"),
                ("kubernetes.io/ingress.class", "gce"),
                ("example.com/ncp/x", "1"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        );
        let findings = unsupported_findings(&ingress, &[USE_REGEX]);
        let named = |key: &str| {
            findings
                .iter()
                .filter(|f| f.warning && f.message.contains(&format!("annotation {key} ")))
                .count()
        };
        assert_eq!(findings.len(), 3, "{findings:?}");
        assert_eq!(named("ncp/jwt-alg"), 1);
        assert!(findings
            .iter()
            .any(|f| f.message.contains("JSON Web Tokens")));
        assert_eq!(named("nginx.ingress.kubernetes.io/ssl-redirect"), 1);
        assert_eq!(named("projectcontour.io/websocket-routes"), 1);
        assert!(findings
            .iter()
            .all(|f| f.message.contains("Ingress default/ing")));
    }
}
