//! The MachinePool controller and a Docker-provider-like InfraMachinePool, simplified into one.
//!
//! Responsibility: what Cluster API's MachinePool controller and the Docker provider's
//! `DockerMachinePool` do together, as far as they decide which Machine lives or dies:
//! - The InfraMachinePool is the `DockerMachinePool` the pool's
//!   `spec.template.spec.infrastructureRef` names (any other kind is left alone, as a cluster
//!   without that provider would). Its status gets `replicas`, `ready` and
//!   `infrastructureMachineKind: DockerMachine` — the field that makes Cluster API create
//!   *MachinePool Machines* — unless it is annotated
//!   [`NO_MACHINE_POOL_MACHINES`]`: "true"` (a provider without them).
//! - Instances are MachinePool Machines (the Machine controller, [`super::machines`], provisions
//!   them and makes their Nodes): named `<pool>-<n>`, the template's labels and annotations plus
//!   `cluster.x-k8s.io/pool-name` and `cluster-name`, a controller owner reference to the pool,
//!   the template's spec with `clusterName`, the failure domain of `spec.failureDomains` with
//!   the fewest Machines (else the template's). A provider without MachinePool Machines makes
//!   no instances here (an approximation: real ones make instances whose Nodes have no Machine).
//! - Scale-up as the Docker provider's: Machines at the template's version (deleting ones count
//!   until gone) are made up to `spec.replicas`.
//! - Scale-down as the Docker provider's: `provisioned − replicas` Machines are deleted, where
//!   provisioned counts every Machine whose infrastructure is provisioned (deleting and outdated
//!   ones too); first the outdated (version other than the template's), then provisioned
//!   up-to-date ones, each group `cluster.x-k8s.io/delete-machine` first, then by name (the
//!   provider's map order, stable here). A Machine not provisioned yet is never chosen; one
//!   already deleting is chosen again (it uses up a place) but not deleted twice. A Machine
//!   deleted directly is replaced (the pool is below its replicas until it is gone).
//! - MachinePool status (v1beta2): `replicas`, `readyReplicas`, `availableReplicas`,
//!   `upToDateReplicas` (Machines not deleting: Cluster API's `UpToDate` condition of pool
//!   Machines is False only while deleting), `phase`, `observedGeneration`, `initialization`,
//!   the `Paused` condition, and under `deprecated.v1beta1` the ready/available/unavailable
//!   counters; `spec.providerIDList` follows the Machines' providerIDs.
//!
//! A paused (`cluster.x-k8s.io/paused`) or deleting pool is left alone.
//! Inputs: MachinePools, Machines (v1beta2 through [`Capi`]), DockerMachinePools. Outputs:
//! Machine creates and deletes, MachinePool spec (`providerIDList`) and status patches,
//! DockerMachinePool status patches.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use api::well_known::capi as keys;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject};
use serde_json::{Value, json};

use super::client::Capi;
use super::sets::MACHINE_FINALIZER;
use crate::WorldError;
use crate::driver::{PassResult, Reconciler};
use crate::objects::{
    self as o, annotations, condition_true, controller_ref, controller_uid, string_map, text,
};
use sim::convert::capi::{CapiKind, CapiVersion};
use sim::object;

/// On a `DockerMachinePool`: `"true"` makes it a provider without MachinePool Machines (no
/// `status.infrastructureMachineKind`).
pub const NO_MACHINE_POOL_MACHINES: &str = "sim.karpenter-capi.dev/no-machine-pool-machines";

/// The InfraMachinePool kind the world answers for: the Docker provider's.
pub fn docker_machine_pools() -> ApiResource {
    ApiResource {
        group: "infrastructure.cluster.x-k8s.io".to_owned(),
        version: "v1beta1".to_owned(),
        api_version: "infrastructure.cluster.x-k8s.io/v1beta1".to_owned(),
        kind: "DockerMachinePool".to_owned(),
        plural: "dockermachinepools".to_owned(),
    }
}

/// The `DockerMachinePool` CRD (open `spec` and `status`, the status subresource, Cluster API's
/// contract labels), as a management cluster with the Docker provider serves it.
pub fn docker_machine_pool_crd() -> Result<CustomResourceDefinition, WorldError> {
    super::infrastructure::docker_crd("DockerMachinePool")
}

/// The MachinePool controller with its infrastructure.
pub struct Pools {
    capi: Arc<Capi>,
    /// The next Machine's number (names must be known before the create: the Machine's
    /// `infrastructureRef` names its DockerMachine, which has the same name); names in use are
    /// skipped, so a restarted world does not collide with its earlier Machines.
    next: AtomicU64,
}

impl std::fmt::Debug for Pools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pools").finish_non_exhaustive()
    }
}

impl Pools {
    /// Over a management cluster's Cluster API.
    pub fn new(capi: Arc<Capi>) -> Self {
        Self {
            capi,
            next: AtomicU64::new(0),
        }
    }
}

/// The template's Kubernetes version.
fn version(mp: &Value) -> Option<&str> {
    text(mp, ".spec.template.spec.version")
}

fn provisioned(m: &Value) -> bool {
    m.pointer("/status/initialization/infrastructureProvisioned")
        .and_then(Value::as_bool)
        == Some(true)
}

/// The Machines a scale-down of `excess` removes (the Docker provider's order), deleting
/// ones included (they use up a place).
pub fn to_delete<'a>(mp: &Value, machines: &[&'a Value], excess: usize) -> Vec<&'a Value> {
    let outdated = |m: &Value| text(m, ".spec.version") != version(mp);
    let marked = |m: &Value| annotations(m).contains_key(keys::DELETE_MACHINE);
    let mut candidates: Vec<&Value> = machines
        .iter()
        .copied()
        .filter(|m| outdated(m) || provisioned(m))
        .collect();
    candidates.sort_by(|a, b| {
        (!outdated(a), !marked(a), object::name(a)).cmp(&(
            !outdated(b),
            !marked(b),
            object::name(b),
        ))
    });
    candidates.into_iter().take(excess).collect()
}

/// The failure domain for a new Machine: of the pool's list, the one with the fewest of
/// `machines` and `chosen` (the domains of Machines about to be made; ties: list order); none
/// listed: the template's.
fn failure_domain(mp: &Value, machines: &[&Value], chosen: &[Option<String>]) -> Option<String> {
    let listed: Vec<&str> = mp
        .pointer("/spec/failureDomains")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let count = |fd: &str| {
        machines
            .iter()
            .filter(|m| text(m, ".spec.failureDomain") == Some(fd))
            .count()
            + chosen.iter().filter(|c| c.as_deref() == Some(fd)).count()
    };
    listed
        .iter()
        .min_by_key(|fd| count(fd))
        .map(|fd| (*fd).to_owned())
        .or_else(|| text(mp, ".spec.template.spec.failureDomain").map(str::to_owned))
}

/// A new MachinePool Machine named `name`.
pub fn new_machine(mp: &Value, name: &str, failure_domain: Option<String>) -> Value {
    let template = mp.pointer("/spec/template").cloned().unwrap_or(json!({}));
    let mut machine_labels = string_map(&template, ".metadata.labels");
    machine_labels.insert(keys::POOL_NAME.to_owned(), object::name(mp).to_owned());
    let cluster = text(mp, ".spec.clusterName").unwrap_or_default();
    machine_labels.insert(keys::CLUSTER_NAME.to_owned(), cluster.to_owned());
    let mut spec = template.get("spec").cloned().unwrap_or(json!({}));
    object::set_path(&mut spec, ".clusterName", json!(cluster));
    object::set_path(
        &mut spec,
        ".infrastructureRef",
        json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachine",
            "name": name}),
    );
    match failure_domain {
        Some(fd) => object::set_path(&mut spec, ".failureDomain", json!(fd)),
        None => {
            if let Some(s) = spec.as_object_mut() {
                s.remove("failureDomain");
            }
        }
    }
    json!({
        "apiVersion": CapiVersion::V1beta2.api_version(),
        "kind": "Machine",
        "metadata": {
            "name": name,
            "namespace": object::namespace(mp),
            "labels": machine_labels,
            "annotations": string_map(&template, ".metadata.annotations"),
            "ownerReferences": [controller_ref(mp)],
            "finalizers": [MACHINE_FINALIZER],
        },
        "spec": spec,
    })
}

impl Pools {
    /// The pool's DockerMachinePool, if its template names one that exists.
    async fn infrastructure(&self, mp: &Value) -> Result<Option<Value>, WorldError> {
        let r = mp.pointer("/spec/template/spec/infrastructureRef");
        let kind = r.and_then(|r| r.get("kind")).and_then(Value::as_str);
        let name = r.and_then(|r| r.get("name")).and_then(Value::as_str);
        let (Some("DockerMachinePool"), Some(name)) = (kind, name) else {
            return Ok(None);
        };
        let api: kube::Api<DynamicObject> = o::namespaced(
            self.capi.client(),
            object::namespace(mp),
            &docker_machine_pools(),
        );
        match api.get_opt(name).await? {
            Some(obj) => Ok(Some(serde_json::to_value(obj)?)),
            None => Ok(None),
        }
    }

    async fn reconcile(&self, mp: &Value, machines: &[Value]) -> Result<(), WorldError> {
        let ns = object::namespace(mp);
        let taken: BTreeSet<&str> = machines
            .iter()
            .filter(|m| object::namespace(m) == ns)
            .map(object::name)
            .collect();
        if object::is_deleting(mp) || super::deployments::paused(mp) {
            return Ok(());
        }
        let Some(infra) = self.infrastructure(mp).await? else {
            return Ok(());
        };
        let with_machines = annotations(&infra)
            .get(NO_MACHINE_POOL_MACHINES)
            .map(String::as_str)
            != Some("true");
        let uid = object::uid(mp);
        let owned: Vec<&Value> = machines
            .iter()
            .filter(|m| controller_uid(m).as_deref() == Some(uid))
            .collect();
        let desired = mp
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1)
            .max(0);
        let desired = usize::try_from(desired).unwrap_or(usize::MAX);
        if with_machines {
            self.scale(mp, &owned, desired, &taken).await?;
        }
        let mut infra_status = json!({
            "replicas": owned.len(),
            "ready": owned.len() == desired,
        });
        if with_machines {
            object::set_path(
                &mut infra_status,
                ".infrastructureMachineKind",
                json!("DockerMachine"),
            );
        }
        let api: kube::Api<DynamicObject> = o::namespaced(
            self.capi.client(),
            object::namespace(mp),
            &docker_machine_pools(),
        );
        o::patch_status_if_changed(&api, &infra, infra_status).await?;
        self.status(mp, &owned, desired).await
    }

    /// Make Machines up to `desired` at the template's version; delete the excess.
    async fn scale(
        &self,
        mp: &Value,
        owned: &[&Value],
        desired: usize,
        taken: &BTreeSet<&str>,
    ) -> Result<(), WorldError> {
        let current = owned
            .iter()
            .filter(|m| text(m, ".spec.version") == version(mp))
            .count();
        if current < desired {
            let mut chosen = Vec::new();
            let mut made = Vec::new();
            for _ in current..desired {
                let name = loop {
                    let n = self.next.fetch_add(1, Ordering::Relaxed);
                    let name = format!("{}-{n}", object::name(mp));
                    if !taken.contains(name.as_str()) {
                        break name;
                    }
                };
                let fd = failure_domain(mp, owned, &chosen);
                made.push(new_machine(mp, &name, fd.clone()));
                chosen.push(fd);
            }
            let capi = &self.capi;
            o::concurrently(made, |m| async move {
                match capi.create(CapiKind::Machine, m).await {
                    Err(e) if o::world_code(&e) == Some(409) => Ok(()),
                    r => r,
                }
            })
            .await
            .into_iter()
            .collect::<Result<Vec<()>, _>>()?;
            return Ok(());
        }
        let ready = owned.iter().filter(|m| provisioned(m)).count();
        if ready > desired {
            let doomed: Vec<String> = to_delete(mp, owned, ready - desired)
                .into_iter()
                .filter(|m| !object::is_deleting(m))
                .map(|m| object::name(m).to_owned())
                .collect();
            let (capi, ns) = (&self.capi, object::namespace(mp));
            o::concurrently(doomed, |name: String| async move {
                capi.delete(CapiKind::Machine, ns, &name).await
            })
            .await
            .into_iter()
            .collect::<Result<Vec<()>, _>>()?;
        }
        Ok(())
    }

    async fn status(&self, mp: &Value, owned: &[&Value], desired: usize) -> Result<(), WorldError> {
        let count = |f: &dyn Fn(&Value) -> bool| {
            i64::try_from(owned.iter().filter(|m| f(m)).count()).unwrap_or(i64::MAX)
        };
        let all = count(&|_| true);
        let ready = count(&|m| condition_true(m, "Ready"));
        let available = count(&|m| condition_true(m, "Available"));
        let up_to_date = count(&|m| !object::is_deleting(m));
        let want = i64::try_from(desired).unwrap_or(i64::MAX);
        let phase = match want.cmp(&ready) {
            std::cmp::Ordering::Greater => "ScalingUp",
            std::cmp::Ordering::Less => "ScalingDown",
            std::cmp::Ordering::Equal => "Running",
        };
        let previous = o::condition(mp, "Paused");
        let status = json!({
            "replicas": all,
            "readyReplicas": ready,
            "availableReplicas": available,
            "upToDateReplicas": up_to_date,
            "phase": phase,
            "observedGeneration": object::generation(mp),
            "initialization": {"bootstrapDataSecretCreated": true, "infrastructureProvisioned": true},
            "conditions": [o::new_condition(previous, "Paused", false, "NotPaused", "")],
            "deprecated": {"v1beta1": {"readyReplicas": ready, "availableReplicas": available,
                "unavailableReplicas": (all - available).max(0)}},
        });
        let mut ids: Vec<&str> = owned
            .iter()
            .filter_map(|m| text(m, ".spec.providerID"))
            .collect();
        ids.sort_unstable();
        let listed: Vec<&str> = mp
            .pointer("/spec/providerIDList")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if ids != listed {
            self.capi
                .patch(
                    CapiKind::MachinePool,
                    mp,
                    &json!({"spec": {"providerIDList": ids}}),
                )
                .await?;
        }
        self.capi
            .patch_status_if_changed(CapiKind::MachinePool, mp, status)
            .await
    }
}

impl Reconciler for Pools {
    fn name(&self) -> &'static str {
        "capi-machinepools"
    }

    async fn pass(&mut self) -> PassResult {
        let pools = self.capi.list(CapiKind::MachinePool).await?;
        if pools.is_empty() {
            return Ok(None);
        }
        let machines = self.capi.list(CapiKind::Machine).await?;
        let mut first_error = None;
        for mp in &pools {
            if let Err(e) = self.reconcile(mp, &machines).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(None), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> Value {
        json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
            "metadata": {"name": "mp", "namespace": "ns", "uid": "u"},
            "spec": {"clusterName": "c", "replicas": 2, "failureDomains": ["a", "b"],
                "template": {"metadata": {"labels": {"x": "y"}},
                    "spec": {"version": "v2", "bootstrap": {"dataSecretName": "boot"},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                        "kind": "DockerMachinePool", "name": "mp"}}}}})
    }

    fn m(name: &str, version: &str, provisioned: bool, extra: Value) -> Value {
        let mut m = json!({"metadata": {"name": name, "annotations": {}},
            "spec": {"version": version},
            "status": {"initialization": {"infrastructureProvisioned": provisioned}}});
        if let (Some(Value::Object(t)), Value::Object(e)) = (m.pointer_mut("/metadata"), extra) {
            t.extend(e);
        }
        m
    }

    fn names(v: &[&Value]) -> Vec<String> {
        v.iter().map(|m| object::name(m).to_owned()).collect()
    }

    #[test]
    fn scale_down_takes_outdated_then_marked_then_by_name_never_unprovisioned() {
        let mp = pool();
        let marked = json!({"annotations": {keys::DELETE_MACHINE: "t"}});
        let all = [
            m("a", "v2", true, json!({})),
            m("b", "v2", true, marked.clone()),
            m("c", "v1", true, json!({})),
            m("d", "v2", false, marked),
            m("e", "v1", false, json!({})),
        ];
        let refs: Vec<&Value> = all.iter().collect();
        assert_eq!(names(&to_delete(&mp, &refs, 5)), ["c", "e", "b", "a"]);
        assert_eq!(
            names(&to_delete(&mp, &refs, 1)),
            ["c"],
            "an outdated Machine goes before the one marked delete-machine"
        );
    }

    #[test]
    fn machines_carry_the_pool_name_and_spread_over_failure_domains() {
        let mp = pool();
        let first = new_machine(&mp, "mp-0", failure_domain(&mp, &[], &[]));
        assert_eq!(first["metadata"]["labels"][keys::POOL_NAME], "mp");
        assert_eq!(first["metadata"]["labels"][keys::CLUSTER_NAME], "c");
        assert_eq!(first["metadata"]["labels"]["x"], "y");
        assert_eq!(
            first["metadata"]["ownerReferences"][0]["kind"],
            "MachinePool"
        );
        assert_eq!(first["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(first["spec"]["infrastructureRef"]["kind"], "DockerMachine");
        assert_eq!(first["spec"]["infrastructureRef"]["name"], "mp-0");
        assert_eq!(first["spec"]["failureDomain"], "a");
        let second = new_machine(&mp, "mp-1", failure_domain(&mp, &[&first], &[]));
        assert_eq!(
            failure_domain(&mp, &[&first], &[Some("b".to_owned())]).as_deref(),
            Some("a")
        );
        assert_eq!(second["spec"]["failureDomain"], "b");
    }
}
