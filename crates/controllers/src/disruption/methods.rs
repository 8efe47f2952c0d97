//! The voluntary disruption methods and the commands they decide (spec §5.5, §5.9–5.11).
//!
//! Responsibility: given candidates, a budget map and a simulation [`World`], decide one
//! [`Command`] — which nodes go, which new NodeClaims replace them — as a plain value:
//! - [`emptiness`]: every empty, consolidatable candidate within its pool's budget, in one
//!   DELETE command (all consolidation policies);
//! - [`multi_node`]: the longest prefix (by savings ratio, at most 100) of underutilized
//!   candidates whose pods fit on the remaining nodes plus at most one new, strictly cheaper
//!   node, and which every Balanced NodePool involved approves, found by binary search;
//! - [`single_node`]: the first underutilized candidate (by savings ratio, pools interleaved)
//!   that can be deleted, or replaced by one strictly cheaper node, with its NodePool's
//!   approval when the pool is Balanced (a candidate whose deletion alone could not be
//!   approved is not simulated);
//! - [`consolidation`]: the decision for one set of candidates (shared by both and by the
//!   validation after the delay).
//!
//! Both searches have upstream's time limits ([`multi_node_within`]: 1 minute, returning the
//! best prefix found so far; [`single_node_within`]: 3 minutes, checked before each candidate,
//! reporting the NodePools it did not reach so the next run takes them first): `search`.
//!
//! A replacement keeps only the instance types whose worst launch price is strictly below the
//! candidates' summed price, still satisfying minValues; when it may launch as spot or
//! on-demand it is restricted to spot (the price comparison assumed spot). Spot candidates are
//! replaced by spot only with the gate `SpotToSpotConsolidation` ([`World::spot_to_spot`]);
//! then the replacement is spot only and, for one node, needs at least
//! [`SPOT_TO_SPOT_MIN_OPTIONS`] cheaper options and keeps only the cheapest of them.
//! Candidates that were not acted on get a reason ([`Unconsolidatable`]). Consolidation
//! commands carry the scores of the NodePools they touch ([`super::balanced`]), and a single-node
//! move a Balanced pool rejects carries its scores with its reason (for metrics and Events).
//!
//! Inputs: [`Candidate`]s, [`BudgetMap`], [`World`]. Outputs: [`Command`]s and reasons. Pure.

use std::fmt;
use std::time::{Duration, Instant};

use api::NodePool;
use api::nodepool::{ConsolidationPolicy, DisruptionReason};
use scheduling::instance_type::{OfferingIterExt, satisfies_min_values};
use scheduling::labels::{CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT};
use scheduling::requirements::Requirement;
use scheduling::scheduler::PlannedNodeClaim;

use super::balanced::{self, PoolScore, PoolTotals};
use super::budget_map::BudgetMap;
use super::candidates::Candidate;
use super::consolidatable::Consolidation;
use super::simulation::World;

/// Which method decided a command (the `consolidation_type` metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Method {
    /// Empty nodes.
    Emptiness,
    /// Drifted nodes.
    Drift,
    /// Several underutilized nodes at once.
    MultiNode,
    /// One underutilized node.
    SingleNode,
}

impl Method {
    /// The reason budgets are evaluated for.
    #[must_use]
    pub fn reason(self) -> DisruptionReason {
        match self {
            Self::Emptiness => DisruptionReason::Empty,
            Self::Drift => DisruptionReason::Drifted,
            Self::MultiNode | Self::SingleNode => DisruptionReason::Underutilized,
        }
    }

    /// Upstream's `consolidation_type` label value.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::Emptiness => "empty",
            Self::Drift => "",
            Self::MultiNode => "multi",
            Self::SingleNode => "single",
        }
    }
}

/// DELETE or REPLACE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The candidates go; their pods fit elsewhere.
    Delete,
    /// The candidates go once their replacements are initialized.
    Replace,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Delete => "delete",
            Self::Replace => "replace",
        })
    }
}

/// What one method decided.
#[derive(Debug, Clone)]
pub struct Command {
    /// The method.
    pub method: Method,
    /// The nodes to remove.
    pub candidates: Vec<Candidate>,
    /// The NodeClaims to create first.
    pub replacements: Vec<PlannedNodeClaim>,
    /// Price per hour saved (candidates' prices minus the replacement's cheapest option).
    pub savings: f64,
    /// Consolidation: per NodePool of the candidates, its policy and (Balanced) its approving
    /// score; empty for the other methods.
    pub scores: Vec<PoolScore>,
    /// How long the decision took to compute.
    pub took: Duration,
}

impl Command {
    /// DELETE or REPLACE.
    #[must_use]
    pub fn decision(&self) -> Decision {
        if self.replacements.is_empty() {
            Decision::Delete
        } else {
            Decision::Replace
        }
    }

    /// The reason (for budgets, the `DisruptionReason` condition and metrics).
    #[must_use]
    pub fn reason(&self) -> DisruptionReason {
        self.method.reason()
    }

    /// The candidates' node names.
    #[must_use]
    pub fn nodes(&self) -> Vec<String> {
        self.candidates.iter().map(|c| c.node.clone()).collect()
    }

    /// One line for Events and logs: what goes, what replaces it, the estimated savings
    /// (in the unit of the prices).
    #[must_use]
    pub fn summary(&self) -> String {
        let nodes = self.nodes();
        let what = match self.decision() {
            Decision::Delete => format!("Deleting {} node(s) ({})", nodes.len(), nodes.join(", ")),
            Decision::Replace => format!(
                "Replacing {} node(s) ({}) with {}",
                nodes.len(),
                nodes.join(", "),
                self.replacement_types().join(", ")
            ),
        };
        format!("{what}, savings {:.3}/h", self.savings)
    }

    /// The replacements' cheapest instance types.
    #[must_use]
    pub fn replacement_types(&self) -> Vec<String> {
        self.replacements
            .iter()
            .filter_map(|r| r.instance_types.first().map(|it| it.name().to_owned()))
            .collect()
    }
}

/// A candidate not acted on, and why (for `Unconsolidatable` Events and `plan`).
#[derive(Debug, Clone, PartialEq)]
pub struct Unconsolidatable {
    /// The node.
    pub node: String,
    /// Why.
    pub reason: String,
    /// When a Balanced NodePool rejected the move: the move's scores.
    pub scores: Vec<PoolScore>,
}

impl Unconsolidatable {
    fn new(node: &str, reason: String) -> Self {
        Self {
            node: node.to_owned(),
            reason,
            scores: Vec::new(),
        }
    }
}

fn pool_of<'a>(pools: &'a [NodePool], name: &str) -> Option<&'a NodePool> {
    pools
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(name))
}

fn policy(pool: &NodePool) -> ConsolidationPolicy {
    pool.spec
        .disruption_or_default()
        .consolidation_policy
        .unwrap_or_default()
}

/// The empty, consolidatable candidates within budget: one DELETE command (spec §5.5). A
/// node hosting CapacityBuffer virtual pods is not empty: it is the buffer's warm room.
#[must_use]
pub fn emptiness(candidates: &[Candidate], budgets: &mut BudgetMap) -> Option<Command> {
    let started = Instant::now();
    let mut empty: Vec<&Candidate> = candidates
        .iter()
        .filter(|c| c.is_empty() && c.buffer_pods == 0 && c.consolidation.is_consolidatable())
        .collect();
    empty.sort_by(|a, b| b.savings_ratio().total_cmp(&a.savings_ratio()));
    let taken: Vec<Candidate> = empty
        .into_iter()
        .filter(|c| budgets.take_for(c))
        .cloned()
        .collect();
    (!taken.is_empty()).then(|| Command {
        method: Method::Emptiness,
        savings: taken.iter().map(|c| c.price).sum(),
        candidates: taken,
        replacements: Vec::new(),
        scores: Vec::new(),
        took: started.elapsed(),
    })
}

/// Whether `c` may be consolidated as underutilized (spec §5.7); the reason when not.
///
/// # Errors
/// Why not, in upstream's words.
pub fn underutilized(c: &Candidate, pools: &[NodePool]) -> Result<(), String> {
    if c.instance_type.is_none() {
        return Err(format!(
            "Instance Type {:?} not found",
            c.instance_type_name.as_deref().unwrap_or_default()
        ));
    }
    if c.capacity_type.is_none() {
        return Err(format!("Node does not have label {CAPACITY_TYPE:?}"));
    }
    match &c.consolidation {
        Consolidation::Disabled(why) => {
            return Err(format!(
                "NodePool {:?} has consolidation disabled ({why})",
                c.node_pool
            ));
        }
        Consolidation::NotInitialized => return Err("node is not initialized".into()),
        Consolidation::NotYet(at) => return Err(format!("node is not consolidatable until {at}")),
        Consolidation::Consolidatable => {}
    }
    if c.is_empty() {
        return Err("node is empty (emptiness removes it)".into());
    }
    match pool_of(pools, &c.node_pool).map(policy) {
        Some(ConsolidationPolicy::WhenEmpty) => Err(format!(
            "NodePool {:?} has consolidation policy WhenEmpty",
            c.node_pool
        )),
        Some(_) => Ok(()),
        None => Err(format!("NodePool {:?} not found", c.node_pool)),
    }
}

/// The decision for removing `candidates` together (spec §5.9); the reason when there is none.
///
/// # Errors
/// Why they cannot go (pods would not fit; more than one new node; not cheaper; spot to spot).
pub fn consolidation(
    world: &World,
    candidates: &[&Candidate],
    method: Method,
) -> Result<Command, String> {
    let started = Instant::now();
    let sim = world.simulate_consolidation(candidates);
    if !sim.all_moved() {
        return Err(sim.why_not());
    }
    let source: f64 = candidates.iter().map(|c| c.price).sum();
    let owned: Vec<Candidate> = candidates.iter().map(|c| (*c).clone()).collect();
    let mut new = sim.results.new_node_claims;
    match new.len() {
        0 => Ok(Command {
            method,
            candidates: owned,
            replacements: Vec::new(),
            savings: source,
            scores: Vec::new(),
            took: started.elapsed(),
        }),
        1 => {
            // "Strictly cheaper" needs a price on both sides: a node whose price is not known
            // can be removed, not replaced (spec §5.9 item 4, unpriced offerings).
            if let Some(c) = candidates.iter().find(|c| !c.priced) {
                return Err(format!(
                    "Can't replace {} by a cheaper node: its price is not known",
                    c.node
                ));
            }
            let mut replacement = new.remove(0);
            cheaper(world, &mut replacement, candidates, source, method)?;
            let cost = replacement
                .instance_types
                .first()
                .map(|it| {
                    it.offerings()
                        .cheapest_compatible_price(&replacement.requirements, world.well_known())
                })
                .unwrap_or(f64::INFINITY);
            Ok(Command {
                method,
                candidates: owned,
                replacements: vec![replacement],
                savings: source - cost,
                scores: Vec::new(),
                took: started.elapsed(),
            })
        }
        n => Err(format!("Can't remove without creating {n} candidates")),
    }
}

/// Narrows `replacement` to strictly cheaper options (spec §5.9 item 4).
fn cheaper(
    world: &World,
    replacement: &mut PlannedNodeClaim,
    candidates: &[&Candidate],
    source: f64,
    method: Method,
) -> Result<(), String> {
    let wk = world.well_known();
    let may_be_spot = replacement
        .requirements
        .get(CAPACITY_TYPE)
        .is_none_or(|r| r.has(CAPACITY_TYPE_SPOT));
    let all_spot = candidates
        .iter()
        .all(|c| c.capacity_type.as_deref() == Some(CAPACITY_TYPE_SPOT));
    let spot_to_spot = all_spot && may_be_spot;
    if spot_to_spot {
        if !world.spot_to_spot() {
            return Err(
                "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"
                    .into(),
            );
        }
        // Spot for spot: only spot offerings count, in the price filter and the launch.
        replacement
            .requirements
            .add(Requirement::in_values(CAPACITY_TYPE, [CAPACITY_TYPE_SPOT]));
    }
    let mut options: Vec<_> = replacement
        .instance_types
        .iter()
        .filter(|it| {
            it.offerings()
                .iter()
                .filter(|o| o.available)
                .worst_launch_price(&replacement.requirements, wk)
                < source
        })
        .cloned()
        .collect();
    if method == Method::MultiNode {
        same_type_filter(&mut options, candidates, replacement, world);
    }
    if options.is_empty() {
        return Err("Can't replace with a cheaper node".into());
    }
    if spot_to_spot && method == Method::SingleNode {
        spot_to_spot_options(&mut options, replacement, wk)?;
    }
    if let Err(e) = satisfies_min_values(&options, &replacement.requirements) {
        // `--min-values-policy BestEffort`: as many values as the cheaper options have, the
        // replacement marked relaxed, as a launch would be.
        if !world.min_values_best_effort() {
            return Err(format!("Filtering by price: {e}"));
        }
        for short in &e.unsatisfied {
            replacement.min_values_relaxed |= replacement
                .requirements
                .relax_min_values(&short.key, short.available);
        }
    }
    let may_be_on_demand = replacement
        .requirements
        .get(CAPACITY_TYPE)
        .is_none_or(|r| r.has(CAPACITY_TYPE_ON_DEMAND));
    if may_be_spot && may_be_on_demand {
        let spot_offered = options.iter().any(|it| {
            it.offerings()
                .iter()
                .any(|o| o.available && o.capacity_type() == Some(CAPACITY_TYPE_SPOT))
        });
        if spot_offered {
            replacement
                .requirements
                .add(Requirement::in_values(CAPACITY_TYPE, [CAPACITY_TYPE_SPOT]));
        }
    }
    replacement.instance_types = options;
    Ok(())
}

/// The fewest cheaper options a single spot node needs to be replaced by a spot node.
pub const SPOT_TO_SPOT_MIN_OPTIONS: usize = 15;

/// Single-node spot to spot (spec §5.9 item 5): at least [`SPOT_TO_SPOT_MIN_OPTIONS`] cheaper
/// options, then only the cheapest of them — [`SPOT_TO_SPOT_MIN_OPTIONS`], or as many as
/// minValues needs — so the node launched is always among the cheapest and a replacement is
/// not replaced again at once.
fn spot_to_spot_options(
    options: &mut Vec<std::sync::Arc<scheduling::instance_type::InstanceType>>,
    replacement: &PlannedNodeClaim,
    wk: &scheduling::labels::WellKnownLabels,
) -> Result<(), String> {
    if options.len() < SPOT_TO_SPOT_MIN_OPTIONS {
        return Err(format!(
            "SpotToSpotConsolidation requires {SPOT_TO_SPOT_MIN_OPTIONS} cheaper instance type options than the current candidate to consolidate, got {}",
            options.len()
        ));
    }
    scheduling::instance_type::order_by_price(options, &replacement.requirements, wk);
    let keep = satisfies_min_values(options, &replacement.requirements)
        .unwrap_or(0)
        .max(SPOT_TO_SPOT_MIN_OPTIONS);
    options.truncate(keep);
    Ok(())
}

/// Multi-node: when a replacement option is the instance type of a candidate, keep only
/// options strictly cheaper than the cheapest such candidate (no "replace 3 nodes by one of the
/// same kind" churn).
fn same_type_filter(
    options: &mut Vec<std::sync::Arc<scheduling::instance_type::InstanceType>>,
    candidates: &[&Candidate],
    replacement: &PlannedNodeClaim,
    world: &World,
) {
    let same: Vec<f64> = candidates
        .iter()
        .filter(|c| {
            options
                .iter()
                .any(|o| Some(o.name()) == c.instance_type_name.as_deref())
        })
        .map(|c| c.price)
        .collect();
    let Some(limit) = same.into_iter().reduce(f64::min) else {
        return;
    };
    options.retain(|it| {
        it.offerings()
            .iter()
            .filter(|o| o.available)
            .worst_launch_price(&replacement.requirements, world.well_known())
            < limit
    });
}

/// Candidates eligible for consolidation, by savings ratio (highest first), with the reasons
/// of the others.
#[must_use]
pub fn eligible<'a>(
    candidates: &'a [Candidate],
    pools: &[NodePool],
) -> (Vec<&'a Candidate>, Vec<Unconsolidatable>) {
    let mut ok = Vec::new();
    let mut not = Vec::new();
    for c in candidates {
        match underutilized(c, pools) {
            Ok(()) => ok.push(c),
            Err(reason) => not.push(Unconsolidatable::new(&c.node, reason)),
        }
    }
    ok.sort_by(|a, b| {
        b.savings_ratio()
            .total_cmp(&a.savings_ratio())
            .then_with(|| a.node.cmp(&b.node))
    });
    (ok, not)
}

/// A consolidation move that is not taken: why, and (a Balanced NodePool rejected it) its
/// scores.
pub(super) struct Rejected {
    pub(super) reason: String,
    pub(super) scores: Vec<PoolScore>,
}

/// The command of `computed` with its scores, if every Balanced NodePool of its candidates
/// approves it (spec §5.12).
pub(super) fn approved(
    computed: Result<Command, String>,
    pools: &[NodePool],
    totals: &PoolTotals,
) -> Result<Command, Rejected> {
    let mut cmd = computed.map_err(|reason| Rejected {
        reason,
        scores: Vec::new(),
    })?;
    let refs: Vec<&Candidate> = cmd.candidates.iter().collect();
    let verdict = balanced::evaluate(&refs, cmd.savings, pools, totals);
    if let Some(reason) = verdict.why_not() {
        return Err(Rejected {
            reason,
            scores: verdict.pools,
        });
    }
    cmd.scores = verdict.pools;
    Ok(cmd)
}

/// Drift (spec §5.6): the first drifted candidate within the Drifted budget whose pods fit on
/// the other nodes plus new ones; all the new NodeClaims of its simulation replace it (drift
/// may replace one node by several, and never needs to be cheaper). Empty drifted nodes go
/// first, then the others, each by how long they have been drifted. The candidates tried before
/// it, with why they could not go.
#[must_use]
pub fn drift(
    world: &World,
    candidates: &[Candidate],
    budgets: &mut BudgetMap,
) -> (Option<Command>, Vec<Unconsolidatable>) {
    let started = Instant::now();
    let mut drifted: Vec<&Candidate> = candidates.iter().filter(|c| c.drifted.is_some()).collect();
    drifted.sort_by(|a, b| {
        (!a.reschedulable.is_empty(), a.drifted, &a.node).cmp(&(
            !b.reschedulable.is_empty(),
            b.drifted,
            &b.node,
        ))
    });
    let mut reasons = Vec::new();
    for c in drifted {
        if !budgets.allows(c) {
            reasons.push(Unconsolidatable::new(
                &c.node,
                budget_blocked(DisruptionReason::Drifted),
            ));
            continue;
        }
        let sim = world.simulate(&[c]);
        if !sim.all_moved() {
            reasons.push(Unconsolidatable::new(&c.node, sim.why_not()));
            continue;
        }
        budgets.take(&c.node_pool);
        let cost: f64 = sim
            .results
            .new_node_claims
            .iter()
            .filter_map(|r| {
                let it = r.instance_types.first()?;
                let p = it
                    .offerings()
                    .cheapest_compatible_price(&r.requirements, world.well_known());
                p.is_finite().then_some(p)
            })
            .sum();
        return (
            Some(Command {
                method: Method::Drift,
                savings: c.price - cost,
                candidates: vec![c.clone()],
                replacements: sim.results.new_node_claims,
                scores: Vec::new(),
                took: started.elapsed(),
            }),
            reasons,
        );
    }
    (None, reasons)
}

/// Why a candidate is passed over when its NodePool's budget for `reason` is used up (the
/// words upstream publishes on the NodePool).
#[must_use]
pub fn budget_blocked(reason: DisruptionReason) -> String {
    format!(
        "No allowed disruptions for disruption reason {} due to blocking budget",
        reason_name(reason)
    )
}

/// Whether `why` is a [`budget_blocked`] reason: it belongs to the NodePool (where the
/// disruption loop publishes it), not to each of its nodes.
#[must_use]
pub fn is_budget_blocked(why: &str) -> bool {
    [
        DisruptionReason::Empty,
        DisruptionReason::Drifted,
        DisruptionReason::Underutilized,
    ]
    .into_iter()
    .any(|r| why == budget_blocked(r))
}

/// The reason's name as NodePools spell it.
#[must_use]
pub fn reason_name(reason: DisruptionReason) -> &'static str {
    match reason {
        DisruptionReason::Underutilized => "Underutilized",
        DisruptionReason::Empty => "Empty",
        DisruptionReason::Drifted => "Drifted",
    }
}

mod search;

pub use search::{
    Limits, MULTI_NODE_MAX, MULTI_NODE_TIMEOUT, SINGLE_NODE_TIMEOUT, Searched, multi_node,
    multi_node_within, single_node, single_node_within,
};

#[cfg(test)]
mod tests;
