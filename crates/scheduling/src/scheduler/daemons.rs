//! DaemonSet overhead (spec §3.10).
//!
//! Responsibility: decide which DaemonSet pods would run on a node of a NodePool template with a
//! given instance type, or on an existing node, and sum their requests and host ports.
//! Instance types whose compatible DaemonSet sets are equal share one overhead group.
//! Inputs: DaemonSet pods (one per DaemonSet), template taints/requirements, instance types,
//! existing nodes. Outputs: per-instance-type group ids with overheads; per-node overheads.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::instance_type::InstanceType;
use crate::labels::WellKnownLabels;
use crate::pod::{HostPort, Pod};
use crate::requirements::{RequirementError, Requirements};
use crate::resources::Resources;
use crate::taints::{Taint, TaintEffect, Toleration, TolerationOperator, tolerates_all};

/// A DaemonSet pod with its node-requirement alternatives (one per required node-affinity term,
/// since terms are ORed), computed once.
#[derive(Clone, Debug)]
pub(crate) struct DaemonPod {
    pub(crate) pod: Pod,
    alternatives: Vec<Requirements>,
}

impl DaemonPod {
    pub(crate) fn new(pod: Pod) -> Result<Self, RequirementError> {
        let mut alternatives = Vec::new();
        let mut base = pod.clone();
        base.required_node_affinity.clear();
        let base_reqs = base.strict_requirements()?;
        if pod.required_node_affinity.is_empty() {
            alternatives.push(base_reqs);
        } else {
            for term in &pod.required_node_affinity {
                let mut reqs = base_reqs.clone();
                reqs.add_all(&Requirements::from_selector(term.iter())?);
                alternatives.push(reqs);
            }
        }
        Ok(Self { pod, alternatives })
    }

    fn tolerates(&self, taints: &[Taint], implicit_prefer_no_schedule: bool) -> bool {
        if implicit_prefer_no_schedule {
            let mut tolerations = self.pod.tolerations.clone();
            tolerations.push(Toleration {
                key: String::new(),
                operator: TolerationOperator::Exists,
                value: String::new(),
                effect: Some(TaintEffect::PreferNoSchedule),
                toleration_seconds: None,
            });
            tolerates_all(taints, &tolerations).is_ok()
        } else {
            tolerates_all(taints, &self.pod.tolerations).is_ok()
        }
    }
}

/// The overhead of one group of instance types.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Overhead {
    /// Summed requests of the group's DaemonSet pods (including `pods`).
    pub(crate) requests: Resources,
    /// Their host ports.
    pub(crate) host_ports: Vec<HostPort>,
}

/// Groups the instance types of a template by the DaemonSet pods that would run on them.
/// Returns the groups' overheads and, aligned with `instance_types`, each one's group index.
pub(crate) fn template_groups(
    daemons: &[DaemonPod],
    template_taints: &[Taint],
    template_requirements: &Requirements,
    instance_types: &[Arc<InstanceType>],
    well_known: &WellKnownLabels,
) -> (Vec<Overhead>, Vec<usize>) {
    // DaemonSets that could run on the template at all (taints and template requirements).
    let on_template: Vec<(usize, Vec<&Requirements>)> = daemons
        .iter()
        .enumerate()
        .filter(|(_, d)| d.tolerates(template_taints, true))
        .map(|(i, d)| {
            let alts = d
                .alternatives
                .iter()
                .filter(|a| template_requirements.is_compatible(a, well_known))
                .collect::<Vec<_>>();
            (i, alts)
        })
        .filter(|(_, alts)| !alts.is_empty())
        .collect();
    let mut groups: BTreeMap<Vec<usize>, usize> = BTreeMap::new();
    let mut overheads = Vec::new();
    let mut assignment = Vec::with_capacity(instance_types.len());
    for it in instance_types {
        let members: Vec<usize> = on_template
            .iter()
            .filter(|(_, alts)| alts.iter().any(|a| it.requirements().is_intersecting(a)))
            .map(|(i, _)| *i)
            .collect();
        let next = overheads.len();
        let group = *groups.entry(members.clone()).or_insert(next);
        if group == next {
            let mut overhead = Overhead::default();
            for d in members.iter().filter_map(|&i| daemons.get(i)) {
                overhead.requests.merge(&d.pod.requests);
                overhead.host_ports.extend(d.pod.host_ports.iter().cloned());
            }
            overheads.push(overhead);
        }
        assignment.push(group);
    }
    if overheads.is_empty() {
        overheads.push(Overhead::default());
    }
    (overheads, assignment)
}

/// The DaemonSet overhead still to come on an existing node: the requests of the DaemonSet pods
/// that would run there, minus those of DaemonSet pods already bound to it (clamped at zero).
pub(crate) fn existing_node_overhead(
    daemons: &[DaemonPod],
    node_taints: &[Taint],
    node_requirements: &Requirements,
    daemon_pods_on_node: &[&Pod],
) -> Overhead {
    let mut overhead = Overhead::default();
    for d in daemons {
        let compatible = d.tolerates(node_taints, false)
            && d.alternatives
                .iter()
                .any(|a| node_requirements.is_compatible_strict(a));
        if compatible {
            overhead.requests.merge(&d.pod.requests);
            overhead.host_ports.extend(d.pod.host_ports.iter().cloned());
        }
    }
    let mut present = Resources::default();
    for pod in daemon_pods_on_node {
        present.merge(&pod.requests);
    }
    overhead.requests = subtract_clamped(&overhead.requests, &present);
    overhead
}

/// `a − b` element-wise over `a`'s keys, negative results clamped to zero.
pub(crate) fn subtract_clamped(a: &Resources, b: &Resources) -> Resources {
    let mut out = Resources::default();
    for (name, quantity) in a.iter() {
        let rest = quantity.saturating_sub(b.get_or_zero(name));
        out.insert(
            name.clone(),
            if rest.is_negative() {
                crate::quantity::Quantity::ZERO
            } else {
                rest
            },
        );
    }
    out
}
