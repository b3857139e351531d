//! Coalescing of whole-cluster jobs (garbage collection, the shared firewall rule) that every
//! reconcile asks for but whose outcome depends only on the cluster state when a run *starts*.
//!
//! Without it, N Ingresses reconciled together run the job N times, one after another, each
//! listing every Compute collection and translating every Ingress: O(N^2) work, and the
//! serialisation ingress-gce's users complained about (inventory §10, #1700). Here a caller
//! waits for one run that started after its request; callers that queued during a run share the
//! next one. A failed run covers nobody: each of its waiters then runs the job itself, so no
//! caller is told "done" on the strength of a failure.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Single-flight runner with request generations.
#[derive(Debug, Default)]
pub struct Coalesced {
    /// Requests made so far.
    requested: AtomicU64,
    /// The highest request number the last successful run covers; held while a run is going.
    covered: tokio::sync::Mutex<u64>,
    /// When the last run ended, if it succeeded (`None` before any run and after a failure).
    last_success: Mutex<Option<Instant>>,
}

impl Coalesced {
    /// Runs `job`, or waits for a run that started after this call and succeeded. Returns the
    /// job's error when this caller's own run failed; `Ok(false)` when another caller's run
    /// covered this one (nothing ran here), `Ok(true)` when this caller ran the job.
    pub async fn run<F, Fut, E>(&self, job: F) -> Result<bool, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(), E>>,
    {
        let mine = self.requested.fetch_add(1, Ordering::SeqCst) + 1;
        let mut covered = self.covered.lock().await;
        if *covered >= mine {
            return Ok(false);
        }
        // Every request made before this point is served by the run that starts now.
        let covers = self.requested.load(Ordering::SeqCst);
        let result = job().await;
        *self.last_success.lock().unwrap_or_else(|p| p.into_inner()) =
            result.is_ok().then(Instant::now);
        result?;
        *covered = covers;
        Ok(true)
    }

    /// Whether the last run succeeded less than `period` ago. A job that only a change can
    /// make necessary is skipped when nothing changed and this holds.
    pub fn succeeded_within(&self, period: Duration) -> bool {
        self.last_success
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|at| at.elapsed() < period)
    }
}

/// Takes `lock` for writing without making new readers queue behind this writer for up to
/// `patience`: a background job (garbage collection) that needs every reconcile out of the
/// way. tokio's `RwLock` is fair, so a plain `write()` waits for the reconciles in flight AND
/// stops every reconcile that starts meanwhile; on the real API a reconcile in flight can take
/// seconds (its last Operation), and an Ingress created then would wait for it (issue 26).
/// Here the job tries every `poll` while readers come and go, and queues like any writer only
/// after `patience`, so it cannot be starved for ever.
pub async fn write_when_idle<'a, T>(
    lock: &'a tokio::sync::RwLock<T>,
    patience: Duration,
    poll: Duration,
) -> tokio::sync::RwLockWriteGuard<'a, T> {
    let deadline = Instant::now() + patience;
    loop {
        if let Ok(guard) = lock.try_write() {
            return guard;
        }
        if Instant::now() >= deadline {
            return lock.write().await;
        }
        tokio::time::sleep(poll).await;
    }
}

#[cfg(test)]
mod tests {
    //! Callers are ordered by explicit signals (the job's own start, and the request counter
    //! that `run` bumps before it queues), never by sleeping; every wait has a deadline.
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::sync::watch;

    /// Yields to the other tasks until `cond` holds; panics after 10 s (against a hang, not a
    /// bound on speed: on the current-thread test runtime the callers run as soon as this
    /// yields).
    async fn until(what: &str, cond: impl Fn() -> bool) {
        tokio::time::timeout(Duration::from_secs(10), async {
            while !cond() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
    }

    /// A job that counts its runs, then waits until `gate` is open, then ends with `result`.
    fn gated<E: Send + 'static>(
        runs: &Arc<AtomicUsize>,
        gate: &watch::Receiver<bool>,
        result: Result<(), E>,
    ) -> impl FnOnce() -> std::pin::Pin<Box<dyn Future<Output = Result<(), E>> + Send>> {
        let (runs, mut gate) = (runs.clone(), gate.clone());
        move || {
            Box::pin(async move {
                runs.fetch_add(1, Ordering::SeqCst);
                let _ = gate.wait_for(|open| *open).await;
                result
            })
        }
    }

    #[tokio::test]
    async fn concurrent_callers_share_runs() {
        let c = Arc::new(Coalesced::default());
        let runs = Arc::new(AtomicUsize::new(0));
        let (open, gate) = watch::channel(false);
        let mut tasks = Vec::new();
        for _ in 0..20 {
            let (c, job) = (c.clone(), gated(&runs, &gate, Ok::<(), ()>(())));
            tasks.push(tokio::spawn(async move { c.run(job).await }));
        }
        // The first run is going and the 19 others have asked and queued behind it.
        until("the first run and 20 requests", || {
            runs.load(Ordering::SeqCst) == 1 && c.requested.load(Ordering::SeqCst) == 20
        })
        .await;
        open.send_replace(true);
        let mut ran = 0;
        for t in tasks {
            ran += usize::from(t.await.unwrap().unwrap());
        }
        // The first run, then one more for everything that queued behind it.
        assert_eq!(runs.load(Ordering::SeqCst), 2, "runs for 20 callers");
        assert_eq!(ran, 2, "callers that ran the job themselves");
    }

    #[tokio::test]
    async fn success_is_remembered_for_a_period_and_a_failure_forgets_it() {
        let c = Coalesced::default();
        let hour = Duration::from_secs(3600);
        assert!(!c.succeeded_within(hour), "nothing ran yet");
        assert_eq!(c.run(|| async { Ok::<(), ()>(()) }).await, Ok(true));
        assert!(c.succeeded_within(hour));
        assert!(
            !c.succeeded_within(Duration::ZERO),
            "older than a zero period"
        );
        assert_eq!(c.run(|| async { Err::<(), ()>(()) }).await, Err(()));
        assert!(!c.succeeded_within(hour), "the last run failed");
    }

    #[tokio::test]
    async fn a_request_after_a_run_started_gets_a_new_run() {
        let c = Coalesced::default();
        assert_eq!(c.run(|| async { Ok::<(), ()>(()) }).await, Ok(true));
        // Sequential callers are never covered by an earlier run.
        assert_eq!(c.run(|| async { Ok::<(), ()>(()) }).await, Ok(true));
    }

    #[tokio::test]
    async fn a_failed_run_covers_nobody() {
        let c = Arc::new(Coalesced::default());
        let runs = Arc::new(AtomicUsize::new(0));
        let (open, gate) = watch::channel(false);
        // A's run goes on while B, then C, ask: B's run covers C's request too, and fails.
        let a = {
            let (c, job) = (c.clone(), gated(&runs, &gate, Ok::<(), &str>(())));
            tokio::spawn(async move { c.run(job).await })
        };
        until("A's run", || runs.load(Ordering::SeqCst) == 1).await;
        let mut queued = Vec::new();
        for (n, result) in [(2, Err("list failed")), (3, Ok(()))] {
            let (c2, job) = (c.clone(), gated(&runs, &gate, result));
            queued.push(tokio::spawn(async move { c2.run(job).await }));
            until("the next request", || {
                c.requested.load(Ordering::SeqCst) == n
            })
            .await;
        }
        open.send_replace(true);
        assert_eq!(a.await.unwrap(), Ok(true));
        let c_result = queued.pop().unwrap().await.unwrap();
        assert_eq!(queued.pop().unwrap().await.unwrap(), Err("list failed"));
        assert_eq!(
            c_result,
            Ok(true),
            "C ran the job itself instead of being covered by B's failed run"
        );
        assert_eq!(runs.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_caller_queued_during_a_run_is_covered_by_the_next() {
        let c = Arc::new(Coalesced::default());
        let runs = Arc::new(AtomicUsize::new(0));
        let (open, gate) = watch::channel(false);
        let first = {
            let (c, job) = (c.clone(), gated(&runs, &gate, Ok::<(), ()>(())));
            tokio::spawn(async move { c.run(job).await })
        };
        until("the first run", || runs.load(Ordering::SeqCst) == 1).await;
        // Two callers arrive while the first run is going: one run serves both.
        let mut queued = Vec::new();
        for _ in 0..2 {
            let (c, job) = (c.clone(), gated(&runs, &gate, Ok::<(), ()>(())));
            queued.push(tokio::spawn(async move { c.run(job).await }));
        }
        until("both queued requests", || {
            c.requested.load(Ordering::SeqCst) == 3
        })
        .await;
        open.send_replace(true);
        assert_eq!(first.await.unwrap(), Ok(true));
        let mut ran = Vec::new();
        for q in queued {
            ran.push(q.await.unwrap().unwrap());
        }
        ran.sort();
        assert_eq!(ran, vec![false, true], "one ran, the other was covered");
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_waiting_gc_does_not_hold_up_new_readers() {
        let lock = Arc::new(tokio::sync::RwLock::new(()));
        let in_flight = lock.clone().read_owned().await;
        let gc = {
            let lock = lock.clone();
            tokio::spawn(async move {
                let _w =
                    write_when_idle(&lock, Duration::from_secs(60), Duration::from_millis(5)).await;
            })
        };
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        // A reconcile that starts while the GC waits gets its read lock at once.
        assert!(
            lock.try_read().is_ok(),
            "a new reader queued behind the waiting GC"
        );
        drop(in_flight);
        tokio::time::timeout(Duration::from_secs(10), gc)
            .await
            .expect("the GC takes the lock once the readers are gone")
            .unwrap();
    }

    #[tokio::test]
    async fn a_gc_out_of_patience_queues_like_any_writer() {
        let lock = Arc::new(tokio::sync::RwLock::new(()));
        let in_flight = lock.clone().read_owned().await;
        let gc = {
            let lock = lock.clone();
            tokio::spawn(async move {
                let _w = write_when_idle(&lock, Duration::ZERO, Duration::from_millis(5)).await;
            })
        };
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        // Past its patience the GC is queued: new readers wait behind it.
        assert!(lock.try_read().is_err(), "the GC never queued");
        drop(in_flight);
        tokio::time::timeout(Duration::from_secs(10), gc)
            .await
            .expect("the GC takes the lock once the readers are gone")
            .unwrap();
    }
}
