//! Behaviour of every annotation parser: valid forms, each invalid form naming the annotation.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeMap;

use api::well_known::capi::{self, capacity};
use scheduling::quantity::Quantity;
use scheduling::taints::{Taint, TaintEffect};

use super::*;

fn q(text: &str) -> Quantity {
    Quantity::parse(text).unwrap()
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn quantities_accept_kubernetes_forms_and_trim_blanks() {
    for (text, expected) in [
        ("16", "16"),
        ("16000m", "16"),
        ("4G", "4G"),
        ("128Gi", "128Gi"),
        ("1e9", "1G"),
        (" 2 ", "2"),
    ] {
        assert_eq!(
            parse_quantity(capacity::CPU, Some(text)).unwrap(),
            Some(q(expected)),
            "{text}"
        );
    }
}

#[test]
fn an_empty_or_absent_quantity_is_absent_not_an_error() {
    assert_eq!(parse_quantity(capacity::MEMORY, None).unwrap(), None);
    assert_eq!(parse_quantity(capacity::MEMORY, Some("")).unwrap(), None);
    assert_eq!(parse_quantity(capacity::MEMORY, Some("  ")).unwrap(), None);
}

#[test]
fn an_invalid_quantity_names_the_annotation_and_the_text() {
    for text in ["16GB", "4 cores", "abc", "1.2.3", "Ki"] {
        let error = parse_quantity(capacity::MEMORY, Some(text)).unwrap_err();
        assert_eq!(error.annotation, capacity::MEMORY);
        assert_eq!(error.value, text);
        assert!(
            matches!(error.kind, AnnotationErrorKind::Quantity(_)),
            "{text}"
        );
        let message = error.to_string();
        assert!(
            message.contains(capacity::MEMORY) && message.contains(text),
            "{message}"
        );
    }
}

#[test]
fn a_negative_quantity_is_an_error() {
    let error = parse_quantity(capacity::CPU, Some("-1")).unwrap_err();
    assert_eq!(error.kind, AnnotationErrorKind::Negative);
}

#[test]
fn max_pods_is_a_base_ten_integer_and_zero_or_absent_means_default() {
    assert_eq!(parse_max_pods(Some("110")).unwrap(), Some(110));
    assert_eq!(parse_max_pods(Some(" 58 ")).unwrap(), Some(58));
    assert_eq!(parse_max_pods(Some("0")).unwrap(), None);
    assert_eq!(parse_max_pods(Some("")).unwrap(), None);
    assert_eq!(parse_max_pods(None).unwrap(), None);
}

#[test]
fn max_pods_rejects_quantities_fractions_and_negatives() {
    for (text, kind) in [
        ("1.5", AnnotationErrorKind::NotAnInteger),
        ("2k", AnnotationErrorKind::NotAnInteger),
        ("0x10", AnnotationErrorKind::NotAnInteger),
        ("-3", AnnotationErrorKind::Negative),
    ] {
        let error = parse_max_pods(Some(text)).unwrap_err();
        assert_eq!(
            (error.annotation, error.kind),
            (capacity::MAX_PODS, kind),
            "{text}"
        );
    }
}

#[test]
fn a_gpu_needs_a_positive_count_and_a_type() {
    assert_eq!(
        parse_gpu(Some("2"), Some("nvidia.com/gpu")).unwrap(),
        Some(("nvidia.com/gpu".to_owned(), Quantity::from_value(2)))
    );
    assert_eq!(parse_gpu(Some("0"), Some("nvidia.com/gpu")).unwrap(), None);
    assert_eq!(parse_gpu(None, Some("nvidia.com/gpu")).unwrap(), None);
    let missing = parse_gpu(Some("1"), None).unwrap_err();
    assert_eq!(
        (missing.annotation, missing.kind),
        (capacity::GPU_COUNT, AnnotationErrorKind::GpuTypeMissing)
    );
    let bad_count = parse_gpu(Some("1.5"), Some("nvidia.com/gpu")).unwrap_err();
    assert_eq!(bad_count.annotation, capacity::GPU_COUNT);
    let bad_type = parse_gpu(Some("1"), Some("nvidia.com/gpu/x")).unwrap_err();
    assert_eq!(bad_type.annotation, capacity::GPU_TYPE);
}

#[test]
fn sizes_are_non_negative_32_bit_integers() {
    assert_eq!(parse_size(capi::MAX_SIZE, Some("10")).unwrap(), Some(10));
    assert_eq!(parse_size(capi::MAX_SIZE, Some("0")).unwrap(), Some(0));
    assert_eq!(parse_size(capi::MAX_SIZE, None).unwrap(), None);
    for text in ["ten", "-1", "2147483648", "1.0"] {
        let error = parse_size(capi::MIN_SIZE, Some(text)).unwrap_err();
        assert_eq!(error.annotation, capi::MIN_SIZE, "{text}");
    }
}

#[test]
fn prices_are_plain_non_negative_decimals() {
    for (text, expected) in [
        ("0.50", 0.5),
        ("3", 3.0),
        ("0.192", 0.192),
        (" 1.25 ", 1.25),
    ] {
        assert_eq!(
            parse_price(capi::PRICE, Some(text)).unwrap(),
            Some(expected)
        );
    }
    for text in [
        "-1", "+1", "1e3", "inf", "NaN", ".5", "1.", "1,5", "$1", "1.2.3",
    ] {
        let error = parse_price(capi::PRICE, Some(text)).unwrap_err();
        assert_eq!(
            (error.annotation, error.kind),
            (capi::PRICE, AnnotationErrorKind::NotAPrice),
            "{text}"
        );
    }
    assert_eq!(parse_price_text(&"9".repeat(400)), None, "not finite");
}

#[test]
fn labels_are_trimmed_validated_and_split_at_the_first_equals() {
    let parsed =
        parse_labels(" a=b , example.com/x=y,empty=,, node.kubernetes.io/instance-type=m5.large ,")
            .unwrap();
    assert_eq!(
        parsed,
        labels(&[
            ("a", "b"),
            ("example.com/x", "y"),
            ("empty", ""),
            ("node.kubernetes.io/instance-type", "m5.large"),
        ])
    );
    assert!(parse_labels("").unwrap().is_empty());
}

#[test]
fn a_label_entry_without_equals_is_an_error_not_skipped() {
    let error = parse_labels("a=b,c").unwrap_err();
    assert_eq!(error.annotation, capacity::LABELS);
    assert_eq!(
        error.kind,
        AnnotationErrorKind::MissingSeparator {
            entry: "c".into(),
            separator: '='
        }
    );
}

#[test]
fn bad_label_keys_values_and_duplicates_are_errors() {
    let kind = |text: &str| parse_labels(text).unwrap_err().kind;
    assert!(matches!(kind("=x"), AnnotationErrorKind::EmptyKey { .. }));
    assert!(matches!(
        kind("a b=c"),
        AnnotationErrorKind::InvalidKey { .. }
    ));
    assert!(matches!(
        kind("Example.com/x=y"),
        AnnotationErrorKind::InvalidKey { .. }
    ));
    assert!(matches!(
        kind("a=b=c"),
        AnnotationErrorKind::InvalidValue { .. }
    ));
    assert!(matches!(
        kind("a=-b"),
        AnnotationErrorKind::InvalidValue { .. }
    ));
    assert!(matches!(
        kind("a=b,a=b"),
        AnnotationErrorKind::DuplicateKey { .. }
    ));
}

#[test]
fn taints_read_key_value_and_effect() {
    let taints =
        parse_taints("dedicated=gpu:NoSchedule, spot:PreferNoSchedule,k=:NoExecute").unwrap();
    assert_eq!(
        taints,
        vec![
            Taint::new("dedicated", "gpu", TaintEffect::NoSchedule),
            Taint::new("spot", "", TaintEffect::PreferNoSchedule),
            Taint::new("k", "", TaintEffect::NoExecute),
        ]
    );
    assert!(parse_taints(" , ").unwrap().is_empty());
}

#[test]
fn bad_taints_are_errors_naming_the_taints_annotation() {
    let kind = |text: &str| {
        let error = parse_taints(text).unwrap_err();
        assert_eq!(error.annotation, capacity::TAINTS);
        error.kind
    };
    assert!(matches!(
        kind("a=b"),
        AnnotationErrorKind::MissingSeparator { separator: ':', .. }
    ));
    assert!(matches!(
        kind("a=b:NoSchedule:x"),
        AnnotationErrorKind::MalformedTaint { .. }
    ));
    assert!(matches!(
        kind("a=b:noschedule"),
        AnnotationErrorKind::UnknownEffect { .. }
    ));
    assert!(matches!(
        kind("a=b:"),
        AnnotationErrorKind::UnknownEffect { .. }
    ));
    assert!(matches!(
        kind("=b:NoSchedule"),
        AnnotationErrorKind::EmptyKey { .. }
    ));
    assert!(matches!(
        kind("a/b/c:NoSchedule"),
        AnnotationErrorKind::InvalidKey { .. }
    ));
    assert!(matches!(
        kind("a=b c:NoSchedule"),
        AnnotationErrorKind::InvalidValue { .. }
    ));
    assert!(matches!(
        kind("a=x:NoSchedule,a=y:NoSchedule"),
        AnnotationErrorKind::DuplicateTaint { .. }
    ));
}

#[test]
fn the_same_taint_key_with_different_effects_is_allowed() {
    assert_eq!(parse_taints("a:NoSchedule,a:NoExecute").unwrap().len(), 2);
}

#[test]
fn long_offending_values_are_cut_in_errors() {
    let text = format!("{}=", "x".repeat(500));
    let error = parse_labels(&text).unwrap_err();
    assert!(error.value.chars().count() <= MAX_ERROR_VALUE_CHARS + 1);
}

#[test]
fn every_annotation_of_a_machine_deployment_is_parsed_together() {
    let annotations = labels(&[
        (capacity::CPU, "4"),
        (capacity::MEMORY, "16Gi"),
        (capacity::EPHEMERAL_DISK, "100Gi"),
        (capacity::MAX_PODS, "58"),
        (capacity::GPU_COUNT, "1"),
        (capacity::GPU_TYPE, "nvidia.com/gpu"),
        (capacity::LABELS, "a=b"),
        (capacity::TAINTS, "gpu:NoSchedule"),
        (capi::MIN_SIZE, "1"),
        (capi::MAX_SIZE, "5"),
        (capi::PRICE, "0.75"),
        (capi::LEGACY_PRICE, "not a price, ignored"),
        ("unrelated", "ignored"),
    ]);
    let parsed = MachineDeploymentAnnotations::parse(&annotations).unwrap();
    assert_eq!(parsed.cpu, Some(q("4")));
    assert_eq!(parsed.memory, Some(q("16Gi")));
    assert_eq!(parsed.ephemeral_storage, Some(q("100Gi")));
    assert_eq!(parsed.max_pods, Some(58));
    assert_eq!(
        parsed.gpu,
        Some(("nvidia.com/gpu".into(), Quantity::from_value(1)))
    );
    assert_eq!(parsed.labels, labels(&[("a", "b")]));
    assert_eq!(parsed.taints.len(), 1);
    assert_eq!((parsed.min_size, parsed.max_size), (Some(1), Some(5)));
    assert_eq!(
        parsed.price,
        Some(AnnotatedPrice {
            price: 0.75,
            annotation: capi::PRICE
        })
    );
}

#[test]
fn the_legacy_price_is_used_when_ours_is_absent() {
    let parsed =
        MachineDeploymentAnnotations::parse(&labels(&[(capi::LEGACY_PRICE, "0.50")])).unwrap();
    assert_eq!(
        parsed.price,
        Some(AnnotatedPrice {
            price: 0.5,
            annotation: capi::LEGACY_PRICE
        })
    );
}

#[test]
fn every_bad_annotation_is_reported_not_just_the_first() {
    let annotations = labels(&[
        (capacity::CPU, "4 cores"),
        (capacity::MEMORY, "16GB"),
        (capacity::LABELS, "a"),
        (capi::PRICE, "-1"),
    ]);
    let errors = MachineDeploymentAnnotations::parse(&annotations).unwrap_err();
    let names: Vec<_> = errors.iter().map(|e| e.annotation).collect();
    assert_eq!(
        names,
        [
            capacity::CPU,
            capacity::MEMORY,
            capacity::LABELS,
            capi::PRICE
        ]
    );
}

#[test]
fn a_min_size_above_the_max_size_is_an_error_on_the_min_size() {
    let errors = MachineDeploymentAnnotations::parse(&labels(&[
        (capi::MIN_SIZE, "3"),
        (capi::MAX_SIZE, "2"),
    ]))
    .unwrap_err();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].annotation, capi::MIN_SIZE);
    assert_eq!(
        errors[0].kind,
        AnnotationErrorKind::MinAboveMax { min: 3, max: 2 }
    );
}
