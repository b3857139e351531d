//! The cache itself: entries per backend service and cache key, shared by every compile (a
//! configuration change does not empty it), invalidation by host and path
//! (`urlMaps.invalidateCache`), and request coalescing (one cache fill per key at a time).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use tokio::sync::watch;

/// One cached response.
#[derive(Debug)]
pub struct Entry {
    /// Status.
    pub status: http::StatusCode,
    /// Headers as the backend sent them (hop-by-hop ones removed).
    pub headers: http::HeaderMap,
    /// The whole body.
    pub body: Bytes,
    /// When it was stored.
    pub stored: SystemTime,
    /// `Age` the backend sent, in seconds.
    pub origin_age: u64,
    /// How long it is fresh.
    pub ttl: Duration,
    /// Host of the request that filled it (for invalidation).
    pub host: String,
    /// Path of the request that filled it (for invalidation).
    pub path: String,
}

impl Entry {
    /// Seconds since it was stored plus the backend's `Age` (the `Age` header it is served with).
    pub fn age(&self, now: SystemTime) -> u64 {
        now.duration_since(self.stored)
            .unwrap_or_default()
            .as_secs()
            + self.origin_age
    }

    /// Whether it is still fresh at `now`.
    pub fn fresh(&self, now: SystemTime) -> bool {
        now.duration_since(self.stored).unwrap_or_default() < self.ttl
    }

    /// Whether it is stale by less than `window` at `now` (`serveWhileStale`).
    pub fn within_stale_window(&self, now: SystemTime, window: Duration) -> bool {
        now.duration_since(self.stored).unwrap_or_default() < self.ttl + window
    }
}

/// Most entries kept per backend service; the oldest go first.
pub const MAX_ENTRIES_PER_SERVICE: usize = 10_000;

/// Every backend service's cache.
#[derive(Debug, Default)]
pub struct Store {
    entries: Mutex<HashMap<String, HashMap<String, Arc<Entry>>>>,
    fills: Mutex<HashMap<(String, String), watch::Receiver<bool>>>,
}

/// A cache fill in progress: while it lives, other requests for the key wait for it (request
/// coalescing); dropping it wakes them.
#[derive(Debug)]
pub struct FillGuard {
    store: Arc<Store>,
    id: (String, String),
    _done: watch::Sender<bool>,
}

impl Drop for FillGuard {
    fn drop(&mut self) {
        self.store.fills.lock().expect("poisoned").remove(&self.id);
    }
}

impl Store {
    /// The entry of `key` in backend service `bs`.
    pub fn get(&self, bs: &str, key: &str) -> Option<Arc<Entry>> {
        self.entries
            .lock()
            .expect("poisoned")
            .get(bs)?
            .get(key)
            .cloned()
    }

    /// Stores an entry.
    pub fn put(&self, bs: &str, key: String, e: Entry) {
        let mut all = self.entries.lock().expect("poisoned");
        let m = all.entry(bs.to_string()).or_default();
        if m.len() >= MAX_ENTRIES_PER_SERVICE {
            if let Some(oldest) = m
                .iter()
                .min_by_key(|(_, e)| e.stored)
                .map(|(k, _)| k.clone())
            {
                m.remove(&oldest);
            }
        }
        m.insert(key, Arc::new(e));
    }

    /// Removes one entry.
    pub fn remove(&self, bs: &str, key: &str) {
        if let Some(m) = self.entries.lock().expect("poisoned").get_mut(bs) {
            m.remove(key);
        }
    }

    /// Number of entries of `bs`.
    pub fn len(&self, bs: &str) -> usize {
        self.entries
            .lock()
            .expect("poisoned")
            .get(bs)
            .map_or(0, |m| m.len())
    }

    /// Whether `bs` has no entry.
    pub fn is_empty(&self, bs: &str) -> bool {
        self.len(bs) == 0
    }

    /// `urlMaps.invalidateCache`: removes the entries of `services` whose path is `path`, or
    /// starts with its prefix when it ends in `*` (`/images/*`), and, with `host`, whose host is
    /// `host`. Returns how many were removed.
    pub fn invalidate(&self, services: &[String], host: Option<&str>, path: &str) -> usize {
        let mut all = self.entries.lock().expect("poisoned");
        let mut n = 0;
        for bs in services {
            let Some(m) = all.get_mut(bs) else { continue };
            let before = m.len();
            m.retain(|_, e| {
                let path_hit = match path.strip_suffix('*') {
                    Some(prefix) => e.path.starts_with(prefix),
                    None => e.path == path,
                };
                let host_hit = host.is_none_or(|h| {
                    e.host.eq_ignore_ascii_case(h)
                        || e.host
                            .split(':')
                            .next()
                            .is_some_and(|x| x.eq_ignore_ascii_case(h))
                });
                !(path_hit && host_hit)
            });
            n += before - m.len();
        }
        n
    }

    /// Starts a fill of `key` for `bs`, or, when one is in flight, waits (up to `wait`) for it to
    /// end and returns `None` so the caller looks the cache up again.
    pub async fn begin_fill(
        self: &Arc<Self>,
        bs: &str,
        key: &str,
        wait: Duration,
    ) -> Option<FillGuard> {
        let id = (bs.to_string(), key.to_string());
        let pending = {
            let mut fills = self.fills.lock().expect("poisoned");
            match fills.get(&id) {
                Some(rx) => Some(rx.clone()),
                None => {
                    let (tx, rx) = watch::channel(false);
                    fills.insert(id.clone(), rx);
                    return Some(FillGuard {
                        store: self.clone(),
                        id,
                        _done: tx,
                    });
                }
            }
        };
        if let Some(mut rx) = pending {
            let _ = tokio::time::timeout(wait, rx.wait_for(|done| *done)).await;
        }
        None
    }
}
