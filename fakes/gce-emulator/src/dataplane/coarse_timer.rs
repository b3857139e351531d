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
//! Resolution: a sleep completes at its deadline or up to one [`TICK`] later (never earlier):
//! the ticker marks it due and wakes it once, and its next poll completes it. A poll reads no
//! clock, which saved two clock reads per proxied request.
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

/// A registered sleep: its deadline, who to wake, and whether the ticker found it due.
struct Entry {
    deadline: Instant,
    waker: Waker,
    /// Set by the ticker once `deadline` passed: the sleep completes at its next poll.
    due: bool,
}

/// Pending sleeps. Slots are reused through `free`.
#[derive(Default)]
struct Slab {
    entries: Vec<Option<Entry>>,
    free: Vec<usize>,
}

impl Slab {
    fn insert(&mut self, deadline: Instant, waker: Waker) -> usize {
        let entry = Some(Entry {
            deadline,
            waker,
            due: false,
        });
        match self.free.pop() {
            Some(i) => {
                self.entries[i] = entry;
                i
            }
            None => {
                self.entries.push(entry);
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

/// Marks due and wakes every registered sleep whose deadline is at or before `now` (`due` is
/// scratch space, left empty).
fn wake_due(shared: &Shared, now: Instant, due: &mut Vec<Waker>) {
    // Wake outside the lock: a woken task on another worker may poll its sleep at once.
    due.extend(
        shared
            .lock()
            .entries
            .iter_mut()
            .flatten()
            .filter(|e| !e.due && e.deadline <= now)
            .map(|e| {
                e.due = true;
                e.waker.clone()
            }),
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
                entry.deadline = deadline;
                entry.due = false;
            }
        }
    }
}

impl Future for CoarseSleep {
    type Output = ();

    /// Completes once the ticker found the deadline passed: a first poll registers without
    /// reading the clock (a deadline already past completes at the next tick, within the
    /// [`TICK`] of lateness allowed), and later polls read the entry's mark. Reading the clock
    /// on every poll cost two clock reads a proxied request for nothing: the per-request
    /// deadlines are seconds away when they are polled.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let mut slab = this.shared.lock();
        match this.slot {
            Some(slot) => match slab.entries[slot].as_mut() {
                Some(entry) if entry.due => {
                    slab.remove(slot);
                    this.slot = None;
                    return Poll::Ready(());
                }
                Some(entry) => {
                    if !entry.waker.will_wake(cx.waker()) {
                        entry.waker = cx.waker().clone();
                    }
                }
                // Only this sleep frees its slot; register again should that ever change.
                None => this.slot = Some(slab.insert(this.deadline, cx.waker().clone())),
            },
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

    /// Completion comes from the ticker's mark, not from a clock read at each poll: a sleep
    /// past its deadline stays pending until a tick finds it due, then completes at the next
    /// poll and leaves the slab.
    #[tokio::test]
    async fn a_sleep_completes_once_a_tick_marked_it_due() {
        let timer = CoarseTimer::start();
        let deadline = Instant::now() + Duration::from_secs(3600);
        let mut sleep = Box::pin(timer.sleep_until(deadline));
        let wakes = register(&mut sleep);
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        let mut due = Vec::new();
        wake_due(&timer.shared, deadline - Duration::from_millis(1), &mut due);
        assert!(sleep.as_mut().poll(&mut cx).is_pending(), "not yet due");
        wake_due(&timer.shared, deadline, &mut due);
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1, "the tick woke it");
        wake_due(&timer.shared, deadline + TICK, &mut due);
        assert_eq!(
            wakes.0.load(Ordering::SeqCst),
            1,
            "woken once, not at every tick"
        );
        assert!(
            sleep.as_mut().poll(&mut cx).is_ready(),
            "marked due: complete"
        );
        assert_eq!(timer.pending(), 0, "a completed sleep leaves the slab");
    }

    /// A deadline already past when the sleep is first polled: it registers and completes at
    /// the next tick (within the [`TICK`] of lateness allowed).
    #[tokio::test]
    async fn a_deadline_already_past_completes_at_the_next_tick() {
        let timer = CoarseTimer::start();
        let deadline = Instant::now();
        tokio::time::timeout(HANG, timer.sleep_until(deadline))
            .await
            .expect("the ticker completed a sleep whose deadline had passed");
        assert_eq!(timer.pending(), 0);
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
            .map(|e| e.deadline)
            .collect();
        assert_eq!(registered, [new_deadline], "the registered deadline moved");
        tokio::time::timeout(HANG, sleep)
            .await
            .expect("the reset sleep completed (its old deadline was an hour away)");
        assert!(Instant::now() >= new_deadline);
        assert_eq!(timer.pending(), 0);
    }
}
