//! Fast offering compatibility against one set of requirements.
//!
//! Responsibility: answer "which of this instance type's offerings do these requirements allow"
//! many times for the same requirements (price ordering, capacity types of a planned NodeClaim)
//! without walking requirements for offerings of the usual shape: a capacity type and a zone,
//! one value each, is checked by membership of those two values.
//! Inputs: requirements, well-known labels, instance types. Outputs: offerings, prices.

use super::{InstanceType, Offering, PriceRank};
use crate::labels::{CAPACITY_TYPE, TOPOLOGY_ZONE, WellKnownLabels};
use crate::requirements::{Requirement, Requirements};

/// Offering compatibility for one set of requirements (undefined well-known labels allowed).
#[derive(Debug, Clone, Copy)]
pub struct OfferingMatcher<'r> {
    simple: bool,
    capacity_type: Option<&'r Requirement>,
    zone: Option<&'r Requirement>,
    requirements: &'r Requirements,
    well_known: &'r WellKnownLabels,
}

impl<'r> OfferingMatcher<'r> {
    /// A matcher for `requirements`.
    #[must_use]
    pub fn new(requirements: &'r Requirements, well_known: &'r WellKnownLabels) -> Self {
        Self {
            simple: well_known.contains(CAPACITY_TYPE) && well_known.contains(TOPOLOGY_ZONE),
            capacity_type: requirements.get(CAPACITY_TYPE),
            zone: requirements.get(TOPOLOGY_ZONE),
            requirements,
            well_known,
        }
    }

    /// The offerings of `it` the requirements allow (available or not).
    pub fn compatible<'a>(
        &'a self,
        it: &'a InstanceType,
    ) -> impl Iterator<Item = &'a Offering> + 'a {
        it.offerings_with_shape()
            .filter(
                move |(offering, shape)| match shape.filter(|_| self.simple) {
                    Some(simple) => {
                        self.capacity_type
                            .is_none_or(|r| r.has(&simple.capacity_type))
                            && self.zone.is_none_or(|r| r.has(&simple.zone))
                    }
                    None => offering.is_compatible(self.requirements, self.well_known),
                },
            )
            .map(|(offering, _)| offering)
    }

    /// The rank of the cheapest available compatible offering ([`PriceRank::NONE`] when there
    /// is none).
    #[must_use]
    pub fn cheapest_available_rank(&self, it: &InstanceType) -> PriceRank {
        self.compatible(it)
            .filter(|o| o.available)
            .map(Offering::rank)
            .min()
            .unwrap_or(PriceRank::NONE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{default_fake_instance_types, fake_well_known_labels};

    #[test]
    fn matcher_agrees_with_the_general_check() {
        let wk = fake_well_known_labels();
        let cases = [
            Requirements::new(),
            Requirements::from_labels([(CAPACITY_TYPE, "spot")]),
            Requirements::from_labels([
                (TOPOLOGY_ZONE, "test-zone-2"),
                (CAPACITY_TYPE, "on-demand"),
            ]),
            Requirements::from_labels([(TOPOLOGY_ZONE, "nowhere")]),
        ];
        for it in default_fake_instance_types().unwrap() {
            for reqs in &cases {
                let matcher = OfferingMatcher::new(reqs, &wk);
                let fast: Vec<*const Offering> =
                    matcher.compatible(&it).map(|o| o as *const _).collect();
                let slow: Vec<*const Offering> = it
                    .offerings()
                    .iter()
                    .filter(|o| o.is_compatible(reqs, &wk))
                    .map(|o| o as *const _)
                    .collect();
                assert_eq!(fast, slow, "{} with {reqs}", it.name());
            }
        }
    }
}
