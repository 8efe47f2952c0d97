//! Unit tests for [`Requirements`]: adding, lookup, the pairwise tests, labels and minValues.

use std::collections::BTreeMap;

use super::*;
use crate::labels::{self, WellKnownLabels};

fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values.iter().copied()).unwrap()
}

fn strings(values: &[std::sync::Arc<str>]) -> Vec<&str> {
    values.iter().map(|v| &**v).collect()
}

#[test]
fn requirements_display_is_sorted_by_key_and_omits_hostname() {
    let reqs = Requirements::from_iter([
        req("notInA", Operator::NotIn, &["A"]),
        req("in19", Operator::In, &["9", "1"]),
        req("in1", Operator::In, &["1"]),
        req("greaterThan1", Operator::Gt, &["1"]),
        req(labels::HOSTNAME, Operator::In, &["node-a"]),
        Requirement::exists("exists"),
    ]);
    assert_eq!(
        reqs.to_string(),
        "exists Exists, greaterThan1 Exists >=2, in1 In [1], in19 In [1 9], notInA NotIn [A]"
    );
}

#[test]
fn add_intersects_requirements_on_the_same_key() {
    let mut reqs = Requirements::new();
    reqs.add(req("key", Operator::In, &["a", "b"]));
    reqs.add(req("key", Operator::NotIn, &["a"]).with_min_values(Some(1)));
    assert_eq!(reqs.len(), 1);
    let r = reqs.get("key").unwrap();
    assert_eq!(
        (r.operator(), strings(r.values()), r.min_values()),
        (Operator::In, vec!["b"], Some(1))
    );
}

#[test]
fn get_of_a_missing_key_is_exists() {
    let reqs = Requirements::new();
    assert_eq!(reqs.get("missing"), None);
    assert_eq!(reqs.get_or_exists("missing").operator(), Operator::Exists);
}

#[test]
fn from_selector_intersects_entries_sharing_a_key_and_rejects_bad_numbers() {
    let entries = [
        SelectorRequirement::new("k", Operator::In, ["1", "5", "9"]),
        SelectorRequirement::new("k", Operator::Gt, ["2"]).with_min_values(Some(1)),
    ];
    let reqs = Requirements::from_selector(&entries).unwrap();
    let r = reqs.get("k").unwrap();
    assert_eq!(
        (strings(r.values()), r.min_values()),
        (vec!["5", "9"], Some(1))
    );
    let bad = [SelectorRequirement::new("k", Operator::Lt, ["x"])];
    assert!(Requirements::from_selector(&bad).is_err());
}

#[test]
fn two_negative_requirements_never_conflict() {
    let dne = Requirements::from_iter([Requirement::does_not_exist("k")]);
    let not_in = Requirements::from_iter([req("k", Operator::NotIn, &["a"])]);
    assert!(dne.intersects(&dne).is_ok());
    assert!(dne.intersects(&not_in).is_ok() && not_in.intersects(&dne).is_ok());
    let exists = Requirements::from_iter([Requirement::exists("k")]);
    assert!(exists.intersects(&dne).is_err(), "Exists is not negative");
}

#[test]
fn keys_defined_on_one_side_only_are_ignored_by_intersects() {
    let a = Requirements::from_iter([req("a", Operator::In, &["1"])]);
    let b = Requirements::from_iter([req("b", Operator::In, &["2"])]);
    assert!(a.intersects(&b).is_ok() && a.is_intersecting(&b));
}

#[test]
fn first_conflict_is_reported_in_key_order() {
    let a = Requirements::from_iter([
        req("b", Operator::In, &["1"]),
        req("a", Operator::In, &["1"]),
    ]);
    let b = Requirements::from_iter([
        req("a", Operator::In, &["2"]),
        req("b", Operator::In, &["2"]),
    ]);
    let err = a.intersects(&b).unwrap_err();
    assert_eq!(err.key(), "a");
    assert_eq!(err.to_string(), "key a, a In [2] not in a In [1]");
    assert_eq!(err.incoming().values().len(), 1);
}

#[test]
fn undefined_custom_key_is_incompatible_unless_negative() {
    let node = Requirements::from_iter([req(labels::TOPOLOGY_ZONE, Operator::In, &["z1"])]);
    let wk = WellKnownLabels::default();
    for (op, ok) in [
        (Operator::In, false),
        (Operator::Exists, false),
        (Operator::NotIn, true),
    ] {
        let pod = Requirements::from_iter([req(
            "team",
            op,
            if op == Operator::Exists { &[] } else { &["x"] },
        )]);
        assert_eq!(node.compatible(&pod, &wk).is_ok(), ok, "{op}");
        assert_eq!(node.compatible_strict(&pod).is_ok(), ok, "{op}");
    }
    let dne = Requirements::from_iter([Requirement::does_not_exist("team")]);
    assert!(node.compatible_strict(&dne).is_ok());
}

#[test]
fn undefined_well_known_key_is_allowed_only_when_loose() {
    let node = Requirements::new();
    let pod = Requirements::from_iter([req(labels::ARCH, Operator::In, &["arm64"])]);
    assert!(node.compatible(&pod, &WellKnownLabels::default()).is_ok());
    assert!(node.is_compatible(&pod, &WellKnownLabels::default()));
    assert!(node.compatible_strict(&pod).is_err());
    assert!(!node.is_compatible_strict(&pod));
}

#[test]
fn provider_well_known_keys_are_allowed_undefined_with_the_provider_set() {
    let pod = Requirements::from_iter([req(labels::CAPI_INSTANCE_SIZE, Operator::In, &["large"])]);
    assert!(
        Requirements::new()
            .compatible(&pod, &WellKnownLabels::default())
            .is_err()
    );
    assert!(
        Requirements::new()
            .compatible(&pod, &WellKnownLabels::cluster_api())
            .is_ok()
    );
}

#[test]
fn undefined_label_error_suggests_the_well_known_key() {
    let cases = [
        ("zone", labels::TOPOLOGY_ZONE),
        ("region", labels::TOPOLOGY_REGION),
        ("nodepool", labels::NODE_POOL),
        ("instance-type", labels::INSTANCE_TYPE),
        ("arch", labels::ARCH),
        ("capacity-type", labels::CAPACITY_TYPE),
        ("topology.kubernetesio/zone", labels::TOPOLOGY_ZONE),
        ("node.io/zone", labels::TOPOLOGY_ZONE),
        ("topology.kubernetes.io/regio", labels::TOPOLOGY_REGION),
        ("node.kubernetes.io/region", labels::TOPOLOGY_REGION),
        ("karpenter/nodepool", labels::NODE_POOL),
    ];
    let wk = WellKnownLabels::default();
    for (bad, good) in cases {
        let pod = Requirements::from_iter([Requirement::exists(bad)]);
        let err = Requirements::new().compatible(&pod, &wk).unwrap_err();
        let expected = format!("label \"{bad}\" does not have known values (typo of \"{good}\"?)");
        assert_eq!(err.to_string(), expected);
    }
}

#[test]
fn unknown_label_error_has_no_hint() {
    let pod = Requirements::from_iter([Requirement::exists("deployment")]);
    let err = Requirements::new().compatible_strict(&pod).unwrap_err();
    assert_eq!(
        err.to_string(),
        "label \"deployment\" does not have known values"
    );
}

#[test]
fn compatibility_reports_undefined_keys_before_conflicts() {
    let node = Requirements::from_iter([req("a", Operator::In, &["1"])]);
    let pod = Requirements::from_iter([
        req("a", Operator::In, &["2"]),
        req("b", Operator::In, &["1"]),
    ]);
    let err = node.compatible_strict(&pod).unwrap_err();
    assert!(matches!(err, CompatibilityError::UndefinedLabel { ref key, .. } if &**key == "b"));
    let pod = Requirements::from_iter([req("a", Operator::In, &["2"])]);
    let err = node.compatible_strict(&pod).unwrap_err();
    assert!(matches!(err, CompatibilityError::Incompatible(_)));
}

#[test]
fn labels_skip_well_known_and_restricted_keys_and_resolve_the_rest() {
    let wk = WellKnownLabels::cluster_api();
    let reqs = Requirements::from_iter([
        req(labels::TOPOLOGY_ZONE, Operator::In, &["z1"]),
        req(labels::HOSTNAME, Operator::In, &["h"]),
        req(labels::NODE_REGISTERED, Operator::In, &["true"]),
        req("karpenter.cluster.x-k8s.io/custom", Operator::In, &["x"]),
        req("team", Operator::In, &["b", "a"]),
        Requirement::exists("slot"),
        req("ordinal", Operator::NotIn, &["0"]),
        Requirement::does_not_exist("gone"),
    ]);
    let expected: BTreeMap<String, String> = [("ordinal", "1"), ("slot", "0"), ("team", "a")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    assert_eq!(reqs.labels(&wk), expected);
}

#[test]
fn min_values_are_listed_and_only_ever_relaxed_downwards() {
    let mut reqs = Requirements::from_iter([
        req(labels::INSTANCE_TYPE, Operator::Exists, &[]).with_min_values(Some(5)),
        req("other", Operator::In, &["a"]),
    ]);
    assert!(reqs.has_min_values());
    assert_eq!(
        reqs.min_values().collect::<Vec<_>>(),
        [(labels::INSTANCE_TYPE, 5)]
    );
    assert!(!reqs.relax_min_values(labels::INSTANCE_TYPE, 7));
    assert!(reqs.relax_min_values(labels::INSTANCE_TYPE, 3));
    assert_eq!(
        reqs.get(labels::INSTANCE_TYPE).unwrap().min_values(),
        Some(3)
    );
    assert!(!reqs.relax_min_values("other", 0), "no minValues to relax");
    assert!(!reqs.relax_min_values("missing", 0));
    reqs.remove(labels::INSTANCE_TYPE);
    assert!(!reqs.has_min_values());
}

#[test]
fn from_labels_builds_single_value_in_requirements() {
    let reqs =
        Requirements::from_labels([("b", "2"), ("a", "1"), ("beta.kubernetes.io/os", "linux")]);
    assert_eq!(reqs.keys().collect::<Vec<_>>(), ["a", "b", labels::OS]);
    assert!(
        reqs.iter()
            .all(|r| r.operator() == Operator::In && r.values().len() == 1)
    );
}

#[test]
fn operators_round_trip_through_their_spelling() {
    for op in Operator::ALL {
        assert_eq!(op.as_str().parse::<Operator>(), Ok(op));
    }
    assert!("in".parse::<Operator>().is_err());
}
