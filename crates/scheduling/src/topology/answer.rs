//! The domains one group allows for one candidate placement.
//!
//! Responsibility: given a group, whether the pod is selected by it, the pod's own domains for
//! the key (from its strict requirements) and the candidate node's domains, compute the allowed
//! domains as a requirement:
//! * spread: `min` = 0 for hostname, else the least count over domains the pod allows (0 when
//!   fewer than minDomains such domains); a domain is valid when
//!   `count + self − min ≤ maxSkew`; the answer is the valid domain with the smallest count,
//!   ties broken by domain name;
//! * affinity: the domains with pods; else, for a self-selecting pod when nothing was placed yet
//!   (or nothing placed is reachable by the pod), a bootstrap set the caller collapses to one;
//! * anti-affinity (owned or inverse): the domains without pods (a domain the group has never
//!   heard of has none).
//!
//! `kubernetes.io/hostname` with a single candidate hostname takes an O(1) fast path that never
//! allocates: the answer is the candidate's own requirement.
//! Inputs: a [`Group`], `Option<&Requirement>`s (`None` = the key is unconstrained).
//! Outputs: [`Answer`].

use std::sync::Arc;

use super::domains::Domain;
use super::group::{Group, TopologyType};
use crate::requirements::Requirement;

/// What a group allows.
#[derive(Debug)]
pub(crate) enum Answer {
    /// These domains.
    Allowed(Requirement),
    /// Affinity bootstrap: any one of these (the caller collapses the set to one domain after the
    /// other groups have narrowed it).
    Bootstrap(Requirement),
    /// Nothing.
    Unsatisfiable,
}

/// Whether `value` is allowed (`None` allows everything).
pub(crate) fn allows(domains: Option<&Requirement>, value: &str) -> bool {
    domains.is_none_or(|r| r.has(value))
}

/// The single value of an `In [v]` requirement.
pub(crate) fn single_value(domains: Option<&Requirement>) -> Option<&Arc<str>> {
    match domains {
        Some(r) if !r.is_complement() => match r.values() {
            [single] => Some(single),
            _ => None,
        },
        _ => None,
    }
}

fn concrete(domains: Option<&Requirement>) -> Option<&Requirement> {
    domains.filter(|r| !r.is_complement())
}

/// `node` itself when every one of its values was kept, else `key In kept`.
fn narrowed(key: &Arc<str>, node: &Requirement, kept: Vec<&Arc<str>>) -> Option<Requirement> {
    if kept.is_empty() {
        None
    } else if kept.len() == node.values().len() {
        Some(node.clone())
    } else {
        Some(Requirement::in_values(
            key.clone(),
            kept.into_iter().cloned(),
        ))
    }
}

fn from_domains(key: &Arc<str>, kept: &[&Domain]) -> Option<Requirement> {
    match kept {
        [] => None,
        [single] => Some(single.single.clone()),
        many => Some(Requirement::in_values(
            key.clone(),
            many.iter().map(|d| d.name.clone()),
        )),
    }
}

/// The valid domain (`count + own − min ≤ max_skew`) with the smallest count, then name.
fn least_loaded<'d>(
    domains: impl Iterator<Item = &'d Domain>,
    own: i64,
    min: i64,
    max_skew: i64,
) -> Option<&'d Domain> {
    let mut best: Option<(i64, &Domain)> = None;
    for d in domains {
        let count = i64::from(d.count) + own;
        let better = best.is_none_or(|(c, b)| count < c || (count == c && d.name < b.name));
        if count - min <= max_skew && better {
            best = Some((count, d));
        }
    }
    best.map(|(_, d)| d)
}

impl Group {
    fn hostname_candidate<'r>(
        &self,
        node: Option<&'r Requirement>,
    ) -> Option<(&'r Requirement, &'r Arc<str>)> {
        if !self.hostname {
            return None;
        }
        let host = single_value(node)?;
        node.map(|n| (n, host))
    }

    /// What this group allows a pod (`selects`: whether the group counts it) on a node.
    pub(crate) fn answer(
        &self,
        selects: bool,
        pod: Option<&Requirement>,
        node: Option<&Requirement>,
    ) -> Answer {
        let allowed = match self.kind() {
            TopologyType::Spread => self.spread(selects, pod, node),
            TopologyType::PodAntiAffinity => self.anti_affinity(pod, node),
            TopologyType::PodAffinity => return self.affinity(selects, pod, node),
        };
        allowed.map_or(Answer::Unsatisfiable, Answer::Allowed)
    }

    fn spread(
        &self,
        selects: bool,
        pod: Option<&Requirement>,
        node: Option<&Requirement>,
    ) -> Option<Requirement> {
        let own = i64::from(selects);
        let max_skew = i64::from(self.spec.max_skew);
        if let Some((node, host)) = self.hostname_candidate(node) {
            let count = i64::from(self.domains.count(host)) + own;
            return (count <= max_skew).then(|| node.clone());
        }
        let min = self.min_count(pod);
        let best = match concrete(node) {
            Some(n) => least_loaded(
                n.values().iter().filter_map(|v| self.domains.get(v)),
                own,
                min,
                max_skew,
            ),
            None => least_loaded(
                self.domains.iter().filter(|d| allows(node, &d.name)),
                own,
                min,
                max_skew,
            ),
        };
        best.map(|d| d.single.clone())
    }

    /// The global minimum count the skew is measured against.
    fn min_count(&self, pod: Option<&Requirement>) -> i64 {
        if self.hostname {
            // A new node (hostname) can always be created, so some domain always has zero.
            return 0;
        }
        let (mut min, mut supported) = (i64::from(i32::MAX), 0_i64);
        for d in self.domains.iter().filter(|d| allows(pod, &d.name)) {
            supported += 1;
            min = min.min(i64::from(d.count));
        }
        if self
            .spec
            .min_domains
            .is_some_and(|m| supported < i64::from(m))
        {
            min = 0;
        }
        min
    }

    /// Nothing placed yet, or nothing placed where the pod may go.
    fn may_bootstrap(&self, pod: Option<&Requirement>) -> bool {
        self.domains.all_empty()
            || !self
                .domains
                .iter()
                .any(|d| d.count > 0 && allows(pod, &d.name))
    }

    fn affinity(
        &self,
        selects: bool,
        pod: Option<&Requirement>,
        node: Option<&Requirement>,
    ) -> Answer {
        if let Some((node, host)) = self.hostname_candidate(node) {
            let ok = allows(pod, host)
                && (self.domains.count(host) > 0 || (selects && self.may_bootstrap(pod)));
            return if ok {
                Answer::Allowed(node.clone())
            } else {
                Answer::Unsatisfiable
            };
        }
        let populated = |d: &Domain| d.count > 0 && allows(pod, &d.name);
        let found = match concrete(node) {
            Some(n) => {
                let kept = n
                    .values()
                    .iter()
                    .filter(|v| self.domains.get(v).is_some_and(populated))
                    .collect();
                narrowed(self.key(), n, kept)
            }
            None => {
                let kept: Vec<&Domain> = self
                    .domains
                    .iter()
                    .filter(|d| populated(d) && allows(node, &d.name))
                    .collect();
                from_domains(self.key(), &kept)
            }
        };
        if let Some(found) = found {
            return Answer::Allowed(found);
        }
        if !(selects && self.may_bootstrap(pod)) {
            return Answer::Unsatisfiable;
        }
        let candidates: Vec<&Domain> = self
            .domains
            .iter()
            .filter(|d| allows(pod, &d.name) && allows(node, &d.name))
            .collect();
        match from_domains(self.key(), &candidates) {
            None => Answer::Unsatisfiable,
            Some(one) if candidates.len() == 1 => Answer::Allowed(one),
            Some(many) => Answer::Bootstrap(many),
        }
    }

    /// Domains without selected pods; also the answer of an inverse group.
    pub(crate) fn anti_affinity(
        &self,
        pod: Option<&Requirement>,
        node: Option<&Requirement>,
    ) -> Option<Requirement> {
        if let Some((node, host)) = self.hostname_candidate(node) {
            return (self.domains.count(host) == 0 && allows(pod, host)).then(|| node.clone());
        }
        match concrete(node) {
            Some(n) => {
                let kept = n
                    .values()
                    .iter()
                    .filter(|v| self.domains.count(v) == 0 && allows(pod, v))
                    .collect();
                narrowed(self.key(), n, kept)
            }
            None => {
                let kept: Vec<&Domain> = self
                    .domains
                    .iter()
                    .filter(|d| d.count == 0 && allows(pod, &d.name) && allows(node, &d.name))
                    .collect();
                from_domains(self.key(), &kept)
            }
        }
    }
}
