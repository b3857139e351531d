//! Pacing under the project's rate quota.
//!
//! Compute counts calls per project against per-minute quotas and refuses the excess with
//! `rateLimitExceeded` (403 or 429; Compute Engine rate quotas page). Every worker backing off
//! on its own, with jitter, hammers the quota in waves and can leave one Ingress losing the race
//! again and again. Instead, every call of a kind (reads, writes) takes a turn from one
//! [`Pacer`]: unpaced until the first refusal, then at an adaptive rate, turns handed out in the
//! order they were asked for (first come, first served), so no call waits behind calls that
//! asked after it.
//!
//! The rate adapts additively up and multiplicatively down (AIMD, as TCP's congestion control):
//! a refusal cuts it to [`CUT`] of what was admitted in the last second (at most one cut a
//! second, since the calls already in flight are refused together), each success adds
//! `1/rate` (about one call a second more per second), and above [`UNPACED_ABOVE`] pacing stops.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The rate after a refusal, as a fraction of the rate admitted in the last second.
pub const CUT: f64 = 0.85;
/// Calls a second above which pacing stops again.
pub const UNPACED_ABOVE: f64 = 5_000.0;
/// The slowest pace (calls a second).
pub const FLOOR: f64 = 0.5;

#[derive(Debug)]
struct State {
    /// Calls a second; `None`: unpaced.
    rate: Option<f64>,
    /// The next free turn.
    next: Instant,
    /// When the rate was last cut.
    cut_at: Option<Instant>,
    /// Starts of recent turns (the last second's), to know the admitted rate.
    recent: VecDeque<Instant>,
}

/// Hands out turns for one kind of call (see the module docs).
#[derive(Debug)]
pub struct Pacer {
    state: Mutex<State>,
}

impl Default for Pacer {
    fn default() -> Self {
        Self {
            state: Mutex::new(State {
                rate: None,
                next: Instant::now(),
                cut_at: None,
                recent: VecDeque::new(),
            }),
        }
    }
}

impl Pacer {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The instant this call may start (now when unpaced); later callers get later turns.
    pub fn turn(&self, now: Instant) -> Instant {
        let mut s = self.lock();
        let at = match s.rate {
            None => now,
            Some(rate) => {
                let at = s.next.max(now);
                s.next = at + Duration::from_secs_f64(1.0 / rate);
                at
            }
        };
        s.recent.push_back(at);
        while s
            .recent
            .front()
            .is_some_and(|t| at.saturating_duration_since(*t) > Duration::from_secs(1))
        {
            s.recent.pop_front();
        }
        at
    }

    /// Waits for this call's turn.
    pub async fn wait_turn(&self) {
        let now = Instant::now();
        let at = self.turn(now);
        if at > now {
            tokio::time::sleep_until(at.into()).await;
        }
    }

    /// A call was refused for the quota: slow down (once a second at most).
    pub fn refused(&self, now: Instant) {
        let mut s = self.lock();
        if s.cut_at
            .is_some_and(|t| now.saturating_duration_since(t) < Duration::from_secs(1))
        {
            return;
        }
        let admitted = s
            .recent
            .iter()
            .filter(|t| now.saturating_duration_since(**t) <= Duration::from_secs(1))
            .count() as f64;
        let base = match s.rate {
            Some(rate) => rate.min(admitted.max(FLOOR)),
            None => admitted,
        };
        s.rate = Some((base * CUT).max(FLOOR));
        s.cut_at = Some(now);
        s.next = s.next.max(now);
        tracing::info!(rate = s.rate, "Compute rate quota reached; pacing calls");
    }

    /// A call succeeded: speed up a little.
    pub fn succeeded(&self) {
        let mut s = self.lock();
        if let Some(rate) = s.rate {
            let faster = rate + 1.0 / rate;
            s.rate = (faster < UNPACED_ABOVE).then_some(faster);
        }
    }

    /// The current pace in calls a second, `None` when unpaced.
    pub fn rate(&self) -> Option<f64> {
        self.lock().rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpaced_until_refused_then_turns_are_spaced_in_order() {
        let p = Pacer::default();
        let t0 = Instant::now();
        for _ in 0..20 {
            assert_eq!(p.turn(t0), t0, "unpaced");
        }
        p.refused(t0);
        // 20 calls in the last second: paced at 0.85 x 20 = 17 a second.
        let rate = p.rate().unwrap();
        assert!((rate - 17.0).abs() < 1e-9, "{rate}");
        let turns: Vec<Instant> = (0..5).map(|_| p.turn(t0)).collect();
        assert_eq!(turns[0], t0);
        for pair in turns.windows(2) {
            let gap = pair[1] - pair[0];
            assert!((gap.as_secs_f64() - 1.0 / 17.0).abs() < 1e-6, "{gap:?}");
        }
        // A second refusal within the same second (calls that were in flight) does not cut again.
        p.refused(t0 + Duration::from_millis(100));
        assert_eq!(p.rate(), Some(rate));
        // A later one does, from what was admitted.
        p.refused(t0 + Duration::from_millis(1500));
        assert!(p.rate().unwrap() < rate);
    }

    #[test]
    fn successes_speed_up_and_end_pacing() {
        let p = Pacer::default();
        let t0 = Instant::now();
        for _ in 0..4 {
            p.turn(t0);
        }
        p.refused(t0);
        let before = p.rate().unwrap();
        for _ in 0..10 {
            p.succeeded();
        }
        assert!(p.rate().unwrap() > before);
        p.lock().rate = Some(UNPACED_ABOVE - 1e-6);
        p.succeeded();
        assert_eq!(p.rate(), None, "unpaced again");
        assert_eq!(p.turn(t0), t0);
    }
}
