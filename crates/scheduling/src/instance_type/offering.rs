//! Offerings: where and how an instance type can be launched, and at what price (spec §2.3).
//!
//! Responsibility: the [`Offering`] value (requirements naming at least a capacity type and a
//! zone, a price, availability, reserved capacity), the [`Offerings`] list of one instance type,
//! and the price helpers Karpenter derives from offerings: availability and compatibility
//! filters, cheapest / most expensive, and the worst-case launch price.
//! Inputs: offerings as plain data, NodeClaim requirements and the [`WellKnownLabels`] that may
//! stay undefined. Outputs: borrowed offerings, prices (`f64`, `+∞` meaning "none" or "not
//! known") and [`PriceRank`]s.
//!
//! An offering may be *unpriced* (`priced: false`, price 0): its provider does not know what it
//! costs. It is not cheaper than anything: it ranks after every priced offering
//! ([`PriceRank`]), so cheapest-first picks it only when nothing priced will do, and a worst
//! launch price that would rest on it is `+∞`, so it never makes a replacement look cheaper.
//!
//! Compatibility of an offering is always `requirements.is_compatible(offering, well_known)`:
//! every key the offering defines must be defined by the requirements with a common value, or be
//! well known (zone, capacity type, a provider's reservation id). Ties between equal prices go to
//! the first offering in list order. The filters return iterators and never allocate.

use std::ops::Deref;
use std::sync::LazyLock;

use crate::labels::{
    CAPACITY_TYPE, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT,
    TOPOLOGY_ZONE, WellKnownLabels,
};
use crate::requirements::{Requirement, Requirements};

/// One way to launch an instance type: a capacity type in a zone, at a price.
///
/// Plain data; an [`super::InstanceType`] validates its offerings when it is built (both keys
/// defined, price finite and non-negative).
#[derive(Debug, Clone, PartialEq)]
pub struct Offering {
    /// Must define [`CAPACITY_TYPE`] and [`TOPOLOGY_ZONE`]; reserved offerings also define the
    /// provider's reservation-id label.
    pub requirements: Requirements,
    /// Price per hour (0 when not [`Self::priced`]).
    pub price: f64,
    /// Whether the price is known. Unpriced offerings rank after every priced one
    /// ([`PriceRank`]).
    pub priced: bool,
    /// Whether the offering can currently be launched.
    pub available: bool,
    /// How many instances the reservation can still hold (reserved offerings only).
    pub reservation_capacity: u32,
}

impl Offering {
    /// An available offering of `capacity_type` in `zone` at `price`.
    #[must_use]
    pub fn new(capacity_type: &str, zone: &str, price: f64) -> Self {
        Self {
            requirements: Requirements::from_labels([
                (CAPACITY_TYPE, capacity_type),
                (TOPOLOGY_ZONE, zone),
            ]),
            price,
            priced: true,
            available: true,
            reservation_capacity: 0,
        }
    }

    /// An available offering of `capacity_type` in `zone` whose price is not known.
    #[must_use]
    pub fn unpriced(capacity_type: &str, zone: &str) -> Self {
        Self {
            priced: false,
            ..Self::new(capacity_type, zone, 0.0)
        }
    }

    /// Where it stands in cheapest-first order.
    #[must_use]
    pub fn rank(&self) -> PriceRank {
        if self.priced {
            PriceRank::priced(self.price)
        } else {
            PriceRank::UNPRICED
        }
    }

    /// Its price when known.
    #[must_use]
    pub fn known_price(&self) -> Option<f64> {
        self.priced.then_some(self.price)
    }

    /// An available reserved offering in `zone`: capacity type `reserved`, the reservation id
    /// under the provider's `reservation_label`, and the remaining `capacity`.
    #[must_use]
    pub fn reserved(
        reservation_label: &str,
        reservation_id: &str,
        zone: &str,
        price: f64,
        capacity: u32,
    ) -> Self {
        let mut offering = Self::new(CAPACITY_TYPE_RESERVED, zone, price);
        offering
            .requirements
            .add(Requirement::in_values(reservation_label, [reservation_id]));
        offering.reservation_capacity = capacity;
        offering
    }

    /// The same offering with `available` set.
    #[must_use]
    pub fn with_available(mut self, available: bool) -> Self {
        self.available = available;
        self
    }

    /// The capacity type: the first value of its `In` requirement.
    #[must_use]
    pub fn capacity_type(&self) -> Option<&str> {
        first_value(&self.requirements, CAPACITY_TYPE)
    }

    /// The zone: the first value of its `In` requirement.
    #[must_use]
    pub fn zone(&self) -> Option<&str> {
        first_value(&self.requirements, TOPOLOGY_ZONE)
    }

    /// The reservation id under the provider's `reservation_label`, if any.
    #[must_use]
    pub fn reservation_id(&self, reservation_label: &str) -> Option<&str> {
        first_value(&self.requirements, reservation_label)
    }

    /// Whether `requirements` allow this offering (undefined well-known labels allowed).
    #[must_use]
    pub fn is_compatible(&self, requirements: &Requirements, well_known: &WellKnownLabels) -> bool {
        requirements.is_compatible(&self.requirements, well_known)
    }
}

/// The cheapest-first order of offerings: priced ones by price, then unpriced ones, then
/// "no offering at all" ([`PriceRank::NONE`]). A total order (prices by `f64::total_cmp`).
#[derive(Debug, Clone, Copy)]
pub struct PriceRank {
    /// 0 priced, 1 unpriced, 2 none.
    class: u8,
    price: f64,
}

impl PriceRank {
    /// The rank of an unpriced offering.
    pub const UNPRICED: Self = Self {
        class: 1,
        price: 0.0,
    };
    /// The rank of no offering: after everything.
    pub const NONE: Self = Self {
        class: 2,
        price: f64::INFINITY,
    };

    /// The rank of an offering priced `price`.
    #[must_use]
    pub const fn priced(price: f64) -> Self {
        Self { class: 0, price }
    }

    /// The price when it is a priced offering's, else `+∞` (not known, or none).
    #[must_use]
    pub fn price_or_infinity(self) -> f64 {
        if self.class == 0 {
            self.price
        } else {
            f64::INFINITY
        }
    }

    /// Whether there is no offering behind it.
    #[must_use]
    pub fn is_none(self) -> bool {
        self.class == 2
    }
}

impl PartialEq for PriceRank {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for PriceRank {}

impl PartialOrd for PriceRank {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PriceRank {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.class
            .cmp(&other.class)
            .then_with(|| self.price.total_cmp(&other.price))
    }
}

/// The smallest value of a concrete (`In`) requirement on `key`.
fn first_value<'a>(requirements: &'a Requirements, key: &str) -> Option<&'a str> {
    let requirement = requirements.get(key)?;
    if requirement.is_complement() {
        return None;
    }
    requirement.values().first().map(|value| &**value)
}

/// The capacity types in worst-launch-price precedence, as single-key requirements.
static LAUNCH_PRECEDENCE: LazyLock<[Requirements; 3]> = LazyLock::new(|| {
    [
        CAPACITY_TYPE_RESERVED,
        CAPACITY_TYPE_SPOT,
        CAPACITY_TYPE_ON_DEMAND,
    ]
    .map(|capacity_type| Requirements::from_labels([(CAPACITY_TYPE, capacity_type)]))
});

/// Price helpers over any sequence of offerings, e.g. `offerings.available().cheapest()`.
pub trait OfferingIterExt<'a>: Iterator<Item = &'a Offering> + Sized {
    /// The available offerings.
    fn available(self) -> impl Iterator<Item = &'a Offering> {
        self.filter(|offering| offering.available)
    }

    /// The offerings `requirements` allow (undefined well-known labels allowed).
    fn compatible_with(
        self,
        requirements: &'a Requirements,
        well_known: &'a WellKnownLabels,
    ) -> impl Iterator<Item = &'a Offering> {
        self.filter(move |offering| offering.is_compatible(requirements, well_known))
    }

    /// The cheapest offering by [`PriceRank`] (the first of equal ranks; unpriced ones only
    /// when none is priced).
    fn cheapest(self) -> Option<&'a Offering> {
        self.reduce(|best, offering| {
            if offering.rank() < best.rank() {
                offering
            } else {
                best
            }
        })
    }

    /// The most expensive offering by [`PriceRank`] (the first of equal ranks; an unpriced
    /// one when there is any).
    fn most_expensive(self) -> Option<&'a Offering> {
        self.reduce(|best, offering| {
            if offering.rank() > best.rank() {
                offering
            } else {
                best
            }
        })
    }

    /// The worst-case launch price among the offerings `requirements` allow: for the first
    /// capacity type in the order reserved, spot, on-demand that has any such offering, the
    /// highest price of those offerings; `+∞` when there is none or one of them is unpriced.
    /// Callers usually pass only available offerings.
    fn worst_launch_price(self, requirements: &Requirements, well_known: &WellKnownLabels) -> f64
    where
        Self: Clone,
    {
        LAUNCH_PRECEDENCE
            .iter()
            .find_map(|capacity_type| {
                self.clone()
                    .filter(|o| o.is_compatible(requirements, well_known))
                    .filter(|o| o.is_compatible(capacity_type, well_known))
                    .most_expensive()
            })
            .map_or(f64::INFINITY, |offering| {
                offering.rank().price_or_infinity()
            })
    }
}

impl<'a, I: Iterator<Item = &'a Offering>> OfferingIterExt<'a> for I {}

/// The offerings of one instance type, in provider order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Offerings(Vec<Offering>);

impl Offerings {
    /// The offerings in `offerings`' order.
    #[must_use]
    pub fn new(offerings: Vec<Offering>) -> Self {
        Self(offerings)
    }

    /// The available offerings.
    pub fn available(&self) -> impl Iterator<Item = &Offering> + Clone {
        self.0.iter().filter(|offering| offering.available)
    }

    /// The offerings (available or not) that `requirements` allow.
    pub fn compatible<'a>(
        &'a self,
        requirements: &'a Requirements,
        well_known: &'a WellKnownLabels,
    ) -> impl Iterator<Item = &'a Offering> + Clone {
        self.0
            .iter()
            .filter(move |offering| offering.is_compatible(requirements, well_known))
    }

    /// Whether some available offering is compatible with `requirements`.
    #[must_use]
    pub fn has_compatible_available(
        &self,
        requirements: &Requirements,
        well_known: &WellKnownLabels,
    ) -> bool {
        self.0
            .iter()
            .any(|o| o.available && o.is_compatible(requirements, well_known))
    }

    /// The cheapest available offering compatible with `requirements` by [`PriceRank`]: the
    /// offering [`super::order_by_price`] ranks an instance type by.
    #[must_use]
    pub fn cheapest_compatible(
        &self,
        requirements: &Requirements,
        well_known: &WellKnownLabels,
    ) -> Option<&Offering> {
        self.available()
            .filter(|o| o.is_compatible(requirements, well_known))
            .cheapest()
    }

    /// The price of [`Self::cheapest_compatible`]; `+∞` when there is none or it is unpriced.
    #[must_use]
    pub fn cheapest_compatible_price(
        &self,
        requirements: &Requirements,
        well_known: &WellKnownLabels,
    ) -> f64 {
        self.cheapest_compatible(requirements, well_known)
            .map_or(f64::INFINITY, |o| o.rank().price_or_infinity())
    }

    /// The cheapest offering by [`PriceRank`] (the first of equal ranks).
    #[must_use]
    pub fn cheapest(&self) -> Option<&Offering> {
        self.0.iter().cheapest()
    }

    /// The most expensive offering by [`PriceRank`] (the first of equal ranks).
    #[must_use]
    pub fn most_expensive(&self) -> Option<&Offering> {
        self.0.iter().most_expensive()
    }

    /// [`OfferingIterExt::worst_launch_price`] over all these offerings.
    #[must_use]
    pub fn worst_launch_price(
        &self,
        requirements: &Requirements,
        well_known: &WellKnownLabels,
    ) -> f64 {
        self.0.iter().worst_launch_price(requirements, well_known)
    }

    /// The price of the first offering in `zone` with `capacity_type`, available or not.
    #[must_use]
    pub fn price_of(&self, zone: &str, capacity_type: &str) -> Option<f64> {
        self.0
            .iter()
            .find(|o| o.zone() == Some(zone) && o.capacity_type() == Some(capacity_type))
            .map(|o| o.price)
    }

    /// The offerings as a vector.
    #[must_use]
    pub fn into_vec(self) -> Vec<Offering> {
        self.0
    }
}

impl Deref for Offerings {
    type Target = [Offering];

    fn deref(&self) -> &[Offering] {
        &self.0
    }
}

impl From<Vec<Offering>> for Offerings {
    fn from(offerings: Vec<Offering>) -> Self {
        Self(offerings)
    }
}

impl FromIterator<Offering> for Offerings {
    fn from_iter<T: IntoIterator<Item = Offering>>(iter: T) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl<'a> IntoIterator for &'a Offerings {
    type Item = &'a Offering;
    type IntoIter = std::slice::Iter<'a, Offering>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::fixtures::{FakeInstanceType, fake_well_known_labels};
    use crate::instance_type::{InstanceType, InstanceTypeError, order_by_price};
    use std::sync::Arc;

    fn it(name: &str, offerings: Vec<Offering>) -> Arc<InstanceType> {
        let mut b = FakeInstanceType::new(name);
        for o in offerings {
            b = b.offering(o);
        }
        Arc::new(b.build().unwrap())
    }

    #[test]
    fn an_unpriced_offering_is_not_cheaper_than_anything() {
        let priced = Offering::new("on-demand", "z1", 5.0);
        let unpriced = Offering::unpriced("on-demand", "z2");
        assert!(priced.rank() < unpriced.rank());
        assert!(unpriced.rank() < PriceRank::NONE);
        assert_eq!(unpriced.known_price(), None);
        let both = [unpriced.clone(), priced.clone()];
        assert_eq!(both.iter().cheapest(), Some(&priced));
        assert_eq!(both.iter().most_expensive(), Some(&unpriced));
        let wk = fake_well_known_labels();
        let all = Requirements::new();
        // The worst launch price of a choice that may land on an unpriced offering is unknown.
        assert_eq!(both.iter().worst_launch_price(&all, &wk), f64::INFINITY);
        assert_eq!([priced.clone()].iter().worst_launch_price(&all, &wk), 5.0);
    }

    #[test]
    fn cheapest_first_puts_unpriced_types_after_priced_ones_and_before_unavailable_ones() {
        let wk = fake_well_known_labels();
        let mut its = vec![
            it("a-unpriced", vec![Offering::unpriced("on-demand", "z1")]),
            it(
                "b-gone",
                vec![Offering::new("on-demand", "z1", 0.1).with_available(false)],
            ),
            it("c-dear", vec![Offering::new("on-demand", "z1", 9.0)]),
            it("d-cheap", vec![Offering::new("on-demand", "z1", 1.0)]),
        ];
        order_by_price(&mut its, &Requirements::new(), &wk);
        let names: Vec<&str> = its.iter().map(|i| i.name()).collect();
        assert_eq!(names, ["d-cheap", "c-dear", "a-unpriced", "b-gone"]);
        assert_eq!(
            its[2]
                .offerings()
                .cheapest_compatible_price(&Requirements::new(), &wk),
            f64::INFINITY
        );
    }

    #[test]
    fn an_unpriced_offering_must_carry_price_zero() {
        let mut o = Offering::unpriced("on-demand", "z1");
        o.price = 0.5;
        let err = FakeInstanceType::new("x").offering(o).build().unwrap_err();
        assert!(
            matches!(err, InstanceTypeError::InvalidPrice { .. }),
            "{err}"
        );
    }
}
