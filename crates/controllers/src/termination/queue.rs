//! A keyed work queue with per-key exponential backoff (the eviction queue's bookkeeping).
//!
//! Responsibility: remember one value per key, hand out keys whose time has come (earliest
//! first, ties by key), keep a key out while it is being processed, and reschedule failed keys
//! after `base · 2^failures` (capped at `max`). Adding a key that is already queued merges the
//! values ([`Merge`]) without touching its schedule, unless the merge says the key now denotes
//! a different object (then it is due at once with a fresh backoff).
//! Inputs: keys, values and "now". Outputs: due keys and the next wake-up time. Pure.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::time::Instant;

/// How a newer value for a queued key is folded into the queued one.
pub trait Merge {
    /// Folds `newer` into `self`; returns `true` when the key now denotes another object
    /// (e.g. a new UID), which resets its backoff.
    fn merge(&mut self, newer: Self) -> bool;
}

#[derive(Debug, Clone)]
struct Entry<V> {
    value: V,
    due: Instant,
    failures: u32,
    in_flight: bool,
}

/// The queue.
#[derive(Debug, Clone)]
pub struct BackoffQueue<K, V> {
    entries: BTreeMap<K, Entry<V>>,
    due: BTreeSet<(Instant, K)>,
    base: Duration,
    max: Duration,
}

impl<K: Ord + Clone, V: Clone + Merge> BackoffQueue<K, V> {
    /// An empty queue backing off from `base` to `max`.
    #[must_use]
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            entries: BTreeMap::new(),
            due: BTreeSet::new(),
            base,
            max,
        }
    }

    /// The delay after `failures` consecutive failures (1 → base).
    #[must_use]
    pub fn backoff(&self, failures: u32) -> Duration {
        let exponent = failures.saturating_sub(1).min(31);
        self.base
            .checked_mul(1u32 << exponent)
            .unwrap_or(self.max)
            .min(self.max)
    }

    /// Adds `key` due now, or merges `value` into the queued one.
    pub fn add(&mut self, key: K, value: V, now: Instant) {
        let Some(entry) = self.entries.get_mut(&key) else {
            self.due.insert((now, key.clone()));
            self.entries.insert(
                key,
                Entry {
                    value,
                    due: now,
                    failures: 0,
                    in_flight: false,
                },
            );
            return;
        };
        if entry.value.merge(value) {
            entry.failures = 0;
            if !entry.in_flight {
                self.due.remove(&(entry.due, key.clone()));
                entry.due = now;
                self.due.insert((now, key));
            }
        }
    }

    /// Takes the earliest key due at `now` (it stays queued, in flight, until
    /// [`BackoffQueue::done`] or [`BackoffQueue::retry`]).
    pub fn pop_due(&mut self, now: Instant) -> Option<(K, V)> {
        let (due, key) = self.due.first()?.clone();
        if due > now {
            return None;
        }
        self.due.remove(&(due, key.clone()));
        let entry = self.entries.get_mut(&key)?;
        entry.in_flight = true;
        Some((key, entry.value.clone()))
    }

    /// When the next key falls due.
    #[must_use]
    pub fn next_due(&self) -> Option<Instant> {
        self.due.first().map(|(due, _)| *due)
    }

    /// Forgets `key`.
    pub fn done(&mut self, key: &K) {
        if let Some(entry) = self.entries.remove(key) {
            self.due.remove(&(entry.due, key.clone()));
        }
    }

    /// Reschedules `key` after its next backoff.
    pub fn retry(&mut self, key: &K, now: Instant) {
        let Some(failures) = self.entries.get(key).map(|e| e.failures.saturating_add(1)) else {
            return;
        };
        let due = now + self.backoff(failures);
        if let Some(entry) = self.entries.get_mut(key) {
            self.due.remove(&(entry.due, key.clone()));
            entry.failures = failures;
            entry.due = due;
            entry.in_flight = false;
            self.due.insert((due, key.clone()));
        }
    }

    /// How many keys are queued (in flight included).
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is queued.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `key` is queued.
    #[must_use]
    pub fn contains(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// (uid, deadline): keeps the earlier deadline, a new uid replaces.
    #[derive(Debug, Clone, PartialEq)]
    struct Item(&'static str, u32);

    impl Merge for Item {
        fn merge(&mut self, newer: Self) -> bool {
            if self.0 != newer.0 {
                *self = newer;
                return true;
            }
            self.1 = self.1.min(newer.1);
            false
        }
    }

    fn queue() -> BackoffQueue<&'static str, Item> {
        BackoffQueue::new(Duration::from_millis(100), Duration::from_secs(10))
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let q = queue();
        let ms = |f| q.backoff(f).as_millis();
        assert_eq!([ms(1), ms(2), ms(3), ms(7)], [100, 200, 400, 6400]);
        assert_eq!(ms(8), 10_000);
        assert_eq!(ms(1000), 10_000);
    }

    #[tokio::test(start_paused = true)]
    async fn due_keys_come_out_earliest_first_then_by_key() {
        let t0 = Instant::now();
        let mut q = queue();
        q.add("b", Item("u", 1), t0);
        q.add("a", Item("u", 1), t0);
        q.add("c", Item("u", 1), t0 + Duration::from_secs(1));
        assert_eq!(q.pop_due(t0).unwrap().0, "a");
        assert_eq!(q.pop_due(t0).unwrap().0, "b");
        assert_eq!(q.pop_due(t0), None);
        assert_eq!(q.next_due(), Some(t0 + Duration::from_secs(1)));
        assert_eq!(q.len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_key_waits_its_backoff_and_a_done_key_is_gone() {
        let t0 = Instant::now();
        let mut q = queue();
        q.add("a", Item("u", 1), t0);
        q.add("b", Item("u", 1), t0);
        let (a, _) = q.pop_due(t0).unwrap();
        q.retry(&a, t0);
        assert_eq!(q.pop_due(t0).unwrap().0, "b");
        q.done(&"b");
        assert!(!q.contains(&"b"));
        assert_eq!(q.pop_due(t0), None);
        assert_eq!(q.next_due(), Some(t0 + Duration::from_millis(100)));
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(q.pop_due(t1).unwrap().0, "a");
        q.retry(&"a", t1);
        assert_eq!(q.next_due(), Some(t1 + Duration::from_millis(200)));
    }

    #[tokio::test(start_paused = true)]
    async fn adding_again_keeps_the_earlier_deadline_and_the_schedule() {
        let t0 = Instant::now();
        let mut q = queue();
        q.add("a", Item("u", 5), t0);
        q.pop_due(t0).unwrap();
        q.retry(&"a", t0);
        q.add("a", Item("u", 3), t0);
        q.add("a", Item("u", 9), t0);
        assert_eq!(q.pop_due(t0), None, "still backing off");
        let (_, item) = q.pop_due(t0 + Duration::from_millis(100)).unwrap();
        assert_eq!(item, Item("u", 3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_uid_replaces_the_value_and_is_due_at_once() {
        let t0 = Instant::now();
        let mut q = queue();
        q.add("a", Item("old", 5), t0);
        q.pop_due(t0).unwrap();
        q.retry(&"a", t0);
        q.add("a", Item("new", 7), t0);
        assert_eq!(q.pop_due(t0).unwrap().1, Item("new", 7));
        // While in flight, an add only merges.
        q.add("a", Item("newer", 1), t0);
        assert_eq!(q.pop_due(t0), None);
        q.retry(&"a", t0);
        assert_eq!(
            q.pop_due(t0 + Duration::from_millis(100)).unwrap().1,
            Item("newer", 1)
        );
    }
}
