//! Each Ingress's last successful translation, so a temporary translation error (a Service
//! deleted before the Ingress is edited, a bad path being fixed) neither closes the Ingress's
//! firewall ports nor lets garbage collection take its backends: the load balancer keeps
//! serving what it served until the Ingress translates again or is deleted.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::translate::{DesiredIngress, ObjectKey};

/// `ObjectKey` -> last [`DesiredIngress`] that translated; shared by all workers.
#[derive(Default)]
pub struct LastDesired {
    by_key: Mutex<HashMap<ObjectKey, DesiredIngress>>,
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
                by_key.insert(key.clone(), desired.clone());
                Some(desired)
            }
            Err(_) => by_key.get(key).cloned(),
        }
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
}
