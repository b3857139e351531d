//! Garbage collection: delete Compute resources that carry this cluster's names but that no
//! live Ingress wants (inventory §4: frontends of deleted Ingresses, backends no Ingress uses,
//! the firewall rule when no Ingress is left). A name must parse as ours for this cluster UID;
//! anything else is never touched. `resourceInUseByAnotherResource` means another URL map
//! (perhaps of an Ingress that failed translation) still uses it: skip and retry later.

use std::collections::BTreeSet;

use super::{
    addresses, backend_services, forwarding_rules, health_checks, network_endpoint_groups,
    ssl_certificates, target_http_proxies, target_https_proxies, url_maps, Changes, SyncError,
};
use crate::compute::{Compute, ErrorKind};
use crate::translate::namer;

/// What is still wanted.
#[derive(Clone, Debug, Default)]
pub struct LiveSet {
    /// The names this operator uses (GC never looks at the other scheme's).
    pub scheme: namer::Scheme,
    /// 8-char cluster UID.
    pub cluster_uid: String,
    /// `lb` names (FrontendNamer::lb_name) of every live Ingress we own, translated or not.
    pub frontends: BTreeSet<String>,
    /// Certificate prefixes (FrontendNamer::ssl_certificate_prefix) of those Ingresses.
    pub certificate_prefixes: Vec<String>,
    /// Backend names (backend service = health check = NEG) wanted by translated Ingresses.
    pub backends: BTreeSet<String>,
    /// NEGs wanted, as `(zone, name)`: a backend's NEG in a zone the cluster has left is
    /// garbage even though the backend is not.
    pub negs: BTreeSet<(String, String)>,
}

impl LiveSet {
    /// Whether `name` is a frontend resource of `kind` (`um`, `fr`, ...) of this cluster whose
    /// Ingress is gone.
    fn stale_frontend(&self, kind: &str, name: &str) -> bool {
        let prefix = format!("{}-{kind}-", self.scheme.frontend());
        let ours = namer::frontend_prefix(self.scheme, kind, &self.cluster_uid);
        match name.strip_prefix(&prefix) {
            Some(lb) if name.starts_with(&ours) => !self.frontends.contains(lb),
            _ => false,
        }
    }

    fn stale_certificate(&self, name: &str) -> bool {
        name.starts_with(&namer::frontend_prefix(
            self.scheme,
            "cr",
            &self.cluster_uid,
        )) && !self
            .certificate_prefixes
            .iter()
            .any(|p| name.starts_with(p))
    }

    fn stale_backend(&self, name: &str) -> bool {
        name.starts_with(&namer::backend_prefix(self.scheme, &self.cluster_uid))
            && !self.backends.contains(name)
    }

    fn stale_neg(&self, zone: &str, name: &str) -> bool {
        name.starts_with(&namer::backend_prefix(self.scheme, &self.cluster_uid))
            && !self.negs.contains(&(zone.to_owned(), name.to_owned()))
    }
}

fn skip_in_use(result: Result<(), SyncError>) -> Result<bool, SyncError> {
    match result {
        Ok(()) => Ok(true),
        Err(e) if e.compute_kind() == Some(ErrorKind::ResourceInUse) => {
            tracing::info!(error = %e, "still in use; will retry at the next GC");
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

fn names<T>(items: Vec<T>, name: impl Fn(&T) -> Option<&String>) -> Vec<String> {
    items.iter().filter_map(|i| name(i).cloned()).collect()
}

/// Deletes stale frontends (forwarding rules -> managed addresses -> proxies -> URL maps ->
/// certificates), then stale
/// backends (backend service -> NEGs -> health check).
pub async fn collect_garbage(
    compute: &Compute,
    live: &LiveSet,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let list_err = |kind| move |e| SyncError::compute(kind, "(list)", e);

    let rules = compute
        .list_forwarding_rules()
        .await
        .map_err(list_err(forwarding_rules::KIND))?;
    for name in names(rules, |r| r.name.as_ref()) {
        if live.stale_frontend("fr", &name) || live.stale_frontend("fs", &name) {
            forwarding_rules::delete(compute, &name, changes).await?;
        }
    }
    // Managed static IPs are named like the HTTP rule (`k8s2-fr-<lb>`); anything else,
    // including a user's `global-static-ip-name` address, does not parse as ours.
    let reserved = compute
        .list_global_addresses()
        .await
        .map_err(list_err(addresses::KIND))?;
    for name in names(reserved, |a| a.name.as_ref()) {
        if live.stale_frontend("fr", &name) {
            skip_in_use(addresses::delete(compute, &name, changes).await)?;
        }
    }
    let proxies = compute
        .list_target_http_proxies()
        .await
        .map_err(list_err(target_http_proxies::KIND))?;
    for name in names(proxies, |p| p.name.as_ref()) {
        if live.stale_frontend("tp", &name) {
            skip_in_use(target_http_proxies::delete(compute, &name, changes).await)?;
        }
    }
    let proxies = compute
        .list_target_https_proxies()
        .await
        .map_err(list_err(target_https_proxies::KIND))?;
    for name in names(proxies, |p| p.name.as_ref()) {
        if live.stale_frontend("ts", &name) {
            skip_in_use(target_https_proxies::delete(compute, &name, changes).await)?;
        }
    }
    let maps = compute
        .list_url_maps()
        .await
        .map_err(list_err(url_maps::KIND))?;
    for name in names(maps, |m| m.name.as_ref()) {
        if live.stale_frontend("um", &name) || live.stale_frontend("rm", &name) {
            skip_in_use(url_maps::delete(compute, &name, changes).await)?;
        }
    }
    let certs = compute
        .list_ssl_certificates()
        .await
        .map_err(list_err(ssl_certificates::KIND))?;
    for name in names(certs, |c| c.name.as_ref()) {
        if live.stale_certificate(&name) {
            skip_in_use(ssl_certificates::delete_stale(compute, &name, &[], changes).await)?;
        }
    }

    let services = compute
        .list_backend_services()
        .await
        .map_err(list_err(backend_services::KIND))?;
    for name in names(services, |s| s.name.as_ref()) {
        if live.stale_backend(&name) {
            skip_in_use(backend_services::delete(compute, &name, changes).await)?;
        }
    }
    // Every zone, not only the cluster's current ones: a zone whose last Node went keeps its
    // NEGs until they are collected here (once the backend service no longer uses them).
    let negs = compute
        .aggregated_list_network_endpoint_groups()
        .await
        .map_err(list_err(network_endpoint_groups::KIND))?;
    for (zone, neg) in negs {
        let Some(name) = neg.name else { continue };
        if live.stale_neg(&zone, &name) {
            skip_in_use(network_endpoint_groups::delete(compute, &zone, &name, changes).await)?;
        }
    }
    let checks = compute
        .list_health_checks()
        .await
        .map_err(list_err(health_checks::KIND))?;
    for name in names(checks, |c| c.name.as_ref()) {
        if live.stale_backend(&name) {
            skip_in_use(health_checks::delete(compute, &name, changes).await)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_clusters_unwanted_names_are_stale() {
        let mut live = LiveSet {
            scheme: namer::Scheme::Gke,
            cluster_uid: "abcd1234".into(),
            ..LiveSet::default()
        };
        live.frontends
            .insert("abcd1234-default-web-x1y2z3w4".into());
        live.backends
            .insert("k8s1-abcd1234-default-web-80-00000000".into());
        assert!(!live.stale_frontend("um", "k8s2-um-abcd1234-default-web-x1y2z3w4"));
        assert!(live.stale_frontend("um", "k8s2-um-abcd1234-default-old-x1y2z3w4"));
        assert!(!live.stale_frontend("um", "k8s2-um-otherclu-default-old-x1y2z3w4"));
        assert!(!live.stale_frontend("um", "user-made-map"));
        assert!(!live.stale_backend("k8s1-abcd1234-default-web-80-00000000"));
        assert!(live.stale_backend("k8s1-abcd1234-default-old-80-00000000"));
        assert!(!live.stale_backend("k8s1-zzzz9999-default-old-80-00000000"));
        assert!(!live.stale_backend("my-backend"));
    }

    /// In its own scheme GC sees only `gclb-` names: GKE's resources of the same cluster (same
    /// cluster UID, same Ingress names) are never stale, and the reverse.
    #[test]
    fn each_scheme_sees_only_its_own_names() {
        let own = LiveSet {
            scheme: namer::Scheme::Own,
            cluster_uid: "abcd1234".into(),
            ..LiveSet::default()
        };
        assert!(own.stale_frontend("um", "gclb-um-abcd1234-default-old-x1y2z3w4"));
        assert!(!own.stale_frontend("um", "k8s2-um-abcd1234-default-old-x1y2z3w4"));
        assert!(own.stale_backend("gclb-abcd1234-default-old-80-00000000"));
        assert!(!own.stale_backend("k8s1-abcd1234-default-old-80-00000000"));
        assert!(own.stale_certificate("gclb-cr-abcd1234-0123456789abcdef-0123456789abcdef"));
        assert!(!own.stale_certificate("k8s2-cr-abcd1234-0123456789abcdef-0123456789abcdef"));
        // A frontend name never reads as a backend name of the same scheme, and the reverse.
        assert!(!own.stale_backend("gclb-um-abcd1234-default-old-x1y2z3w4"));
        assert!(!own.stale_frontend("um", "gclb-abcd1234-default-old-80-00000000"));
        let gke = LiveSet {
            scheme: namer::Scheme::Gke,
            ..own
        };
        assert!(!gke.stale_frontend("um", "gclb-um-abcd1234-default-old-x1y2z3w4"));
        assert!(!gke.stale_backend("gclb-abcd1234-default-old-80-00000000"));
        assert!(!gke.stale_certificate("gclb-cr-abcd1234-0123456789abcdef-0123456789abcdef"));
    }

    /// A backend that is still wanted loses the NEG of a zone it no longer has.
    #[test]
    fn negs_are_stale_per_zone() {
        let mut live = LiveSet {
            scheme: namer::Scheme::Gke,
            cluster_uid: "abcd1234".into(),
            ..LiveSet::default()
        };
        let name = "k8s1-abcd1234-default-web-80-00000000";
        live.backends.insert(name.into());
        live.negs.insert(("us-central1-a".into(), name.into()));
        assert!(!live.stale_neg("us-central1-a", name));
        assert!(live.stale_neg("us-central1-b", name));
        assert!(!live.stale_backend(name));
        assert!(!live.stale_neg("us-central1-b", "k8s1-zzzz9999-default-web-80-00000000"));
    }
}
