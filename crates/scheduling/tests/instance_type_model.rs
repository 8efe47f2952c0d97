//! The instance-type model: allocatable (overhead, huge pages), construction validation, and the
//! offering price helpers (cheapest, most expensive, worst launch price precedence).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;

use scheduling::instance_type::{
    InstanceType, InstanceTypeError, InstanceTypeSpec, Offering, OfferingIterExt, Offerings,
    Overhead,
};
use scheduling::labels::{CAPACITY_TYPE, INSTANCE_TYPE, TOPOLOGY_ZONE, WellKnownLabels};
use scheduling::quantity::Quantity;
use scheduling::requirements::{Requirement, Requirements};
use scheduling::resources::{ResourceName, Resources};

fn list(pairs: &[(&str, &str)]) -> Resources {
    Resources::parse(pairs.iter().copied()).unwrap()
}

fn spec(name: &str, capacity: Resources, overhead: Overhead) -> InstanceTypeSpec {
    InstanceTypeSpec {
        name: Arc::from(name),
        requirements: Requirements::from_labels([(INSTANCE_TYPE, name)]),
        offerings: vec![Offering::new("on-demand", "z1", 1.0)],
        capacity,
        overhead,
    }
}

#[test]
fn allocatable_subtracts_overhead_for_capacity_keys_and_hugepages_from_memory() {
    let overhead = Overhead {
        kube_reserved: list(&[("cpu", "100m"), ("memory", "100Mi")]),
        system_reserved: list(&[("cpu", "100m"), ("memory", "100Mi")]),
        eviction_threshold: list(&[("memory", "100Mi"), ("ephemeral-storage", "1Gi")]),
    };
    assert_eq!(
        overhead.total(),
        list(&[
            ("cpu", "200m"),
            ("memory", "300Mi"),
            ("ephemeral-storage", "1Gi")
        ])
    );
    let capacity = list(&[
        ("cpu", "4"),
        ("memory", "8Gi"),
        ("pods", "110"),
        ("hugepages-2Mi", "1Gi"),
        ("nvidia.com/gpu", "1"),
    ]);
    let it = InstanceType::new(spec("m", capacity.clone(), overhead.clone())).unwrap();
    assert_eq!(
        it.allocatable(),
        &list(&[
            ("cpu", "3800m"),
            ("memory", "6868Mi"),
            ("pods", "110"),
            ("hugepages-2Mi", "1Gi"),
            ("nvidia.com/gpu", "1"),
        ])
    );
    assert_eq!(it.capacity(), &capacity);
    assert_eq!(it.overhead(), &overhead);
}

#[test]
fn hugepages_larger_than_memory_clamp_allocatable_memory_at_zero() {
    let capacity = list(&[
        ("memory", "1Gi"),
        ("hugepages-1Gi", "1Gi"),
        ("hugepages-2Mi", "2Mi"),
    ]);
    let it = InstanceType::new(spec("h", capacity, Overhead::default())).unwrap();
    assert_eq!(
        it.allocatable().get(&ResourceName::MEMORY),
        Some(Quantity::ZERO)
    );
}

#[test]
fn hugepages_without_memory_add_a_zero_memory_allocatable() {
    let capacity = list(&[("cpu", "1"), ("hugepages-2Mi", "2Mi")]);
    let it = InstanceType::new(spec("h", capacity, Overhead::default())).unwrap();
    assert_eq!(
        it.allocatable().get(&ResourceName::MEMORY),
        Some(Quantity::ZERO)
    );
}

#[test]
fn overhead_larger_than_capacity_leaves_negative_allocatable_that_fits_nothing() {
    let overhead = Overhead {
        kube_reserved: list(&[("cpu", "2")]),
        ..Overhead::default()
    };
    let it = InstanceType::new(spec(
        "n",
        list(&[("cpu", "1"), ("memory", "1Gi")]),
        overhead,
    ))
    .unwrap();
    assert_eq!(
        it.allocatable().get(&ResourceName::CPU),
        Some(-Quantity::from_value(1))
    );
    assert!(!it.fits(&list(&[("memory", "1Mi")])));
    assert!(!it.fits(&Resources::new()));
}

#[test]
fn fits_uses_the_cached_allocatable() {
    let it = InstanceType::new(spec(
        "f",
        list(&[("cpu", "2"), ("memory", "2Gi")]),
        Overhead {
            kube_reserved: list(&[("cpu", "100m")]),
            ..Overhead::default()
        },
    ))
    .unwrap();
    assert!(it.fits(&list(&[("cpu", "1900m"), ("memory", "2Gi")])));
    assert!(!it.fits(&list(&[("cpu", "1901m")])));
    assert!(!it.fits(&list(&[("nvidia.com/gpu", "1")])));
    assert!(it.fits(&list(&[("nvidia.com/gpu", "0")])));
}

#[test]
fn construction_rejects_a_name_that_differs_from_the_instance_type_requirement() {
    for requirement in [
        Requirement::in_values(INSTANCE_TYPE, ["other"]),
        Requirement::in_values(INSTANCE_TYPE, ["m", "other"]),
        Requirement::exists(INSTANCE_TYPE),
    ] {
        let mut spec = spec("m", list(&[("cpu", "1")]), Overhead::default());
        spec.requirements = [requirement].into_iter().collect();
        let error = InstanceType::new(spec).unwrap_err();
        assert!(
            matches!(error, InstanceTypeError::NameMismatch { .. }),
            "{error}"
        );
    }
    let mut without = spec("m", list(&[("cpu", "1")]), Overhead::default());
    without.requirements = Requirements::new();
    assert!(InstanceType::new(without).is_ok());
}

#[test]
fn construction_rejects_empty_names_offerings_without_zone_or_capacity_type_and_bad_prices() {
    let base = || spec("m", list(&[("cpu", "1")]), Overhead::default());
    let mut empty = base();
    empty.name = Arc::from("");
    empty.requirements = Requirements::new();
    assert_eq!(
        InstanceType::new(empty).unwrap_err(),
        InstanceTypeError::EmptyName
    );

    for (key, offering_requirements) in [
        (
            TOPOLOGY_ZONE,
            Requirements::from_labels([(CAPACITY_TYPE, "spot")]),
        ),
        (
            CAPACITY_TYPE,
            Requirements::from_labels([(TOPOLOGY_ZONE, "z1")]),
        ),
    ] {
        let mut missing = base();
        missing.offerings.push(Offering {
            requirements: offering_requirements,
            price: 1.0,
            priced: true,
            available: true,
            reservation_capacity: 0,
        });
        let error = InstanceType::new(missing).unwrap_err();
        assert!(
            matches!(error, InstanceTypeError::OfferingMissingKey { offering: 1, key: k, .. } if k == key),
            "{error}"
        );
    }
    for price in [f64::NAN, -0.5, f64::INFINITY] {
        let mut bad = base();
        bad.offerings[0].price = price;
        let error = InstanceType::new(bad).unwrap_err();
        assert!(
            matches!(error, InstanceTypeError::InvalidPrice { offering: 0, .. }),
            "{error}"
        );
    }
}

#[test]
fn construction_rejects_negative_capacity_and_overhead() {
    let negative = spec("m", list(&[("cpu", "-1")]), Overhead::default());
    let error = InstanceType::new(negative).unwrap_err();
    assert!(matches!(
        error,
        InstanceTypeError::NegativeQuantity {
            field: "capacity",
            ..
        }
    ));
    let overhead = Overhead {
        system_reserved: list(&[("memory", "-1Mi")]),
        ..Overhead::default()
    };
    let error = InstanceType::new(spec("m", list(&[("cpu", "1")]), overhead)).unwrap_err();
    assert!(matches!(
        error,
        InstanceTypeError::NegativeQuantity {
            field: "system-reserved",
            ..
        }
    ));
}

#[test]
fn to_spec_round_trips() {
    let original = spec("m", list(&[("cpu", "1")]), Overhead::default());
    let it = InstanceType::new(original.clone()).unwrap();
    assert_eq!(it.to_spec(), original);
    assert_eq!(it.name(), "m");
    assert_eq!(&**it.name_arc(), "m");
}

#[test]
fn offering_accessors_read_capacity_type_zone_and_reservation() {
    let offering = Offering::reserved("example.com/reservation-id", "r-1", "z2", 0.5, 3);
    assert_eq!(offering.capacity_type(), Some("reserved"));
    assert_eq!(offering.zone(), Some("z2"));
    assert_eq!(
        offering.reservation_id("example.com/reservation-id"),
        Some("r-1")
    );
    assert_eq!(offering.reservation_capacity, 3);
    assert_eq!(Offering::new("spot", "z1", 1.0).reservation_id("x"), None);
}

fn offerings() -> Offerings {
    Offerings::new(vec![
        Offering::new("on-demand", "z1", 1.0),
        Offering::new("on-demand", "z2", 3.0),
        Offering::new("spot", "z1", 0.5),
        Offering::new("spot", "z2", 0.7),
        Offering::new("spot", "z3", 0.1).with_available(false),
        Offering::reserved("example.com/reservation-id", "r-1", "z1", 0.2, 1),
        Offering::reserved("example.com/reservation-id", "r-2", "z2", 0.3, 1),
    ])
}

fn well_known() -> WellKnownLabels {
    WellKnownLabels::default().with_key("example.com/reservation-id")
}

#[test]
fn cheapest_and_most_expensive_pick_the_first_of_equal_prices() {
    let tied = Offerings::new(vec![
        Offering::new("spot", "z1", 2.0),
        Offering::new("spot", "z2", 1.0),
        Offering::new("spot", "z3", 1.0),
        Offering::new("on-demand", "z1", 2.0),
    ]);
    assert_eq!(tied.cheapest().unwrap().zone(), Some("z2"));
    assert_eq!(tied.most_expensive().unwrap().zone(), Some("z1"));
    assert_eq!(tied.most_expensive().unwrap().capacity_type(), Some("spot"));
    assert!(Offerings::default().cheapest().is_none());
}

#[test]
fn available_and_compatible_filter_offerings() {
    let all = offerings();
    let reqs = Requirements::from_labels([(TOPOLOGY_ZONE, "z3")]);
    assert_eq!(all.available().count(), 6);
    assert_eq!(all.compatible(&reqs, &well_known()).count(), 1);
    assert_eq!(
        all.available()
            .compatible_with(&reqs, &well_known())
            .count(),
        0
    );
    assert_eq!(all.available().cheapest().unwrap().price, 0.2);
    assert_eq!(all.cheapest().unwrap().price, 0.1);
    assert_eq!(
        all.cheapest_compatible_price(&reqs, &well_known()),
        f64::INFINITY
    );
    let spot = Requirements::from_labels([(CAPACITY_TYPE, "spot")]);
    assert_eq!(all.cheapest_compatible_price(&spot, &well_known()), 0.5);
    assert!(all.has_compatible_available(&spot, &well_known()));
}

#[test]
fn offerings_with_a_key_that_is_neither_required_nor_well_known_are_incompatible() {
    let all = offerings();
    let reserved = Requirements::from_labels([(CAPACITY_TYPE, "reserved")]);
    // Without the reservation label registered as well known, reserved offerings are unusable.
    assert_eq!(
        all.compatible(&reserved, &WellKnownLabels::default())
            .count(),
        0
    );
    assert_eq!(all.compatible(&reserved, &well_known()).count(), 2);
}

#[test]
fn worst_launch_price_follows_reserved_then_spot_then_on_demand() {
    let all = offerings();
    let wk = well_known();
    let available = || all.available();
    assert_eq!(
        available().worst_launch_price(&Requirements::new(), &wk),
        0.3
    );
    let not_reserved = [Requirement::not_in(CAPACITY_TYPE, ["reserved"])]
        .into_iter()
        .collect();
    assert_eq!(available().worst_launch_price(&not_reserved, &wk), 0.7);
    let on_demand = Requirements::from_labels([(CAPACITY_TYPE, "on-demand")]);
    assert_eq!(available().worst_launch_price(&on_demand, &wk), 3.0);
    let zone_one_not_reserved: Requirements = [
        Requirement::in_values(TOPOLOGY_ZONE, ["z1"]),
        Requirement::in_values(CAPACITY_TYPE, ["spot", "on-demand"]),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        available().worst_launch_price(&zone_one_not_reserved, &wk),
        0.5
    );
    let zone_three = Requirements::from_labels([(TOPOLOGY_ZONE, "z3")]);
    assert_eq!(
        available().worst_launch_price(&zone_three, &wk),
        f64::INFINITY
    );
    // Unavailable offerings count when the caller passes them.
    assert_eq!(all.worst_launch_price(&zone_three, &wk), 0.1);
}

#[test]
fn price_of_finds_the_first_offering_by_zone_and_capacity_type_even_if_unavailable() {
    let all = offerings();
    assert_eq!(all.price_of("z3", "spot"), Some(0.1));
    assert_eq!(all.price_of("z2", "on-demand"), Some(3.0));
    assert_eq!(all.price_of("z3", "on-demand"), None);
}
