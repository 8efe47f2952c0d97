//! One topology group: a (key, type, namespaces, maxSkew, minDomains, node filter, selector)
//! constraint shared by every pod that declares it, with its per-domain pod counts.
//!
//! Responsibility: the group identity ([`GroupSpec`], hashed so identical constraints of many
//! pods share one group), label-selector validation and normalisation (a missing or invalid
//! selector selects nothing; expressions are compared as a set), whether a pod is selected, and
//! recording placements into the domain counts.
//! Inputs: specs built from pods by the builder. Outputs: [`Group`]s.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use super::domains::DomainCounts;
use super::node_filter::NodeFilter;
use crate::labels::{HOSTNAME, validate_label_value, validate_qualified_name};
use crate::pod::{LabelSelector, Labels, SelectorOperator};
use crate::requirements::Requirement;

/// The kind of a topology group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TopologyType {
    /// A topology spread constraint.
    Spread,
    /// A pod affinity term.
    PodAffinity,
    /// A pod anti-affinity term.
    PodAntiAffinity,
}

impl TopologyType {
    /// Evaluation order: filters first (anti-affinity, affinity), the spread choice last.
    pub(crate) fn rank(self) -> u8 {
        match self {
            Self::PodAntiAffinity => 0,
            Self::PodAffinity => 1,
            Self::Spread => 2,
        }
    }

    /// Low-cardinality label (metrics, logs).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Spread => "topology spread",
            Self::PodAffinity => "pod affinity",
            Self::PodAntiAffinity => "pod anti-affinity",
        }
    }
}

impl fmt::Display for TopologyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The identity of a group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct GroupSpec {
    pub(crate) kind: TopologyType,
    /// Alias-normalised topology key.
    pub(crate) key: Arc<str>,
    pub(crate) namespaces: BTreeSet<Arc<str>>,
    /// Only meaningful for spread groups (0 otherwise).
    pub(crate) max_skew: i32,
    pub(crate) min_domains: Option<i32>,
    /// Only spread groups have one.
    pub(crate) filter: Option<NodeFilter>,
    /// Normalised selector; `None` selects nothing.
    pub(crate) selector: Option<LabelSelector>,
}

/// A topology group and its counts.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub(crate) spec: GroupSpec,
    /// The selector if it is valid; `None` selects nothing.
    matcher: Option<LabelSelector>,
    /// Whether the key is `kubernetes.io/hostname` (fast paths; new hosts can always be made).
    pub(crate) hostname: bool,
    pub(crate) domains: DomainCounts,
}

impl Group {
    pub(crate) fn new(spec: GroupSpec) -> Self {
        let matcher = spec.selector.clone().filter(is_valid_selector);
        Self {
            hostname: &*spec.key == HOSTNAME,
            spec,
            matcher,
            domains: DomainCounts::default(),
        }
    }

    pub(crate) fn key(&self) -> &Arc<str> {
        &self.spec.key
    }

    pub(crate) fn kind(&self) -> TopologyType {
        self.spec.kind
    }

    /// Whether a pod in `namespace` with `labels` is selected (counted) by this group.
    pub(crate) fn selects(&self, namespace: &str, labels: &Labels) -> bool {
        self.spec.namespaces.contains(namespace)
            && self.matcher.as_ref().is_some_and(|s| s.matches(labels))
    }

    /// Makes a domain known with count 0.
    pub(crate) fn register(&mut self, domain: &Arc<str>) {
        self.domains.register(&self.spec.key, domain);
    }

    /// Adds one pod to a domain.
    pub(crate) fn record_domain(&mut self, domain: &Arc<str>) {
        self.domains.record(&self.spec.key, domain);
    }

    /// Records a pod placed on a node whose requirement for the key is `domains`: anti-affinity
    /// blocks every still-possible value; spread and affinity count only a decided domain.
    pub(crate) fn record(&mut self, domains: Option<&Requirement>) {
        let Some(req) = domains.filter(|r| !r.is_complement()) else {
            return;
        };
        match (self.spec.kind, req.values()) {
            (TopologyType::PodAntiAffinity, values) => {
                for value in values {
                    self.domains.record(&self.spec.key, value);
                }
            }
            (_, [single]) => self.domains.record(&self.spec.key, single),
            _ => {}
        }
    }
}

/// Sorts and de-duplicates expressions (and their values) so equal selectors compare equal.
pub(crate) fn normalize_selector(mut selector: LabelSelector) -> LabelSelector {
    for expression in &mut selector.match_expressions {
        expression.values.sort();
        expression.values.dedup();
    }
    selector.match_expressions.sort();
    selector.match_expressions.dedup();
    selector
}

/// Whether Kubernetes would accept the selector (invalid ones select nothing).
pub(crate) fn is_valid_selector(selector: &LabelSelector) -> bool {
    let labels_ok = selector
        .match_labels
        .iter()
        .all(|(k, v)| validate_qualified_name(k).is_ok() && validate_label_value(v).is_ok());
    labels_ok
        && selector.match_expressions.iter().all(|e| {
            let values_ok = match e.operator {
                SelectorOperator::In | SelectorOperator::NotIn => !e.values.is_empty(),
                SelectorOperator::Exists | SelectorOperator::DoesNotExist => e.values.is_empty(),
            };
            values_ok
                && validate_qualified_name(&e.key).is_ok()
                && e.values.iter().all(|v| validate_label_value(v).is_ok())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::SelectorExpression;

    fn expr(key: &str, op: SelectorOperator, values: &[&str]) -> SelectorExpression {
        SelectorExpression {
            key: Arc::from(key),
            operator: op,
            values: values.iter().map(|v| Arc::from(*v)).collect(),
        }
    }

    #[test]
    fn normalisation_makes_expression_order_irrelevant() {
        let a = LabelSelector {
            match_expressions: vec![
                expr("a", SelectorOperator::In, &["2", "1"]),
                expr("b", SelectorOperator::Exists, &[]),
            ],
            ..LabelSelector::default()
        };
        let b = LabelSelector {
            match_expressions: vec![
                expr("b", SelectorOperator::Exists, &[]),
                expr("a", SelectorOperator::In, &["1", "2", "1"]),
            ],
            ..LabelSelector::default()
        };
        assert_eq!(normalize_selector(a), normalize_selector(b));
    }

    #[test]
    fn invalid_selectors_are_detected() {
        assert!(is_valid_selector(&LabelSelector::from_labels([(
            "app", "web"
        )])));
        assert!(!is_valid_selector(&LabelSelector::from_labels([(
            "app", "{{ x }}"
        )])));
        let empty_in = LabelSelector {
            match_expressions: vec![expr("a", SelectorOperator::In, &[])],
            ..LabelSelector::default()
        };
        assert!(!is_valid_selector(&empty_in));
        let exists_with_values = LabelSelector {
            match_expressions: vec![expr("a", SelectorOperator::Exists, &["x"])],
            ..LabelSelector::default()
        };
        assert!(!is_valid_selector(&exists_with_values));
    }
}
