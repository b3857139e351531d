//! Garbage collection: delete Compute resources that carry this cluster's names but that no
//! live Ingress wants (inventory §4: frontends of deleted Ingresses, backends no Ingress uses,
//! the firewall rule when no Ingress is left). A name must parse as ours for this cluster UID;
//! anything else is never touched. `resourceInUseByAnotherResource` means another URL map
//! (perhaps of an Ingress that failed translation) still uses it: skip and retry later. What
//! exists comes from the state cache, so a run lists nothing that a sync listed recently.
//!
//! A run is two steps: [`list_candidates`] without any lock, then [`delete_garbage`] under the
//! controller's exclusive lock with the live set read there (see [`Candidates`] for why that is
//! safe).

use std::collections::BTreeSet;
use std::future::Future;

use futures::StreamExt;
use google_cloud_compute_v1::model;

use super::{
    addresses, backend_services, forwarding_rules, health_checks, network_endpoint_groups,
    security_policies, ssl_certificates, target_http_proxies, target_https_proxies, url_maps,
    Changes, SyncError,
};
use crate::compute::observed::Listed;
use crate::compute::{Compute, ErrorKind};
use crate::translate::namer;

/// What is still wanted.
#[derive(Clone, Debug, Default)]
pub struct LiveSet {
    /// The names this operator uses (GC never looks at the other scheme's).
    pub scheme: namer::Scheme,
    /// 8-char cluster UID.
    pub cluster_uid: String,
    /// GKE's v1 cluster UID (`TranslateConfig::gke_uid`): backends are named after it, and in
    /// GKE's scheme v1 frontend names end with it.
    pub gke_uid: String,
    /// Resource names ([`namer::FrontendNamer::resource_names`]) of every live Ingress with
    /// GKE's v1 names (takeover mode).
    pub v1_names: BTreeSet<String>,
    /// `lb` names (FrontendNamer::lb_name) of every live Ingress we own, translated or not.
    pub frontends: BTreeSet<String>,
    /// Certificate prefixes (FrontendNamer::ssl_certificate_prefix) of those Ingresses.
    pub certificate_prefixes: Vec<String>,
    /// Backend names (backend service = health check = NEG) wanted by translated Ingresses.
    pub backends: BTreeSet<String>,
    /// NEGs wanted, as `(zone, name)`: a backend's NEG in a zone the cluster has left is
    /// garbage even though the backend is not.
    pub negs: BTreeSet<(String, String)>,
    /// `k8s2-sp-<uid8>-` prefix of this cluster's whitelist security policies.
    pub security_policy_prefix: String,
    /// Whitelist security policies wanted by translated Ingresses.
    pub security_policies: BTreeSet<String>,
}

impl LiveSet {
    /// Whether `name` is a frontend resource of `kind` (`um`, `fr`, ...) of this cluster whose
    /// Ingress is gone.
    pub(crate) fn stale_frontend(&self, kind: &str, name: &str) -> bool {
        let prefix = format!("{}-{kind}-", self.scheme.frontend());
        let ours = namer::frontend_prefix(self.scheme, kind, &self.cluster_uid);
        match name.strip_prefix(&prefix) {
            Some(lb) if name.starts_with(&ours) => !self.frontends.contains(lb),
            _ => self.stale_v1(kind, name) && !self.v1_names.contains(name),
        }
    }

    /// A v1 name of this cluster (GKE's scheme only: the operator's own never has v1 names).
    fn stale_v1(&self, kind: &str, name: &str) -> bool {
        self.scheme == namer::Scheme::Gke && namer::is_v1_frontend(kind, name, &self.gke_uid)
    }

    pub(crate) fn stale_certificate(&self, name: &str) -> bool {
        (name.starts_with(&namer::frontend_prefix(
            self.scheme,
            "cr",
            &self.cluster_uid,
        )) || self.stale_v1("cr", name))
            && !self
                .certificate_prefixes
                .iter()
                .any(|p| name.starts_with(p))
    }

    pub(crate) fn stale_backend(&self, name: &str) -> bool {
        name.starts_with(&namer::backend_prefix(self.scheme, &self.gke_uid))
            && !self.backends.contains(name)
    }

    fn stale_neg(&self, zone: &str, name: &str) -> bool {
        name.starts_with(&namer::backend_prefix(self.scheme, &self.gke_uid))
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

/// Deletes are sent this many at a time within one phase of garbage collection.
pub const GC_CONCURRENCY: usize = 16;

/// Runs `delete` for every name (or `(zone, name)`) at once (at most [`GC_CONCURRENCY`] in
/// flight), skipping the ones still in use; keeps every change, returns the first other error.
pub(super) async fn delete_each<N, F, Fut>(
    names: Vec<N>,
    changes: &mut Changes,
    delete: F,
) -> Result<(), SyncError>
where
    F: Fn(N) -> Fut,
    Fut: Future<Output = (Changes, Result<(), SyncError>)>,
{
    let results: Vec<(Changes, Result<(), SyncError>)> = futures::stream::iter(names)
        .map(&delete)
        .buffered(GC_CONCURRENCY)
        .collect()
        .await;
    let results = results
        .into_iter()
        .map(|(c, r)| (c, skip_in_use(r).map(drop)));
    super::merge(changes, results).map(drop)
}

/// What one garbage collection run may delete: the names each collection held when it was
/// listed, *before* the run takes the exclusive lock (`controller::Context::gc_now`), so the
/// lists (a quarter of a second each on the real API) never hold up a sync. Under the lock the
/// run deletes only names found here that the live set read there calls stale
/// ([`delete_garbage`]): a resource created after the lists is not here, so this run cannot
/// delete it whoever created it; one deleted since is skipped (the state cache knows it gone,
/// or the API answers 404). The deletes are thus a subset of what a run listing under the lock
/// would delete. The regional collections fill the same fields
/// (`sync::regional_ingress::list_regional_candidates`; no addresses, NEGs or policies there).
#[derive(Clone, Debug, Default)]
pub struct Candidates {
    /// Forwarding rule names.
    pub forwarding_rules: Vec<String>,
    /// Global address names (managed static IPs are named like the HTTP rule).
    pub addresses: Vec<String>,
    /// Target HTTP proxy names.
    pub target_http_proxies: Vec<String>,
    /// Target HTTPS proxy names.
    pub target_https_proxies: Vec<String>,
    /// URL map names.
    pub url_maps: Vec<String>,
    /// SSL certificate names.
    pub ssl_certificates: Vec<String>,
    /// Backend service names.
    pub backend_services: Vec<String>,
    /// NEGs as `(zone, name)`, of every zone.
    pub negs: Vec<(String, String)>,
    /// Health check names.
    pub health_checks: Vec<String>,
    /// Security policies named with this cluster's prefix.
    pub security_policies: Vec<String>,
}

/// The names in `names` that `is_stale` picks.
pub(super) fn stale(names: &[String], is_stale: impl Fn(&str) -> bool) -> Vec<String> {
    names.iter().filter(|n| is_stale(n)).cloned().collect()
}

/// Every name of one cached collection (listed first when the state cache's list is stale).
async fn observed_names<T: Listed>(
    compute: &Compute,
    kind: &'static str,
) -> Result<Vec<String>, SyncError> {
    let items = compute
        .observed_all::<T>()
        .await
        .map_err(|e| SyncError::compute(kind, "(list)", e))?;
    Ok(items
        .iter()
        .filter_map(|i| i.name().map(str::to_owned))
        .collect())
}

/// Lists every collection garbage collection looks at, all at once (the state cache answers
/// those it listed recently; NEGs are one `aggregatedList`; security policies named with
/// `security_policy_prefix`, none when it is empty or the operator may not list them). Takes
/// no lock: see [`Candidates`]. Errors: the first list that failed.
pub async fn list_candidates(
    compute: &Compute,
    security_policy_prefix: &str,
) -> Result<Candidates, SyncError> {
    let negs = async {
        let negs = compute
            .aggregated_list_network_endpoint_groups()
            .await
            .map_err(|e| SyncError::compute(network_endpoint_groups::KIND, "(list)", e))?;
        Ok(negs
            .into_iter()
            .filter_map(|(zone, neg)| Some((zone, neg.name?)))
            .collect())
    };
    let policies = async {
        if security_policy_prefix.is_empty() {
            return Ok(Vec::new());
        }
        security_policies::list_ours(compute, security_policy_prefix).await
    };
    // Boxed, as in the sync graph: a join holds its futures inline.
    let (
        (forwarding_rules, addresses, target_http_proxies, target_https_proxies, url_maps),
        (ssl_certificates, backend_services, negs, health_checks, security_policies),
    ) = futures::try_join!(
        Box::pin(async {
            futures::try_join!(
                observed_names::<model::ForwardingRule>(compute, forwarding_rules::KIND),
                observed_names::<model::Address>(compute, addresses::KIND),
                observed_names::<model::TargetHttpProxy>(compute, target_http_proxies::KIND),
                observed_names::<model::TargetHttpsProxy>(compute, target_https_proxies::KIND),
                observed_names::<model::UrlMap>(compute, url_maps::KIND),
            )
        }),
        Box::pin(async {
            futures::try_join!(
                observed_names::<model::SslCertificate>(compute, ssl_certificates::KIND),
                observed_names::<model::BackendService>(compute, backend_services::KIND),
                negs,
                observed_names::<model::HealthCheck>(compute, health_checks::KIND),
                policies,
            )
        }),
    )?;
    Ok(Candidates {
        forwarding_rules,
        addresses,
        target_http_proxies,
        target_https_proxies,
        url_maps,
        ssl_certificates,
        backend_services,
        negs,
        health_checks,
        security_policies,
    })
}

/// Deletes the stale among `candidates` ([`list_candidates`]): stale frontends (forwarding
/// rules -> managed addresses and proxies -> URL maps -> certificates), then stale backends
/// (backend service -> NEGs -> health check), then whitelist policies no backend service names
/// any more. Each phase deletes at once; a resource still in use is skipped until the next run.
/// Run it under the exclusive lock with `live` read there.
pub async fn delete_garbage(
    compute: &Compute,
    candidates: &Candidates,
    live: &LiveSet,
    changes: &mut Changes,
) -> Result<(), SyncError> {
    let c = candidates;
    let names = stale(&c.forwarding_rules, |n| {
        live.stale_frontend("fr", n) || live.stale_frontend("fs", n)
    });
    delete_each(names, changes, |name| async move {
        let mut c = Changes::new();
        let r = forwarding_rules::delete(compute, &name, &mut c).await;
        (c, r)
    })
    .await?;
    // Managed static IPs are named like the HTTP rule (`k8s2-fr-<lb>`); anything else,
    // including a user's `global-static-ip-name` address, does not parse as ours.
    let names = stale(&c.addresses, |n| live.stale_frontend("fr", n));
    delete_each(names, changes, |name| async move {
        let mut c = Changes::new();
        let r = addresses::delete(compute, &name, &mut c).await;
        (c, r)
    })
    .await?;
    let names = stale(&c.target_http_proxies, |n| live.stale_frontend("tp", n));
    delete_each(names, changes, |name| async move {
        let mut c = Changes::new();
        let r = target_http_proxies::delete(compute, &name, &mut c).await;
        (c, r)
    })
    .await?;
    let names = stale(&c.target_https_proxies, |n| live.stale_frontend("ts", n));
    delete_each(names, changes, |name| async move {
        let mut c = Changes::new();
        let r = target_https_proxies::delete(compute, &name, &mut c).await;
        (c, r)
    })
    .await?;
    let names = stale(&c.url_maps, |n| {
        live.stale_frontend("um", n) || live.stale_frontend("rm", n)
    });
    delete_each(names, changes, |name| async move {
        let mut c = Changes::new();
        let r = url_maps::delete(compute, &name, &mut c).await;
        (c, r)
    })
    .await?;
    let names = stale(&c.ssl_certificates, |n| live.stale_certificate(n));
    delete_each(names, changes, |name| async move {
        let mut c = Changes::new();
        let r = ssl_certificates::delete_stale(compute, &name, &[], &mut c).await;
        (c, r)
    })
    .await?;

    let names = stale(&c.backend_services, |n| live.stale_backend(n));
    delete_each(names, changes, |name| async move {
        let mut c = Changes::new();
        let r = backend_services::delete(compute, &name, &mut c).await;
        (c, r)
    })
    .await?;
    // Every zone, not only the cluster's current ones: a zone whose last Node went keeps its
    // NEGs until they are collected here (once the backend service no longer uses them).
    let negs = c
        .negs
        .iter()
        .filter(|(zone, name)| live.stale_neg(zone, name))
        .cloned()
        .collect();
    delete_each(negs, changes, |(zone, name)| async move {
        let mut c = Changes::new();
        let r = network_endpoint_groups::delete(compute, &zone, &name, &mut c).await;
        (c, r)
    })
    .await?;
    let names = stale(&c.health_checks, |n| live.stale_backend(n));
    delete_each(names, changes, |name| async move {
        let mut c = Changes::new();
        let r = health_checks::delete(compute, &name, &mut c).await;
        (c, r)
    })
    .await?;
    // After the backend services: a policy is in use while one names it.
    if live.security_policy_prefix.is_empty() {
        return Ok(());
    }
    let names = stale(&c.security_policies, |n| {
        n.starts_with(&live.security_policy_prefix) && !live.security_policies.contains(n)
    });
    delete_each(names, changes, |name| async move {
        let mut c = Changes::new();
        let r = security_policies::delete(compute, &name, &mut c).await;
        (c, r)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_clusters_unwanted_names_are_stale() {
        let mut live = LiveSet {
            scheme: namer::Scheme::Gke,
            cluster_uid: "abcd1234".into(),
            gke_uid: "abcd1234".into(),
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
            gke_uid: "abcd1234".into(),
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

    /// In GKE's scheme the backends carry GKE's v1 cluster UID (the `ingress-uid` ConfigMap),
    /// not the v2 one; v1 frontends of this cluster are stale unless a live v1 Ingress has
    /// them, v1 names of another cluster never are.
    #[test]
    fn gke_scheme_recognises_v1_names_and_the_configmap_uid() {
        let uid = "adfa97d7ec938d15";
        let mut live = LiveSet {
            scheme: namer::Scheme::Gke,
            cluster_uid: "b9cddxmo".into(),
            gke_uid: uid.into(),
            ..LiveSet::default()
        };
        let kept = namer::FrontendNamer::v1(uid, "default", "web");
        live.v1_names.extend(kept.resource_names());
        let gone = namer::FrontendNamer::v1(uid, "default", "old");
        let other = namer::FrontendNamer::v1("0123456789abcdef", "default", "old");
        assert!(!live.stale_frontend("um", &kept.url_map()));
        assert!(live.stale_frontend("um", &gone.url_map()));
        assert!(live.stale_frontend("fr", &gone.http_forwarding_rule()));
        assert!(live.stale_frontend("ts", &gone.target_https_proxy()));
        assert!(!live.stale_frontend("um", &other.url_map()));
        assert!(live.stale_certificate(&gone.ssl_certificate(b"pem")));
        assert!(!live.stale_certificate(&other.ssl_certificate(b"pem")));
        assert!(live.stale_backend("k8s1-adfa97d7-default-old-80-00000000"));
        assert!(!live.stale_backend("k8s1-b9cddxmo-default-old-80-00000000"));
        // The operator's own scheme never has v1 names.
        let own = LiveSet {
            scheme: namer::Scheme::Own,
            ..live
        };
        assert!(!own.stale_frontend("um", &gone.url_map()));
    }

    /// A backend that is still wanted loses the NEG of a zone it no longer has.
    #[test]
    fn negs_are_stale_per_zone() {
        let mut live = LiveSet {
            scheme: namer::Scheme::Gke,
            cluster_uid: "abcd1234".into(),
            gke_uid: "abcd1234".into(),
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
