//! The garbage collector: ownerReference cascades, done synchronously inside the API operation
//! that triggers them (as [`crate::lifecycle`] does for namespaces).
//!
//! Responsibility, following kube-controller-manager's garbage collector:
//! - **background** (the default): when an owner is removed, each dependent whose other owners
//!   are all gone (or waiting for their own foreground deletion) is deleted (honouring its
//!   finalizers and grace period); a dependent that still has a live owner only loses its
//!   references to owners that no longer exist;
//! - **foreground**: the owner carries `foregroundDeletion` and its deletionTimestamp while its
//!   dependents are deleted (those with dependents of their own in foreground too); it goes when
//!   no dependent with `blockOwnerDeletion: true` is left (checked again whenever a dependent is
//!   removed or drops its reference);
//! - **orphan**: the owner carries `orphan` while its references are removed from every
//!   dependent, then goes.
//!
//! Inputs: the locked [`State`] and the uid of the owner or dependent that changed. Outputs:
//! writes to the store (each recorded as a watch event).
//! Approximations: objects whose owners never existed are kept (the real collector deletes them
//! after a lookup; tests often use made-up owners); the owner reference's kind and apiVersion are
//! not checked against the uid's object; changing the propagation of an already-deleting object
//! does nothing.

use serde_json::{Value, json};

use crate::deletion::{
    DeleteOptions, FOREGROUND_FINALIZER, ORPHAN_FINALIZER, Propagation, current_grace,
};
use crate::object;
use crate::options::WriteOptions;
use crate::registry::{ResourceDef, StoreKey};
use crate::state::State;
use crate::store::{Location, Stored};

/// Whether an owner is waiting for its dependents (deleting in the foreground).
fn waiting(owner: &Value) -> bool {
    object::is_deleting(owner)
        && object::finalizers(owner)
            .iter()
            .any(|f| f == FOREGROUND_FINALIZER)
}

/// Whether `dependent` has a reference to `owner_uid` that blocks the owner's deletion.
fn blocks(dependent: &Value, owner_uid: &str) -> bool {
    object::owner_refs(dependent).iter().any(|r| {
        r.get("uid").and_then(Value::as_str) == Some(owner_uid)
            && r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
    })
}

impl State {
    /// The resource type whose objects are stored under `key`.
    pub fn def_for_store(&self, key: &StoreKey) -> Option<std::sync::Arc<ResourceDef>> {
        self.registry
            .iter_shared()
            .find(|d| &d.store == key && d.group == key.group)
            .or_else(|| self.registry.iter_shared().find(|d| &d.store == key))
            .cloned()
    }

    fn located(&self, loc: &Location) -> Option<Value> {
        let (key, (ns, name)) = loc;
        self.store.get(key, ns, name).cloned()
    }

    /// Owners of `dependent` (other than `except`) that exist and are not waiting for their
    /// dependents.
    fn solid_owners(&self, dependent: &Value, except: &str) -> usize {
        object::owner_uids(dependent)
            .iter()
            .filter(|u| u.as_str() != except)
            .filter(|u| self.store.get_by_uid(u).is_some_and(|o| !waiting(o)))
            .count()
    }

    /// Delete a dependent on the collector's behalf.
    fn collect(&mut self, key: &StoreKey, dependent: Value, propagation: Propagation) {
        let Some(def) = self.def_for_store(key) else {
            return;
        };
        let version = def.preferred_version().to_owned();
        let options = DeleteOptions {
            propagation: Some(propagation),
            ..DeleteOptions::default()
        };
        self.delete_object(
            &def,
            &version,
            dependent,
            &options,
            &WriteOptions::default(),
        );
    }

    /// The owner uids of `dependent` for which `pick` holds.
    fn refs_where(&self, dependent: &Value, pick: impl Fn(&Self, &str) -> bool) -> Vec<String> {
        object::owner_uids(dependent)
            .into_iter()
            .filter(|u| pick(self, u))
            .collect()
    }

    /// Remove the references to `uids` from a dependent; then owners that were waiting for it
    /// may go.
    fn drop_refs(&mut self, key: &StoreKey, dependent: Value, uids: &[String]) {
        let refs = object::owner_refs(&dependent);
        let (gone, kept): (Vec<Value>, Vec<Value>) = refs.into_iter().partition(|r| {
            let uid = r.get("uid").and_then(Value::as_str).unwrap_or_default();
            uids.iter().any(|u| u == uid)
        });
        if gone.is_empty() {
            return;
        }
        let mut new = dependent.clone();
        object::set_meta(
            &mut new,
            "ownerReferences",
            if kept.is_empty() {
                Value::Null
            } else {
                json!(kept)
            },
        );
        self.store.put(key, new, Some(Stored::new(dependent)));
        for r in gone {
            if let Some(uid) = r.get("uid").and_then(Value::as_str) {
                self.finish_foreground(uid);
            }
        }
    }

    /// An owner was removed: delete the dependents it leaves without owners, and drop the
    /// dangling references of those that keep one.
    pub fn owner_removed(&mut self, owner_uid: &str) {
        for loc in self.store.dependents_of(owner_uid) {
            let Some(dependent) = self.located(&loc) else {
                continue;
            };
            if self.solid_owners(&dependent, owner_uid) > 0 {
                let uids = self.refs_where(&dependent, |st, uid| {
                    uid == owner_uid || st.store.get_by_uid(uid).is_none()
                });
                self.drop_refs(&loc.0, dependent, &uids);
                continue;
            }
            let any_waiting = object::owner_uids(&dependent)
                .iter()
                .any(|u| self.store.get_by_uid(u).is_some_and(waiting));
            let has_own = !self.store.dependents_of(object::uid(&dependent)).is_empty();
            let policy = if any_waiting && has_own {
                Propagation::Foreground
            } else {
                Propagation::Background
            };
            if !object::is_deleting(&dependent) {
                self.collect(&loc.0, dependent, policy);
            }
        }
    }

    /// A dependent was removed (or dropped references): owners waiting for it may go.
    pub fn dependent_removed(&mut self, dependent: &Value) {
        for uid in object::owner_uids(dependent) {
            self.finish_foreground(&uid);
        }
    }

    /// An owner was just marked for foreground deletion: delete its dependents, then let it go
    /// if nothing blocks it.
    pub fn delete_dependents_in_foreground(&mut self, owner_uid: &str) {
        for loc in self.store.dependents_of(owner_uid) {
            let Some(dependent) = self.located(&loc) else {
                continue;
            };
            if object::is_deleting(&dependent) {
                continue;
            }
            if self.solid_owners(&dependent, owner_uid) > 0 {
                let uids = self.refs_where(&dependent, |st, uid| {
                    uid == owner_uid || st.store.get_by_uid(uid).is_none_or(waiting)
                });
                self.drop_refs(&loc.0, dependent, &uids);
                continue;
            }
            let has_own = !self.store.dependents_of(object::uid(&dependent)).is_empty();
            let policy = if has_own {
                Propagation::Foreground
            } else {
                Propagation::Background
            };
            self.collect(&loc.0, dependent, policy);
        }
        self.finish_foreground(owner_uid);
    }

    /// An owner was just marked for orphaning: drop its references from every dependent, then
    /// let it go.
    pub fn orphan_dependents(&mut self, owner_uid: &str) {
        for loc in self.store.dependents_of(owner_uid) {
            if let Some(dependent) = self.located(&loc) {
                self.drop_refs(&loc.0, dependent, &[owner_uid.to_owned()]);
            }
        }
        self.release(owner_uid, ORPHAN_FINALIZER);
    }

    /// Remove `foregroundDeletion` from a waiting owner once no dependent blocks it.
    fn finish_foreground(&mut self, owner_uid: &str) {
        let Some(owner) = self.store.get_by_uid(owner_uid) else {
            return;
        };
        if !waiting(owner) {
            return;
        }
        let blocked = self
            .store
            .dependents_of(owner_uid)
            .iter()
            .filter_map(|loc| self.located(loc))
            .any(|d| blocks(&d, owner_uid));
        if !blocked {
            self.release(owner_uid, FOREGROUND_FINALIZER);
        }
    }

    /// Remove one of the collector's finalizers from a deleting object; it goes if that was the
    /// last one and no grace period runs.
    fn release(&mut self, uid: &str, finalizer: &str) {
        let Some((key, (ns, name))) = self.store.locate(uid).cloned() else {
            return;
        };
        let Some(old) = self.store.get(&key, &ns, &name).cloned() else {
            return;
        };
        let finalizers: Vec<String> = object::finalizers(&old)
            .into_iter()
            .filter(|f| f != finalizer)
            .collect();
        if finalizers.len() == object::finalizers(&old).len() {
            return;
        }
        if finalizers.is_empty() && current_grace(&old) == 0 {
            if let Some(def) = self.def_for_store(&key) {
                self.remove(&def, &ns, &name);
            }
            return;
        }
        let mut new = old.clone();
        object::set_meta(
            &mut new,
            "finalizers",
            if finalizers.is_empty() {
                Value::Null
            } else {
                json!(finalizers)
            },
        );
        self.store.put(&key, new, Some(Stored::new(old)));
    }
}
