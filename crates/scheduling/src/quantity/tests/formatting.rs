//! Canonical printing tests: apimachinery's `TestQuantityString`, `TestQuantityParseEmit` and
//! `TestParseQuantity` tables, and the suffix-selection rules.

use super::*;

/// apimachinery `TestQuantityString`: (mantissa, exponent, format) → canonical, alternate input.
const STRING_TABLE: &[(i128, i32, Format, &str, &str)] = &[
    (1 << 30, 0, Bin, "1Gi", "1024Mi"),
    (300 << 20, 0, Bin, "300Mi", "307200Ki"),
    (6 * 1024, 0, Bin, "6Ki", ""),
    (1001 << 30, 0, Bin, "1001Gi", "1025024Mi"),
    (1 << 40, 0, Bin, "1Ti", "1024Gi"),
    (5, 0, Bin, "5", "5000m"),
    (500, -3, Bin, "500m", "0.5"),
    (1, 9, Si, "1G", "1000M"),
    (1000, 6, Si, "1G", "0.001T"),
    (1_000_000, 3, Si, "1G", ""),
    (1_000_000_000, 0, Si, "1G", ""),
    (1, -3, Si, "1m", "1000u"),
    (80, -3, Si, "80m", ""),
    (1080, -3, Si, "1080m", "1.08"),
    (108, -2, Si, "1080m", "1080000000n"),
    (10800, -4, Si, "1080m", ""),
    (300, 6, Si, "300M", ""),
    (1, 12, Si, "1T", ""),
    (1_234_567, 6, Si, "1234567M", ""),
    (1_234_567, -3, Bin, "1234567m", ""),
    (3, 3, Si, "3k", ""),
    (1025, 0, Bin, "1025", ""),
    (0, 0, Si, "0", ""),
    (0, 0, Bin, "0", ""),
    (1, 9, Exp, "1e9", ".001e12"),
    (1, -3, Exp, "1e-3", "0.001e0"),
    (1, -9, Exp, "1e-9", "1000e-12"),
    (80, -3, Exp, "80e-3", ""),
    (300, 6, Exp, "300e6", ""),
    (1, 12, Exp, "1e12", ""),
    (1, 3, Exp, "1e3", ""),
    (3, 3, Exp, "3e3", ""),
    (0, 0, Exp, "0", "00"),
    (1, -9, Si, "1n", ""),
    (80, -9, Si, "80n", ""),
    (1080, -9, Si, "1080n", ""),
    (108, -8, Si, "1080n", ""),
    (1, -6, Si, "1u", ""),
    (80, -6, Si, "80u", ""),
    (1080, -6, Si, "1080u", ""),
];

#[test]
fn formats_canonically_like_apimachinery_string_table() {
    for &(mantissa, exponent, format, expected, alternate) in STRING_TABLE {
        let value = Quantity::from_nanos(dec(mantissa, exponent), format).unwrap();
        assert_eq!(value.to_string(), expected, "{value:?}");
        assert_eq!(q(expected).to_string(), expected, "reparse {expected}");
        if !alternate.is_empty() {
            assert_eq!(q(alternate).to_string(), expected, "alternate {alternate}");
        }
        if !value.is_zero() {
            assert_eq!((-value).to_string(), format!("-{expected}"), "{value:?}");
        }
    }
}

#[test]
fn parse_then_emit_matches_apimachinery_parse_emit_table() {
    let table = [
        ("1Ki", "1Ki"),
        ("1Mi", "1Mi"),
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("1000M", "1G"),
        (".001Ki", "1024m"),
        (".000001Ki", "1024u"),
        (".000000001Ki", "1024n"),
        (".000000000001Ki", "2n"),
    ];
    for (input, expected) in table {
        assert_eq!(q(input).to_string(), expected, "{input}");
        assert_eq!(
            q(&format!("-{input}")).to_string(),
            format!("-{expected}"),
            "-{input}"
        );
    }
}

/// apimachinery `TestParseQuantity`: values around the int64 and 18/19/20-digit boundaries.
const BOUNDARY_TABLE: &[(&str, &str)] = &[
    ("999999999999999999", ""),
    ("999999999999999999.0", "999999999999999999"),
    ("999999999999999999.1", "999999999999999999100m"),
    ("9999999999999999999", ""),
    ("1E", ""),
    ("1000000000000000000", "1E"),
    ("9999999999999999999.0", "9999999999999999999"),
    ("1.0E", "1E"),
    ("1000000000000000000.0", "1E"),
    ("9999999999999999999000m", "9999999999999999999"),
    ("9999999999999999999.1", "9999999999999999999100m"),
    ("1.0000000000000000001E", "1000000000000000000100m"),
    ("1000000000000000000.1", "1000000000000000000100m"),
    ("1.000000000000000001E", "1000000000000000001"),
    ("1000000000000000001", ""),
    ("10E", ""),
    ("10000000000000000000", "10E"),
    ("10.0E", "10E"),
    ("10000000000000000000.0", "10E"),
    ("10000000000000000000000m", "10E"),
    ("10.0000000000000000001E", "10000000000000000000100m"),
    ("10000000000000000000.1", "10000000000000000000100m"),
    ("10.000000000000000001E", "10000000000000000001"),
    ("10000000000000000001", ""),
    ("9223372036854775809", ""),
    ("9223372036854775806", ""),
    ("9223372036854775809.0", "9223372036854775809"),
    ("9223372036854775806000m", "9223372036854775806"),
    ("9223372036854775809.1", "9223372036854775809100m"),
    ("9223372036854775808", ""),
    ("9223372036854775807", ""),
    ("9223372036854775808.0", "9223372036854775808"),
    ("9223372036854775807000m", "9223372036854775807"),
    ("9223372036854775807.1", "9223372036854775807100m"),
    ("9223372036854775808.1", "9223372036854775808100m"),
];

#[test]
fn reserializes_int64_boundary_values_like_apimachinery() {
    for &(input, canonical) in BOUNDARY_TABLE {
        let expected = if canonical.is_empty() {
            input
        } else {
            canonical
        };
        assert_eq!(q(input).to_string(), expected, "{input}");
        assert_eq!(
            q(&format!("-{input}")).to_string(),
            format!("-{expected}"),
            "-{input}"
        );
    }
}

#[test]
fn decimal_si_beyond_exa_falls_back_to_exponent_notation() {
    assert_eq!(q("1000E").to_string(), "1e21");
    assert_eq!(q("1e29").with_format(Si).to_string(), "100e27");
    assert_eq!(
        Quantity::MAX.to_string(),
        "170141183460469231731687303715884105727n"
    );
}

#[test]
fn binary_suffix_not_multiple_of_ki_formats_as_decimal() {
    assert_eq!(q("1.5Gi").to_string(), "1536Mi");
    assert_eq!(q("1.5Ki").to_string(), "1536");
    assert_eq!(q("1.1Ki").to_string(), "1126400m");
    assert_eq!(q("1023").with_format(Bin).to_string(), "1023");
    assert_eq!(q("1024.5").with_format(Bin).to_string(), "1024500m");
    assert_eq!(q("-1536Mi").to_string(), "-1536Mi");
}

#[test]
fn binary_whole_value_printed_without_suffix_reparses_as_decimal() {
    // As in Kubernetes: "10000" carries no binary suffix, so it comes back DecimalSI.
    let binary = Quantity::from_bytes(10_000);
    assert_eq!(binary.to_string(), "10000");
    let reparsed = q(&binary.to_string());
    assert_eq!(reparsed, binary);
    assert_eq!(reparsed.format(), Si);
    assert_eq!(reparsed.to_string(), "10k");
}

#[test]
fn binary_formatting_stops_at_exbi_instead_of_dropping_the_exponent() {
    let huge = Quantity::from_bytes(1 << 60).checked_mul(1024).unwrap();
    assert_eq!(huge.to_string(), "1024Ei");
}

#[test]
fn brief_examples_format_canonically() {
    let table = [
        ("1.5Gi", "1536Mi"),
        ("1000m", "1"),
        ("0.5", "500m"),
        ("1536Mi", "1536Mi"),
        ("1e3", "1e3"),
        ("1200m", "1200m"),
        ("100Mi", "100Mi"),
        ("12e6", "12e6"),
        ("0", "0"),
        ("1.2345", "1234500u"),
        ("18446744073709551616", "18446744073709551616"),
        // apimachinery echoes these non-canonical inputs from its string cache; we canonicalize.
        ("+1", "1"),
        ("01", "1"),
        ("1E3", "1e3"),
    ];
    for (input, expected) in table {
        assert_eq!(q(input).to_string(), expected, "{input}");
    }
}

#[test]
fn display_honours_width_and_alignment() {
    assert_eq!(
        format!("{:>8}|{:<6}|", q("100m"), q("1Gi")),
        "    100m|1Gi   |"
    );
}

#[test]
fn debug_shows_canonical_value_and_format() {
    assert_eq!(format!("{:?}", q("1.5Gi")), "Quantity(1536Mi BinarySI)");
}
