//! Object storage with a global resourceVersion and per-resource watch history.
//!
//! Responsibility: keep objects by `(group, plural)` and `(namespace, name)`, stamp every write
//! with the next value of one monotonically increasing resourceVersion (as etcd's revision),
//! and record each write as a watch event in a bounded per-resource history that watchers
//! replay from and subscribe to.
//! Live events go out through one [`crate::feed`] per resource as shared `Arc`s, and each
//! event carries a cache of its object's served JSON so that watchers share one encoding.
//! Inputs: objects already validated by [`crate::semantics`]. Outputs: stored objects, ordered
//! listings, [`StoredEvent`]s, and 410 Expired when a watch asks for a compacted version.
//! It also indexes objects by uid and by the uids of their owner references, for the garbage
//! collector. No Kubernetes semantics live here beyond resourceVersion bookkeeping.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};

use crate::feed;
use crate::object;
use crate::registry::StoreKey;

/// `(namespace, name)`; namespace is `""` for cluster-scoped objects. Orders as etcd keys do.
pub type ObjKey = (String, String);

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Updated.
    Modified,
    /// Removed.
    Deleted,
}

impl EventType {
    /// The watch event `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One version of an object, shared (never copied) by the store, the watch event of the write
/// that made it and every LIST that serves it; its served JSON is encoded once for all of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// The object as stored.
    pub value: Value,
    /// `value` as served JSON, encoded once by the first LIST or watch that needs it.
    pub encoded: EncodedOnce,
}

impl Stored {
    /// A version with nothing encoded yet.
    pub fn new(value: Value) -> Arc<Self> {
        Arc::new(Self {
            value,
            encoded: EncodedOnce::default(),
        })
    }
}

impl std::ops::Deref for Stored {
    type Target = Value;

    fn deref(&self) -> &Value {
        &self.value
    }
}

/// One write, as watchers see it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    /// What happened.
    pub kind: EventType,
    /// The resourceVersion of the write.
    pub rv: u64,
    /// The object after the write (for deletes: its last state, with the delete's rv).
    pub object: Arc<Stored>,
    /// The object before the write, for updates and deletes.
    pub old: Option<Arc<Stored>>,
}

impl StoredEvent {
    /// An event of `object` (shared with the store).
    pub fn new(kind: EventType, rv: u64, object: Arc<Stored>, old: Option<Arc<Stored>>) -> Self {
        Self {
            kind,
            rv,
            object,
            old,
        }
    }
}

/// The served JSON of a stored object for one served `apiVersion` (the first asked for),
/// shared by every watcher and LIST of that version. Not part of the event's identity: two events are
/// equal whatever they have cached.
#[derive(Debug, Clone, Default)]
pub struct EncodedOnce(OnceLock<(String, Arc<[u8]>)>);

impl PartialEq for EncodedOnce {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl EncodedOnce {
    /// The object's JSON as served with `api_version`: the cached bytes if they were encoded
    /// for that version, else `encode()` (cached if nothing was yet).
    pub fn get_or_encode(&self, api_version: &str, encode: impl FnOnce() -> Vec<u8>) -> Arc<[u8]> {
        let mut encode = Some(encode);
        let (cached_for, bytes) = self.0.get_or_init(|| {
            let bytes = encode.take().map(|f| f()).unwrap_or_default();
            (api_version.to_owned(), bytes.into())
        });
        if cached_for == api_version {
            return bytes.clone();
        }
        encode.map(|f| f()).unwrap_or_default().into()
    }
}

/// The watch history of one resource.
#[derive(Debug)]
struct WatchLog {
    events: VecDeque<Arc<StoredEvent>>,
    /// Watches from a resourceVersion below this get 410 Expired.
    oldest_valid: u64,
    /// Live events to open watches; one that falls [`feed::MAX_LAG`] events behind is ended
    /// with 410 Expired, as kube-apiserver ends watchers it cannot keep up with.
    tx: feed::Sender<Arc<StoredEvent>>,
}

impl WatchLog {
    fn new() -> Self {
        Self {
            events: VecDeque::new(),
            oldest_valid: 0,
            tx: feed::Sender::new(),
        }
    }
}

/// The requested resourceVersion is older than the retained history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too old resource version: {requested} ({oldest})")]
pub struct Expired {
    /// What was asked for.
    pub requested: u64,
    /// The oldest version still served.
    pub oldest: u64,
}

/// A watch's starting point: the retained events after the requested version, and a receiver of
/// every later one.
#[derive(Debug)]
pub struct Subscription {
    /// Retained events after the requested version, oldest first.
    pub backlog: Vec<Arc<StoredEvent>>,
    /// Later events.
    pub rx: feed::Receiver<Arc<StoredEvent>>,
}

/// Where an object is: its resource and key.
pub type Location = (StoreKey, ObjKey);

/// All objects.
#[derive(Debug)]
pub struct Store {
    rv: u64,
    objects: HashMap<StoreKey, BTreeMap<ObjKey, Arc<Stored>>>,
    logs: HashMap<StoreKey, WatchLog>,
    history_limit: usize,
    by_uid: HashMap<String, Location>,
    dependents: HashMap<String, BTreeSet<Location>>,
}

impl Store {
    /// An empty store keeping at most `history_limit` events per resource.
    pub fn new(history_limit: usize) -> Self {
        Self {
            rv: 0,
            objects: HashMap::new(),
            logs: HashMap::new(),
            history_limit: history_limit.max(1),
            by_uid: HashMap::new(),
            dependents: HashMap::new(),
        }
    }

    /// Where the object with this uid is, if it exists.
    pub fn locate(&self, uid: &str) -> Option<&Location> {
        self.by_uid.get(uid)
    }

    /// The object with this uid, if it exists.
    pub fn get_by_uid(&self, uid: &str) -> Option<&Value> {
        let (key, (ns, name)) = self.by_uid.get(uid)?;
        self.get(key, ns, name)
    }

    /// Where the objects that have an owner reference to `uid` are.
    pub fn dependents_of(&self, uid: &str) -> Vec<Location> {
        self.dependents
            .get(uid)
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn index(&mut self, key: &StoreKey, obj: &Value) {
        let loc = (
            key.clone(),
            (
                object::namespace(obj).to_owned(),
                object::name(obj).to_owned(),
            ),
        );
        let uid = object::uid(obj);
        if !uid.is_empty() {
            self.by_uid.insert(uid.to_owned(), loc.clone());
        }
        for owner in object::owner_uids(obj) {
            self.dependents
                .entry(owner)
                .or_default()
                .insert(loc.clone());
        }
    }

    fn unindex(&mut self, key: &StoreKey, obj: &Value) {
        let loc = (
            key.clone(),
            (
                object::namespace(obj).to_owned(),
                object::name(obj).to_owned(),
            ),
        );
        let uid = object::uid(obj);
        if self.by_uid.get(uid) == Some(&loc) {
            self.by_uid.remove(uid);
        }
        for owner in object::owner_uids(obj) {
            if let Some(set) = self.dependents.get_mut(&owner) {
                set.remove(&loc);
                if set.is_empty() {
                    self.dependents.remove(&owner);
                }
            }
        }
    }

    /// The latest resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    /// One object.
    pub fn get(&self, key: &StoreKey, ns: &str, name: &str) -> Option<&Value> {
        self.get_shared(key, ns, name).map(|s| &s.value)
    }

    /// An object as stored, shared (not copied).
    pub fn get_shared(&self, key: &StoreKey, ns: &str, name: &str) -> Option<&Arc<Stored>> {
        self.objects
            .get(key)?
            .get(&(ns.to_owned(), name.to_owned()))
    }

    /// Objects in key order, in one namespace if given, starting after `after` if given.
    pub fn list<'a>(
        &'a self,
        key: &StoreKey,
        ns: Option<&'a str>,
        after: Option<&ObjKey>,
    ) -> impl Iterator<Item = (&'a ObjKey, &'a Value)> + 'a {
        self.list_shared(key, ns, after).map(|(k, s)| (k, &s.value))
    }

    /// [`Store::list`], the objects shared (for serving without a copy).
    pub fn list_shared<'a>(
        &'a self,
        key: &StoreKey,
        ns: Option<&'a str>,
        after: Option<&ObjKey>,
    ) -> impl Iterator<Item = (&'a ObjKey, &'a Arc<Stored>)> + 'a {
        let range = self.objects.get(key).map(|m| match after {
            Some(a) => m.range::<ObjKey, _>((
                std::ops::Bound::Excluded(a.clone()),
                std::ops::Bound::Unbounded,
            )),
            None => m.range::<ObjKey, _>(..),
        });
        range
            .into_iter()
            .flatten()
            .filter(move |((obj_ns, _), _)| ns.is_none_or(|n| n == obj_ns))
    }

    /// Objects as they were at resourceVersion `rv`, in key order, in one namespace if given,
    /// after `after` if given: the current ones with every later write undone from the watch
    /// history. [`Expired`] if the history no longer reaches back to `rv`.
    pub fn list_at(
        &self,
        key: &StoreKey,
        ns: Option<&str>,
        after: Option<&ObjKey>,
        rv: u64,
    ) -> Result<Vec<(ObjKey, Arc<Stored>)>, Expired> {
        let in_ns = |k: &ObjKey| ns.is_none_or(|n| n == k.0);
        let mut state: BTreeMap<ObjKey, Arc<Stored>> = self
            .list_shared(key, ns, None)
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect();
        if let Some(log) = self.logs.get(key) {
            if rv < log.oldest_valid {
                return Err(Expired {
                    requested: rv,
                    oldest: log.oldest_valid,
                });
            }
            for ev in log.events.iter().rev().take_while(|e| e.rv > rv) {
                let k = (
                    object::namespace(&ev.object).to_owned(),
                    object::name(&ev.object).to_owned(),
                );
                if !in_ns(&k) {
                    continue;
                }
                match (ev.kind, &ev.old) {
                    (EventType::Added, _) => {
                        state.remove(&k);
                    }
                    (_, Some(old)) => {
                        state.insert(k, Arc::clone(old));
                    }
                    (_, None) => {}
                }
            }
        }
        Ok(state
            .into_iter()
            .filter(|(k, _)| after.is_none_or(|a| k > a))
            .collect())
    }

    /// Number of objects of a resource in a namespace (all namespaces if `None`).
    pub fn count(&self, key: &StoreKey, ns: Option<&str>) -> usize {
        self.list(key, ns, None).count()
    }

    /// Every resource that has objects in namespace `ns`.
    pub fn keys_with_objects_in(&self, ns: &str) -> Vec<StoreKey> {
        self.objects
            .iter()
            .filter(|(_, m)| m.keys().any(|(n, _)| n == ns))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Write an object (create if `old` is `None`), stamping the next resourceVersion. Returns
    /// the stored object. `old` (the version replaced, for watchers) is shared, not copied.
    pub fn put(&mut self, key: &StoreKey, mut obj: Value, old: Option<Arc<Stored>>) -> Arc<Stored> {
        self.rv += 1;
        object::set_meta(&mut obj, "resourceVersion", json!(self.rv.to_string()));
        let k = (
            object::namespace(&obj).to_owned(),
            object::name(&obj).to_owned(),
        );
        let stored = Stored::new(obj);
        let replaced = self
            .objects
            .entry(key.clone())
            .or_default()
            .insert(k, Arc::clone(&stored));
        if let Some(prev) = &replaced {
            self.unindex(key, prev);
        }
        self.index(key, &stored);
        let kind = if old.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(key, kind, Arc::clone(&stored), old);
        stored
    }

    /// Remove an object, stamping its last state with the next resourceVersion. Returns that
    /// state.
    pub fn remove(&mut self, key: &StoreKey, ns: &str, name: &str) -> Option<Value> {
        let old = self
            .objects
            .get_mut(key)?
            .remove(&(ns.to_owned(), name.to_owned()))?;
        self.unindex(key, &old);
        self.rv += 1;
        let mut last = old.value.clone();
        object::set_meta(&mut last, "resourceVersion", json!(self.rv.to_string()));
        self.record(
            key,
            EventType::Deleted,
            Stored::new(last.clone()),
            Some(old),
        );
        Some(last)
    }

    /// Remove every object of a resource (its type went away), recording deletes.
    pub fn remove_all(&mut self, key: &StoreKey) -> Vec<Value> {
        let keys: Vec<ObjKey> = self
            .objects
            .get(key)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        keys.iter()
            .filter_map(|(ns, name)| self.remove(key, ns, name))
            .collect()
    }

    fn record(
        &mut self,
        key: &StoreKey,
        kind: EventType,
        object: Arc<Stored>,
        old: Option<Arc<Stored>>,
    ) {
        let limit = self.history_limit;
        let log = self.logs.entry(key.clone()).or_insert_with(WatchLog::new);
        let event = Arc::new(StoredEvent::new(kind, self.rv, object, old));
        log.events.push_back(event.clone());
        while log.events.len() > limit {
            if let Some(dropped) = log.events.pop_front() {
                log.oldest_valid = dropped.rv;
            }
        }
        log.tx.send(event);
    }

    /// Start watching a resource after resourceVersion `from`.
    pub fn subscribe(&mut self, key: &StoreKey, from: u64) -> Result<Subscription, Expired> {
        let log = self.logs.entry(key.clone()).or_insert_with(WatchLog::new);
        if from < log.oldest_valid {
            return Err(Expired {
                requested: from,
                oldest: log.oldest_valid,
            });
        }
        Ok(Subscription {
            backlog: log.events.iter().filter(|e| e.rv > from).cloned().collect(),
            rx: log.tx.subscribe(),
        })
    }

    /// Drop all watch history, as an etcd compaction would: watches from any version before the
    /// current one get 410 Expired.
    pub fn compact(&mut self) {
        self.compact_to(self.rv);
    }

    /// Drop the watch history up to `rv` (an etcd compaction to that revision): watches from
    /// older versions get 410 Expired.
    pub fn compact_to(&mut self, rv: u64) {
        for log in self.logs.values_mut() {
            while log.events.front().is_some_and(|e| e.rv <= rv) {
                log.events.pop_front();
            }
            log.oldest_valid = log.oldest_valid.max(rv);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> StoreKey {
        StoreKey::new("", "configmaps")
    }

    fn cm(ns: &str, name: &str) -> Value {
        json!({"metadata": {"namespace": ns, "name": name}})
    }

    #[test]
    fn every_write_gets_the_next_version() {
        let mut s = Store::new(10);
        let a = s.put(&key(), cm("d", "a"), None);
        let b = s.put(&StoreKey::new("", "pods"), cm("d", "b"), None);
        assert_eq!(object::resource_version(&a), "1");
        assert_eq!(object::resource_version(&b), "2");
        let gone = s.remove(&key(), "d", "a").unwrap();
        assert_eq!(object::resource_version(&gone), "3");
        assert_eq!(s.current_rv(), 3);
        assert!(s.get(&key(), "d", "a").is_none());
    }

    #[test]
    fn lists_in_key_order_with_namespace_and_start() {
        let mut s = Store::new(10);
        for (ns, n) in [("b", "x"), ("a", "z"), ("a", "y")] {
            s.put(&key(), cm(ns, n), None);
        }
        let names: Vec<_> = s.list(&key(), None, None).map(|(k, _)| k.clone()).collect();
        assert_eq!(
            names,
            vec![
                ("a".into(), "y".into()),
                ("a".into(), "z".into()),
                ("b".into(), "x".into())
            ]
        );
        assert_eq!(s.list(&key(), Some("a"), None).count(), 2);
        let after = ("a".to_owned(), "y".to_owned());
        assert_eq!(s.list(&key(), None, Some(&after)).count(), 2);
    }

    #[test]
    fn history_is_bounded_and_expires() {
        let mut s = Store::new(2);
        for n in ["a", "b", "c"] {
            s.put(&key(), cm("d", n), None);
        }
        assert_eq!(s.subscribe(&key(), 0).unwrap_err().oldest, 1);
        let sub = s.subscribe(&key(), 1).unwrap();
        assert_eq!(
            sub.backlog.iter().map(|e| e.rv).collect::<Vec<_>>(),
            vec![2, 3]
        );
        s.compact();
        assert!(s.subscribe(&key(), 2).is_err());
        assert!(s.subscribe(&key(), 3).unwrap().backlog.is_empty());
    }

    #[test]
    fn owner_references_are_indexed() {
        let mut s = Store::new(10);
        let owner = json!({"metadata": {"namespace": "d", "name": "o", "uid": "u-o"}});
        let dep = json!({"metadata": {"namespace": "d", "name": "x", "uid": "u-x",
            "ownerReferences": [{"uid": "u-o"}]}});
        s.put(&key(), owner, None);
        let stored = s.put(&key(), dep, None);
        assert_eq!(s.dependents_of("u-o").len(), 1);
        assert_eq!(object::name(s.get_by_uid("u-x").unwrap()), "x");
        let mut orphan = stored.value.clone();
        object::set_meta(&mut orphan, "ownerReferences", Value::Null);
        s.put(&key(), orphan, Some(stored));
        assert!(s.dependents_of("u-o").is_empty());
        s.remove(&key(), "d", "x");
        assert!(s.get_by_uid("u-x").is_none());
    }

    #[test]
    fn lists_at_an_older_version_undo_later_writes() {
        let mut s = Store::new(3);
        s.put(&key(), cm("d", "a"), None);
        let at = s.current_rv();
        let b = s.put(&key(), cm("d", "b"), None);
        let mut changed = b.value.clone();
        changed["data"] = json!({"x": "1"});
        s.put(&key(), changed, Some(b));
        s.remove(&key(), "d", "a");
        let names =
            |v: Vec<(ObjKey, Arc<Stored>)>| v.into_iter().map(|(k, _)| k.1).collect::<Vec<_>>();
        assert_eq!(names(s.list_at(&key(), None, None, at).unwrap()), ["a"]);
        let after = ("d".to_owned(), "a".to_owned());
        assert!(
            s.list_at(&key(), None, Some(&after), at)
                .unwrap()
                .is_empty()
        );
        // One more write pushes the first write's successor out of the 3-event history.
        s.put(&key(), cm("d", "c"), None);
        assert!(s.list_at(&key(), None, None, at).is_err());
    }

    #[tokio::test]
    async fn subscribers_receive_later_writes() {
        let mut s = Store::new(10);
        let mut sub = s.subscribe(&key(), 0).unwrap();
        s.put(&key(), cm("d", "a"), None);
        assert!(sub.rx.changed().await);
        let mut got = VecDeque::new();
        sub.rx.take(&mut got).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].kind, EventType::Added);
        assert_eq!(got[0].rv, 1);
    }

    #[test]
    fn every_subscriber_shares_one_event_and_one_encoding() {
        let mut s = Store::new(10);
        let mut subs: Vec<_> = (0..3).map(|_| s.subscribe(&key(), 0).unwrap()).collect();
        s.put(&key(), cm("d", "a"), None);
        let mut events = Vec::new();
        for sub in &mut subs {
            let mut got = VecDeque::new();
            sub.rx.take(&mut got).unwrap();
            events.extend(got);
        }
        assert_eq!(events.len(), 3);
        assert!(events.iter().all(|e| Arc::ptr_eq(e, &events[0])));
        let mut encodings = 0;
        let bytes: Vec<_> = events
            .iter()
            .map(|e| {
                e.object.encoded.get_or_encode("v1", || {
                    encodings += 1;
                    b"{}".to_vec()
                })
            })
            .collect();
        assert_eq!(encodings, 1);
        assert!(bytes.iter().all(|b| Arc::ptr_eq(b, &bytes[0])));
        let other = events[0]
            .object
            .encoded
            .get_or_encode("v2", || b"[]".to_vec());
        assert_eq!(&*other, b"[]", "another version is encoded for itself");
    }
}
