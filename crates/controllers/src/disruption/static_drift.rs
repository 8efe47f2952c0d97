//! StaticDrift (spec §5.6): a drifted node of a static NodePool is replaced one for one by a
//! fresh NodeClaim from the template — no scheduling simulation, since a static pool's size
//! does not follow its pods.
//!
//! Responsibility: per static pool (by name), its drifted candidates oldest drift first; the
//! pool is skipped while its budget for `Drifted` is 0, while it is above `spec.replicas`
//! (running plus pending disruption: the static loop is still scaling it down), or when
//! `limits.nodes` leaves no room for a replacement next to the node it replaces. The first
//! candidate that passes gets one command: itself plus the template's NodeClaim.
//! Inputs: the static pools' candidates, their NodePools and counts ([`PoolCount`]), a budget
//! map, and the template NodeClaim of each pool (or why there is none). Outputs: a
//! [`Command`] and the reasons for the candidates passed over. Pure.

use std::collections::BTreeMap;
use std::time::Instant;

use api::NodePool;
use scheduling::instance_type::{Offering, OfferingIterExt};
use scheduling::scheduler::PlannedNodeClaim;

use super::budget_map::BudgetMap;
use super::candidates::Candidate;
use super::methods::{Command, Method, Unconsolidatable};

pub use crate::static_capacity::plan::PoolCount;

/// The first static drift replacement due, if any.
#[must_use]
pub fn static_drift(
    candidates: &[Candidate],
    pools: &[NodePool],
    counts: &BTreeMap<String, PoolCount>,
    budgets: &mut BudgetMap,
    template: &dyn Fn(&NodePool) -> Result<PlannedNodeClaim, String>,
) -> (Option<Command>, Vec<Unconsolidatable>) {
    let started = Instant::now();
    let mut reasons = Vec::new();
    let mut by_pool: BTreeMap<&str, Vec<&Candidate>> = BTreeMap::new();
    for c in candidates.iter().filter(|c| c.drifted.is_some()) {
        by_pool.entry(&c.node_pool).or_default().push(c);
    }
    for (name, mut drifted) in by_pool {
        let Some(pool) = pools
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .filter(|p| p.spec.is_static())
        else {
            continue;
        };
        drifted.sort_by(|a, b| (a.drifted, &a.node).cmp(&(b.drifted, &b.node)));
        let mut pass = |why: String| {
            for c in &drifted {
                reasons.push(Unconsolidatable {
                    node: c.node.clone(),
                    reason: why.clone(),
                    scores: Vec::new(),
                });
            }
        };
        let count = counts.get(name).copied().unwrap_or_default();
        let replicas = usize::try_from(pool.spec.replicas.unwrap_or(0)).unwrap_or(0);
        if count.running + count.pending_disruption > replicas {
            pass(format!(
                "static NodePool {name:?} is scaling down to {replicas} replicas"
            ));
            continue;
        }
        if let Some(limit) =
            crate::static_capacity::node_limit(pool).map(|l| usize::try_from(l).unwrap_or(0))
            && count.running + count.pending_disruption + 1 > limit
        {
            pass(format!(
                "limits.nodes ({limit}) of static NodePool {name:?} leaves no room for a replacement"
            ));
            continue;
        }
        let Some(c) = drifted.iter().find(|c| budgets.allows(c)).copied() else {
            pass(super::methods::budget_blocked(
                api::nodepool::DisruptionReason::Drifted,
            ));
            continue;
        };
        let planned = match template(pool) {
            Ok(planned) => planned,
            Err(why) => {
                pass(format!("no replacement can be built: {why}"));
                continue;
            }
        };
        budgets.take_for(c);
        let cost = planned
            .instance_types
            .first()
            .and_then(|it| it.offerings().iter().available().cheapest())
            .and_then(Offering::known_price);
        let savings = match cost {
            Some(cost) if c.priced => c.price - cost,
            _ => 0.0,
        };
        return (
            Some(Command {
                method: Method::Drift,
                candidates: vec![c.clone()],
                replacements: vec![planned],
                savings,
                took: started.elapsed(),
                scores: Vec::new(),
            }),
            reasons,
        );
    }
    (None, reasons)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use super::*;
    use crate::disruption::budget_map::PoolBudget;
    use crate::disruption::candidates::Class;
    use crate::disruption::testing::{Fixture, instance_type, now};

    fn planned(pool: &str) -> PlannedNodeClaim {
        PlannedNodeClaim {
            node_pool: pool.into(),
            requirements: scheduling::requirements::Requirements::new(),
            instance_types: vec![instance_type("fresh", 4, 0.1)],
            requests: scheduling::resources::Resources::default(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            startup_taints: Vec::new(),
            pods: Vec::new(),
            min_values_relaxed: false,
        }
    }

    /// A static pool `fixed` of `replicas` with nodes `a` (drifted first) and `b` (drifted
    /// later), plus a dynamic pool `dyn` with a drifted node `c`.
    fn fixture(replicas: i64, limit: Option<&str>) -> (Fixture, Vec<Candidate>) {
        let it = instance_type("old", 4, 0.2);
        let mut f = Fixture::default();
        let pool = f.pool("fixed", vec![Arc::clone(&it)]);
        pool.spec.replicas = Some(replicas);
        if let Some(limit) = limit {
            pool.spec.limits = Some(BTreeMap::from([(
                "nodes".to_owned(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity(limit.into()),
            )]));
        }
        f.pool("dyn", vec![Arc::clone(&it)]);
        f.node("a", "fixed", &it)
            .node("b", "fixed", &it)
            .node("c", "dyn", &it);
        let (mut cands, _) = f.candidates(Class::Eventual);
        for c in &mut cands {
            let at = match c.node.as_str() {
                "a" => 20,
                "b" => 10,
                _ => 5,
            };
            c.drifted = Some(
                now()
                    .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(at))
                    .unwrap(),
            );
        }
        (f, cands)
    }

    fn budgets(remaining: usize) -> BudgetMap {
        let mut b = BudgetMap::default();
        for pool in ["fixed", "dyn"] {
            b.pools.insert(
                pool.into(),
                PoolBudget {
                    remaining,
                    ..PoolBudget::default()
                },
            );
        }
        b
    }

    fn counts(running: usize, pending: usize) -> BTreeMap<String, PoolCount> {
        BTreeMap::from([(
            "fixed".to_owned(),
            PoolCount {
                running,
                pending_disruption: pending,
            },
        )])
    }

    #[test]
    fn replaces_the_oldest_drifted_node_of_a_static_pool_one_for_one() {
        let (f, cands) = fixture(2, None);
        let mut b = budgets(1);
        let (cmd, reasons) = static_drift(&cands, &f.node_pools, &counts(2, 0), &mut b, &|p| {
            Ok(planned(p.metadata.name.as_deref().unwrap()))
        });
        let cmd = cmd.unwrap();
        assert_eq!(
            cmd.nodes(),
            ["a"],
            "the oldest drift first; dyn's node is not static"
        );
        assert_eq!(cmd.method, Method::Drift);
        assert_eq!(cmd.replacements.len(), 1);
        assert_eq!(&*cmd.replacements[0].node_pool, "fixed");
        assert!((cmd.savings - 0.1).abs() < 1e-9);
        assert!(reasons.is_empty());
        assert_eq!(b.remaining("fixed"), 0, "the budget is taken");
    }

    #[test]
    fn waits_for_scale_down_budget_and_node_limit() {
        let (f, cands) = fixture(2, None);
        let template = |p: &NodePool| Ok(planned(p.metadata.name.as_deref().unwrap()));
        let (cmd, reasons) = static_drift(
            &cands,
            &f.node_pools,
            &counts(3, 0),
            &mut budgets(1),
            &template,
        );
        assert!(cmd.is_none());
        assert!(
            reasons.iter().all(|r| r.reason.contains("scaling down")),
            "{reasons:?}"
        );
        let (cmd, reasons) = static_drift(
            &cands,
            &f.node_pools,
            &counts(2, 0),
            &mut budgets(0),
            &template,
        );
        assert!(cmd.is_none());
        assert!(reasons[0].reason.contains("budget"), "{reasons:?}");
        let (f, cands) = fixture(2, Some("2"));
        let (cmd, reasons) = static_drift(
            &cands,
            &f.node_pools,
            &counts(2, 0),
            &mut budgets(1),
            &template,
        );
        assert!(cmd.is_none());
        assert!(
            reasons[0].reason.contains("limits.nodes (2)"),
            "{reasons:?}"
        );
        let (f, cands) = fixture(2, Some("3"));
        let (cmd, _) = static_drift(
            &cands,
            &f.node_pools,
            &counts(2, 0),
            &mut budgets(1),
            &template,
        );
        assert!(cmd.is_some());
    }

    #[test]
    fn a_template_that_cannot_be_built_is_a_reason_not_a_command() {
        let (f, cands) = fixture(2, None);
        let (cmd, reasons) = static_drift(
            &cands,
            &f.node_pools,
            &counts(2, 0),
            &mut budgets(1),
            &|_| Err("no instance type".into()),
        );
        assert!(cmd.is_none());
        assert!(reasons[0].reason.contains("no instance type"));
    }
}
