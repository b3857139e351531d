//! What exists in the project, as the operator last saw it: one cache per Compute collection,
//! shared by every reconcile, so that N Ingresses cost one `list` per collection instead of
//! one `get` per resource per Ingress (issue 18: `<= 8` reads per Ingress at steady state).
//!
//! - A collection is listed (every page) the first time it is asked about, and again once its
//!   last list is older than [`super::ComputeConfig::state_max_age`]; callers that ask while a
//!   list is going share it.
//! - Sync records its own writes ([`super::Compute::record`]): what it inserted or updated is known
//!   without reading it back, and what it deleted is known gone.
//! - A list does not undo newer knowledge: an entry recorded after the list was sent is kept,
//!   since the list may predate it (every record carries a sequence number).
//! - An entry the operator wrote carries no fingerprint (the API sets a new one on every write);
//!   sync fetches the resource before an update that needs it ([`super::Compute::refetch`]).
//! - Sync corrects single entries from what the API answers: `409 alreadyExists` or
//!   `412 conditionNotMet` refetch the resource, `404` on an update or delete records it gone.
//!
//! NEG endpoints are cached per NEG (`listNetworkEndpoints` has no collection-wide form) with the
//! same age limit. The cache is the operator's memory of the project; anything changed behind
//! its back is seen at the next list (or, for forwarding rules, at the next reconcile of their
//! Ingress: `sync::ingress` reads those each time).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use google_cloud_compute_v1::model;

use super::Result;

/// One cached resource (or the knowledge that it is gone) and when it was learnt.
pub(super) struct Slot<T> {
    pub(super) value: Option<Arc<T>>,
    pub(super) seq: u64,
    pub(super) at: Instant,
}

pub(super) struct Inner<T> {
    /// When the last complete list was sent.
    pub(super) listed_at: Option<Instant>,
    pub(super) items: HashMap<String, Slot<T>>,
}

/// The cache of one collection (or of one zone's NEGs), by resource name.
pub struct Observed<T> {
    pub(super) inner: Mutex<Inner<T>>,
    /// Held while a list is running, so concurrent callers share it.
    pub(super) listing: tokio::sync::Mutex<()>,
}

impl<T> Default for Observed<T> {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Inner {
                listed_at: None,
                items: HashMap::new(),
            }),
            listing: tokio::sync::Mutex::new(()),
        }
    }
}

impl<T> Observed<T> {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Inner<T>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn is_fresh(&self, max_age: Duration) -> bool {
        self.lock()
            .listed_at
            .is_some_and(|at| at.elapsed() < max_age)
    }

    /// Lists with `list` unless a list younger than `max_age` exists; merges the result.
    pub(super) async fn refresh_if_stale<F, Fut>(
        &self,
        max_age: Duration,
        seq: &AtomicU64,
        list: F,
    ) -> Result<()>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Vec<(String, T)>>>,
    {
        if self.is_fresh(max_age) {
            return Ok(());
        }
        let _one = self.listing.lock().await;
        if self.is_fresh(max_age) {
            return Ok(());
        }
        let started = Instant::now();
        let start = seq.load(Ordering::SeqCst);
        let listed = list().await?;
        let mut inner = self.lock();
        let mut items: HashMap<String, Slot<T>> = listed
            .into_iter()
            .map(|(name, v)| {
                let slot = Slot {
                    value: Some(Arc::new(v)),
                    seq: start,
                    at: started,
                };
                (name, slot)
            })
            .collect();
        for (name, slot) in inner.items.drain() {
            if slot.seq > start {
                items.insert(name, slot);
            }
        }
        inner.items = items;
        inner.listed_at = Some(started);
        Ok(())
    }

    pub(super) fn get(&self, name: &str) -> Option<Arc<T>> {
        self.lock().items.get(name).and_then(|s| s.value.clone())
    }

    /// Records `value` under `name` unless something newer than `seq` is known already.
    pub(super) fn put(&self, name: &str, value: Option<Arc<T>>, seq: u64) {
        let mut inner = self.lock();
        match inner.items.get(name) {
            Some(slot) if slot.seq > seq => {}
            _ => {
                inner.items.insert(
                    name.to_string(),
                    Slot {
                        value,
                        seq,
                        at: Instant::now(),
                    },
                );
            }
        }
    }

    pub(super) fn all(&self) -> Vec<Arc<T>> {
        self.lock()
            .items
            .values()
            .filter_map(|s| s.value.clone())
            .collect()
    }

    pub(super) fn invalidate(&self) {
        self.lock().listed_at = None;
    }
}

/// The endpoints of one NEG as last listed or written (ip, port and instance as attached).
pub type Endpoints = Vec<model::NetworkEndpoint>;

/// Every collection sync reads, and the NEG endpoints.
#[derive(Default)]
pub struct ComputeState {
    pub(super) max_age: Duration,
    pub(super) seq: AtomicU64,
    pub(super) url_maps: Observed<model::UrlMap>,
    pub(super) backend_services: Observed<model::BackendService>,
    pub(super) health_checks: Observed<model::HealthCheck>,
    pub(super) forwarding_rules: Observed<model::ForwardingRule>,
    pub(super) target_http_proxies: Observed<model::TargetHttpProxy>,
    pub(super) target_https_proxies: Observed<model::TargetHttpsProxy>,
    pub(super) ssl_certificates: Observed<model::SslCertificate>,
    pub(super) global_addresses: Observed<model::Address>,
    /// Per zone.
    pub(super) negs: Mutex<HashMap<String, Arc<Observed<model::NetworkEndpointGroup>>>>,
    /// Per `zone/name`.
    pub(super) endpoints: Observed<Endpoints>,
}

impl ComputeState {
    /// An empty state whose lists are trusted for `max_age`.
    pub fn new(max_age: Duration) -> Self {
        Self {
            max_age,
            ..Self::default()
        }
    }

    pub(super) fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst) + 1
    }

    pub(super) fn negs_in(&self, zone: &str) -> Arc<Observed<model::NetworkEndpointGroup>> {
        self.negs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(zone.to_string())
            .or_default()
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn list_of(names: &[&str]) -> Result<Vec<(String, String)>> {
        Ok(names
            .iter()
            .map(|n| (n.to_string(), format!("listed {n}")))
            .collect())
    }

    #[tokio::test]
    async fn a_list_keeps_what_was_recorded_after_it_was_sent() {
        let cache: Observed<String> = Observed::default();
        let seq = AtomicU64::new(0);
        let age = Duration::from_secs(3600);
        cache.put("old", Some(Arc::new("recorded".into())), 1);
        seq.store(1, Ordering::SeqCst);
        // While the list is "on the wire", a write records `new` and deletes `gone`.
        cache
            .refresh_if_stale(age, &seq, || async {
                cache.put("new", Some(Arc::new("written".into())), 2);
                cache.put("gone", None, 3);
                seq.store(3, Ordering::SeqCst);
                list_of(&["a", "gone"]).await
            })
            .await
            .unwrap();
        assert_eq!(
            cache.get("a").as_deref().map(String::as_str),
            Some("listed a")
        );
        assert_eq!(
            cache.get("new").as_deref().map(String::as_str),
            Some("written"),
            "recorded after the list was sent"
        );
        assert_eq!(cache.get("gone"), None, "deleted after the list was sent");
        assert_eq!(
            cache.get("old"),
            None,
            "recorded before the list, absent from it"
        );
        // Fresh now: a second ask does not list.
        cache
            .refresh_if_stale(age, &seq, || async { panic!("listed again") })
            .await
            .unwrap();
        // Older knowledge never replaces newer.
        cache.put("a", Some(Arc::new("stale".into())), 0);
        assert_eq!(
            cache.get("a").as_deref().map(String::as_str),
            Some("listed a")
        );
        cache.invalidate();
        cache
            .refresh_if_stale(age, &seq, || list_of(&["b"]))
            .await
            .unwrap();
        assert_eq!(cache.get("a"), None);
        assert!(cache.get("b").is_some());
    }

    #[tokio::test]
    async fn concurrent_askers_share_one_list() {
        let cache: Arc<Observed<String>> = Arc::new(Observed::default());
        let seq = Arc::new(AtomicU64::new(0));
        let lists = Arc::new(AtomicU64::new(0));
        let (open, gate) = tokio::sync::watch::channel(false);
        let mut tasks = Vec::new();
        for _ in 0..10 {
            let (cache, seq, lists, mut gate) =
                (cache.clone(), seq.clone(), lists.clone(), gate.clone());
            tasks.push(tokio::spawn(async move {
                cache
                    .refresh_if_stale(Duration::from_secs(60), &seq, || async {
                        lists.fetch_add(1, Ordering::SeqCst);
                        let _ = gate.wait_for(|o| *o).await;
                        list_of(&["x"]).await
                    })
                    .await
            }));
        }
        tokio::time::timeout(Duration::from_secs(10), async {
            while lists.load(Ordering::SeqCst) == 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the first list starts");
        open.send_replace(true);
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        assert_eq!(lists.load(Ordering::SeqCst), 1);
        assert!(cache.get("x").is_some());
    }
}
