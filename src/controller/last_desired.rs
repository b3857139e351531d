//! Each Ingress's last successful translation, so a temporary translation error (a Service
//! deleted before the Ingress is edited, a bad path being fixed) neither closes the Ingress's
//! firewall ports nor lets garbage collection take its backends: the load balancer keeps
//! serving what it served until the Ingress translates again or is deleted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::translate::{DesiredIngress, ObjectKey};

/// `ObjectKey` -> last [`DesiredIngress`] that translated; shared by all workers.
#[derive(Default)]
pub struct LastDesired {
    by_key: Mutex<HashMap<ObjectKey, Arc<DesiredIngress>>>,
}

impl LastDesired {
    /// The translation to act on: `translated` when it succeeded (and remembered), else the
    /// last success for `key`, else `None` (never translated: nothing of it exists to keep).
    pub fn resolve<E>(
        &self,
        key: &ObjectKey,
        translated: Result<DesiredIngress, E>,
    ) -> Option<DesiredIngress> {
        let mut by_key = self.by_key.lock().unwrap_or_else(|p| p.into_inner());
        match translated {
            Ok(desired) => {
                by_key.insert(key.clone(), Arc::new(desired.clone()));
                Some(desired)
            }
            Err(_) => by_key.get(key).map(|d| DesiredIngress::clone(d)),
        }
    }

    /// What the last reconcile of `key` acted on; for an Ingress not reconciled yet by this
    /// process (just after a start), `translate()` resolved as in [`LastDesired::resolve`].
    ///
    /// For the whole-cluster jobs (garbage collection, firewall ports), which would otherwise
    /// translate every Ingress on every run. Acting on the last reconciled translation is also
    /// what those jobs need: an Ingress whose inputs changed is requeued, and its reconcile
    /// records the new translation before it changes anything, so GC never races ahead of it
    /// to delete a backend its URL map still uses.
    pub fn last_or_resolve<E>(
        &self,
        key: &ObjectKey,
        translate: impl FnOnce() -> Result<DesiredIngress, E>,
    ) -> Option<Arc<DesiredIngress>> {
        let mut by_key = self.by_key.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(desired) = by_key.get(key) {
            return Some(desired.clone());
        }
        let desired = Arc::new(translate().ok()?);
        by_key.insert(key.clone(), desired.clone());
        Some(desired)
    }

    /// Drops `key` (its load balancer was deleted).
    pub fn forget(&self, key: &ObjectKey) {
        let mut by_key = self.by_key.lock().unwrap_or_else(|p| p.into_inner());
        by_key.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use google_cloud_compute_v1::model;

    use super::*;
    use crate::translate::DesiredFrontend;

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            namespace: "default".into(),
            name: name.into(),
        }
    }

    #[test]
    fn a_failed_translation_falls_back_to_the_last_success_until_forgotten() {
        let last = LastDesired::default();
        let web = key("web");
        assert_eq!(last.resolve(&web, Err::<DesiredIngress, _>("bad")), None);
        let desired = DesiredIngress {
            frontend: DesiredFrontend {
                url_map: Some(model::UrlMap::new().set_name("k8s2-um-x")),
                ..DesiredFrontend::default()
            },
            ..DesiredIngress::default()
        };
        assert_eq!(
            last.resolve::<()>(&web, Ok(desired.clone())),
            Some(desired.clone())
        );
        let kept = last.resolve(&web, Err("Service web not found"));
        assert_eq!(
            kept,
            Some(desired),
            "ports and backends stay while it fails"
        );
        assert_eq!(last.resolve(&key("other"), Err("x")), None);
        last.forget(&web);
        assert_eq!(last.resolve(&web, Err("x")), None);
    }

    #[test]
    fn last_or_resolve_translates_only_what_was_never_reconciled() {
        let last = LastDesired::default();
        let web = key("web");
        let desired = |name: &str| DesiredIngress {
            frontend: DesiredFrontend {
                url_map: Some(model::UrlMap::new().set_name(name)),
                ..DesiredFrontend::default()
            },
            ..DesiredIngress::default()
        };
        // Never reconciled: translated (and remembered); a failure gives nothing.
        assert_eq!(
            last.last_or_resolve(&key("new"), || Err::<DesiredIngress, _>("bad")),
            None
        );
        let first = last.last_or_resolve::<()>(&web, || Ok(desired("k8s2-um-a")));
        assert_eq!(first.as_deref(), Some(&desired("k8s2-um-a")));
        // Known: what the last reconcile recorded, without translating again.
        let again = last.last_or_resolve::<()>(&web, || panic!("translated again"));
        assert_eq!(again.as_deref(), Some(&desired("k8s2-um-a")));
        last.resolve::<()>(&web, Ok(desired("k8s2-um-b")));
        let newer = last.last_or_resolve::<()>(&web, || panic!("translated again"));
        assert_eq!(newer.as_deref(), Some(&desired("k8s2-um-b")));
    }
}
