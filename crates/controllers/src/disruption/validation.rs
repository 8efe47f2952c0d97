//! Validating a command after the validation delay (spec §5.5, §5.13), before it acts.
//!
//! Responsibility, pure:
//! - [`recheck`]: the command's candidates against freshly computed candidates and a fresh
//!   budget map. Emptiness keeps the subset still candidates, still empty, still
//!   consolidatable and within the budget (pods landing on one empty node do not cancel the
//!   deletion of the others), and fails only when none is left; consolidation needs every
//!   candidate to pass;
//! - [`resimulated`]: a consolidation command against a fresh simulation of its (fresh)
//!   candidates: every pod must still find a place, Balanced NodePools must approve the move
//!   again ([`super::methods`]' approval), and the decision must be the same — delete stays
//!   delete; a replacement is still one new node whose options include every option the
//!   command had.
//!
//! Failures name the category upstream counts (churn, budget, scheduling) in their text.
//! Inputs: the command, fresh candidates, a budget map, a simulation world, NodePools.
//! Outputs: the command to carry out, or why it is abandoned.

use std::collections::BTreeSet;

use api::NodePool;

use super::balanced::PoolTotals;
use super::budget_map::BudgetMap;
use super::candidates::Candidate;
use super::consolidatable::Consolidation;
use super::methods::{self, Command, Decision, Method};
use super::simulation::World;

/// The command's candidates as they are now (see the module doc).
///
/// # Errors
/// Why the command is abandoned (churn or budget).
pub fn recheck(
    cmd: &Command,
    current: &[Candidate],
    budgets: &mut BudgetMap,
) -> Result<Vec<Candidate>, String> {
    let emptiness = cmd.method == Method::Emptiness;
    let mut fresh = Vec::new();
    let mut dropped = Vec::new();
    for c in &cmd.candidates {
        let why = match current
            .iter()
            .find(|f| f.node == c.node && f.node_claim == c.node_claim)
        {
            None => Some(format!("node {} is no longer a candidate (churn)", c.node)),
            Some(now) if now.consolidation != Consolidation::Consolidatable => {
                Some(format!("node {} changed (churn)", c.node))
            }
            Some(now) if emptiness && !now.is_empty() => {
                Some(format!("node {} is no longer empty (churn)", c.node))
            }
            Some(now) if emptiness && now.buffer_pods > 0 => Some(format!(
                "node {} hosts CapacityBuffer pods now (churn)",
                c.node
            )),
            Some(now) if !budgets.take_for(now) => Some(format!(
                "no budget or group room left for node {} (budget)",
                c.node
            )),
            Some(now) => {
                fresh.push(now.clone());
                None
            }
        };
        if let Some(why) = why {
            if !emptiness {
                return Err(why);
            }
            dropped.push(why);
        }
    }
    if fresh.is_empty() {
        return Err(dropped.join("; "));
    }
    Ok(fresh)
}

/// The consolidation command `expected` after simulating its `fresh` candidates again in
/// `world` (see the module doc); `current` are all candidates now (for Balanced totals).
///
/// # Errors
/// Why the command is abandoned.
pub fn resimulated(
    world: &World,
    expected: Command,
    fresh: &[Candidate],
    current: &[Candidate],
    pools: &[NodePool],
) -> Result<Command, String> {
    let refs: Vec<&Candidate> = fresh.iter().collect();
    let totals = PoolTotals::new(world.node_costs(), current);
    let again = methods::approved(
        methods::consolidation(world, &refs, expected.method)
            .map_err(|why| format!("scheduling: {why}")),
        pools,
        &totals,
    )
    .map_err(|rejected| rejected.reason)?;
    let keep = |again: Command| Command {
        took: expected.took,
        ..again
    };
    match (expected.decision(), again.decision()) {
        (Decision::Delete, Decision::Delete) => Ok(keep(again)),
        (Decision::Replace, Decision::Replace) => {
            let names: BTreeSet<&str> = again
                .replacements
                .iter()
                .flat_map(|r| r.instance_types.iter().map(|it| it.name()))
                .collect();
            let subset = expected
                .replacements
                .iter()
                .flat_map(|r| r.instance_types.iter())
                .all(|it| names.contains(it.name()));
            if subset {
                Ok(keep(again))
            } else {
                Err("the replacement's options changed".into())
            }
        }
        _ => Err("the decision changed".into()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use api::nodepool::DisruptionReason;

    use super::*;
    use crate::disruption::candidates::Class;
    use crate::disruption::testing::{Fixture, instance_type, marginal_replacements};

    fn budgets(f: &Fixture, reason: DisruptionReason) -> BudgetMap {
        f.budgets(reason)
    }

    fn nodes(c: &[Candidate]) -> Vec<&str> {
        c.iter().map(|c| c.node.as_str()).collect()
    }

    /// Three empty nodes; one takes a pod during the delay: the other two still go.
    #[test]
    fn emptiness_keeps_the_nodes_that_are_still_empty() {
        let big = instance_type("big", 8, 0.8);
        let mut f = Fixture::default();
        f.pool("default", vec![big.clone()]);
        for n in ["n1", "n2", "n3"] {
            f.node(n, "default", &big);
        }
        let (c, _) = f.candidates(Class::Graceful);
        let cmd = methods::emptiness(&c, &mut budgets(&f, DisruptionReason::Empty)).unwrap();
        assert_eq!(cmd.nodes(), ["n1", "n2", "n3"]);

        f.pod("late", Some("n2"), "1");
        let (now_c, _) = f.candidates(Class::Graceful);
        let kept = recheck(&cmd, &now_c, &mut budgets(&f, DisruptionReason::Empty)).unwrap();
        assert_eq!(nodes(&kept), ["n1", "n3"]);

        // A CapacityBuffer's virtual pod placed on n3 since: kept too.
        let mut buffered = now_c.clone();
        for c in buffered.iter_mut().filter(|c| c.node == "n3") {
            c.buffer_pods = 1;
        }
        let kept = recheck(&cmd, &buffered, &mut budgets(&f, DisruptionReason::Empty)).unwrap();
        assert_eq!(nodes(&kept), ["n1"]);

        // Every one of them busy now: abandoned, naming each.
        f.pod("a", Some("n1"), "1");
        f.pod("b", Some("n3"), "1");
        let (now_c, _) = f.candidates(Class::Graceful);
        let err = recheck(&cmd, &now_c, &mut budgets(&f, DisruptionReason::Empty)).unwrap_err();
        assert!(err.contains("node n1 is no longer empty (churn)"), "{err}");
        assert!(err.contains("node n3"), "{err}");
    }

    /// Consolidation needs all of its candidates: one gone abandons the command.
    #[test]
    fn consolidation_needs_every_candidate_still_a_candidate() {
        let big = instance_type("big", 8, 0.8);
        let mut f = Fixture::default();
        f.pool("default", vec![big.clone()]);
        f.node("n1", "default", &big).node("n2", "default", &big);
        f.pod("a", Some("n1"), "1");
        f.pod("b", Some("n2"), "1");
        let (c, _) = f.candidates(Class::Graceful);
        let cmd = Command {
            method: Method::MultiNode,
            candidates: c.clone(),
            replacements: Vec::new(),
            savings: 0.0,
            scores: Vec::new(),
            took: std::time::Duration::ZERO,
        };
        let (now_c, _) = f.candidates(Class::Graceful);
        let both = recheck(
            &cmd,
            &now_c,
            &mut budgets(&f, DisruptionReason::Underutilized),
        )
        .unwrap();
        assert_eq!(nodes(&both), ["n1", "n2"]);
        f.in_flight.insert("n2".into());
        let (now_c, _) = f.candidates(Class::Graceful);
        let err = recheck(
            &cmd,
            &now_c,
            &mut budgets(&f, DisruptionReason::Underutilized),
        )
        .unwrap_err();
        assert_eq!(err, "node n2 is no longer a candidate (churn)");
    }

    /// The move is checked against the NodePools as they are at validation: a pool that
    /// turned Balanced meanwhile must approve it, and this marginal one it does not.
    #[test]
    fn validation_asks_a_balanced_pool_again() {
        let mut f = marginal_replacements();
        let (c, _) = f.candidates(Class::Graceful);
        let s_half: Vec<&Candidate> = c.iter().filter(|x| x.node == "s-half").collect();
        let cmd = methods::consolidation(&f.world(), &s_half, Method::SingleNode).unwrap();
        assert_eq!(cmd.decision(), Decision::Replace);
        let fresh: Vec<Candidate> = s_half.into_iter().cloned().collect();
        let again = resimulated(&f.world(), cmd.clone(), &fresh, &c, &f.node_pools).unwrap();
        assert_eq!(again.replacement_types(), cmd.replacement_types());

        f.policy("standard", api::nodepool::ConsolidationPolicy::Balanced);
        let (c, _) = f.candidates(Class::Graceful);
        let err = resimulated(&f.world(), cmd, &fresh, &c, &f.node_pools).unwrap_err();
        assert!(err.starts_with("Balanced score"), "{err}");
    }
}
