//! Requirement validation (NodePool requirements, pod node selectors and required node affinity):
//! every rejection reason, and the cases that must pass.

use scheduling::labels::{self, WellKnownLabels};
use scheduling::requirements::{
    Operator, RequirementValidationError as E, unknown_well_known_values, validate_requirement,
};

fn errors(key: &str, op: &str, values: &[&str], min: Option<usize>) -> Vec<E> {
    validate_requirement(key, op, values, min, &WellKnownLabels::cluster_api())
        .err()
        .map(|e| e.0)
        .unwrap_or_default()
}

#[test]
fn valid_requirements_pass() {
    let cases: [(&str, &str, &[&str]); 8] = [
        (labels::TOPOLOGY_ZONE, "In", &["us-east-1a"]),
        (labels::ARCH, "NotIn", &["arm64"]),
        ("example.com/team", "Exists", &[]),
        ("team", "DoesNotExist", &[]),
        ("example.com/gpus", "Gt", &["0"]),
        ("example.com/gpus", "Lte", &["8"]),
        (labels::CAPI_INSTANCE_SIZE, "In", &["large"]),
        ("node.kubernetes.io/custom", "In", &["x"]),
    ];
    for (key, op, values) in cases {
        assert_eq!(errors(key, op, values, None), [], "{key} {op} {values:?}");
    }
}

#[test]
fn unsupported_operator_is_rejected() {
    let errs = errors("team", "Like", &["a"], None);
    assert!(matches!(&errs[..], [E::UnsupportedOperator { operator, .. }] if operator == "Like"));
}

#[test]
fn hostname_is_a_restricted_label() {
    let errs = errors(labels::HOSTNAME, "In", &["node-a"], None);
    assert!(matches!(&errs[..], [E::RestrictedLabel { .. }]));
}

#[test]
fn karpenter_domain_is_restricted_except_well_known_keys() {
    assert!(matches!(
        &errors("karpenter.sh/custom", "Exists", &[], None)[..],
        [E::RestrictedLabel { .. }]
    ));
    assert!(matches!(
        &errors("sub.karpenter.sh/x", "Exists", &[], None)[..],
        [E::RestrictedLabel { .. }]
    ));
    assert_eq!(errors(labels::NODE_POOL, "In", &["default"], None), []);
    assert!(matches!(
        &errors(labels::NODE_REGISTERED, "In", &["true"], None)[..],
        [E::RestrictedLabel { .. }]
    ));
}

#[test]
fn provider_domain_is_restricted_except_its_well_known_keys() {
    let key = "karpenter.cluster.x-k8s.io/other";
    assert!(matches!(
        &errors(key, "Exists", &[], None)[..],
        [E::RestrictedLabel { .. }]
    ));
    assert_eq!(errors(labels::CAPI_CAPACITY_CPU, "Gte", &["2"], None), []);
    let core = WellKnownLabels::default();
    assert!(validate_requirement(key, "Exists", &[] as &[&str], None, &core).is_ok());
}

#[test]
fn invalid_key_and_values_are_each_reported() {
    let errs = errors("bad key", "In", &["ok", "not ok", "-x"], None);
    assert!(matches!(
        &errs[..],
        [
            E::InvalidKey { .. },
            E::InvalidValue { .. },
            E::InvalidValue { .. }
        ]
    ));
}

#[test]
fn in_without_values_is_rejected() {
    assert!(matches!(
        &errors("team", "In", &[], None)[..],
        [E::InWithoutValues { .. }]
    ));
}

#[test]
fn in_with_fewer_values_than_min_values_is_rejected() {
    let errs = errors(labels::INSTANCE_TYPE, "In", &["a", "b"], Some(3));
    assert!(matches!(&errs[..], [E::FewerValuesThanMinValues { .. }]));
    assert_eq!(
        errors(labels::INSTANCE_TYPE, "In", &["a", "b", "c"], Some(3)),
        []
    );
    assert_eq!(errors(labels::INSTANCE_TYPE, "Exists", &[], Some(3)), []);
}

#[test]
fn numeric_operators_need_a_single_non_negative_integer() {
    for op in ["Gt", "Lt", "Gte", "Lte"] {
        for bad in [&[][..], &["1", "2"][..], &["-1"][..], &["x"][..]] {
            let errs = errors("example.com/n", op, bad, None);
            assert!(
                errs.iter()
                    .any(|e| matches!(e, E::NotSingleNonNegativeInteger { .. })),
                "{op} {bad:?}"
            );
        }
        assert_eq!(errors("example.com/n", op, &["0"], None), []);
    }
}

#[test]
fn capacity_type_with_only_unknown_values_is_rejected() {
    let errs = errors(labels::CAPACITY_TYPE, "In", &["preemptible"], None);
    assert!(matches!(&errs[..], [E::NoKnownValues { .. }]));
    assert!(
        errs[0]
            .to_string()
            .contains("expected one of: [on-demand reserved spot]")
    );
}

#[test]
fn capacity_type_with_some_unknown_values_passes_and_reports_them() {
    let values = ["spot", "preemptible"];
    assert_eq!(errors(labels::CAPACITY_TYPE, "In", &values, None), []);
    let wk = WellKnownLabels::default();
    assert_eq!(
        unknown_well_known_values(labels::CAPACITY_TYPE, "In", &values, &wk),
        ["preemptible"]
    );
    assert!(unknown_well_known_values(labels::CAPACITY_TYPE, "NotIn", &values, &wk).is_empty());
}

#[test]
fn capacity_type_known_values_below_min_values_is_rejected() {
    let errs = errors(labels::CAPACITY_TYPE, "In", &["spot", "bogus"], Some(2));
    assert!(matches!(
        &errs[..],
        [E::NotEnoughKnownValues {
            min_values: 2,
            valid: 1,
            ..
        }]
    ));
}

#[test]
fn capacity_type_values_are_not_checked_for_other_operators() {
    assert_eq!(errors(labels::CAPACITY_TYPE, "NotIn", &["bogus"], None), []);
}

#[test]
fn aliased_key_is_validated_after_normalisation() {
    let errs = errors("failure-domain.beta.kubernetes.io/zone", "In", &["a"], None);
    assert_eq!(errs, []);
    let errs = errors(
        "failure-domain.beta.kubernetes.io/zone",
        "Bogus",
        &["a"],
        None,
    );
    assert!(
        matches!(&errs[..], [E::UnsupportedOperator { key, .. }] if key == labels::TOPOLOGY_ZONE)
    );
}

#[test]
fn multiple_problems_are_all_reported_in_order() {
    let errs = errors(labels::HOSTNAME, "Gt", &["x", "y"], None);
    assert!(matches!(
        &errs[..],
        [
            E::RestrictedLabel { .. },
            E::NotSingleNonNegativeInteger {
                operator: Operator::Gt,
                ..
            }
        ]
    ));
    let err = validate_requirement(
        labels::HOSTNAME,
        "Gt",
        &["x", "y"],
        None,
        &WellKnownLabels::default(),
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("using label kubernetes.io/hostname is not allowed"));
    assert!(text.ends_with(
        "; key kubernetes.io/hostname with operator Gt must have a single positive integer value"
    ));
}
