//! Watches.
//!
//! Responsibility: turn a watch request into the stream of watch events kube-apiserver sends:
//! for `resourceVersion` unset or `"0"` (or `sendInitialEvents=true`) synthetic `ADDED` events
//! for the current objects first, otherwise the retained events after the requested version
//! (or one `ERROR` event with a 410 Expired `Status` if it is older than the history); then
//! every later change. Selectors are applied per event with transitions, as the watch cache
//! does: an update that makes an object start matching is `ADDED`, stop matching `DELETED`.
//! `BOOKMARK`s come every bookmark interval when allowed, 2 s before `timeoutSeconds` ends the
//! stream (as kube-apiserver's watch cache sends them), and after the initial events with
//! `sendInitialEvents`; `timeoutSeconds` ends the stream; a watcher that falls
//! [`crate::feed::MAX_LAG`] events behind the resource's live feed, or a history compaction,
//! ends it with 410.
//! Fan-out is shared, not per watcher: every watch reads the same `Arc` events, and a watcher
//! that selects everything sends the object JSON cached on the event (encoded once for all
//! watchers of that version); only selector transitions look at (copies of) the objects.
//! Inputs: [`ListOptions`] and the locked [`State`]. Outputs: a [`WatchStream`] of
//! [`WatchEvent`]s (event JSON, or shared object bytes framed as one watch event line).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::{Instant, Interval};

use crate::convert::{encode_served, served};
use crate::error::{ApiError, ApiResult};
use crate::feed;
use crate::object;
use crate::options::ListOptions;
use crate::registry::ResourceDef;
use crate::state::{Endpoint, State};
use crate::store::{EventType, StoredEvent};

/// A running watch: call [`WatchStream::next`] for each event.
#[derive(Debug)]
pub struct WatchStream {
    def: std::sync::Arc<ResourceDef>,
    version: String,
    namespace: Option<String>,
    opts: ListOptions,
    /// The served `apiVersion`, the key of the shared encodings.
    api_version: String,
    pending: VecDeque<WatchEvent>,
    rx: Option<feed::Receiver<Arc<StoredEvent>>>,
    /// Live events taken from the feed, not yet translated.
    live: VecDeque<Arc<StoredEvent>>,
    last_rv: u64,
    deadline: Option<Instant>,
    /// When to send the bookmark that comes 2 s before the deadline, if still to come.
    last_bookmark: Option<Instant>,
    bookmarks: Interval,
    signals: Signals,
    done: bool,
}

/// Server-wide signals every watch listens to.
#[derive(Debug, Clone)]
pub struct Signals {
    /// Bumped on history compaction: watches end with 410.
    pub compactions: tokio::sync::watch::Receiver<u64>,
    /// Bumped when the server closes watches (shutdown): watches end cleanly.
    pub closes: tokio::sync::watch::Receiver<u64>,
}

/// One event of a watch, ready to send.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent {
    /// A whole event (initial events, bookmarks, errors, selector transitions).
    Json(Value),
    /// A change as every watcher of this version sees it: the type and the served object's
    /// JSON, shared with the other watchers.
    Shared {
        /// `ADDED`, `MODIFIED` or `DELETED`.
        kind: &'static str,
        /// The served object, encoded.
        object: Arc<[u8]>,
    },
}

impl WatchEvent {
    /// The event as JSON.
    pub fn into_value(self) -> Value {
        match self {
            Self::Json(v) => v,
            Self::Shared { kind, object } => json!({
                "type": kind,
                // The bytes are `Value::to_string()` output, so this does not fail.
                "object": serde_json::from_slice::<Value>(&object).unwrap_or_default(),
            }),
        }
    }

    /// The event as one line of a watch response (JSON and `\n`); the same bytes
    /// `into_value().to_string()` gives.
    pub fn into_line(self) -> Vec<u8> {
        match self {
            Self::Json(v) => {
                // Encoding a `Value` into memory cannot fail (its keys are strings).
                let mut line = serde_json::to_vec(&v).unwrap_or_default();
                line.push(b'\n');
                line
            }
            Self::Shared { kind, object } => {
                // serde_json's maps are sorted: "object" comes before "type".
                let mut line = Vec::with_capacity(object.len() + kind.len() + 24);
                line.extend_from_slice(b"{\"object\":");
                line.extend_from_slice(&object);
                line.extend_from_slice(b",\"type\":\"");
                line.extend_from_slice(kind.as_bytes());
                line.extend_from_slice(b"\"}\n");
                line
            }
        }
    }
}

/// The 410 watch error event.
pub fn expired_event(message: &str) -> Value {
    json!({"type": "ERROR", "object": ApiError::Expired(message.to_owned()).status()})
}

impl State {
    /// Start a watch.
    pub fn watch(
        &mut self,
        ep: &Endpoint,
        opts: ListOptions,
        bookmark_interval: Duration,
        signals: Signals,
    ) -> ApiResult<WatchStream> {
        let def = self.resolve(ep)?;
        opts.fields
            .check_supported(&def.all_field_labels())
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let requested = match opts.resource_version.as_deref() {
            None | Some("0") => None,
            Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
                ApiError::Unclassified(format!(
                    "resourceVersion: Invalid value: {rv:?}: strconv.ParseUint: parsing {rv:?}: invalid syntax"
                ))
            })?),
        };
        let mut bookmarks = tokio::time::interval_at(
            Instant::now() + bookmark_interval,
            bookmark_interval.max(Duration::from_millis(1)),
        );
        bookmarks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut stream = WatchStream {
            def: Arc::clone(&def),
            version: ep.version.clone(),
            namespace: ep.namespace.clone(),
            deadline: opts.timeout.map(|t| Instant::now() + t),
            api_version: def.api_version(&ep.version),
            last_bookmark: opts
                .timeout
                .and_then(|t| t.checked_sub(Duration::from_secs(2)))
                .filter(|t| !t.is_zero())
                .map(|t| Instant::now() + t),
            opts,
            pending: VecDeque::new(),
            rx: None,
            live: VecDeque::new(),
            last_rv: 0,
            bookmarks,
            signals,
            done: false,
        };
        let initial = stream.opts.send_initial_events || requested.is_none();
        let from = if initial {
            let list_opts = ListOptions {
                continue_from: None,
                ..stream.opts.clone()
            };
            for obj in self.matching(&def, ep, &list_opts)? {
                stream
                    .pending
                    .push_back(WatchEvent::Json(json!({"type": "ADDED", "object": obj})));
            }
            self.store.current_rv()
        } else {
            requested.unwrap_or_default()
        };
        stream.last_rv = from;
        match self.store.subscribe(&def.store, from) {
            Err(e) => {
                stream.pending = VecDeque::from([WatchEvent::Json(expired_event(&e.to_string()))]);
                stream.done = true;
            }
            Ok(sub) => {
                for ev in sub.backlog {
                    stream.last_rv = ev.rv;
                    if let Some(v) = stream.translate(&ev) {
                        stream.pending.push_back(v);
                    }
                }
                stream.rx = Some(sub.rx);
                if stream.opts.send_initial_events && stream.opts.bookmarks {
                    let mut b = stream.bookmark();
                    if let Some(obj) = b.get_mut("object") {
                        object::set_meta(
                            obj,
                            "annotations",
                            json!({"k8s.io/initial-events-end": "true"}),
                        );
                    }
                    stream.pending.push_back(WatchEvent::Json(b));
                }
            }
        }
        Ok(stream)
    }
}

impl WatchStream {
    fn matches(&self, obj: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| object::namespace(obj) == ns)
            && self.opts.labels.matches(&object::labels(obj))
            && self.opts.fields.matches(obj)
    }

    /// Whether the watch has no label or field selector (only, perhaps, a namespace).
    fn selects_all(&self) -> bool {
        self.opts.labels.is_empty() && self.opts.fields.0.is_empty()
    }

    /// The event a watcher with these filters sees for a stored event, if any.
    fn translate(&self, ev: &StoredEvent) -> Option<WatchEvent> {
        let (now, before) = if self.selects_all() {
            // The namespace is the same in the stored and served forms: no copy needed.
            let in_ns = |o: &Value| {
                self.namespace
                    .as_deref()
                    .is_none_or(|ns| object::namespace(o) == ns)
            };
            (
                in_ns(&ev.object),
                ev.old.as_deref().is_some_and(|o| in_ns(o)),
            )
        } else {
            let new = served(&self.def, &self.version, &ev.object.value);
            let old = ev
                .old
                .as_ref()
                .map(|o| served(&self.def, &self.version, &o.value));
            (
                self.matches(&new),
                old.as_ref().is_some_and(|o| self.matches(o)),
            )
        };
        let kind = match ev.kind {
            EventType::Added if now => "ADDED",
            EventType::Modified if now && before => "MODIFIED",
            EventType::Modified if now => "ADDED",
            EventType::Modified if before => "DELETED",
            EventType::Deleted if now || before => "DELETED",
            _ => return None,
        };
        let object = ev.object.encoded.get_or_encode(&self.api_version, || {
            encode_served(&self.def, &self.version, &ev.object.value)
        });
        Some(WatchEvent::Shared { kind, object })
    }

    fn bookmark(&self) -> Value {
        json!({"type": "BOOKMARK", "object": {
            "kind": self.def.kind,
            "apiVersion": self.def.api_version(&self.version),
            "metadata": {"resourceVersion": self.last_rv.to_string()},
        }})
    }

    /// The next event as JSON, or `None` when the watch is over.
    pub async fn next(&mut self) -> Option<Value> {
        self.next_event().await.map(WatchEvent::into_value)
    }

    /// Whether a server signal ends the watch now: `Some(event to send last)`.
    fn signalled(&mut self) -> Option<Option<WatchEvent>> {
        match self.signals.compactions.has_changed() {
            Ok(false) => {}
            Ok(true) => {
                self.done = true;
                return Some(Some(WatchEvent::Json(expired_event(
                    "the watch history was compacted",
                ))));
            }
            Err(_) => {
                self.done = true;
                return Some(None);
            }
        }
        if !matches!(self.signals.closes.has_changed(), Ok(false)) {
            self.done = true;
            return Some(None);
        }
        None
    }

    /// The next event, or `None` when the watch is over.
    pub async fn next_event(&mut self) -> Option<WatchEvent> {
        if let Some(v) = self.pending.pop_front() {
            return Some(v);
        }
        if self.done {
            return None;
        }
        let deadline = self.deadline;
        loop {
            // Server signals first, so a compaction is seen before any later event.
            if let Some(last) = self.signalled() {
                return last;
            }
            if let Some(ev) = self.live.pop_front() {
                if ev.rv <= self.last_rv {
                    continue;
                }
                self.last_rv = ev.rv;
                if let Some(v) = self.translate(&ev) {
                    return Some(v);
                }
                continue;
            }
            let rx = self.rx.as_mut()?;
            if rx.take(&mut self.live).is_err() {
                self.done = true;
                return Some(WatchEvent::Json(expired_event(
                    "the watcher fell too far behind",
                )));
            }
            if !self.live.is_empty() {
                continue;
            }
            tokio::select! {
                biased;
                changed = self.signals.compactions.changed() => {
                    self.done = true;
                    return changed.is_ok().then(|| WatchEvent::Json(expired_event("the watch history was compacted")));
                }
                _ = self.signals.closes.changed() => {
                    self.done = true;
                    return None;
                }
                open = rx.changed() => {
                    if !open {
                        // The server is gone: send what it published, then end.
                        if rx.take(&mut self.live).is_err() || self.live.is_empty() {
                            self.done = true;
                            return None;
                        }
                    }
                }
                _ = self.bookmarks.tick(), if self.opts.bookmarks => {
                    return Some(WatchEvent::Json(self.bookmark()));
                }
                () = sleep_until(self.last_bookmark), if self.opts.bookmarks && self.last_bookmark.is_some() => {
                    self.last_bookmark = None;
                    return Some(WatchEvent::Json(self.bookmark()));
                }
                () = sleep_until(deadline) => {
                    self.done = true;
                    return None;
                }
            }
        }
    }
}

/// Sleep until the deadline, or forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::WriteOptions;
    use crate::selectors::LabelSelector;

    fn signals() -> (
        tokio::sync::watch::Sender<u64>,
        tokio::sync::watch::Sender<u64>,
        Signals,
    ) {
        let (compactions_tx, compactions) = tokio::sync::watch::channel(0);
        let (closes_tx, closes) = tokio::sync::watch::channel(0);
        (
            compactions_tx,
            closes_tx,
            Signals {
                compactions,
                closes,
            },
        )
    }

    fn pods() -> Endpoint {
        Endpoint::namespaced("", "v1", "pods", "default")
    }

    fn pod(name: &str, app: &str) -> Value {
        json!({"metadata": {"name": name, "labels": {"app": app}},
               "spec": {"containers": [{"name": "c", "image": "pause"}]}})
    }

    fn watch(st: &mut State, opts: ListOptions, signals: &Signals) -> WatchStream {
        let opts = ListOptions {
            resource_version: Some(st.store.current_rv().to_string()),
            ..opts
        };
        st.watch(&pods(), opts, Duration::from_secs(3600), signals.clone())
            .unwrap()
    }

    /// The events a watch has ready, as (type, name, resourceVersion), and their lines.
    async fn ready(w: &mut WatchStream, n: usize) -> Vec<(String, String, String, Vec<u8>)> {
        let mut out = Vec::new();
        for _ in 0..n {
            let ev = w.next_event().await.unwrap();
            let line = ev.clone().into_line();
            let v = ev.into_value();
            assert_eq!(
                line,
                format!("{v}\n").into_bytes(),
                "a line is the event's JSON"
            );
            out.push((
                v["type"].as_str().unwrap().to_owned(),
                object::name(&v["object"]).to_owned(),
                object::resource_version(&v["object"]).to_owned(),
                line,
            ));
        }
        out
    }

    #[tokio::test]
    async fn every_watcher_gets_every_event_in_order_from_shared_bytes() {
        let (_c, _x, signals) = signals();
        let mut st = State::new(100);
        let mut watchers: Vec<_> = (0..3)
            .map(|_| watch(&mut st, ListOptions::default(), &signals))
            .collect();
        let opts = WriteOptions::default();
        for i in 0..50 {
            st.create(&pods(), pod(&format!("p{i:02}"), "a"), &opts)
                .unwrap();
        }
        let mut seen = Vec::new();
        for w in &mut watchers {
            seen.push(ready(w, 50).await);
        }
        let names: Vec<_> = (0..50).map(|i| format!("p{i:02}")).collect();
        for events in &seen {
            assert_eq!(
                events.iter().map(|e| e.1.clone()).collect::<Vec<_>>(),
                names
            );
            assert!(events.iter().all(|e| e.0 == "ADDED"));
            assert_eq!(events, &seen[0], "every watcher sees the same bytes");
            let rvs: Vec<u64> = events.iter().map(|e| e.2.parse().unwrap()).collect();
            assert!(rvs.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[tokio::test]
    async fn a_slow_watcher_does_not_hold_back_a_fast_one() {
        let (_c, _x, signals) = signals();
        let mut st = State::new(10);
        let mut slow = watch(&mut st, ListOptions::default(), &signals);
        let mut fast = watch(&mut st, ListOptions::default(), &signals);
        let key = st.resolve(&pods()).unwrap().store.clone();
        // More than the 4096 events a fixed live channel used to hold (written to the store
        // directly: this is about fan-out, not about creates).
        for i in 0..5000 {
            let obj = json!({"metadata": {"namespace": "default", "name": format!("p{i:04}")}});
            st.store.put(&key, obj, None);
            // The fast watcher keeps up with each write; the slow one has not read any yet.
            let got = ready(&mut fast, 1).await;
            assert_eq!(got[0].1, format!("p{i:04}"));
        }
        // Far behind the retained history, and still served in full, in order.
        let late = ready(&mut slow, 5000).await;
        assert_eq!(late.first().map(|e| e.1.as_str()), Some("p0000"));
        assert_eq!(late.last().map(|e| e.1.as_str()), Some("p4999"));
    }

    #[tokio::test]
    async fn selected_watchers_still_see_transitions() {
        let (_c, _x, signals) = signals();
        let mut st = State::new(100);
        let selected = ListOptions {
            labels: LabelSelector::parse("app=b").unwrap(),
            ..ListOptions::default()
        };
        let mut w = watch(&mut st, selected, &signals);
        let opts = WriteOptions::default();
        let created = st.create(&pods(), pod("p", "a"), &opts).unwrap();
        let mut relabelled = created.into_value();
        relabelled["metadata"]["labels"]["app"] = json!("b");
        st.update(
            &pods(),
            "p",
            relabelled,
            crate::semantics::WriteMode::Main,
            &opts,
        )
        .unwrap();
        let mut back = st.get(&pods(), "p").unwrap();
        back["metadata"]["labels"]["app"] = json!("a");
        st.update(&pods(), "p", back, crate::semantics::WriteMode::Main, &opts)
            .unwrap();
        let got: Vec<_> = ready(&mut w, 2).await.into_iter().map(|e| e.0).collect();
        assert_eq!(got, ["ADDED", "DELETED"]);
    }

    #[tokio::test]
    async fn a_compaction_ends_a_watch_before_its_queued_events() {
        let (compactions, _x, signals) = signals();
        let mut st = State::new(100);
        let mut w = watch(&mut st, ListOptions::default(), &signals);
        let opts = WriteOptions::default();
        st.create(&pods(), pod("p", "a"), &opts).unwrap();
        compactions.send_modify(|n| *n += 1);
        let ev = w.next().await.unwrap();
        assert_eq!(ev["type"], "ERROR");
        assert_eq!(ev["object"]["code"], 410);
        assert!(w.next().await.is_none());
    }
}
