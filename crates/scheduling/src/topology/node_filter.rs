//! Which nodes take part in a topology spread constraint (`nodeAffinityPolicy`,
//! `nodeTaintsPolicy`).
//!
//! Responsibility: decide whether a node (an existing node, or a NodeClaim being built) counts
//! for a spread group: with `nodeAffinityPolicy: Honor` (the default) the node must satisfy the
//! owning pod's nodeSelector together with one of its required node-affinity terms (the terms are
//! ORed); with `nodeTaintsPolicy: Honor` (default `Ignore`) the pod must tolerate every node
//! taint. Pod (anti-)affinity groups have no filter: every node counts.
//! Inputs: the owning pod, the two policies; per check the node's taints and requirements and
//! the compatibility mode. Outputs: a hashable [`NodeFilter`] (part of a group's identity) and
//! a boolean.
//!
//! Normalisation: the parts a policy ignores are dropped, so spread constraints that differ only
//! in ignored parts share one group. A node-affinity term that cannot be parsed matches no node.

use crate::labels::WellKnownLabels;
use crate::pod::{NodeInclusionPolicy, Pod};
use crate::requirements::{Requirement, Requirements};
use crate::taints::{Taint, Toleration, tolerates_all};

/// The node filter of one spread group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct NodeFilter {
    /// `None` when the affinity policy is `Ignore`; otherwise the ORed terms (each the
    /// nodeSelector ∩ one required term). An empty list matches no node.
    terms: Option<Vec<Requirements>>,
    /// `None` when the taint policy is `Ignore`; otherwise the pod's tolerations.
    tolerations: Option<Vec<Toleration>>,
}

impl NodeFilter {
    /// The filter a spread constraint of `pod` with these policies implies.
    pub(crate) fn for_pod(
        pod: &Pod,
        taint_policy: NodeInclusionPolicy,
        affinity_policy: NodeInclusionPolicy,
    ) -> Self {
        let terms = (affinity_policy == NodeInclusionPolicy::Honor).then(|| node_terms(pod));
        let tolerations =
            (taint_policy == NodeInclusionPolicy::Honor).then(|| pod.tolerations.clone());
        Self { terms, tolerations }
    }

    /// The tolerations used to pick a group's starting domains, when taints are honoured.
    pub(crate) fn honored_tolerations(&self) -> Option<&[Toleration]> {
        self.tolerations.as_deref()
    }

    /// Whether a node with these taints and requirements counts. `well_known` is `None` for
    /// existing nodes (strict compatibility) and the well-known labels for NodeClaims (their
    /// undefined well-known keys are allowed).
    pub(crate) fn matches(
        &self,
        taints: &[Taint],
        node: &Requirements,
        well_known: Option<&WellKnownLabels>,
    ) -> bool {
        let affinity_ok = self.terms.as_ref().is_none_or(|terms| {
            terms.iter().any(|term| match well_known {
                Some(wk) => node.is_compatible(term, wk),
                None => node.is_compatible_strict(term),
            })
        });
        affinity_ok
            && self
                .tolerations
                .as_ref()
                .is_none_or(|tolerations| tolerates_all(taints, tolerations).is_ok())
    }
}

/// nodeSelector ∩ each required node-affinity term (or the nodeSelector alone without terms).
fn node_terms(pod: &Pod) -> Vec<Requirements> {
    let selector: Requirements = pod
        .node_selector
        .iter()
        .map(|(k, v)| Requirement::in_values(k.clone(), [v.clone()]))
        .collect();
    if pod.required_node_affinity.is_empty() {
        return vec![selector];
    }
    pod.required_node_affinity
        .iter()
        .filter_map(|term| Requirements::from_selector(term.iter()).ok())
        .map(|term| {
            let mut reqs = selector.clone();
            reqs.add_all(&term);
            reqs
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::requirements::{Operator, SelectorRequirement};
    use crate::taints::TaintEffect;

    fn pod() -> Pod {
        let mut pod = Pod::default();
        pod.node_selector
            .insert(Arc::from("tier"), Arc::from("web"));
        pod
    }

    #[test]
    fn honor_affinity_requires_the_node_selector_and_one_term() {
        let mut p = pod();
        p.required_node_affinity = vec![
            vec![SelectorRequirement::new("zone", Operator::In, ["a"])],
            vec![SelectorRequirement::new("zone", Operator::In, ["b"])],
        ];
        let f = NodeFilter::for_pod(&p, NodeInclusionPolicy::Ignore, NodeInclusionPolicy::Honor);
        let node = |zone: &str| Requirements::from_labels([("tier", "web"), ("zone", zone)]);
        assert!(f.matches(&[], &node("a"), None));
        assert!(f.matches(&[], &node("b"), None));
        assert!(!f.matches(&[], &node("c"), None));
        assert!(!f.matches(&[], &Requirements::from_labels([("zone", "a")]), None));
    }

    #[test]
    fn ignore_policies_match_everything_and_share_identity() {
        let mut other = pod();
        other.node_selector.clear();
        let a = NodeFilter::for_pod(
            &pod(),
            NodeInclusionPolicy::Ignore,
            NodeInclusionPolicy::Ignore,
        );
        let b = NodeFilter::for_pod(
            &other,
            NodeInclusionPolicy::Ignore,
            NodeInclusionPolicy::Ignore,
        );
        assert_eq!(a, b);
        let taint = Taint::new("dedicated", "x", TaintEffect::NoSchedule);
        assert!(a.matches(&[taint], &Requirements::new(), None));
    }

    #[test]
    fn honor_taints_requires_toleration() {
        let f = NodeFilter::for_pod(
            &pod(),
            NodeInclusionPolicy::Honor,
            NodeInclusionPolicy::Ignore,
        );
        let taint = Taint::new("dedicated", "x", TaintEffect::NoSchedule);
        assert!(!f.matches(&[taint], &Requirements::new(), None));
        assert!(f.matches(&[], &Requirements::new(), None));
    }

    #[test]
    fn unparsable_terms_match_no_node() {
        let mut p = pod();
        p.required_node_affinity = vec![vec![SelectorRequirement::new("n", Operator::Gt, ["x"])]];
        let f = NodeFilter::for_pod(&p, NodeInclusionPolicy::Ignore, NodeInclusionPolicy::Honor);
        assert!(!f.matches(&[], &Requirements::from_labels([("tier", "web")]), None));
    }
}
