//! Preference relaxation (spec §3.12).
//!
//! Responsibility: when a pod cannot be placed, drop one of its soft constraints, in upstream's
//! order, on a copy of the pod: (1) the first of ≥2 required node-affinity terms; (2) the
//! heaviest preferred pod-affinity term; (3) the heaviest preferred pod-anti-affinity term;
//! (4) the heaviest preferred node-affinity term; (5) one ScheduleAnyway topology spread
//! constraint; (6) if some NodePool has a PreferNoSchedule taint, tolerate PreferNoSchedule.
//! Under the Ignore policy steps 2–5 do not apply (preferences were never considered); steps 1
//! and 6 do, as in upstream's code (the spec's summary says only step 1).
//! Inputs: a mutable pod. Outputs: a description of what was relaxed, or `None` when nothing is
//! left to relax.

use crate::pod::{Pod, WhenUnsatisfiable};
use crate::taints::{TaintEffect, Toleration, TolerationOperator};
use crate::topology::PreferencePolicy;

/// Index of the heaviest entry (the first of equal weights).
fn heaviest<T>(items: &[T], weight: impl Fn(&T) -> i32) -> Option<usize> {
    items
        .iter()
        .enumerate()
        .reduce(|best, item| {
            if weight(item.1) > weight(best.1) {
                item
            } else {
                best
            }
        })
        .map(|(i, _)| i)
}

/// Relaxes one soft constraint of `pod`; returns what was relaxed.
pub(crate) fn relax(
    pod: &mut Pod,
    policy: PreferencePolicy,
    tolerate_prefer_no_schedule: bool,
) -> Option<String> {
    if pod.required_node_affinity.len() >= 2 {
        pod.required_node_affinity.remove(0);
        return Some("removed the first required node-affinity term".into());
    }
    if policy == PreferencePolicy::Respect
        && let Some(relaxed) = relax_preference(pod)
    {
        return Some(relaxed);
    }
    let toleration = Toleration {
        key: String::new(),
        operator: TolerationOperator::Exists,
        value: String::new(),
        effect: Some(TaintEffect::PreferNoSchedule),
        toleration_seconds: None,
    };
    if tolerate_prefer_no_schedule && !pod.tolerations.contains(&toleration) {
        pod.tolerations.push(toleration);
        return Some("tolerated PreferNoSchedule taints".into());
    }
    None
}

/// Steps 2–5: the soft constraints only the Respect policy considers.
fn relax_preference(pod: &mut Pod) -> Option<String> {
    if let Some(i) = heaviest(&pod.pod_affinity.preferred, |t| t.weight) {
        pod.pod_affinity.preferred.remove(i);
        return Some("removed a preferred pod-affinity term".into());
    }
    if let Some(i) = heaviest(&pod.pod_anti_affinity.preferred, |t| t.weight) {
        pod.pod_anti_affinity.preferred.remove(i);
        return Some("removed a preferred pod-anti-affinity term".into());
    }
    if let Some(i) = heaviest(&pod.preferred_node_affinity, |t| t.weight) {
        pod.preferred_node_affinity.remove(i);
        return Some("removed a preferred node-affinity term".into());
    }
    if let Some(i) = pod
        .topology_spread_constraints
        .iter()
        .position(|c| c.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway)
    {
        pod.topology_spread_constraints.remove(i);
        return Some("removed a ScheduleAnyway topology spread constraint".into());
    }
    None
}
