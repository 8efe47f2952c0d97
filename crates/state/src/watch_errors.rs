//! Watch errors, reported: never silent, never a flood.
//!
//! Responsibility: one [`WatchErrors`] per watch. A failing watch (a 403 from missing RBAC, an
//! unreachable API server, an expired resourceVersion) is logged at **warn** — the first error
//! at once, then at most one line per [`WARN_EVERY`] with the number of errors held back — and
//! its recovery (the next event that is not `Init`: a relist announces itself before it fails)
//! once at info. kube-runtime's watchers retry with backoff by themselves; this
//! only makes sure an operator sees why nothing happens.
//! Inputs: each watch event's outcome. Outputs: log lines.

use std::fmt::Display;
use std::time::Duration;

use tokio::time::Instant;

/// At most one warning per watch per this interval.
pub const WARN_EVERY: Duration = Duration::from_secs(60);

/// The error reporting of one watch.
#[derive(Debug)]
pub struct WatchErrors {
    what: String,
    failing: bool,
    last_warned: Option<Instant>,
    held_back: u64,
}

impl WatchErrors {
    /// Reporting for the watch of `what` (a kind, or a description).
    #[must_use]
    pub fn new(what: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            failing: false,
            last_warned: None,
            held_back: 0,
        }
    }

    /// The watch failed with `error`; returns whether this one was logged.
    pub fn failed(&mut self, error: &dyn Display) -> bool {
        self.failing = true;
        let now = Instant::now();
        if self
            .last_warned
            .is_some_and(|at| now.duration_since(at) < WARN_EVERY)
        {
            self.held_back += 1;
            return false;
        }
        tracing::warn!(watch = %self.what, %error, held_back = self.held_back,
            "watch failed; retrying with backoff");
        self.last_warned = Some(now);
        self.held_back = 0;
        true
    }

    /// The watch delivered an event: if it was failing, say it recovered.
    pub fn succeeded(&mut self) {
        if self.failing {
            tracing::info!(watch = %self.what, "watch recovered");
            self.failing = false;
            self.last_warned = None;
            self.held_back = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_first_error_is_logged_then_at_most_one_a_minute() {
        let mut errors = WatchErrors::new("Node");
        assert!(errors.failed(&"403 forbidden"));
        assert!(!errors.failed(&"403 forbidden"));
        assert!(!errors.failed(&"403 forbidden"));
        tokio::time::advance(WARN_EVERY).await;
        assert!(errors.failed(&"403 forbidden"));
        errors.succeeded();
        assert!(
            errors.failed(&"410 gone"),
            "a new failure after recovery is logged at once"
        );
    }
}
