//! The MachineSet controller (management cluster), simplified.
//!
//! Responsibility: keep each MachineSet's Machines (those whose controller owner reference is
//! the set) at `spec.replicas`, counting Machines that are being deleted as CAPI does (so a
//! deleted Machine is replaced only once it is gone). New Machines (`v1beta2`) get
//! `generateName: <set>-`, the template's labels and annotations plus
//! `cluster.x-k8s.io/set-name`, `deployment-name` and `cluster-name`, the template's spec with
//! `clusterName`, a controller owner reference to the set and the `machine.cluster.x-k8s.io`
//! finalizer — unless the set is annotated `cluster.x-k8s.io/disable-machine-create: "true"` (an
//! old MachineSet of an OnDelete rollout), which creates nothing. Scale-down deletes, in CAPI's
//! order: Machines deleting already (they count), annotated `cluster.x-k8s.io/delete-machine`,
//! unhealthy (no Node, `NodeHealthy` false), then by the set's deletion order
//! (`spec.deletion.order`: `Random`, the default, is by name in CAPI; `Newest`; `Oldest`), ties
//! by name. A scale-up waits while a preflight check fails ([`scaling::preflight_hold`]: sim's
//! knob on the set or its deployment): no Machine is created, scale-downs go on. v1beta2
//! status: `replicas`, `readyReplicas` (Machines whose `Ready` condition is true),
//! `availableReplicas` (`Available` true), `observedGeneration`, `selector`, the `ScalingUp`
//! condition, and under `deprecated.v1beta1` the deprecated counters (`fullyLabeledReplicas`,
//! `readyReplicas`, `availableReplicas`) and the `MachinesCreated` condition (see
//! [`scaling`]); other conditions are kept. A Machine a MachineHealthCheck marked for
//! remediation ([`super::health_checks`]) is deleted (and so replaced).
//! Inputs: MachineSets, their MachineDeployments (for the knob) and Machines (fresh lists,
//! v1beta2 through [`Capi`]). Outputs: Machine creates and deletes, MachineSet status patches.

use std::sync::Arc;

use api::well_known::capi as keys;
use serde_json::{Value, json};

use super::client::Capi;
use super::scaling;
use crate::WorldError;
use crate::driver::{PassResult, Reconciler};
use crate::objects::{
    self as o, annotations, condition, condition_true, controller_ref, controller_uid, labels,
    selector_string, string_map, text,
};
use sim::convert::capi::{CapiKind, CapiVersion};
use sim::object;

/// The finalizer CAPI's Machine controller puts on Machines.
pub const MACHINE_FINALIZER: &str = "machine.cluster.x-k8s.io";

/// The MachineSet controller.
pub struct Sets {
    capi: Arc<Capi>,
}

impl std::fmt::Debug for Sets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sets").finish_non_exhaustive()
    }
}

impl Sets {
    /// Over a management cluster's Cluster API.
    pub fn new(capi: Arc<Capi>) -> Self {
        Self { capi }
    }
}

/// Deletion priority of a Machine on scale-down, lower first: deleting already, marked
/// `delete-machine`, unhealthy (no Node yet, or `NodeHealthy` false), then the rest.
fn priority(machine: &Value) -> u8 {
    if object::is_deleting(machine) {
        0
    } else if annotations(machine).contains_key(keys::DELETE_MACHINE) {
        1
    } else if machine.pointer("/status/nodeRef").is_none()
        || condition(machine, "NodeHealthy")
            .and_then(|c| c.get("status"))
            .and_then(Value::as_str)
            == Some("False")
    {
        2
    } else {
        3
    }
}

/// The `n` Machines a scale-down removes, first first, by the MachineSet's deletion order
/// (v1beta2 `spec.deletion.order`, v1beta1 `spec.deletePolicy`): after the priorities, `Newest` takes
/// the newest, `Oldest` the oldest, and `Random` (the default) — a constant score in CAPI —
/// takes them by name; ties by name.
pub fn to_delete<'a>(machines: &[&'a Value], n: usize, order: &str) -> Vec<&'a Value> {
    let mut sorted = machines.to_vec();
    let created = |m: &Value| {
        text(m, ".metadata.creationTimestamp")
            .unwrap_or_default()
            .to_owned()
    };
    sorted.sort_by(|a, b| {
        let by_order = match order {
            "Newest" => created(b).cmp(&created(a)),
            "Oldest" => created(a).cmp(&created(b)),
            _ => std::cmp::Ordering::Equal,
        };
        priority(a)
            .cmp(&priority(b))
            .then(by_order)
            .then_with(|| object::name(a).cmp(object::name(b)))
    });
    sorted.into_iter().take(n).collect()
}

/// A MachineSet's deletion order.
fn order(ms: &Value) -> &str {
    text(ms, ".spec.deletion.order")
        .or_else(|| text(ms, ".spec.deletePolicy"))
        .unwrap_or("Random")
}

/// A new Machine for a set.
pub fn new_machine(ms: &Value) -> Value {
    let template = ms.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let mut machine_labels = string_map(&template, ".metadata.labels");
    machine_labels.insert(keys::SET_NAME.to_owned(), object::name(ms).to_owned());
    if let Some(md) = labels(ms).get(keys::DEPLOYMENT_NAME) {
        machine_labels.insert(keys::DEPLOYMENT_NAME.to_owned(), md.clone());
    }
    let cluster = text(ms, ".spec.clusterName").unwrap_or_default();
    machine_labels.insert(keys::CLUSTER_NAME.to_owned(), cluster.to_owned());
    let mut spec = template.get("spec").cloned().unwrap_or(json!({}));
    object::set_path(&mut spec, ".clusterName", json!(cluster));
    json!({
        "apiVersion": CapiVersion::V1beta2.api_version(),
        "kind": "Machine",
        "metadata": {
            "generateName": format!("{}-", object::name(ms)),
            "namespace": object::namespace(ms),
            "labels": machine_labels,
            "annotations": string_map(&template, ".metadata.annotations"),
            "ownerReferences": [controller_ref(ms)],
            "finalizers": [MACHINE_FINALIZER],
        },
        "spec": spec,
    })
}

/// Whether a MachineHealthCheck asks the owner to remediate `machine`
/// (`HealthCheckSucceeded` False, `OwnerRemediated` False and waiting).
fn awaits_remediation(machine: &Value) -> bool {
    let is = |kind: &str, status: &str| {
        condition(machine, kind)
            .and_then(|c| c.get("status"))
            .and_then(Value::as_str)
            == Some(status)
    };
    !object::is_deleting(machine)
        && is("HealthCheckSucceeded", "False")
        && is("OwnerRemediated", "False")
        && condition(machine, "OwnerRemediated")
            .and_then(|c| c.get("reason"))
            .and_then(Value::as_str)
            == Some("WaitingForRemediation")
}

impl Sets {
    /// Remediation as Cluster API's MachineSet does it: a Machine a MachineHealthCheck marked
    /// gets `OwnerRemediated` `MachineDeleting` and is deleted (the set then replaces it, its
    /// replicas unchanged). Not modelled: the MachineDeployment's `remediation.maxInFlight`,
    /// preflight checks, old MachineSets refusing (`CannotBeRemediated`).
    async fn remediate(&self, owned: &[&Value]) -> Result<(), WorldError> {
        for m in owned.iter().filter(|m| awaits_remediation(m)) {
            let mut all: Vec<Value> = m
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for c in &mut all {
                if c.get("type").and_then(Value::as_str) == Some("OwnerRemediated") {
                    *c = crate::objects::new_condition(
                        Some(c),
                        "OwnerRemediated",
                        false,
                        "MachineDeleting",
                        "Machine is deleting",
                    );
                }
            }
            let mut desired = m.get("status").cloned().unwrap_or(json!({}));
            object::set_path(&mut desired, ".conditions", Value::Array(all));
            self.capi
                .patch_status_if_changed(CapiKind::Machine, m, desired)
                .await?;
            self.capi
                .delete(CapiKind::Machine, object::namespace(m), object::name(m))
                .await?;
        }
        Ok(())
    }

    async fn reconcile(
        &self,
        ms: &Value,
        md: Option<&Value>,
        machines: &[Value],
    ) -> Result<(), WorldError> {
        if object::is_deleting(ms) || super::deployments::paused(ms) {
            return Ok(());
        }
        let ns = object::namespace(ms);
        let uid = object::uid(ms);
        let owned: Vec<&Value> = machines
            .iter()
            .filter(|m| controller_uid(m).as_deref() == Some(uid))
            .collect();
        self.remediate(&owned).await?;
        let desired = ms
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1)
            .max(0);
        let desired = usize::try_from(desired).unwrap_or(usize::MAX);
        let create_disabled = annotations(ms)
            .get(keys::DISABLE_MACHINE_CREATE)
            .map(String::as_str)
            == Some("true");
        // CAPI runs its preflight checks only when it is about to create Machines (not for a
        // MachineSet whose creates are disabled).
        let blocked: Vec<String> = if owned.len() < desired && !create_disabled {
            scaling::preflight_hold(ms, md).into_iter().collect()
        } else {
            Vec::new()
        };
        if owned.len() < desired && !create_disabled && blocked.is_empty() {
            let (capi, m) = (&self.capi, &new_machine(ms));
            o::concurrently(owned.len()..desired, |_| async move {
                capi.create(CapiKind::Machine, m.clone()).await
            })
            .await
            .into_iter()
            .collect::<Result<Vec<()>, _>>()?;
        } else if owned.len() > desired {
            let doomed: Vec<String> = to_delete(&owned, owned.len() - desired, order(ms))
                .into_iter()
                .filter(|m| !object::is_deleting(m))
                .map(|m| object::name(m).to_owned())
                .collect();
            let capi = &self.capi;
            o::concurrently(doomed, |name: String| async move {
                capi.delete(CapiKind::Machine, ns, &name).await
            })
            .await
            .into_iter()
            .collect::<Result<Vec<()>, _>>()?;
        }
        let count = |f: &dyn Fn(&Value) -> bool| {
            i64::try_from(owned.iter().filter(|m| f(m)).count()).unwrap_or(i64::MAX)
        };
        let all = count(&|_| true);
        let ready = count(&|m| condition_true(m, "Ready"));
        let available = count(&|m| condition_true(m, "Available"));
        let want = i64::try_from(desired).unwrap_or(i64::MAX);
        let scaling_up = scaling::machine_set_scaling_up(ms, all, want, &blocked);
        let mut v1beta1 = json!({
            "fullyLabeledReplicas": all,
            "readyReplicas": ready,
            "availableReplicas": available,
        });
        let v1beta1_conditions = match scaling::machines_created(ms, all, want, &blocked) {
            Some(c) => Some(scaling::with_condition(ms, scaling::V1BETA1_CONDITIONS, c)),
            None => object::get_path(ms, scaling::V1BETA1_CONDITIONS).cloned(),
        };
        if let Some(conditions) = v1beta1_conditions {
            object::as_map(&mut v1beta1).insert("conditions".into(), conditions);
        }
        let status = json!({
            "replicas": all,
            "readyReplicas": ready,
            "availableReplicas": available,
            "observedGeneration": object::generation(ms),
            "selector": selector_string(&string_map(ms, ".spec.selector.matchLabels")),
            "conditions": scaling::with_condition(ms, ".status.conditions", scaling_up),
            "deprecated": {"v1beta1": v1beta1},
        });
        self.capi
            .patch_status_if_changed(CapiKind::MachineSet, ms, status)
            .await
    }
}

impl Reconciler for Sets {
    fn name(&self) -> &'static str {
        "capi-machinesets"
    }

    async fn pass(&mut self) -> PassResult {
        let sets = self.capi.list(CapiKind::MachineSet).await?;
        let mds = self.capi.list(CapiKind::MachineDeployment).await?;
        let machines = self.capi.list(CapiKind::Machine).await?;
        let mut first_error = None;
        for ms in &sets {
            let md = labels(ms).get(keys::DEPLOYMENT_NAME).and_then(|d| {
                mds.iter().find(|md| {
                    object::name(md) == d && object::namespace(md) == object::namespace(ms)
                })
            });
            if let Err(e) = self.reconcile(ms, md, &machines).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(None), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str, created: &str, extra: Value) -> Value {
        let mut v = json!({"metadata": {"name": name, "creationTimestamp": created},
            "status": {"nodeRef": {"name": name}}});
        json_patch::merge(&mut v, &extra);
        v
    }

    #[test]
    fn scale_down_order() {
        let old = m("a", "2024-01-01T00:00:00Z", json!({}));
        let new = m("b", "2024-01-02T00:00:00Z", json!({}));
        let marked = m(
            "c",
            "2024-01-01T00:00:00Z",
            json!({"metadata": {"annotations": {keys::DELETE_MACHINE: "yes"}}}),
        );
        let pending = m(
            "d",
            "2024-01-01T00:00:00Z",
            json!({"status": {"nodeRef": null}}),
        );
        let failed = m(
            "e",
            "2024-01-01T00:00:00Z",
            json!({"status": {"phase": "Failed"}}),
        );
        let all = [&old, &new, &marked, &pending, &failed];
        let names = |n| {
            to_delete(&all, n, "Newest")
                .iter()
                .map(|m| object::name(m).to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(1), vec!["c"]);
        // Failure is not a priority of its own any more (CAPI v1.12+): only a missing Node or
        // NodeHealthy false is.
        assert_eq!(names(5), vec!["c", "d", "b", "a", "e"]);
        let order = |o: &str| {
            to_delete(&all, 5, o)
                .iter()
                .map(|m| object::name(m).to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(order("Random"), vec!["c", "d", "a", "b", "e"]);
        assert_eq!(order("Oldest"), vec!["c", "d", "a", "e", "b"]);
        let unhealthy = m(
            "f",
            "2024-01-01T00:00:00Z",
            json!({"status": {"conditions": [{"type": "NodeHealthy", "status": "False"}]}}),
        );
        let with_unhealthy = [&old, &unhealthy];
        assert_eq!(
            object::name(to_delete(&with_unhealthy, 1, "Random")[0]),
            "f"
        );
    }

    #[test]
    fn machines_inherit_the_template() {
        let ms = json!({"metadata": {"name": "md-x", "namespace": "ns", "uid": "u",
            "labels": {keys::DEPLOYMENT_NAME: "md"}},
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet",
            "spec": {"clusterName": "c", "template": {
                "metadata": {"labels": {"node-role.kubernetes.io/worker": ""}, "annotations": {"a": "b"}},
                "spec": {"bootstrap": {"dataSecretName": "s"}, "failureDomain": "z1"}}}});
        let m = new_machine(&ms);
        assert_eq!(m["metadata"]["generateName"], "md-x-");
        assert_eq!(m["metadata"]["labels"][keys::SET_NAME], "md-x");
        assert_eq!(m["metadata"]["labels"][keys::DEPLOYMENT_NAME], "md");
        assert_eq!(
            m["metadata"]["labels"]["node-role.kubernetes.io/worker"],
            ""
        );
        assert_eq!(m["metadata"]["annotations"]["a"], "b");
        assert_eq!(m["metadata"]["ownerReferences"][0]["kind"], "MachineSet");
        assert_eq!(m["spec"]["failureDomain"], "z1");
        assert_eq!(m["spec"]["clusterName"], "c");
    }
}
