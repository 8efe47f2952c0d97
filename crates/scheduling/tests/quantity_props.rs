//! Property tests for `scheduling::quantity`: canonical round trips, arithmetic laws, agreement
//! with an independent floating-point reading, and parser robustness on arbitrary input (our
//! fuzzing).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use proptest::prelude::*;
use scheduling::quantity::{Format, NANOS_PER_UNIT, ParseQuantityErrorKind, Quantity};

/// Binary-suffixed strings parse capped at 2^63 - 1 units, so binary round trips stay below it.
const BINARY_CAP: i128 = i64::MAX as i128 * NANOS_PER_UNIT;

fn format() -> impl Strategy<Value = Format> {
    prop_oneof![
        Just(Format::DecimalSI),
        Just(Format::BinarySI),
        Just(Format::DecimalExponent)
    ]
}

/// Nano-unit values with the shapes quantities have: anything, whole units, round decimals,
/// and multiples of powers of 1024.
fn nanos() -> impl Strategy<Value = i128> {
    prop_oneof![
        (-i128::MAX..=i128::MAX),
        any::<i64>().prop_map(|units| i128::from(units) * NANOS_PER_UNIT),
        (-999_i128..=999, 0_u32..=38)
            .prop_map(|(mantissa, power)| mantissa.saturating_mul(10_i128.pow(power))),
        (-4096_i128..=4096, 0_u32..=6)
            .prop_map(|(mantissa, power)| mantissa * 1024_i128.pow(power) * NANOS_PER_UNIT),
        (-2000_i128..=2000),
    ]
}

fn quantity() -> impl Strategy<Value = Quantity> {
    (nanos(), format()).prop_filter_map("binary values above the parse cap", |(nanos, format)| {
        if format == Format::BinarySI && nanos.unsigned_abs() > BINARY_CAP.unsigned_abs() {
            return None;
        }
        Quantity::from_nanos(nanos, format)
    })
}

fn hash_of(value: Quantity) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// The multiplier of a suffix, as a float, for the independent reading.
fn suffix_multiplier(suffix: &str) -> Option<f64> {
    let decimal = |exponent: i32| Some(10_f64.powi(exponent));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
            let power = "KMGTPE".find(suffix.get(..1)?)?;
            Some(1024_f64.powi(i32::try_from(power).ok()? + 1))
        }
        _ => decimal(suffix.get(1..)?.parse().ok()?),
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn canonical_string_parses_back_to_the_same_value(value in quantity()) {
        let parse = |text: &str| text.parse::<Quantity>().map_err(|e| TestCaseError::fail(format!("{e}")));
        let canonical = value.to_string();
        let reparsed = parse(&canonical)?;
        prop_assert_eq!(reparsed, value, "{}", canonical);
        // A binary value printed without a suffix ("10000") reparses as decimal ("10k"), as in
        // Kubernetes, so the string is a fixed point from the first reparse on.
        let settled = reparsed.to_string();
        if value.format() != Format::BinarySI {
            prop_assert_eq!(&settled, &canonical);
        }
        prop_assert_eq!(parse(&settled)?.to_string(), settled);
    }

    #[test]
    fn add_then_sub_is_the_identity(a in quantity(), b in quantity()) {
        if let Some(sum) = a.checked_add(b) {
            prop_assert_eq!(sum.checked_sub(b), Some(a));
            prop_assert_eq!(b.checked_add(a), Some(sum));
        } else {
            prop_assert!(a.saturating_add(b) == Quantity::MAX || a.saturating_add(b) == Quantity::MIN);
        }
    }

    #[test]
    fn ordering_agrees_with_the_sign_of_the_difference(a in quantity(), b in quantity()) {
        if let Some(difference) = a.checked_sub(b) {
            prop_assert_eq!(a.cmp(&b), difference.signum().cmp(&0));
            prop_assert_eq!(a == b, difference.is_zero());
        }
        prop_assert_eq!(a.cmp(&b), a.as_nanos().cmp(&b.as_nanos()));
    }

    #[test]
    fn negation_is_an_involution_and_mirrors_order(a in quantity(), b in quantity()) {
        prop_assert_eq!(-(-a), a);
        prop_assert_eq!((-a).cmp(&-b), b.cmp(&a));
        prop_assert_eq!((-a).to_string(), if a.is_zero() { "0".into() } else if a.is_negative() {
            a.to_string().trim_start_matches('-').to_string()
        } else {
            format!("-{a}")
        });
    }

    #[test]
    fn equal_values_hash_equally_whatever_the_format(value in quantity(), other in format()) {
        let reformatted = value.with_format(other);
        prop_assert_eq!(reformatted, value);
        prop_assert_eq!(hash_of(reformatted), hash_of(value));
    }

    #[test]
    fn milli_value_is_the_smallest_enclosing_milli_count(value in quantity()) {
        let milli = i128::from(value.milli_value());
        if milli.abs() < i128::from(i64::MAX) {
            let nanos = value.as_nanos();
            prop_assert_eq!(milli.signum(), nanos.signum());
            prop_assert!(milli.abs() * 1_000_000 >= nanos.abs());
            prop_assert!((milli.abs() - 1) * 1_000_000 < nanos.abs());
        }
    }

    #[test]
    fn mul_matches_repeated_addition(value in quantity(), factor in -5_i64..=5) {
        let mut sum = Some(Quantity::ZERO);
        for _ in 0..factor.unsigned_abs() {
            sum = sum.and_then(|s| s.checked_add(if factor < 0 { -value } else { value }));
        }
        prop_assert_eq!(value.checked_mul(factor), sum);
    }

    #[test]
    fn arbitrary_strings_never_panic_and_accepted_ones_round_trip(input in any::<String>()) {
        if let Ok(value) = input.parse::<Quantity>() {
            let reparsed: Quantity = value.to_string().parse()
                .map_err(|e| TestCaseError::fail(format!("{e}")))?;
            prop_assert_eq!(reparsed, value);
        }
    }

    #[test]
    fn quantity_like_strings_never_panic(
        input in "[-+]?[0-9.]{0,45}[eEinumkKMGTPE]{0,3}[-+]?[0-9]{0,12}"
    ) {
        match input.parse::<Quantity>() {
            Ok(value) => {
                let reparsed: Quantity = value.to_string().parse()
                    .map_err(|e| TestCaseError::fail(format!("{e}")))?;
                prop_assert_eq!(reparsed, value);
            }
            Err(error) => prop_assert!(input.starts_with(error.input().trim_end_matches('…'))),
        }
    }

    #[test]
    fn value_agrees_with_an_independent_float_reading(
        sign in "[-+]?",
        integer in "[0-9]{0,20}",
        fraction in proptest::option::of("[0-9]{0,20}"),
        suffix in "(|n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][-+]?[0-9]{1,2})",
    ) {
        let number = match &fraction {
            Some(fraction) => format!("{integer}.{fraction}"),
            None => integer.clone(),
        };
        let input = format!("{sign}{number}{suffix}");
        let has_digits = !integer.is_empty() || fraction.as_ref().is_some_and(|f| !f.is_empty());
        let parsed = input.parse::<Quantity>();
        if !has_digits {
            let kind = if input.is_empty() { ParseQuantityErrorKind::Empty } else { ParseQuantityErrorKind::NoDigits };
            prop_assert_eq!(parsed.map_err(|e| e.kind()), Err(kind));
            return Ok(());
        }
        let multiplier = suffix_multiplier(&suffix).ok_or_else(|| TestCaseError::fail("suffix"))?;
        let magnitude: f64 = format!("0{number}").parse::<f64>().map_err(|e| TestCaseError::fail(format!("{e}")))?;
        let mut expected = magnitude * multiplier;
        if suffix.ends_with('i') {
            expected = expected.min(i64::MAX as f64);
        }
        if sign == "-" {
            expected = -expected;
        }
        match parsed {
            Ok(value) => {
                let actual = value.as_nanos() as f64 / 1e9;
                // Exact up to rounding away from zero to the next nano-unit, plus float error.
                let float_error = expected.abs() * 1e-12;
                prop_assert!((actual - expected).abs() <= 1e-9 + float_error, "{input}: {actual} vs {expected}");
                prop_assert!(actual.abs() >= expected.abs() - float_error, "{input}: {actual} vs {expected}");
            }
            Err(error) => {
                prop_assert_eq!(error.kind(), ParseQuantityErrorKind::OutOfRange, "{}", input);
                prop_assert!(expected.abs() >= 1.7e29, "{input}: {expected} is in range");
            }
        }
    }
}
