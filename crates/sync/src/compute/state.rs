//! What exists in the project, as the operator last saw it: one cache per Compute collection,
//! shared by every reconcile, so that N Ingresses cost one `list` per collection instead of
//! one `get` per resource per Ingress (issue 18: `<= 8` reads per Ingress at steady state).
//!
//! - A collection is listed (every page) the first time it is asked about, and again once its
//!   last list is older than [`super::ComputeConfig::state_max_age`]; callers that ask while a
//!   list is going share it.
//! - Sync records its own writes ([`Compute::record`]): what it inserted or updated is known
//!   without reading it back, and what it deleted is known gone.
//! - A list does not undo newer knowledge: an entry recorded after the list was sent is kept,
//!   since the list may predate it (every record carries a sequence number).
//! - An entry the operator wrote carries no fingerprint (the API sets a new one on every write);
//!   sync fetches the resource before an update that needs it ([`Compute::refetch`]).
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

use futures::future::BoxFuture;
use google_cloud_compute_v1::model;

use super::{Compute, Result};

/// One cached resource (or the knowledge that it is gone) and when it was learnt.
struct Slot<T> {
    value: Option<Arc<T>>,
    seq: u64,
    at: Instant,
}

struct Inner<T> {
    /// When the last complete list was sent.
    listed_at: Option<Instant>,
    items: HashMap<String, Slot<T>>,
}

/// The cache of one collection (or of one zone's NEGs), by resource name.
pub struct Observed<T> {
    inner: Mutex<Inner<T>>,
    /// Held while a list is running, so concurrent callers share it.
    listing: tokio::sync::Mutex<()>,
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
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<T>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn is_fresh(&self, max_age: Duration) -> bool {
        self.lock()
            .listed_at
            .is_some_and(|at| at.elapsed() < max_age)
    }

    /// Lists with `list` unless a list younger than `max_age` exists; merges the result.
    async fn refresh_if_stale<F, Fut>(
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

    fn get(&self, name: &str) -> Option<Arc<T>> {
        self.lock().items.get(name).and_then(|s| s.value.clone())
    }

    /// Records `value` under `name` unless something newer than `seq` is known already.
    fn put(&self, name: &str, value: Option<Arc<T>>, seq: u64) {
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

    fn all(&self) -> Vec<Arc<T>> {
        self.lock()
            .items
            .values()
            .filter_map(|s| s.value.clone())
            .collect()
    }

    fn invalidate(&self) {
        self.lock().listed_at = None;
    }
}

/// The endpoints of one NEG as last listed or written (ip, port and instance as attached).
pub type Endpoints = Vec<model::NetworkEndpoint>;

/// Every collection sync reads, and the NEG endpoints.
#[derive(Default)]
pub struct ComputeState {
    max_age: Duration,
    seq: AtomicU64,
    url_maps: Observed<model::UrlMap>,
    backend_services: Observed<model::BackendService>,
    health_checks: Observed<model::HealthCheck>,
    forwarding_rules: Observed<model::ForwardingRule>,
    target_http_proxies: Observed<model::TargetHttpProxy>,
    target_https_proxies: Observed<model::TargetHttpsProxy>,
    ssl_certificates: Observed<model::SslCertificate>,
    global_addresses: Observed<model::Address>,
    /// Per zone.
    negs: Mutex<HashMap<String, Arc<Observed<model::NetworkEndpointGroup>>>>,
    /// Per `zone/name`.
    endpoints: Observed<Endpoints>,
}

impl ComputeState {
    /// An empty state whose lists are trusted for `max_age`.
    pub fn new(max_age: Duration) -> Self {
        Self {
            max_age,
            ..Self::default()
        }
    }

    fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn negs_in(&self, zone: &str) -> Arc<Observed<model::NetworkEndpointGroup>> {
        self.negs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(zone.to_string())
            .or_default()
            .clone()
    }
}

/// A global collection the state caches: how to list it, get one, and where it is kept.
pub trait Listed: Clone + Send + Sync + 'static {
    /// The collection's cache.
    fn cache(state: &ComputeState) -> &Observed<Self>;
    /// Every resource (`compute.<collection>.list`, every page).
    fn list(compute: &Compute) -> BoxFuture<'_, Result<Vec<Self>>>;
    /// One resource (`compute.<collection>.get`), `None` on 404.
    fn get<'a>(compute: &'a Compute, name: &'a str) -> BoxFuture<'a, Result<Option<Self>>>;
    /// The resource name.
    fn name(&self) -> Option<&str>;
}

macro_rules! listed {
    ($($model:ident: $field:ident, $list:ident, $get:ident;)*) => {$(
        impl Listed for model::$model {
            fn cache(state: &ComputeState) -> &Observed<Self> {
                &state.$field
            }
            fn list(compute: &Compute) -> BoxFuture<'_, Result<Vec<Self>>> {
                Box::pin(compute.$list())
            }
            fn get<'a>(compute: &'a Compute, name: &'a str) -> BoxFuture<'a, Result<Option<Self>>> {
                Box::pin(compute.$get(name))
            }
            fn name(&self) -> Option<&str> {
                self.name.as_deref()
            }
        }
    )*};
}

listed! {
    UrlMap: url_maps, list_url_maps, get_url_map;
    BackendService: backend_services, list_backend_services, get_backend_service;
    HealthCheck: health_checks, list_health_checks, get_health_check;
    ForwardingRule: forwarding_rules, list_forwarding_rules, get_forwarding_rule;
    TargetHttpProxy: target_http_proxies, list_target_http_proxies, get_target_http_proxy;
    TargetHttpsProxy: target_https_proxies, list_target_https_proxies, get_target_https_proxy;
    SslCertificate: ssl_certificates, list_ssl_certificates, get_ssl_certificate;
    Address: global_addresses, list_global_addresses, get_global_address;
}

fn named<T: Listed>(items: Vec<T>) -> Vec<(String, T)> {
    items
        .into_iter()
        .filter_map(|i| Some((i.name()?.to_string(), i)))
        .collect()
}

impl Compute {
    /// The cached state (tests and metrics look at it).
    pub fn state(&self) -> &ComputeState {
        &self.state
    }

    async fn fresh<T: Listed>(&self) -> Result<()> {
        let s = &self.state;
        T::cache(s)
            .refresh_if_stale(s.max_age, &s.seq, || async {
                Ok(named(T::list(self).await?))
            })
            .await
    }

    /// The resource `name` as last seen: listed (when the collection's list is stale, it is
    /// listed first) or recorded by sync. `None`: it does not exist as far as we know.
    pub async fn observed<T: Listed>(&self, name: &str) -> Result<Option<Arc<T>>> {
        self.fresh::<T>().await?;
        Ok(T::cache(&self.state).get(name))
    }

    /// Every resource of the collection as last seen (listing it first when stale).
    pub async fn observed_all<T: Listed>(&self) -> Result<Vec<Arc<T>>> {
        self.fresh::<T>().await?;
        Ok(T::cache(&self.state).all())
    }

    /// Reads `name` from the API (`get`) and records the answer.
    pub async fn refetch<T: Listed>(&self, name: &str) -> Result<Option<Arc<T>>> {
        let seq = self.state.next_seq();
        let found = T::get(self, name).await?.map(Arc::new);
        T::cache(&self.state).put(name, found.clone(), seq);
        Ok(found)
    }

    /// Records what a successful write left: `Some(resource)` after an insert or update (as
    /// sent, without its new fingerprint), `None` after a delete.
    pub fn record<T: Listed>(&self, name: &str, value: Option<T>) {
        let seq = self.state.next_seq();
        T::cache(&self.state).put(name, value.map(Arc::new), seq);
    }

    async fn fresh_negs(&self, zone: &str) -> Result<Arc<Observed<model::NetworkEndpointGroup>>> {
        let s = &self.state;
        let cache = s.negs_in(zone);
        cache
            .refresh_if_stale(s.max_age, &s.seq, || async {
                let negs = self.list_network_endpoint_groups(zone).await?;
                Ok(negs
                    .into_iter()
                    .filter_map(|n| Some((n.name.clone()?, n)))
                    .collect())
            })
            .await?;
        Ok(cache)
    }

    /// The NEG `name` in `zone` as last seen (the zone's NEGs are listed when stale).
    pub async fn observed_neg(
        &self,
        zone: &str,
        name: &str,
    ) -> Result<Option<Arc<model::NetworkEndpointGroup>>> {
        Ok(self.fresh_negs(zone).await?.get(name))
    }

    /// Records a NEG written (`Some`) or deleted (`None`, and then it has no endpoints either)
    /// in `zone`.
    pub fn record_neg(&self, zone: &str, name: &str, value: Option<model::NetworkEndpointGroup>) {
        let seq = self.state.next_seq();
        let gone = value.is_none();
        self.state.negs_in(zone).put(name, value.map(Arc::new), seq);
        if gone {
            self.state
                .endpoints
                .put(&format!("{zone}/{name}"), Some(Arc::new(Vec::new())), seq);
        }
    }

    /// The endpoints of NEG `name` in `zone` as last listed (`listNetworkEndpoints`, when never
    /// listed or older than the age limit) or written.
    pub async fn observed_endpoints(&self, zone: &str, name: &str) -> Result<Arc<Endpoints>> {
        let key = format!("{zone}/{name}");
        let max_age = self.state.max_age;
        let known = {
            let inner = self.state.endpoints.lock();
            inner
                .items
                .get(&key)
                .filter(|s| s.at.elapsed() < max_age)
                .and_then(|s| s.value.clone())
        };
        if let Some(known) = known {
            return Ok(known);
        }
        let seq = self.state.next_seq();
        let listed: Endpoints = self
            .list_network_endpoints(zone, name)
            .await?
            .into_iter()
            .filter_map(|e| e.network_endpoint)
            .collect();
        let listed = Arc::new(listed);
        self.state.endpoints.put(&key, Some(listed.clone()), seq);
        Ok(listed)
    }

    /// Records the endpoints of NEG `name` in `zone` after a successful attach or detach.
    pub fn record_endpoints(&self, zone: &str, name: &str, endpoints: Endpoints) {
        let seq = self.state.next_seq();
        self.state
            .endpoints
            .put(&format!("{zone}/{name}"), Some(Arc::new(endpoints)), seq);
    }

    /// Forgets when every collection was listed, so each is listed again at its next use.
    pub fn relist_all(&self) {
        let s = &self.state;
        s.url_maps.invalidate();
        s.backend_services.invalidate();
        s.health_checks.invalidate();
        s.forwarding_rules.invalidate();
        s.target_http_proxies.invalidate();
        s.target_https_proxies.invalidate();
        s.ssl_certificates.invalidate();
        s.global_addresses.invalidate();
        for negs in s.negs.lock().unwrap_or_else(|p| p.into_inner()).values() {
            negs.invalidate();
        }
        s.endpoints.lock().items.clear();
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
