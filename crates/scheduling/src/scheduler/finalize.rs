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

use rustc_hash::FxHashMap;

use crate::instance_type::{InstanceType, MinValuesPolicy, OfferingMatcher, PriceRank};
use crate::labels::{CAPACITY_TYPE, HOSTNAME, NODE_INITIALIZED, NODE_REGISTERED, TOPOLOGY_ZONE};
use crate::pod::Pod;
use crate::requirements::{Requirement, Requirements};
use crate::resources::Resources;

use super::Scheduler;
use super::input::{ExistingNodeBinding, PlannedNodeClaim, PodError, Results};

const MIN_VALUES_TRUNCATION: &str =
    "pod didn't schedule because NodePool couldn't meet minValues requirements";

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
    type PriceCache =
        FxHashMap<(usize, Vec<Option<Requirement>>), FxHashMap<*const InstanceType, PriceRank>>;
    let mut price_cache: PriceCache = FxHashMap::default();
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
            // An instance type's price depends only on the requirements of offering keys:
            // memoise it per template and distinct offering requirements.
            let key: Vec<Option<Requirement>> = template
                .offering_keys
                .iter()
                .map(|k| requirements.get(k).cloned())
                .collect();
            let prices = price_cache.entry((claim.template, key)).or_default();
            let matcher = OfferingMatcher::new(&requirements, &options.well_known);
            let mut keyed: Vec<(PriceRank, Arc<InstanceType>)> = instance_types
                .into_iter()
                .map(|it| {
                    let price = *prices
                        .entry(Arc::as_ptr(&it))
                        .or_insert_with(|| matcher.cheapest_available_rank(&it));
                    (price, it)
                })
                .collect();
            keyed.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.name().cmp(b.1.name())));
            instance_types = keyed.into_iter().map(|(_, it)| it).collect();
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
