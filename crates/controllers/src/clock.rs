//! Wall-clock "now" that advances with tokio time.
//!
//! Responsibility: [`Clock`] anchors the wall time once and adds tokio's elapsed time, so
//! condition transition times, timeouts and deadlines computed by the controllers move with a
//! paused test clock (`start_paused`) exactly as they do in production.
//! Inputs: none. Outputs: timestamps.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use tokio::time::Instant;

/// Wall time that advances with tokio's clock.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    wall: Timestamp,
    start: Instant,
}

impl Clock {
    /// Anchored at the current wall time and tokio instant.
    #[must_use]
    pub fn new() -> Self {
        Self {
            wall: Timestamp::now(),
            start: Instant::now(),
        }
    }

    /// The same as [`Clock::new`].
    #[must_use]
    pub fn start() -> Self {
        Self::new()
    }

    /// The anchor wall time plus the tokio time elapsed since.
    #[must_use]
    pub fn now(&self) -> Timestamp {
        SignedDuration::try_from(self.start.elapsed())
            .ok()
            .and_then(|d| self.wall.checked_add(d).ok())
            .unwrap_or(self.wall)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn now_moves_with_tokio_time() {
        let clock = Clock::new();
        let before = clock.now();
        tokio::time::advance(Duration::from_secs(90)).await;
        assert_eq!(
            clock.now().duration_since(before),
            SignedDuration::from_secs(90)
        );
    }
}
