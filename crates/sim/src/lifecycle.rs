//! Deletion: finalizers, grace periods, propagation, collections and namespace termination.
//!
//! Responsibility: DELETE of one object or a collection, and the namespace lifecycle. An object
//! with finalizers gets `deletionTimestamp` (and `generation + 1`) and stays until an update
//! removes its last finalizer; one without is removed at once. A bound, unfinished pod deleted
//! with a grace period gets `deletionTimestamp` (now + grace) and `deletionGracePeriodSeconds`
//! and stays until a delete with a shorter period (the kubelet's, with 0) removes it, or the
//! server's timer does when the period is over ([`crate::sim`]). Foreground and orphan
//! propagation of an object with dependents hand over to [`crate::gc`]; removal of any object
//! triggers the background collection of its dependents. A deleted namespace turns
//! `Terminating`, everything in it is deleted (honouring finalizers), and it goes once empty —
//! what the namespace controller does, done synchronously.
//! Inputs: an [`Endpoint`], a name, [`DeleteOptions`]. Outputs: the object as marked for
//! deletion (when it was marked, whatever the synchronous garbage collection did next), the
//! removed object (custom resources, and pods, with `deletionTimestamp` and grace period 0),
//! or a success `Status`; or an [`crate::error::ApiError`]. Graceful deletions queue a
//! [`Reap`] for the server's timer.

use std::time::Duration;

use serde_json::{Value, json};

use crate::convert::{served, to_served};
use crate::deletion::{DeleteAction, DeleteOptions, Propagation, grace_period, plan_delete};
use crate::error::{ApiResult, success_status};
use crate::object;
use crate::options::{ListOptions, WriteOptions};
use crate::registry::{ResourceDef, Special, StoreKey};
use crate::state::{Endpoint, State, namespaces_key};
use crate::store::Stored;

/// A graceful deletion whose period runs out: the object (if it is still this one) is then
/// deleted with grace period 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reap {
    /// Where it is stored.
    pub key: StoreKey,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
    /// When, from now.
    pub after: Duration,
}

impl State {
    /// DELETE one object.
    pub fn delete(
        &mut self,
        ep: &Endpoint,
        name: &str,
        options: &DeleteOptions,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        let def = self.resolve(ep)?;
        let old = self.stored(&def, ep.namespace.as_deref().unwrap_or_default(), name)?;
        options.preconditions.check(&def, &old)?;
        let opts = WriteOptions {
            dry_run: opts.dry_run || options.dry_run,
            ..opts.clone()
        };
        Ok(self.delete_object(&def, &ep.version, old, options, &opts))
    }

    /// The end of a graceful deletion: delete the object with grace period 0 if it is still
    /// the same one.
    pub fn reap(&mut self, reap: &Reap) {
        let Some(old) = self
            .store
            .get(&reap.key, &reap.namespace, &reap.name)
            .cloned()
        else {
            return;
        };
        if object::uid(&old) != reap.uid || !object::is_deleting(&old) {
            return;
        }
        let Some(def) = self.def_for_store(&reap.key) else {
            return;
        };
        let version = def.preferred_version().to_owned();
        let now = DeleteOptions {
            grace_period_seconds: Some(0),
            ..DeleteOptions::default()
        };
        self.delete_object(&def, &version, old, &now, &WriteOptions::default());
    }

    fn queue_reap(&mut self, def: &ResourceDef, obj: &Value, grace: i64) {
        if grace <= 0 {
            return;
        }
        self.reaps.push(Reap {
            key: def.store.clone(),
            namespace: object::namespace(obj).to_owned(),
            name: object::name(obj).to_owned(),
            uid: object::uid(obj).to_owned(),
            after: Duration::from_secs(grace.unsigned_abs()),
        });
    }

    /// Delete a stored object according to its finalizers, grace period and the propagation
    /// policy.
    pub fn delete_object(
        &mut self,
        def: &ResourceDef,
        version: &str,
        old: Value,
        options: &DeleteOptions,
        opts: &WriteOptions,
    ) -> Value {
        let terminating_namespace = def.special == Special::Namespace;
        let grace = grace_period(def, &old, options.grace_period_seconds);
        let uid = object::uid(&old).to_owned();
        let propagation = options.propagation.unwrap_or(Propagation::Background);
        let gc_finalizer = if self.store.dependents_of(&uid).is_empty() {
            None
        } else {
            propagation.finalizer()
        };
        match plan_delete(&old, grace, gc_finalizer, terminating_namespace) {
            DeleteAction::AlreadyDeleting => to_served(def, version, old),
            DeleteAction::Shorten(shorter) => {
                if opts.dry_run {
                    return to_served(def, version, shorter);
                }
                let stored = self.store.put(&def.store, shorter, Some(Stored::new(old)));
                self.after_write(def, object::namespace(&stored));
                self.queue_reap(def, &stored, grace);
                served(def, version, &stored).into_owned()
            }
            DeleteAction::MarkDeleting(mut marked) => {
                if opts.dry_run {
                    return to_served(def, version, marked);
                }
                if terminating_namespace {
                    object::set_path(&mut marked, ".status.phase", json!("Terminating"));
                }
                let stored = self.store.put(&def.store, marked, Some(Stored::new(old)));
                self.after_write(def, object::namespace(&stored));
                self.queue_reap(def, &stored, grace);
                if terminating_namespace {
                    let ns = object::name(&stored).to_owned();
                    self.empty_namespace(&ns);
                }
                match (gc_finalizer.is_some(), propagation) {
                    (true, Propagation::Foreground) => self.delete_dependents_in_foreground(&uid),
                    (true, Propagation::Orphan) => self.orphan_dependents(&uid),
                    _ => {}
                }
                // The answer is the object as marked, whatever the garbage collector did next
                // (kube-controller-manager's runs later).
                served(def, version, &stored).into_owned()
            }
            DeleteAction::Remove => {
                if opts.dry_run {
                    return to_served(def, version, old);
                }
                let (ns, name) = (
                    object::namespace(&old).to_owned(),
                    object::name(&old).to_owned(),
                );
                let mut last = self.remove(def, &ns, &name).unwrap_or(old);
                if def.special == Special::Pod {
                    // Pods are deleted "gracefully" with period 0: the answer is the pod as
                    // marked for that deletion.
                    let meta = object::metadata_mut(&mut last);
                    meta.insert("deletionTimestamp".into(), json!(object::now_rfc3339()));
                    meta.insert("deletionGracePeriodSeconds".into(), json!(0));
                    to_served(def, version, last)
                } else if def.custom {
                    to_served(def, version, last)
                } else {
                    success_status(&def.group_resource(), &name, &uid)
                }
            }
        }
    }

    /// DELETE a collection: every object matching the list options.
    pub fn delete_collection(
        &mut self,
        ep: &Endpoint,
        list: &ListOptions,
        options: &DeleteOptions,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        let opts = &WriteOptions {
            dry_run: opts.dry_run || options.dry_run,
            ..opts.clone()
        };
        let def = self.resolve(ep)?;
        let targets = self.matching(&def, ep, list)?;
        let mut items = Vec::new();
        for t in targets {
            let Ok(old) = self.stored(&def, object::namespace(&t), object::name(&t)) else {
                continue;
            };
            let result = self.delete_object(&def, &ep.version, old.clone(), options, opts);
            items.push(if result.get("kind") == Some(&json!("Status")) {
                to_served(&def, &ep.version, old)
            } else {
                result
            });
        }
        Ok(json!({
            "kind": format!("{}List", def.kind),
            "apiVersion": def.api_version(&ep.version),
            "metadata": {"resourceVersion": self.store.current_rv().to_string()},
            "items": items,
        }))
    }

    /// Delete everything in a terminating namespace, then the namespace if nothing is left.
    fn empty_namespace(&mut self, ns: &str) {
        for key in self.store.keys_with_objects_in(ns) {
            let Some(def) = self.def_for_store(&key) else {
                continue;
            };
            let objects: Vec<Value> = self
                .store
                .list(&key, Some(ns), None)
                .map(|(_, o)| o.clone())
                .collect();
            for old in objects {
                let version = def.preferred_version().to_owned();
                self.delete_object(
                    &def,
                    &version,
                    old,
                    &DeleteOptions::default(),
                    &WriteOptions::default(),
                );
            }
        }
        self.finish_namespace_if_empty(ns);
    }

    /// Remove a terminating namespace that has no objects left.
    pub fn finish_namespace_if_empty(&mut self, ns: &str) {
        let key = namespaces_key();
        let terminating = self
            .store
            .get(&key, "", ns)
            .is_some_and(|n| object::is_deleting(n) && object::finalizers(n).is_empty());
        if terminating && self.store.keys_with_objects_in(ns).is_empty() {
            self.store.remove(&key, "", ns);
        }
    }
}
