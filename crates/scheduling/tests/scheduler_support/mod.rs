//! Shared helpers for the scheduler's end-to-end behaviour tests: NodePool, existing-node and
//! DaemonSet builders, one-call solves, and queries over [`Results`] (where did a pod go, what
//! does a planned NodeClaim require).

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;

use scheduling::fixtures::{default_fake_instance_types, node_pool, options};
use scheduling::instance_type::{InstanceType, MinValuesPolicy};
use scheduling::labels::{HOSTNAME, NODE_POOL, TOPOLOGY_ZONE};
use scheduling::pod::Pod;
use scheduling::requirements::{Operator, Requirement};
use scheduling::resources::{ResourceName, Resources};
use scheduling::scheduler::{
    Cluster, ExistingNode, NodePool, Options, PlannedNodeClaim, PreferencePolicy, Results,
    Scheduler,
};
use scheduling::taints::{Taint, TaintEffect, Toleration, TolerationOperator};

pub const ZONE_1: &str = "test-zone-1";
pub const ZONE_2: &str = "test-zone-2";
pub const ZONE_3: &str = "test-zone-3";

/// The fake provider's default catalogue.
pub fn catalogue() -> Vec<Arc<InstanceType>> {
    default_fake_instance_types().unwrap()
}

/// A NodePool named `name` over the default catalogue.
pub fn pool(name: &str) -> NodePool {
    node_pool(name, catalogue())
}

/// Consuming builder methods for [`NodePool`].
pub trait PoolExt: Sized {
    fn with_weight(self, weight: i32) -> Self;
    fn with_label(self, key: &str, value: &str) -> Self;
    fn with_requirement(self, requirement: Requirement) -> Self;
    fn with_taint(self, taint: Taint) -> Self;
    fn with_startup_taint(self, taint: Taint) -> Self;
    fn with_limits(self, limits: &[(&str, &str)]) -> Self;
    fn with_instance_types(self, its: Vec<Arc<InstanceType>>) -> Self;
}

impl PoolExt for NodePool {
    fn with_weight(mut self, weight: i32) -> Self {
        self.weight = weight;
        self
    }
    fn with_label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(Arc::from(key), Arc::from(value));
        self
    }
    fn with_requirement(mut self, requirement: Requirement) -> Self {
        self.requirements.add(requirement);
        self
    }
    fn with_taint(mut self, taint: Taint) -> Self {
        self.taints.push(taint);
        self
    }
    fn with_startup_taint(mut self, taint: Taint) -> Self {
        self.startup_taints.push(taint);
        self
    }
    fn with_limits(mut self, limits: &[(&str, &str)]) -> Self {
        self.limits = Some(Resources::parse(limits.iter().copied()).unwrap());
        self
    }
    fn with_instance_types(mut self, its: Vec<Arc<InstanceType>>) -> Self {
        self.instance_types = its;
        self
    }
}

/// A requirement from an operator and string values.
pub fn req(key: &str, operator: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, operator, values.iter().copied()).unwrap()
}

pub fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
    Taint::new(key, value, effect)
}

/// Tolerates every taint with `key` (any value, any effect).
pub fn tolerate(key: &str) -> Toleration {
    Toleration {
        key: key.into(),
        operator: TolerationOperator::Exists,
        ..Toleration::default()
    }
}

/// Tolerates `key=value` with `effect`.
pub fn tolerate_equal(key: &str, value: &str, effect: TaintEffect) -> Toleration {
    Toleration {
        key: key.into(),
        operator: TolerationOperator::Equal,
        value: value.into(),
        effect: Some(effect),
        toleration_seconds: None,
    }
}

pub fn resources(pairs: &[(&str, &str)]) -> Resources {
    Resources::parse(pairs.iter().copied()).unwrap()
}

/// An initialized existing node with this allocatable (also its capacity), labelled with its
/// hostname.
pub fn node(name: &str, allocatable: &[(&str, &str)]) -> ExistingNode {
    let allocatable = resources(allocatable);
    ExistingNode {
        name: Arc::from(name),
        labels: [(Arc::from(HOSTNAME), Arc::from(name))].into(),
        taints: Vec::new(),
        capacity: allocatable.clone(),
        allocatable,
        initialized: true,
    }
}

/// Consuming builder methods for [`ExistingNode`].
pub trait NodeExt: Sized {
    fn with_label(self, key: &str, value: &str) -> Self;
    fn in_zone(self, zone: &str) -> Self;
    fn owned_by(self, pool: &str) -> Self;
    fn with_taint(self, taint: Taint) -> Self;
    fn uninitialized(self) -> Self;
}

impl NodeExt for ExistingNode {
    fn with_label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(Arc::from(key), Arc::from(value));
        self
    }
    fn in_zone(self, zone: &str) -> Self {
        self.with_label(TOPOLOGY_ZONE, zone)
    }
    fn owned_by(self, pool: &str) -> Self {
        self.with_label(NODE_POOL, pool)
    }
    fn with_taint(mut self, taint: Taint) -> Self {
        self.taints.push(taint);
        self
    }
    fn uninitialized(mut self) -> Self {
        self.initialized = false;
        self
    }
}

/// `pod` bound to `node`.
pub fn bound(mut pod: Pod, node: &str) -> Pod {
    pod.node_name = Some(Arc::from(node));
    pod
}

/// `pod` as a DaemonSet's pod.
pub fn daemon(mut pod: Pod) -> Pod {
    pod.owned_by_daemonset = true;
    pod
}

/// Options with the fake well-known labels and the Respect policy.
pub fn respect() -> Options {
    options(PreferencePolicy::Respect)
}

/// Options with the fake well-known labels and the Ignore policy.
pub fn ignore() -> Options {
    options(PreferencePolicy::Ignore)
}

/// Respect policy with best-effort minValues.
pub fn best_effort() -> Options {
    Options {
        min_values_policy: MinValuesPolicy::BestEffort,
        ..respect()
    }
}

/// One solve with the Respect policy.
pub fn solve(pools: &[NodePool], cluster: &Cluster, pods: &[Pod]) -> Results {
    solve_with(pools, cluster, pods, respect())
}

/// One solve with the given options.
pub fn solve_with(
    pools: &[NodePool],
    cluster: &Cluster,
    pods: &[Pod],
    options: Options,
) -> Results {
    Scheduler::new(pools, cluster, pods, options).solve(pods)
}

/// One solve of `pods` on a single default NodePool and an empty cluster.
pub fn solve_default(pods: &[Pod]) -> Results {
    solve(&[pool("default")], &Cluster::default(), pods)
}

/// A cluster of these nodes with these bound pods.
pub fn cluster(nodes: Vec<ExistingNode>, pods: Vec<Pod>) -> Cluster {
    Cluster {
        nodes,
        pods,
        ..Cluster::default()
    }
}

/// A cluster with only these DaemonSet pods.
pub fn with_daemonsets(daemonset_pods: Vec<Pod>) -> Cluster {
    Cluster {
        daemonset_pods,
        ..Cluster::default()
    }
}

/// The planned NodeClaim `pod` is on, if any.
pub fn claim_of<'a>(results: &'a Results, pod: &Pod) -> Option<&'a PlannedNodeClaim> {
    results
        .new_node_claims
        .iter()
        .find(|nc| nc.pods.contains(&pod.uid))
}

/// Index of the planned NodeClaim `pod` is on.
pub fn claim_index(results: &Results, pod: &Pod) -> Option<usize> {
    results
        .new_node_claims
        .iter()
        .position(|nc| nc.pods.contains(&pod.uid))
}

/// The planned NodeClaim `pod` is on; panics with the pod's error otherwise.
pub fn expect_claim<'a>(results: &'a Results, pod: &Pod) -> &'a PlannedNodeClaim {
    claim_of(results, pod).unwrap_or_else(|| {
        panic!(
            "pod {} is not on a new NodeClaim; error: {:?}; bindings: {:?}",
            pod.name,
            error_of(results, pod),
            results.existing_nodes
        )
    })
}

/// The existing node `pod` was bound to, if any.
pub fn node_of<'a>(results: &'a Results, pod: &Pod) -> Option<&'a str> {
    results
        .existing_nodes
        .iter()
        .find(|b| b.pods.contains(&pod.uid))
        .map(|b| &*b.node)
}

/// The error of `pod`, if any.
pub fn error_of<'a>(results: &'a Results, pod: &Pod) -> Option<&'a str> {
    results
        .errors
        .iter()
        .find(|e| e.uid == pod.uid)
        .map(|e| e.message.as_str())
}

/// The error of `pod`; panics if it was placed.
pub fn expect_error<'a>(results: &'a Results, pod: &Pod) -> &'a str {
    error_of(results, pod).unwrap_or_else(|| {
        panic!(
            "pod {} was placed (claim {:?}, node {:?}) but should have failed",
            pod.name,
            claim_of(results, pod).map(|c| names(c)),
            node_of(results, pod)
        )
    })
}

/// Panics unless every pod is on a new NodeClaim or an existing node.
pub fn assert_all_placed(results: &Results, pods: &[Pod]) {
    assert!(
        results.errors.is_empty(),
        "unexpected errors: {:?}",
        results.errors
    );
    for pod in pods {
        assert!(
            claim_of(results, pod).is_some() || node_of(results, pod).is_some(),
            "pod {} is nowhere",
            pod.name
        );
    }
}

/// Instance-type names of a planned NodeClaim, in its order.
pub fn names(claim: &PlannedNodeClaim) -> Vec<&str> {
    claim.instance_types.iter().map(|it| it.name()).collect()
}

/// The sorted values a planned NodeClaim's requirement on `key` allows (empty when undefined or
/// a complement).
pub fn values(claim: &PlannedNodeClaim, key: &str) -> Vec<String> {
    values_of(&claim.requirements, key)
}

/// Like [`values`], over the requirements the NodeClaim would be created with.
pub fn launch_values(claim: &PlannedNodeClaim, key: &str) -> Vec<String> {
    values_of(
        &claim.launch_requirements(&scheduling::fixtures::fake_well_known_labels()),
        key,
    )
}

fn values_of(requirements: &scheduling::requirements::Requirements, key: &str) -> Vec<String> {
    let Some(requirement) = requirements.get(key) else {
        return Vec::new();
    };
    if requirement.is_complement() {
        return Vec::new();
    }
    let mut values: Vec<String> = requirement.values().iter().map(|v| v.to_string()).collect();
    values.sort();
    values
}

/// The single value a planned NodeClaim requires for `key`, if it requires exactly one.
pub fn single(claim: &PlannedNodeClaim, key: &str) -> Option<String> {
    match values(claim, key).as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

/// The zone a planned NodeClaim is pinned to; panics when it is not pinned.
pub fn zone(claim: &PlannedNodeClaim) -> String {
    single(claim, TOPOLOGY_ZONE).unwrap_or_else(|| {
        panic!(
            "claim is not pinned to one zone: {:?}",
            values(claim, TOPOLOGY_ZONE)
        )
    })
}

/// A quantity of `resource` in a list (zero when absent), as a string for readable asserts.
pub fn quantity(resources: &Resources, resource: &str) -> String {
    resources
        .get_or_zero(&ResourceName::new(resource))
        .to_string()
}

/// Sum of the requests of the pods with these UIDs.
pub fn requests_of(pods: &[Pod], uids: &[Arc<str>]) -> Resources {
    let mut total = Resources::default();
    for uid in uids {
        let pod = pods.iter().find(|p| &p.uid == uid).unwrap();
        total.merge(&pod.requests);
    }
    total
}

/// Per zone, how many of `pods` the plan pins there (placed pods on unpinned claims ignored).
pub fn zone_counts(results: &Results, pods: &[Pod]) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for pod in pods {
        if let Some(zone) = claim_of(results, pod).and_then(|c| single(c, TOPOLOGY_ZONE)) {
            *counts.entry(zone).or_insert(0) += 1;
        }
    }
    counts
}
