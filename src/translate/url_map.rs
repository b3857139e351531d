//! Ingress rules -> the URL map (inventory §5; reference 001 "Ingress rules", "Hostname
//! wildcards", "Multiple matches").
//!
//! - A rule without `host` matches every host (`*`); `*.foo.com` passes through, GCE matches
//!   it like reference 001's table (one DNS label).
//! - All rules for one host are **merged** into one path matcher (GKE keeps only the last
//!   rule). When the same GCE path appears twice with different backends, the **last** one
//!   wins (as GKE does inside one rule) and a Warning [`Finding`] names both fields.
//! - Host rules are sorted by host; path rules keep Ingress order of first appearance.
//! - pathMatcher names are `host` + a hash of the host (see [`namer::path_matcher`]).

use std::collections::BTreeMap;

use google_cloud_compute_v1::model;
use k8s_openapi::api::networking::v1::Ingress;

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
    /// Path collisions.
    pub findings: Vec<Finding>,
}

struct PathEntry {
    path: String,
    backend: String,
    field: String,
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
) -> Result<UrlMapPlan<'a>, TranslateError> {
    let key = ObjectKey::of(ingress);
    let mut hosts: BTreeMap<String, Vec<PathEntry>> = BTreeMap::new();
    let mut backends: Vec<ResolvedBackend<'a>> = Vec::new();
    let mut findings = Vec::new();
    let rules = ingress
        .spec
        .as_ref()
        .and_then(|s| s.rules.as_deref())
        .unwrap_or_default();
    for (i, rule) in rules.iter().enumerate() {
        let host = rule
            .host
            .as_deref()
            .filter(|h| !h.is_empty())
            .unwrap_or("*");
        let Some(http) = rule.http.as_ref() else {
            continue;
        };
        for (j, path) in http.paths.iter().enumerate() {
            let field = format!("spec.rules[{i}].http.paths[{j}]");
            let gce = gce_paths(
                Some(path.path_type.as_str()).filter(|t| !t.is_empty()),
                path.path.as_deref(),
            )
            .map_err(|e| match e {
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
            })?;
            let resolved = resolve_ingress_backend(
                snapshot,
                &key,
                &path.backend,
                &format!("{field}.backend"),
            )?;
            let bs_name = namer::backend(
                &config.cluster_uid,
                &resolved.key.namespace,
                &resolved.key.service,
                resolved.key.port,
            );
            if !backends.iter().any(|b| b.key == resolved.key) {
                backends.push(resolved);
            }
            let entries = hosts.entry(host.to_owned()).or_default();
            for p in gce {
                match entries.iter_mut().find(|e| e.path == p) {
                    Some(existing) if existing.backend != bs_name => {
                        // One warning per pair of Ingress paths, even when a Prefix path
                        // collides on both of its GCE paths (`/foo` and `/foo/*`).
                        let earlier = std::mem::replace(&mut existing.field, field.clone());
                        existing.backend = bs_name.clone();
                        let message = format!(
                            "Ingress {key}: host {host:?} path {:?} is routed by both {earlier} and {field}; \
                             {field} wins. Remove one of the two paths",
                            path.path.as_deref().unwrap_or_default()
                        );
                        if !findings.iter().any(|f: &Finding| f.message == message) {
                            findings.push(Finding {
                                warning: true,
                                reason: "Translate".to_owned(),
                                message,
                            });
                        }
                    }
                    Some(_) => {}
                    None => entries.push(PathEntry {
                        path: p,
                        backend: bs_name.clone(),
                        field: field.clone(),
                    }),
                }
            }
        }
    }

    let mut um = model::UrlMap::default();
    um.name = Some(name.to_owned());
    um.description = Some(ingress_description(&key));
    um.default_service = Some(default_service.to_owned());
    for (host, entries) in hosts {
        let matcher = namer::path_matcher(&host);
        let mut rule = model::HostRule::default();
        rule.hosts = vec![host];
        rule.path_matcher = Some(matcher.clone());
        um.host_rules.push(rule);
        let mut pm = model::PathMatcher::default();
        pm.name = Some(matcher);
        pm.default_service = Some(default_service.to_owned());
        pm.path_rules = entries
            .into_iter()
            .map(|e| {
                let mut pr = model::PathRule::default();
                pr.paths = vec![e.path];
                pr.service = Some(config.global_ref("backendServices", &e.backend));
                pr
            })
            .collect();
        um.path_matchers.push(pm);
    }
    Ok(UrlMapPlan {
        url_map: um,
        backends,
        findings,
    })
}

/// `{"kubernetes.io/ingress-name":"ns/name"}`, the description of per-Ingress resources.
pub fn ingress_description(key: &ObjectKey) -> String {
    serde_json::json!({ "kubernetes.io/ingress-name": key.to_string() }).to_string()
}
