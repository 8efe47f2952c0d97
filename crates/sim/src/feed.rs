//! The live event feed of one resource: every write, fanned out to every open watch.
//!
//! Responsibility: hand each published event (an `Arc`, never a copy) to every receiver that
//! was subscribed when it was published, in publication order, letting each receiver read at
//! its own pace. An event is kept only until every receiver that needs it has read it, so
//! memory follows the slowest reader's backlog, not a fixed preallocated ring; a receiver more
//! than [`MAX_LAG`] events behind is told it [`Lagged`] (the watch then ends with 410, as
//! kube-apiserver ends watchers it cannot keep up with). Receivers take every ready event in
//! one short critical section, and the publisher never waits for a receiver.
//! Inputs: events from [`crate::store::Store`] (published under the server's state lock).
//! Outputs: batches of events per receiver, [`Lagged`], or the end of the feed when the
//! publisher is gone.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;

/// How far (in events) a receiver may fall behind before it is cut off with [`Lagged`].
pub const MAX_LAG: usize = 1 << 16;

/// The receiver fell more than [`MAX_LAG`] events behind; the events it missed are gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the receiver fell more than {MAX_LAG} events behind")]
pub struct Lagged;

/// Events not yet read by every receiver.
#[derive(Debug)]
struct Queue<T> {
    /// Sequence number of `events[0]`.
    head: u64,
    /// Each event with the number of receivers still to read it.
    events: VecDeque<(T, usize)>,
    /// Open receivers.
    receivers: usize,
}

impl<T> Queue<T> {
    fn tail(&self) -> u64 {
        self.head + self.events.len() as u64
    }

    /// Drop the events every receiver has read.
    fn trim(&mut self) {
        while self.events.front().is_some_and(|(_, rem)| *rem == 0) {
            self.events.pop_front();
            self.head += 1;
        }
    }
}

type Shared<T> = Arc<Mutex<Queue<T>>>;

fn lock<T>(q: &Mutex<Queue<T>>) -> MutexGuard<'_, Queue<T>> {
    // The queue is consistent after every statement that can panic (none do), so a poisoned
    // lock still guards a usable queue.
    q.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The publishing end.
#[derive(Debug)]
pub struct Sender<T> {
    queue: Shared<T>,
    /// The sequence number after the last published event; receivers wait on its changes.
    published: watch::Sender<u64>,
}

impl<T: Clone> Default for Sender<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone> Sender<T> {
    /// A feed with no receivers.
    pub fn new() -> Self {
        Self {
            queue: Arc::new(Mutex::new(Queue {
                head: 0,
                events: VecDeque::new(),
                receivers: 0,
            })),
            published: watch::channel(0).0,
        }
    }

    /// Publish an event to every open receiver (kept only if there is one).
    pub fn send(&self, event: T) {
        let tail = {
            let mut q = lock(&self.queue);
            if q.receivers > 0 {
                let n = q.receivers;
                q.events.push_back((event, n));
                while q.events.len() > MAX_LAG {
                    q.events.pop_front();
                    q.head += 1;
                }
            } else {
                q.head += 1;
            }
            q.tail()
        };
        self.published.send_replace(tail);
    }

    /// A receiver of every event published from now on.
    pub fn subscribe(&self) -> Receiver<T> {
        let mut q = lock(&self.queue);
        q.receivers += 1;
        Receiver {
            queue: self.queue.clone(),
            published: self.published.subscribe(),
            next: q.tail(),
        }
    }
}

/// One reader of the feed.
#[derive(Debug)]
pub struct Receiver<T> {
    queue: Shared<T>,
    published: watch::Receiver<u64>,
    /// Sequence number of the next event to read.
    next: u64,
}

impl<T: Clone> Receiver<T> {
    /// Move every ready event into `out` (in order), without waiting.
    pub fn take(&mut self, out: &mut VecDeque<T>) -> Result<(), Lagged> {
        // Mark the current publication seen before reading, so a later one wakes `changed`.
        self.published.borrow_and_update();
        let mut q = lock(&self.queue);
        if self.next < q.head {
            return Err(Lagged);
        }
        let from = usize::try_from(self.next - q.head).unwrap_or(usize::MAX);
        for (event, rem) in q.events.iter_mut().skip(from) {
            *rem = rem.saturating_sub(1);
            out.push_back(event.clone());
        }
        self.next = q.tail();
        q.trim();
        Ok(())
    }

    /// Wait until something is published after the last [`Receiver::take`]; `false` once the
    /// sender is gone (events published before that can still be taken).
    pub async fn changed(&mut self) -> bool {
        self.published.changed().await.is_ok()
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut q = lock(&self.queue);
        q.receivers = q.receivers.saturating_sub(1);
        let from = usize::try_from(self.next.saturating_sub(q.head)).unwrap_or(usize::MAX);
        for (_, rem) in q.events.iter_mut().skip(from) {
            *rem = rem.saturating_sub(1);
        }
        q.trim();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taken(rx: &mut Receiver<u32>) -> Result<Vec<u32>, Lagged> {
        let mut out = VecDeque::new();
        rx.take(&mut out)?;
        Ok(out.into())
    }

    #[test]
    fn every_receiver_gets_every_later_event_in_order() {
        let tx = Sender::new();
        tx.send(0);
        let mut a = tx.subscribe();
        let mut b = tx.subscribe();
        for i in 1..=5 {
            tx.send(i);
        }
        assert_eq!(taken(&mut a), Ok(vec![1, 2, 3, 4, 5]));
        tx.send(6);
        assert_eq!(taken(&mut a), Ok(vec![6]));
        assert_eq!(taken(&mut b), Ok(vec![1, 2, 3, 4, 5, 6]));
        assert_eq!(taken(&mut b), Ok(vec![]));
    }

    #[test]
    fn events_are_kept_only_until_every_receiver_read_them() {
        let tx = Sender::new();
        let mut fast = tx.subscribe();
        let slow = tx.subscribe();
        for i in 0..10 {
            tx.send(i);
        }
        assert_eq!(taken(&mut fast).map(|v| v.len()), Ok(10));
        assert_eq!(
            lock(&tx.queue).events.len(),
            10,
            "the slow receiver needs them"
        );
        drop(slow);
        assert!(lock(&tx.queue).events.is_empty());
        drop(fast);
        tx.send(11);
        assert!(lock(&tx.queue).events.is_empty(), "nobody to keep it for");
    }

    #[test]
    fn a_slow_receiver_does_not_hold_back_a_fast_one_and_is_cut_off_past_the_bound() {
        let tx = Sender::new();
        let mut slow = tx.subscribe();
        let mut fast = tx.subscribe();
        let mut seen = 0;
        for i in 0..(MAX_LAG as u32 + 10) {
            tx.send(i);
            if i % 1000 == 0 {
                seen += taken(&mut fast).map(|v| v.len()).unwrap_or_default();
            }
        }
        seen += taken(&mut fast).map(|v| v.len()).unwrap_or_default();
        assert_eq!(seen, MAX_LAG + 10);
        assert_eq!(taken(&mut slow), Err(Lagged));
        assert!(lock(&tx.queue).events.len() <= MAX_LAG);
    }

    #[tokio::test]
    async fn receivers_wake_on_publication_and_see_the_end() {
        let tx = Sender::new();
        let mut rx = tx.subscribe();
        let waiter = tokio::spawn(async move {
            let woke = rx.changed().await;
            (woke, taken(&mut rx), rx)
        });
        tokio::task::yield_now().await;
        tx.send(7);
        let (woke, got, mut rx) = waiter.await.unwrap();
        assert!(woke);
        assert_eq!(got, Ok(vec![7]));
        tx.send(8);
        drop(tx);
        assert_eq!(taken(&mut rx), Ok(vec![8]), "published before the end");
        assert!(!rx.changed().await);
    }
}
