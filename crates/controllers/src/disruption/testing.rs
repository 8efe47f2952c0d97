//! Test fixtures for the disruption modules: a small cluster of managed nodes built from fake
//! instance types, with bound pods, PDBs and NodePools.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use api::{NodeClaim, NodePool};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use scheduling::fixtures::{FakeInstanceType, fake_well_known_labels};
use scheduling::instance_type::{InstanceType, Offering};
use scheduling::quantity::Quantity;
use serde_json::json;

use super::candidates::{Candidate, Class, Inputs, candidates};
use super::simulation::{Objects, World};
use crate::provisioning::inputs::ClusterObjects;

/// The fixtures' "now".
pub fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

fn from<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).unwrap()
}

/// An on-demand instance type in zone `z1` with `cpu` cores, 64Gi and 110 pods.
pub fn instance_type(name: &str, cpu: i64, price: f64) -> Arc<InstanceType> {
    instance_type_offering(name, cpu, Offering::new("on-demand", "z1", price))
}

/// [`instance_type`] whose offering has no price.
pub fn unpriced_instance_type(name: &str, cpu: i64) -> Arc<InstanceType> {
    instance_type_offering(name, cpu, Offering::unpriced("on-demand", "z1"))
}

/// A spot instance type in zone `z1` with `cpu` cores, 64Gi and 110 pods.
pub fn spot_instance_type(name: &str, cpu: i64, price: f64) -> Arc<InstanceType> {
    instance_type_offering(name, cpu, Offering::new("spot", "z1", price))
}

/// An instance type with `cpu` cores, 64Gi, 110 pods and the one `offering`.
fn instance_type_offering(name: &str, cpu: i64, offering: Offering) -> Arc<InstanceType> {
    Arc::new(
        FakeInstanceType::new(name)
            .resource("cpu", Quantity::from_value(cpu))
            .resource("memory", Quantity::from_bytes(64 << 30))
            .resource("pods", Quantity::from_value(110))
            .offering(offering)
            .build()
            .unwrap(),
    )
}

/// A cluster under test.
#[derive(Debug, Default, Clone)]
pub struct Fixture {
    pub nodes: Vec<Node>,
    pub node_claims: Vec<NodeClaim>,
    pub pods: Vec<Arc<Pod>>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub node_pools: Vec<NodePool>,
    pub instance_types: BTreeMap<String, Vec<Arc<InstanceType>>>,
    pub in_flight: BTreeSet<String>,
    pub nominated: BTreeSet<String>,
    /// NodeClaim name → the UIDs of the pods it was created for.
    pub planned: BTreeMap<String, Vec<String>>,
    pub floors: super::floors::Floors,
}

impl Fixture {
    /// The budget map of its NodePools for `reason`, nothing in flight, at [`now`].
    pub fn budgets(&self, reason: api::nodepool::DisruptionReason) -> super::budget_map::BudgetMap {
        super::budget_map::budget_map(
            &self.nodes,
            &self.node_claims,
            &self.node_pools,
            &BTreeSet::new(),
            reason,
            now(),
        )
    }

    /// A NodePool `name` offering `types`, consolidating at once.
    pub fn pool(&mut self, name: &str, types: Vec<Arc<InstanceType>>) -> &mut NodePool {
        self.node_pools.push(from(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": name, "uid": format!("uid-{name}")},
            "spec": {
                "disruption": {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]},
                "template": {"spec": {
                    "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": "d"},
                    "requirements": []}}}
        })));
        self.instance_types.insert(name.to_owned(), types);
        self.node_pools.last_mut().unwrap()
    }

    /// An initialized, Ready node of `pool` of instance type `it`, with its NodeClaim.
    pub fn node(&mut self, name: &str, pool: &str, it: &InstanceType) -> &mut Self {
        let cpu = it
            .capacity()
            .get_or_zero(&scheduling::resources::ResourceName::CPU);
        let cpu = cpu.to_string();
        self.nodes.push(from(json!({
            "metadata": {"name": name, "labels": {
                "karpenter.sh/nodepool": pool,
                "karpenter.sh/initialized": "true",
                "karpenter.sh/registered": "true",
                "node.kubernetes.io/instance-type": it.name(),
                "topology.kubernetes.io/zone": "z1",
                "karpenter.sh/capacity-type": "on-demand",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64"}},
            "spec": {"providerID": format!("capi://{name}")},
            "status": {
                "capacity": {"cpu": cpu, "memory": "64Gi", "pods": "110"},
                "allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}]}
        })));
        self.node_claims.push(from(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": format!("{name}-claim"), "uid": format!("uid-{name}-claim"),
                "labels": {"karpenter.sh/nodepool": pool}},
            "spec": {"nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": "d"},
                "requirements": []},
            "status": {"nodeName": name, "providerID": format!("capi://{name}"),
                "conditions": [{"type": "Initialized", "status": "True", "reason": "Initialized",
                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        })));
        self
    }

    /// A Running, Ready pod `name` requesting `cpu` on `node` (`None`: pending).
    pub fn pod(&mut self, name: &str, node: Option<&str>, cpu: &str) -> &mut Pod {
        let mut spec =
            json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]});
        let status = if let Some(node) = node {
            spec["nodeName"] = json!(node);
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                "startTime": "2026-01-01T00:00:00Z"})
        } else {
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]})
        };
        self.pods.push(Arc::new(from(json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                "labels": {"app": name},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                    "uid": "rs", "controller": true}]},
            "spec": spec,
            "status": status
        }))));
        Arc::make_mut(self.pods.last_mut().unwrap())
    }

    /// A PDB selecting `app=<app>` with `allowed` disruptions allowed.
    pub fn pdb(&mut self, app: &str, allowed: i32) {
        self.pdbs.push(from(json!({
            "metadata": {"name": app, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": app}}, "maxUnavailable": 1},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1,
                "expectedPods": 1}
        })));
    }

    /// Sets `pool`'s consolidation policy.
    pub fn policy(&mut self, pool: &str, policy: api::nodepool::ConsolidationPolicy) {
        let p = self
            .node_pools
            .iter_mut()
            .find(|p| p.metadata.name.as_deref() == Some(pool))
            .unwrap();
        p.spec.disruption.as_mut().unwrap().consolidation_policy = Some(policy);
    }

    /// A pod as [`Self::pod`] that may only run on nodes of `pool`.
    pub fn pinned_pod(&mut self, name: &str, node: Option<&str>, cpu: &str, pool: &str) {
        self.pod(name, node, cpu)
            .spec
            .as_mut()
            .unwrap()
            .node_selector = Some(BTreeMap::from([(
            "karpenter.sh/nodepool".to_owned(),
            pool.to_owned(),
        )]));
    }

    /// Candidates of `class` at [`now`].
    pub fn candidates(&self, class: Class) -> (Vec<Candidate>, Vec<super::candidates::Blocked>) {
        let nominated = |n: &str| self.nominated.contains(n);
        let planned = |c: &str| self.planned.get(c).cloned().unwrap_or_default();
        let last = |_: &str| None;
        candidates(
            &Inputs {
                nodes: &self.nodes,
                node_claims: &self.node_claims,
                pods: &self.pods,
                pdbs: &self.pdbs,
                node_pools: &self.node_pools,
                instance_types: &self.instance_types,
                in_flight: &self.in_flight,
                nominated: &nominated,
                planned: &planned,
                last_pod_event: &last,
                floors: &self.floors,
                now: now(),
            },
            class,
        )
    }

    /// The fixture's objects at [`now`].
    pub fn objects(&self) -> Objects<'_> {
        Objects {
            cluster: ClusterObjects {
                nodes: &self.nodes,
                node_claims: &self.node_claims,
                pods: &self.pods,
                daemon_sets: &[],
                namespaces: &[],
            },
            node_pools: &self.node_pools,
            pdbs: &self.pdbs,
            instance_types: &self.instance_types,
            now: now(),
            last_pod_event: None,
        }
    }

    /// What disruption would do ([`super::explain`]) at [`now`].
    pub fn explain(&self) -> super::explain::Explanation {
        super::explain::explain(&self.objects(), &fake_well_known_labels())
    }

    /// The simulation world.
    pub fn world(&self) -> World {
        World::new(&self.objects(), &fake_well_known_labels())
    }
}

/// Two NodePools alike, `balanced` (Balanced) and `standard` (the default policy), offering
/// `big` (8 cpu, $1.0/h) and `medium` (4 cpu, $0.9/h). Each has a `big` node full with one pod
/// (`*-full`) and a `big` node holding one 3-cpu pod that a `medium` node could take
/// (`*-half`), saving $0.1/h. Pods stay in their NodePool. In `balanced` (cost $2/h,
/// disruption 4) replacing `b-half` saves 5 % of the cost for 50 % of the disruption: a score
/// of 0.1.
pub fn marginal_replacements() -> Fixture {
    let big = instance_type("big", 8, 1.0);
    let medium = instance_type("medium", 4, 0.9);
    let mut f = Fixture::default();
    for (pool, prefix) in [("balanced", "b"), ("standard", "s")] {
        f.pool(pool, vec![big.clone(), medium.clone()]);
        f.node(&format!("{prefix}-full"), pool, &big);
        f.node(&format!("{prefix}-half"), pool, &big);
        f.pinned_pod(
            &format!("{prefix}-7"),
            Some(&format!("{prefix}-full")),
            "7",
            pool,
        );
        f.pinned_pod(
            &format!("{prefix}-3"),
            Some(&format!("{prefix}-half")),
            "3",
            pool,
        );
    }
    f.policy("balanced", api::nodepool::ConsolidationPolicy::Balanced);
    f
}
