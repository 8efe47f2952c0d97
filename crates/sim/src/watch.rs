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
//! `sendInitialEvents`; `timeoutSeconds` ends the stream; a watcher that falls behind the
//! event channel, or a history compaction, ends it with 410.
//! Inputs: [`ListOptions`] and the locked [`State`]. Outputs: a [`WatchStream`] of event JSON.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::time::{Instant, Interval};

use crate::convert::to_served;
use crate::error::{ApiError, ApiResult};
use crate::object;
use crate::options::ListOptions;
use crate::registry::ResourceDef;
use crate::state::{Endpoint, State};
use crate::store::{EventType, StoredEvent};

/// A running watch: call [`WatchStream::next`] for each event.
#[derive(Debug)]
pub struct WatchStream {
    def: ResourceDef,
    version: String,
    namespace: Option<String>,
    opts: ListOptions,
    pending: VecDeque<Value>,
    rx: Option<broadcast::Receiver<Arc<StoredEvent>>>,
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
            def: def.clone(),
            version: ep.version.clone(),
            namespace: ep.namespace.clone(),
            deadline: opts.timeout.map(|t| Instant::now() + t),
            last_bookmark: opts
                .timeout
                .and_then(|t| t.checked_sub(Duration::from_secs(2)))
                .filter(|t| !t.is_zero())
                .map(|t| Instant::now() + t),
            opts,
            pending: VecDeque::new(),
            rx: None,
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
                    .push_back(json!({"type": "ADDED", "object": obj}));
            }
            self.store.current_rv()
        } else {
            requested.unwrap_or_default()
        };
        stream.last_rv = from;
        match self.store.subscribe(&def.store, from) {
            Err(e) => {
                stream.pending = VecDeque::from([expired_event(&e.to_string())]);
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
                    stream.pending.push_back(b);
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

    /// The event a watcher with these filters sees for a stored event, if any.
    fn translate(&self, ev: &StoredEvent) -> Option<Value> {
        let new = to_served(&self.def, &self.version, ev.object.clone());
        let old = ev
            .old
            .as_ref()
            .map(|o| to_served(&self.def, &self.version, o.clone()));
        let now = self.matches(&new);
        let before = old.as_ref().is_some_and(|o| self.matches(o));
        let kind = match ev.kind {
            EventType::Added if now => "ADDED",
            EventType::Modified if now && before => "MODIFIED",
            EventType::Modified if now => "ADDED",
            EventType::Modified if before => "DELETED",
            EventType::Deleted if now || before => "DELETED",
            _ => return None,
        };
        Some(json!({"type": kind, "object": new}))
    }

    fn bookmark(&self) -> Value {
        json!({"type": "BOOKMARK", "object": {
            "kind": self.def.kind,
            "apiVersion": self.def.api_version(&self.version),
            "metadata": {"resourceVersion": self.last_rv.to_string()},
        }})
    }

    /// The next event, or `None` when the watch is over.
    pub async fn next(&mut self) -> Option<Value> {
        if let Some(v) = self.pending.pop_front() {
            return Some(v);
        }
        if self.done {
            return None;
        }
        let deadline = self.deadline;
        loop {
            let rx = self.rx.as_mut()?;
            // Server signals first, so a compaction is seen before any later event.
            tokio::select! {
                biased;
                changed = self.signals.compactions.changed() => {
                    self.done = true;
                    return changed.is_ok().then(|| expired_event("the watch history was compacted"));
                }
                _ = self.signals.closes.changed() => {
                    self.done = true;
                    return None;
                }
                r = rx.recv() => match r {
                    Ok(ev) => {
                        if ev.rv <= self.last_rv {
                            continue;
                        }
                        self.last_rv = ev.rv;
                        if let Some(v) = self.translate(&ev) {
                            return Some(v);
                        }
                    }
                    Err(RecvError::Lagged(_)) => {
                        self.done = true;
                        return Some(expired_event("the watcher fell too far behind"));
                    }
                    Err(RecvError::Closed) => {
                        self.done = true;
                        return None;
                    }
                },
                _ = self.bookmarks.tick(), if self.opts.bookmarks => {
                    return Some(self.bookmark());
                }
                () = sleep_until(self.last_bookmark), if self.opts.bookmarks && self.last_bookmark.is_some() => {
                    self.last_bookmark = None;
                    return Some(self.bookmark());
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
