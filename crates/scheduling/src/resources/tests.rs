//! Unit tests for [`Resources`]: construction, lookups and Karpenter's list operations.

use super::*;
use crate::quantity::Format;

fn list(pairs: &[(&str, &str)]) -> Resources {
    Resources::parse(pairs.iter().copied()).unwrap()
}

fn q(value: &str) -> Quantity {
    value.parse().unwrap()
}

#[test]
fn parse_sorts_by_name_and_iterates_in_name_order() {
    let parsed = list(&[
        ("pods", "110"),
        ("memory", "1Gi"),
        ("nvidia.com/gpu", "1"),
        ("cpu", "4"),
    ]);
    let names: Vec<&str> = parsed.names().map(ResourceName::as_str).collect();
    assert_eq!(names, ["cpu", "memory", "nvidia.com/gpu", "pods"]);
    assert_eq!(parsed.len(), 4);
    assert_eq!(
        parsed.to_string(),
        "{cpu: 4, memory: 1Gi, nvidia.com/gpu: 1, pods: 110}"
    );
    assert_eq!(
        format!("{parsed:?}"),
        r#"{"cpu": 4, "memory": 1Gi, "nvidia.com/gpu": 1, "pods": 110}"#
    );
}

#[test]
fn parse_rejects_bad_quantities_empty_and_repeated_names() {
    let error = Resources::parse([("cpu", "1"), ("memory", "1GB")]).unwrap_err();
    assert!(matches!(&error, ResourcesError::InvalidQuantity { name, .. } if name == "memory"));
    assert!(error.to_string().contains("\"1GB\""), "{error}");
    assert_eq!(
        Resources::parse([("", "1")]),
        Err(ResourcesError::EmptyName)
    );
    assert_eq!(
        Resources::parse([("cpu", "1"), ("cpu", "2")]),
        Err(ResourcesError::DuplicateName { name: "cpu".into() })
    );
}

#[test]
fn get_defaults_to_zero_for_absent_names() {
    let resources = list(&[("cpu", "100m")]);
    assert_eq!(resources.get(&ResourceName::CPU), Some(q("100m")));
    assert_eq!(resources.get(&ResourceName::MEMORY), None);
    assert_eq!(resources.get_or_zero(&ResourceName::MEMORY), Quantity::ZERO);
    assert_eq!(resources.get_or_zero(&ResourceName::CPU), q("0.1"));
}

#[test]
fn insert_replaces_and_remove_deletes() {
    let mut resources = Resources::new();
    assert_eq!(resources.insert(ResourceName::CPU, q("1")), None);
    assert_eq!(resources.insert(ResourceName::CPU, q("2")), Some(q("1")));
    assert_eq!(resources.remove(&ResourceName::CPU), Some(q("2")));
    assert_eq!(resources.remove(&ResourceName::CPU), None);
    assert!(resources.is_empty());
}

#[test]
fn from_iterator_keeps_the_last_repeated_name() {
    let built: Resources = [
        (ResourceName::CPU, q("1")),
        (ResourceName::MEMORY, q("1Gi")),
        (ResourceName::CPU, q("3")),
    ]
    .into_iter()
    .collect();
    assert_eq!(built, list(&[("cpu", "3"), ("memory", "1Gi")]));
}

#[test]
fn is_zero_means_every_quantity_is_zero() {
    assert!(Resources::new().is_zero());
    assert!(list(&[("cpu", "0"), ("memory", "0Gi")]).is_zero());
    assert!(!list(&[("cpu", "0"), ("memory", "1n")]).is_zero());
}

#[test]
fn merged_sums_over_the_union_of_names() {
    let left = list(&[("cpu", "1"), ("memory", "1Gi")]);
    let right = list(&[("cpu", "500m"), ("pods", "1")]);
    let expected = list(&[("cpu", "1500m"), ("memory", "1Gi"), ("pods", "1")]);
    assert_eq!(left.merged(&right), expected);
    assert_eq!(right.merged(&left), expected);
    let mut into = left.clone();
    into.merge(&right);
    assert_eq!(into, expected);
    assert_eq!(merge([&left, &right, &Resources::new()]), expected);
    assert_eq!(merge([]), Resources::new());
}

#[test]
fn merge_keeps_the_first_non_zero_format() {
    let merged = list(&[("memory", "0")]).merged(&list(&[("memory", "1Gi")]));
    assert_eq!(merged.to_string(), "{memory: 1Gi}");
    let merged = list(&[("memory", "1Gi")]).merged(&list(&[("memory", "1Gi")]));
    assert_eq!(merged.to_string(), "{memory: 2Gi}");
}

#[test]
fn difference_keeps_only_left_names() {
    let allocatable = list(&[("cpu", "4"), ("memory", "8Gi")]);
    let overhead = list(&[("cpu", "500m"), ("nvidia.com/gpu", "1")]);
    assert_eq!(
        allocatable.difference(&overhead),
        list(&[("cpu", "3500m"), ("memory", "8Gi")])
    );
}

#[test]
fn subtract_applies_every_right_name_and_can_go_negative() {
    let mut remaining = list(&[("cpu", "4"), ("memory", "8Gi")]);
    remaining.subtract(&list(&[("cpu", "5"), ("nvidia.com/gpu", "1")]));
    assert_eq!(
        remaining,
        list(&[("cpu", "-1"), ("memory", "8Gi"), ("nvidia.com/gpu", "-1")])
    );
}

#[test]
fn max_with_takes_the_union_and_min_with_the_intersection() {
    let a = list(&[("cpu", "1"), ("memory", "2Gi")]);
    let b = list(&[("cpu", "2"), ("nvidia.com/gpu", "1"), ("memory", "1Gi")]);
    assert_eq!(
        a.max_with(&b),
        list(&[("cpu", "2"), ("memory", "2Gi"), ("nvidia.com/gpu", "1")])
    );
    assert_eq!(a.min_with(&b), list(&[("cpu", "1"), ("memory", "1Gi")]));
    assert_eq!(max_resources([&a, &b]), a.max_with(&b));
    assert_eq!(min_resources([&a, &b]), a.min_with(&b));
    assert_eq!(
        min_resources([&list(&[("cpu", "1")]), &list(&[("cpu", "2"), ("gpu", "1")])]),
        list(&[("cpu", "1")])
    );
    assert_eq!(min_resources([]), Resources::new());
    assert_eq!(max_resources([]), Resources::new());
}

#[test]
fn raise_to_is_max_with_in_place() {
    let cases = [
        (
            list(&[("cpu", "1"), ("memory", "2Gi")]),
            list(&[("cpu", "2"), ("memory", "1Gi")]),
        ),
        (
            list(&[("cpu", "1"), ("memory", "2Gi")]),
            list(&[("cpu", "2"), ("nvidia.com/gpu", "1"), ("memory", "1Gi")]),
        ),
        (list(&[]), list(&[("cpu", "1")])),
        (list(&[("cpu", "1")]), list(&[])),
        (list(&[("a.io/x", "1")]), list(&[("b.io/y", "1")])),
        // Equal quantities keep the first one's format, as max_with does.
        (
            list(&[("memory", "1Gi")]),
            list(&[("memory", "1073741824")]),
        ),
        (
            list(&[("memory", "1073741824")]),
            list(&[("memory", "1Gi")]),
        ),
    ];
    for (a, b) in cases {
        let mut raised = a.clone();
        raised.raise_to(&b);
        assert_eq!(raised, a.max_with(&b), "{a} {b}");
        assert_eq!(raised.to_string(), a.max_with(&b).to_string(), "{a} {b}");
    }
}

#[test]
fn max_keeps_the_first_of_equal_quantities() {
    let max = list(&[("memory", "1Gi")]).max_with(&list(&[("memory", "1073741824")]));
    assert_eq!(max.to_string(), "{memory: 1Gi}");
}

#[test]
fn or_defaults_fills_only_missing_names() {
    let requests = list(&[("cpu", "100m")]);
    let limits = list(&[("cpu", "1"), ("memory", "1Gi")]);
    assert_eq!(
        requests.or_defaults(&limits),
        list(&[("cpu", "100m"), ("memory", "1Gi")])
    );
}

#[test]
fn fits_when_every_request_is_within_allocatable() {
    let allocatable = list(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")]);
    assert!(fits(
        &list(&[("cpu", "4"), ("memory", "8Gi")]),
        &allocatable
    ));
    assert!(fits(
        &list(&[("cpu", "3999m"), ("pods", "1")]),
        &allocatable
    ));
    assert!(!fits(&list(&[("cpu", "4001m")]), &allocatable));
    assert!(!fits(&list(&[("memory", "8193Mi")]), &allocatable));
    assert!(fits(&Resources::new(), &allocatable));
    assert!(list(&[("cpu", "1")]).fits(&allocatable));
}

#[test]
fn request_of_a_resource_absent_from_allocatable_fits_only_when_zero() {
    let allocatable = list(&[("cpu", "4"), ("memory", "8Gi")]);
    assert!(!fits(&list(&[("nvidia.com/gpu", "1")]), &allocatable));
    assert!(fits(&list(&[("nvidia.com/gpu", "0")]), &allocatable));
    assert!(!fits(&list(&[("aaa", "1n"), ("cpu", "1")]), &allocatable));
    assert!(!fits(&list(&[("zzz", "1n"), ("cpu", "1")]), &allocatable));
    assert!(fits(&list(&[("cpu", "-1")]), &Resources::new()));
}

#[test]
fn negative_allocatable_never_fits() {
    let allocatable = list(&[("cpu", "4"), ("memory", "-1")]);
    assert!(!fits(&Resources::new(), &allocatable));
    assert!(!fits(&list(&[("cpu", "1")]), &allocatable));
}

#[test]
fn sums_saturate_instead_of_overflowing() {
    let huge = Resources::from_iter([(ResourceName::CPU, Quantity::MAX)]);
    let doubled = huge.merged(&huge);
    assert_eq!(doubled.get(&ResourceName::CPU), Some(Quantity::MAX));
    assert!(!fits(&doubled, &list(&[("cpu", "1e29")])));
}

#[test]
fn merge_adds_quantities_under_a_cloned_name() {
    let gpu = ResourceName::new("nvidia.com/gpu");
    let mut resources = Resources::new();
    resources.insert(gpu.clone(), Quantity::new(1, Format::DecimalSI));
    resources.merge(&Resources::from_iter([(
        gpu.clone(),
        Quantity::from_value(1),
    )]));
    assert_eq!(resources.get(&gpu), Some(q("2")));
}
