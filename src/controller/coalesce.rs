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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn concurrent_callers_share_runs() {
        let c = Arc::new(Coalesced::default());
        let runs = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..20 {
            let (c, runs) = (c.clone(), runs.clone());
            tasks.push(tokio::spawn(async move {
                c.run(|| async {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Ok::<(), ()>(())
                })
                .await
            }));
        }
        for t in tasks {
            assert!(t.await.unwrap().is_ok());
        }
        // The first run, then one more for everything that queued behind it (a few more at
        // most if the spawned tasks were slow to start).
        let n = runs.load(Ordering::SeqCst);
        assert!((1..=4).contains(&n), "{n} runs for 20 callers");
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
        let gate = Arc::new(tokio::sync::Notify::new());
        let runs = Arc::new(AtomicUsize::new(0));
        // The first caller's run fails after the second caller has queued.
        let first = {
            let (c, gate, runs) = (c.clone(), gate.clone(), runs.clone());
            tokio::spawn(async move {
                c.run(|| async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    gate.notified().await;
                    Err::<(), &str>("list failed")
                })
                .await
            })
        };
        while runs.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        let second = {
            let (c, runs) = (c.clone(), runs.clone());
            tokio::spawn(async move {
                c.run(|| async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Ok::<(), &str>(())
                })
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        gate.notify_one();
        assert_eq!(first.await.unwrap(), Err("list failed"));
        assert_eq!(
            second.await.unwrap(),
            Ok(true),
            "the second caller ran it itself"
        );
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_caller_queued_during_a_run_is_covered_by_the_next() {
        let c = Arc::new(Coalesced::default());
        let gate = Arc::new(tokio::sync::Notify::new());
        let started = Arc::new(AtomicUsize::new(0));
        let first = {
            let (c, gate, started) = (c.clone(), gate.clone(), started.clone());
            tokio::spawn(async move {
                c.run(|| async move {
                    started.fetch_add(1, Ordering::SeqCst);
                    gate.notified().await;
                    Ok::<(), ()>(())
                })
                .await
            })
        };
        while started.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        // Two callers arrive while the first run is going: one run serves both.
        let mut queued = Vec::new();
        for _ in 0..2 {
            let (c, started) = (c.clone(), started.clone());
            queued.push(tokio::spawn(async move {
                c.run(|| async move {
                    started.fetch_add(1, Ordering::SeqCst);
                    Ok::<(), ()>(())
                })
                .await
            }));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        gate.notify_one();
        assert_eq!(first.await.unwrap(), Ok(true));
        let mut ran = Vec::new();
        for q in queued {
            ran.push(q.await.unwrap().unwrap());
        }
        ran.sort();
        assert_eq!(ran, vec![false, true], "one ran, the other was covered");
        assert_eq!(started.load(Ordering::SeqCst), 2);
    }
}
