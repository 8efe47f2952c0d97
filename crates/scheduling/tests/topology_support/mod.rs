//! Shared fixtures for the topology tests: pod builders, a domain universe, and `Sim`, a
//! miniature scheduler that drives `Topology` the way the real one does (existing nodes, then
//! in-flight NodeClaims, then a new NodeClaim; relax preferences and `update` on failure).

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod sim;

pub use sim::{Sim, Target};

use std::collections::BTreeMap;
use std::sync::Arc;

use scheduling::labels::{HOSTNAME, TOPOLOGY_ZONE, WellKnownLabels};
use scheduling::pod::{
    LabelSelector, Labels, NodeInclusionPolicy, Pod, PodAffinityTerm, TopologySpreadConstraint,
    WeightedNodeSelectorTerm, WeightedPodAffinityTerm, WhenUnsatisfiable,
};
use scheduling::requirements::{Operator, Requirement, Requirements, SelectorRequirement};
use scheduling::taints::{Taint, Toleration, TolerationOperator};
use scheduling::topology::{
    ClusterNode, DomainUniverse, PreferencePolicy, Topology, TopologyInput,
};

pub const ZONE: &str = TOPOLOGY_ZONE;
pub const HOST: &str = HOSTNAME;

pub fn arc(s: &str) -> Arc<str> {
    Arc::from(s)
}

pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (arc(k), arc(v))).collect()
}

pub fn sel(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector::from_labels(pairs.iter().copied())
}

pub fn tsc(key: &str, max_skew: i32, selector: Option<LabelSelector>) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew,
        topology_key: arc(key),
        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
        label_selector: selector,
        min_domains: None,
        node_affinity_policy: NodeInclusionPolicy::Honor,
        node_taints_policy: NodeInclusionPolicy::Ignore,
        match_label_keys: Vec::new(),
    }
}

pub fn term(key: &str, selector: LabelSelector) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(selector),
        namespaces: Vec::new(),
        namespace_selector: None,
        topology_key: arc(key),
    }
}

pub fn toleration(key: &str) -> Toleration {
    Toleration {
        key: key.into(),
        operator: TolerationOperator::Exists,
        ..Toleration::default()
    }
}

/// A pod builder; the UID is the name.
#[derive(Clone, Debug)]
pub struct P(pub Pod);

pub fn pod(name: &str) -> P {
    P(Pod {
        uid: arc(name),
        namespace: arc("default"),
        name: arc(name),
        ..Pod::default()
    })
}

impl P {
    pub fn ns(mut self, ns: &str) -> Self {
        self.0.namespace = arc(ns);
        self
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0.labels.insert(arc(k), arc(v));
        self
    }
    pub fn spread(mut self, c: TopologySpreadConstraint) -> Self {
        self.0.topology_spread_constraints.push(c);
        self
    }
    pub fn affinity(mut self, t: PodAffinityTerm) -> Self {
        self.0.pod_affinity.required.push(t);
        self
    }
    pub fn anti(mut self, t: PodAffinityTerm) -> Self {
        self.0.pod_anti_affinity.required.push(t);
        self
    }
    pub fn preferred_affinity(mut self, weight: i32, t: PodAffinityTerm) -> Self {
        self.0
            .pod_affinity
            .preferred
            .push(WeightedPodAffinityTerm { weight, term: t });
        self
    }
    pub fn preferred_anti(mut self, weight: i32, t: PodAffinityTerm) -> Self {
        self.0
            .pod_anti_affinity
            .preferred
            .push(WeightedPodAffinityTerm { weight, term: t });
        self
    }
    pub fn node_selector(mut self, k: &str, v: &str) -> Self {
        self.0.node_selector.insert(arc(k), arc(v));
        self
    }
    pub fn node_affinity(mut self, term: Vec<SelectorRequirement>) -> Self {
        self.0.required_node_affinity.push(term);
        self
    }
    pub fn prefer_node(mut self, weight: i32, term: Vec<SelectorRequirement>) -> Self {
        self.0
            .preferred_node_affinity
            .push(WeightedNodeSelectorTerm { weight, term });
        self
    }
    pub fn tolerate(mut self, key: &str) -> Self {
        self.0.tolerations.push(toleration(key));
        self
    }
    pub fn on(mut self, node: &str) -> Self {
        self.0.node_name = Some(arc(node));
        self
    }
    pub fn terminal(mut self) -> Self {
        self.0.terminal_or_terminating = true;
        self
    }
    pub fn build(self) -> Pod {
        self.0
    }
}

/// `n` pods `prefix-0..n` from one template.
pub fn pods(prefix: &str, n: usize, template: &P) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let mut p = template.0.clone();
            let name = format!("{prefix}-{i}");
            p.uid = arc(&name);
            p.name = arc(&name);
            p
        })
        .collect()
}

pub fn node(name: &str, pairs: &[(&str, &str)]) -> ClusterNode {
    let mut l = labels(pairs);
    l.insert(arc(HOST), arc(name));
    ClusterNode {
        name: arc(name),
        labels: l,
        taints: Vec::new(),
    }
}

/// The cluster and NodePools a test runs against.
#[derive(Clone, Debug, Default)]
pub struct World {
    pub policy: PreferencePolicy,
    pub universe: DomainUniverse,
    pub nodes: Vec<ClusterNode>,
    pub pods: Vec<Pod>,
    pub namespaces: BTreeMap<Arc<str>, Labels>,
    /// NodeClaim templates, tried in order: (NodePool requirements ∩ labels, taints).
    pub templates: Vec<(Requirements, Vec<Taint>)>,
    /// Pods per NodeClaim / existing node.
    pub capacity: usize,
}

/// One NodePool offering zones z1, z2, z3 through its instance types, no template requirements.
pub fn world() -> World {
    let mut w = World {
        capacity: usize::MAX,
        ..World::default()
    };
    w.add_pool(Requirements::new(), &[ZONE_1, ZONE_2, ZONE_3], &[]);
    w
}

pub const ZONE_1: &str = "test-zone-1";
pub const ZONE_2: &str = "test-zone-2";
pub const ZONE_3: &str = "test-zone-3";

impl World {
    /// Adds a NodePool whose instance types offer `zones`.
    pub fn add_pool(&mut self, template: Requirements, zones: &[&str], taints: &[Taint]) {
        let it: Requirements = [Requirement::in_values(ZONE, zones.iter().copied())]
            .into_iter()
            .collect();
        self.universe.add_node_pool(&template, [&it], taints);
        self.templates.push((template, taints.to_vec()));
    }
    /// A world with one NodePool: `template` requirements, instance types offering all zones.
    pub fn with_pool(template: Requirements) -> Self {
        let mut w = World {
            capacity: usize::MAX,
            ..World::default()
        };
        w.add_pool(template, &[ZONE_1, ZONE_2, ZONE_3], &[]);
        w
    }
    pub fn topology(&self, batch: &[Pod]) -> Topology {
        Topology::new(TopologyInput {
            policy: self.policy,
            universe: &self.universe,
            nodes: &self.nodes,
            pods: &self.pods,
            namespaces: &self.namespaces,
            batch,
        })
    }
    pub fn sim(&self, batch: &[Pod]) -> Sim {
        let existing = self
            .nodes
            .iter()
            .map(|n| Target {
                requirements: Requirements::from_labels(n.labels.iter()),
                taints: n.taints.clone(),
                pods: self
                    .pods
                    .iter()
                    .filter(|p| p.node_name.as_deref() == Some(&*n.name))
                    .cloned()
                    .collect(),
                existing: true,
            })
            .collect();
        Sim {
            world: self.clone(),
            topology: self.topology(batch),
            existing,
            claims: Vec::new(),
            next_host: 0,
            well_known: WellKnownLabels::default(),
        }
    }
}

/// `key In values`.
pub fn req_in(key: &str, values: &[&str]) -> Requirement {
    Requirement::in_values(key, values.iter().copied())
}

/// Requirements of the given `key In values` entries.
pub fn reqs(entries: &[(&str, &[&str])]) -> Requirements {
    entries.iter().map(|(k, v)| req_in(k, v)).collect()
}

/// A node-affinity term `key In values`.
pub fn zone_term(values: &[&str]) -> Vec<SelectorRequirement> {
    vec![SelectorRequirement::new(
        ZONE,
        Operator::In,
        values.iter().copied(),
    )]
}
