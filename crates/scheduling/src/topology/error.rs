//! The error a placement gets when a topology constraint leaves no domain.
//!
//! Responsibility: carry what a FailedScheduling event needs to explain the failure (the
//! constraint kind and key, the group's domain counts, the pod's and node's allowed domains)
//! while staying cheap to build: one small allocation, counts limited to the domains that
//! matter (the single candidate hostname on the hostname fast path, else at most 25 by name).
//! Inputs: built by the answer functions. Outputs: [`TopologyError`] with a human-readable
//! `Display`.

use std::fmt;
use std::sync::Arc;

use super::group::TopologyType;
use crate::requirements::Requirement;

/// Counts shown in a message at most.
pub(crate) const MAX_SHOWN_COUNTS: usize = 25;

/// A topology constraint (spread, affinity, anti-affinity, or another pod's anti-affinity) left
/// no allowed domain for the candidate node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyError(Box<Details>);

/// The counts shown: the one candidate hostname, or a sorted sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Counts {
    /// The only domain that matters (hostname fast path); no extra allocation.
    One(Arc<str>, i32),
    /// Up to [`MAX_SHOWN_COUNTS`] domains by name, and how many more there are.
    Sample(Vec<(Arc<str>, i32)>, usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Details {
    kind: TopologyType,
    inverse: bool,
    key: Arc<str>,
    counts: Counts,
    pod_domains: Option<Requirement>,
    node_domains: Option<Requirement>,
}

impl TopologyError {
    pub(crate) fn new(
        kind: TopologyType,
        inverse: bool,
        key: Arc<str>,
        counts: Counts,
        pod_domains: Option<&Requirement>,
        node_domains: Option<&Requirement>,
    ) -> Self {
        Self(Box::new(Details {
            kind,
            inverse,
            key,
            counts,
            pod_domains: pod_domains.cloned(),
            node_domains: node_domains.cloned(),
        }))
    }

    /// The kind of the failing constraint.
    #[must_use]
    pub fn kind(&self) -> TopologyType {
        self.0.kind
    }

    /// Whether the failing constraint is another pod's required anti-affinity selecting this
    /// pod.
    #[must_use]
    pub fn is_inverse(&self) -> bool {
        self.0.inverse
    }

    /// The topology key.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.0.key
    }

    /// Low-cardinality label for metrics.
    #[must_use]
    pub fn metric_label(&self) -> &'static str {
        match (self.0.kind, self.0.inverse) {
            (TopologyType::Spread, _) => "topology_spread",
            (TopologyType::PodAffinity, _) => "pod_affinity",
            (TopologyType::PodAntiAffinity, false) => "pod_anti_affinity",
            (TopologyType::PodAntiAffinity, true) => "inverse_pod_anti_affinity",
        }
    }
}

struct Domains<'a>(&'a str, Option<&'a Requirement>);

impl fmt::Display for Domains<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Some(r) => write!(f, "{r}"),
            None => write!(f, "{} Exists", self.0),
        }
    }
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.0;
        let inverse = if d.inverse { "inverse " } else { "" };
        write!(
            f,
            "unsatisfiable topology constraint for {inverse}{}, key={} (counts = {{",
            d.kind, d.key
        )?;
        let (shown, more) = match &d.counts {
            Counts::One(domain, count) => (vec![(domain, *count)], 0),
            Counts::Sample(sample, more) => (sample.iter().map(|(d, c)| (d, *c)).collect(), *more),
        };
        for (i, (domain, count)) in shown.into_iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{domain}: {count}")?;
        }
        if more > 0 {
            write!(f, ", and {more} more")?;
        }
        write!(
            f,
            "}}, podDomains = {}, nodeDomains = {})",
            Domains(&d.key, d.pod_domains.as_ref()),
            Domains(&d.key, d.node_domains.as_ref())
        )
    }
}

impl std::error::Error for TopologyError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_the_constraint_and_domains() {
        let node = Requirement::in_values("topology.kubernetes.io/zone", ["a"]);
        let err = TopologyError::new(
            TopologyType::Spread,
            false,
            Arc::from("topology.kubernetes.io/zone"),
            Counts::Sample(vec![(Arc::from("a"), 2), (Arc::from("b"), 0)], 0),
            None,
            Some(&node),
        );
        assert_eq!(
            err.to_string(),
            "unsatisfiable topology constraint for topology spread, key=topology.kubernetes.io/zone \
             (counts = {a: 2, b: 0}, podDomains = topology.kubernetes.io/zone Exists, \
             nodeDomains = topology.kubernetes.io/zone In [a])"
        );
        assert_eq!(err.metric_label(), "topology_spread");
    }
}
