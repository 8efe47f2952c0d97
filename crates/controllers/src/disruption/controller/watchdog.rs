//! The disruption loop's watchdog: an error log when no pass finished for 15 minutes (a pass
//! stuck on the API, a sync gate that never opens), as upstream logs it, and an info line when
//! passes resume.
//!
//! Inputs: the loop's pass counter. Outputs: log lines only.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// How long without a finished pass before the loop says it is stuck (as upstream logs).
pub(super) const STALLED_AFTER: Duration = Duration::from_secs(15 * 60);

/// Aborts a task when dropped (the watchdog ends with the loop).
pub(super) struct AbortOnDrop(pub(super) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Whether the pass counter moved lately: a stall begins when it has not moved for `after`,
/// and ends when it moves again. Pure (the watchdog feeds it).
#[derive(Debug)]
struct Stall {
    after: Duration,
    seen: u64,
    since: Instant,
    stalled: bool,
}

/// What [`Stall::observe`] noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StallChange {
    Began,
    Ended,
}

impl Stall {
    fn new(after: Duration, passes: u64, now: Instant) -> Self {
        Self {
            after,
            seen: passes,
            since: now,
            stalled: false,
        }
    }

    fn observe(&mut self, passes: u64, now: Instant) -> Option<StallChange> {
        if passes != self.seen {
            let was = self.stalled;
            (self.seen, self.since, self.stalled) = (passes, now, false);
            return was.then_some(StallChange::Ended);
        }
        if !self.stalled && now.duration_since(self.since) >= self.after {
            self.stalled = true;
            return Some(StallChange::Began);
        }
        None
    }
}

/// Logs an error once per stall when `passes` has not moved for `after` (a pass stuck on the
/// API, a sync gate that never opens), and an info line when passes resume.
pub(super) async fn watch_passes(passes: Arc<AtomicU64>, after: Duration) {
    let tick = (after / 15).max(Duration::from_millis(10));
    let mut stall = Stall::new(after, passes.load(Ordering::Relaxed), Instant::now());
    loop {
        tokio::time::sleep(tick).await;
        match stall.observe(passes.load(Ordering::Relaxed), Instant::now()) {
            Some(StallChange::Began) => tracing::error!(
                minutes = after.as_secs() / 60,
                "no disruption pass finished for {} minutes",
                after.as_secs() / 60
            ),
            Some(StallChange::Ended) => tracing::info!("disruption passes resumed"),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_is_reported_once_and_its_end_once() {
        let t0 = Instant::now();
        let after = Duration::from_secs(900);
        let mut s = Stall::new(after, 5, t0);
        assert_eq!(s.observe(5, t0 + Duration::from_secs(899)), None);
        assert_eq!(
            s.observe(5, t0 + Duration::from_secs(900)),
            Some(StallChange::Began)
        );
        assert_eq!(s.observe(5, t0 + Duration::from_secs(2000)), None, "once");
        assert_eq!(
            s.observe(6, t0 + Duration::from_secs(2001)),
            Some(StallChange::Ended)
        );
        assert_eq!(s.observe(7, t0 + Duration::from_secs(2002)), None);
        assert_eq!(s.observe(7, t0 + Duration::from_secs(2900)), None);
        assert_eq!(
            s.observe(7, t0 + Duration::from_secs(2902)),
            Some(StallChange::Began),
            "a new stall counts from the last pass"
        );
    }
}
