//! The topology-dependent filters of kube-scheduler-lite, prepared once per pod.
//!
//! Responsibility: for one pod and every node, precompute what the `PodTopologySpread` and
//! `InterPodAffinity` filters need — matching pod counts per domain for each `DoNotSchedule`
//! spread constraint, the domains holding pods the pod's required anti-affinity (or affinity)
//! selects, and the domains where an existing pod's required anti-affinity selects this pod —
//! so checking a node is cheap. Any topology key works (hostname, zone, …).
//! Inputs: an engine pod and [`NodeInfo`]s. Outputs: [`Topology`] and per-node [`Reason`]s.
//! Pure. Approximations: affinity-term namespace selectors select every namespace; `minDomains`
//! only lowers the global minimum to 0 when there are fewer domains.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use scheduling::pod::{
    LabelSelector, NodeInclusionPolicy, Pod, PodAffinityTerm, WhenUnsatisfiable,
};
use scheduling::taints::TaintEffect;

use super::fit::{NodeInfo, Reason, node_affinity_matches, untolerated};

/// Whether an affinity term written by a pod in `owner_ns` selects `other`.
fn term_selects(term: &PodAffinityTerm, owner_ns: &str, other: &Pod) -> bool {
    let ns_ok = match &term.namespace_selector {
        Some(_) => true,
        None if term.namespaces.is_empty() => &*other.namespace == owner_ns,
        None => term.namespaces.contains(&other.namespace),
    };
    ns_ok
        && term
            .label_selector
            .as_ref()
            .is_some_and(|s| s.matches(&other.labels))
}

/// One `DoNotSchedule` spread constraint, counted.
#[derive(Debug, Clone)]
struct Spread {
    key: Arc<str>,
    counts: BTreeMap<Arc<str>, i64>,
    min: i64,
    own: i64,
    max_skew: i64,
}

/// One required affinity term: the domains holding a selected pod.
#[derive(Debug, Clone)]
struct Domains {
    key: Arc<str>,
    values: HashSet<Arc<str>>,
    /// (Affinity only) no pod anywhere matches and the pod matches its own term.
    first_of_its_kind: bool,
}

/// The topology facts for one pod.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    spread: Vec<Spread>,
    anti: Vec<Domains>,
    affinity: Vec<Domains>,
    /// `(key, value)` domains where an existing pod's anti-affinity selects this pod.
    blocked: HashSet<(Arc<str>, Arc<str>)>,
}

fn effective_selector(pod: &Pod, selector: &LabelSelector, keys: &[Arc<str>]) -> LabelSelector {
    let mut s = selector.clone();
    for k in keys {
        if let Some(v) = pod.labels.get(k) {
            s.match_labels.insert(k.clone(), v.clone());
        }
    }
    s
}

fn domains(term: &PodAffinityTerm, pod: &Pod, all: &[NodeInfo]) -> Domains {
    let key = term.topology_key.clone();
    let mut anywhere = false;
    let mut values = HashSet::new();
    for n in all {
        if n.pods.iter().any(|p| term_selects(term, &pod.namespace, p)) {
            anywhere = true;
            if let Some(v) = n.labels.get(&key) {
                values.insert(v.clone());
            }
        }
    }
    Domains {
        key,
        values,
        first_of_its_kind: !anywhere && term_selects(term, &pod.namespace, pod),
    }
}

impl Topology {
    /// Prepare the filters for `pod` over `all` nodes.
    pub fn new(pod: &Pod, all: &[NodeInfo]) -> Self {
        let mut t = Topology::default();
        for c in &pod.topology_spread_constraints {
            if c.when_unsatisfiable != WhenUnsatisfiable::DoNotSchedule {
                continue;
            }
            let Some(selector) = &c.label_selector else {
                continue;
            };
            let selector = effective_selector(pod, selector, &c.match_label_keys);
            let mut counts: BTreeMap<Arc<str>, i64> = BTreeMap::new();
            for n in all {
                let Some(d) = n.labels.get(&c.topology_key) else {
                    continue;
                };
                if c.node_affinity_policy == NodeInclusionPolicy::Honor
                    && !node_affinity_matches(pod, &n.labels)
                {
                    continue;
                }
                let effects = [TaintEffect::NoSchedule, TaintEffect::NoExecute];
                if c.node_taints_policy == NodeInclusionPolicy::Honor
                    && untolerated(pod, &n.taints, &effects).is_some()
                {
                    continue;
                }
                let matching = n
                    .pods
                    .iter()
                    .filter(|p| p.namespace == pod.namespace && !p.terminal_or_terminating)
                    .filter(|p| selector.matches(&p.labels))
                    .count();
                *counts.entry(d.clone()).or_default() += i64::try_from(matching).unwrap_or(0);
            }
            let few = c
                .min_domains
                .is_some_and(|m| i32::try_from(counts.len()).unwrap_or(i32::MAX) < m);
            let min = if few {
                0
            } else {
                counts.values().copied().min().unwrap_or(0)
            };
            t.spread.push(Spread {
                key: c.topology_key.clone(),
                counts,
                min,
                own: i64::from(selector.matches(&pod.labels)),
                max_skew: i64::from(c.max_skew),
            });
        }
        t.anti = pod
            .pod_anti_affinity
            .required
            .iter()
            .map(|term| domains(term, pod, all))
            .collect();
        t.affinity = pod
            .pod_affinity
            .required
            .iter()
            .map(|term| domains(term, pod, all))
            .collect();
        for n in all {
            for p in &n.anti_affinity_pods {
                for term in &p.pod_anti_affinity.required {
                    if let Some(v) = n.labels.get(&term.topology_key)
                        && term_selects(term, &p.namespace, pod)
                    {
                        t.blocked.insert((term.topology_key.clone(), v.clone()));
                    }
                }
            }
        }
        t
    }

    /// The first topology filter `node` fails, if any.
    pub fn check(&self, node: &NodeInfo) -> Option<Reason> {
        for s in &self.spread {
            let Some(domain) = node.labels.get(&s.key) else {
                return Some(Reason::Spread(true));
            };
            let here = s.counts.get(domain).copied().unwrap_or(0);
            if here + s.own - s.min > s.max_skew {
                return Some(Reason::Spread(false));
            }
        }
        let value = |key: &Arc<str>| node.labels.get(key);
        if self
            .anti
            .iter()
            .any(|d| value(&d.key).is_some_and(|v| d.values.contains(v)))
        {
            return Some(Reason::AntiAffinity);
        }
        if self
            .blocked
            .iter()
            .any(|(k, v)| node.labels.get(k) == Some(v))
        {
            return Some(Reason::ExistingAntiAffinity);
        }
        let affinity_ok = self.affinity.iter().all(|d| match value(&d.key) {
            Some(v) => d.values.contains(v) || d.first_of_its_kind,
            None => false,
        });
        if !affinity_ok {
            return Some(Reason::Affinity);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> scheduling::pod::Labels {
        pairs
            .iter()
            .map(|(k, v)| (Arc::from(*k), Arc::from(*v)))
            .collect()
    }

    fn web(name: &str) -> Pod {
        Pod {
            namespace: Arc::from("default"),
            name: Arc::from(name),
            labels: labels(&[("app", "web")]),
            ..Pod::default()
        }
    }

    fn zone_node(name: &str, zone: &str) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            labels: labels(&[("zone", zone)]),
            ready: true,
            ..NodeInfo::default()
        }
    }

    #[test]
    fn required_pod_affinity_follows_its_peers() {
        let mut a = zone_node("a", "z1");
        let b = zone_node("b", "z2");
        let mut follower = web("f");
        follower.pod_affinity.required.push(PodAffinityTerm {
            label_selector: Some(LabelSelector::from_labels([("app", "web")])),
            namespaces: Vec::new(),
            namespace_selector: None,
            topology_key: Arc::from("zone"),
        });
        // The first of its kind may go anywhere with the key.
        let t = Topology::new(&follower, &[a.clone(), b.clone()]);
        assert_eq!(t.check(&a), None);
        assert_eq!(t.check(&b), None);
        a.place(&web("leader"));
        let t = Topology::new(&follower, &[a.clone(), b.clone()]);
        assert_eq!(t.check(&a), None);
        assert_eq!(t.check(&b), Some(Reason::Affinity));
    }

    #[test]
    fn zone_anti_affinity_blocks_the_whole_zone() {
        let mut a = zone_node("a", "z1");
        let a2 = zone_node("a2", "z1");
        let b = zone_node("b", "z2");
        let mut lonely = web("l");
        lonely.pod_anti_affinity.required.push(PodAffinityTerm {
            label_selector: Some(LabelSelector::from_labels([("app", "web")])),
            namespaces: Vec::new(),
            namespace_selector: None,
            topology_key: Arc::from("zone"),
        });
        a.place(&lonely);
        let all = [a.clone(), a2.clone(), b.clone()];
        let t = Topology::new(&web("x"), &all);
        assert_eq!(t.check(&a2), Some(Reason::ExistingAntiAffinity));
        assert_eq!(t.check(&b), None);
    }
}
