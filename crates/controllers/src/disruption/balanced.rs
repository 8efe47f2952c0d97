//! `consolidationPolicy: Balanced`: whether a consolidation move saves enough for the
//! disruption it causes (spec §5.12).
//!
//! Responsibility: the score of a move for each NodePool it touches, and the approval.
//! - [`NodeCost`]s: every node of a NodePool (not only the candidates) with its price and its
//!   disruption cost (1 + the positive eviction costs of its reschedulable pods), from one
//!   snapshot;
//! - [`PoolTotals`]: per NodePool, the total cost (the summed prices of its nodes; the summed
//!   prices of its candidates when the nodes' prices are unknown) and the total disruption cost
//!   (candidates count with their own disruption cost, the other nodes with theirs);
//! - [`Score`]: (savings / total cost) ÷ (disruption / total disruption cost); no savings
//!   scores 0, no disruption scores +∞; approved at [`THRESHOLD`] (1/k, k = 2) or above;
//! - [`evaluate`]: a move over one or more NodePools — the net savings split between the pools
//!   by their share of the source cost, each Balanced pool scored alone, approved when every
//!   Balanced pool approves (other policies always pass); [`can_pass`]: whether even deleting
//!   a candidate outright (its best possible move) would be approved.
//!
//! Emptiness and drift are never scored. Inputs: nodes, pods, instance types, candidates,
//! NodePools. Outputs: totals, scores, verdicts. Pure.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use api::NodePool;
use api::nodepool::ConsolidationPolicy;
use k8s_openapi::api::core::v1::{Node, Pod};
use scheduling::instance_type::InstanceType;
use scheduling::labels::{CAPACITY_TYPE, INSTANCE_TYPE, NODE_POOL, TOPOLOGY_ZONE};

use super::candidates::{Candidate, eviction_cost, is_reschedulable, offering_price};

/// Upstream's fixed k: a move must save at least 1/k of its share of disruption.
pub const K: u32 = 2;

/// The lowest approved score, 1/[`K`].
pub const THRESHOLD: f64 = 0.5;

/// One node of a NodePool, as the totals count it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeCost {
    /// The node.
    pub node: String,
    /// Its NodePool.
    pub pool: String,
    /// Its offering's price per hour (0 when unknown).
    pub price: f64,
    /// 1 + the positive eviction costs of its reschedulable pods.
    pub disruption: f64,
}

/// Every node carrying a NodePool label, with its price and disruption cost.
#[must_use]
pub fn node_costs(
    nodes: &[Node],
    pods: &[Arc<Pod>],
    instance_types: &BTreeMap<String, Vec<Arc<InstanceType>>>,
) -> Vec<NodeCost> {
    let mut disruption: BTreeMap<&str, f64> = BTreeMap::new();
    for pod in pods.iter().filter(|p| is_reschedulable(p)) {
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            *disruption.entry(node).or_default() += eviction_cost(pod).max(0.0);
        }
    }
    nodes
        .iter()
        .filter_map(|node| {
            let labels = node.metadata.labels.as_ref()?;
            let pool = labels.get(NODE_POOL)?;
            let name = node.metadata.name.as_deref().unwrap_or_default();
            let it = labels.get(INSTANCE_TYPE).and_then(|t| {
                instance_types
                    .get(pool)
                    .and_then(|its| its.iter().find(|it| it.name() == t))
            });
            Some(NodeCost {
                node: name.to_owned(),
                pool: pool.clone(),
                price: offering_price(
                    it,
                    labels.get(TOPOLOGY_ZONE).map(String::as_str),
                    labels.get(CAPACITY_TYPE).map(String::as_str),
                )
                .unwrap_or(0.0),
                disruption: 1.0 + disruption.get(name).copied().unwrap_or_default(),
            })
        })
        .collect()
}

/// One NodePool's denominators.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    /// Price per hour of all its nodes.
    pub cost: f64,
    /// Disruption cost of all its nodes.
    pub disruption: f64,
}

/// The denominators of every NodePool with a candidate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PoolTotals(BTreeMap<String, Totals>);

impl PoolTotals {
    /// From every node (`nodes`) and every candidate before any filtering: candidates count
    /// with their own price and disruption cost.
    #[must_use]
    pub fn new(nodes: &[NodeCost], candidates: &[Candidate]) -> Self {
        let by_name: BTreeMap<&str, &Candidate> =
            candidates.iter().map(|c| (c.node.as_str(), c)).collect();
        let mut out: BTreeMap<String, Totals> = BTreeMap::new();
        let mut fallback: BTreeMap<&str, f64> = BTreeMap::new();
        for c in candidates {
            *fallback.entry(c.node_pool.as_str()).or_default() += c.price;
            out.entry(c.node_pool.clone()).or_default();
        }
        for n in nodes {
            let t = out.entry(n.pool.clone()).or_default();
            match by_name.get(n.node.as_str()) {
                Some(c) => {
                    t.cost += c.price;
                    t.disruption += c.disruption_cost;
                }
                None => {
                    t.cost += n.price;
                    t.disruption += n.disruption;
                }
            }
        }
        for (pool, t) in &mut out {
            if t.cost <= 0.0 {
                t.cost = fallback.get(pool.as_str()).copied().unwrap_or_default();
            }
        }
        Self(out)
    }

    /// One NodePool's totals (zero when it has no node).
    #[must_use]
    pub fn of(&self, pool: &str) -> Totals {
        self.0.get(pool).copied().unwrap_or_default()
    }
}

/// A move's score for one NodePool: its savings and its disruption, each as a fraction of the
/// pool's totals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Score {
    /// Savings ÷ the pool's total cost.
    pub savings_fraction: f64,
    /// Disruption ÷ the pool's total disruption cost.
    pub disruption_fraction: f64,
}

fn fraction(part: f64, total: f64) -> f64 {
    if total > 0.0 { part / total } else { 0.0 }
}

impl Score {
    /// The score of saving `savings` per hour at a disruption of `disruption` in a pool with
    /// `totals`.
    #[must_use]
    pub fn new(savings: f64, disruption: f64, totals: Totals) -> Self {
        Self {
            savings_fraction: fraction(savings, totals.cost),
            disruption_fraction: fraction(disruption, totals.disruption),
        }
    }

    /// Savings fraction ÷ disruption fraction; 0 without savings, +∞ without disruption.
    #[must_use]
    pub fn value(&self) -> f64 {
        if self.savings_fraction <= 0.0 {
            0.0
        } else if self.disruption_fraction <= 0.0 {
            f64::INFINITY
        } else {
            self.savings_fraction / self.disruption_fraction
        }
    }

    /// At or above [`THRESHOLD`].
    #[must_use]
    pub fn approved(&self) -> bool {
        self.value() >= THRESHOLD
    }
}

impl fmt::Display for Score {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Balanced score {:.2} {} {THRESHOLD} (savings {:.1}% of the NodePool's cost, disruption {:.1}% of its disruption cost)",
            self.value(),
            if self.approved() {
                "is at least"
            } else {
                "is below"
            },
            self.savings_fraction * 100.0,
            self.disruption_fraction * 100.0,
        )
    }
}

/// One NodePool's part of a move.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolScore {
    /// The NodePool.
    pub pool: String,
    /// Its policy (`Balanced`, `WhenEmptyOrUnderutilized`) as the metrics label it.
    pub policy: String,
    /// Its candidates in the move.
    pub nodes: Vec<String>,
    /// The score, for Balanced pools only.
    pub score: Option<Score>,
}

impl PoolScore {
    /// Not Balanced, or Balanced and approved.
    #[must_use]
    pub fn approved(&self) -> bool {
        self.score.is_none_or(|s| s.approved())
    }
}

/// A move's scores, one per NodePool it touches.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Per NodePool, by name.
    pub pools: Vec<PoolScore>,
}

impl Verdict {
    /// Every Balanced pool approves.
    #[must_use]
    pub fn approved(&self) -> bool {
        self.pools.iter().all(PoolScore::approved)
    }

    /// Why not [`Self::approved`]: the first rejecting pool's score.
    #[must_use]
    pub fn why_not(&self) -> Option<String> {
        let (pool, score) = self
            .pools
            .iter()
            .find_map(|p| p.score.filter(|s| !s.approved()).map(|s| (&p.pool, s)))?;
        Some(if self.pools.len() > 1 {
            format!("{score} for NodePool {pool:?}")
        } else {
            score.to_string()
        })
    }
}

fn policy_of(pools: &[NodePool], name: &str) -> ConsolidationPolicy {
    pools
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(name))
        .and_then(|p| p.spec.disruption_or_default().consolidation_policy)
        .unwrap_or_default()
}

/// The policy as upstream spells it (the `policy` metric label).
#[must_use]
pub fn policy_name(policy: ConsolidationPolicy) -> &'static str {
    match policy {
        ConsolidationPolicy::WhenEmpty => "WhenEmpty",
        ConsolidationPolicy::WhenEmptyOrUnderutilized => "WhenEmptyOrUnderutilized",
        ConsolidationPolicy::Balanced => "Balanced",
    }
}

/// Scores removing `candidates` for a net saving of `savings` per hour (the candidates' prices
/// less the replacement's). With several NodePools, each gets the share of `savings` its
/// candidates have of the source cost.
#[must_use]
pub fn evaluate(
    candidates: &[&Candidate],
    savings: f64,
    pools: &[NodePool],
    totals: &PoolTotals,
) -> Verdict {
    let mut by_pool: BTreeMap<&str, Vec<&Candidate>> = BTreeMap::new();
    for c in candidates {
        by_pool.entry(c.node_pool.as_str()).or_default().push(c);
    }
    let source: f64 = candidates.iter().map(|c| c.price).sum();
    let several = by_pool.len() > 1;
    let pools = by_pool
        .into_iter()
        .map(|(pool, cs)| {
            let policy = policy_of(pools, pool);
            let score = (policy == ConsolidationPolicy::Balanced).then(|| {
                let pool_source: f64 = cs.iter().map(|c| c.price).sum();
                let share = if several && source > 0.0 {
                    savings * pool_source / source
                } else {
                    savings
                };
                let disruption: f64 = cs.iter().map(|c| c.disruption_cost).sum();
                Score::new(share, disruption, totals.of(pool))
            });
            PoolScore {
                pool: pool.to_owned(),
                policy: policy_name(policy).to_owned(),
                nodes: cs.iter().map(|c| c.node.clone()).collect(),
                score,
            }
        })
        .collect();
    Verdict { pools }
}

/// Whether the best possible move for `c` — deleting it, saving its whole price — would be
/// approved; always for pools that are not Balanced. The score when it would not.
///
/// # Errors
/// The best possible score, below [`THRESHOLD`].
pub fn can_pass(c: &Candidate, pools: &[NodePool], totals: &PoolTotals) -> Result<(), Score> {
    if policy_of(pools, &c.node_pool) != ConsolidationPolicy::Balanced {
        return Ok(());
    }
    let score = Score::new(c.price, c.disruption_cost, totals.of(&c.node_pool));
    if score.approved() { Ok(()) } else { Err(score) }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::float_cmp)]
    use super::*;
    use crate::disruption::consolidatable::Consolidation;
    use serde_json::json;

    fn candidate(node: &str, pool: &str, price: f64, disruption: f64) -> Candidate {
        Candidate {
            node: node.into(),
            node_claim: format!("{node}-claim"),
            node_claim_uid: None,
            node_pool: pool.into(),
            instance_type: None,
            instance_type_name: None,
            zone: None,
            capacity_type: None,
            price,
            priced: true,
            reschedulable: Vec::new(),
            disruption_cost: disruption,
            consolidation: Consolidation::Consolidatable,
            drifted: None,
            group: None,
            buffer_pods: 0,
        }
    }

    fn pool(name: &str, policy: &str) -> NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": name},
            "spec": {"disruption": {"consolidateAfter": "0s", "consolidationPolicy": policy},
                "template": {"spec": {"nodeClassRef": {"group": "g", "kind": "k", "name": "n"},
                    "requirements": []}}}
        }))
        .unwrap()
    }

    fn cost(node: &str, pool: &str, price: f64, disruption: f64) -> NodeCost {
        NodeCost {
            node: node.into(),
            pool: pool.into(),
            price,
            disruption,
        }
    }

    fn totals(cost: f64, disruption: f64) -> Totals {
        Totals { cost, disruption }
    }

    #[test]
    fn exactly_the_threshold_is_approved_and_just_below_is_not() {
        // 10 % of the cost for 20 % of the disruption: 0.5.
        let at = Score::new(1.0, 2.0, totals(10.0, 10.0));
        assert_eq!(at.value(), 0.5);
        assert!(at.approved());
        assert_eq!(THRESHOLD, 1.0 / f64::from(K));
        let below = Score::new(0.999, 2.0, totals(10.0, 10.0));
        assert!((below.value() - 0.4995).abs() < 1e-12);
        assert!(!below.approved());
        let below = Score::new(0.9, 2.0, totals(10.0, 10.0));
        assert_eq!(
            below.to_string(),
            "Balanced score 0.45 is below 0.5 (savings 9.0% of the NodePool's cost, disruption 20.0% of its disruption cost)"
        );
        assert_eq!(
            at.to_string(),
            "Balanced score 0.50 is at least 0.5 (savings 10.0% of the NodePool's cost, disruption 20.0% of its disruption cost)"
        );
        let above = Score::new(3.0, 2.0, totals(10.0, 10.0));
        assert!((above.value() - 1.5).abs() < 1e-12);
        assert!(above.approved());
    }

    #[test]
    fn no_savings_scores_zero_and_no_disruption_infinity() {
        assert_eq!(Score::new(0.0, 1.0, totals(10.0, 10.0)).value(), 0.0);
        assert_eq!(Score::new(-0.5, 1.0, totals(10.0, 10.0)).value(), 0.0);
        assert!(!Score::new(-0.5, 0.0, totals(10.0, 10.0)).approved());
        let free = Score::new(0.1, 0.0, totals(10.0, 10.0));
        assert_eq!(free.value(), f64::INFINITY);
        assert!(free.approved());
        // A pool whose nodes cost nothing has nothing to save.
        assert_eq!(Score::new(0.1, 1.0, totals(0.0, 10.0)).value(), 0.0);
    }

    #[test]
    fn totals_count_every_node_of_the_pool_and_candidates_with_their_own_costs() {
        let nodes = [
            cost("a", "p", 1.0, 3.0),
            cost("b", "p", 2.0, 1.0),
            cost("c", "q", 4.0, 5.0),
        ];
        // Candidate "a" counts with its own price and disruption cost.
        let cands = [candidate("a", "p", 1.5, 4.0)];
        let t = PoolTotals::new(&nodes, &cands);
        assert_eq!(t.of("p"), totals(3.5, 5.0));
        assert_eq!(t.of("q"), totals(4.0, 5.0));
        assert_eq!(t.of("none"), Totals::default());
        // Nodes without a known price: the candidates' prices stand in.
        let unpriced = [cost("a", "p", 0.0, 3.0), cost("b", "p", 0.0, 1.0)];
        let cands = [candidate("a", "p", 0.0, 3.0), candidate("z", "p", 0.7, 2.0)];
        let t = PoolTotals::new(&unpriced, &cands);
        assert_eq!(t.of("p"), totals(0.7, 4.0));
    }

    #[test]
    fn other_policies_always_pass_and_a_balanced_pool_needs_enough_savings() {
        let pools = [
            pool("bal", "Balanced"),
            pool("std", "WhenEmptyOrUnderutilized"),
        ];
        let t = PoolTotals(BTreeMap::from([
            ("bal".to_owned(), totals(4.0, 8.0)),
            ("std".to_owned(), totals(4.0, 8.0)),
        ]));
        let b = candidate("b", "bal", 1.0, 4.0);
        let s = candidate("s", "std", 1.0, 4.0);
        // Saving 0.2 of 4.0 (5 %) for half the disruption: 0.1.
        let v = evaluate(&[&s], 0.2, &pools, &t);
        assert!(v.approved());
        assert_eq!(v.pools[0].score, None);
        assert_eq!(v.pools[0].policy, "WhenEmptyOrUnderutilized");
        let v = evaluate(&[&b], 0.2, &pools, &t);
        assert!(!v.approved());
        assert!((v.pools[0].score.unwrap().value() - 0.1).abs() < 1e-12);
        assert_eq!(
            v.why_not().unwrap(),
            "Balanced score 0.10 is below 0.5 (savings 5.0% of the NodePool's cost, disruption 50.0% of its disruption cost)"
        );
        // Saving 1.0 of 4.0 for half the disruption: exactly 0.5.
        let v = evaluate(&[&b], 1.0, &pools, &t);
        assert!(v.approved(), "{v:?}");
        assert_eq!(v.why_not(), None);
        // Deleting outright saves 1.0: it could pass; with a disruption of 6 it could not.
        assert_eq!(can_pass(&b, &pools, &t), Ok(()));
        let heavy = candidate("h", "bal", 1.0, 6.0);
        assert_eq!(
            can_pass(&heavy, &pools, &t).unwrap_err().value(),
            (1.0 / 4.0) / (6.0 / 8.0)
        );
        assert_eq!(
            can_pass(&candidate("x", "std", 1.0, 8.0), &pools, &t),
            Ok(())
        );
    }

    #[test]
    fn a_move_over_two_pools_splits_the_savings_and_needs_every_balanced_pool() {
        let pools = [
            pool("a", "Balanced"),
            pool("b", "Balanced"),
            pool("c", "WhenEmptyOrUnderutilized"),
        ];
        let t = PoolTotals(BTreeMap::from([
            ("a".to_owned(), totals(4.0, 10.0)),
            ("b".to_owned(), totals(4.0, 10.0)),
            ("c".to_owned(), totals(4.0, 10.0)),
        ]));
        // Source 3.0 (a: 2.0, b: 1.0), net savings 1.5: a gets 1.0, b gets 0.5.
        let a1 = candidate("a1", "a", 1.0, 2.0);
        let a2 = candidate("a2", "a", 1.0, 2.0);
        let b1 = candidate("b1", "b", 1.0, 4.0);
        let v = evaluate(&[&a1, &a2, &b1], 1.5, &pools, &t);
        let a = v.pools[0].score.unwrap();
        let b = v.pools[1].score.unwrap();
        assert_eq!(v.pools[0].nodes, ["a1", "a2"]);
        // a: (1.0 / 4) / (4 / 10) = 0.625; b: (0.5 / 4) / (4 / 10) = 0.3125.
        assert!((a.value() - 0.625).abs() < 1e-12);
        assert!((b.value() - 0.3125).abs() < 1e-12);
        assert!(v.pools[0].approved());
        assert!(!v.pools[1].approved());
        assert!(!v.approved());
        assert!(
            v.why_not().unwrap().ends_with("for NodePool \"b\""),
            "{v:?}"
        );
        // With a non-Balanced pool instead of b, a alone decides.
        let c1 = candidate("c1", "c", 1.0, 4.0);
        let v = evaluate(&[&a1, &a2, &c1], 1.5, &pools, &t);
        assert!(v.approved(), "{v:?}");
        assert_eq!(v.pools[1].score, None);
    }

    #[test]
    fn node_costs_price_each_node_and_count_its_reschedulable_pods() {
        let mut f = crate::disruption::testing::Fixture::default();
        let big = crate::disruption::testing::instance_type("big", 8, 0.8);
        f.pool("p", vec![big.clone()]);
        f.node("n0", "p", &big);
        f.node("n1", "p", &big);
        f.pod("a", Some("n0"), "1");
        f.pod("b", Some("n0"), "1");
        let costs = node_costs(&f.nodes, &f.pods, &f.instance_types);
        assert_eq!(
            costs,
            [cost("n0", "p", 0.8, 3.0), cost("n1", "p", 0.8, 1.0)]
        );
    }
}
