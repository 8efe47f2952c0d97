//! The `pods/<name>/eviction` subresource and keeping PodDisruptionBudget status current.
//!
//! Responsibility: POST of a `policy/v1` Eviction, as kube-apiserver's eviction REST does it:
//! pods that are not running (Pending, Succeeded, Failed) or already deleting are deleted
//! directly; otherwise the one PodDisruptionBudget selecting the pod (more than one is a 500)
//! must allow a disruption, else 429 TooManyRequests with a `DisruptionBudget` cause; an
//! allowed eviction records the pod in the budget's `disruptedPods`, lowers
//! `disruptionsAllowed` and deletes the pod. Unready pods may be evicted when the budget is
//! healthy (`unhealthyPodEvictionPolicy: IfHealthyBudget`, the default) or always
//! (`AlwaysAllow`). After every write to pods or budgets, the budgets of that namespace get
//! their status recomputed ([`crate::pdb`]), as the disruption controller would.
//! Inputs: an [`Endpoint`], a pod name, the Eviction body. Outputs: a success `Status` or an
//! [`ApiError`].

use serde_json::{Value, json};

use crate::deletion::{DeleteOptions, Preconditions};
use crate::error::{ApiError, ApiResult, GroupResource};
use crate::object;
use crate::options::WriteOptions;
use crate::pdb;
use crate::registry::{ResourceDef, Special};
use crate::state::{Endpoint, State};
use crate::store::Stored;

fn pdb_key() -> GroupResource {
    GroupResource::new("policy", "poddisruptionbudgets")
}

fn pods_key() -> GroupResource {
    GroupResource::new("", "pods")
}

impl State {
    /// POST `pods/<name>/eviction`.
    pub fn evict(
        &mut self,
        ep: &Endpoint,
        name: &str,
        eviction: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        let def = self.resolve(ep)?;
        if def.special != Special::Pod {
            return Err(ApiError::NoRoute);
        }
        let body_name = object::name(eviction);
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::BadRequest(
                "name in URL does not match name in Eviction object".into(),
            ));
        }
        let ns = ep.namespace.clone().unwrap_or_default();
        let pod = self.stored(&def, &ns, name)?;
        let delete_options = eviction.get("deleteOptions").cloned().unwrap_or(json!({}));
        Preconditions::from_delete_options(&delete_options).check(&def, &pod)?;
        let phase = object::get_path(&pod, ".status.phase")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let not_running = matches!(phase, "Pending" | "Succeeded" | "Failed" | "");
        if not_running || object::is_deleting(&pod) {
            return self.evict_now(&def, ep, name, &delete_options, opts);
        }
        let budgets: Vec<Value> = self
            .store
            .list(&pdb_key(), Some(&ns), None)
            .map(|(_, b)| b.clone())
            .filter(|b| pdb::selector_matches(b.get("spec").and_then(|s| s.get("selector")), &pod))
            .collect();
        let budget = match budgets.as_slice() {
            [] => return self.evict_now(&def, ep, name, &delete_options, opts),
            [one] => one.clone(),
            _ => {
                return Err(ApiError::Unclassified(
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.".into(),
                ));
            }
        };
        let status = budget.get("status").cloned().unwrap_or(json!({}));
        let int = |k: &str| status.get(k).and_then(Value::as_i64).unwrap_or(0);
        let always = object::get_path(&budget, ".spec.unhealthyPodEvictionPolicy")
            .and_then(Value::as_str)
            == Some("AlwaysAllow");
        if !pdb::healthy(&pod) && (always || int("currentHealthy") >= int("desiredHealthy")) {
            return self.evict_now(&def, ep, name, &delete_options, opts);
        }
        let stale = int("observedGeneration") < object::generation(&budget);
        if stale || int("disruptionsAllowed") <= 0 {
            let budget_name = object::name(&budget);
            return Err(ApiError::TooManyRequests {
                message: "Cannot evict pod as it would violate the pod's disruption budget.".into(),
                causes: vec![(
                    "DisruptionBudget".into(),
                    format!(
                        "The disruption budget {budget_name} needs {} healthy pods and has {} currently",
                        int("desiredHealthy"),
                        int("currentHealthy")
                    ),
                )],
            });
        }
        if !opts.dry_run {
            let mut updated = budget.clone();
            let st = object::as_map(
                object::as_map(&mut updated)
                    .entry("status")
                    .or_insert(json!({})),
            );
            st.insert(
                "disruptionsAllowed".into(),
                json!(int("disruptionsAllowed") - 1),
            );
            let disrupted = object::as_map(st.entry("disruptedPods").or_insert(json!({})));
            disrupted.insert(name.to_owned(), json!(object::now_rfc3339()));
            self.store
                .put(&pdb_key(), updated, Some(Stored::new(budget)));
        }
        self.evict_now(&def, ep, name, &delete_options, opts)
    }

    fn evict_now(
        &mut self,
        def: &ResourceDef,
        ep: &Endpoint,
        name: &str,
        delete_options: &Value,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        let pod_ep = Endpoint {
            version: def.preferred_version().to_owned(),
            ..ep.clone()
        };
        self.delete(
            &pod_ep,
            name,
            &DeleteOptions::from_body(delete_options)?,
            opts,
        )?;
        Ok(
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        )
    }

    /// Recompute the status of every budget in a namespace after pods or budgets changed.
    pub fn refresh_budgets(&mut self, ns: &str) {
        let budgets: Vec<Value> = self
            .store
            .list(&pdb_key(), Some(ns), None)
            .map(|(_, b)| b.clone())
            .collect();
        if budgets.is_empty() {
            return;
        }
        let pods: Vec<Value> = self
            .store
            .list(&pods_key(), Some(ns), None)
            .map(|(_, p)| p.clone())
            .collect();
        let refs: Vec<&Value> = pods.iter().collect();
        // A controller's desired scale: its `spec.replicas`, or its own controller's for a
        // ReplicaSet owned by a Deployment (as the disruption controller's finders).
        let scale_of = |uid: &str| -> Option<i64> {
            let controller = self.store.get_by_uid(uid)?;
            let replicas = object::get_path(controller, ".spec.replicas").and_then(Value::as_i64);
            let is_rs = controller.get("kind").and_then(Value::as_str) == Some("ReplicaSet");
            match pdb::controller_uid(controller).and_then(|u| self.store.get_by_uid(u)) {
                Some(owner) if is_rs => {
                    object::get_path(owner, ".spec.replicas").and_then(Value::as_i64)
                }
                _ => replicas,
            }
        };
        let computed: Vec<(Value, Value)> = budgets
            .into_iter()
            .map(|b| {
                let status = pdb::status(&b, &refs, b.get("status"), &scale_of);
                (b, status)
            })
            .collect();
        for (budget, status) in computed {
            let unchanged = budget.get("status").is_some_and(|old| {
                let strip = |v: &Value| {
                    let mut v = v.clone();
                    if let Some(cs) = v.get_mut("conditions").and_then(Value::as_array_mut) {
                        for c in cs {
                            object::as_map(c).remove("lastTransitionTime");
                        }
                    }
                    v
                };
                strip(old) == strip(&status)
            });
            if !unchanged {
                let mut updated = budget.clone();
                object::as_map(&mut updated).insert("status".into(), status);
                self.store
                    .put(&pdb_key(), updated, Some(Stored::new(budget)));
            }
        }
    }
}
