//! Parsing tests: apimachinery's `TestQuantityParse` table and invalid inputs, rounding to the
//! nano-unit, the binary cap and the supported range.

use super::*;

/// apimachinery `TestQuantityParse`: input → value (mantissa, exponent) and remembered format.
const PARSE_TABLE: &[(&str, i128, i32, Format)] = &[
    ("0", 0, 0, Si),
    ("0n", 0, 0, Si),
    ("0u", 0, 0, Si),
    ("0m", 0, 0, Si),
    ("0Ki", 0, 0, Bin),
    ("0k", 0, 0, Si),
    ("0Mi", 0, 0, Bin),
    ("0M", 0, 0, Si),
    ("0Gi", 0, 0, Bin),
    ("0G", 0, 0, Si),
    ("0Ti", 0, 0, Bin),
    ("0T", 0, 0, Si),
    ("1", 1, 0, Si),
    ("1Ki", 1024, 0, Bin),
    ("8Ki", 8 * 1024, 0, Bin),
    ("7Mi", 7 << 20, 0, Bin),
    ("6Gi", 6 << 30, 0, Bin),
    ("5Ti", 5 << 40, 0, Bin),
    ("4Pi", 4 << 50, 0, Bin),
    ("3Ei", 3 << 60, 0, Bin),
    ("10Ti", 10 << 40, 0, Bin),
    ("100Ti", 100 << 40, 0, Bin),
    ("5n", 5, -9, Si),
    ("4u", 4, -6, Si),
    ("3m", 3, -3, Si),
    ("9", 9, 0, Si),
    ("8k", 8, 3, Si),
    ("50k", 5, 4, Si),
    ("7M", 7, 6, Si),
    ("6G", 6, 9, Si),
    ("5T", 5, 12, Si),
    ("40T", 4, 13, Si),
    ("300T", 3, 14, Si),
    ("2P", 2, 15, Si),
    ("1E", 1, 18, Si),
    ("1E-3", 1, -3, Exp),
    ("1e3", 1, 3, Exp),
    ("1E6", 1, 6, Exp),
    ("1e9", 1, 9, Exp),
    ("1E12", 1, 12, Exp),
    ("1e15", 1, 15, Exp),
    ("1E18", 1, 18, Exp),
    ("1e14", 1, 14, Exp),
    ("1e13", 1, 13, Exp),
    ("100.035k", 100_035, 0, Si),
    ("0.001", 1, -3, Si),
    ("0.0005k", 5, -1, Si),
    ("0.005", 5, -3, Si),
    ("0.05", 5, -2, Si),
    ("0.5", 5, -1, Si),
    ("0.00050k", 5, -1, Si),
    ("0.00500", 5, -3, Si),
    ("0.05000", 5, -2, Si),
    ("0.50000", 5, -1, Si),
    ("0.5e0", 5, -1, Exp),
    ("0.5e-1", 5, -2, Exp),
    ("0.5e-2", 5, -3, Exp),
    ("10.035M", 10_035, 3, Si),
    ("1.2e3", 12, 2, Exp),
    ("1.3E+6", 13, 5, Exp),
    ("1.40e9", 14, 8, Exp),
    ("1.53E12", 153, 10, Exp),
    ("1.6e15", 16, 14, Exp),
    ("1.7E18", 17, 17, Exp),
    ("9.01", 901, -2, Si),
    ("8.1k", 81, 2, Si),
    ("7.123456M", 7_123_456, 0, Si),
    ("6.987654321G", 6_987_654_321, 0, Si),
    ("5.444T", 5444, 9, Si),
    ("40.1T", 401, 11, Si),
    ("300.2T", 3002, 11, Si),
    ("2.5P", 25, 14, Si),
    ("1.01E", 101, 16, Si),
    // Things that round up to the nano-unit.
    ("3.001n", 4, -9, Si),
    ("1.1E-9", 2, -9, Exp),
    ("0.0000000001", 1, -9, Si),
    ("0.0000000005", 1, -9, Si),
    ("0.00000000050", 1, -9, Si),
    ("0.5e-9", 1, -9, Exp),
    ("0.9n", 1, -9, Si),
    ("0.00000012345", 124, -9, Si),
    ("0.00000012354", 124, -9, Si),
    // Binary values are capped at 2^63 - 1 units.
    ("9Ei", i64::MAX as i128, 0, Bin),
    ("9223372036854775807Ki", i64::MAX as i128, 0, Bin),
    ("12E", 12, 18, Si),
    ("100.035Ki", 10_243_584, -2, Bin),
    ("0.5Mi", 512 * 1024, 0, Bin),
    ("0.05Gi", 536_870_912, -1, Bin),
    ("0.025Ti", 274_877_906_944, -1, Bin),
    // "Things written by trolls".
    ("0.000000000001Ki", 2, -9, Si),
    (".001", 1, -3, Si),
    (".0001k", 100, -3, Si),
    ("1.", 1, 0, Si),
    ("1.G", 1, 9, Si),
];

#[test]
fn parses_apimachinery_table_with_value_and_format() {
    for &(input, mantissa, exponent, format) in PARSE_TABLE {
        let parsed = q(input);
        assert_eq!(parsed.as_nanos(), dec(mantissa, exponent), "{input}");
        assert_eq!(parsed.format(), format, "{input}");
    }
}

#[test]
fn explicit_sign_negates_or_keeps_every_table_entry() {
    for &(input, mantissa, exponent, format) in PARSE_TABLE {
        let negated = q(&format!("-{input}"));
        assert_eq!(negated.as_nanos(), -dec(mantissa, exponent), "-{input}");
        assert_eq!(negated.format(), format, "-{input}");
        let plus = q(&format!("+{input}"));
        assert_eq!(plus.as_nanos(), dec(mantissa, exponent), "+{input}");
        assert_eq!(plus.format(), format, "+{input}");
    }
}

#[test]
fn rejects_what_kubernetes_rejects_with_the_reason() {
    use ParseQuantityErrorKind::*;
    let table = [
        ("", Empty),
        (" 1", Malformed),
        ("1 ", Malformed),
        ("1.2.3", Malformed),
        ("1.1.M", Malformed),
        ("1+1.0M", Malformed),
        ("16GB", Malformed),
        ("1KB", Malformed),
        ("1Mii", UnknownSuffix),
        ("0.1mi", UnknownSuffix),
        ("0.1am", Malformed),
        ("aoeu", Malformed),
        (".5i", UnknownSuffix),
        ("1i", UnknownSuffix),
        ("-3.01i", UnknownSuffix),
        ("-3.01e-", UnknownSuffix),
        ("1e", UnknownSuffix),
        ("1e+", UnknownSuffix),
        ("1ee3", UnknownSuffix),
        ("1e1.5", Malformed),
        ("1Ki3", UnknownSuffix),
        ("1ki", UnknownSuffix),
        ("1K", UnknownSuffix),
        ("--1", NoDigits),
        ("+-1", NoDigits),
        ("e3", NoDigits),
        (".", NoDigits),
        ("-.", NoDigits),
        ("+", NoDigits),
        ("-", NoDigits),
        ("Ki", NoDigits),
        ("m", NoDigits),
        ("1\u{0}", Malformed),
        ("１", Malformed),
        ("1e2147483648", ExponentOutOfRange),
        ("1e-2147483649", ExponentOutOfRange),
        ("1e99999999999999999999999", ExponentOutOfRange),
    ];
    for (input, expected) in table {
        assert_eq!(kind(input), expected, "{input:?}");
    }
}

#[test]
fn error_names_the_input_and_truncates_long_input() {
    let error = "16GB".parse::<Quantity>().unwrap_err();
    assert_eq!(error.input(), "16GB");
    assert!(error.to_string().contains("\"16GB\""), "{error}");
    let long = "9".repeat(100) + "x";
    let error = long.parse::<Quantity>().unwrap_err();
    assert_eq!(error.input(), format!("{}…", "9".repeat(64)));
}

#[test]
fn decimal_values_beyond_the_i128_nano_range_are_out_of_range() {
    assert_eq!(q("1e29").as_nanos(), 10_i128.pow(38));
    assert_eq!(
        q("170141183460.469231731687303715884105727E").as_nanos(),
        i128::MAX
    );
    assert_eq!(
        kind("170141183460.469231731687303715884105728E"),
        ParseQuantityErrorKind::OutOfRange
    );
    assert_eq!(kind("2e29"), ParseQuantityErrorKind::OutOfRange);
    assert_eq!(kind("-2e29"), ParseQuantityErrorKind::OutOfRange);
    assert_eq!(kind(&"9".repeat(40)), ParseQuantityErrorKind::OutOfRange);
    assert_eq!(kind("1e2147483647"), ParseQuantityErrorKind::OutOfRange);
}

#[test]
fn zero_mantissa_is_zero_whatever_the_exponent() {
    for input in [
        "0e2147483647",
        "0e-2147483648",
        "000.000Ei",
        "-0",
        "+0.0e5",
        "00",
    ] {
        assert!(q(input).is_zero(), "{input}");
        assert_eq!(q(input).to_string(), "0", "{input}");
    }
}

#[test]
fn values_finer_than_a_nano_round_away_from_zero() {
    assert_eq!(q("1e-2147483648").as_nanos(), 1);
    assert_eq!(q("-1e-30").as_nanos(), -1);
    assert_eq!(
        q("1.000000000000000000000000000000001").as_nanos(),
        1_000_000_001
    );
    assert_eq!(
        q("0.000000000000000000000000000000000000000000000001Ki").as_nanos(),
        1
    );
    assert_eq!(q("-0.5n").as_nanos(), -1);
    // 0.0005Ki is exactly 512 milli-units: no rounding.
    assert_eq!(q("0.0005Ki").as_nanos(), 512_000_000);
}

#[test]
fn binary_quantities_are_capped_at_i64_max_units() {
    let cap = i128::from(i64::MAX) * NANOS_PER_UNIT;
    for input in [
        "8Ei",
        "9Ei",
        "99999999999999999999999999999999999999999999Ki",
    ] {
        assert_eq!(q(input).as_nanos(), cap, "{input}");
        assert_eq!(q(&format!("-{input}")).as_nanos(), -cap, "-{input}");
    }
    assert_eq!(q("8Ei").to_string(), "9223372036854775807");
    assert_eq!(q("7.99999999999999999999Ei").as_nanos(), cap);
}

#[test]
fn binary_value_below_one_unit_is_remembered_as_decimal() {
    assert_eq!(q("0.5Ki").format(), Bin);
    assert_eq!(q("0.0001Ki").format(), Si);
    assert_eq!(q("0.0001Ki").to_string(), "102400u");
}
