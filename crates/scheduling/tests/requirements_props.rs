//! Property tests of the requirement algebra: intersection is commutative, associative and
//! idempotent; membership of an intersection is membership of both; the allocation-free test
//! agrees with the real intersection; serialisation round-trips; the requirement-set tests are
//! symmetric and independent of insertion order.

use proptest::prelude::*;
use scheduling::labels::WellKnownLabels;
use scheduling::requirements::{Operator, Requirement, Requirements};

/// A small universe so that random requirements overlap often; includes a non-canonical integer.
const UNIVERSE: [&str; 10] = ["a", "b", "0", "1", "2", "5", "9", "10", "05", "-1"];

fn base(key: &'static str) -> impl Strategy<Value = Requirement> {
    let values = prop::collection::vec(prop::sample::select(&UNIVERSE[..]), 0..4);
    let op = prop::sample::select(&Operator::ALL[..]);
    (op, values, -2i64..12, prop::option::of(1usize..4)).prop_map(move |(op, values, n, min)| {
        let r = match op {
            Operator::In => Requirement::in_values(key, values),
            Operator::NotIn => Requirement::not_in(key, values),
            Operator::Exists => Requirement::exists(key),
            Operator::DoesNotExist => Requirement::does_not_exist(key),
            Operator::Gt => Requirement::gt(key, n),
            Operator::Lt => Requirement::lt(key, n),
            Operator::Gte => Requirement::gte(key, n),
            Operator::Lte => Requirement::lte(key, n),
        };
        r.with_min_values(min)
    })
}

/// A requirement reachable by the algebra: the intersection of one to three base requirements.
fn requirement(key: &'static str) -> impl Strategy<Value = Requirement> {
    (base(key), prop::collection::vec(base(key), 0..3))
        .prop_map(|(first, rest)| rest.iter().fold(first, |acc, r| acc.intersection(r)))
}

fn requirements() -> impl Strategy<Value = Requirements> {
    prop::collection::vec(
        prop_oneof![requirement("x"), requirement("y"), requirement("z")],
        0..4,
    )
    .prop_map(Requirements::from_iter)
}

fn probes() -> impl Iterator<Item = String> {
    UNIVERSE
        .iter()
        .map(ToString::to_string)
        .chain((-3..14).map(|n| n.to_string()))
        .chain(["", "+5", "zz"].map(String::from))
}

proptest! {
    #[test]
    fn intersection_is_commutative(a in requirement("k"), b in requirement("k")) {
        prop_assert_eq!(a.intersection(&b), b.intersection(&a));
    }

    #[test]
    fn intersection_is_associative(a in requirement("k"), b in requirement("k"), c in requirement("k")) {
        prop_assert_eq!(a.intersection(&b).intersection(&c), a.intersection(&b.intersection(&c)));
    }

    #[test]
    fn intersection_is_idempotent(a in requirement("k"), b in requirement("k")) {
        prop_assert_eq!(a.intersection(&a), a.clone());
        let ab = a.intersection(&b);
        prop_assert_eq!(ab.intersection(&b), ab);
    }

    #[test]
    fn membership_of_intersection_is_membership_of_both(a in requirement("k"), b in requirement("k")) {
        let ab = a.intersection(&b);
        for v in probes() {
            prop_assert_eq!(ab.has(&v), a.has(&v) && b.has(&v), "value {:?}: {} ∩ {} = {}", v, a, b, ab);
        }
    }

    #[test]
    fn has_intersection_agrees_with_intersection(a in requirement("k"), b in requirement("k")) {
        prop_assert_eq!(a.has_intersection(&b), !a.intersection(&b).is_empty());
        prop_assert_eq!(a.has_intersection(&b), b.has_intersection(&a));
    }

    #[test]
    fn any_value_is_allowed(a in requirement("k")) {
        if let Some(v) = a.any() {
            prop_assert!(a.has(&v), "{} picked {:?}", a, v);
        } else {
            prop_assert!(a.operator() != Operator::In);
        }
    }

    #[test]
    fn serialisation_round_trips(a in requirement("k")) {
        let entries = a.to_selector_requirements();
        let parsed = Requirements::from_selector(&entries).unwrap();
        let back = parsed.get("k").unwrap();
        prop_assert_eq!(back, &a);
        for v in probes() {
            prop_assert_eq!(back.has(&v), a.has(&v));
        }
    }

    #[test]
    fn intersects_is_symmetric(a in requirements(), b in requirements()) {
        prop_assert_eq!(a.intersects(&b).is_ok(), b.intersects(&a).is_ok());
        prop_assert_eq!(a.intersects(&b).is_ok(), a.is_intersecting(&b));
    }

    #[test]
    fn strict_compatibility_implies_loose(a in requirements(), b in requirements()) {
        let wk = WellKnownLabels::default();
        if a.compatible_strict(&b).is_ok() {
            prop_assert!(a.compatible(&b, &wk).is_ok());
        }
        prop_assert_eq!(a.compatible_strict(&b).is_ok(), a.is_compatible_strict(&b));
        prop_assert_eq!(a.compatible(&b, &wk).is_ok(), a.is_compatible(&b, &wk));
    }

    #[test]
    fn adding_requirements_is_order_independent(parts in prop::collection::vec(requirement("k"), 0..5)) {
        let forward = Requirements::from_iter(parts.clone());
        let backward = Requirements::from_iter(parts.into_iter().rev());
        prop_assert_eq!(forward, backward);
    }
}
