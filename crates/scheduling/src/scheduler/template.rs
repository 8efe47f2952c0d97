//! NodeClaim templates: one per schedulable NodePool (spec §3.4 steps 3, 8, 10).
//!
//! Responsibility: turn a [`NodePool`] into what new NodeClaims start from — requirements
//! (pool requirements ∩ template labels ∩ `karpenter.sh/nodepool` ∩ the simulation-only
//! registered/initialized keys), labels, taints, the instance types that can serve it at all,
//! grouped by DaemonSet overhead, and the resources left under the pool's limits.
//! Inputs: NodePools, DaemonSet pods, existing nodes (for limits). Outputs: [`Template`]s in
//! upstream's order (weight descending, then name descending), and the pools dropped.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::instance_type::{Dense, InstanceType, MinValuesPolicy};
use crate::labels::{NODE_INITIALIZED, NODE_POOL, NODE_REGISTERED, WellKnownLabels};
use crate::requirements::{Requirement, Requirements};
use crate::resources::{ResourceName, Resources};
use crate::taints::Taint;

use super::daemons::{DaemonPod, Overhead, template_groups};
use super::input::{ExistingNode, NodePool};

/// The instance types of one DaemonSet-overhead group still possible for a NodeClaim.
#[derive(Clone, Debug)]
pub(crate) struct GroupOptions {
    /// Index into [`Template::overheads`].
    pub(crate) group: usize,
    /// The instance types.
    pub(crate) instance_types: Vec<Arc<InstanceType>>,
}

/// A NodePool prepared for scheduling.
#[derive(Debug)]
pub(crate) struct Template {
    pub(crate) pool: Arc<str>,
    pub(crate) requirements: Requirements,
    pub(crate) labels: BTreeMap<Arc<str>, Arc<str>>,
    pub(crate) taints: Vec<Taint>,
    pub(crate) startup_taints: Vec<Taint>,
    pub(crate) overheads: Vec<Overhead>,
    pub(crate) options: Vec<GroupOptions>,
    /// Parallel to [`Self::options`]: per instance type of a group with a DaemonSet overhead,
    /// its allocatable minus that overhead (`None` when negative: it can hold nothing); empty
    /// for a group without overhead (the allocatable itself is meant). Computed once here, so
    /// a claim's headroom does not subtract per option ([`super::claim`]).
    pub(crate) available: Vec<Vec<Option<Dense>>>,
    /// Headroom results of this template's claims, by option list.
    pub(crate) headroom: super::headroom::Cache,
    /// `spec.limits` minus existing capacity, minus what planned NodeClaims may take; `None`
    /// when the pool has no limits.
    pub(crate) remaining: Option<Resources>,
    /// Every key any offering of the template's instance types constrains: the only
    /// requirements an offering's compatibility (and so a price) can depend on.
    pub(crate) offering_keys: Vec<Arc<str>>,
}

/// Why a NodePool cannot be used this round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DroppedPool {
    /// The NodePool.
    pub name: Arc<str>,
    /// Why (e.g. no compatible instance types).
    pub reason: String,
}

/// Builds templates in upstream's order; pools left without instance types are dropped.
pub(crate) fn build(
    pools: &[NodePool],
    daemons: &[DaemonPod],
    nodes: &[ExistingNode],
    limit_usage: &BTreeMap<Arc<str>, Resources>,
    well_known: &WellKnownLabels,
    min_values_policy: MinValuesPolicy,
) -> (Vec<Template>, Vec<DroppedPool>) {
    let mut order: Vec<&NodePool> = pools.iter().collect();
    order.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| b.name.cmp(&a.name)));
    let mut templates = Vec::new();
    let mut dropped = Vec::new();
    for pool in order {
        let mut labels = pool.labels.clone();
        labels.insert(Arc::from(NODE_POOL), pool.name.clone());
        let mut requirements = pool.requirements.clone();
        requirements.add_all(&Requirements::from_labels(labels.iter()));
        requirements.add(Requirement::in_values(NODE_REGISTERED, ["true"]));
        requirements.add(Requirement::in_values(NODE_INITIALIZED, ["true"]));
        let candidates: Vec<Arc<InstanceType>> = pool
            .instance_types
            .iter()
            .filter(|it| {
                requirements.is_intersecting(it.requirements())
                    && it.offerings().iter().any(|o| {
                        o.available && requirements.is_compatible(&o.requirements, well_known)
                    })
            })
            .cloned()
            .collect();
        // Under BestEffort a shortfall is relaxed per NodeClaim (and reported there) instead.
        let candidates = if requirements.has_min_values()
            && min_values_policy == MinValuesPolicy::Strict
        {
            match crate::instance_type::satisfies_min_values(&candidates, &requirements) {
                Ok(_) => candidates,
                Err(e) => {
                    dropped.push(DroppedPool {
                        name: pool.name.clone(),
                        reason: format!("NodePool requirements filtered out all compatible available instance types due to minValues incompatibility: {e}"),
                    });
                    continue;
                }
            }
        } else {
            candidates
        };
        if candidates.is_empty() {
            dropped.push(DroppedPool {
                name: pool.name.clone(),
                reason:
                    "NodePool requirements filtered out all compatible available instance types"
                        .into(),
            });
            continue;
        }
        let mut candidates = candidates;
        crate::instance_type::order_by_price(&mut candidates, &requirements, well_known);
        let offering_keys: Vec<Arc<str>> = candidates
            .iter()
            .flat_map(|it| it.offerings().iter())
            .flat_map(|o| o.requirements.keys().map(Arc::from))
            .collect::<std::collections::BTreeSet<Arc<str>>>()
            .into_iter()
            .collect();
        let (overheads, assignment) = template_groups(
            daemons,
            &pool.taints,
            &requirements,
            &candidates,
            well_known,
        );
        let mut options: Vec<GroupOptions> = (0..overheads.len())
            .map(|group| GroupOptions {
                group,
                instance_types: Vec::new(),
            })
            .collect();
        for (it, group) in candidates.into_iter().zip(assignment) {
            if let Some(g) = options.get_mut(group) {
                g.instance_types.push(it);
            }
        }
        options.retain(|g| !g.instance_types.is_empty());
        let available = options.iter().map(|g| available(&overheads, g)).collect();
        let remaining = pool.limits.as_ref().map(|limits| {
            let mut remaining = limits.clone();
            for node in nodes
                .iter()
                .filter(|n| n.labels.get(NODE_POOL) == Some(&pool.name))
            {
                let mut used = node.capacity.clone();
                used.insert(
                    ResourceName::NODES,
                    crate::quantity::Quantity::from_value(1),
                );
                remaining = remaining.difference(&used);
            }
            if let Some(held) = limit_usage.get(&pool.name) {
                remaining = remaining.difference(held);
            }
            remaining
        });
        templates.push(Template {
            pool: pool.name.clone(),
            requirements,
            labels,
            taints: pool.taints.clone(),
            startup_taints: pool.startup_taints.clone(),
            overheads,
            options,
            available,
            headroom: super::headroom::Cache::default(),
            remaining,
            offering_keys,
        });
    }
    (templates, dropped)
}

/// Per instance type of `group`, its allocatable minus the group's overhead (`None`:
/// negative); empty when the group has none.
fn available(overheads: &[Overhead], group: &GroupOptions) -> Vec<Option<Dense>> {
    match overheads.get(group.group).map(|o| &o.requests) {
        Some(overhead) if !overhead.is_empty() => group
            .instance_types
            .iter()
            .map(|it| {
                let dense = it.dense_allocatable().minus(overhead);
                (!dense.is_negative()).then_some(dense)
            })
            .collect(),
        _ => Vec::new(),
    }
}

impl Template {
    /// Whether a PreferNoSchedule taint is among the template's taints.
    pub(crate) fn has_prefer_no_schedule(&self) -> bool {
        self.taints
            .iter()
            .any(|t| t.effect == crate::taints::TaintEffect::PreferNoSchedule)
    }
}
