//! Deletion: finalizers, preconditions, collections and namespace termination.
//!
//! Responsibility: DELETE of one object or a collection, and the namespace lifecycle. An object
//! with finalizers gets `deletionTimestamp` (and `generation + 1`) and stays until an update
//! removes its last finalizer; one without is removed at once. A deleted namespace turns
//! `Terminating`, everything in it is deleted (honouring finalizers), and it goes once empty —
//! what the namespace controller does, done synchronously.
//! Inputs: an [`Endpoint`], a name, `DeleteOptions`. Outputs: the object (when it stays, or for
//! custom resources) or a success `Status`, or an [`crate::error::ApiError`].

use serde_json::{Value, json};

use crate::convert::to_served;
use crate::error::{ApiResult, success_status};
use crate::object;
use crate::options::{ListOptions, WriteOptions};
use crate::registry::{ResourceDef, Special};
use crate::semantics::{DeleteAction, Preconditions, plan_delete};
use crate::state::{Endpoint, State, namespaces_key};

impl State {
    /// DELETE one object.
    pub fn delete(
        &mut self,
        ep: &Endpoint,
        name: &str,
        delete_options: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        let def = self.resolve(ep)?;
        let old = self.stored(&def, ep.namespace.as_deref().unwrap_or_default(), name)?;
        Preconditions::from_delete_options(delete_options).check(&def, &old)?;
        Ok(self.delete_object(&def, &ep.version, old, opts))
    }

    /// Delete a stored object according to its finalizers.
    fn delete_object(
        &mut self,
        def: &ResourceDef,
        version: &str,
        old: Value,
        opts: &WriteOptions,
    ) -> Value {
        let terminating_namespace = def.special == Special::Namespace;
        match plan_delete(&old, terminating_namespace) {
            DeleteAction::AlreadyDeleting => to_served(def, version, old),
            DeleteAction::MarkDeleting(mut marked) => {
                if opts.dry_run {
                    return to_served(def, version, marked);
                }
                if terminating_namespace {
                    object::set_path(&mut marked, ".status.phase", json!("Terminating"));
                }
                let stored = self.store.put(&def.store, marked, Some(old));
                self.after_write(def, object::namespace(&stored));
                if terminating_namespace {
                    let ns = object::name(&stored).to_owned();
                    self.empty_namespace(&ns);
                    let current = self.store.get(&def.store, "", &ns).cloned();
                    return to_served(def, version, current.unwrap_or(stored));
                }
                to_served(def, version, stored)
            }
            DeleteAction::Remove => {
                if opts.dry_run {
                    return to_served(def, version, old);
                }
                let (ns, name, uid) = (
                    object::namespace(&old).to_owned(),
                    object::name(&old).to_owned(),
                    object::uid(&old).to_owned(),
                );
                let last = self.remove(def, &ns, &name).unwrap_or(old);
                if def.custom {
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
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        let def = self.resolve(ep)?;
        let targets = self.matching(&def, ep, list)?;
        let mut items = Vec::new();
        for t in targets {
            let Ok(old) = self.stored(&def, object::namespace(&t), object::name(&t)) else {
                continue;
            };
            let result = self.delete_object(&def, &ep.version, old.clone(), opts);
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
            let Some(def) = self
                .registry
                .iter()
                .find(|d| d.store == key && d.group == key.group)
                .cloned()
            else {
                continue;
            };
            let objects: Vec<Value> = self
                .store
                .list(&key, Some(ns), None)
                .map(|(_, o)| o.clone())
                .collect();
            for old in objects {
                let version = def.preferred_version().to_owned();
                self.delete_object(&def, &version, old, &WriteOptions::default());
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
