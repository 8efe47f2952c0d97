//! Building topology groups from pods and counting the existing cluster into them.
//!
//! Responsibility: turn a pod's spread constraints and pod (anti-)affinity terms into group
//! specs (matchLabelKeys appended to the selector, ScheduleAnyway and preferred terms skipped
//! under [`PreferencePolicy::Ignore`], namespaces resolved from `namespaces` ∪
//! `namespaceSelector`), create a group once per distinct spec (starting domains from the
//! universe — only domains of pools whose taints the creating pod tolerates, unless a spread
//! constraint ignores taints — then domains of existing nodes passing the node filter, then every
//! registered domain), count existing pods into it, and keep every known pod's "selected by"
//! lists current.
//! Inputs: the [`Topology`] state and pods. Outputs: group ids.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::Arc;

use super::Topology;
use super::group::{Group, GroupSpec, TopologyType, is_valid_selector, normalize_selector};
use super::input::{ClusterNode, PreferencePolicy};
use super::node_filter::NodeFilter;
use crate::labels::{HOSTNAME, alias_target};
use crate::pod::{
    Labels, Pod, PodAffinityTerm, SelectorExpression, SelectorOperator, WhenUnsatisfiable,
};
use crate::requirements::Requirements;
use crate::taints::Toleration;

/// An existing node with its labels as requirements (for node filters).
#[derive(Debug, Clone)]
pub(crate) struct NodeInfo {
    pub(crate) node: ClusterNode,
    pub(crate) requirements: Requirements,
}

/// The bound, live, non-batch pods of one namespace that carry the same labels, by the
/// existing nodes they run on (one entry per pod). Pods of one workload share their labels,
/// so a selector is evaluated once per label set rather than once per pod.
#[derive(Debug, Clone)]
pub(crate) struct ExistingPods {
    labels: Labels,
    nodes: Vec<usize>,
}

/// The existing cluster, indexed once.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cluster {
    pub(crate) nodes: Vec<NodeInfo>,
    node_index: HashMap<Arc<str>, usize>,
    pods_by_namespace: BTreeMap<Arc<str>, Vec<ExistingPods>>,
    namespaces: BTreeMap<Arc<str>, Labels>,
}

impl Cluster {
    pub(crate) fn new(
        nodes: &[ClusterNode],
        pods: &[Pod],
        namespaces: &BTreeMap<Arc<str>, Labels>,
        excluded: &HashSet<Arc<str>>,
    ) -> Self {
        let mut cluster = Self {
            nodes: nodes
                .iter()
                .map(|n| NodeInfo {
                    node: n.clone(),
                    requirements: Requirements::from_labels(n.labels.iter()),
                })
                .collect(),
            namespaces: namespaces.clone(),
            ..Self::default()
        };
        for (i, n) in nodes.iter().enumerate() {
            cluster.node_index.entry(n.name.clone()).or_insert(i);
        }
        // (namespace, labels) → index into that namespace's list.
        let mut index: HashMap<(&Arc<str>, &Labels), usize> = HashMap::default();
        for pod in pods {
            if let Some(node) = cluster.live_node_of(pod, excluded) {
                let list = cluster
                    .pods_by_namespace
                    .entry(pod.namespace.clone())
                    .or_default();
                let at = *index
                    .entry((&pod.namespace, &pod.labels))
                    .or_insert_with(|| {
                        list.push(ExistingPods {
                            labels: pod.labels.clone(),
                            nodes: Vec::new(),
                        });
                        list.len() - 1
                    });
                if let Some(same) = list.get_mut(at) {
                    same.nodes.push(node);
                }
            }
        }
        cluster
    }

    /// The node index of a pod that counts: bound to an existing node, not terminal or
    /// terminating, not part of the batch.
    pub(crate) fn live_node_of(&self, pod: &Pod, excluded: &HashSet<Arc<str>>) -> Option<usize> {
        if pod.terminal_or_terminating || excluded.contains(&*pod.uid) {
            return None;
        }
        pod.node_name
            .as_ref()
            .and_then(|n| self.node_index.get(n).copied())
    }
}

/// A node's domain for `key` (the node name stands in for a missing hostname label).
pub(crate) fn domain_of<'n>(node: &'n ClusterNode, key: &str) -> Option<&'n Arc<str>> {
    node.labels
        .get(key)
        .or_else(|| (key == HOSTNAME).then_some(&node.name))
}

fn normalized_key(key: &Arc<str>) -> Arc<str> {
    alias_target(key).map_or_else(|| key.clone(), Arc::from)
}

impl Topology {
    /// The specs of every group `pod` owns under the current policy.
    fn owned_specs(&self, pod: &Pod) -> Vec<GroupSpec> {
        let mut specs = Vec::new();
        for tsc in &pod.topology_spread_constraints {
            if self.policy == PreferencePolicy::Ignore
                && tsc.when_unsatisfiable != WhenUnsatisfiable::DoNotSchedule
            {
                continue;
            }
            let selector = tsc.label_selector.clone().map(|mut selector| {
                for key in &tsc.match_label_keys {
                    if let Some(value) = pod.labels.get(key) {
                        selector.match_expressions.push(SelectorExpression {
                            key: key.clone(),
                            operator: SelectorOperator::In,
                            values: vec![value.clone()],
                        });
                    }
                }
                normalize_selector(selector)
            });
            specs.push(GroupSpec {
                kind: TopologyType::Spread,
                key: normalized_key(&tsc.topology_key),
                namespaces: BTreeSet::from([pod.namespace.clone()]),
                max_skew: tsc.max_skew,
                min_domains: tsc.min_domains,
                filter: Some(NodeFilter::for_pod(
                    pod,
                    tsc.node_taints_policy,
                    tsc.node_affinity_policy,
                )),
                selector,
            });
        }
        let respect = self.policy == PreferencePolicy::Respect;
        for (kind, terms) in [
            (TopologyType::PodAffinity, &pod.pod_affinity),
            (TopologyType::PodAntiAffinity, &pod.pod_anti_affinity),
        ] {
            let preferred = terms.preferred.iter().filter(|_| respect).map(|w| &w.term);
            for term in terms.required.iter().chain(preferred) {
                specs.push(self.term_spec(kind, &pod.namespace, term));
            }
        }
        specs
    }

    /// The spec of one pod (anti-)affinity term of a pod in `namespace`.
    pub(crate) fn term_spec(
        &self,
        kind: TopologyType,
        namespace: &Arc<str>,
        term: &PodAffinityTerm,
    ) -> GroupSpec {
        GroupSpec {
            kind,
            key: normalized_key(&term.topology_key),
            namespaces: self.namespaces_for(namespace, term),
            max_skew: 0,
            min_domains: None,
            filter: None,
            selector: term.label_selector.clone().map(normalize_selector),
        }
    }

    /// `namespaces` ∪ namespaces matching `namespaceSelector`; the pod's own when both are unset.
    fn namespaces_for(&self, own: &Arc<str>, term: &PodAffinityTerm) -> BTreeSet<Arc<str>> {
        let Some(selector) = &term.namespace_selector else {
            if term.namespaces.is_empty() {
                return BTreeSet::from([own.clone()]);
            }
            return term.namespaces.iter().cloned().collect();
        };
        let mut out: BTreeSet<Arc<str>> = term.namespaces.iter().cloned().collect();
        if is_valid_selector(selector) {
            let matching = self
                .cluster
                .namespaces
                .iter()
                .filter(|(_, labels)| selector.matches(labels));
            out.extend(matching.map(|(name, _)| name.clone()));
        }
        out
    }

    /// Rebuilds the groups `pod` owns and adds its inverse anti-affinity groups (never dropped:
    /// required terms are not relaxed); see [`Topology::update`].
    pub(crate) fn rebuild(&mut self, pod: &Pod) {
        self.ensure_entry(pod);
        let inverse: Vec<usize> = pod
            .pod_anti_affinity
            .required
            .iter()
            .map(|term| {
                let spec = self.term_spec(TopologyType::PodAntiAffinity, &pod.namespace, term);
                self.inverse_group(spec, &pod.tolerations)
            })
            .collect();
        let mut owned: Vec<usize> = self
            .owned_specs(pod)
            .into_iter()
            .map(|spec| self.group(spec, &pod.tolerations))
            .collect();
        let groups = &self.groups;
        owned.sort_by_key(|&i| (groups.get(i).map(|g| g.kind().rank()), i));
        owned.dedup();
        let owned = owned
            .into_iter()
            .filter_map(|i| {
                groups
                    .get(i)
                    .map(|g| (i, g.selects(&pod.namespace, &pod.labels)))
            })
            .collect();
        if let Some(entry) = self.pods.get_mut(&*pod.uid) {
            entry.owned = owned;
            for i in inverse {
                if !entry.inverse_owned.contains(&i) {
                    entry.inverse_owned.push(i);
                }
            }
        }
    }

    /// Creates the pod's entry (with its selection lists) or refreshes it if its labels changed.
    fn ensure_entry(&mut self, pod: &Pod) {
        if let Some(entry) = self.pods.get(&*pod.uid)
            && entry.namespace == pod.namespace
            && entry.labels == pod.labels
        {
            return;
        }
        let selecting = |groups: &[Group]| -> Vec<usize> {
            groups
                .iter()
                .enumerate()
                .filter(|(_, g)| g.selects(&pod.namespace, &pod.labels))
                .map(|(i, _)| i)
                .collect()
        };
        let selected_by = selecting(&self.groups);
        let inverse_selecting = selecting(&self.inverse);
        let entry = self.pods.entry(pod.uid.clone()).or_default();
        entry.namespace = pod.namespace.clone();
        entry.labels = pod.labels.clone();
        entry.selected_by = selected_by;
        entry.inverse_selecting = inverse_selecting;
    }

    /// The id of the group with this spec, creating and counting it if new.
    fn group(&mut self, spec: GroupSpec, creator: &[Toleration]) -> usize {
        if let Some(&id) = self.group_ids.get(&spec) {
            return id;
        }
        let mut group = self.seeded(spec.clone(), creator);
        let key = group.key().clone();
        for info in &self.cluster.nodes {
            let passes = group
                .spec
                .filter
                .as_ref()
                .is_none_or(|f| f.matches(&info.node.taints, &info.requirements, None));
            if passes && let Some(domain) = info.node.labels.get(&key) {
                group.register(domain);
            }
        }
        self.count_existing(&mut group);
        let id = self.groups.len();
        self.note_key(&group);
        for entry in self.pods.values_mut() {
            if group.selects(&entry.namespace, &entry.labels) {
                entry.selected_by.push(id);
            }
        }
        self.groups.push(group);
        self.group_ids.insert(spec, id);
        id
    }

    /// The id of the inverse anti-affinity group with this spec, creating it if new.
    pub(crate) fn inverse_group(&mut self, spec: GroupSpec, creator: &[Toleration]) -> usize {
        if let Some(&id) = self.inverse_ids.get(&spec) {
            return id;
        }
        let group = self.seeded(spec.clone(), creator);
        let id = self.inverse.len();
        self.note_key(&group);
        for entry in self.pods.values_mut() {
            if group.selects(&entry.namespace, &entry.labels) {
                entry.inverse_selecting.push(id);
            }
        }
        self.inverse.push(group);
        self.inverse_ids.insert(spec, id);
        id
    }

    /// Files a new group's key among the domain keys unless it is hostname.
    fn note_key(&mut self, group: &Group) {
        if !group.hostname
            && let Err(at) = self.domain_keys.binary_search(group.key())
        {
            self.domain_keys.insert(at, group.key().clone());
        }
    }

    /// A new group holding the universe's domains (filtered by taints unless a spread constraint
    /// ignores them) and every registered domain of its key.
    fn seeded(&self, spec: GroupSpec, creator: &[Toleration]) -> Group {
        let mut group = Group::new(spec);
        let tolerations = match &group.spec.filter {
            Some(filter) => filter.honored_tolerations(),
            None => Some(creator),
        };
        let key = group.key().clone();
        let offered: Vec<Arc<str>> = self
            .universe
            .domains_for(&key, tolerations)
            .cloned()
            .collect();
        for domain in &offered {
            group.register(domain);
        }
        if let Some(registered) = self.registered.get(&key) {
            for domain in &registered.order {
                group.register(domain);
            }
        }
        group
    }

    /// Counts existing pods selected by the group on nodes that pass its filter.
    fn count_existing(&self, group: &mut Group) {
        let key = group.key().clone();
        let namespaces: Vec<Arc<str>> = group.spec.namespaces.iter().cloned().collect();
        for namespace in &namespaces {
            for same in self
                .cluster
                .pods_by_namespace
                .get(namespace)
                .into_iter()
                .flatten()
            {
                if !group.selects(namespace, &same.labels) {
                    continue;
                }
                for &node in &same.nodes {
                    let Some(info) = self.cluster.nodes.get(node) else {
                        continue;
                    };
                    let passes = group
                        .spec
                        .filter
                        .as_ref()
                        .is_none_or(|f| f.matches(&info.node.taints, &info.requirements, None));
                    if passes && let Some(domain) = domain_of(&info.node, &key) {
                        group.record_domain(domain);
                    }
                }
            }
        }
    }

    /// Tracks the required anti-affinity of existing pods as inverse groups.
    pub(crate) fn track_existing_anti_affinity(&mut self, pods: &[Pod]) {
        for pod in pods
            .iter()
            .filter(|p| !p.pod_anti_affinity.required.is_empty())
        {
            let Some(node) = self.cluster.live_node_of(pod, &self.excluded) else {
                continue;
            };
            for term in &pod.pod_anti_affinity.required {
                let spec = self.term_spec(TopologyType::PodAntiAffinity, &pod.namespace, term);
                let id = self.inverse_group(spec, &pod.tolerations);
                let (Some(group), Some(info)) =
                    (self.inverse.get_mut(id), self.cluster.nodes.get(node))
                else {
                    continue;
                };
                if let Some(domain) = domain_of(&info.node, group.key()).cloned() {
                    group.record_domain(&domain);
                }
            }
        }
    }
}
