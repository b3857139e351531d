//! Controller expectations (kubernetes/kubernetes `pkg/controller/controller_utils.go`
//! `ControllerExpectations`): after a controller writes objects for one owner (creates Pods,
//! scales ReplicaSets), it does not act for that owner again until its watch cache has seen
//! those writes, so a reconcile racing its own writes never creates or deletes twice. Here an
//! expectation names the written object and the resourceVersion the write returned; it is met
//! once the cache holds that object at that version or later (or no longer holds it, for a
//! deletion). Expectations older than [`EXPECTATION_TIMEOUT`] are dropped, as upstream's are
//! after five minutes, so a lost watch event cannot wedge an owner forever.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long unmet expectations hold an owner back.
pub const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(60);

/// One write awaited in the cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    /// `namespace/name` of the written object.
    pub key: String,
    /// The resourceVersion the write returned.
    pub resource_version: u64,
    /// A deletion is also met when the object is gone.
    pub deletion: bool,
}

/// Expectations by owner key (`namespace/name` of the ReplicaSet or Deployment).
#[derive(Debug, Default)]
pub struct Expectations {
    pending: Mutex<HashMap<String, (Instant, Vec<Expected>)>>,
}

/// A resourceVersion as a number (this server's are decimal counters); 0 when not numeric.
pub fn version_of(resource_version: Option<&str>) -> u64 {
    resource_version.and_then(|v| v.parse().ok()).unwrap_or(0)
}

impl Expectations {
    /// Records that `owner` awaits `expected`.
    pub fn expect(&self, owner: &str, expected: Expected) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let entry = pending
            .entry(owner.to_string())
            .or_insert_with(|| (Instant::now(), Vec::new()));
        entry.0 = Instant::now();
        entry.1.push(expected);
    }

    /// Whether `owner` may act: every write it awaits is in the cache, where `cached` gives the
    /// cached resourceVersion of an object key (`None` when the cache does not hold it).
    pub fn satisfied(&self, owner: &str, cached: impl Fn(&str) -> Option<u64>) -> bool {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let Some((since, waits)) = pending.get_mut(owner) else {
            return true;
        };
        waits.retain(|w| match cached(&w.key) {
            Some(rv) => rv < w.resource_version,
            None => !w.deletion,
        });
        if waits.is_empty() || since.elapsed() > EXPECTATION_TIMEOUT {
            pending.remove(owner);
            return true;
        }
        false
    }

    /// Forgets `owner` (it was deleted).
    pub fn forget(&self, owner: &str) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.remove(owner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_waits_until_its_writes_are_cached() {
        let e = Expectations::default();
        assert!(e.satisfied("ns/rs", |_| None));
        e.expect(
            "ns/rs",
            Expected {
                key: "ns/p1".into(),
                resource_version: 10,
                deletion: false,
            },
        );
        e.expect(
            "ns/rs",
            Expected {
                key: "ns/p0".into(),
                resource_version: 11,
                deletion: true,
            },
        );
        let cache =
            |p1: Option<u64>, p0: Option<u64>| move |k: &str| if k == "ns/p1" { p1 } else { p0 };
        assert!(
            !e.satisfied("ns/rs", cache(None, Some(5))),
            "creation not seen yet"
        );
        assert!(
            !e.satisfied("ns/rs", cache(Some(9), Some(5))),
            "an older version"
        );
        assert!(
            !e.satisfied("ns/rs", cache(Some(10), Some(5))),
            "the deletion is not seen yet"
        );
        assert!(e.satisfied("ns/rs", cache(Some(12), None)));
        assert!(e.satisfied("other/rs", |_| None));
        assert_eq!(version_of(Some("42")), 42);
        assert_eq!(version_of(None), 0);
    }
}
