//! A coarse timer for the data plane's per-request deadlines: hyper's header read timeout
//! (armed afresh for every request a keep-alive connection waits for) and a backend service's
//! `timeoutSec`.
//!
//! Why not Tokio's timer: hyper drops its header-read sleep after each request head and asks
//! for a new one, and `tokio::time::Sleep` is a 128-byte-aligned allocation plus a timer wheel
//! insertion and removal. Measured with callgrind on the keep-alive benchmark, the two
//! per-request deadlines cost about 3,000 instructions of the proxy's ~34,000 per request. Here
//! a sleep is a small ordinary allocation that, while pending, sits in a slab under an
//! uncontended mutex; one ticker task per timer wakes the sleeps that are due every [`TICK`].
//!
//! Resolution: a sleep completes at its deadline or up to one [`TICK`] later (never earlier).
//! The deadlines it serves are seconds long (`timeoutSec`, 60 s header reads), so the skew is
//! immaterial; TLS handshakes and health probes keep Tokio's precise timer.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// How often due sleeps are woken: the most a sleep can overrun its deadline.
pub const TICK: Duration = Duration::from_millis(50);

/// A cheap timer with [`TICK`] resolution; clones share one ticker.
#[derive(Clone)]
pub struct CoarseTimer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for CoarseTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CoarseTimer")
    }
}

/// A deadline passed before the future completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

#[derive(Default)]
struct Shared {
    sleepers: Mutex<Slab>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Slab> {
        // Nothing panics while holding the lock; a poisoned slab is still consistent.
        self.sleepers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Pending sleeps: their deadline and who to wake. Slots are reused through `free`.
#[derive(Default)]
struct Slab {
    entries: Vec<Option<(Instant, Waker)>>,
    free: Vec<usize>,
}

impl Slab {
    fn insert(&mut self, deadline: Instant, waker: Waker) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.entries[i] = Some((deadline, waker));
                i
            }
            None => {
                self.entries.push(Some((deadline, waker)));
                self.entries.len() - 1
            }
        }
    }

    fn remove(&mut self, slot: usize) {
        if self.entries[slot].take().is_some() {
            self.free.push(slot);
        }
    }
}

impl CoarseTimer {
    /// A timer whose ticker runs as a task on the current Tokio runtime until the timer, its
    /// clones and all its sleeps are dropped. Panics outside a Tokio runtime.
    pub fn start() -> CoarseTimer {
        let shared = Arc::new(Shared::default());
        tokio::spawn(tick(Arc::downgrade(&shared)));
        CoarseTimer { shared }
    }

    /// A sleep that completes at `deadline` (at most one [`TICK`] late).
    pub fn sleep_until(&self, deadline: Instant) -> CoarseSleep {
        CoarseSleep {
            deadline,
            slot: None,
            shared: self.shared.clone(),
        }
    }

    /// Runs `fut` for at most `limit`: its output, or [`Elapsed`] once the deadline passed.
    pub async fn timeout<F: Future>(&self, limit: Duration, fut: F) -> Result<F::Output, Elapsed> {
        let sleep = self.sleep_until(Instant::now() + limit);
        tokio::select! {
            biased;
            out = fut => Ok(out),
            () = sleep => Err(Elapsed),
        }
    }

    /// Sleeps waiting to be woken.
    #[cfg(test)]
    fn pending(&self) -> usize {
        self.shared.lock().entries.iter().flatten().count()
    }
}

/// Wakes the sleeps that are due, every [`TICK`], until the timer is gone.
async fn tick(shared: Weak<Shared>) {
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut due = Vec::new();
    loop {
        interval.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        wake_due(&shared, Instant::now(), &mut due);
    }
}

/// Wakes every registered sleep whose deadline is at or before `now` (`due` is scratch space,
/// left empty).
fn wake_due(shared: &Shared, now: Instant, due: &mut Vec<Waker>) {
    // Wake outside the lock: a woken task on another worker may poll its sleep at once.
    due.extend(
        shared
            .lock()
            .entries
            .iter()
            .flatten()
            .filter(|(deadline, _)| *deadline <= now)
            .map(|(_, waker)| waker.clone()),
    );
    due.drain(..).for_each(Waker::wake);
}

/// A pending deadline of a [`CoarseTimer`]; completes at or after it. Registered with the
/// ticker only while it is being waited for.
pub struct CoarseSleep {
    deadline: Instant,
    slot: Option<usize>,
    shared: Arc<Shared>,
}

impl CoarseSleep {
    fn deregister(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.shared.lock().remove(slot);
        }
    }

    fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = deadline;
        if let Some(slot) = self.slot {
            if let Some(entry) = self.shared.lock().entries[slot].as_mut() {
                entry.0 = deadline;
            }
        }
    }
}

impl Future for CoarseSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if Instant::now() >= this.deadline {
            this.deregister();
            return Poll::Ready(());
        }
        let mut slab = this.shared.lock();
        match this.slot {
            Some(slot) => {
                if let Some((_, waker)) = slab.entries[slot].as_mut() {
                    if !waker.will_wake(cx.waker()) {
                        *waker = cx.waker().clone();
                    }
                }
            }
            None => this.slot = Some(slab.insert(this.deadline, cx.waker().clone())),
        }
        Poll::Pending
    }
}

impl Drop for CoarseSleep {
    fn drop(&mut self) {
        self.deregister();
    }
}

impl hyper::rt::Sleep for CoarseSleep {}

impl hyper::rt::Timer for CoarseTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(self.sleep_until(Instant::now() + duration))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(CoarseTimer::sleep_until(self, deadline))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<CoarseSleep>() {
            Some(s) => s.get_mut().set_deadline(new_deadline),
            None => *sleep = hyper::rt::Timer::sleep_until(self, new_deadline),
        }
    }
}

#[cfg(test)]
mod tests {
    //! No test bounds how long anything takes: what a tick wakes is checked on a given `now`,
    //! and waits that must end have a generous deadline against a hang only.
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Deadline against a hang (not a bound on speed).
    const HANG: Duration = Duration::from_secs(30);

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Counter(AtomicUsize);

    impl std::task::Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Polls `sleep` once with a counting waker, so it registers; returns the counter.
    fn register(sleep: &mut Pin<Box<CoarseSleep>>) -> Arc<Counter> {
        let counter = Arc::new(Counter::default());
        let waker = Waker::from(counter.clone());
        let polled = sleep.as_mut().poll(&mut Context::from_waker(&waker));
        assert!(polled.is_pending());
        counter
    }

    #[tokio::test]
    async fn a_tick_wakes_exactly_the_sleeps_that_are_due() {
        let timer = CoarseTimer::start();
        let t0 = Instant::now() + Duration::from_secs(3600);
        let mut early = Box::pin(timer.sleep_until(t0));
        let mut late = Box::pin(timer.sleep_until(t0 + TICK));
        let (early_wakes, late_wakes) = (register(&mut early), register(&mut late));
        let mut due = Vec::new();
        wake_due(&timer.shared, t0 - Duration::from_millis(1), &mut due);
        assert_eq!(
            (
                early_wakes.0.load(Ordering::SeqCst),
                late_wakes.0.load(Ordering::SeqCst)
            ),
            (0, 0),
            "nothing is due before its deadline"
        );
        wake_due(&timer.shared, t0, &mut due);
        assert_eq!(
            (
                early_wakes.0.load(Ordering::SeqCst),
                late_wakes.0.load(Ordering::SeqCst)
            ),
            (1, 0),
            "a sleep is due at its deadline"
        );
        wake_due(&timer.shared, t0 + TICK, &mut due);
        assert_eq!(late_wakes.0.load(Ordering::SeqCst), 1);
        assert!(due.is_empty());
    }

    #[tokio::test]
    async fn completes_at_the_deadline_never_before() {
        let timer = CoarseTimer::start();
        let start = Instant::now();
        let deadline = start + Duration::from_millis(120);
        // Only the ticker wakes this sleep: completing at all shows it ran.
        tokio::time::timeout(HANG, timer.sleep_until(deadline))
            .await
            .expect("the ticker woke the sleep");
        assert!(
            Instant::now() >= deadline,
            "woke early: {:?}",
            start.elapsed()
        );
        assert_eq!(timer.pending(), 0, "a completed sleep leaves the slab");
    }

    #[tokio::test]
    async fn timeout_gives_the_output_or_elapsed() {
        let timer = CoarseTimer::start();
        let fast = timer.timeout(Duration::from_secs(5), async { 7 }).await;
        assert_eq!(fast, Ok(7));
        let slow = tokio::time::timeout(
            HANG,
            timer.timeout(Duration::from_millis(60), std::future::pending::<()>()),
        )
        .await
        .expect("the coarse timeout fired");
        assert_eq!(slow, Err(Elapsed));
        assert_eq!(timer.pending(), 0);
    }

    #[tokio::test]
    async fn dropping_a_pending_sleep_deregisters_it_and_slots_are_reused() {
        let timer = CoarseTimer::start();
        let far = Instant::now() + Duration::from_secs(3600);
        for _ in 0..3 {
            let mut sleeps: Vec<_> = (0..4).map(|_| Box::pin(timer.sleep_until(far))).collect();
            for s in &mut sleeps {
                let polled = futures::poll!(s.as_mut());
                assert!(polled.is_pending());
            }
            assert_eq!(timer.pending(), 4);
            drop(sleeps);
            assert_eq!(timer.pending(), 0);
        }
        assert_eq!(timer.shared.lock().entries.len(), 4, "slots are reused");
    }

    #[tokio::test]
    async fn hyper_reset_moves_the_deadline_of_a_registered_sleep() {
        use hyper::rt::Timer;
        let timer = CoarseTimer::start();
        let mut sleep = Timer::sleep_until(&timer, Instant::now() + Duration::from_secs(3600));
        assert!(futures::poll!(sleep.as_mut()).is_pending());
        let new_deadline = Instant::now() + Duration::from_millis(80);
        Timer::reset(&timer, &mut sleep, new_deadline);
        let registered: Vec<Instant> = timer
            .shared
            .lock()
            .entries
            .iter()
            .flatten()
            .map(|(deadline, _)| *deadline)
            .collect();
        assert_eq!(registered, [new_deadline], "the registered deadline moved");
        tokio::time::timeout(HANG, sleep)
            .await
            .expect("the reset sleep completed (its old deadline was an hour away)");
        assert!(Instant::now() >= new_deadline);
        assert_eq!(timer.pending(), 0);
    }
}
