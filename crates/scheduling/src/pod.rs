//! The pod as the scheduler sees it.
//!
//! Responsibility: the plain-data pod model every scheduling module shares (identity, labels,
//! effective requests, node selection, tolerations, topology spread, pod (anti-)affinity, host
//! ports), label selectors and their matching, and the node requirements a pod implies
//! (spec §3.1 "Pod requirements", §3.5).
//! Inputs: values built by an adapter (from k8s-openapi objects) or by tests.
//! Outputs: [`Pod`] and derived [`Requirements`].

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::requirements::{
    Operator, Requirement, RequirementError, Requirements, SelectorRequirement,
};
use crate::resources::Resources;
use crate::taints::Toleration;

/// Labels of an object: key → value.
pub type Labels = BTreeMap<Arc<str>, Arc<str>>;

/// The operator of a label-selector requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SelectorOperator {
    /// The label's value is one of the values.
    In,
    /// The label is absent or its value is none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// One `matchExpressions` entry of a label selector.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SelectorExpression {
    /// The label key.
    pub key: Arc<str>,
    /// The operator.
    pub operator: SelectorOperator,
    /// The values (In/NotIn).
    pub values: Vec<Arc<str>>,
}

/// A Kubernetes label selector (`matchLabels` AND `matchExpressions`). An empty selector matches
/// everything; an absent selector (`Option::None` where one is optional) matches nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LabelSelector {
    /// `matchLabels`.
    pub match_labels: BTreeMap<Arc<str>, Arc<str>>,
    /// `matchExpressions`.
    pub match_expressions: Vec<SelectorExpression>,
}

impl LabelSelector {
    /// A selector of exactly these labels.
    pub fn from_labels<'a>(labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Self {
            match_labels: labels
                .into_iter()
                .map(|(k, v)| (Arc::from(k), Arc::from(v)))
                .collect(),
            match_expressions: Vec::new(),
        }
    }

    /// Whether the selector selects an object with these labels.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|e| {
                let value = labels.get(&e.key);
                match e.operator {
                    SelectorOperator::In => value.is_some_and(|v| e.values.contains(v)),
                    SelectorOperator::NotIn => value.is_none_or(|v| !e.values.contains(v)),
                    SelectorOperator::Exists => value.is_some(),
                    SelectorOperator::DoesNotExist => value.is_none(),
                }
            })
    }

    /// Whether the selector has no terms (and so matches everything).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }
}

/// A node-selector term: its requirements are ANDed. Terms of a required node affinity are ORed.
pub type NodeSelectorTerm = Vec<SelectorRequirement>;

/// A preferred node-affinity term.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WeightedNodeSelectorTerm {
    /// 1–100.
    pub weight: i32,
    /// The preference.
    pub term: NodeSelectorTerm,
}

/// `whenUnsatisfiable` of a topology spread constraint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WhenUnsatisfiable {
    /// A hard constraint.
    DoNotSchedule,
    /// A preference (relaxed by the scheduler when it cannot be met).
    ScheduleAnyway,
}

/// `nodeAffinityPolicy` / `nodeTaintsPolicy` of a topology spread constraint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeInclusionPolicy {
    /// Only nodes that pass the filter count.
    Honor,
    /// Every node counts.
    Ignore,
}

/// A topology spread constraint.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TopologySpreadConstraint {
    /// The most two domains' counts may differ by.
    pub max_skew: i32,
    /// The node label that defines domains.
    pub topology_key: Arc<str>,
    /// Hard or soft.
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// Which pods count; `None` counts none.
    pub label_selector: Option<LabelSelector>,
    /// The fewest domains to spread over (domains below it count as 0).
    pub min_domains: Option<i32>,
    /// Default [`NodeInclusionPolicy::Honor`].
    pub node_affinity_policy: NodeInclusionPolicy,
    /// Default [`NodeInclusionPolicy::Ignore`].
    pub node_taints_policy: NodeInclusionPolicy,
    /// Pod label keys whose values are ANDed into the selector.
    pub match_label_keys: Vec<Arc<str>>,
}

/// A pod (anti-)affinity term.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodAffinityTerm {
    /// Which pods the term is about; `None` selects none.
    pub label_selector: Option<LabelSelector>,
    /// Namespaces to look in (with [`Self::namespace_selector`]); both empty = the pod's own.
    pub namespaces: Vec<Arc<str>>,
    /// Selects namespaces by their labels; an empty selector selects all.
    pub namespace_selector: Option<LabelSelector>,
    /// The node label that defines domains.
    pub topology_key: Arc<str>,
}

/// A preferred pod (anti-)affinity term.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WeightedPodAffinityTerm {
    /// 1–100.
    pub weight: i32,
    /// The term.
    pub term: PodAffinityTerm,
}

/// Required and preferred pod (anti-)affinity terms.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PodAffinityTerms {
    /// Hard terms.
    pub required: Vec<PodAffinityTerm>,
    /// Soft terms.
    pub preferred: Vec<WeightedPodAffinityTerm>,
}

impl PodAffinityTerms {
    /// Whether there are no terms at all.
    pub fn is_empty(&self) -> bool {
        self.required.is_empty() && self.preferred.is_empty()
    }
}

/// A host port a pod binds.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    /// Host IP (`""` or `0.0.0.0` = all addresses).
    pub ip: Arc<str>,
    /// The port.
    pub port: i32,
    /// TCP, UDP or SCTP.
    pub protocol: Arc<str>,
}

impl HostPort {
    /// Whether two host ports collide (same port and protocol, and overlapping addresses).
    pub fn conflicts(&self, other: &HostPort) -> bool {
        let wildcard = |ip: &str| ip.is_empty() || ip == "0.0.0.0";
        self.port == other.port
            && self.protocol == other.protocol
            && (wildcard(&self.ip) || wildcard(&other.ip) || self.ip == other.ip)
    }
}

/// A pod, as scheduling sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pod {
    /// Unique id (queue tie-breaker and identity).
    pub uid: Arc<str>,
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: Arc<str>,
    /// Labels.
    pub labels: Labels,
    /// Creation time, seconds since the epoch (queue order).
    pub creation_timestamp: i64,
    /// Effective requests including `pods: 1` (see [`crate::resources::PodResources`]).
    pub requests: Resources,
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<Arc<str>, Arc<str>>,
    /// Required node-affinity terms (ORed); empty = none.
    pub required_node_affinity: Vec<NodeSelectorTerm>,
    /// Preferred node-affinity terms.
    pub preferred_node_affinity: Vec<WeightedNodeSelectorTerm>,
    /// Tolerations.
    pub tolerations: Vec<Toleration>,
    /// Topology spread constraints.
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    /// Pod affinity.
    pub pod_affinity: PodAffinityTerms,
    /// Pod anti-affinity.
    pub pod_anti_affinity: PodAffinityTerms,
    /// Host ports the pod's containers bind.
    pub host_ports: Vec<HostPort>,
    /// The node the pod is bound to (existing pods), if any.
    pub node_name: Option<Arc<str>>,
    /// Whether the pod is terminal (Succeeded/Failed) or terminating.
    pub terminal_or_terminating: bool,
    /// Whether a DaemonSet controls the pod.
    pub owned_by_daemonset: bool,
    /// A placeholder for spare capacity (a CapacityBuffer's virtual pod): tried after every
    /// real pod, so real pods take the room first and placeholders show what is left.
    pub placeholder: bool,
}

impl Pod {
    /// `namespace/name`, for messages.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The heaviest preferred node-affinity term (the first of equal weights), if any.
    pub fn heaviest_preferred_node_term(&self) -> Option<&WeightedNodeSelectorTerm> {
        self.preferred_node_affinity
            .iter()
            .reduce(|best, t| if t.weight > best.weight { t } else { best })
    }

    /// The node requirements the pod implies: nodeSelector, the first required node-affinity
    /// term and, when `respect_preferences`, the heaviest preferred term as if required.
    pub fn requirements(
        &self,
        respect_preferences: bool,
    ) -> Result<Requirements, RequirementError> {
        let mut reqs = self.strict_requirements()?;
        if respect_preferences && let Some(term) = self.heaviest_preferred_node_term() {
            reqs.add_all(&Requirements::from_selector(term.term.iter())?);
        }
        Ok(reqs)
    }

    /// nodeSelector plus the first required node-affinity term only: what the pod *must* have.
    /// Used for topology domain counting so preferences never shrink a pod's domains.
    pub fn strict_requirements(&self) -> Result<Requirements, RequirementError> {
        let mut reqs = Requirements::new();
        for (key, value) in &self.node_selector {
            reqs.add(Requirement::new(
                key.clone(),
                Operator::In,
                [value.clone()],
            )?);
        }
        if let Some(term) = self.required_node_affinity.first() {
            reqs.add_all(&Requirements::from_selector(term.iter())?);
        }
        Ok(reqs)
    }

    /// Whether the pod's labels carry this key with this value.
    pub fn has_label(&self, key: &str, value: &str) -> bool {
        self.labels.get(key).is_some_and(|v| &**v == value)
    }
}
