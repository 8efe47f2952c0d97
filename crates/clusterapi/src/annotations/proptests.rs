//! Fuzzing: arbitrary annotation text never panics, and valid generated annotations round-trip.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeMap;

use api::well_known::capi::{self, capacity};
use proptest::prelude::*;
use scheduling::quantity::Quantity;
use scheduling::taints::{Taint, TaintEffect};

use super::*;

/// Text biased towards the separators and characters the parsers care about.
fn tricky() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-zA-Z0-9=:,./_ %+-]{0,40}",
        "[0-9.eEkKMGTPimun+-]{0,12}",
    ]
}

fn name_part() -> impl Strategy<Value = String> {
    "[a-z0-9]([a-z0-9_.-]{0,10}[a-z0-9])?"
}

fn label_key() -> impl Strategy<Value = String> {
    (
        proptest::option::of("[a-z0-9]{1,8}(\\.[a-z0-9]{1,8}){0,2}"),
        name_part(),
    )
        .prop_map(|(prefix, name)| match prefix {
            Some(prefix) => format!("{prefix}/{name}"),
            None => name,
        })
}

fn label_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[A-Za-z0-9]([A-Za-z0-9_.-]{0,10}[A-Za-z0-9])?"
    ]
}

fn effect() -> impl Strategy<Value = TaintEffect> {
    prop_oneof![
        Just(TaintEffect::NoSchedule),
        Just(TaintEffect::PreferNoSchedule),
        Just(TaintEffect::NoExecute),
    ]
}

proptest! {
    #[test]
    fn no_parser_panics_on_arbitrary_text(text in tricky(), other in tricky()) {
        let _ = parse_quantity(capacity::CPU, Some(&text));
        let _ = parse_max_pods(Some(&text));
        let _ = parse_gpu(Some(&text), Some(&other));
        let _ = parse_size(capi::MAX_SIZE, Some(&text));
        let _ = parse_price(capi::PRICE, Some(&text));
        let _ = parse_labels(&text);
        let _ = parse_taints(&text);
        let annotations: BTreeMap<String, String> = [
            capacity::CPU, capacity::MEMORY, capacity::EPHEMERAL_DISK, capacity::MAX_PODS,
            capacity::GPU_COUNT, capacity::LABELS, capacity::TAINTS, capi::MIN_SIZE,
            capi::MAX_SIZE, capi::PRICE,
        ]
        .into_iter()
        .map(|key| (key.to_owned(), text.clone()))
        .chain([(capacity::GPU_TYPE.to_owned(), other.clone())])
        .collect();
        let _ = MachineDeploymentAnnotations::parse(&annotations);
    }

    #[test]
    fn errors_always_name_their_annotation(text in tricky()) {
        if let Err(error) = parse_labels(&text) {
            prop_assert_eq!(error.annotation, capacity::LABELS);
            prop_assert!(error.to_string().contains(capacity::LABELS));
        }
        if let Err(error) = parse_taints(&text) {
            prop_assert_eq!(error.annotation, capacity::TAINTS);
        }
    }

    #[test]
    fn valid_labels_round_trip(map in proptest::collection::btree_map(label_key(), label_value(), 0..8)) {
        let text = map.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
        prop_assert_eq!(parse_labels(&text).unwrap(), map);
    }

    #[test]
    fn valid_taints_round_trip(
        entries in proptest::collection::btree_map((label_key(), effect()), label_value(), 0..8)
    ) {
        let taints: Vec<Taint> = entries
            .into_iter()
            .map(|((key, effect), value)| Taint::new(key, value, effect))
            .collect();
        let text = taints.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
        prop_assert_eq!(parse_taints(&text).unwrap(), taints);
    }

    #[test]
    fn valid_quantities_round_trip(value in 0_i64..1_000_000, suffix in "(|m|k|M|G|Ki|Mi|Gi)") {
        let text = format!("{value}{suffix}");
        let parsed = parse_quantity(capacity::MEMORY, Some(&text)).unwrap();
        prop_assert_eq!(parsed, Some(Quantity::parse(&text).unwrap()));
    }

    #[test]
    fn valid_integers_round_trip(value in 1_i64..1_000_000, size in 0_i32..i32::MAX) {
        prop_assert_eq!(parse_max_pods(Some(&value.to_string())).unwrap(), Some(value));
        prop_assert_eq!(parse_size(capi::MAX_SIZE, Some(&size.to_string())).unwrap(), Some(size));
    }

    #[test]
    fn valid_prices_round_trip(cents in 0_u64..10_000_000) {
        let text = format!("{}.{:02}", cents / 100, cents % 100);
        let parsed = parse_price(capi::PRICE, Some(&text)).unwrap().unwrap();
        prop_assert!((parsed - cents as f64 / 100.0).abs() < 1e-9);
    }
}
