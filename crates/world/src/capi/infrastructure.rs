//! The simulated infrastructure provider, for a management cluster that runs Cluster API's
//! real core controllers (`sim world --real-cluster-api`).
//!
//! Responsibility: the kinds a Cluster API infrastructure and control plane provider bring
//! (their CRDs, [`crds`]: `SimCluster`, `SimMachine`, `SimMachineTemplate` in
//! `infrastructure.sim.karpenter-capi.dev/v1alpha1`, `SimControlPlane` in
//! `controlplane.sim.karpenter-capi.dev/v1alpha1`, each labelled
//! `cluster.x-k8s.io/v1beta2: v1alpha1` so Cluster API reads them by its v1beta2 contract) and
//! the controller ([`Infrastructure`]) that answers for them as a provider does: a `SimCluster`
//! is provisioned at once (`status.initialization.provisioned`), a `SimControlPlane`
//! initialized (`status.initialization.controlPlaneInitialized`); a `SimMachine` whose owning
//! Machine exists gets the instance finalizer, then after the provider-ID delay
//! `spec.providerID = sim:///<zone>/<machine>` and `status.initialization.provisioned`, then
//! after the node-join delay the Node its kubelet would register
//! ([`super::super::node_template`]); a deleting `SimMachine` loses its Node and its finalizer
//! after the deletion delay. Everything else — MachineSets, Machines, their phases and
//! conditions, nodeRefs, drains, which Machine a scale-down takes — is the real controllers'
//! business. The failure knobs ([`super::phases::failure`]) hold a `SimMachine` unprovisioned
//! (both kinds of failure: the v1beta2 contract has no terminal infrastructure failure).
//! Inputs: the provider kinds, Machines and MachineDeployments (management, through
//! [`Capi`]), Nodes (workload). Outputs: provider-object patches, Node creates and deletes.
//! The Cluster's kubeconfig Secret (`<cluster>-kubeconfig`, which a control plane provider
//! writes) is left to whoever creates the Cluster.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::client::Capi;
use super::machines::Clock;
use super::phases::failure;
use crate::WorldError;
use crate::config::{CapiConfig, annotations};
use crate::driver::{PassResult, Reconciler};
use crate::node_template;
use crate::objects::{
    self as o, code, ignore_not_found, list_json, parse_duration, patch_status_if_changed, text,
};
use sim::convert::capi::CapiKind;
use sim::object;

/// The infrastructure provider's API group.
pub const INFRASTRUCTURE_GROUP: &str = "infrastructure.sim.karpenter-capi.dev";
/// The control plane provider's API group.
pub const CONTROL_PLANE_GROUP: &str = "controlplane.sim.karpenter-capi.dev";
/// The version both serve.
pub const VERSION: &str = "v1alpha1";
/// The finalizer a `SimMachine` carries while its instance exists.
pub const INSTANCE_FINALIZER: &str = "sim.karpenter-capi.dev/instance";

/// One provider kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderKind {
    /// API group.
    pub group: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Resource (plural).
    pub plural: &'static str,
}

/// `SimCluster`, the InfraCluster.
pub const SIM_CLUSTER: ProviderKind = ProviderKind {
    group: INFRASTRUCTURE_GROUP,
    kind: "SimCluster",
    plural: "simclusters",
};
/// `SimMachine`, the InfraMachine.
pub const SIM_MACHINE: ProviderKind = ProviderKind {
    group: INFRASTRUCTURE_GROUP,
    kind: "SimMachine",
    plural: "simmachines",
};
/// `SimMachineTemplate`, the InfraMachineTemplate (its `status.capacity` is the shape).
pub const SIM_MACHINE_TEMPLATE: ProviderKind = ProviderKind {
    group: INFRASTRUCTURE_GROUP,
    kind: "SimMachineTemplate",
    plural: "simmachinetemplates",
};
/// `SimControlPlane`, the control plane.
pub const SIM_CONTROL_PLANE: ProviderKind = ProviderKind {
    group: CONTROL_PLANE_GROUP,
    kind: "SimControlPlane",
    plural: "simcontrolplanes",
};

/// Every provider kind.
pub const ALL: [ProviderKind; 4] = [
    SIM_CLUSTER,
    SIM_MACHINE,
    SIM_MACHINE_TEMPLATE,
    SIM_CONTROL_PLANE,
];

impl ProviderKind {
    /// The kind as a dynamic resource.
    pub fn resource(self) -> ApiResource {
        ApiResource {
            group: self.group.to_owned(),
            version: VERSION.to_owned(),
            api_version: format!("{}/{VERSION}", self.group),
            kind: self.kind.to_owned(),
            plural: self.plural.to_owned(),
        }
    }

    /// Its CRD: open `spec` and `status`, the status subresource, Cluster API's contract label.
    fn crd(self) -> Result<CustomResourceDefinition, WorldError> {
        let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{}.{}", self.plural, self.group),
                "labels": {"cluster.x-k8s.io/v1beta2": VERSION}},
            "spec": {
                "group": self.group,
                "names": {"kind": self.kind, "listKind": format!("{}List", self.kind),
                    "plural": self.plural, "singular": self.kind.to_lowercase(),
                    "categories": ["cluster-api"]},
                "scope": "Namespaced",
                "versions": [{"name": VERSION, "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                        "metadata": {"type": "object"}, "spec": open.clone(), "status": open}}},
                    "subresources": {"status": {}}}],
            },
        });
        Ok(serde_json::from_value(crd)?)
    }
}

/// The provider kinds' CRDs.
pub fn crds() -> Result<Vec<CustomResourceDefinition>, WorldError> {
    ALL.into_iter().map(ProviderKind::crd).collect()
}

/// The infrastructure template kind the examples and built-in scenarios name: Cluster API's
/// Docker provider's `DockerMachineTemplate` (`infrastructure.cluster.x-k8s.io`, `v1beta1` as
/// CAPD serves it, open `spec` and `status`), so a simulated Cluster API serves what its
/// MachineDeployments reference, as a management cluster with CAPD installed does. Templates
/// of this kind are read for `status.capacity` and watched for drift; the simulated Machines do
/// not need them.
pub fn docker_machine_template_crd() -> Result<CustomResourceDefinition, WorldError> {
    docker_crd("DockerMachineTemplate")
}

/// A kind of Cluster API's Docker provider (`infrastructure.cluster.x-k8s.io`, `v1beta1` as
/// CAPD serves it, its contract labels, open `spec` and `status`, the status subresource).
pub fn docker_crd(kind: &str) -> Result<CustomResourceDefinition, WorldError> {
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let singular = kind.to_lowercase();
    let plural = format!("{singular}s");
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.infrastructure.cluster.x-k8s.io"),
            "labels": {"cluster.x-k8s.io/provider": "infrastructure-docker",
                "cluster.x-k8s.io/v1beta1": "v1beta1", "cluster.x-k8s.io/v1beta2": "v1beta1"}},
        "spec": {
            "group": "infrastructure.cluster.x-k8s.io",
            "names": {"kind": kind, "listKind": format!("{kind}List"),
                "plural": plural, "singular": singular, "categories": ["cluster-api"]},
            "scope": "Namespaced",
            "versions": [{"name": "v1beta1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                    "metadata": {"type": "object"}, "spec": open.clone(), "status": open}}},
                "subresources": {"status": {}}}],
        },
    });
    Ok(serde_json::from_value(crd)?)
}

/// The infrastructure and control plane provider controller.
pub struct Infrastructure {
    management: kube::Client,
    capi: Arc<Capi>,
    workload: kube::Client,
    config: CapiConfig,
    seen: Clock,
    provisioned: Clock,
    deleting: Clock,
}

impl std::fmt::Debug for Infrastructure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Infrastructure").finish_non_exhaustive()
    }
}

fn until(at: Instant, now: Instant) -> Option<Duration> {
    Some(at.saturating_duration_since(now))
}

fn earliest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Infrastructure {
    /// Over a management cluster (running Cluster API's core controllers) and a workload
    /// cluster.
    pub fn new(capi: Arc<Capi>, workload: kube::Client, config: CapiConfig) -> Self {
        Self {
            management: capi.client().clone(),
            capi,
            workload,
            config,
            seen: Clock::default(),
            provisioned: Clock::default(),
            deleting: Clock::default(),
        }
    }

    fn api(&self, kind: ProviderKind, ns: &str) -> Api<DynamicObject> {
        o::namespaced(&self.management, ns, &kind.resource())
    }

    /// Mark every object of `kind` with `status` (clusters and control planes are ready at once).
    async fn ready_all(&self, kind: ProviderKind, status: &Value) -> Result<(), WorldError> {
        for obj in list_json(&self.management, &kind.resource()).await? {
            if object::is_deleting(&obj) {
                continue;
            }
            let api = self.api(kind, object::namespace(&obj));
            patch_status_if_changed(&api, &obj, status.clone()).await?;
        }
        Ok(())
    }

    async fn set_finalizers(&self, m: &Value, finalizers: &[String]) -> Result<(), WorldError> {
        let patch = o::finalizers_patch(m, finalizers);
        let api = self.api(SIM_MACHINE, object::namespace(m));
        match api
            .patch(
                object::name(m),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if matches!(code(&e), Some(404 | 409)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn delay(&self, machine: &Value, md: Option<&Value>, key: &str, default: Duration) -> Duration {
        super::phases::knob(machine, md, key)
            .and_then(|d| parse_duration(&d))
            .unwrap_or(default)
    }

    /// Release a deleting `SimMachine`'s instance: its Node, then its finalizer.
    async fn release(&self, sm: &Value, now: Instant) -> Result<Option<Duration>, WorldError> {
        if !object::finalizers(sm)
            .iter()
            .any(|f| f == INSTANCE_FINALIZER)
        {
            return Ok(None);
        }
        let due = self.deleting.first(object::uid(sm), now) + self.config.deletion_delay;
        if now < due {
            return Ok(until(due, now));
        }
        if let Some(pid) = text(sm, ".spec.providerID") {
            let nodes: Api<Node> = Api::all(self.workload.clone());
            for n in o::list_values::<Node>(&self.workload).await? {
                if text(&n, ".spec.providerID") == Some(pid) {
                    ignore_not_found(
                        nodes
                            .delete(object::name(&n), &DeleteParams::default())
                            .await,
                    )?;
                }
            }
        }
        let rest: Vec<String> = object::finalizers(sm)
            .into_iter()
            .filter(|f| f != INSTANCE_FINALIZER)
            .collect();
        self.set_finalizers(sm, &rest).await?;
        Ok(None)
    }

    async fn reconcile(
        &self,
        sm: &Value,
        machine: Option<&Value>,
        md: Option<&Value>,
        nodes: &[Value],
        now: Instant,
    ) -> Result<Option<Duration>, WorldError> {
        if object::is_deleting(sm) {
            return self.release(sm, now).await;
        }
        // Cluster API sets the owning Machine first; until then there is nothing to build.
        let Some(machine) = machine else {
            return Ok(None);
        };
        let finalizers = object::finalizers(sm);
        if !finalizers.iter().any(|f| f == INSTANCE_FINALIZER) {
            let mut with = finalizers;
            with.push(INSTANCE_FINALIZER.to_owned());
            self.set_finalizers(sm, &with).await?;
            return Ok(Some(Duration::ZERO));
        }
        let uid = object::uid(sm);
        let pid_at = self.seen.first(uid, now)
            + self.delay(
                machine,
                md,
                annotations::PROVIDER_ID_DELAY,
                self.config.provider_id_delay,
            );
        let api = self.api(SIM_MACHINE, object::namespace(sm));
        let Some(pid) = text(sm, ".spec.providerID") else {
            if failure(machine, md, &self.config).is_some() {
                return Ok(None);
            }
            if now < pid_at {
                return Ok(until(pid_at, now));
            }
            let zone = node_template::zone(machine, md);
            let pid = node_template::provider_id(zone.as_deref(), object::name(machine));
            let patch = json!({"spec": {"providerID": pid}});
            api.patch(
                object::name(sm),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
            self.provisioned.set(uid, now);
            return Ok(Some(Duration::ZERO));
        };
        let ip = node_template::ip_for(object::name(machine));
        let status = json!({"initialization": {"provisioned": true}, "ready": true,
            "addresses": [{"type": "InternalIP", "address": ip}]});
        patch_status_if_changed(&api, sm, status).await?;
        if nodes
            .iter()
            .any(|n| text(n, ".spec.providerID") == Some(pid))
        {
            return Ok(None);
        }
        let join_at = self.provisioned.first(uid, now) + self.config.node_join_delay;
        if now < join_at {
            return Ok(until(join_at, now));
        }
        let node: Node =
            serde_json::from_value(node_template::node(machine, md, pid, &self.config.node))?;
        let nodes: Api<Node> = Api::all(self.workload.clone());
        match nodes.create(&PostParams::default(), &node).await {
            Ok(_) => Ok(None),
            Err(e) if code(&e) == Some(409) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

/// The Machine that owns an infrastructure object, by owner reference.
fn owner_machine<'a>(sm: &Value, machines: &'a [Value]) -> Option<&'a Value> {
    let owner = sm
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r.get("kind").and_then(Value::as_str) == Some(CapiKind::Machine.kind()))?;
    let uid = owner.get("uid").and_then(Value::as_str)?;
    machines.iter().find(|m| object::uid(m) == uid)
}

impl Reconciler for Infrastructure {
    fn name(&self) -> &'static str {
        "capi-infrastructure"
    }

    async fn pass(&mut self) -> PassResult {
        let now = Instant::now();
        self.ready_all(
            SIM_CLUSTER,
            &json!({"initialization": {"provisioned": true}, "ready": true}),
        )
        .await?;
        self.ready_all(
            SIM_CONTROL_PLANE,
            &json!({"initialization": {"controlPlaneInitialized": true},
                "initialized": true, "ready": true}),
        )
        .await?;
        let sims = list_json(&self.management, &SIM_MACHINE.resource()).await?;
        let machines = self.capi.list(CapiKind::Machine).await?;
        let mds = self.capi.list(CapiKind::MachineDeployment).await?;
        let sets = self.capi.list(CapiKind::MachineSet).await?;
        let nodes = o::list_values::<Node>(&self.workload).await?;
        let live: std::collections::HashSet<&str> = sims.iter().map(object::uid).collect();
        for clock in [&self.seen, &self.provisioned, &self.deleting] {
            clock.retain(&live);
        }
        let (this, sims_ref, machines_ref, mds_ref, sets_ref, nodes_ref) =
            (&*self, &sims, &machines, &mds, &sets, &nodes);
        let results = o::concurrently(0..sims.len(), |i| async move {
            let Some(sm) = sims_ref.get(i) else {
                return Ok(None);
            };
            let machine = owner_machine(sm, machines_ref);
            let md = machine.and_then(|m| o::group_of(m, mds_ref, sets_ref));
            this.reconcile(sm, machine, md, nodes_ref, now).await
        })
        .await;
        let mut next = None;
        let mut first_error = None;
        for result in results {
            match result {
                Ok(d) => next = earliest(next, d),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(next), Err)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;

    #[test]
    fn crds_carry_the_v1beta2_contract_label_and_a_status_subresource() {
        let crds: Vec<Value> = crds()
            .unwrap()
            .iter()
            .map(|c| serde_json::to_value(c).unwrap())
            .collect();
        assert_eq!(crds.len(), 4);
        for crd in &crds {
            assert_eq!(
                crd["metadata"]["labels"]["cluster.x-k8s.io/v1beta2"],
                VERSION
            );
            assert_eq!(
                crd["spec"]["versions"][0]["subresources"]["status"],
                json!({})
            );
        }
        let names: Vec<&str> = crds
            .iter()
            .map(|c| c["metadata"]["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"simmachines.infrastructure.sim.karpenter-capi.dev"));
        assert!(names.contains(&"simcontrolplanes.controlplane.sim.karpenter-capi.dev"));
    }

    #[test]
    fn the_owner_is_found_by_uid_not_by_name() {
        let machines = vec![
            json!({"metadata": {"name": "m", "namespace": "a", "uid": "u1"}}),
            json!({"metadata": {"name": "m", "namespace": "a", "uid": "u2"}}),
        ];
        let sm = json!({"metadata": {"name": "m", "ownerReferences": [
            {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "name": "m", "uid": "u2"}]}});
        assert_eq!(object::uid(owner_machine(&sm, &machines).unwrap()), "u2");
        let orphan = json!({"metadata": {"name": "m"}});
        assert!(owner_machine(&orphan, &machines).is_none());
    }
}
