//! Arithmetic tests: constructors, `value`/`milli_value` rounding, numeric equality, ordering and
//! hashing, and the format rules of add, sub, mul and neg (apimachinery `TestAdd`, `TestSub`, ...).

use super::*;

#[test]
fn constructors_format_like_new_quantity_and_new_milli_quantity() {
    assert_eq!(Quantity::from_milli(1).to_string(), "1m");
    assert_eq!(Quantity::from_milli(1000).to_string(), "1");
    assert_eq!(Quantity::from_milli(1_234_000).to_string(), "1234");
    assert_eq!(
        Quantity::from_milli(1024).with_format(Bin).to_string(),
        "1024m"
    );
    assert_eq!(
        Quantity::from_milli(1024 * 1024)
            .with_format(Bin)
            .to_string(),
        "1048576m"
    );
    assert_eq!(
        Quantity::from_milli(1_000_000).with_format(Exp).to_string(),
        "1e3"
    );
    assert_eq!(Quantity::from_value(1).to_string(), "1");
    assert_eq!(Quantity::from_value(1000).to_string(), "1k");
    assert_eq!(Quantity::from_value(1_234_000).to_string(), "1234k");
    assert_eq!(Quantity::from_bytes(1024).to_string(), "1Ki");
    assert_eq!(Quantity::from_bytes(1024 * 1024).to_string(), "1Mi");
    assert_eq!(Quantity::new(1_000_000, Exp).to_string(), "1e6");
    assert_eq!(Quantity::from_value(i64::MIN).value(), i64::MIN);
    assert_eq!(Quantity::from_milli(i64::MIN).milli_value(), i64::MIN);
    assert_eq!(Quantity::from_nanos(i128::MIN, Si), None);
}

#[test]
fn value_and_milli_value_round_away_from_zero() {
    let table = [
        ("1n", 1, 1),
        ("1u", 1, 1),
        ("1m", 1, 1),
        ("1", 1, 1000),
        ("1100m", 2, 1100),
        ("-1100m", -2, -1100),
        ("-1n", -1, -1),
        ("0", 0, 0),
        ("2k", 2000, 2_000_000),
        ("1.5", 2, 1500),
        ("1Mi", 1 << 20, 1000 << 20),
    ];
    for (input, value, milli) in table {
        assert_eq!(q(input).value(), value, "{input}");
        assert_eq!(q(input).milli_value(), milli, "{input}");
    }
}

#[test]
fn value_and_milli_value_saturate_instead_of_overflowing() {
    assert_eq!(q("1e20").value(), i64::MAX);
    assert_eq!(q("-1e20").value(), i64::MIN);
    assert_eq!(q("1e17").milli_value(), i64::MAX);
    assert_eq!(Quantity::MIN.milli_value(), i64::MIN);
}

#[test]
fn equality_ordering_and_hash_are_numeric_whatever_the_format() {
    use std::collections::hash_map::DefaultHasher;
    let hash = |value: Quantity| {
        let mut hasher = DefaultHasher::new();
        value.hash(&mut hasher);
        hasher.finish()
    };
    assert_eq!(q("1000m"), q("1"));
    assert_eq!(hash(q("1000m")), hash(q("1")));
    assert_eq!(q("1Ki"), q("1024"));
    assert_eq!(hash(q("1Ki")), hash(q("1.024k")));
    assert!(q("100m") > q("50m"));
    assert!(q("50m") < q("100m"));
    assert!(q("10000T") > q("100Gi"));
    assert!(q("-1") < q("0"));
    assert!(q("1n") > q("0"));
    assert_eq!(q("0"), Quantity::default());
}

#[test]
fn add_and_sub_take_the_right_format_only_when_the_left_is_zero() {
    let table = [
        ("10", "1e1", "20", "0"),
        ("10", "1Ki", "1034", "-1014"),
        ("10Ki", "1", "10241", "10239"),
        ("0", "50", "50", "-50"),
        ("50", "0", "50", "50"),
        ("0", "0", "0", "0"),
        ("0", "1Gi", "1Gi", "-1Gi"),
        ("0", "100m", "100m", "-100m"),
        ("100m", "0", "100m", "100m"),
        ("1Gi", "0", "1Gi", "1Gi"),
    ];
    for (left, right, sum, difference) in table {
        assert_eq!(
            q(left).checked_add(q(right)).unwrap().to_string(),
            sum,
            "{left}+{right}"
        );
        assert_eq!(
            q(left).saturating_add(q(right)).to_string(),
            sum,
            "{left}+{right}"
        );
        assert_eq!(
            q(left).checked_sub(q(right)).unwrap().to_string(),
            difference,
            "{left}-{right}"
        );
        assert_eq!(
            q(left).saturating_sub(q(right)).to_string(),
            difference,
            "{left}-{right}"
        );
    }
}

#[test]
fn mul_keeps_the_format_and_reports_overflow() {
    let table = [
        ("10", 10, "100"),
        ("10Ki", -1, "-10Ki"),
        ("50", 0, "0"),
        ("-50", -50, "2500"),
    ];
    for (value, factor, product) in table {
        assert_eq!(
            q(value).checked_mul(factor).unwrap().to_string(),
            product,
            "{value}*{factor}"
        );
    }
    let big = Quantity::from_value(i64::MAX);
    assert_eq!(
        big.checked_mul(2).unwrap().as_nanos(),
        i128::from(i64::MAX) * 2 * NANOS_PER_UNIT
    );
    assert_eq!(q("1e29").checked_mul(2), None);
    assert_eq!(q("1e29").saturating_mul(2), Quantity::MAX);
    assert_eq!(q("1e29").saturating_mul(-2), Quantity::MIN);
}

#[test]
fn checked_arithmetic_reports_overflow_and_saturating_clamps() {
    assert_eq!(Quantity::MAX.checked_add(q("1n")), None);
    assert_eq!(Quantity::MIN.checked_sub(q("1n")), None);
    assert_eq!(Quantity::MAX.saturating_add(Quantity::MAX), Quantity::MAX);
    assert_eq!(Quantity::MIN.saturating_sub(Quantity::MAX), Quantity::MIN);
    assert_eq!(Quantity::MIN.saturating_add(q("-1n")), Quantity::MIN);
    assert_eq!(-Quantity::MIN, Quantity::MAX);
    assert_eq!(
        Quantity::MAX.checked_add(Quantity::MIN),
        Some(Quantity::ZERO)
    );
}

#[test]
fn negation_keeps_the_format() {
    assert_eq!((-q("9.01")).to_string(), "-9010m");
    assert_eq!((-q("10Ki")).format(), Bin);
    assert_eq!((-(-q("10Ki"))).to_string(), "10Ki");
    assert_eq!((-q("0")).to_string(), "0");
}

#[test]
fn sign_helpers_follow_the_value() {
    assert_eq!(q("-1n").signum(), -1);
    assert_eq!(q("0Ki").signum(), 0);
    assert_eq!(q("1E").signum(), 1);
    assert!(q("-1n").is_negative());
    assert!(!q("0").is_negative());
    assert!(q("-0").is_zero());
}
