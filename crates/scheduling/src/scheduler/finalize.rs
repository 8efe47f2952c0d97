//! Turning a finished solve into [`Results`] (spec §3.16, §3.17).
//!
//! Responsibility: for each planned NodeClaim drop the simulation-only requirements (placeholder
//! hostname, registered, initialized), add the smallest DaemonSet overhead among its remaining
//! option groups to its requests, order its instance types by price and truncate them to the
//! configured maximum (re-checking minValues: a NodeClaim that no longer meets them is dropped
//! and its pods fail), and narrow `instance-type` / `capacity-type` to what the options offer.
//! Inputs: the scheduler after the solve loop. Outputs: [`Results`].

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::instance_type::{InstanceType, MinValuesPolicy, OfferingMatcher};
use crate::labels::{CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, NODE_INITIALIZED, NODE_REGISTERED};
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
        crate::instance_type::order_by_price(
            &mut instance_types,
            &requirements,
            &options.well_known,
        );
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
        let names: Vec<Arc<str>> = instance_types
            .iter()
            .map(|it| it.name_arc().clone())
            .collect();
        requirements.add(Requirement::in_values(INSTANCE_TYPE, names));
        let matcher = OfferingMatcher::new(&requirements, &options.well_known);
        let capacity_types: BTreeSet<&str> = instance_types
            .iter()
            .flat_map(|it| matcher.compatible(it))
            .filter(|o| o.available)
            .filter_map(|o| o.capacity_type())
            .collect();
        if !capacity_types.is_empty() {
            let capacity_types = Requirement::in_values(CAPACITY_TYPE, capacity_types);
            requirements.add(capacity_types);
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
