//! The consolidation searches (spec §5.10, §5.11), with upstream's time limits.
//!
//! Responsibility:
//! - [`multi_node_within`]: binary search for the longest valid prefix (by savings ratio, at
//!   most [`MULTI_NODE_MAX`]) of the underutilized candidates within budget; when the limit
//!   passes it stops and returns the best prefix found so far, saying it timed out;
//! - [`single_node_within`]: candidates by savings ratio, NodePools interleaved round-robin —
//!   the pools a timed-out run did not reach ([`Limits::first`]) first — and the first one that
//!   can go wins; the limit is checked before each candidate, and a run that times out names
//!   the pools it did not reach.
//!
//! [`multi_node`] and [`single_node`] are the same without a limit (for `plan` and benches).
//! The limit is a predicate ("has the time passed?") so the searches stay pure and testable;
//! the controller gives them [`MULTI_NODE_TIMEOUT`] and [`SINGLE_NODE_TIMEOUT`].
//! Inputs: a [`World`], candidates, NodePools, a budget map. Outputs: a [`Command`] or none,
//! the reasons of the candidates passed over, whether the limit cut the search short.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use api::NodePool;
use api::nodepool::DisruptionReason;

use super::{Command, Method, Unconsolidatable, approved, budget_blocked, consolidation, eligible};
use crate::disruption::balanced::{self, PoolTotals};
use crate::disruption::budget_map::BudgetMap;
use crate::disruption::candidates::Candidate;
use crate::disruption::simulation::World;

/// The most candidates multi-node consolidation considers at once.
pub const MULTI_NODE_MAX: usize = 100;
/// How long multi-node consolidation may search (upstream: 1 minute).
pub const MULTI_NODE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long single-node consolidation may search (upstream: 3 minutes).
pub const SINGLE_NODE_TIMEOUT: Duration = Duration::from_secs(180);

/// What bounds a search.
#[derive(Clone, Copy)]
pub struct Limits<'a> {
    /// Whether the time is up (asked before each simulation).
    pub expired: &'a dyn Fn() -> bool,
    /// NodePools to take first (single-node: those a timed-out run did not reach).
    pub first: &'a BTreeSet<String>,
}

impl std::fmt::Debug for Limits<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limits")
            .field("first", self.first)
            .finish_non_exhaustive()
    }
}

/// What a single-node search found.
#[derive(Debug, Default)]
pub struct Searched {
    /// The command, if a candidate can go.
    pub command: Option<Command>,
    /// Why the candidates tried before it could not go.
    pub reasons: Vec<Unconsolidatable>,
    /// Whether the limit stopped the search before it had tried every candidate.
    pub timed_out: bool,
    /// The NodePools of the candidates it did not reach (when it timed out).
    pub unreached: BTreeSet<String>,
}

/// Multi-node consolidation (spec §5.10): the longest valid prefix, by binary search.
#[must_use]
pub fn multi_node(
    world: &World,
    candidates: &[Candidate],
    pools: &[NodePool],
    budgets: &BudgetMap,
) -> Option<Command> {
    multi_node_within(world, candidates, pools, budgets, &|| false).0
}

/// [`multi_node`] that stops when `expired()` says so, with the best prefix found so far and
/// whether it stopped early.
#[must_use]
pub fn multi_node_within(
    world: &World,
    candidates: &[Candidate],
    pools: &[NodePool],
    budgets: &BudgetMap,
    expired: &dyn Fn() -> bool,
) -> (Option<Command>, bool) {
    let totals = PoolTotals::new(world.node_costs(), candidates);
    let (eligible, _) = eligible(candidates, pools);
    let mut budgets = budgets.clone();
    let within: Vec<&Candidate> = eligible
        .into_iter()
        .filter(|c| budgets.take_for(c))
        .take(MULTI_NODE_MAX)
        .collect();
    if within.len() < 2 {
        return (None, false);
    }
    let started = Instant::now();
    let (mut lo, mut hi) = (1_usize, within.len() - 1);
    let mut best = None;
    let mut timed_out = false;
    while lo <= hi {
        if expired() {
            timed_out = true;
            break;
        }
        let mid = usize::midpoint(lo, hi);
        let Some(prefix) = within.get(..=mid) else {
            break;
        };
        match approved(
            consolidation(world, prefix, Method::MultiNode),
            pools,
            &totals,
        ) {
            Ok(cmd) => {
                best = Some(cmd);
                lo = mid + 1;
            }
            Err(_) => {
                if mid == 0 {
                    break;
                }
                hi = mid - 1;
            }
        }
    }
    let best = best.map(|mut c| {
        c.took = started.elapsed();
        c
    });
    (best, timed_out)
}

/// Single-node consolidation (spec §5.11): the first candidate that can go; the reasons of the
/// candidates tried before it.
#[must_use]
pub fn single_node(
    world: &World,
    candidates: &[Candidate],
    pools: &[NodePool],
    budgets: &BudgetMap,
) -> (Option<Command>, Vec<Unconsolidatable>) {
    let none = BTreeSet::new();
    let searched = single_node_within(
        world,
        candidates,
        pools,
        budgets,
        Limits {
            expired: &|| false,
            first: &none,
        },
    );
    (searched.command, searched.reasons)
}

/// [`single_node`] within `limits` (see the module doc).
#[must_use]
pub fn single_node_within(
    world: &World,
    candidates: &[Candidate],
    pools: &[NodePool],
    budgets: &BudgetMap,
    limits: Limits<'_>,
) -> Searched {
    let started = Instant::now();
    let totals = PoolTotals::new(world.node_costs(), candidates);
    let (eligible, reasons) = eligible(candidates, pools);
    // Round-robin across NodePools, each pool's candidates in savings order; the pools a
    // timed-out run did not reach go first.
    let mut by_pool: BTreeMap<(bool, &str), Vec<&Candidate>> = BTreeMap::new();
    for c in eligible {
        let later = !limits.first.contains(&c.node_pool);
        by_pool
            .entry((later, c.node_pool.as_str()))
            .or_default()
            .push(c);
    }
    let mut queues: Vec<VecDeque<&Candidate>> = by_pool.into_values().map(Into::into).collect();
    let mut ordered = Vec::new();
    while queues.iter().any(|q| !q.is_empty()) {
        for q in &mut queues {
            if let Some(c) = q.pop_front() {
                ordered.push(c);
            }
        }
    }
    let mut out = Searched {
        reasons,
        ..Searched::default()
    };
    for (i, c) in ordered.iter().enumerate() {
        if (limits.expired)() {
            out.timed_out = true;
            out.unreached = ordered
                .get(i..)
                .unwrap_or_default()
                .iter()
                .map(|c| c.node_pool.clone())
                .collect();
            return out;
        }
        if !budgets.allows(c) {
            out.reasons.push(Unconsolidatable::new(
                &c.node,
                budget_blocked(DisruptionReason::Underutilized),
            ));
            continue;
        }
        if let Err(best) = balanced::can_pass(c, pools, &totals) {
            out.reasons.push(Unconsolidatable::new(
                &c.node,
                format!("{best}, even if it were deleted"),
            ));
            continue;
        }
        match approved(
            consolidation(world, &[c], Method::SingleNode),
            pools,
            &totals,
        ) {
            Ok(mut cmd) => {
                cmd.took = started.elapsed();
                out.command = Some(cmd);
                return out;
            }
            Err(rejected) => out.reasons.push(Unconsolidatable {
                node: c.node.clone(),
                reason: rejected.reason,
                scores: rejected.scores,
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use std::cell::Cell;

    use super::*;
    use crate::disruption::candidates::Class;
    use crate::disruption::testing::{Fixture, instance_type};

    fn budgets(f: &Fixture) -> BudgetMap {
        f.budgets(DisruptionReason::Underutilized)
    }

    /// Two pools, each with one node whose pod fits on its pool's other node.
    fn two_pools() -> Fixture {
        let big = instance_type("big", 8, 0.8);
        let mut f = Fixture::default();
        for (pool, prefix) in [("a", "a"), ("b", "b")] {
            f.pool(pool, vec![big.clone()]);
            f.node(&format!("{prefix}1"), pool, &big);
            f.node(&format!("{prefix}2"), pool, &big);
            f.pinned_pod(
                &format!("{prefix}-x"),
                Some(&format!("{prefix}1")),
                "1",
                pool,
            );
            f.pinned_pod(
                &format!("{prefix}-y"),
                Some(&format!("{prefix}2")),
                "6",
                pool,
            );
        }
        f
    }

    /// A search that times out before its first candidate names every pool as unreached; the
    /// next run takes those pools first.
    #[test]
    fn a_timed_out_single_node_search_names_the_pools_it_did_not_reach() {
        let f = two_pools();
        let (c, _) = f.candidates(Class::Graceful);
        let none = BTreeSet::new();
        let searched = single_node_within(
            &f.world(),
            &c,
            &f.node_pools,
            &budgets(&f),
            Limits {
                expired: &|| true,
                first: &none,
            },
        );
        assert!(searched.timed_out && searched.command.is_none());
        assert_eq!(
            searched
                .unreached
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            ["a", "b"]
        );

        // Without a limit pool "a" comes first; with "b" unreached last time, "b" does.
        let (cmd, _) = single_node(&f.world(), &c, &f.node_pools, &budgets(&f));
        assert_eq!(cmd.unwrap().candidates[0].node_pool, "a");
        let first: BTreeSet<String> = ["b".to_owned()].into();
        let searched = single_node_within(
            &f.world(),
            &c,
            &f.node_pools,
            &budgets(&f),
            Limits {
                expired: &|| false,
                first: &first,
            },
        );
        assert!(!searched.timed_out);
        assert_eq!(searched.command.unwrap().candidates[0].node_pool, "b");
    }

    /// Multi-node returns the best prefix it found when the time runs out mid-search.
    #[test]
    fn a_timed_out_multi_node_search_returns_the_best_prefix_so_far() {
        let big = instance_type("big", 8, 0.8);
        let mut f = Fixture::default();
        f.pool("default", vec![big.clone()]);
        for i in 0..6 {
            f.node(&format!("n{i}"), "default", &big);
            f.pod(&format!("p{i}"), Some(&format!("n{i}")), "1");
        }
        let (c, _) = f.candidates(Class::Graceful);
        let full = multi_node(&f.world(), &c, &f.node_pools, &budgets(&f)).unwrap();
        // One simulation allowed, then the time is up.
        let calls = Cell::new(0);
        let expired = || {
            calls.set(calls.get() + 1);
            calls.get() > 1
        };
        let (cut, timed_out) =
            multi_node_within(&f.world(), &c, &f.node_pools, &budgets(&f), &expired);
        assert!(timed_out);
        let cut = cut.unwrap();
        assert!(
            cut.candidates.len() < full.candidates.len(),
            "{} vs {}",
            cut.candidates.len(),
            full.candidates.len()
        );
        let (none, timed_out) =
            multi_node_within(&f.world(), &c, &f.node_pools, &budgets(&f), &|| true);
        assert!(timed_out && none.is_none());
    }
}
