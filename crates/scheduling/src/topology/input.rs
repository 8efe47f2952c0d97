//! The plain data a [`super::Topology`] is built from and queried with.
//!
//! Responsibility: the domain universe per topology key ([`DomainUniverse`], filled from
//! NodePools × instance types, each domain remembering the taint sets of the pools offering it),
//! the existing cluster ([`ClusterNode`]s, namespace labels, bound pods as [`Pod`]s), the preference
//! policy, and the description of a placement used when recording ([`Placement`]).
//! Inputs: values the scheduler derives from its snapshot. Outputs: these types.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::labels::WellKnownLabels;
use crate::pod::{Labels, Pod};
use crate::requirements::Requirements;
use crate::taints::{Taint, Toleration, tolerates_all};

/// How soft constraints (ScheduleAnyway spread constraints, preferred pod (anti-)affinity) are
/// treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PreferencePolicy {
    /// Enforced as if required until the scheduler relaxes them (and calls
    /// [`super::Topology::update`] with the relaxed pod).
    #[default]
    Respect,
    /// Skipped entirely.
    Ignore,
}

/// The alternative taint sets of the NodePools offering one domain.
type TaintSets = Vec<Vec<Taint>>;

/// The domains each topology key can take on nodes Karpenter may create, with the taint sets of
/// the NodePools offering each domain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DomainUniverse {
    keys: BTreeMap<Arc<str>, BTreeMap<Arc<str>, TaintSets>>,
}

impl DomainUniverse {
    /// An empty universe.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that a NodePool with `taints` offers `domain` for `key`. Inserting with no taints
    /// makes the domain untainted for good (every pod may use it); otherwise the taint set is
    /// remembered as one more alternative.
    pub fn insert(&mut self, key: &str, domain: &str, taints: &[Taint]) {
        let key = crate::labels::normalize_key(key);
        let domains = self.keys.entry(Arc::from(key)).or_default();
        match domains.get_mut(domain) {
            None => {
                domains.insert(Arc::from(domain), vec![taints.to_vec()]);
            }
            Some(sets) if taints.is_empty() => *sets = vec![Vec::new()],
            Some(sets) => {
                if sets.first().is_some_and(|first| !first.is_empty())
                    && !sets.iter().any(|s| s == taints)
                {
                    sets.push(taints.to_vec());
                }
            }
        }
    }

    /// Adds one NodePool: for each instance type, every `In` value of
    /// `template ∩ instance-type requirements`, then every `In` value of the template itself.
    /// `template` is the pool's requirements intersected with its template labels.
    pub fn add_node_pool<'r, I>(
        &mut self,
        template: &Requirements,
        instance_types: I,
        taints: &[Taint],
    ) where
        I: IntoIterator<Item = &'r Requirements>,
    {
        for it in instance_types {
            let mut reqs = template.clone();
            reqs.add_all(it);
            self.add_in_values(&reqs, taints);
        }
        self.add_in_values(template, taints);
    }

    fn add_in_values(&mut self, reqs: &Requirements, taints: &[Taint]) {
        for req in reqs.iter().filter(|r| !r.is_complement()) {
            for value in req.values() {
                self.insert(req.key(), value, taints);
            }
        }
    }

    /// The domains of `key`, sorted.
    pub fn domains<'a>(&'a self, key: &str) -> impl Iterator<Item = &'a Arc<str>> + 'a {
        self.keys.get(key).into_iter().flat_map(BTreeMap::keys)
    }

    /// The domains of `key` on which a pod with `tolerations` may land (some offering pool's
    /// taints are all tolerated); every domain when `tolerations` is `None`.
    pub(crate) fn domains_for<'a>(
        &'a self,
        key: &str,
        tolerations: Option<&'a [Toleration]>,
    ) -> impl Iterator<Item = &'a Arc<str>> + 'a {
        self.keys
            .get(key)
            .into_iter()
            .flatten()
            .filter(move |(_, sets)| {
                tolerations.is_none_or(|tol| sets.iter().any(|t| tolerates_all(t, tol).is_ok()))
            })
            .map(|(domain, _)| domain)
    }
}

/// An existing node (a real Node object; NodeClaims without a node are not listed here).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterNode {
    /// The Node name (also the hostname domain when the hostname label is missing).
    pub name: Arc<str>,
    /// Node labels.
    pub labels: Labels,
    /// Node taints.
    pub taints: Vec<Taint>,
}

impl ClusterNode {
    /// Its `kubernetes.io/hostname` domain: the label, else the node name.
    #[must_use]
    pub fn hostname(&self) -> &Arc<str> {
        self.labels
            .get(crate::labels::HOSTNAME)
            .unwrap_or(&self.name)
    }
}

/// Everything a [`super::Topology`] is built from.
#[derive(Debug, Clone, Copy)]
pub struct TopologyInput<'a> {
    /// Whether preferences are enforced until relaxed.
    pub policy: PreferencePolicy,
    /// Domains offered by NodePools.
    pub universe: &'a DomainUniverse,
    /// Every existing Node; pods bound to other names are on deleted nodes and not counted.
    /// Their hostname domains are registered in every hostname group.
    pub nodes: &'a [ClusterNode],
    /// Existing pods (bound, or not: unbound, terminal and terminating pods are skipped).
    pub pods: &'a [Pod],
    /// Namespace name → labels, for `namespaceSelector`.
    pub namespaces: &'a BTreeMap<Arc<str>, Labels>,
    /// The pods being scheduled: excluded from counting; their constraints create groups.
    pub batch: &'a [Pod],
}

/// Where a pod was placed, for [`super::Topology::record`].
#[derive(Debug, Clone, Copy)]
pub struct Placement<'a> {
    /// The node's (or NodeClaim's) final requirements, topology answer included.
    pub requirements: &'a Requirements,
    /// The node's (or NodeClaim template's) taints.
    pub taints: &'a [Taint],
    /// `None` for an existing node (strict compatibility); the well-known labels for a
    /// NodeClaim (its undefined well-known keys are allowed).
    pub well_known: Option<&'a WellKnownLabels>,
}

impl<'a> Placement<'a> {
    /// A placement on an existing node.
    #[must_use]
    pub fn existing_node(requirements: &'a Requirements, taints: &'a [Taint]) -> Self {
        Self {
            requirements,
            taints,
            well_known: None,
        }
    }

    /// A placement on a NodeClaim (new or in flight) of a template with `taints`.
    #[must_use]
    pub fn node_claim(
        requirements: &'a Requirements,
        taints: &'a [Taint],
        well_known: &'a WellKnownLabels,
    ) -> Self {
        Self {
            requirements,
            taints,
            well_known: Some(well_known),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requirements::Requirement;
    use crate::taints::{TaintEffect, TolerationOperator};

    #[test]
    fn universe_keeps_in_values_and_taint_alternatives() {
        let taint = Taint::new("gpu", "", TaintEffect::NoSchedule);
        let mut u = DomainUniverse::new();
        let template: Requirements = [
            Requirement::in_values("zone", ["a", "b"]),
            Requirement::not_in("x", ["y"]),
        ]
        .into_iter()
        .collect();
        let it: Requirements = [Requirement::in_values("zone", ["b", "c"])]
            .into_iter()
            .collect();
        u.add_node_pool(&template, [&it], std::slice::from_ref(&taint));
        assert_eq!(
            u.domains("zone").map(|d| &**d).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(u.domains("x").count(), 0);
        assert_eq!(u.domains_for("zone", Some(&[])).count(), 0);
        let tol = Toleration {
            key: "gpu".into(),
            operator: TolerationOperator::Exists,
            ..Toleration::default()
        };
        assert_eq!(
            u.domains_for("zone", Some(std::slice::from_ref(&tol)))
                .count(),
            2
        );
        u.insert("zone", "a", &[]);
        assert_eq!(
            u.domains_for("zone", Some(&[]))
                .map(|d| &**d)
                .collect::<Vec<_>>(),
            ["a"]
        );
    }
}
