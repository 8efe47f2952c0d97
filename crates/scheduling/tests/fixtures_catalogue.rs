//! The fake provider's catalogues: the benchmark's `fake_instance_types(400)` (spec §8.1) and
//! the default catalogue (spec §2.5).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use scheduling::fixtures::{
    FakeInstanceType, LABEL_EXOTIC, LABEL_INSTANCE_SIZE, LABEL_INTEGER,
    default_fake_instance_types, fake_instance_types, fake_well_known_labels, price_from_resources,
};
use scheduling::instance_type::{InstanceType, Offering};
use scheduling::labels::{ARCH, CAPACITY_TYPE, INSTANCE_TYPE, OS, TOPOLOGY_ZONE, WellKnownLabels};
use scheduling::quantity::Quantity;
use scheduling::requirements::Operator;
use scheduling::resources::{ResourceName, Resources};

fn list(pairs: &[(&str, &str)]) -> Resources {
    Resources::parse(pairs.iter().copied()).unwrap()
}

fn values<'a>(it: &'a InstanceType, key: &str) -> (Operator, Vec<&'a str>) {
    let requirement = it.requirements().get(key).unwrap();
    (
        requirement.operator(),
        requirement.values().iter().map(|v| &**v).collect(),
    )
}

#[test]
fn benchmark_catalogue_has_400_types_named_and_sized_by_index() {
    let its = fake_instance_types(400).unwrap();
    assert_eq!(its.len(), 400);
    for (i, it) in its.iter().enumerate() {
        let size = i64::try_from(i).unwrap() + 1;
        assert_eq!(it.name(), format!("fake-it-{i}"));
        assert_eq!(
            it.capacity(),
            &[
                (ResourceName::CPU, Quantity::from_value(size)),
                (ResourceName::MEMORY, Quantity::from_bytes((size * 2) << 30)),
                (ResourceName::PODS, Quantity::from_value(size * 10)),
            ]
            .into_iter()
            .collect::<Resources>()
        );
        let price = (i as f64 + 1.0) * 0.314_748_364_8;
        assert_eq!(it.offerings().len(), 5);
        for offering in it.offerings().iter() {
            assert!(offering.available);
            assert!(
                (offering.price - price).abs() < 1e-9,
                "{} {}",
                it.name(),
                offering.price
            );
        }
        assert_eq!(
            values(it, LABEL_INTEGER),
            (Operator::In, vec![size.to_string().as_str()])
        );
    }
}

#[test]
fn largest_benchmark_type_costs_about_125_90_and_keeps_399_9_cpus() {
    let its = fake_instance_types(400).unwrap();
    let last = &its[399];
    assert_eq!(last.name(), "fake-it-399");
    assert!((last.offerings()[0].price - 125.899_345_92).abs() < 1e-9);
    assert_eq!(
        last.allocatable(),
        &list(&[("cpu", "399900m"), ("memory", "819190Mi"), ("pods", "4000")])
    );
    let first = &its[0];
    assert!((first.offerings()[0].price - 0.314_748_364_8).abs() < 1e-12);
    assert_eq!(
        first.allocatable(),
        &list(&[("cpu", "900m"), ("memory", "2038Mi"), ("pods", "10")])
    );
}

#[test]
fn benchmark_types_carry_the_fake_requirements() {
    let its = fake_instance_types(6).unwrap();
    for (i, it) in its.iter().enumerate() {
        assert_eq!(values(it, INSTANCE_TYPE).1, [it.name()]);
        assert_eq!(values(it, ARCH).1, ["amd64"]);
        assert_eq!(values(it, OS).1, ["darwin", "linux", "windows"]);
        assert_eq!(
            values(it, TOPOLOGY_ZONE).1,
            ["test-zone-1", "test-zone-2", "test-zone-3"]
        );
        assert_eq!(values(it, CAPACITY_TYPE).1, ["on-demand", "spot"]);
        if i <= 3 {
            assert_eq!(
                values(it, LABEL_INSTANCE_SIZE).1,
                ["small"],
                "{}",
                it.name()
            );
            assert_eq!(values(it, LABEL_EXOTIC), (Operator::DoesNotExist, vec![]));
        } else {
            assert_eq!(
                values(it, LABEL_INSTANCE_SIZE).1,
                ["large"],
                "{}",
                it.name()
            );
            assert_eq!(values(it, LABEL_EXOTIC), (Operator::In, vec!["optional"]));
        }
        let zones: Vec<_> = it
            .offerings()
            .iter()
            .map(|o| (o.capacity_type(), o.zone()))
            .collect();
        assert_eq!(
            zones,
            [
                (Some("spot"), Some("test-zone-1")),
                (Some("spot"), Some("test-zone-2")),
                (Some("on-demand"), Some("test-zone-1")),
                (Some("on-demand"), Some("test-zone-2")),
                (Some("on-demand"), Some("test-zone-3")),
            ]
        );
    }
}

#[test]
fn fake_well_known_labels_add_size_special_and_integer() {
    let wk = fake_well_known_labels();
    for key in [
        LABEL_INSTANCE_SIZE,
        LABEL_EXOTIC,
        LABEL_INTEGER,
        TOPOLOGY_ZONE,
    ] {
        assert!(wk.contains(key), "{key}");
    }
    assert!(!WellKnownLabels::default().contains(LABEL_INSTANCE_SIZE));
}

#[test]
fn default_catalogue_matches_the_fake_provider() {
    let its = default_fake_instance_types().unwrap();
    let names: Vec<&str> = its.iter().map(|it| it.name()).collect();
    assert_eq!(
        names,
        [
            "default-instance-type",
            "small-instance-type",
            "gpu-vendor-instance-type",
            "gpu-vendor-b-instance-type",
            "arm-instance-type",
            "single-pod-instance-type",
        ]
    );
    let price = |i: usize| its[i].offerings()[0].price;
    let base = 0.4 + 0.1 * 4.0 * 1.073_741_824;
    assert!((price(0) - base).abs() < 1e-12);
    assert!((price(1) - (0.2 + 0.1 * 2.0 * 1.073_741_824)).abs() < 1e-12);
    assert!((price(2) - (base + 1.0)).abs() < 1e-12);
    assert!((price(3) - (base + 1.0)).abs() < 1e-12);
    assert_eq!(
        its[2]
            .capacity()
            .get(&ResourceName::new("fake.com/vendor-a")),
        Some(Quantity::from_value(2))
    );
    assert_eq!(values(&its[4], ARCH).1, ["arm64"]);
    assert_eq!(values(&its[4], OS).1, ["darwin", "ios", "linux", "windows"]);
    assert_eq!(values(&its[4], LABEL_INSTANCE_SIZE).1, ["large"]);
    assert_eq!(
        its[5].capacity().get(&ResourceName::PODS),
        Some(Quantity::from_value(1))
    );
    assert_eq!(values(&its[0], LABEL_INSTANCE_SIZE).1, ["small"]);
    assert_eq!(
        its[0].allocatable(),
        &list(&[("cpu", "3900m"), ("memory", "4086Mi"), ("pods", "5")])
    );
}

#[test]
fn fake_requirements_follow_available_offerings_and_extra_requirements() {
    let it = FakeInstanceType::new("custom")
        .offering(Offering::new("spot", "test-zone-2", 1.0))
        .offering(Offering::new("on-demand", "test-zone-3", 2.0).with_available(false))
        .requirement(scheduling::requirements::Requirement::in_values(
            "team",
            ["a"],
        ))
        .build()
        .unwrap();
    assert_eq!(values(&it, TOPOLOGY_ZONE).1, ["test-zone-2"]);
    assert_eq!(values(&it, CAPACITY_TYPE).1, ["spot"]);
    assert_eq!(values(&it, "team").1, ["a"]);
    assert_eq!(values(&it, LABEL_INTEGER).1, ["4"]);
}

#[test]
fn price_from_resources_counts_cpu_memory_and_gpus() {
    assert_eq!(price_from_resources(&Resources::new()), 0.0);
    let price = price_from_resources(&list(&[
        ("cpu", "2"),
        ("memory", "1G"),
        ("fake.com/vendor-b", "1"),
    ]));
    assert!((price - 1.3).abs() < 1e-12);
}
