//! Kubernetes Events from the controllers, deduplicated like upstream's recorder.
//!
//! Responsibility: [`Events::publish`] creates an `events.k8s.io/v1` Event about an object
//! through kube-runtime's [`Recorder`], at most once per (object, reason, dedupe key) within the
//! event's dedupe window (default 2 min;
//! upstream uses 5 min for `FailedScheduling` and 1 min for `NoCompatibleInstanceTypes`),
//! and, for a reason given a [`RateLimit`] (upstream: `Nominated`, 5/s with a burst of 10),
//! only while that reason's token bucket has a token: an Event over the limit is dropped,
//! not queued, and not remembered as sent.
//! Publishing never blocks or fails a reconcile: it runs on a spawned task and a failure is
//! only logged. Every Event is created afresh by a new `Recorder`: a shared one folds a later
//! Event of the same object, reason and action into the first one's series, keeping the first
//! note (a node held first as "nominated", then by a rollout, kept saying "nominated"); repeats
//! are already held back by the dedupe window.
//! Inputs: a workload `kube::Client`. Outputs: Events in the workload cluster.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::time::Instant;

/// The default dedupe window.
pub const DEFAULT_DEDUPE: Duration = Duration::from_secs(120);

/// Normal or Warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Normal.
    Normal,
    /// Warning.
    Warning,
}

/// One Event to publish.
#[derive(Debug, Clone)]
pub struct Message {
    /// Normal or Warning.
    pub kind: Kind,
    /// PascalCase reason (`FailedScheduling`, `Nominated`, …).
    pub reason: &'static str,
    /// Human-readable text.
    pub note: String,
    /// What it is deduplicated by besides object and reason (default: the note).
    pub dedupe_key: Option<String>,
    /// The dedupe window.
    pub dedupe: Duration,
    /// A token bucket shared by every Event of this reason.
    pub limit: Option<RateLimit>,
}

/// A token bucket: `per_second` tokens added per second, at most `burst` kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Tokens per second.
    pub per_second: f64,
    /// Tokens kept at most (and at the start).
    pub burst: u32,
}

/// Upstream's limit on `Nominated` Events: 5 per second, bursts of 10.
pub const NOMINATION_LIMIT: RateLimit = RateLimit {
    per_second: 5.0,
    burst: 10,
};

/// One reason's bucket: tokens left and when they were counted.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// Takes a token if one is there (after refilling for the time passed).
    fn try_take(&mut self, limit: RateLimit, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * limit.per_second).min(f64::from(limit.burst));
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

impl Message {
    /// A Normal event.
    #[must_use]
    pub fn normal(reason: &'static str, note: impl Into<String>) -> Self {
        Self {
            kind: Kind::Normal,
            reason,
            note: note.into(),
            dedupe_key: None,
            dedupe: DEFAULT_DEDUPE,
            limit: None,
        }
    }

    /// A Warning event.
    #[must_use]
    pub fn warning(reason: &'static str, note: impl Into<String>) -> Self {
        Self {
            kind: Kind::Warning,
            ..Self::normal(reason, note)
        }
    }

    /// Deduplicate within `window` instead of the default.
    #[must_use]
    pub fn dedupe_for(mut self, window: Duration) -> Self {
        self.dedupe = window;
        self
    }

    /// Deduplicate by `key` instead of the note.
    #[must_use]
    pub fn dedupe_by(mut self, key: impl Into<String>) -> Self {
        self.dedupe_key = Some(key.into());
        self
    }

    /// Deduplicate by the object alone (with the reason): one such Event per object per
    /// window, whatever its note says (upstream: `Nominated` per pod UID).
    #[must_use]
    pub fn dedupe_by_object(self) -> Self {
        self.dedupe_by(String::new())
    }

    /// Send only while this reason's token bucket has a token.
    #[must_use]
    pub fn rate_limited(mut self, limit: RateLimit) -> Self {
        self.limit = Some(limit);
        self
    }
}

/// (object, reason, dedupe key) → end of its dedupe window.
type Seen = HashMap<(String, &'static str, String), Instant>;

/// What a recording publisher kept: (object, message), oldest first.
type Published = Vec<(ObjectReference, Message)>;

/// The event publisher shared by the controllers.
#[derive(Clone)]
pub struct Events {
    /// Where Events go and who reports them (`None`: recording publishers for tests).
    target: Option<(kube::Client, Reporter)>,
    seen: Arc<Mutex<Seen>>,
    buckets: Arc<Mutex<HashMap<&'static str, Bucket>>>,
    /// What was published, kept only by [`Events::recording`] publishers (tests): a
    /// production publisher keeps nothing, so its memory stays bounded.
    published: Option<Arc<Mutex<Published>>>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("enabled", &self.target.is_some())
            .finish_non_exhaustive()
    }
}

impl Events {
    /// Events published to `client` as controller `karpenter` (instance `instance`).
    #[must_use]
    pub fn new(client: kube::Client, instance: Option<String>) -> Self {
        let reporter = Reporter {
            controller: "karpenter".into(),
            instance,
        };
        Self {
            target: Some((client, reporter)),
            seen: Arc::default(),
            buckets: Arc::default(),
            published: None,
        }
    }

    /// A publisher that only records what it would publish (tests).
    #[must_use]
    pub fn recording() -> Self {
        Self {
            target: None,
            seen: Arc::default(),
            buckets: Arc::default(),
            published: Some(Arc::default()),
        }
    }

    /// What was published (after deduplication), oldest first; always empty unless this is a
    /// [`Events::recording`] publisher.
    #[must_use]
    pub fn published(&self) -> Vec<(ObjectReference, Message)> {
        self.published.as_ref().map_or_else(Vec::new, |p| {
            p.lock().unwrap_or_else(PoisonError::into_inner).clone()
        })
    }

    /// Publishes `message` about `object` unless an identical one went out within its dedupe
    /// window or its reason is over its rate limit. Returns whether it was sent.
    pub fn publish<K: Resource<DynamicType = ()>>(&self, object: &K, message: Message) -> bool {
        self.publish_ref(object.object_ref(&()), message)
    }

    /// [`Events::publish`] with a ready-made reference.
    pub fn publish_ref(&self, reference: ObjectReference, message: Message) -> bool {
        let now = Instant::now();
        let object_key = reference
            .uid
            .clone()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| {
                format!(
                    "{}/{}/{}",
                    reference.kind.as_deref().unwrap_or_default(),
                    reference.namespace.as_deref().unwrap_or_default(),
                    reference.name.as_deref().unwrap_or_default()
                )
            });
        let key = (
            object_key,
            message.reason,
            message
                .dedupe_key
                .clone()
                .unwrap_or_else(|| message.note.clone()),
        );
        {
            let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            if seen.get(&key).is_some_and(|until| *until > now) {
                return false;
            }
            if let Some(limit) = message.limit {
                let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
                let bucket = buckets.entry(message.reason).or_insert(Bucket {
                    tokens: f64::from(limit.burst),
                    at: now,
                });
                if !bucket.try_take(limit, now) {
                    return false;
                }
            }
            if seen.len() > 10_000 {
                seen.retain(|_, until| *until > now);
            }
            seen.insert(key, now + message.dedupe);
        }
        if let Some(published) = &self.published {
            published
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((reference.clone(), message.clone()));
        }
        if let Some((client, reporter)) = self.target.clone() {
            let recorder = Recorder::new(client, reporter);
            let event = Event {
                type_: match message.kind {
                    Kind::Normal => EventType::Normal,
                    Kind::Warning => EventType::Warning,
                },
                reason: message.reason.to_owned(),
                note: Some(truncate(&message.note, 1024)),
                action: message.reason.to_owned(),
                secondary: None,
            };
            tokio::spawn(async move {
                if let Err(e) = recorder.publish(&event, &reference).await {
                    tracing::debug!(error = %e, reason = event.reason, "event not published");
                }
            });
        }
        true
    }
}

/// `text` cut to at most `max` bytes on a character boundary.
#[must_use]
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::ObjectMeta;

    fn pod(uid: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("default".into()),
                uid: Some(uid.into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn repeats_within_the_window_are_dropped() {
        let events = Events::recording();
        let m =
            || Message::warning("FailedScheduling", "no room").dedupe_for(Duration::from_secs(300));
        assert!(events.publish(&pod("u1"), m()));
        assert!(!events.publish(&pod("u1"), m()));
        assert!(events.publish(&pod("u2"), m()));
        assert!(events.publish(&pod("u1"), Message::warning("FailedScheduling", "other")));
        tokio::time::advance(Duration::from_secs(301)).await;
        assert!(events.publish(&pod("u1"), m()));
        assert_eq!(events.published().len(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_limited_reason_sends_its_burst_then_its_rate_and_forgets_what_it_dropped() {
        let events = Events::recording();
        let m = || Message::normal("Nominated", "n").rate_limited(NOMINATION_LIMIT);
        let sent = (0..25)
            .filter(|i| events.publish(&pod(&format!("u{i}")), m()))
            .count();
        assert_eq!(sent, 10, "the burst");
        tokio::time::advance(Duration::from_secs(1)).await;
        let sent = (25..50)
            .filter(|i| events.publish(&pod(&format!("u{i}")), m()))
            .count();
        assert_eq!(sent, 5, "five per second");
        // A dropped Event was not remembered as sent: it goes out once there is a token.
        tokio::time::advance(Duration::from_millis(200)).await;
        assert!(events.publish(&pod("u49"), m()));
        // Other reasons have no limit.
        assert!(events.publish(&pod("u0"), Message::normal("Other", "n")));
    }

    #[tokio::test(start_paused = true)]
    async fn dedupe_by_object_sends_one_event_per_object_whatever_the_note() {
        let events = Events::recording();
        let m = |note: &str| Message::normal("Nominated", note).dedupe_by_object();
        assert!(events.publish(&pod("u1"), m("Pod should schedule on: nodeclaim/a")));
        assert!(!events.publish(&pod("u1"), m("Pod should schedule on: nodeclaim/b")));
        assert!(events.publish(&pod("u2"), m("Pod should schedule on: nodeclaim/b")));
        tokio::time::advance(DEFAULT_DEDUPE + Duration::from_secs(1)).await;
        assert!(events.publish(&pod("u1"), m("Pod should schedule on: nodeclaim/b")));
    }

    /// Issue 11 item 6: a production publisher keeps no history of what it published.
    #[tokio::test]
    async fn a_publisher_to_a_cluster_keeps_no_history() {
        let sim = sim::Sim::new(sim::SimConfig::default());
        let events = Events::new(kube::Client::new(sim.router(), "default"), None);
        for i in 0..1_000 {
            assert!(events.publish(&pod(&format!("u{i}")), Message::normal("Nominated", "n")));
        }
        assert!(events.published.is_none());
        assert!(events.published().is_empty());
    }

    /// A node held first for one reason and then for another gets an Event saying each: a
    /// shared kube-runtime Recorder folded the second into the first one's series, and the
    /// cluster only ever showed the first note (seen on a real kube-apiserver: a node held as
    /// nominated, then by a rollout).
    #[tokio::test]
    async fn a_new_note_for_the_same_object_and_reason_is_its_own_event() {
        let sim = sim::Sim::new(sim::SimConfig::default());
        let client = kube::Client::new(sim.router(), "default");
        let events = Events::new(client.clone(), None);
        let node = k8s_openapi::api::core::v1::Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                uid: Some("n1-uid".into()),
                ..ObjectMeta::default()
            },
            ..Default::default()
        };
        let api = kube::Api::<k8s_openapi::api::events::v1::Event>::namespaced(client, "default");
        let mut notes = Vec::new();
        // One after the other, as a node's reasons come; each published on a spawned task, so
        // wait for it (a generous bound, not a timing claim).
        for (i, note) in [
            "Node is nominated",
            "Node is rolling out through 2 MachineSets",
        ]
        .into_iter()
        .enumerate()
        {
            assert!(events.publish(&node, Message::normal("DisruptionBlocked", note)));
            for _ in 0..1_500 {
                notes = api
                    .list(&kube::api::ListParams::default())
                    .await
                    .unwrap()
                    .items
                    .into_iter()
                    .filter_map(|e| e.note)
                    .collect();
                if notes.len() > i {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        notes.sort();
        assert_eq!(
            notes,
            [
                "Node is nominated",
                "Node is rolling out through 2 MachineSets"
            ]
        );
    }

    #[test]
    fn long_notes_are_truncated_on_a_char_boundary() {
        assert_eq!(truncate("abc", 10), "abc");
        let t = truncate(&"é".repeat(10), 8);
        assert!(t.ends_with("...") && t.len() <= 8, "{t}");
    }
}
