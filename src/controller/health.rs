//! Backend health for the `ingress.kubernetes.io/backends` annotation, shared by every reconcile.
//!
//! A reconcile whose backends are not all `HEALTHY` runs again after
//! [`super::HEALTH_REFRESH`] and reads their health again (`backendServices.getHealth`, one call
//! per backend group). Ingresses share backend services (one per Service port), so N Ingresses
//! over one Service read the same health N times per refresh: converging 1000 Ingresses over
//! 20 Services sent 12 `getHealth` calls per Ingress, 12,198 in all, three quarters of every
//! Compute call of the run (docs/performance.md, "At scale"). Here one read is shared, for
//! [`FRESH`], by every reconcile that asks for the same backend, and reconciles asking while
//! it is in flight wait for it instead of sending their own (single flight). A reconcile whose
//! sync changed something asks with `refresh`, so what it reports is read after its change.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

/// How long a read backend health is shared: half of [`super::HEALTH_REFRESH`], so an
/// Ingress's next refresh never reports what was read before its previous one.
pub const FRESH: Duration = Duration::from_secs(5);

/// `(region, backend service name)`; `None` for a global backend service.
type Key = (Option<String>, String);

/// One read, started at `at`: its result once it is done.
struct Slot {
    at: Instant,
    state: OnceCell<String>,
}

/// Health states of backend services, each shared for `fresh` after it was read.
pub struct BackendHealth {
    fresh: Duration,
    slots: Mutex<HashMap<Key, Arc<Slot>>>,
}

impl BackendHealth {
    /// Shares each read for `fresh` ([`FRESH`] in the controller).
    pub fn new(fresh: Duration) -> Self {
        Self {
            fresh,
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// The health state of backend service `name` (in `region`, `None` for global): the state
    /// read by a call of `read` started less than `fresh` ago (awaited if still in flight), else
    /// the result of a new call. `refresh` starts a new call whatever was read before (the
    /// caller just changed the backend). `read` never fails: it returns `"Unknown"` for an
    /// error, as the annotation shows it ([`crate::sync::backend_services::health`]).
    pub async fn state<F, Fut>(
        &self,
        region: Option<&str>,
        name: &str,
        refresh: bool,
        read: F,
    ) -> String
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = String>,
    {
        self.state_at(Instant::now(), region, name, refresh, read)
            .await
    }

    /// [`Self::state`] asked at `now` (tests give the clock).
    async fn state_at<F, Fut>(
        &self,
        now: Instant,
        region: Option<&str>,
        name: &str,
        refresh: bool,
        read: F,
    ) -> String
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = String>,
    {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            let key = (region.map(str::to_string), name.to_string());
            match slots.get(&key) {
                Some(slot) if !refresh && now.duration_since(slot.at) < self.fresh => slot.clone(),
                _ => {
                    // Forget what is stale so the map holds only the backends read lately.
                    slots.retain(|_, s| now.duration_since(s.at) < self.fresh);
                    let slot = Arc::new(Slot {
                        at: now,
                        state: OnceCell::new(),
                    });
                    slots.insert(key, slot.clone());
                    slot
                }
            }
        };
        slot.state.get_or_init(read).await.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn answer(state: &'static str) -> impl FnOnce() -> std::future::Ready<String> {
        move || std::future::ready(state.to_string())
    }

    #[tokio::test]
    async fn a_read_is_shared_while_fresh_and_repeated_after() {
        let health = BackendHealth::new(FRESH);
        let t0 = Instant::now();
        let reads = AtomicUsize::new(0);
        let read = |state: &'static str| {
            let reads = &reads;
            move || async move {
                reads.fetch_add(1, Ordering::SeqCst);
                state.to_string()
            }
        };
        let ask = |at: Duration, region, name, state| {
            health.state_at(t0 + at, region, name, false, read(state))
        };
        assert_eq!(
            ask(Duration::ZERO, None, "b1", "UNHEALTHY").await,
            "UNHEALTHY"
        );
        // Within FRESH every reconcile gets that read, whatever it would read now.
        let almost = FRESH - Duration::from_millis(1);
        assert_eq!(ask(almost, None, "b1", "HEALTHY").await, "UNHEALTHY");
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        // Another backend, or the same name in a region, is another read.
        assert_eq!(ask(almost, None, "b2", "HEALTHY").await, "HEALTHY");
        assert_eq!(ask(almost, Some("r1"), "b1", "HEALTHY").await, "HEALTHY");
        assert_eq!(reads.load(Ordering::SeqCst), 3);
        // Once stale, it is read again.
        assert_eq!(ask(FRESH, None, "b1", "HEALTHY").await, "HEALTHY");
        assert_eq!(reads.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn a_refresh_reads_again_at_once() {
        let health = BackendHealth::new(FRESH);
        let t0 = Instant::now();
        let at = t0 + Duration::from_millis(1);
        assert_eq!(
            health
                .state_at(t0, None, "b1", false, answer("UNHEALTHY"))
                .await,
            "UNHEALTHY"
        );
        assert_eq!(
            health
                .state_at(at, None, "b1", true, answer("HEALTHY"))
                .await,
            "HEALTHY"
        );
        // And the fresh read is what the others now share.
        assert_eq!(
            health
                .state_at(at, None, "b1", false, answer("UNKNOWN"))
                .await,
            "HEALTHY"
        );
    }

    #[tokio::test]
    async fn concurrent_asks_share_one_read_in_flight() {
        let health = Arc::new(BackendHealth::new(FRESH));
        let reads = Arc::new(AtomicUsize::new(0));
        let (release, held) = tokio::sync::oneshot::channel::<()>();
        let (started_tx, started) = tokio::sync::oneshot::channel::<()>();
        let first = {
            let (health, reads) = (health.clone(), reads.clone());
            tokio::spawn(async move {
                health
                    .state(None, "b1", false, || async move {
                        reads.fetch_add(1, Ordering::SeqCst);
                        let _ = started_tx.send(());
                        let _ = held.await;
                        "HEALTHY".to_string()
                    })
                    .await
            })
        };
        started.await.expect("the first read started");
        // The first read is in flight: this ask waits for it rather than reading.
        let second_reads = reads.clone();
        let mut second = Box::pin(health.state(None, "b1", false, || async move {
            second_reads.fetch_add(1, Ordering::SeqCst);
            "UNHEALTHY".to_string()
        }));
        assert!(futures::poll!(&mut second).is_pending());
        release.send(()).expect("the first read is waiting");
        assert_eq!(first.await.unwrap(), "HEALTHY");
        assert_eq!(second.await, "HEALTHY");
        assert_eq!(reads.load(Ordering::SeqCst), 1);
    }
}
