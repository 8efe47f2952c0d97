//! Whether a pod fits a node, as kube-scheduler's default filter plugins decide it, and the
//! message it gives when no node fits.
//!
//! Responsibility: the filters, in kube-scheduler's order, each stopping the node at its first
//! failure: node readiness (a sim addition: nodes not `Ready`), `spec.unschedulable`, taints
//! (`NoSchedule`/`NoExecute` must be tolerated), node selector and required node affinity
//! (terms ORed), host ports, resources (requests + requests of the pods already there ≤
//! allocatable; `pods` counts too), topology spread (`DoNotSchedule` constraints), and
//! required inter-pod affinity and anti-affinity in both directions over any topology key; then
//! scoring (least allocated cpu and memory, ties by name), and kube-scheduler's
//! `0/N nodes are available: …` message. The topology filters live in [`super::topology`].
//! Inputs: engine pods from [`scheduling::k8s::pod`] and [`NodeInfo`]s. Outputs: reasons,
//! scores, messages. Pure. Approximations: preferred terms and volume filters are ignored.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use scheduling::pod::{Labels, Pod};
use scheduling::requirements::{Operator, SelectorRequirement};
use scheduling::resources::{ResourceName, Resources};
use scheduling::taints::{Taint, TaintEffect};

pub use super::topology::Topology;

/// What the scheduler knows of a node.
#[derive(Debug, Clone, Default)]
pub struct NodeInfo {
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: Labels,
    /// Taints.
    pub taints: Vec<Taint>,
    /// `status.allocatable`.
    pub allocatable: Resources,
    /// `Ready` condition is true.
    pub ready: bool,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// Sum of the requests of the pods on it.
    pub requested: Resources,
    /// The pods on it (bound, not finished).
    pub pods: Vec<Pod>,
    /// Those of [`Self::pods`] with required pod anti-affinity.
    pub anti_affinity_pods: Vec<Pod>,
}

impl NodeInfo {
    /// Account for a pod placed on the node.
    pub fn place(&mut self, pod: &Pod) {
        self.requested.merge(&pod.requests);
        self.pods.push(pod.clone());
        if !pod.pod_anti_affinity.required.is_empty() {
            self.anti_affinity_pods.push(pod.clone());
        }
    }
}

/// Why a node does not fit a pod.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    /// Not Ready.
    NotReady,
    /// `spec.unschedulable`.
    Unschedulable,
    /// A taint the pod does not tolerate.
    Taint(String, String),
    /// Node selector or required node affinity.
    NodeAffinity,
    /// Host ports in use.
    HostPorts,
    /// Not enough of a resource.
    Insufficient(String),
    /// Topology spread; `true` when the node lacks the topology label.
    Spread(bool),
    /// The pod's anti-affinity.
    AntiAffinity,
    /// The pod's affinity.
    Affinity,
    /// Another pod's anti-affinity.
    ExistingAntiAffinity,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotReady => f.write_str("node(s) were not ready"),
            Self::Unschedulable => f.write_str("node(s) were unschedulable"),
            Self::Taint(k, v) => write!(f, "node(s) had untolerated taint {{{k}: {v}}}"),
            Self::NodeAffinity => f.write_str("node(s) didn't match Pod's node affinity/selector"),
            Self::HostPorts => {
                f.write_str("node(s) didn't have free ports for the requested pod ports")
            }
            Self::Insufficient(r) if r == "pods" => f.write_str("Too many pods"),
            Self::Insufficient(r) => write!(f, "Insufficient {r}"),
            Self::Spread(false) => {
                f.write_str("node(s) didn't match pod topology spread constraints")
            }
            Self::Spread(true) => f.write_str(
                "node(s) didn't match pod topology spread constraints (missing required label)",
            ),
            Self::AntiAffinity => f.write_str("node(s) didn't match pod anti-affinity rules"),
            Self::Affinity => f.write_str("node(s) didn't match pod affinity rules"),
            Self::ExistingAntiAffinity => {
                f.write_str("node(s) didn't satisfy existing pods anti-affinity rules")
            }
        }
    }
}

fn requirement_matches(r: &SelectorRequirement, labels: &Labels) -> bool {
    let value = labels.get(r.key.as_str());
    let num = |s: &str| s.parse::<i64>().ok();
    let bound = r.values.first().and_then(|v| num(v));
    let cmp = |f: fn(i64, i64) -> bool| match (value.and_then(|v| num(v)), bound) {
        (Some(v), Some(b)) => f(v, b),
        _ => false,
    };
    match r.operator {
        Operator::In => value.is_some_and(|v| r.values.iter().any(|x| x.as_str() == &**v)),
        Operator::NotIn => value.is_none_or(|v| r.values.iter().all(|x| x.as_str() != &**v)),
        Operator::Exists => value.is_some(),
        Operator::DoesNotExist => value.is_none(),
        Operator::Gt => cmp(|v, b| v > b),
        Operator::Lt => cmp(|v, b| v < b),
        Operator::Gte => cmp(|v, b| v >= b),
        Operator::Lte => cmp(|v, b| v <= b),
    }
}

/// Whether the node's labels satisfy the pod's node selector and required node affinity.
pub fn node_affinity_matches(pod: &Pod, labels: &Labels) -> bool {
    pod.node_selector
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
        && (pod.required_node_affinity.is_empty()
            || pod.required_node_affinity.iter().any(|term| {
                !term.is_empty() && term.iter().all(|r| requirement_matches(r, labels))
            }))
}

/// The first `NoSchedule`/`NoExecute` taint (of `effects`) the pod does not tolerate.
pub fn untolerated<'a>(
    pod: &Pod,
    taints: &'a [Taint],
    effects: &[TaintEffect],
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| effects.contains(&t.effect))
        .find(|t| !pod.tolerations.iter().any(|tol| tol.tolerates(t)))
}

fn resources_fit(pod: &Pod, node: &NodeInfo) -> Vec<Reason> {
    let mut out = Vec::new();
    for (name, want) in pod.requests.iter() {
        if want.is_zero() {
            continue;
        }
        let used = node.requested.get_or_zero(name);
        let have = node.allocatable.get_or_zero(name);
        if used.saturating_add(want) > have {
            out.push(Reason::Insufficient(name.as_str().to_owned()));
        }
    }
    out
}

/// Why `node` does not fit `pod` (empty when it fits); `topology` was prepared for this pod
/// over every node.
pub fn filter(pod: &Pod, node: &NodeInfo, topology: &Topology) -> Vec<Reason> {
    if !node.ready {
        return vec![Reason::NotReady];
    }
    let unschedulable_taint = Taint::new(
        "node.kubernetes.io/unschedulable",
        "",
        TaintEffect::NoSchedule,
    );
    if node.unschedulable
        && !pod
            .tolerations
            .iter()
            .any(|t| t.tolerates(&unschedulable_taint))
    {
        return vec![Reason::Unschedulable];
    }
    if let Some(t) = untolerated(
        pod,
        &node.taints,
        &[TaintEffect::NoSchedule, TaintEffect::NoExecute],
    ) {
        return vec![Reason::Taint(t.key.clone(), t.value.clone())];
    }
    if !node_affinity_matches(pod, &node.labels) {
        return vec![Reason::NodeAffinity];
    }
    let ports_taken = pod.host_ports.iter().any(|hp| {
        node.pods
            .iter()
            .any(|p| p.host_ports.iter().any(|o| o.conflicts(hp)))
    });
    if ports_taken {
        return vec![Reason::HostPorts];
    }
    let short = resources_fit(pod, node);
    if !short.is_empty() {
        return short;
    }
    topology.check(node).into_iter().collect()
}

/// Free fraction of cpu and memory after placing the pod, in millionths (higher is emptier).
pub fn score(pod: &Pod, node: &NodeInfo) -> i64 {
    let free = |name: &ResourceName| {
        let have = node.allocatable.get_or_zero(name).as_nanos();
        if have <= 0 {
            return 0;
        }
        let used = node
            .requested
            .get_or_zero(name)
            .saturating_add(pod.requests.get_or_zero(name))
            .as_nanos();
        i64::try_from((have - used).max(0) * 1_000_000 / have).unwrap_or(0)
    };
    free(&ResourceName::CPU) + free(&ResourceName::MEMORY)
}

/// kube-scheduler's message for a pod no node fits: reasons counted over nodes, sorted.
pub fn message(total_nodes: usize, failures: &[Vec<Reason>]) -> String {
    if total_nodes == 0 {
        return "no nodes available to schedule pods".into();
    }
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for reasons in failures {
        let distinct: BTreeSet<String> = reasons.iter().map(ToString::to_string).collect();
        for r in distinct {
            *counts.entry(r).or_default() += 1;
        }
    }
    let mut parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    format!(
        "0/{total_nodes} nodes are available: {}. preemption: 0/{total_nodes} nodes are available: {total_nodes} Preemption is not helpful for scheduling.",
        parts.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduling::pod::{NodeInclusionPolicy, PodAffinityTerm, WhenUnsatisfiable};
    use scheduling::taints::Toleration;
    use std::sync::Arc;

    fn filter(pod: &Pod, node: &NodeInfo, all: &[NodeInfo]) -> Vec<Reason> {
        super::filter(pod, node, &Topology::new(pod, all))
    }

    fn res(pairs: &[(&str, &str)]) -> Resources {
        Resources::parse(pairs.iter().copied()).unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (Arc::from(*k), Arc::from(*v)))
            .collect()
    }

    fn node(name: &str, zone: &str) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            labels: labels(&[("kubernetes.io/hostname", name), ("zone", zone)]),
            allocatable: res(&[("cpu", "2"), ("memory", "4Gi"), ("pods", "110")]),
            ready: true,
            ..NodeInfo::default()
        }
    }

    fn pod(cpu: &str) -> Pod {
        Pod {
            namespace: Arc::from("default"),
            name: Arc::from("p"),
            requests: res(&[("cpu", cpu), ("pods", "1")]),
            labels: labels(&[("app", "web")]),
            ..Pod::default()
        }
    }

    #[test]
    fn resources_taints_and_selectors() {
        let n = node("a", "z1");
        assert!(filter(&pod("1"), &n, &[]).is_empty());
        assert_eq!(
            filter(&pod("3"), &n, &[]),
            vec![Reason::Insufficient("cpu".into())]
        );
        let mut tainted = n.clone();
        tainted.taints = vec![Taint::new("gpu", "true", TaintEffect::NoSchedule)];
        assert_eq!(
            filter(&pod("1"), &tainted, &[]),
            vec![Reason::Taint("gpu".into(), "true".into())]
        );
        let mut tolerant = pod("1");
        tolerant.tolerations.push(Toleration {
            key: "gpu".into(),
            operator: scheduling::taints::TolerationOperator::Exists,
            ..Toleration::default()
        });
        assert!(filter(&tolerant, &tainted, &[]).is_empty());
        let mut picky = pod("1");
        picky
            .node_selector
            .insert(Arc::from("zone"), Arc::from("z2"));
        assert_eq!(filter(&picky, &n, &[]), vec![Reason::NodeAffinity]);
        picky.node_selector.clear();
        picky.required_node_affinity = vec![vec![SelectorRequirement::new(
            "zone",
            Operator::In,
            ["z1", "z3"],
        )]];
        assert!(filter(&picky, &n, &[]).is_empty());
        let not_ready = NodeInfo {
            ready: false,
            ..n.clone()
        };
        assert_eq!(filter(&pod("1"), &not_ready, &[]), vec![Reason::NotReady]);
    }

    #[test]
    fn hostname_anti_affinity_and_spread() {
        let mut a = node("a", "z1");
        let b = node("b", "z2");
        let mut p = pod("100m");
        p.pod_anti_affinity.required.push(PodAffinityTerm {
            label_selector: Some(scheduling::pod::LabelSelector::from_labels([(
                "app", "web",
            )])),
            namespaces: Vec::new(),
            namespace_selector: None,
            topology_key: Arc::from("kubernetes.io/hostname"),
        });
        a.place(&p);
        let all = [a.clone(), b.clone()];
        assert_eq!(filter(&p, &a, &all), vec![Reason::AntiAffinity]);
        assert!(filter(&p, &b, &all).is_empty());
        let plain = pod("100m");
        assert_eq!(filter(&plain, &a, &all), vec![Reason::ExistingAntiAffinity]);

        let mut spread = pod("100m");
        spread
            .topology_spread_constraints
            .push(scheduling::pod::TopologySpreadConstraint {
                max_skew: 1,
                topology_key: Arc::from("zone"),
                when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                label_selector: Some(scheduling::pod::LabelSelector::from_labels([(
                    "app", "web",
                )])),
                min_domains: None,
                node_affinity_policy: NodeInclusionPolicy::Honor,
                node_taints_policy: NodeInclusionPolicy::Ignore,
                match_label_keys: Vec::new(),
            });
        let mut a = node("a", "z1");
        a.place(&pod("100m"));
        let all = [a.clone(), b.clone()];
        assert_eq!(filter(&spread, &a, &all), vec![Reason::Spread(false)]);
        assert!(filter(&spread, &b, &all).is_empty());
    }

    #[test]
    fn messages_read_like_kube_scheduler() {
        let failures = vec![
            vec![
                Reason::Insufficient("cpu".into()),
                Reason::Insufficient("memory".into()),
            ],
            vec![Reason::Taint("k".into(), String::new())],
            vec![Reason::Insufficient("cpu".into())],
        ];
        assert_eq!(
            message(3, &failures),
            "0/3 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint {k: }, 2 Insufficient cpu. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        );
        assert_eq!(message(0, &[]), "no nodes available to schedule pods");
    }

    #[test]
    fn emptier_nodes_score_higher() {
        let mut busy = node("a", "z1");
        busy.place(&pod("1"));
        let idle = node("b", "z1");
        assert!(score(&pod("100m"), &idle) > score(&pod("100m"), &busy));
    }
}
