//! Each Ingress's last successful translation, so a temporary translation error (a Service
//! deleted before the Ingress is edited, a bad path being fixed) neither closes the Ingress's
//! firewall ports nor lets garbage collection take its backends: the load balancer keeps
//! serving what it served until the Ingress translates again or is deleted.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use crate::translate::{DesiredIngress, ObjectKey};

/// What the whole-cluster jobs read of one Ingress's translation: garbage collection's live
/// set (backend service names, NEGs, the security policy, global or regional) and the shared
/// firewall rule's ports. A few hundred bytes, where a whole [`DesiredIngress`] (every Compute
/// resource of its load balancer, NEG endpoints included) is tens of KiB: 2000 of those took
/// 71 MiB (docs/performance.md, "At scale").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// [`DesiredIngress::region`]: `None` for the global load balancer, the region of an
    /// internal one.
    pub region: Option<String>,
    /// Backend service names ([`DesiredIngress::backends`]' keys).
    pub backends: BTreeSet<String>,
    /// `(zone, name)` of every backend's NEGs.
    pub negs: BTreeSet<(String, String)>,
    /// Every backend's `firewall_ports`.
    pub firewall_ports: BTreeSet<u16>,
    /// Name of the Cloud Armor policy of `ncp/whitelist-source-range`, if any.
    pub security_policy: Option<String>,
}

impl Summary {
    /// The summary of `desired`.
    pub fn of(desired: &DesiredIngress) -> Self {
        let backends = desired.backends.values();
        Self {
            region: desired.region.clone(),
            backends: desired.backends.keys().cloned().collect(),
            negs: backends
                .clone()
                .flat_map(|b| &b.negs)
                .map(|n| (n.zone.clone(), n.neg.name.clone().unwrap_or_default()))
                .collect(),
            firewall_ports: backends
                .flat_map(|b| b.firewall_ports.iter().copied())
                .collect(),
            security_policy: desired
                .security_policy
                .as_ref()
                .and_then(|p| p.name.clone()),
        }
    }
}

/// `ObjectKey` -> [`Summary`] of the last translation that succeeded; shared by all workers.
#[derive(Default)]
pub struct LastDesired {
    by_key: Mutex<HashMap<ObjectKey, Arc<Summary>>>,
}

impl LastDesired {
    /// Remembers `desired`, a successful translation of `key` (before it is acted on).
    pub fn record(&self, key: &ObjectKey, desired: &DesiredIngress) {
        let summary = Arc::new(Summary::of(desired));
        let mut by_key = self.by_key.lock().unwrap_or_else(|p| p.into_inner());
        by_key.insert(key.clone(), summary);
    }

    /// What the last reconcile of `key` acted on; for an Ingress not reconciled yet by this
    /// process (just after a start), `translate()`'s summary, remembered when it succeeds.
    /// `None`: never translated (nothing of it exists to keep).
    ///
    /// For the whole-cluster jobs (garbage collection, firewall ports), which would otherwise
    /// translate every Ingress on every run. Acting on the last reconciled translation is also
    /// what those jobs need: an Ingress whose inputs changed is requeued, and its reconcile
    /// records the new translation before it changes anything, so GC never races ahead of it
    /// to delete a backend its URL map still uses; and an Ingress whose translation now fails
    /// keeps its ports and backends until it translates again or is deleted.
    pub fn last_or_resolve<E>(
        &self,
        key: &ObjectKey,
        translate: impl FnOnce() -> Result<DesiredIngress, E>,
    ) -> Option<Arc<Summary>> {
        if let Some(summary) = self.get(key) {
            return Some(summary);
        }
        // Translated outside the lock: the other workers' lookups do not wait for it.
        let summary = Arc::new(Summary::of(&translate().ok()?));
        let mut by_key = self.by_key.lock().unwrap_or_else(|p| p.into_inner());
        Some(by_key.entry(key.clone()).or_insert(summary).clone())
    }

    fn get(&self, key: &ObjectKey) -> Option<Arc<Summary>> {
        let by_key = self.by_key.lock().unwrap_or_else(|p| p.into_inner());
        by_key.get(key).cloned()
    }

    /// Drops `key` (its load balancer was deleted).
    pub fn forget(&self, key: &ObjectKey) {
        let mut by_key = self.by_key.lock().unwrap_or_else(|p| p.into_inner());
        by_key.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use google_cloud_compute_v1::model;

    use super::*;
    use crate::translate::test_support::{config, snapshot_from_yaml};
    use crate::translate::{translate_firewall, translate_ingress, DesiredFrontend};

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            namespace: "default".into(),
            name: name.into(),
        }
    }

    fn desired(url_map: &str) -> DesiredIngress {
        DesiredIngress {
            frontend: DesiredFrontend {
                url_map: Some(model::UrlMap::new().set_name(url_map)),
                ..DesiredFrontend::default()
            },
            region: Some(url_map.into()),
            ..DesiredIngress::default()
        }
    }

    #[test]
    fn the_last_success_is_kept_until_forgotten() {
        let last = LastDesired::default();
        let web = key("web");
        // Never reconciled: translated (and remembered); a failure gives nothing.
        assert_eq!(
            last.last_or_resolve(&key("new"), || Err::<DesiredIngress, _>("bad")),
            None
        );
        let first = last.last_or_resolve::<()>(&web, || Ok(desired("a")));
        assert_eq!(first.as_deref(), Some(&Summary::of(&desired("a"))));
        // Known: what the last reconcile recorded, without translating again; a translation
        // that now fails does not take its ports and backends away.
        let again = last.last_or_resolve::<()>(&web, || panic!("translated again"));
        assert_eq!(
            again.as_deref().and_then(|s| s.region.as_deref()),
            Some("a")
        );
        last.record(&web, &desired("b"));
        let newer = last.last_or_resolve(&web, || Err("Service web not found"));
        assert_eq!(
            newer.as_deref().and_then(|s| s.region.as_deref()),
            Some("b")
        );
        last.forget(&web);
        assert_eq!(last.last_or_resolve(&web, || Err("x")), None);
    }

    /// The summary holds everything garbage collection and the firewall rule read of each
    /// Ingress of the translation golden test: every backend service, every NEG, the security
    /// policy, and ports giving the same firewall rule as the whole translations. Fails when
    /// the summary leaves one of them out.
    #[test]
    fn the_summary_keeps_what_gc_and_the_firewall_read() {
        let mut snapshot = snapshot_from_yaml(include_str!(
            "../../crates/translate/src/translate/testdata/features.yaml"
        ));
        // Ingresses with a Cloud Armor policy (ncp/whitelist-source-range).
        for ingress in snapshot.ingresses.values_mut() {
            std::sync::Arc::make_mut(ingress)
                .metadata
                .annotations
                .get_or_insert_default()
                .insert(
                    crate::translate::ncp::WHITELIST_SOURCE_RANGE.into(),
                    "10.0.0.0/8".into(),
                );
        }
        let config = config();
        let desired: Vec<DesiredIngress> = snapshot
            .ingresses
            .values()
            .filter_map(|i| translate_ingress(&snapshot, i, &config).ok())
            .collect();
        assert!(desired.len() >= 3);
        assert!(desired.iter().any(|d| d.security_policy.is_some()));
        for d in &desired {
            let summary = Summary::of(d);
            let backends: BTreeSet<String> = d.backends.keys().cloned().collect();
            assert_eq!(summary.backends, backends);
            for b in d.backends.values() {
                assert!(!b.negs.is_empty());
                for n in &b.negs {
                    let neg = (n.zone.clone(), n.neg.name.clone().unwrap());
                    assert!(summary.negs.contains(&neg), "{neg:?}");
                }
                assert!(b.firewall_ports.is_subset(&summary.firewall_ports));
            }
            assert_eq!(
                summary.security_policy,
                d.security_policy.as_ref().and_then(|p| p.name.clone())
            );
            assert_eq!(summary.region, d.region);
        }
        let refs: Vec<&DesiredIngress> = desired.iter().collect();
        let ports = desired
            .iter()
            .flat_map(|d| Summary::of(d).firewall_ports)
            .collect();
        assert_eq!(
            crate::translate::firewall::firewall_for_ports(&ports, &config),
            translate_firewall(&refs, &config)
        );
    }
}
