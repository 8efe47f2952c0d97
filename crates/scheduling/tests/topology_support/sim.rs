//! `Sim`: a miniature scheduler driving `Topology` like the real one — existing nodes, then
//! in-flight NodeClaims (fewest pods first), then a new NodeClaim per template; preferences
//! relaxed one step per failure with `update`, the original restored on final failure.

use std::collections::BTreeMap;

use scheduling::labels::WellKnownLabels;
use scheduling::pod::{LabelSelector, Pod, WeightedPodAffinityTerm, WhenUnsatisfiable};
use scheduling::requirements::{Requirement, Requirements};
use scheduling::taints::{Taint, tolerates_all};
use scheduling::topology::{Placement, PreferencePolicy, Topology};

use super::{HOST, World};

/// A node or NodeClaim with the pods placed on it.
#[derive(Clone, Debug)]
pub struct Target {
    pub requirements: Requirements,
    pub taints: Vec<Taint>,
    pub pods: Vec<Pod>,
    pub existing: bool,
}

/// A miniature scheduler.
#[derive(Debug)]
pub struct Sim {
    pub world: World,
    pub topology: Topology,
    pub existing: Vec<Target>,
    pub claims: Vec<Target>,
    pub(super) next_host: usize,
    pub(super) well_known: WellKnownLabels,
}

impl Sim {
    fn try_target(&mut self, pod: &Pod, target: &Target) -> Result<Requirements, String> {
        if target.pods.len() >= self.world.capacity {
            return Err("full".into());
        }
        tolerates_all(&target.taints, &pod.tolerations).map_err(|e| e.to_string())?;
        let respect = self.world.policy == PreferencePolicy::Respect;
        let pod_reqs = pod.requirements(respect).map_err(|e| e.to_string())?;
        let strict = pod.strict_requirements().map_err(|e| e.to_string())?;
        let mut reqs = target.requirements.clone();
        if target.existing {
            reqs.compatible_strict(&pod_reqs)
                .map_err(|e| e.to_string())?;
        } else {
            reqs.compatible(&pod_reqs, &self.well_known)
                .map_err(|e| e.to_string())?;
            reqs.add_all(&pod_reqs);
        }
        let topo = self
            .topology
            .add_requirements(pod, &strict, &reqs)
            .map_err(|e| e.to_string())?;
        if target.existing {
            reqs.compatible_strict(&topo).map_err(|e| e.to_string())?;
        } else {
            reqs.compatible(&topo, &self.well_known)
                .map_err(|e| e.to_string())?;
        }
        reqs.add_all(&topo);
        Ok(reqs)
    }

    fn commit(&mut self, pod: &Pod, existing: bool, index: usize, reqs: Requirements) {
        let target = if existing {
            &mut self.existing[index]
        } else {
            &mut self.claims[index]
        };
        let placement = if existing {
            Placement::existing_node(&reqs, &target.taints)
        } else {
            Placement::node_claim(&reqs, &target.taints, &self.well_known)
        };
        self.topology.record(pod, placement);
        target.requirements = reqs;
        target.pods.push(pod.clone());
    }

    /// One attempt: existing nodes, in-flight claims (fewest pods first), a new claim.
    pub fn try_place(&mut self, pod: &Pod) -> Result<(), String> {
        for i in 0..self.existing.len() {
            let target = self.existing[i].clone();
            if let Ok(reqs) = self.try_target(pod, &target) {
                self.commit(pod, true, i, reqs);
                return Ok(());
            }
        }
        let mut order: Vec<usize> = (0..self.claims.len()).collect();
        order.sort_by_key(|&i| (self.claims[i].pods.len(), i));
        for i in order {
            let target = self.claims[i].clone();
            if let Ok(reqs) = self.try_target(pod, &target) {
                self.commit(pod, false, i, reqs);
                return Ok(());
            }
        }
        let mut last = "no nodepools".to_owned();
        for (template, taints) in self.world.templates.clone() {
            self.next_host += 1;
            let host = format!("hostname-placeholder-{:04}", self.next_host);
            self.topology.register(HOST, &host);
            let mut requirements = template;
            requirements.add(Requirement::in_values(HOST, [host.as_str()]));
            let claim = Target {
                requirements,
                taints,
                pods: Vec::new(),
                existing: false,
            };
            match self.try_target(pod, &claim) {
                Ok(reqs) => {
                    self.claims.push(claim);
                    let i = self.claims.len() - 1;
                    self.commit(pod, false, i, reqs);
                    return Ok(());
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Places a pod, relaxing preferences (preferred affinity, preferred anti-affinity,
    /// ScheduleAnyway spread) one step per failure; restores the original on final failure.
    pub fn place(&mut self, original: &Pod) -> Result<(), String> {
        let mut last = match self.try_place(original) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let mut pod = original.clone();
        while self.world.policy == PreferencePolicy::Respect && relax(&mut pod) {
            self.topology.update(&pod);
            match self.try_place(&pod) {
                Ok(()) => return Ok(()),
                Err(e) => last = e,
            }
        }
        if pod != *original {
            self.topology.update(original);
        }
        Err(last)
    }

    /// Schedules pods in order, re-queueing failures until a full pass makes no progress.
    /// Returns the names of the pods left unscheduled.
    pub fn run(&mut self, pods: &[Pod]) -> Vec<String> {
        let mut queue: Vec<Pod> = pods.to_vec();
        loop {
            let before = queue.len();
            queue.retain(|p| self.place(p).is_err());
            if queue.is_empty() || queue.len() == before {
                return queue.iter().map(|p| p.name.to_string()).collect();
            }
        }
    }

    /// Where each placed pod is: (target kind+index).
    pub fn target_of(&self, name: &str) -> Option<(bool, usize)> {
        let find = |targets: &[Target]| {
            targets
                .iter()
                .position(|t| t.pods.iter().any(|p| &*p.name == name))
        };
        find(&self.existing)
            .map(|i| (true, i))
            .or_else(|| find(&self.claims).map(|i| (false, i)))
    }

    /// The domain of `key` the pod landed in (only when decided).
    pub fn domain_of(&self, name: &str, key: &str) -> Option<String> {
        let (existing, i) = self.target_of(name)?;
        let t = if existing {
            &self.existing[i]
        } else {
            &self.claims[i]
        };
        let r = t.requirements.get(key)?;
        match (r.is_complement(), r.values()) {
            (false, [v]) => Some(v.to_string()),
            _ => None,
        }
    }

    /// Pods matching `selector` per decided domain of `key` (existing pods included), as sorted
    /// counts — like upstream's `ExpectSkew`.
    pub fn skew(&self, key: &str, selector: &LabelSelector) -> Vec<usize> {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for t in self.existing.iter().chain(&self.claims) {
            let Some(r) = t.requirements.get(key) else {
                continue;
            };
            let [domain] = r.values() else { continue };
            if r.is_complement() {
                continue;
            }
            let n = t
                .pods
                .iter()
                .filter(|p| selector.matches(&p.labels))
                .count();
            if n > 0 {
                *counts.entry(domain.to_string()).or_default() += n;
            }
        }
        let mut v: Vec<usize> = counts.into_values().collect();
        v.sort_unstable();
        v
    }
}

/// One relaxation step (upstream order; required node-affinity terms are never dropped here).
pub fn relax(pod: &mut Pod) -> bool {
    let heaviest = |terms: &[WeightedPodAffinityTerm]| {
        terms
            .iter()
            .enumerate()
            .max_by_key(|(i, t)| (t.weight, std::cmp::Reverse(*i)))
            .map(|(i, _)| i)
    };
    if let Some(i) = heaviest(&pod.pod_affinity.preferred) {
        pod.pod_affinity.preferred.remove(i);
        return true;
    }
    if let Some(i) = heaviest(&pod.pod_anti_affinity.preferred) {
        pod.pod_anti_affinity.preferred.remove(i);
        return true;
    }
    if let Some(i) = pod
        .preferred_node_affinity
        .iter()
        .enumerate()
        .max_by_key(|(i, t)| (t.weight, std::cmp::Reverse(*i)))
        .map(|(i, _)| i)
    {
        pod.preferred_node_affinity.remove(i);
        return true;
    }
    if let Some(i) = pod
        .topology_spread_constraints
        .iter()
        .position(|c| c.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway)
    {
        pod.topology_spread_constraints.remove(i);
        return true;
    }
    false
}
