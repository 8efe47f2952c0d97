//! Taints and tolerations: Kubernetes toleration semantics, the all-taints check, the Karpenter
//! and ephemeral taints, merging and validation.

use scheduling::taints::{
    Taint, TaintEffect, TaintValidationError, Toleration, TolerationOperator, is_known_ephemeral,
    known_ephemeral_taints, merge_taints, tolerates_all, validate_taints,
};

fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
    Taint::new(key, value, effect)
}

fn toleration(
    key: &str,
    op: TolerationOperator,
    value: &str,
    effect: Option<TaintEffect>,
) -> Toleration {
    Toleration {
        key: key.into(),
        operator: op,
        value: value.into(),
        effect,
        toleration_seconds: None,
    }
}

const ALL_EFFECTS: [TaintEffect; 3] = [
    TaintEffect::NoSchedule,
    TaintEffect::PreferNoSchedule,
    TaintEffect::NoExecute,
];

#[test]
fn empty_key_exists_toleration_tolerates_everything() {
    let tol = toleration("", TolerationOperator::Exists, "", None);
    for effect in ALL_EFFECTS {
        assert!(tol.tolerates(&taint("any/key", "v", effect)));
        assert!(tol.tolerates(&taint("other", "", effect)));
    }
}

#[test]
fn empty_key_equal_toleration_matches_any_key_with_equal_value() {
    let tol = toleration("", TolerationOperator::Equal, "v", None);
    assert!(tol.tolerates(&taint("a", "v", TaintEffect::NoSchedule)));
    assert!(!tol.tolerates(&taint("a", "w", TaintEffect::NoSchedule)));
}

#[test]
fn empty_effect_matches_every_effect_and_a_set_effect_only_itself() {
    let any = toleration("k", TolerationOperator::Exists, "", None);
    let no_execute = toleration(
        "k",
        TolerationOperator::Exists,
        "",
        Some(TaintEffect::NoExecute),
    );
    for effect in ALL_EFFECTS {
        assert!(any.tolerates(&taint("k", "", effect)));
        assert_eq!(
            no_execute.tolerates(&taint("k", "", effect)),
            effect == TaintEffect::NoExecute
        );
    }
}

#[test]
fn equal_compares_values_and_exists_ignores_them() {
    let equal = toleration("k", TolerationOperator::Equal, "v", None);
    let exists = toleration("k", TolerationOperator::Exists, "", None);
    assert!(equal.tolerates(&taint("k", "v", TaintEffect::NoSchedule)));
    assert!(!equal.tolerates(&taint("k", "w", TaintEffect::NoSchedule)));
    assert!(!equal.tolerates(&taint("k", "", TaintEffect::NoSchedule)));
    assert!(exists.tolerates(&taint("k", "w", TaintEffect::NoSchedule)));
    assert!(
        !exists.tolerates(&taint("other", "w", TaintEffect::NoSchedule)),
        "key must match"
    );
}

#[test]
fn empty_operator_spelling_means_equal() {
    assert_eq!(
        "".parse::<TolerationOperator>(),
        Ok(TolerationOperator::Equal)
    );
    assert_eq!(
        "Exists".parse::<TolerationOperator>(),
        Ok(TolerationOperator::Exists)
    );
    assert!("exists".parse::<TolerationOperator>().is_err());
    assert_eq!(Toleration::default().operator, TolerationOperator::Equal);
}

#[test]
fn lt_and_gt_compare_canonical_integers() {
    let lt = toleration("k", TolerationOperator::Lt, "10", None);
    let gt = toleration("k", TolerationOperator::Gt, "10", None);
    let t = |v: &str| taint("k", v, TaintEffect::NoSchedule);
    assert!(lt.tolerates(&t("9")) && !lt.tolerates(&t("10")) && lt.tolerates(&t("-3")));
    assert!(gt.tolerates(&t("11")) && !gt.tolerates(&t("10")));
    for non_canonical in ["010", "+11", "-0", "x", ""] {
        assert!(
            !gt.tolerates(&t(non_canonical)) && !lt.tolerates(&t(non_canonical)),
            "{non_canonical:?}"
        );
    }
}

#[test]
fn tolerates_all_names_the_first_untolerated_taint() {
    let taints = [
        taint("a", "", TaintEffect::NoSchedule),
        taint("b", "1", TaintEffect::NoExecute),
        taint("c", "", TaintEffect::NoSchedule),
    ];
    let tols = [toleration("a", TolerationOperator::Exists, "", None)];
    let err = tolerates_all(&taints, &tols).unwrap_err();
    assert_eq!(err.taint, taints[1]);
    assert_eq!(err.to_string(), "did not tolerate taint b=1:NoExecute");
    assert!(tolerates_all(&[], &[]).is_ok());
    assert!(
        tolerates_all(
            &taints,
            &[toleration("", TolerationOperator::Exists, "", None)]
        )
        .is_ok()
    );
}

#[test]
fn prefer_no_schedule_taints_must_be_tolerated_too() {
    let taints = [taint("soft", "", TaintEffect::PreferNoSchedule)];
    assert!(tolerates_all(&taints, &[]).is_err());
    let tol = toleration(
        "",
        TolerationOperator::Exists,
        "",
        Some(TaintEffect::PreferNoSchedule),
    );
    assert!(tolerates_all(&taints, &[tol]).is_ok());
}

#[test]
fn karpenter_taints_have_upstream_keys_and_effects() {
    assert_eq!(
        Taint::disrupted().to_string(),
        "karpenter.sh/disrupted:NoSchedule"
    );
    assert_eq!(
        Taint::unregistered().to_string(),
        "karpenter.sh/unregistered:NoExecute"
    );
    assert!(!is_known_ephemeral(&Taint::disrupted()));
    assert!(is_known_ephemeral(&Taint::unregistered()));
}

#[test]
fn every_listed_ephemeral_taint_is_known_ephemeral() {
    for t in known_ephemeral_taints() {
        assert!(is_known_ephemeral(&t), "{t}");
    }
    assert!(is_known_ephemeral(&taint(
        "node.kubernetes.io/not-ready",
        "",
        TaintEffect::NoExecute
    )));
}

#[test]
fn ephemeral_match_ignores_value_but_not_effect() {
    let uninitialized = "node.cloudprovider.kubernetes.io/uninitialized";
    assert!(is_known_ephemeral(&taint(
        uninitialized,
        "true",
        TaintEffect::NoSchedule
    )));
    assert!(is_known_ephemeral(&taint(
        uninitialized,
        "other",
        TaintEffect::NoSchedule
    )));
    assert!(!is_known_ephemeral(&taint(
        uninitialized,
        "true",
        TaintEffect::NoExecute
    )));
    assert!(!is_known_ephemeral(&taint(
        "node.kubernetes.io/unreachable",
        "",
        TaintEffect::NoExecute
    )));
}

#[test]
fn readiness_prefixed_taints_are_ephemeral_with_any_effect() {
    assert!(is_known_ephemeral(&taint(
        "readiness.k8s.io/my-rule",
        "",
        TaintEffect::NoSchedule
    )));
    assert!(is_known_ephemeral(&taint(
        "readiness.k8s.io/another",
        "",
        TaintEffect::NoExecute
    )));
    assert!(!is_known_ephemeral(&taint(
        "foo/readiness.k8s.io/bar",
        "",
        TaintEffect::NoSchedule
    )));
    assert!(!is_known_ephemeral(&taint(
        "example.com/some-taint",
        "",
        TaintEffect::NoSchedule
    )));
}

#[test]
fn merge_adds_only_taints_with_a_new_key_and_effect() {
    let base = [taint("a", "1", TaintEffect::NoSchedule)];
    let with = [
        taint("a", "2", TaintEffect::NoSchedule),
        taint("a", "", TaintEffect::NoExecute),
        taint("b", "", TaintEffect::NoSchedule),
    ];
    let merged = merge_taints(&base, &with);
    assert_eq!(merged, [base[0].clone(), with[1].clone(), with[2].clone()]);
}

#[test]
fn effects_parse_from_their_spelling_only() {
    for effect in ALL_EFFECTS {
        assert_eq!(effect.as_str().parse::<TaintEffect>(), Ok(effect));
    }
    assert!("".parse::<TaintEffect>().is_err() && "noschedule".parse::<TaintEffect>().is_err());
}

#[test]
fn valid_taints_pass_validation() {
    let taints = [
        taint("example.com/gpu", "true", TaintEffect::NoSchedule),
        taint("a", "", TaintEffect::NoExecute),
    ];
    let startup = [taint("example.com/gpu", "", TaintEffect::NoExecute)];
    assert_eq!(validate_taints(&taints, &startup), Ok(()));
}

#[test]
fn duplicate_key_and_effect_across_taints_and_startup_taints_is_rejected() {
    let taints = [taint("a", "1", TaintEffect::NoSchedule)];
    let startup = [taint("a", "2", TaintEffect::NoSchedule)];
    let errs = validate_taints(&taints, &startup).unwrap_err().0;
    assert_eq!(
        errs,
        [TaintValidationError::Duplicate {
            key: "a".into(),
            effect: TaintEffect::NoSchedule
        }]
    );
    let twice = [
        taint("a", "", TaintEffect::NoSchedule),
        taint("a", "", TaintEffect::NoSchedule),
    ];
    assert!(validate_taints(&twice, &[]).is_err());
}

#[test]
fn malformed_keys_and_values_are_rejected_with_their_field() {
    let errs = validate_taints(
        &[taint("bad key", "", TaintEffect::NoSchedule)],
        &[taint("k", "a/b", TaintEffect::NoSchedule)],
    )
    .unwrap_err()
    .0;
    assert!(matches!(
        &errs[..],
        [
            TaintValidationError::InvalidKey {
                field: "taints",
                ..
            },
            TaintValidationError::InvalidValue {
                field: "startupTaints",
                ..
            }
        ]
    ));
    assert!(validate_taints(&[taint("", "", TaintEffect::NoSchedule)], &[]).is_err());
}
