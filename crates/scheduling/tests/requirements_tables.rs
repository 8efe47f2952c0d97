//! Table tests ported from upstream Karpenter's requirement and requirements suites: the full
//! pairwise intersection table of fourteen single-key requirements, and the loose and strict
//! compatibility tables over a well-known key.

use scheduling::labels::{TOPOLOGY_ZONE, WellKnownLabels};
use scheduling::requirements::{Requirement, Requirements};

fn named(key: &str, name: &str) -> Requirement {
    match name {
        "exists" => Requirement::exists(key),
        "doesNotExist" => Requirement::does_not_exist(key),
        "inA" => Requirement::in_values(key, ["A"]),
        "inB" => Requirement::in_values(key, ["B"]),
        "inAB" => Requirement::in_values(key, ["A", "B"]),
        "notInA" => Requirement::not_in(key, ["A"]),
        "in1" => Requirement::in_values(key, ["1"]),
        "in9" => Requirement::in_values(key, ["9"]),
        "in19" => Requirement::in_values(key, ["1", "9"]),
        "notIn12" => Requirement::not_in(key, ["1", "2"]),
        "greaterThan1" => Requirement::gt(key, 1),
        "greaterThan9" => Requirement::gt(key, 9),
        "lessThan1" => Requirement::lt(key, 1),
        "lessThan9" => Requirement::lt(key, 9),
        other => unreachable!("unknown requirement {other}"),
    }
}

/// (complement, values, lower bound, upper bound): the observable state of a requirement.
type Shape = (bool, Vec<String>, Option<i64>, Option<i64>);

fn shape(r: &Requirement) -> Shape {
    let values = r.values().iter().map(ToString::to_string).collect();
    (r.is_complement(), values, r.lower_bound(), r.upper_bound())
}

fn expected_shape(name: &str) -> Shape {
    let strings = |v: &[&str]| v.iter().map(ToString::to_string).collect();
    match name {
        "notIn12A" => (true, strings(&["1", "2", "A"]), None, None),
        "gte2NotIn2" => (true, strings(&["2"]), Some(2), None),
        "lte8NotIn12" => (true, strings(&["1", "2"]), None, Some(8)),
        "gte2Lte8" => (true, Vec::new(), Some(2), Some(8)),
        other => shape(&named("key", other)),
    }
}

const INTERSECTIONS: &[(&str, &str, &str)] = &[
    ("exists", "exists", "exists"),
    ("exists", "doesNotExist", "doesNotExist"),
    ("exists", "inA", "inA"),
    ("exists", "inB", "inB"),
    ("exists", "inAB", "inAB"),
    ("exists", "notInA", "notInA"),
    ("exists", "in1", "in1"),
    ("exists", "in9", "in9"),
    ("exists", "in19", "in19"),
    ("exists", "notIn12", "notIn12"),
    ("exists", "greaterThan1", "greaterThan1"),
    ("exists", "greaterThan9", "greaterThan9"),
    ("exists", "lessThan1", "lessThan1"),
    ("exists", "lessThan9", "lessThan9"),
    ("doesNotExist", "exists", "doesNotExist"),
    ("doesNotExist", "doesNotExist", "doesNotExist"),
    ("doesNotExist", "inA", "doesNotExist"),
    ("doesNotExist", "inB", "doesNotExist"),
    ("doesNotExist", "inAB", "doesNotExist"),
    ("doesNotExist", "notInA", "doesNotExist"),
    ("doesNotExist", "in1", "doesNotExist"),
    ("doesNotExist", "in9", "doesNotExist"),
    ("doesNotExist", "in19", "doesNotExist"),
    ("doesNotExist", "notIn12", "doesNotExist"),
    ("doesNotExist", "greaterThan1", "doesNotExist"),
    ("doesNotExist", "greaterThan9", "doesNotExist"),
    ("doesNotExist", "lessThan1", "doesNotExist"),
    ("doesNotExist", "lessThan9", "doesNotExist"),
    ("inA", "exists", "inA"),
    ("inA", "doesNotExist", "doesNotExist"),
    ("inA", "inA", "inA"),
    ("inA", "inB", "doesNotExist"),
    ("inA", "inAB", "inA"),
    ("inA", "notInA", "doesNotExist"),
    ("inA", "in1", "doesNotExist"),
    ("inA", "in9", "doesNotExist"),
    ("inA", "in19", "doesNotExist"),
    ("inA", "notIn12", "inA"),
    ("inA", "greaterThan1", "doesNotExist"),
    ("inA", "greaterThan9", "doesNotExist"),
    ("inA", "lessThan1", "doesNotExist"),
    ("inA", "lessThan9", "doesNotExist"),
    ("inB", "exists", "inB"),
    ("inB", "doesNotExist", "doesNotExist"),
    ("inB", "inA", "doesNotExist"),
    ("inB", "inB", "inB"),
    ("inB", "inAB", "inB"),
    ("inB", "notInA", "inB"),
    ("inB", "in1", "doesNotExist"),
    ("inB", "in9", "doesNotExist"),
    ("inB", "in19", "doesNotExist"),
    ("inB", "notIn12", "inB"),
    ("inB", "greaterThan1", "doesNotExist"),
    ("inB", "greaterThan9", "doesNotExist"),
    ("inB", "lessThan1", "doesNotExist"),
    ("inB", "lessThan9", "doesNotExist"),
    ("inAB", "exists", "inAB"),
    ("inAB", "doesNotExist", "doesNotExist"),
    ("inAB", "inA", "inA"),
    ("inAB", "inB", "inB"),
    ("inAB", "inAB", "inAB"),
    ("inAB", "notInA", "inB"),
    ("inAB", "in1", "doesNotExist"),
    ("inAB", "in9", "doesNotExist"),
    ("inAB", "in19", "doesNotExist"),
    ("inAB", "notIn12", "inAB"),
    ("inAB", "greaterThan1", "doesNotExist"),
    ("inAB", "greaterThan9", "doesNotExist"),
    ("inAB", "lessThan1", "doesNotExist"),
    ("inAB", "lessThan9", "doesNotExist"),
    ("notInA", "exists", "notInA"),
    ("notInA", "doesNotExist", "doesNotExist"),
    ("notInA", "inA", "doesNotExist"),
    ("notInA", "inB", "inB"),
    ("notInA", "inAB", "inB"),
    ("notInA", "notInA", "notInA"),
    ("notInA", "in1", "in1"),
    ("notInA", "in9", "in9"),
    ("notInA", "in19", "in19"),
    ("notInA", "notIn12", "notIn12A"),
    ("notInA", "greaterThan1", "greaterThan1"),
    ("notInA", "greaterThan9", "greaterThan9"),
    ("notInA", "lessThan1", "lessThan1"),
    ("notInA", "lessThan9", "lessThan9"),
    ("in1", "exists", "in1"),
    ("in1", "doesNotExist", "doesNotExist"),
    ("in1", "inA", "doesNotExist"),
    ("in1", "inB", "doesNotExist"),
    ("in1", "inAB", "doesNotExist"),
    ("in1", "notInA", "in1"),
    ("in1", "in1", "in1"),
    ("in1", "in9", "doesNotExist"),
    ("in1", "in19", "in1"),
    ("in1", "notIn12", "doesNotExist"),
    ("in1", "greaterThan1", "doesNotExist"),
    ("in1", "greaterThan9", "doesNotExist"),
    ("in1", "lessThan1", "doesNotExist"),
    ("in1", "lessThan9", "in1"),
    ("in9", "exists", "in9"),
    ("in9", "doesNotExist", "doesNotExist"),
    ("in9", "inA", "doesNotExist"),
    ("in9", "inB", "doesNotExist"),
    ("in9", "inAB", "doesNotExist"),
    ("in9", "notInA", "in9"),
    ("in9", "in1", "doesNotExist"),
    ("in9", "in9", "in9"),
    ("in9", "in19", "in9"),
    ("in9", "notIn12", "in9"),
    ("in9", "greaterThan1", "in9"),
    ("in9", "greaterThan9", "doesNotExist"),
    ("in9", "lessThan1", "doesNotExist"),
    ("in9", "lessThan9", "doesNotExist"),
    ("in19", "exists", "in19"),
    ("in19", "doesNotExist", "doesNotExist"),
    ("in19", "inA", "doesNotExist"),
    ("in19", "inB", "doesNotExist"),
    ("in19", "inAB", "doesNotExist"),
    ("in19", "notInA", "in19"),
    ("in19", "in1", "in1"),
    ("in19", "in9", "in9"),
    ("in19", "in19", "in19"),
    ("in19", "notIn12", "in9"),
    ("in19", "greaterThan1", "in9"),
    ("in19", "greaterThan9", "doesNotExist"),
    ("in19", "lessThan1", "doesNotExist"),
    ("in19", "lessThan9", "in1"),
    ("notIn12", "exists", "notIn12"),
    ("notIn12", "doesNotExist", "doesNotExist"),
    ("notIn12", "inA", "inA"),
    ("notIn12", "inB", "inB"),
    ("notIn12", "inAB", "inAB"),
    ("notIn12", "notInA", "notIn12A"),
    ("notIn12", "in1", "doesNotExist"),
    ("notIn12", "in9", "in9"),
    ("notIn12", "in19", "in9"),
    ("notIn12", "notIn12", "notIn12"),
    ("notIn12", "greaterThan1", "gte2NotIn2"),
    ("notIn12", "greaterThan9", "greaterThan9"),
    ("notIn12", "lessThan1", "lessThan1"),
    ("notIn12", "lessThan9", "lte8NotIn12"),
    ("greaterThan1", "exists", "greaterThan1"),
    ("greaterThan1", "doesNotExist", "doesNotExist"),
    ("greaterThan1", "inA", "doesNotExist"),
    ("greaterThan1", "inB", "doesNotExist"),
    ("greaterThan1", "inAB", "doesNotExist"),
    ("greaterThan1", "notInA", "greaterThan1"),
    ("greaterThan1", "in1", "doesNotExist"),
    ("greaterThan1", "in9", "in9"),
    ("greaterThan1", "in19", "in9"),
    ("greaterThan1", "notIn12", "gte2NotIn2"),
    ("greaterThan1", "greaterThan1", "greaterThan1"),
    ("greaterThan1", "greaterThan9", "greaterThan9"),
    ("greaterThan1", "lessThan1", "doesNotExist"),
    ("greaterThan1", "lessThan9", "gte2Lte8"),
    ("greaterThan9", "exists", "greaterThan9"),
    ("greaterThan9", "doesNotExist", "doesNotExist"),
    ("greaterThan9", "inA", "doesNotExist"),
    ("greaterThan9", "inB", "doesNotExist"),
    ("greaterThan9", "inAB", "doesNotExist"),
    ("greaterThan9", "notInA", "greaterThan9"),
    ("greaterThan9", "in1", "doesNotExist"),
    ("greaterThan9", "in9", "doesNotExist"),
    ("greaterThan9", "in19", "doesNotExist"),
    ("greaterThan9", "notIn12", "greaterThan9"),
    ("greaterThan9", "greaterThan1", "greaterThan9"),
    ("greaterThan9", "greaterThan9", "greaterThan9"),
    ("greaterThan9", "lessThan1", "doesNotExist"),
    ("greaterThan9", "lessThan9", "doesNotExist"),
    ("lessThan1", "exists", "lessThan1"),
    ("lessThan1", "doesNotExist", "doesNotExist"),
    ("lessThan1", "inA", "doesNotExist"),
    ("lessThan1", "inB", "doesNotExist"),
    ("lessThan1", "inAB", "doesNotExist"),
    ("lessThan1", "notInA", "lessThan1"),
    ("lessThan1", "in1", "doesNotExist"),
    ("lessThan1", "in9", "doesNotExist"),
    ("lessThan1", "in19", "doesNotExist"),
    ("lessThan1", "notIn12", "lessThan1"),
    ("lessThan1", "greaterThan1", "doesNotExist"),
    ("lessThan1", "greaterThan9", "doesNotExist"),
    ("lessThan1", "lessThan1", "lessThan1"),
    ("lessThan1", "lessThan9", "lessThan1"),
    ("lessThan9", "exists", "lessThan9"),
    ("lessThan9", "doesNotExist", "doesNotExist"),
    ("lessThan9", "inA", "doesNotExist"),
    ("lessThan9", "inB", "doesNotExist"),
    ("lessThan9", "inAB", "doesNotExist"),
    ("lessThan9", "notInA", "lessThan9"),
    ("lessThan9", "in1", "in1"),
    ("lessThan9", "in9", "doesNotExist"),
    ("lessThan9", "in19", "in1"),
    ("lessThan9", "notIn12", "lte8NotIn12"),
    ("lessThan9", "greaterThan1", "gte2Lte8"),
    ("lessThan9", "greaterThan9", "doesNotExist"),
    ("lessThan9", "lessThan1", "lessThan1"),
    ("lessThan9", "lessThan9", "lessThan9"),
];

#[test]
fn intersection_table_matches_upstream() {
    assert_eq!(INTERSECTIONS.len(), 196);
    for (a, b, expected) in INTERSECTIONS {
        let got = named("key", a).intersection(&named("key", b));
        assert_eq!(shape(&got), expected_shape(expected), "{a} ∩ {b}");
        assert_eq!(got.min_values(), None);
    }
}

#[test]
fn has_intersection_agrees_with_intersection_table() {
    for (a, b, expected) in INTERSECTIONS {
        let (a, b) = (named("key", a), named("key", b));
        let empty = expected_shape(expected) == shape(&named("key", "doesNotExist"));
        assert_eq!(a.has_intersection(&b), !empty, "{a} ∩ {b}");
    }
}

#[test]
fn intersection_with_min_values_keeps_the_larger_min_values() {
    for (a, b, expected) in INTERSECTIONS {
        let left = named("key", a).with_min_values(Some(1));
        let right = named("key", b).with_min_values(Some(2));
        let got = left.intersection(&right);
        assert_eq!(shape(&got), expected_shape(expected), "{a} ∩ {b}");
        assert_eq!(got.min_values(), Some(2), "{a} ∩ {b}");
    }
}

const COLUMNS: [&str; 15] = [
    "unconstrained",
    "exists",
    "doesNotExist",
    "inA",
    "inB",
    "inAB",
    "notInA",
    "in1",
    "in9",
    "in19",
    "notIn12",
    "greaterThan1",
    "greaterThan9",
    "lessThan1",
    "lessThan9",
];

/// Rows: receiver; columns: argument, both in [`COLUMNS`] order. `+` = compatible.
const LOOSE: [&str; 15] = [
    "+++++++++++++++", // unconstrained
    "++-++++++++++++", // exists
    "+-+---+---+----", // doesNotExist
    "++-+-+----+----", // inA
    "++--+++---+----", // inB
    "++-++++---+----", // inAB
    "+++-+++++++++++", // notInA
    "++----++-+----+", // in1
    "++----+-++++---", // in9
    "++----++++++--+", // in19
    "+++++++-+++++++", // notIn12
    "++----+-+++++-+", // greaterThan1
    "++----+---+++--", // greaterThan9
    "++----+---+--++", // lessThan1
    "++----++-+++-++", // lessThan9
];

/// As [`LOOSE`], without allowing undefined well-known labels.
const STRICT: [&str; 15] = [
    "+-+---+---+----", // unconstrained
    "++-++++++++++++", // exists
    "+-+---+---+----", // doesNotExist
    "++-+-+----+----", // inA
    "++--+++---+----", // inB
    "++-++++---+----", // inAB
    "+++-+++++++++++", // notInA
    "++----++-+----+", // in1
    "++----+-++++---", // in9
    "++----++++++--+", // in19
    "+++++++-+++++++", // notIn12
    "++----+-+++++-+", // greaterThan1
    "++----+---+++--", // greaterThan9
    "++----+---+--++", // lessThan1
    "++----++-+++-++", // lessThan9
];

fn zone_requirements(name: &str) -> Requirements {
    if name == "unconstrained" {
        Requirements::new()
    } else {
        Requirements::from_iter([named(TOPOLOGY_ZONE, name)])
    }
}

fn check_table(table: &[&str; 15], strict: bool) {
    let well_known = WellKnownLabels::default();
    for (receiver, row) in COLUMNS.iter().zip(table) {
        for (argument, expected) in COLUMNS.iter().zip(row.chars()) {
            let (r, a) = (zone_requirements(receiver), zone_requirements(argument));
            let got = if strict {
                r.compatible_strict(&a).is_ok()
            } else {
                r.compatible(&a, &well_known).is_ok()
            };
            let fast = if strict {
                r.is_compatible_strict(&a)
            } else {
                r.is_compatible(&a, &well_known)
            };
            assert_eq!(
                got,
                expected == '+',
                "{receiver}.compatible({argument}), strict={strict}"
            );
            assert_eq!(
                fast, got,
                "{receiver}.is_compatible({argument}), strict={strict}"
            );
        }
    }
}

#[test]
fn loose_compatibility_table_matches_upstream() {
    check_table(&LOOSE, false);
}

#[test]
fn strict_compatibility_table_matches_upstream() {
    check_table(&STRICT, true);
}

#[test]
fn strict_and_loose_tables_differ_only_for_undefined_positive_requirements() {
    for (i, (loose, strict)) in LOOSE.iter().zip(STRICT).enumerate() {
        if i != 0 {
            assert_eq!(*loose, strict);
        }
    }
    assert_eq!(STRICT[0], "+-+---+---+----");
}
