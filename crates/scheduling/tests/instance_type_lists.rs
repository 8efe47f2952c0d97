//! Candidate-list helpers: price order, compatibility, minValues prefix length and truncation.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;

use scheduling::fixtures::{FakeInstanceType, fake_well_known_labels};
use scheduling::instance_type::{
    InstanceType, MinValuesError, MinValuesPolicy, Offering, UnsatisfiedMinValues, compatible,
    order_by_price, satisfies_min_values, truncate,
};
use scheduling::labels::{INSTANCE_TYPE, TOPOLOGY_ZONE};
use scheduling::requirements::{Requirement, Requirements};

fn priced(name: &str, offerings: Vec<Offering>) -> Arc<InstanceType> {
    let mut it = FakeInstanceType::new(name);
    for offering in offerings {
        it = it.offering(offering);
    }
    Arc::new(it.build().unwrap())
}

fn family(name: &str, family: &str) -> Arc<InstanceType> {
    Arc::new(
        FakeInstanceType::new(name)
            .offering(Offering::new("on-demand", "z1", 1.0))
            .requirement(Requirement::in_values("family", [family]))
            .build()
            .unwrap(),
    )
}

fn names(its: &[Arc<InstanceType>]) -> Vec<&str> {
    its.iter().map(|it| it.name()).collect()
}

#[test]
fn order_by_price_uses_the_cheapest_available_compatible_offering_and_puts_none_last() {
    let wk = fake_well_known_labels();
    let mut its = vec![
        priced("no-compatible", vec![Offering::new("spot", "z2", 0.01)]),
        priced(
            "a",
            vec![
                Offering::new("spot", "z1", 0.1).with_available(false),
                Offering::new("on-demand", "z1", 2.0),
            ],
        ),
        priced(
            "none-available",
            vec![Offering::new("spot", "z1", 0.5).with_available(false)],
        ),
        priced(
            "b",
            vec![
                Offering::new("spot", "z1", 1.0),
                Offering::new("spot", "z2", 0.2),
            ],
        ),
    ];
    let zone_one = Requirements::from_labels([(TOPOLOGY_ZONE, "z1")]);
    order_by_price(&mut its, &zone_one, &wk);
    assert_eq!(names(&its), ["b", "a", "no-compatible", "none-available"]);
    order_by_price(&mut its, &Requirements::new(), &wk);
    assert_eq!(names(&its), ["no-compatible", "b", "a", "none-available"]);
}

#[test]
fn order_by_price_breaks_price_ties_by_name_whatever_the_input_order() {
    let wk = fake_well_known_labels();
    let offer = || vec![Offering::new("spot", "z1", 1.0)];
    let mut forward = vec![
        priced("x", offer()),
        priced("m", offer()),
        priced("c", offer()),
    ];
    let mut backward: Vec<_> = forward.iter().rev().cloned().collect();
    order_by_price(&mut forward, &Requirements::new(), &wk);
    order_by_price(&mut backward, &Requirements::new(), &wk);
    assert_eq!(names(&forward), ["c", "m", "x"]);
    assert_eq!(names(&forward), names(&backward));
}

#[test]
fn order_by_price_keeps_input_order_of_identical_entries() {
    let wk = fake_well_known_labels();
    let first = priced("same", vec![Offering::new("spot", "z1", 1.0)]);
    let second = priced("same", vec![Offering::new("spot", "z1", 1.0)]);
    let mut its = vec![first.clone(), second.clone(), first.clone()];
    order_by_price(&mut its, &Requirements::new(), &wk);
    assert!(Arc::ptr_eq(&its[0], &first));
    assert!(Arc::ptr_eq(&its[1], &second));
    assert!(Arc::ptr_eq(&its[2], &first));
}

#[test]
fn compatible_keeps_instance_types_with_an_available_compatible_offering_in_order() {
    let wk = fake_well_known_labels();
    let its = vec![
        priced("z2-only", vec![Offering::new("spot", "z2", 1.0)]),
        priced("z1", vec![Offering::new("spot", "z1", 1.0)]),
        priced(
            "z1-unavailable",
            vec![Offering::new("spot", "z1", 1.0).with_available(false)],
        ),
        priced(
            "both",
            vec![
                Offering::new("spot", "z2", 1.0),
                Offering::new("spot", "z1", 1.0),
            ],
        ),
    ];
    let zone_one = Requirements::from_labels([(TOPOLOGY_ZONE, "z1")]);
    assert_eq!(names(&compatible(&its, &zone_one, &wk)), ["z1", "both"]);
}

fn min_values_requirements(instance_types: usize, families: usize) -> Requirements {
    [
        Requirement::exists(INSTANCE_TYPE).with_min_values(Some(instance_types)),
        Requirement::exists("family").with_min_values(Some(families)),
    ]
    .into_iter()
    .collect()
}

#[test]
fn satisfies_min_values_returns_the_shortest_satisfying_prefix() {
    let its = vec![
        family("c1", "c"),
        family("c2", "c"),
        family("m1", "m"),
        family("r1", "r"),
    ];
    assert_eq!(
        satisfies_min_values(&its, &min_values_requirements(3, 2)),
        Ok(3)
    );
    assert_eq!(
        satisfies_min_values(&its, &min_values_requirements(1, 1)),
        Ok(1)
    );
    assert_eq!(
        satisfies_min_values(&its, &min_values_requirements(2, 3)),
        Ok(4)
    );
    assert_eq!(satisfies_min_values(&its, &Requirements::new()), Ok(0));
}

#[test]
fn satisfies_min_values_names_every_unsatisfied_key_with_counts() {
    let its = vec![family("c1", "c"), family("c2", "c")];
    let error = satisfies_min_values(&its, &min_values_requirements(3, 2)).unwrap_err();
    assert_eq!(
        error,
        MinValuesError {
            unsatisfied: vec![
                UnsatisfiedMinValues {
                    key: Arc::from("family"),
                    available: 1,
                    required: 2
                },
                UnsatisfiedMinValues {
                    key: Arc::from(INSTANCE_TYPE),
                    available: 2,
                    required: 3
                },
            ],
        }
    );
    assert_eq!(
        error.to_string(),
        "minValues requirement is not met for label(s) family (1 of 2), \
         node.kubernetes.io/instance-type (2 of 3)"
    );
    let only_types = satisfies_min_values(&its, &min_values_requirements(3, 1)).unwrap_err();
    assert_eq!(only_types.unsatisfied.len(), 1);
}

#[test]
fn satisfies_min_values_counts_an_undefined_key_as_no_values_and_an_empty_list_as_short() {
    let its = vec![family("c1", "c")];
    let reqs: Requirements = [Requirement::exists("generation").with_min_values(Some(1))]
        .into_iter()
        .collect();
    let error = satisfies_min_values(&its, &reqs).unwrap_err();
    assert_eq!(error.unsatisfied[0].available, 0);
    let none: Vec<Arc<InstanceType>> = Vec::new();
    assert!(satisfies_min_values(&none, &min_values_requirements(1, 1)).is_err());
    assert_eq!(
        satisfies_min_values(&none, &min_values_requirements(0, 0)),
        Ok(0)
    );
}

fn priced_family(name: &str, family_name: &str, price: f64) -> Arc<InstanceType> {
    Arc::new(
        FakeInstanceType::new(name)
            .offering(Offering::new("on-demand", "z1", price))
            .requirement(Requirement::in_values("family", [family_name]))
            .build()
            .unwrap(),
    )
}

#[test]
fn truncate_keeps_the_cheapest_and_enforces_min_values_only_when_strict() {
    let wk = fake_well_known_labels();
    let its = vec![
        priced_family("d", "m", 4.0),
        priced_family("a", "c", 1.0),
        priced_family("c", "c", 3.0),
        priced_family("b", "c", 2.0),
    ];
    let plain = Requirements::new();
    let kept = truncate(&its, &plain, &wk, 2, MinValuesPolicy::Strict).unwrap();
    assert_eq!(names(&kept), ["a", "b"]);
    let two_families: Requirements = [Requirement::exists("family").with_min_values(Some(2))]
        .into_iter()
        .collect();
    let error = truncate(&its, &two_families, &wk, 3, MinValuesPolicy::Strict).unwrap_err();
    assert_eq!(error.unsatisfied[0].available, 1);
    let kept = truncate(&its, &two_families, &wk, 3, MinValuesPolicy::BestEffort).unwrap();
    assert_eq!(names(&kept), ["a", "b", "c"]);
    let kept = truncate(&its, &two_families, &wk, 4, MinValuesPolicy::Strict).unwrap();
    assert_eq!(names(&kept), ["a", "b", "c", "d"]);
    assert_eq!(
        truncate(&its, &plain, &wk, 10, MinValuesPolicy::Strict)
            .unwrap()
            .len(),
        4
    );
}
