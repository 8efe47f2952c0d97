//! The batching window of the provisioner (spec §3.2).
//!
//! Responsibility: [`Batcher::wait`] blocks until a first trigger arrives, then keeps
//! collecting while *new* triggers keep arriving within the idle duration
//! (`BATCH_IDLE_DURATION`, 1 s), bounded by the max duration (`BATCH_MAX_DURATION`, 10 s) from
//! the first trigger. A trigger already in the window does not extend it. The window's content
//! is only a signal: the provisioner reads the pods itself.
//! Inputs: a channel of [`Trigger`]s. Outputs: [`Batch`]es (tokio time, so tests can pause it).

use std::collections::HashSet;
use std::time::Duration;

use state::Trigger;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The window's durations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchConfig {
    /// Idle gap that closes a window.
    pub idle: Duration,
    /// Longest window.
    pub max: Duration,
}

impl Default for BatchConfig {
    fn default() -> Self {
        Self {
            idle: Duration::from_secs(1),
            max: Duration::from_secs(10),
        }
    }
}

/// One closed window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// Distinct triggers in it.
    pub triggers: usize,
    /// When the first trigger arrived.
    pub opened: Instant,
    /// When the window closed.
    pub closed: Instant,
}

/// Collects triggers into windows.
#[derive(Debug)]
pub struct Batcher {
    rx: mpsc::UnboundedReceiver<Trigger>,
    config: BatchConfig,
}

impl Batcher {
    /// A batcher over `rx`.
    #[must_use]
    pub fn new(rx: mpsc::UnboundedReceiver<Trigger>, config: BatchConfig) -> Self {
        Self { rx, config }
    }

    /// Waits for the next window; `None` once every sender is gone.
    pub async fn wait(&mut self) -> Option<Batch> {
        let first = self.rx.recv().await?;
        let opened = Instant::now();
        let hard_end = opened + self.config.max;
        let mut seen: HashSet<Trigger> = HashSet::from([first]);
        let mut idle_end = opened + self.config.idle;
        loop {
            let end = idle_end.min(hard_end);
            match tokio::time::timeout_at(end, self.rx.recv()).await {
                Err(_) => break,
                Ok(None) => break,
                Ok(Some(t)) => {
                    if seen.insert(t) {
                        idle_end = Instant::now() + self.config.idle;
                    }
                }
            }
        }
        Some(Batch {
            triggers: seen.len(),
            opened,
            closed: Instant::now(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn pod(n: u32) -> Trigger {
        Trigger::Pod(format!("uid-{n}"))
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_trigger_closes_after_the_idle_gap() {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut b = Batcher::new(rx, BatchConfig::default());
        tx.send(pod(1)).unwrap();
        let batch = b.wait().await.unwrap();
        assert_eq!(batch.triggers, 1);
        assert_eq!(batch.closed - batch.opened, Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn new_triggers_extend_the_window_up_to_the_max() {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut b = Batcher::new(rx, BatchConfig::default());
        tokio::spawn(async move {
            for n in 0..100 {
                tx.send(pod(n)).unwrap();
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        let batch = b.wait().await.unwrap();
        assert_eq!(batch.closed - batch.opened, Duration::from_secs(10));
        assert_eq!(batch.triggers, 20);
    }

    #[tokio::test(start_paused = true)]
    async fn repeated_triggers_do_not_extend_the_window() {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut b = Batcher::new(rx, BatchConfig::default());
        tokio::spawn(async move {
            for _ in 0..10 {
                tx.send(pod(7)).unwrap();
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
        let batch = b.wait().await.unwrap();
        assert_eq!(batch.triggers, 1);
        assert_eq!(batch.closed - batch.opened, Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_channel_ends() {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut b = Batcher::new(rx, BatchConfig::default());
        drop(tx);
        assert!(b.wait().await.is_none());
    }
}
