//! The provisioning scheduler: Karpenter core's bin-packing simulation (spec §3.4–§3.18).
//!
//! Responsibility: given NodePools with their instance types, the existing cluster and the
//! pending pods, decide for every pod — in upstream's queue order — whether it fits an existing
//! node, a NodeClaim already planned this round, or a new NodeClaim from the first NodePool (by
//! weight) that can take it, relaxing the pod's preferences one step at a time when it fits
//! nowhere. Deterministic: the same input always gives the same output.
//! Inputs: [`NodePool`]s, a [`Cluster`], pods, [`Options`]. Outputs: [`Results`] — planned
//! NodeClaims, bindings to existing nodes and per-pod errors.
//!
//! Placement order is upstream's: existing nodes (initialized first, then by name), then planned
//! NodeClaims (fewest pods first, ties by age), then new NodeClaims per NodePool. Upstream
//! evaluates candidates in parallel and takes the lowest index that succeeds; evaluating them in
//! order gives the same answer.
//!
//! The scan of planned NodeClaims skips, without asking them, the claims a pod certainly cannot
//! join: those a hostname check already refused (counts only grow, so the refusal stands;
//! `host_blocks`) and those whose zone, or other non-hostname domain, topology refused for
//! another claim of the same domains in this scan (`classes`). Skipping a claim that would
//! refuse changes no decision; `index_tests` solves workloads both ways and compares.

mod claim;
mod classes;
mod daemons;
mod existing;
mod finalize;
mod headroom;
mod host_blocks;
mod input;
mod preferences;
mod queue;
mod template;
mod template_claim;

use std::sync::Arc;

use crate::labels::HOSTNAME;
use crate::pod::Pod;
use crate::requirements::Requirements;
use crate::topology::{ClusterNode, DomainUniverse, Placement, Topology, TopologyInput};

use claim::{Claim, FilterContext};
use classes::{Classes, Verdict};
use daemons::DaemonPod;
use existing::ExistingCandidate;
use host_blocks::HostBlocks;
use template::{GroupOptions, Template};

pub use crate::topology::PreferencePolicy;
pub use input::{
    Cluster, ExistingNode, ExistingNodeBinding, NodePool, Options, PlannedNodeClaim, PodError,
    Results,
};
pub use template::DroppedPool;
pub use template_claim::template_node_claim;

/// A pod's node requirements, computed once per (relaxed) pod.
#[derive(Clone, Debug)]
pub(crate) struct PodData {
    /// nodeSelector + first required term (+ heaviest preferred term when respected).
    pub(crate) requirements: Requirements,
    /// nodeSelector + first required term.
    pub(crate) strict_requirements: Requirements,
}

impl PodData {
    fn new(pod: &Pod, policy: PreferencePolicy) -> Result<Self, String> {
        let respect = policy == PreferencePolicy::Respect;
        Ok(Self {
            requirements: pod.requirements(respect).map_err(|e| e.to_string())?,
            strict_requirements: pod.strict_requirements().map_err(|e| e.to_string())?,
        })
    }
}

/// One scheduling run over a batch of pods.
#[derive(Debug)]
pub struct Scheduler {
    options: Options,
    templates: Vec<Template>,
    dropped: Vec<DroppedPool>,
    existing: Vec<ExistingCandidate>,
    claims: Vec<Claim>,
    /// Claim indices ordered by (pod count, index): the order planned claims are tried in.
    claim_order: Vec<usize>,
    /// Domain classes of the claims, to skip the claims whose zone topology refuses a pod.
    classes: Classes,
    /// Claims known to be refused by a hostname check.
    host_blocks: HostBlocks,
    /// Whether scans use [`Self::classes`] and [`Self::host_blocks`] (always, but for the tests
    /// that compare).
    use_classes: bool,
    topology: Topology,
    hostname_seq: usize,
}

impl Scheduler {
    /// Prepares a run: templates, existing nodes with their remaining capacity, topology.
    pub fn new(pools: &[NodePool], cluster: &Cluster, pods: &[Pod], options: Options) -> Self {
        let daemons: Vec<DaemonPod> = cluster
            .daemonset_pods
            .iter()
            .filter_map(|p| DaemonPod::new(p.clone()).ok())
            .collect();
        let (templates, dropped) = template::build(
            pools,
            &daemons,
            &cluster.nodes,
            &cluster.limit_usage,
            &options.well_known,
            options.min_values_policy,
        );
        let mut nodes: Vec<&ExistingNode> = cluster.nodes.iter().collect();
        nodes.sort_by(|a, b| {
            b.initialized
                .cmp(&a.initialized)
                .then_with(|| a.name.cmp(&b.name))
        });
        // Bound pods grouped by node once (not a scan of every pod per node: quadratic at
        // thousands of nodes).
        let mut by_node: std::collections::HashMap<&str, Vec<&Pod>> =
            std::collections::HashMap::new();
        for p in &cluster.pods {
            if let Some(node) = p.node_name.as_deref() {
                by_node.entry(node).or_default().push(p);
            }
        }
        let existing = nodes
            .into_iter()
            .map(|node| {
                let bound = by_node.get(&*node.name).map_or(&[][..], Vec::as_slice);
                ExistingCandidate::new(node, bound, &daemons)
            })
            .collect();
        let topology = topology_for(&templates, cluster, pods, &options);
        Self {
            options,
            templates,
            dropped,
            existing,
            claims: Vec::new(),
            claim_order: Vec::new(),
            classes: Classes::default(),
            host_blocks: HostBlocks::default(),
            use_classes: true,
            topology,
            hostname_seq: 0,
        }
    }

    /// NodePools that could not be used, and why.
    pub fn dropped_pools(&self) -> &[DroppedPool] {
        &self.dropped
    }

    /// Places `pods` (the batch this scheduler was built for) and returns the decisions.
    pub fn solve(mut self, pods: &[Pod]) -> Results {
        let data: Vec<Result<PodData, String>> = pods
            .iter()
            .map(|p| PodData::new(p, self.options.preference_policy))
            .collect();
        let mut errors: Vec<Option<String>> = vec![None; pods.len()];
        let mut queue = queue::Queue::new(pods);
        while let Some(i) = queue.pop() {
            let (Some(pod), Some(data)) = (pods.get(i), data.get(i)) else {
                continue;
            };
            let outcome = match data {
                Ok(data) => self.place(pod, data),
                Err(e) => Err(format!("invalid pod requirements: {e}")),
            };
            match outcome {
                Ok(()) => {
                    if let Some(slot) = errors.get_mut(i) {
                        *slot = None;
                    }
                }
                Err(e) => {
                    if let Some(slot) = errors.get_mut(i) {
                        *slot = Some(e);
                    }
                    queue.push_back(i);
                }
            }
        }
        finalize::results(self, pods, errors)
    }

    /// Tries the pod, relaxing its preferences one step per failure.
    fn place(&mut self, original: &Pod, data: &PodData) -> Result<(), String> {
        let first = match self.try_add(original, data) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let tolerate_prefer_no_schedule =
            self.templates.iter().any(Template::has_prefer_no_schedule);
        let mut pod = original.clone();
        let mut last = first;
        while preferences::relax(
            &mut pod,
            self.options.preference_policy,
            tolerate_prefer_no_schedule,
        )
        .is_some()
        {
            let relaxed = PodData::new(&pod, self.options.preference_policy)?;
            self.topology.update(&pod);
            match self.try_add(&pod, &relaxed) {
                Ok(()) => return Ok(()),
                Err(e) => last = e,
            }
        }
        if pod != *original {
            self.topology.update(original);
        }
        Err(last)
    }

    /// One attempt: existing nodes, then planned claims, then a new claim.
    fn try_add(&mut self, pod: &Pod, data: &PodData) -> Result<(), String> {
        for node in &mut self.existing {
            if let Ok(requirements) = node.can_add(pod, data, &self.topology) {
                node.add(pod);
                self.topology
                    .record(pod, Placement::existing_node(&requirements, node.taints()));
                return Ok(());
            }
        }
        let hosts = self.topology.host_filter(pod);
        // Claims of a class whose domains topology refused are skipped.
        let by_class = self.use_classes && self.topology.has_domain_groups(pod);
        if by_class {
            self.classes.begin_scan(&self.topology);
        }
        let blocks = if self.use_classes {
            self.host_blocks.slots(hosts.checks())
        } else {
            Vec::new()
        };
        let mut accepted = None;
        for (position, &index) in self.claim_order.iter().enumerate() {
            let Some(claim) = self.claims.get(index) else {
                continue;
            };
            if !blocks.is_empty() && self.host_blocks.known_refused(&blocks, index) {
                continue;
            }
            if by_class {
                let class = self.classes.class(index, claim);
                match self.classes.verdict(class) {
                    Verdict::Refuses => continue,
                    Verdict::Allows => {}
                    Verdict::Unknown => {
                        let allows = claim.domains_allow(pod, data, &self.topology);
                        self.classes.set_verdict(class, allows);
                        if !allows {
                            continue;
                        }
                    }
                }
            }
            if !hosts.is_empty()
                && let Some(check) = hosts.refusing(claim.hostname())
            {
                self.host_blocks.refused(check, index);
                continue;
            }
            let Some(template) = self.templates.get(claim.template) else {
                continue;
            };
            let ctx = filter_context(&self.options, template);
            if let Ok(proposal) = claim.can_add(pod, data, &ctx, &self.topology, false) {
                accepted = Some((position, index, proposal));
                break;
            }
        }
        drop(hosts);
        if let Some((position, index, proposal)) = accepted {
            if let Some(claim) = self.claims.get_mut(index)
                && let Some(template) = self.templates.get(claim.template)
            {
                self.topology.record(
                    pod,
                    Placement::node_claim(
                        &proposal.requirements,
                        &template.taints,
                        &self.options.well_known,
                    ),
                );
                claim.add(pod, proposal, template);
            }
            self.classes.invalidate(index);
            self.reorder(position);
            return Ok(());
        }
        if self.templates.is_empty() {
            return Err(if self.dropped.is_empty() {
                "no nodepools found".to_owned()
            } else {
                let reasons: Vec<String> = self
                    .dropped
                    .iter()
                    .map(|d| format!("nodepool {:?}: {}", d.name, d.reason))
                    .collect();
                format!(
                    "all available instance types were filtered out: {}",
                    reasons.join("; ")
                )
            });
        }
        let mut errors = Vec::new();
        for (t, template) in self.templates.iter().enumerate() {
            let options = match within_limits(template) {
                Ok(options) => options,
                Err(e) => {
                    errors.push(format!("nodepool {:?}: {e}", template.pool));
                    continue;
                }
            };
            self.hostname_seq += 1;
            let hostname: Arc<str> =
                Arc::from(format!("hostname-placeholder-{:04}", self.hostname_seq));
            self.topology.register(HOSTNAME, &hostname);
            let claim = Claim::new(t, template, options, hostname);
            match claim.can_add(
                pod,
                data,
                &filter_context(&self.options, template),
                &self.topology,
                true,
            ) {
                Ok(proposal) => {
                    self.topology.record(
                        pod,
                        Placement::node_claim(
                            &proposal.requirements,
                            &template.taints,
                            &self.options.well_known,
                        ),
                    );
                    let mut claim = claim;
                    claim.add(pod, proposal, template);
                    let mut max = crate::resources::Resources::default();
                    for it in claim.instance_types() {
                        max.raise_to(it.capacity());
                    }
                    if let Some(template) = self.templates.get_mut(t)
                        && let Some(remaining) = template.remaining.as_mut()
                    {
                        *remaining = remaining.difference(&max);
                    }
                    self.claims.push(claim);
                    let index = self.claims.len() - 1;
                    let key = |s: &Self, i: usize| s.claims.get(i).map(|c| (c.pods.len(), i));
                    let new = key(self, index);
                    let at = self
                        .claim_order
                        .partition_point(|&other| key(self, other) < new);
                    self.claim_order.insert(at, index);
                    return Ok(());
                }
                Err(e) => errors.push(format!(
                    "nodepool {:?}: {}",
                    template.pool,
                    e.unwrap_or_else(|| "cannot take the pod".into())
                )),
            }
        }
        Err(errors.join("; "))
    }

    /// Restores the (pod count, index) order after the claim at `position` gained a pod: its
    /// key only grew, so it moves later, past the claims whose keys are now smaller (found by
    /// binary search in the sorted rest).
    fn reorder(&mut self, position: usize) {
        let key = |s: &Self, i: usize| s.claims.get(i).map(|c| (c.pods.len(), i));
        let Some(&moved) = self.claim_order.get(position) else {
            return;
        };
        let moved_key = key(self, moved);
        let passed = self.claim_order.get(position + 1..).map_or(0, |rest| {
            rest.partition_point(|&other| key(self, other) < moved_key)
        });
        if let Some(span) = self.claim_order.get_mut(position..=position + passed) {
            span.rotate_left(1);
        }
    }
}

fn filter_context<'a>(options: &'a Options, template: &'a Template) -> FilterContext<'a> {
    FilterContext {
        template,
        well_known: &options.well_known,
        min_values_policy: options.min_values_policy,
    }
}

/// The template's options without instance types that exceed what its limits leave.
fn within_limits(template: &Template) -> Result<Vec<GroupOptions>, String> {
    let Some(remaining) = &template.remaining else {
        return Ok(template.options.clone());
    };
    if let Some(nodes) = remaining.get(&crate::resources::ResourceName::NODES)
        && nodes.is_zero()
    {
        return Err("node limits have been exhausted for nodepool".into());
    }
    let options: Vec<GroupOptions> = template
        .options
        .iter()
        .map(|g| GroupOptions {
            group: g.group,
            instance_types: g
                .instance_types
                .iter()
                // Instance types have no `nodes` capacity (0): a pool already over its node limit
                // (remaining < 0) keeps none, as upstream.
                .filter(|it| {
                    remaining
                        .iter()
                        .all(|(name, left)| it.capacity().get_or_zero(name) <= left)
                })
                .cloned()
                .collect(),
        })
        .filter(|g| !g.instance_types.is_empty())
        .collect();
    if options.is_empty() {
        return Err("all available instance types exceed limits for nodepool".into());
    }
    Ok(options)
}

fn topology_for(
    templates: &[Template],
    cluster: &Cluster,
    pods: &[Pod],
    options: &Options,
) -> Topology {
    let mut universe = DomainUniverse::new();
    for template in templates {
        let its = template
            .options
            .iter()
            .flat_map(|g| g.instance_types.iter());
        universe.add_node_pool(
            &template.requirements,
            its.map(|it| it.requirements()),
            &template.taints,
        );
    }
    let nodes: Vec<ClusterNode> = cluster
        .nodes
        .iter()
        .map(|n| ClusterNode {
            name: n.name.clone(),
            labels: n.labels.clone(),
            taints: n.taints.clone(),
        })
        .collect();
    Topology::new(TopologyInput {
        policy: options.preference_policy,
        universe: &universe,
        nodes: &nodes,
        pods: &cluster.pods,
        namespaces: &cluster.namespaces,
        batch: pods,
    })
}

#[cfg(test)]
mod index_tests;
