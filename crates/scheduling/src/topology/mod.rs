//! Topology: topology spread constraints, pod affinity and pod anti-affinity, as Karpenter core
//! enforces them while simulating placements (spec §3.11).
//!
//! Responsibility: track, per *topology group*, how many selected pods each domain of a topology
//! key holds, and answer for a candidate placement which domains a pod may take.
//!
//! Inputs ([`TopologyInput`], once per scheduling run): the [`PreferencePolicy`]; the
//! [`DomainUniverse`] (per key, the domains NodePools × instance types offer, each with the taint
//! sets of the offering pools); the existing cluster — [`ClusterNode`]s (name, labels, taints;
//! their hostnames are registered in every hostname group), bound pods (as [`Pod`]s; unbound,
//! terminal/terminating, batch, and deleted-node pods are not counted) and namespace labels (for
//! `namespaceSelector`); and the batch of pods being scheduled (excluded from counting; their
//! constraints create groups, their required anti-affinity creates *inverse* groups).
//!
//! Outputs and the scheduler's protocol:
//! 1. [`Topology::add_requirements`] for each candidate (existing node, in-flight or new
//!    NodeClaim) with the pod's strict requirements and the candidate's requirements R: returns
//!    the extra requirements (topology keys only; empty when the pod is unconstrained) the
//!    scheduler checks for compatibility with R and intersects into R, or a [`TopologyError`].
//! 2. [`Topology::register`] a new NodeClaim's placeholder hostname (and the hostname of any
//!    existing NodeClaim without a Node), then [`Topology::record`] the placement with the final
//!    requirements.
//! 3. [`Topology::update`] with the relaxed copy whenever preferences were relaxed, and with the
//!    original pod when the scheduler gives up on it (restoring its ownership).
//!
//! Groups: identified by (key, type, namespaces, maxSkew, minDomains, node filter, selector) so
//! identical constraints of many pods share one group. Every known pod carries precomputed lists
//! — the groups it owns (ordered anti-affinity, affinity, spread), the groups and inverse groups
//! selecting it — so a query is one hash lookup plus work proportional to its own constraints; a
//! pod with no constraint and no inverse group selecting it returns at once without allocating.
//! Within one query, groups are evaluated in that order, each against the candidate's domains as
//! narrowed by the previous ones (upstream evaluates in random map order against R alone).
//!
//! Determinism: domain tables iterate in insertion order; ties between equally loaded spread
//! domains and the affinity bootstrap domain are broken by the smallest domain name.

mod answer;
mod build;
mod domains;
mod error;
mod group;
mod input;
mod node_filter;

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::Arc;

pub use error::TopologyError;
pub use group::TopologyType;
pub use input::{ClusterNode, DomainUniverse, Placement, PreferencePolicy, TopologyInput};

use crate::labels::{HOSTNAME, normalize_key};
use crate::pod::{Labels, Pod};
use crate::requirements::{Requirement, Requirements};
use answer::{Answer, single_value};
use build::Cluster;
use group::{Group, GroupSpec};

/// Per-pod precomputed group lists.
#[derive(Debug, Clone, Default)]
struct PodEntry {
    namespace: Arc<str>,
    labels: Labels,
    /// Owned groups with whether each selects the pod, in evaluation order.
    owned: Vec<(usize, bool)>,
    /// Groups selecting the pod (recorded into on placement), ascending.
    selected_by: Vec<usize>,
    /// Inverse groups selecting the pod (constrain it), ascending.
    inverse_selecting: Vec<usize>,
    /// Inverse groups of the pod's own required anti-affinity.
    inverse_owned: Vec<usize>,
}

impl PodEntry {
    /// Neither owns a group nor is selected by another pod's anti-affinity.
    fn is_unconstrained(&self) -> bool {
        self.owned.is_empty() && self.inverse_selecting.is_empty()
    }
}

/// Domains registered after construction (hostnames), replayed into groups created later.
#[derive(Debug, Clone, Default)]
struct Registered {
    seen: HashSet<Arc<str>>,
    order: Vec<Arc<str>>,
}

/// A pod's hostname anti-affinity and hostname spread constraints (its own and other pods'),
/// for allocation-free pre-checks of candidate hosts. See [`Topology::host_filter`].
#[derive(Debug)]
pub struct HostFilter<'a> {
    checks: Vec<(&'a Group, HostCheck)>,
}

/// One hostname check: a host is refused when the group counts more than `threshold` pods
/// there (anti-affinity: more than 0; spread: more than maxSkew minus the pod's own 1 or 0).
/// Counts only grow during a solve, so a host refused by a check stays refused by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HostCheck {
    /// Whether the group is an inverse anti-affinity group.
    inverse: bool,
    /// The group's index among groups of its kind.
    group: usize,
    threshold: i64,
}

impl HostFilter<'_> {
    /// Whether a candidate whose hostname is `hostname` is certainly refused: some hostname
    /// anti-affinity group already has a pod there, or a hostname spread group would exceed
    /// its skew. Exact (the same as [`Topology::add_requirements`] failing on that group);
    /// `false` decides nothing.
    #[must_use]
    pub fn rejects(&self, hostname: &str) -> bool {
        self.refusing(hostname).is_some()
    }

    /// The first check refusing `hostname`, if any (see [`Self::rejects`]).
    #[must_use]
    pub fn refusing(&self, hostname: &str) -> Option<HostCheck> {
        self.checks
            .iter()
            .find(|(group, check)| i64::from(group.domains.count(hostname)) > check.threshold)
            .map(|&(_, check)| check)
    }

    /// The checks, in order.
    pub fn checks(&self) -> impl Iterator<Item = HostCheck> + '_ {
        self.checks.iter().map(|&(_, check)| check)
    }

    /// Whether the pod has no hostname constraint at all.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.checks.is_empty()
    }
}

/// The topology state of one scheduling run. See the module docs.
#[derive(Debug, Clone)]
pub struct Topology {
    policy: PreferencePolicy,
    universe: DomainUniverse,
    cluster: Cluster,
    excluded: HashSet<Arc<str>>,
    groups: Vec<Group>,
    group_ids: HashMap<GroupSpec, usize>,
    inverse: Vec<Group>,
    inverse_ids: HashMap<GroupSpec, usize>,
    pods: HashMap<Arc<str>, PodEntry>,
    registered: BTreeMap<Arc<str>, Registered>,
    /// Keys of the groups not keyed on hostname, sorted and unique.
    domain_keys: Vec<Arc<str>>,
}

impl Topology {
    /// Builds the topology: indexes the cluster, tracks existing pods' required anti-affinity,
    /// then creates and counts the groups of every batch pod.
    #[must_use]
    pub fn new(input: TopologyInput<'_>) -> Self {
        let excluded: HashSet<Arc<str>> = input.batch.iter().map(|p| p.uid.clone()).collect();
        let cluster = Cluster::new(input.nodes, input.pods, input.namespaces, &excluded);
        let mut topology = Self {
            policy: input.policy,
            universe: input.universe.clone(),
            cluster,
            excluded,
            groups: Vec::new(),
            group_ids: HashMap::default(),
            inverse: Vec::new(),
            inverse_ids: HashMap::default(),
            pods: HashMap::with_capacity_and_hasher(input.batch.len(), Default::default()),
            registered: BTreeMap::new(),
            domain_keys: Vec::new(),
        };
        for node in input.nodes {
            topology.register(HOSTNAME, node.hostname());
        }
        topology.track_existing_anti_affinity(input.pods);
        for pod in input.batch {
            topology.rebuild(pod);
        }
        topology
    }

    /// The preference policy the topology was built with.
    #[must_use]
    pub fn policy(&self) -> PreferencePolicy {
        self.policy
    }

    /// Number of distinct groups (spread, affinity, anti-affinity), not counting inverse ones.
    #[must_use]
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// Number of distinct inverse anti-affinity groups.
    #[must_use]
    pub fn inverse_group_count(&self) -> usize {
        self.inverse.len()
    }

    /// Number of groups the pod with this UID currently owns.
    #[must_use]
    pub fn owned_group_count(&self, uid: &str) -> usize {
        self.pods.get(uid).map_or(0, |e| e.owned.len())
    }

    /// Whether [`Self::add_requirements`] can constrain this pod at all.
    #[must_use]
    pub fn constrains(&self, pod: &Pod) -> bool {
        match self.pods.get(&*pod.uid) {
            Some(entry) => !entry.is_unconstrained(),
            None => self
                .inverse
                .iter()
                .any(|g| g.selects(&pod.namespace, &pod.labels)),
        }
    }

    /// The pod's hostname constraints, looked up once so that many candidate hosts can be
    /// pre-checked cheaply with [`HostFilter::rejects`].
    #[must_use]
    pub fn host_filter(&self, pod: &Pod) -> HostFilter<'_> {
        let mut checks = Vec::new();
        if let Some(entry) = self.pods.get(&*pod.uid) {
            for (i, group) in entry
                .inverse_selecting
                .iter()
                .filter_map(|&i| self.inverse.get(i).map(|g| (i, g)))
            {
                if group.hostname {
                    let check = HostCheck {
                        inverse: true,
                        group: i,
                        threshold: 0,
                    };
                    checks.push((group, check));
                }
            }
            for &(i, selects) in &entry.owned {
                let Some(group) = self.groups.get(i).filter(|g| g.hostname) else {
                    continue;
                };
                let threshold = match group.kind() {
                    TopologyType::PodAntiAffinity => 0,
                    TopologyType::Spread => i64::from(group.spec.max_skew) - i64::from(selects),
                    TopologyType::PodAffinity => continue,
                };
                let check = HostCheck {
                    inverse: false,
                    group: i,
                    threshold,
                };
                checks.push((group, check));
            }
        }
        HostFilter { checks }
    }

    /// The keys of every group not keyed on hostname, sorted; grows when groups with new keys
    /// appear. A candidate's requirements for these keys are all [`Self::allows_domains`]
    /// reads of it.
    #[must_use]
    pub fn domain_keys(&self) -> &[Arc<str>] {
        &self.domain_keys
    }

    /// Whether some group `pod` must satisfy is not keyed on hostname (so that
    /// [`Self::allows_domains`] can refuse it).
    #[must_use]
    pub fn has_domain_groups(&self, pod: &Pod) -> bool {
        match self.pods.get(&*pod.uid) {
            Some(entry) => {
                let inverse = entry
                    .inverse_selecting
                    .iter()
                    .filter_map(|&i| self.inverse.get(i));
                let owned = entry.owned.iter().filter_map(|&(i, _)| self.groups.get(i));
                inverse.chain(owned).any(|g| !g.hostname)
            }
            None => !self.inverse.is_empty(),
        }
    }

    /// [`Self::add_requirements`] with only the groups not keyed on hostname: `false` when one
    /// of them leaves no domain, and then `add_requirements` fails too (groups of one key only
    /// read and narrow that key, so leaving the hostname groups out changes nothing for the
    /// others). Reads nothing of the candidate but its requirements for [`Self::domain_keys`].
    #[must_use]
    pub fn allows_domains(
        &self,
        pod: &Pod,
        pod_requirements: &Requirements,
        node_requirements: &Requirements,
    ) -> bool {
        self.requirements_for(pod, pod_requirements, node_requirements, false)
            .is_ok()
    }

    /// The requirements topology adds for placing `pod` on a candidate whose requirements are
    /// `node_requirements`; `pod_requirements` are the pod's strict requirements. Only topology
    /// keys appear in the result (empty for an unconstrained pod).
    ///
    /// # Errors
    /// [`TopologyError`] naming the first constraint that leaves no domain.
    pub fn add_requirements(
        &self,
        pod: &Pod,
        pod_requirements: &Requirements,
        node_requirements: &Requirements,
    ) -> Result<Requirements, TopologyError> {
        self.requirements_for(pod, pod_requirements, node_requirements, true)
    }

    /// The groups constraining `pod` (its own and the inverse groups selecting it), evaluated by
    /// [`Self::solve`].
    fn requirements_for(
        &self,
        pod: &Pod,
        pod_requirements: &Requirements,
        node_requirements: &Requirements,
        hostname_groups: bool,
    ) -> Result<Requirements, TopologyError> {
        match self.pods.get(&*pod.uid) {
            Some(entry) if entry.is_unconstrained() => Ok(Requirements::new()),
            Some(entry) => self.solve(
                pod_requirements,
                node_requirements,
                entry.inverse_selecting.iter().copied(),
                &entry.owned,
                hostname_groups,
            ),
            None if self.inverse.is_empty() => Ok(Requirements::new()),
            None => {
                let inverse = self.inverse.iter().enumerate();
                let selecting = inverse.filter(|(_, g)| g.selects(&pod.namespace, &pod.labels));
                self.solve(
                    pod_requirements,
                    node_requirements,
                    selecting.map(|(i, _)| i),
                    &[],
                    hostname_groups,
                )
            }
        }
    }

    /// Evaluates the pod's groups in order; `hostname_groups == false` leaves out the groups
    /// keyed on hostname.
    fn solve(
        &self,
        pod_requirements: &Requirements,
        node_requirements: &Requirements,
        inverse: impl Iterator<Item = usize>,
        owned: &[(usize, bool)],
        hostname_groups: bool,
    ) -> Result<Requirements, TopologyError> {
        let wanted = |g: &&Group| hostname_groups || !g.hostname;
        let mut out = Requirements::new();
        for group in inverse.filter_map(|i| self.inverse.get(i)).filter(wanted) {
            let (allowed, _) = evaluate(
                group,
                true,
                pod_requirements,
                node_requirements,
                &out,
                |pod, node| {
                    group
                        .anti_affinity(pod, node)
                        .map_or(Answer::Unsatisfiable, Answer::Allowed)
                },
            )?;
            out.add(allowed);
        }
        let mut bootstrapped = Vec::new();
        for &(i, selects) in owned {
            let Some(group) = self.groups.get(i).filter(wanted) else {
                continue;
            };
            let (allowed, bootstrap) = evaluate(
                group,
                false,
                pod_requirements,
                node_requirements,
                &out,
                |pod, node| group.answer(selects, pod, node),
            )?;
            out.add(allowed);
            if bootstrap {
                bootstrapped.push(group);
            }
        }
        for group in bootstrapped {
            let chosen = out
                .get(group.key())
                .filter(|r| !r.is_complement() && r.values().len() > 1)
                .and_then(|r| r.values().iter().find_map(|v| group.domains.get(v)))
                .map(|d| d.single.clone());
            out.extend(chosen);
        }
        Ok(out)
    }

    /// Records a placement: every group selecting the pod whose node filter passes counts it
    /// (anti-affinity groups in every still-possible domain; spread and affinity groups only in a
    /// decided domain), and the pod's own inverse groups block every still-possible domain.
    pub fn record(&mut self, pod: &Pod, placement: Placement<'_>) {
        let counts = |group: &Group| {
            group.spec.filter.as_ref().is_none_or(|f| {
                f.matches(
                    placement.taints,
                    placement.requirements,
                    placement.well_known,
                )
            })
        };
        let Self {
            pods,
            groups,
            inverse,
            ..
        } = self;
        let Some(entry) = pods.get(&*pod.uid) else {
            let selecting = groups
                .iter_mut()
                .filter(|g| g.selects(&pod.namespace, &pod.labels));
            for group in selecting.filter(|g| counts(g)) {
                group.record(placement.requirements.get(group.key()));
            }
            return;
        };
        for &i in &entry.selected_by {
            if let Some(group) = groups.get_mut(i)
                && counts(group)
            {
                group.record(placement.requirements.get(group.key()));
            }
        }
        for &i in &entry.inverse_owned {
            if let Some(group) = inverse.get_mut(i) {
                group.record(placement.requirements.get(group.key()));
            }
        }
    }

    /// Makes `domain` known (count 0) for `key` in every group, present and future; used for the
    /// hostnames of new NodeClaims and of existing NodeClaims without a Node.
    pub fn register(&mut self, key: &str, domain: &str) {
        let key = normalize_key(key);
        if self
            .registered
            .get(key)
            .is_some_and(|r| r.seen.contains(domain))
        {
            return;
        }
        let domain: Arc<str> = Arc::from(domain);
        let registered = self.registered.entry(Arc::from(key)).or_default();
        registered.seen.insert(domain.clone());
        registered.order.push(domain.clone());
        for group in self.groups.iter_mut().chain(self.inverse.iter_mut()) {
            if &**group.key() == key {
                group.register(&domain);
            }
        }
    }

    /// Rebuilds the groups `pod` owns from its current spec: call with the relaxed copy after a
    /// preference was relaxed, and with the original when the scheduler gives up on the pod.
    /// Ownership of groups no longer implied is dropped (the groups keep counting); new groups
    /// are created and counted. A pod not seen before becomes known.
    pub fn update(&mut self, pod: &Pod) {
        self.rebuild(pod);
    }
}

/// Evaluates `group` against the pod's domains and the candidate's domains as narrowed so far
/// (`out`, else the candidate's requirements). `Ok((allowed, bootstrap))` or the error.
fn evaluate<'a>(
    group: &Group,
    inverse: bool,
    pod_requirements: &'a Requirements,
    node_requirements: &'a Requirements,
    out: &'a Requirements,
    answer: impl FnOnce(Option<&'a Requirement>, Option<&'a Requirement>) -> Answer,
) -> Result<(Requirement, bool), TopologyError> {
    let key = group.key();
    let pod = pod_requirements.get(key);
    let node = out.get(key).or_else(|| node_requirements.get(key));
    match answer(pod, node) {
        Answer::Allowed(r) => Ok((r, false)),
        Answer::Bootstrap(r) => Ok((r, true)),
        Answer::Unsatisfiable => {
            let counts = match single_value(node) {
                Some(host) if group.hostname => {
                    error::Counts::One(host.clone(), group.domains.count(host))
                }
                _ => {
                    let (sample, more) = group.domains.snapshot(error::MAX_SHOWN_COUNTS);
                    error::Counts::Sample(sample, more)
                }
            };
            Err(TopologyError::new(
                group.kind(),
                inverse,
                key.clone(),
                counts,
                pod,
                node,
            ))
        }
    }
}
