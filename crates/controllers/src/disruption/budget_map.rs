//! The budget map one disruption method works with (spec §5.4).
//!
//! Responsibility: per NodePool, how many more of its nodes a method may disrupt for a reason
//! now: the pool's allowed disruptions ([`super::budgets::allowed_for_reason`]) over its
//! managed, initialized nodes whose NodeClaim is not `InstanceTerminating`, minus those
//! already disrupting (Node not Ready, being deleted, tainted `karpenter.sh/disrupted`, or in
//! a command in flight), never below 0. Also the un-subtracted allowed value and the count
//! consuming the budget (for the gauges), and the budgets that could not be evaluated.
//!
//! Inputs: Nodes, NodeClaims, NodePools, the nodes in flight, the reason, "now". Output:
//! [`BudgetMap`]. Pure.

use std::collections::{BTreeMap, BTreeSet};

use api::common::Conditions;
use api::nodepool::DisruptionReason;
use api::well_known::conditions::{INITIALIZED, INSTANCE_TERMINATING};
use api::{NodeClaim, NodePool};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use scheduling::labels::{NODE_INITIALIZED, NODE_POOL};

use super::budgets::{self, BudgetError};
use super::candidates::Candidate;
use crate::termination::node::is_ready;

/// One pool's budget for one reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolBudget {
    /// Nodes counted.
    pub nodes: usize,
    /// What the budgets allow (`i32::MAX` when no budget is active).
    pub allowed: i32,
    /// Nodes already disrupting.
    pub disrupting: usize,
    /// What is left.
    pub remaining: usize,
}

/// Per NodePool name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BudgetMap {
    /// The pools.
    pub pools: BTreeMap<String, PoolBudget>,
    /// Budgets that could not be evaluated (each allowed 0), by pool.
    pub errors: Vec<(String, BudgetError)>,
    /// How many more nodes each scaling group may lose without a replacement
    /// ([`super::floors`]); a group not here is not bounded.
    pub groups: BTreeMap<String, usize>,
}

impl BudgetMap {
    /// What is left for `pool` (0 for a pool not in the map).
    #[must_use]
    pub fn remaining(&self, pool: &str) -> usize {
        self.pools.get(pool).map_or(0, |b| b.remaining)
    }

    /// Uses one disruption of `pool`; false when none was left.
    pub fn take(&mut self, pool: &str) -> bool {
        match self.pools.get_mut(pool) {
            Some(b) if b.remaining > 0 => {
                b.remaining -= 1;
                true
            }
            _ => false,
        }
    }

    /// Whether one more of `c`'s pool and group may go.
    #[must_use]
    pub fn allows(&self, c: &Candidate) -> bool {
        self.remaining(&c.node_pool) > 0
            && c.group
                .as_ref()
                .and_then(|g| self.groups.get(g))
                .is_none_or(|room| *room > 0)
    }

    /// Uses one disruption of `c`'s pool and one of its group's room; false (nothing used)
    /// when either was exhausted.
    pub fn take_for(&mut self, c: &Candidate) -> bool {
        if !self.allows(c) || !self.take(&c.node_pool) {
            return false;
        }
        if let Some(room) = c.group.as_ref().and_then(|g| self.groups.get_mut(g)) {
            *room -= 1;
        }
        true
    }
}

/// Computes the map for `reason`.
#[must_use]
pub fn budget_map(
    nodes: &[Node],
    node_claims: &[NodeClaim],
    node_pools: &[NodePool],
    in_flight: &BTreeSet<String>,
    reason: DisruptionReason,
    now: Timestamp,
) -> BudgetMap {
    let claims: BTreeMap<&str, &NodeClaim> = node_claims
        .iter()
        .filter_map(|nc| Some((nc.status.as_ref()?.node_name.as_deref()?, nc)))
        .collect();
    let mut counts: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let labels = node.metadata.labels.as_ref();
        let Some(pool) = labels.and_then(|l| l.get(NODE_POOL)) else {
            continue;
        };
        let Some(nc) = claims.get(name) else {
            continue;
        };
        let status = nc.status.as_ref();
        let initialized = labels
            .and_then(|l| l.get(NODE_INITIALIZED))
            .is_some_and(|v| v == "true")
            && status.is_some_and(|s| s.conditions.is_true(INITIALIZED));
        if !initialized || status.is_some_and(|s| s.conditions.is_true(INSTANCE_TERMINATING)) {
            continue;
        }
        let tainted = super::writes::is_tainted(node);
        let disrupting = !is_ready(node)
            || node.metadata.deletion_timestamp.is_some()
            || nc.metadata.deletion_timestamp.is_some()
            || tainted
            || in_flight.contains(name);
        let entry = counts.entry(pool.as_str()).or_default();
        entry.0 += 1;
        entry.1 += usize::from(disrupting);
    }
    let mut map = BudgetMap::default();
    for pool in node_pools {
        let Some(name) = pool.metadata.name.as_deref() else {
            continue;
        };
        let (count, disrupting) = counts.get(name).copied().unwrap_or_default();
        let (allowed, errors) = budgets::allowed_for_reason(pool, reason, now, count);
        map.errors
            .extend(errors.into_iter().map(|e| (name.to_owned(), e)));
        map.pools.insert(
            name.to_owned(),
            PoolBudget {
                nodes: count,
                allowed,
                disrupting,
                remaining: budgets::remaining(allowed, disrupting),
            },
        );
    }
    map
}
