//! Turning a finished solve into [`Results`] (spec §3.16, §3.17).
//!
//! Responsibility: for each planned NodeClaim drop the simulation-only requirements (placeholder
//! hostname, registered, initialized), add the smallest DaemonSet overhead among its remaining
//! option groups to its requests, order its instance types by price and truncate them to the
//! configured maximum (re-checking minValues: a NodeClaim that no longer meets them is dropped
//! and its pods fail). Narrowing `instance-type` / `capacity-type` to what the options offer is
//! left to [`PlannedNodeClaim::launch_requirements`], run only for NodeClaims actually created
//! (upstream does it when converting to a NodeClaim, not in Solve).
//! Inputs: the scheduler after the solve loop. Outputs: [`Results`].

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::instance_type::{InstanceType, MinValuesPolicy, OfferingMatcher, PriceRank};
use crate::labels::{CAPACITY_TYPE, HOSTNAME, NODE_INITIALIZED, NODE_REGISTERED, TOPOLOGY_ZONE};
use crate::pod::Pod;
use crate::requirements::{Requirement, Requirements};
use crate::resources::Resources;

use super::Scheduler;
use super::input::{ExistingNodeBinding, PlannedNodeClaim, PodError, Results};

const MIN_VALUES_TRUNCATION: &str =
    "pod didn't schedule because NodePool couldn't meet minValues requirements";

/// `mine` (a claim's instance types, a subsequence of the template's `all`) in the template's
/// price `order` (positions into `all`). A claim keeps the template's order, so membership is
/// found by one walk of both lists comparing pointers; should that ever not hold, by a set.
fn in_price_order(
    all: &[Arc<InstanceType>],
    order: &[usize],
    mine: Vec<Arc<InstanceType>>,
) -> Vec<Arc<InstanceType>> {
    let mut member = vec![false; all.len()];
    let mut next = mine.iter().peekable();
    for (slot, it) in member.iter_mut().zip(all) {
        if next.peek().is_some_and(|m| Arc::ptr_eq(m, it)) {
            *slot = true;
            next.next();
        }
    }
    if next.peek().is_some() {
        let set: FxHashSet<*const InstanceType> = mine.iter().map(Arc::as_ptr).collect();
        for (slot, it) in member.iter_mut().zip(all) {
            *slot = set.contains(&Arc::as_ptr(it));
        }
    }
    order
        .iter()
        .filter(|&&i| member.get(i).copied().unwrap_or(false))
        .filter_map(|&i| all.get(i).cloned())
        .collect()
}

pub(super) fn results(
    scheduler: Scheduler,
    pods: &[Pod],
    mut errors: Vec<Option<String>>,
) -> Results {
    let Scheduler {
        options,
        templates,
        existing,
        claims,
        ..
    } = scheduler;
    let index_of = |uid: &Arc<str>| pods.iter().position(|p| &p.uid == uid);
    // Per template and distinct offering requirements: the template's instance types (in its
    // order) and their positions in price order (ties by name, a total order: names are unique
    // in a template).
    type OrderCache =
        FxHashMap<(usize, Vec<Option<Requirement>>), (Vec<Arc<InstanceType>>, Vec<usize>)>;
    let mut order_cache: OrderCache = FxHashMap::default();
    let mut new_node_claims = Vec::with_capacity(claims.len());
    for claim in claims {
        let Some(template) = templates.get(claim.template) else {
            continue;
        };
        let mut requirements = Requirements::new();
        for req in claim.requirements.iter() {
            if ![HOSTNAME, NODE_REGISTERED, NODE_INITIALIZED].contains(&req.key()) {
                requirements.add(req.clone());
            }
        }
        let mut overhead: Option<Resources> = None;
        for group in &claim.options {
            if let Some(o) = template.overheads.get(group.group) {
                overhead = Some(match overhead {
                    None => o.requests.clone(),
                    Some(min) => min.min_with(&o.requests),
                });
            }
        }
        let mut requests = claim.requests.clone();
        if let Some(overhead) = overhead {
            requests.merge(&overhead);
        }
        let mut instance_types: Vec<Arc<InstanceType>> = claim.instance_types().cloned().collect();
        // Templates list their instance types cheapest first and claims keep that order, so
        // only a claim whose offering requirements narrowed (zone, capacity type) or that spans
        // several overhead groups needs sorting again.
        let offering_keys_unchanged = [TOPOLOGY_ZONE, CAPACITY_TYPE]
            .iter()
            .all(|k| requirements.get(k) == template.requirements.get(k));
        if claim.options.len() > 1 || !offering_keys_unchanged {
            // An instance type's price depends only on the requirements of offering keys: the
            // template's instance types are ordered once per distinct offering requirements, and
            // a claim keeps its own in that order (the same as sorting them by price and name,
            // without a sort per claim).
            let key: Vec<Option<Requirement>> = template
                .offering_keys
                .iter()
                .map(|k| requirements.get(k).cloned())
                .collect();
            let (all, order) = order_cache.entry((claim.template, key)).or_insert_with(|| {
                let matcher = OfferingMatcher::new(&requirements, &options.well_known);
                let all: Vec<Arc<InstanceType>> = template
                    .options
                    .iter()
                    .flat_map(|g| g.instance_types.iter().cloned())
                    .collect();
                let ranks: Vec<PriceRank> = all
                    .iter()
                    .map(|it| matcher.cheapest_available_rank(it))
                    .collect();
                let mut order: Vec<usize> = (0..all.len()).collect();
                order.sort_by(|&a, &b| {
                    let (ra, rb) = (ranks.get(a), ranks.get(b));
                    let (na, nb) = (all.get(a).map(|i| i.name()), all.get(b).map(|i| i.name()));
                    ra.cmp(&rb).then_with(|| na.cmp(&nb))
                });
                (all, order)
            });
            instance_types = in_price_order(all, order, instance_types);
        }
        instance_types.truncate(options.max_instance_types);
        if requirements.has_min_values()
            && options.min_values_policy == MinValuesPolicy::Strict
            && crate::instance_type::satisfies_min_values(&instance_types, &requirements).is_err()
        {
            for uid in &claim.pods {
                if let Some(slot) = index_of(uid).and_then(|i| errors.get_mut(i)) {
                    *slot = Some(MIN_VALUES_TRUNCATION.into());
                }
            }
            continue;
        }
        new_node_claims.push(PlannedNodeClaim {
            node_pool: template.pool.clone(),
            requirements,
            instance_types,
            requests,
            labels: template.labels.clone(),
            taints: template.taints.clone(),
            startup_taints: template.startup_taints.clone(),
            pods: claim.pods,
            min_values_relaxed: claim.min_values_relaxed,
        });
    }
    let existing_nodes = existing
        .into_iter()
        .filter(|n| !n.pods.is_empty())
        .map(|n| ExistingNodeBinding {
            node: n.name,
            pods: n.pods,
        })
        .collect();
    let mut queue_order: Vec<usize> = (0..pods.len()).collect();
    queue_order.sort_by(|&a, &b| match (pods.get(a), pods.get(b)) {
        (Some(a), Some(b)) => super::queue::compare(a, b),
        _ => std::cmp::Ordering::Equal,
    });
    let errors = queue_order
        .into_iter()
        .filter_map(|i| {
            let pod = pods.get(i)?;
            let message = errors.get(i)?.clone()?;
            Some(PodError {
                uid: pod.uid.clone(),
                pod: pod.key(),
                message,
            })
        })
        .collect();
    Results {
        new_node_claims,
        existing_nodes,
        errors,
    }
}
