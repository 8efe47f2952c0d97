//! The requirement and offering checks of the instance-type filter, prepared once per call.
//!
//! Responsibility: decide, allocation-free per instance type, whether its requirements intersect
//! a NodeClaim's and whether it has an available offering compatible with them, exactly as
//! [`Requirements::is_intersecting`] and [`super::InstanceType::has_compatible_offering`] do,
//! but only for what is still owed: every key, or the keys that changed since the candidates
//! were last checked.
//! Inputs: NodeClaim requirements (and optionally those the candidates already passed), the
//! well-known labels. Outputs: booleans per instance type.
//!
//! Speed: a NodeClaim key whose bit is clear in an instance type's key mask is certainly
//! undefined there and cannot conflict (one AND instead of a key search); offerings of the usual
//! shape (exactly a capacity type and a zone, one value each, both well known) are compatible
//! iff both values are allowed by the NodeClaim's own requirements on those keys, which are
//! looked up once per call.

use super::InstanceType;
use crate::labels::{CAPACITY_TYPE, TOPOLOGY_ZONE, WellKnownLabels};
use crate::requirements::{Requirement, Requirements};

/// The requirement and offering checks, prepared once per call.
pub(super) struct Checker<'r> {
    /// The requirements candidates still have to intersect, with their key bits.
    owed: Vec<(&'r Requirement, u64)>,
    /// Union of the owed keys' bits.
    owed_mask: u64,
    /// Whether offerings must be checked whatever changed.
    offerings_owed: bool,
    /// Whether simple offerings may be checked by membership (their keys are well known).
    simple: bool,
    capacity_type: Option<&'r Requirement>,
    zone: Option<&'r Requirement>,
    requirements: &'r Requirements,
    well_known: &'r WellKnownLabels,
}

impl<'r> Checker<'r> {
    /// Every check against `requirements`.
    pub(super) fn all(requirements: &'r Requirements, well_known: &'r WellKnownLabels) -> Self {
        let mut checker = Self {
            owed: Vec::with_capacity(requirements.len()),
            owed_mask: 0,
            offerings_owed: true,
            simple: well_known.contains(CAPACITY_TYPE) && well_known.contains(TOPOLOGY_ZONE),
            capacity_type: requirements.get(CAPACITY_TYPE),
            zone: requirements.get(TOPOLOGY_ZONE),
            requirements,
            well_known,
        };
        requirements.iter().for_each(|r| checker.owe(r));
        checker
    }

    /// The checks still owed by candidates that passed against `before`: the requirements of
    /// keys whose requirement differs now (both lists are sorted by key). A key required before
    /// but not now voids the promise: everything is owed.
    pub(super) fn since(
        requirements: &'r Requirements,
        before: Option<&Requirements>,
        well_known: &'r WellKnownLabels,
    ) -> Self {
        let mut checker = Self::all(requirements, well_known);
        let Some(before) = before else {
            return checker;
        };
        let mut changed = Vec::new();
        let mut old = before.iter().peekable();
        for current in requirements {
            let is_before = |p: &&Requirement| p.key().as_bytes() < current.key().as_bytes();
            if old.next_if(is_before).is_some() {
                return checker;
            }
            match old.next_if(|p| p.key() == current.key()) {
                Some(previous) if previous == current => {}
                _ => changed.push(current),
            }
        }
        if old.next().is_some() {
            return checker;
        }
        checker.owed.clear();
        checker.owed_mask = 0;
        checker.offerings_owed = false;
        changed.into_iter().for_each(|r| checker.owe(r));
        checker
    }

    fn owe(&mut self, requirement: &'r Requirement) {
        let bit = super::key_bit(requirement.key());
        self.owed.push((requirement, bit));
        self.owed_mask |= bit;
    }

    /// Whether `it` passes the owed requirement and offering checks.
    pub(super) fn passes(&self, it: &InstanceType) -> bool {
        self.intersects(it)
            && (!(self.offerings_owed || it.offering_key_mask() & self.owed_mask != 0)
                || self.has_offering(it))
    }

    /// [`Requirements::is_intersecting`] over the owed keys; a clear key bit means the instance
    /// type does not define the key, so it cannot conflict.
    pub(super) fn intersects(&self, it: &InstanceType) -> bool {
        self.owed.iter().all(|(requirement, bit)| {
            it.key_mask() & bit == 0
                || it.requirements().get(requirement.key()).is_none_or(|own| {
                    own.has_intersection(requirement)
                        || (own.operator().is_negative() && requirement.operator().is_negative())
                })
        })
    }

    /// Whether an available offering is compatible with the requirements. For a simple
    /// offering (capacity type and zone, one value each, both well known) that is membership of
    /// its two values in the requirements' own, when defined.
    pub(super) fn has_offering(&self, it: &InstanceType) -> bool {
        it.offerings_with_shape().any(|(offering, shape)| {
            offering.available
                && match shape.filter(|_| self.simple) {
                    Some(simple) => {
                        self.capacity_type
                            .is_none_or(|r| r.has(&simple.capacity_type))
                            && self.zone.is_none_or(|r| r.has(&simple.zone))
                    }
                    None => offering.is_compatible(self.requirements, self.well_known),
                }
        })
    }
}
