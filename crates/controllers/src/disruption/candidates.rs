//! Which nodes voluntary disruption may consider (spec §5.3, §5.15).
//!
//! Responsibility: from one snapshot, every managed node that is a disruption candidate, with
//! its NodePool, instance type, price, reschedulable pods and disruption cost; and every node
//! that is not, with the reason (for `DisruptionBlocked` Events and `plan`). A node is a
//! candidate when: it is not in a command in flight; it has a Node and a NodeClaim of ours
//! (nodepool label), both Initialized and neither being deleted nor tainted
//! `karpenter.sh/disrupted`; it is not nominated, and its NodeClaim was not created for pods
//! that are still unbound (for [`PLANNED_WINDOW`] after it initialized: the scheduler may bind
//! them a moment after the node turns Ready, and an empty-looking node is not empty) or, as a
//! disruption replacement, for pods still on the nodes it replaces (until they are evicted:
//! a fresh replacement is not empty, it waits for them); neither carries
//! `karpenter.sh/do-not-disrupt: "true"`; its NodePool exists and offers instance types; and,
//! unless the class is eventual and the NodeClaim has a `terminationGracePeriod`, no active pod
//! on it has an active do-not-disrupt annotation and every evictable pod could be evicted now
//! ([`super::pdb`]). For the graceful class, its scaling group must also be above its minimum
//! size ([`super::floors`]).
//!
//! Inputs: [`Inputs`] (a snapshot plus instance types, the nodes in flight, nominations,
//! consolidation state and "now"). Outputs: [`Candidate`]s and [`Blocked`] nodes. Pure.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use api::common::Conditions;
use api::well_known::annotations::DO_NOT_DISRUPT;
use api::well_known::conditions::INITIALIZED;
use api::{NodeClaim, NodePool};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use scheduling::instance_type::{InstanceType, Offering, OfferingIterExt};
use scheduling::labels::{CAPACITY_TYPE, INSTANCE_TYPE, NODE_POOL, TOPOLOGY_ZONE};

use super::consolidatable::{self, Consolidation};
use super::floors::{Floor, Floors};
use super::pdb::Pdbs;
use crate::termination::do_not_disrupt::do_not_disrupt;
use crate::termination::pods::{
    is_daemon_set_pod, is_mirror, is_terminal, is_terminating, tolerates_disrupted,
};

/// How long after its NodeClaim initialized a node stays reserved for the still-unbound pods
/// it was created for (upstream nominates nodes for twice the batch's maximum duration).
pub const PLANNED_WINDOW: std::time::Duration = std::time::Duration::from_secs(20);

/// How a method disrupts (spec §5.2): graceful methods respect pod-level blocks; eventual
/// ones (drift) ignore them for NodeClaims with a `terminationGracePeriod`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Emptiness, consolidation.
    Graceful,
    /// Drift.
    Eventual,
}

/// What candidates are computed from.
#[derive(Clone, Copy)]
pub struct Inputs<'a> {
    /// Nodes.
    pub nodes: &'a [Node],
    /// NodeClaims.
    pub node_claims: &'a [NodeClaim],
    /// Pods.
    pub pods: &'a [Arc<Pod>],
    /// PodDisruptionBudgets.
    pub pdbs: &'a [PodDisruptionBudget],
    /// NodePools.
    pub node_pools: &'a [NodePool],
    /// Instance types per NodePool (pools whose lookup failed are absent).
    pub instance_types: &'a BTreeMap<String, Vec<Arc<InstanceType>>>,
    /// Nodes in a command in flight.
    pub in_flight: &'a BTreeSet<String>,
    /// Whether a node is nominated for pods now.
    pub nominated: &'a dyn Fn(&str) -> bool,
    /// The UIDs of the pods a NodeClaim (by name) was created for, if this process knows.
    pub planned: &'a dyn Fn(&str) -> Vec<String>,
    /// The last pod event seen on a node.
    pub last_pod_event: &'a dyn Fn(&str) -> Option<Timestamp>,
    /// The minimum sizes of the nodes' scaling groups.
    pub floors: &'a Floors,
    /// Now.
    pub now: Timestamp,
}

impl std::fmt::Debug for Inputs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inputs")
            .field("nodes", &self.nodes.len())
            .field("pods", &self.pods.len())
            .finish_non_exhaustive()
    }
}

/// A node disruption may consider.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The Node.
    pub node: String,
    /// Its NodeClaim.
    pub node_claim: String,
    /// The NodeClaim's UID (the command deletes exactly this object).
    pub node_claim_uid: Option<String>,
    /// Its NodePool.
    pub node_pool: String,
    /// Its instance type, if the NodePool still offers it.
    pub instance_type: Option<Arc<InstanceType>>,
    /// Its instance-type label.
    pub instance_type_name: Option<String>,
    /// Its zone label.
    pub zone: Option<String>,
    /// Its capacity-type label.
    pub capacity_type: Option<String>,
    /// Its price per hour (0 when unknown).
    pub price: f64,
    /// Whether its price is known. Consolidation replaces only priced nodes, with priced
    /// ones; an unpriced node can still be removed outright.
    pub priced: bool,
    /// Pods that must find a new home (shared with the loop's snapshot, not copies).
    pub reschedulable: Vec<Arc<Pod>>,
    /// 1 + the positive eviction costs of the reschedulable pods.
    pub disruption_cost: f64,
    /// Consolidatable (spec §5.1).
    pub consolidation: Consolidation,
    /// Since when the NodeClaim's Drifted condition is True.
    pub drifted: Option<Timestamp>,
    /// The scaling group whose minimum size bounds removing it without a replacement.
    pub group: Option<String>,
    /// CapacityBuffer virtual pods the last provisioning pass put on it: emptiness leaves it
    /// alone (set by the disruption controller from the state; 0 elsewhere).
    pub buffer_pods: usize,
}

impl Candidate {
    /// No reschedulable pod with a positive eviction cost (spec §5.3 `IsEmpty`).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.disruption_cost <= 1.0
    }

    /// Price per unit of disruption: consolidation tries the highest first.
    #[must_use]
    pub fn savings_ratio(&self) -> f64 {
        self.price / self.disruption_cost
    }
}

/// A node that is not a candidate, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// The Node (or the NodeClaim when there is no Node).
    pub node: String,
    /// The NodeClaim, if any.
    pub node_claim: Option<String>,
    /// Why (upstream's wording where it has one).
    pub reason: String,
    /// Whether the reason deserves a `DisruptionBlocked` Event (not for nodes that are merely
    /// busy: in flight, deleting, uninitialized).
    pub notable: bool,
    /// Whether the reason passes by itself soon (in flight, deleting, uninitialized,
    /// nominated): the node may become a candidate without anything else changing.
    pub transient: bool,
}

/// The NodeClaim is ours: its NodeClass is a ClusterAPINodeClass. Disruption never marks,
/// clears, writes or deletes another provider's NodeClaims or their nodes.
#[must_use]
pub fn is_ours(nc: &NodeClaim) -> bool {
    nc.spec.node_class_ref.group == <api::ClusterAPINodeClass as kube::Resource>::group(&())
}

/// The eviction cost of a pod (spec §5.3): 1 + deletion cost / 2^27 + priority / 2^25, in
/// [-10, 10].
#[must_use]
pub fn eviction_cost(pod: &Pod) -> f64 {
    let deletion = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("controller.kubernetes.io/pod-deletion-cost"))
        .and_then(|v| v.parse::<i32>().ok())
        .map_or(0.0, f64::from);
    let priority = pod
        .spec
        .as_ref()
        .and_then(|s| s.priority)
        .map_or(0.0, f64::from);
    (1.0 + deletion / f64::from(1_u32 << 27) + priority / f64::from(1_u32 << 25)).clamp(-10.0, 10.0)
}

fn is_stateful_set_pod(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "StatefulSet")
}

/// The pod must find a new home when its node goes: active (or a terminating StatefulSet
/// pod, whose replacement keeps its name), not DaemonSet-owned, not a mirror pod.
#[must_use]
pub fn is_reschedulable(pod: &Pod) -> bool {
    !is_terminal(pod)
        && (!is_terminating(pod) || is_stateful_set_pod(pod))
        && !is_daemon_set_pod(pod)
        && !is_mirror(pod)
}

fn annotated_do_not_disrupt(annotations: Option<&BTreeMap<String, String>>) -> bool {
    annotations
        .and_then(|a| a.get(DO_NOT_DISRUPT))
        .is_some_and(|v| v == "true")
}

fn key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Why the pods on a node keep it (graceful class), if they do.
fn pod_block(pods: &[&Arc<Pod>], pdbs: &Pdbs<'_>, now: Timestamp) -> Option<String> {
    for pod in pods
        .iter()
        .filter(|p| !is_terminal(p) && !is_terminating(p))
    {
        if do_not_disrupt(pod).is_active(pod, now) {
            return Some(format!(
                "pod {:?} has \"karpenter.sh/do-not-disrupt\" annotation",
                key(pod)
            ));
        }
    }
    for pod in pods
        .iter()
        .filter(|p| !is_terminal(p) && !is_terminating(p))
        .filter(|p| !tolerates_disrupted(p) && !is_mirror(p))
    {
        if let Err(e) = pdbs.can_evict(pod) {
            return Some(e);
        }
    }
    None
}

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// The price of the offering a node runs on (by instance type, zone, capacity type): the
/// cheapest matching one by [`scheduling::instance_type::PriceRank`]. `None` when no offering
/// matches or it is unpriced.
pub(super) fn offering_price(
    it: Option<&Arc<InstanceType>>,
    zone: Option<&str>,
    capacity_type: Option<&str>,
) -> Option<f64> {
    it.into_iter()
        .flat_map(|it| it.offerings().iter())
        .filter(|o| zone.is_none_or(|z| o.zone() == Some(z)))
        .filter(|o| capacity_type.is_none_or(|c| o.capacity_type() == Some(c)))
        .cheapest()
        .and_then(Offering::known_price)
}

/// Whether `nc` still waits for a pod it was created for: one that is unbound (not on any
/// node, not finished, not being deleted) while `nc` initialized less than
/// [`PLANNED_WINDOW`] ago, or — a disruption replacement, made for the pods of the nodes it
/// replaces — one still on a node that is leaving (in a command in flight, tainted
/// `karpenter.sh/disrupted`, or deleting), however long its drain takes: the node's pods come
/// to the replacement only when they are evicted.
fn awaits_planned_pods(inputs: &Inputs<'_>, nc: &NodeClaim, leaving: &BTreeSet<&str>) -> bool {
    let Some(name) = nc.metadata.name.as_deref() else {
        return false;
    };
    let planned = (inputs.planned)(name);
    if planned.is_empty() {
        return false;
    }
    let initialized_at = nc
        .status
        .as_ref()
        .and_then(|s| s.conditions.condition(INITIALIZED))
        .map(|c| c.last_transition_time.0);
    let recent = initialized_at.is_none_or(|at| {
        inputs.now < at
            || inputs
                .now
                .duration_since(at)
                .try_into()
                .is_ok_and(|d: std::time::Duration| d < PLANNED_WINDOW)
    });
    inputs.pods.iter().any(|p| {
        if !p.metadata.uid.as_ref().is_some_and(|u| planned.contains(u)) || is_terminal(p) {
            return false;
        }
        match p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            None => recent && p.metadata.deletion_timestamp.is_none(),
            Some(node) => leaving.contains(node),
        }
    })
}

/// The nodes whose pods are leaving them: in a command in flight, tainted
/// `karpenter.sh/disrupted`, or being deleted (the Node or its NodeClaim).
fn leaving_nodes<'a>(inputs: &Inputs<'a>) -> BTreeSet<&'a str> {
    let mut out = crate::provisioning::inputs::deleting_nodes(inputs.nodes, inputs.node_claims);
    out.extend(inputs.nodes.iter().filter_map(|n| {
        let name = n.metadata.name.as_deref()?;
        (inputs.in_flight.contains(name) || super::writes::is_tainted(n)).then_some(name)
    }));
    out
}

/// Every candidate and every managed node that is not one.
#[must_use]
pub fn candidates(inputs: &Inputs<'_>, class: Class) -> (Vec<Candidate>, Vec<Blocked>) {
    let pdbs = Pdbs::new(inputs.pdbs);
    let mut pods_by_node: BTreeMap<&str, Vec<&Arc<Pod>>> = BTreeMap::new();
    for pod in inputs.pods {
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            pods_by_node.entry(node).or_default().push(pod);
        }
    }
    let claims: BTreeMap<&str, &NodeClaim> = inputs
        .node_claims
        .iter()
        .filter_map(|nc| {
            let node = nc.status.as_ref()?.node_name.as_deref()?;
            Some((node, nc))
        })
        .collect();
    let leaving = leaving_nodes(inputs);
    let mut out = Vec::new();
    let mut blocked = Vec::new();
    for node in inputs.nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let Some(pool_name) = label(node, NODE_POOL) else {
            continue;
        };
        let nc = claims.get(name.as_str()).copied();
        let block = |reason: String, notable: bool| Blocked {
            node: name.clone(),
            node_claim: nc.and_then(|c| c.metadata.name.clone()),
            reason,
            notable,
            transient: false,
        };
        let passing = |reason: &str, notable: bool| Blocked {
            transient: true,
            ..block(reason.to_owned(), notable)
        };
        if node.metadata.deletion_timestamp.is_some() {
            blocked.push(passing("node is deleting or marked for deletion", false));
            continue;
        }
        let Some(nc) = nc else {
            blocked.push(block("node has no nodeclaim".into(), false));
            continue;
        };
        if !is_ours(nc) {
            continue;
        }
        if inputs.in_flight.contains(&name) {
            blocked.push(passing("node is part of a disruption in progress", false));
            continue;
        }
        if nc.metadata.deletion_timestamp.is_some() || super::writes::is_tainted(node) {
            blocked.push(passing("node is deleting or marked for deletion", false));
            continue;
        }
        let initialized = label(node, scheduling::labels::NODE_INITIALIZED) == Some("true")
            && nc
                .status
                .as_ref()
                .is_some_and(|s| s.conditions.is_true(INITIALIZED));
        if !initialized {
            blocked.push(passing("node is not initialized", false));
            continue;
        }
        if (inputs.nominated)(&name) || awaits_planned_pods(inputs, nc, &leaving) {
            blocked.push(passing("node is nominated for a pending pod", true));
            continue;
        }
        if annotated_do_not_disrupt(node.metadata.annotations.as_ref())
            || annotated_do_not_disrupt(nc.metadata.annotations.as_ref())
        {
            blocked.push(block(
                "node has \"karpenter.sh/do-not-disrupt\" annotation".into(),
                true,
            ));
            continue;
        }
        let Some(pool) = inputs
            .node_pools
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(pool_name))
        else {
            blocked.push(block(format!("nodepool {pool_name:?} not found"), true));
            continue;
        };
        let Some(its) = inputs
            .instance_types
            .get(pool_name)
            .filter(|i| !i.is_empty())
        else {
            blocked.push(block(
                format!("nodepool {pool_name:?} has no resolvable instance types"),
                true,
            ));
            continue;
        };
        let nc_name = nc.metadata.name.as_deref().unwrap_or_default();
        let mut group = None;
        match inputs.floors.of(nc_name) {
            Some(Floor::Held(why)) => {
                blocked.push(block(why.to_owned(), true));
                continue;
            }
            Some(Floor::Unknown(e)) if class == Class::Graceful => {
                blocked.push(block(
                    format!("the minimum size of its group cannot be read: {e}"),
                    true,
                ));
                continue;
            }
            Some(Floor::Group {
                group: g,
                min,
                room,
                ..
            }) if class == Class::Graceful => {
                if room == 0 {
                    blocked.push(block(format!("{g} is at its minimum size ({min})"), true));
                    continue;
                }
                group = Some(g.to_owned());
            }
            _ => {}
        }
        let pods = pods_by_node.get(name.as_str()).cloned().unwrap_or_default();
        let tgp = nc.spec.termination_grace_period.is_some();
        if (class == Class::Graceful || !tgp)
            && let Some(reason) = pod_block(&pods, &pdbs, inputs.now)
        {
            blocked.push(block(reason, true));
            continue;
        }
        let instance_type_name = label(node, INSTANCE_TYPE).map(str::to_owned);
        let instance_type = instance_type_name
            .as_deref()
            .and_then(|n| its.iter().find(|it| it.name() == n))
            .cloned();
        let zone = label(node, TOPOLOGY_ZONE).map(str::to_owned);
        let capacity_type = label(node, CAPACITY_TYPE).map(str::to_owned);
        let reschedulable: Vec<Arc<Pod>> = pods
            .iter()
            .filter(|p| is_reschedulable(p))
            .map(|p| Arc::clone(p))
            .collect();
        let disruption_cost = 1.0
            + reschedulable
                .iter()
                .map(|p| eviction_cost(p).max(0.0))
                .sum::<f64>();
        let price = offering_price(
            instance_type.as_ref(),
            zone.as_deref(),
            capacity_type.as_deref(),
        );
        out.push(Candidate {
            price: price.unwrap_or(0.0),
            priced: price.is_some(),
            node: name.clone(),
            node_claim: nc.metadata.name.clone().unwrap_or_default(),
            node_claim_uid: nc.metadata.uid.clone(),
            node_pool: pool_name.to_owned(),
            instance_type,
            instance_type_name,
            zone,
            capacity_type,
            reschedulable,
            disruption_cost,
            consolidation: consolidatable::evaluate(
                nc,
                pool,
                (inputs.last_pod_event)(&name),
                inputs.now,
            ),
            drifted: nc
                .status
                .as_ref()
                .and_then(|s| s.conditions.condition(api::well_known::conditions::DRIFTED))
                .filter(|c| c.status == api::common::ConditionStatus::True)
                .map(|c| c.last_transition_time.0),
            group,
            buffer_pods: 0,
        });
    }
    (out, blocked)
}

#[cfg(test)]
mod tests;
