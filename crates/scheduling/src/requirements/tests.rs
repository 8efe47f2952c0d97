//! Unit tests for a single [`Requirement`]: construction, membership, intersection, `any`,
//! serialisation and display, named after the behaviour they pin down.

use super::*;
use crate::labels;

fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values.iter().copied()).unwrap()
}

fn strings(values: &[std::sync::Arc<str>]) -> Vec<&str> {
    values.iter().map(|v| &**v).collect()
}

#[test]
fn in_values_are_sorted_and_deduplicated() {
    let r = req("key", Operator::In, &["b", "a", "b"]);
    assert_eq!(strings(r.values()), ["a", "b"]);
    assert_eq!(
        (r.operator(), r.len(), r.is_complement()),
        (Operator::In, 2, false)
    );
}

#[test]
fn not_in_is_a_complement_of_the_excluded_values() {
    let r = req("key", Operator::NotIn, &["a"]);
    assert!(r.is_complement());
    assert_eq!(r.operator(), Operator::NotIn);
    assert!(!r.has("a"));
    assert!(r.has("b"));
    assert_eq!(r.len(), usize::MAX - 1);
}

#[test]
fn exists_allows_everything_and_does_not_exist_nothing() {
    let exists = Requirement::exists("key");
    let dne = Requirement::does_not_exist("key");
    assert!(exists.has("anything") && exists.has(""));
    assert!(!dne.has("anything"));
    assert_eq!(
        (exists.operator(), exists.len()),
        (Operator::Exists, usize::MAX)
    );
    assert_eq!((dne.operator(), dne.len()), (Operator::DoesNotExist, 0));
    assert!(dne.is_empty() && !exists.is_empty());
}

#[test]
fn gt_and_lt_are_canonicalised_to_inclusive_bounds() {
    let gt = req("key", Operator::Gt, &["1"]);
    let lt = req("key", Operator::Lt, &["9"]);
    assert_eq!((gt.lower_bound(), gt.upper_bound()), (Some(2), None));
    assert_eq!((lt.lower_bound(), lt.upper_bound()), (None, Some(8)));
    assert_eq!(gt.operator(), Operator::Exists);
    assert_eq!(gt, Requirement::gte("key", 2));
    assert_eq!(lt, Requirement::lte("key", 8));
}

#[test]
fn gt_max_int_and_lt_min_int_match_nothing() {
    let gt = req("key", Operator::Gt, &[&i64::MAX.to_string()]);
    let lt = req("key", Operator::Lt, &[&i64::MIN.to_string()]);
    assert_eq!((gt.operator(), gt.len()), (Operator::DoesNotExist, 0));
    assert_eq!(lt.operator(), Operator::DoesNotExist);
}

#[test]
fn numeric_operator_needs_exactly_one_integer_value() {
    for (values, single) in [
        (&[][..], false),
        (&["1", "2"][..], false),
        (&["x"][..], true),
    ] {
        let err = Requirement::new("key", Operator::Gte, values.iter().copied()).unwrap_err();
        assert_eq!(
            matches!(err, RequirementError::NotAnInteger { .. }),
            single,
            "{values:?}"
        );
    }
}

#[test]
fn aliased_keys_are_normalised_on_construction() {
    for (alias, key) in labels::LABEL_ALIASES {
        assert_eq!(Requirement::exists(alias).key(), key);
    }
    let reqs = Requirements::from_iter([req(
        "failure-domain.beta.kubernetes.io/zone",
        Operator::In,
        &["test"],
    )]);
    assert!(!reqs.contains_key("failure-domain.beta.kubernetes.io/zone"));
    assert!(reqs.get_or_exists(labels::TOPOLOGY_ZONE).has("test"));
}

#[test]
fn bounds_admit_only_integers_inside_them() {
    let r = Requirement::gte("key", 2).intersection(&Requirement::lte("key", 8));
    for (v, expected) in [
        ("2", true),
        ("8", true),
        ("5", true),
        ("1", false),
        ("9", false),
    ] {
        assert_eq!(r.has(v), expected, "{v}");
    }
    assert!(!r.has("A"));
    assert!(
        r.has("+5") && r.has("005"),
        "Go Atoi accepts a sign and leading zeros"
    );
    assert!(Requirement::gte("key", 0).has("0") && !Requirement::gte("key", 0).has("-1"));
}

#[test]
fn intersection_of_gt_and_lt_with_empty_range_is_does_not_exist() {
    let r = req("key", Operator::Gt, &["9"]).intersection(&req("key", Operator::Lt, &["1"]));
    assert_eq!(r.operator(), Operator::DoesNotExist);
    assert_eq!((r.lower_bound(), r.upper_bound()), (None, None));
    assert_eq!(r.to_string(), "key DoesNotExist");
}

#[test]
fn gte_and_lte_on_the_same_value_keep_exactly_that_value() {
    let r = Requirement::gte("cpu", 8).intersection(&Requirement::lte("cpu", 8));
    assert!(r.has("8") && !r.has("7") && !r.has("9"));
    assert!(r.has_intersection(&req("cpu", Operator::In, &["8"])));
}

#[test]
fn empty_range_keeps_the_larger_min_values() {
    let a = Requirement::gte("key", 5).with_min_values(Some(3));
    let b = Requirement::lte("key", 1).with_min_values(Some(1));
    let r = a.intersection(&b);
    assert_eq!(
        (r.operator(), r.min_values()),
        (Operator::DoesNotExist, Some(3))
    );
}

#[test]
fn concrete_intersection_drops_bounds_and_out_of_range_values() {
    let r = req("key", Operator::In, &["1", "9", "A"]).intersection(&Requirement::gte("key", 2));
    assert_eq!(strings(r.values()), ["9"]);
    assert_eq!(
        (r.lower_bound(), r.upper_bound(), r.is_complement()),
        (None, None, false)
    );
}

#[test]
fn complement_intersection_prunes_exclusions_outside_bounds() {
    let r = req("key", Operator::NotIn, &["1", "2", "A"]).intersection(&Requirement::gte("key", 2));
    assert_eq!(strings(r.values()), ["2"]);
    assert_eq!((r.operator(), r.lower_bound()), (Operator::NotIn, Some(2)));
}

#[test]
fn tighter_bound_wins_when_bounds_are_redundant() {
    let cases = [
        (
            req("k", Operator::Gt, &["4"]),
            Requirement::gte("k", 5),
            Operator::Gte,
            "5",
        ),
        (
            req("k", Operator::Gt, &["5"]),
            Requirement::gte("k", 5),
            Operator::Gte,
            "6",
        ),
        (
            req("k", Operator::Gt, &["3"]),
            Requirement::gte("k", 6),
            Operator::Gte,
            "6",
        ),
        (
            req("k", Operator::Lt, &["5"]),
            Requirement::lte("k", 5),
            Operator::Lte,
            "4",
        ),
        (
            req("k", Operator::Lt, &["9"]),
            Requirement::lte("k", 5),
            Operator::Lte,
            "5",
        ),
    ];
    for (a, b, op, value) in cases {
        let entries = a.intersection(&b).to_selector_requirements();
        assert_eq!(
            entries,
            [SelectorRequirement::new("k", op, [value])],
            "{a} ∩ {b}"
        );
    }
}

#[test]
fn intersection_reuses_the_narrower_value_set() {
    let wide = req("key", Operator::In, &["a", "b", "c", "d"]);
    let narrow = req("key", Operator::In, &["b", "c"]);
    let r = wide.intersection(&narrow);
    assert!(std::ptr::eq(r.values().as_ptr(), narrow.values().as_ptr()));
    let r = narrow.intersection(&Requirement::exists("key"));
    assert!(std::ptr::eq(r.values().as_ptr(), narrow.values().as_ptr()));
}

#[test]
fn intersection_of_large_and_small_sets_finds_common_values() {
    let many: Vec<String> = (0..400).map(|i| format!("type-{i:03}")).collect();
    let large = Requirement::in_values("key", many.iter().map(String::as_str));
    let small = req("key", Operator::In, &["type-007", "type-399", "zzz"]);
    assert_eq!(
        strings(large.intersection(&small).values()),
        ["type-007", "type-399"]
    );
    assert!(large.has_intersection(&small));
    assert!(!large.has_intersection(&req("key", Operator::In, &["type-400"])));
    let excluded = req("key", Operator::NotIn, &["type-000"]);
    assert_eq!(large.intersection(&excluded).len(), 399);
}

#[test]
fn any_of_in_is_the_smallest_value() {
    assert_eq!(
        req("key", Operator::In, &["b", "a"]).any().as_deref(),
        Some("a")
    );
    assert_eq!(
        req("key", Operator::In, &["9", "10"]).any().as_deref(),
        Some("10")
    );
}

#[test]
fn any_of_exists_or_not_in_is_the_smallest_allowed_integer() {
    assert_eq!(Requirement::exists("key").any().as_deref(), Some("0"));
    assert_eq!(
        req("key", Operator::NotIn, &["0", "1", "A"])
            .any()
            .as_deref(),
        Some("2")
    );
    assert_eq!(
        req("key", Operator::Gt, &["9"]).any().as_deref(),
        Some("10")
    );
    assert_eq!(req("key", Operator::Lt, &["1"]).any().as_deref(), Some("0"));
    let gte5 = Requirement::gte("key", 5).intersection(&req("key", Operator::NotIn, &["5"]));
    assert_eq!(gte5.any().as_deref(), Some("6"));
}

#[test]
fn any_is_none_when_nothing_is_allowed() {
    assert_eq!(Requirement::does_not_exist("key").any(), None);
    let range = Requirement::gte("key", 1).intersection(&Requirement::lte("key", 2));
    assert_eq!(
        range
            .intersection(&req("key", Operator::NotIn, &["1", "2"]))
            .any(),
        None
    );
    assert_eq!(
        req("key", Operator::Lt, &["0"]).any(),
        None,
        "upstream would panic here"
    );
}

#[test]
fn serialisation_covers_every_operator_with_sorted_values() {
    let cases = [
        (Requirement::exists("k"), Operator::Exists, vec![]),
        (
            Requirement::does_not_exist("k"),
            Operator::DoesNotExist,
            vec![],
        ),
        (
            req("k", Operator::In, &["B", "A"]),
            Operator::In,
            vec!["A", "B"],
        ),
        (
            req("k", Operator::NotIn, &["2", "1"]),
            Operator::NotIn,
            vec!["1", "2"],
        ),
        (req("k", Operator::Gt, &["9"]), Operator::Gte, vec!["10"]),
        (req("k", Operator::Lt, &["1"]), Operator::Lte, vec!["0"]),
    ];
    for (r, op, values) in cases {
        let r = r.with_min_values(Some(2));
        let expected = SelectorRequirement::new("k", op, values).with_min_values(Some(2));
        assert_eq!(r.to_selector_requirements(), [expected]);
    }
}

#[test]
fn both_bounds_serialise_as_two_entries() {
    let reqs = Requirements::from_iter([Requirement::gte("cpu", 8), Requirement::lte("cpu", 8)]);
    assert_eq!(
        reqs.to_selector_requirements(),
        [
            SelectorRequirement::new("cpu", Operator::Gte, ["8"]),
            SelectorRequirement::new("cpu", Operator::Lte, ["8"]),
        ]
    );
}

#[test]
fn bounds_with_exclusions_also_serialise_the_exclusions() {
    let r = req("k", Operator::NotIn, &["1", "2"]).intersection(&req("k", Operator::Gt, &["1"]));
    let entries = r.to_selector_requirements();
    assert_eq!(
        entries,
        [
            SelectorRequirement::new("k", Operator::Gte, ["2"]),
            SelectorRequirement::new("k", Operator::NotIn, ["2"]),
        ]
    );
    assert_eq!(
        Requirements::from_selector(&entries).unwrap().get("k"),
        Some(&r)
    );
}

#[test]
fn display_matches_upstream_format() {
    assert_eq!(
        req("key", Operator::In, &["A", "B"]).to_string(),
        "key In [A B]"
    );
    assert_eq!(
        req("key", Operator::Gt, &["1"]).to_string(),
        "key Exists >=2"
    );
    let bounded = req("key", Operator::Gt, &["1"]).intersection(&req("key", Operator::Lt, &["9"]));
    assert_eq!(
        bounded.with_min_values(Some(2)).to_string(),
        "key Exists >=2 <=8 minValues 2"
    );
    let seven = req("key", Operator::NotIn, &["1", "2", "3", "4", "5", "6", "7"]);
    assert_eq!(seven.to_string(), "key NotIn [1 2 3 4 5 and 2 others]");
}
