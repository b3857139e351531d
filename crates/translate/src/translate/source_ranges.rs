//! `ncp/whitelist-source-range` on the backend services an Ingress routes to (reference 002:
//! "only requests whose source IP is in the list are accepted"; the rest is dropped, here
//! answered 403 by the Cloud Armor policy's default rule).
//!
//! A backend service serves every Ingress that routes to its Service port, but the policy is
//! the Ingress's. So the policy goes on a backend only when every Ingress of ours that routes to
//! that Service (same namespace) asks for the same list: every one of them then computes the
//! same `securityPolicy` for it and no two syncs undo each other. Otherwise, and when a
//! BackendConfig's `securityPolicy` already claims the backend (the BackendConfig wins), the
//! backend is left without the list and a Warning names the Service. The operator-wide default
//! backend (`kube-system/default-http-backend`), shared by every Ingress without
//! `spec.defaultBackend`, never gets it: requests that match no rule still get its 404.

use std::collections::BTreeMap;

use google_cloud_compute_v1::model;
use k8s_openapi::api::networking::v1::{Ingress, IngressBackend};

use super::ncp::{self, NcpOptions, WHITELIST_SOURCE_RANGE};
use super::snapshot::in_namespace;
use super::{owns_ingress, ClusterSnapshot, DesiredBackend, Finding, ObjectKey, TranslateConfig};

/// Service names an Ingress routes to (rules and `spec.defaultBackend`).
fn services(ingress: &Ingress) -> Vec<&str> {
    let Some(spec) = ingress.spec.as_ref() else {
        return Vec::new();
    };
    fn name(b: &IngressBackend) -> Option<&str> {
        b.service.as_ref().map(|s| s.name.as_str())
    }
    let rules = spec.rules.iter().flatten().filter_map(|r| r.http.as_ref());
    rules
        .flat_map(|h| h.paths.iter().filter_map(|p| name(&p.backend)))
        .chain(spec.default_backend.as_ref().and_then(name))
        .collect()
}

/// Whether translating `ingress` reads other Ingresses (of its namespace): only to find one
/// sharing a Service with another list ([`apply`]), so only when it sets
/// `ncp/whitelist-source-range` (a reconcile's scoped snapshot leaves other Ingresses out
/// otherwise).
pub fn reads_other_ingresses(ingress: &Ingress) -> bool {
    ingress
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(WHITELIST_SOURCE_RANGE))
}

/// Attaches the whitelist policy of `ingress` to its eligible backends (module docs) and
/// returns the policy when at least one backend got it.
pub fn apply(
    snapshot: &ClusterSnapshot,
    config: &TranslateConfig,
    ingress: &Ingress,
    options: &NcpOptions,
    backends: &mut BTreeMap<String, DesiredBackend>,
    findings: &mut Vec<Finding>,
) -> Option<model::SecurityPolicy> {
    if options.source_ranges.is_empty() {
        return None;
    }
    let key = ObjectKey::of(ingress);
    let policy = ncp::security_policy(config, &options.source_ranges);
    let policy_ref = config.global_ref("securityPolicies", policy.name.as_deref()?);
    let own = services(ingress);
    let mut attached = false;
    for backend in backends.values_mut() {
        let service = backend.key.service.as_str();
        if backend.key.namespace != key.namespace || !own.contains(&service) {
            continue;
        }
        let warn = |why: String| {
            Finding {
            warning: true,
            reason: "Translate".to_owned(),
            message: format!(
                "Ingress {key}: annotation {WHITELIST_SOURCE_RANGE} is not applied to Service {}/{service}: {why}",
                key.namespace
            ),
        }
        };
        if backend.backend_service.security_policy.is_some() {
            findings.push(warn("its BackendConfig sets spec.securityPolicy, which wins; put the ranges in that policy or remove it from the BackendConfig".to_owned()));
            continue;
        }
        let other = in_namespace(&snapshot.ingresses, &key.namespace)
            .filter(|(k, _)| **k != key)
            .map(|(_, i)| i.as_ref())
            .filter(|i| services(i).contains(&service))
            .filter(|i| owns_ingress(snapshot, i, config))
            .find(|i| {
                ncp::options(i).map(|o| o.source_ranges).ok() != Some(options.source_ranges.clone())
            });
        if let Some(other) = other {
            findings.push(warn(format!(
                "Ingress {} also routes to it with another (or no) {WHITELIST_SOURCE_RANGE}, and its backend service is shared; give both Ingresses the same list",
                ObjectKey::of(other)
            )));
            continue;
        }
        backend.backend_service.security_policy = Some(policy_ref.clone());
        attached = true;
    }
    attached.then_some(policy)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::test_support::{config, snapshot_from_yaml};
    use super::super::{translate_ingress, ClusterSnapshot, DesiredIngress, ObjectKey};
    use super::WHITELIST_SOURCE_RANGE;

    /// The features snapshot with `ncp/whitelist-source-range` set on the named Ingresses.
    fn with_lists(lists: &[(&str, &str)]) -> ClusterSnapshot {
        let mut snapshot = snapshot_from_yaml(include_str!("testdata/features.yaml"));
        for &(name, list) in lists {
            let ingress = snapshot
                .ingresses
                .get_mut(&ObjectKey::new("default", name))
                .map(Arc::make_mut)
                .unwrap();
            ingress
                .metadata
                .annotations
                .get_or_insert_default()
                .insert(WHITELIST_SOURCE_RANGE.into(), list.to_string());
        }
        snapshot
    }

    /// The contract the operator's scoped snapshots rely on: an Ingress for which
    /// `reads_other_ingresses` is false translates the same without the other Ingresses;
    /// `shop`, with a list, does not (it no longer sees `https-only`'s other list).
    #[test]
    fn only_an_ingress_with_a_list_reads_the_others() {
        let snapshot = with_lists(&[("shop", "10.0.0.0/8"), ("https-only", "192.168.0.0/16")]);
        let alone = |key: &ObjectKey| {
            let mut s = snapshot.clone();
            s.ingresses.retain(|k, _| k == key);
            s
        };
        let translate = |s: &ClusterSnapshot, key: &ObjectKey| {
            translate_ingress(s, &snapshot.ingresses[key], &config())
                .map(|d| d.to_json())
                .map_err(|e| e.to_string())
        };
        let mut without_list = 0;
        for (key, ingress) in &snapshot.ingresses {
            let reads = super::reads_other_ingresses(ingress);
            assert_eq!(
                reads,
                ["shop", "https-only"].contains(&key.name.as_str()),
                "{key:?}"
            );
            if !reads {
                without_list += 1;
                assert_eq!(
                    translate(&alone(key), key),
                    translate(&snapshot, key),
                    "{key:?}"
                );
            }
        }
        assert!(without_list >= 2, "{without_list}");
        let shop = ObjectKey::new("default", "shop");
        assert_ne!(translate(&alone(&shop), &shop), translate(&snapshot, &shop));
    }

    /// `shop` and `https-only` both route to `secure-api`, whose backend service they share:
    /// with different lists neither may decide its policy, and a Warning names the other one.
    #[test]
    fn a_shared_service_with_another_list_gets_no_policy_and_a_warning() {
        let snapshot = with_lists(&[("shop", "10.0.0.0/8"), ("https-only", "192.168.0.0/16")]);
        let shop = &snapshot.ingresses[&ObjectKey::new("default", "shop")];
        let desired: DesiredIngress = translate_ingress(&snapshot, shop, &config()).unwrap();
        let secure_api = desired
            .backends
            .values()
            .find(|b| b.key.service == "secure-api")
            .unwrap();
        assert_eq!(secure_api.backend_service.security_policy, None);
        assert!(
            desired.findings.iter().any(|f| f.warning
                && f.message.contains("Service default/secure-api")
                && f.message.contains("default/https-only")),
            "{:?}",
            desired.findings
        );
    }

    /// `shop` routes to `shop` (whose BackendConfig names a policy) and `secure-api`, which
    /// `https-only` routes to as well: with the same list on both Ingresses, `secure-api` gets
    /// the whitelist policy and the Ingress wants that policy created; `shop` keeps its
    /// BackendConfig's policy and a Warning says why the list is not applied there.
    #[test]
    fn the_whitelist_policy_is_wanted_and_attached_where_no_one_else_decides() {
        let snapshot = with_lists(&[("shop", "10.0.0.0/8"), ("https-only", "10.0.0.0/8")]);
        let shop = &snapshot.ingresses[&ObjectKey::new("default", "shop")];
        let desired: DesiredIngress = translate_ingress(&snapshot, shop, &config()).unwrap();
        let policy = desired.security_policy.expect("the whitelist policy");
        let policy_ref = config().global_ref("securityPolicies", policy.name.as_deref().unwrap());
        let on = |service: &str| {
            desired
                .backends
                .values()
                .find(|b| b.key.service == service)
                .and_then(|b| b.backend_service.security_policy.clone())
        };
        assert_eq!(on("secure-api"), Some(policy_ref.clone()));
        assert_ne!(on("shop"), Some(policy_ref));
        assert!(
            desired
                .findings
                .iter()
                .any(|f| f.warning && f.message.contains("Service default/shop")),
            "{:?}",
            desired.findings
        );
    }
}
