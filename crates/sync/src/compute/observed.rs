//! The Compute API's reads through the state cache ([`super::state`]): which collections it
//! caches ([`Listed`]) and the `observed_*`, `record_*` and `refetch` calls sync makes on
//! [`Compute`].

use std::sync::Arc;

use futures::future::BoxFuture;
use google_cloud_compute_v1::model;

use super::state::{ComputeState, Endpoints, Observed};
use super::{Compute, Result};

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

    /// Keeps the state cache true to an insert of `body` as sent (`name`) while its
    /// Operation runs: the resource is recorded as the operator's once the API accepts the
    /// insert, so that the Ingress's deletion and garbage collection delete it even when
    /// waiting on the Operation fails (issue 43: `compute.globalOperations.get` refused leaked
    /// health checks). A failed Operation records it gone (nothing was created); a wait that
    /// failed leaves the record and makes the collection listed again at its next use, so the
    /// API's answer replaces the guess.
    pub(super) fn note_insert<T: Listed>(&self, name: &str, body: &T, fate: super::Fate) {
        match fate {
            super::Fate::Accepted => self.record(name, Some(body.clone())),
            super::Fate::Failed => self.record::<T>(name, None),
            super::Fate::Unknown => T::cache(&self.state).invalidate(),
        }
    }

    /// [`Self::note_insert`] for the NEG `body` (`name`) in `zone`.
    pub(super) fn note_neg_insert(
        &self,
        zone: &str,
        name: &str,
        body: &model::NetworkEndpointGroup,
        fate: super::Fate,
    ) {
        match fate {
            super::Fate::Accepted => self.record_neg(zone, name, Some(body.clone())),
            super::Fate::Failed => self.record_neg(zone, name, None),
            super::Fate::Unknown => self.state.negs_in(zone).invalidate(),
        }
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
