//! Go's duration syntax, as `time.ParseDuration` reads it: the values of settings named as
//! upstream's (`BATCH_IDLE_DURATION=500ms`, `1m30s`, `1.5h`) and of annotations Go programs
//! write must mean here what they mean there.
//!
//! Grammar: an optional sign, then `0` alone or one or more `<number><unit>`, where a number is
//! digits with an optional fraction (`5`, `5.`, `.5`, `5.25`; not `.`) and a unit one of `ns`,
//! `us`, `µs` (U+00B5), `μs` (U+03BC), `ms`, `s`, `m`, `h`. The value is whole nanoseconds in a
//! signed 64-bit range (about 292 years); fractions below a nanosecond are dropped, as Go drops
//! them.
//!
//! Inputs: text. Outputs: signed nanoseconds, a [`std::time::Duration`] for settings that
//! cannot be negative, or a [`GoDurationError`] saying what is wrong.

/// Why a text is not a Go duration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GoDurationError {
    /// Not of the grammar (empty, a sign alone, a number without digits).
    #[error(
        "invalid duration {0:?}: expected a number and a unit, e.g. \"500ms\", \"10s\" or \"1m30s\""
    )]
    Invalid(String),
    /// A number without a unit.
    #[error(
        "invalid duration {0:?}: missing unit (one of ns, us, µs, ms, s, m, h, e.g. \"500ms\")"
    )]
    MissingUnit(String),
    /// A unit Go does not know (`d`, `sec`).
    #[error("invalid duration {text:?}: unknown unit {unit:?} (one of ns, us, µs, ms, s, m, h)")]
    UnknownUnit {
        /// The whole text.
        text: String,
        /// The unit.
        unit: String,
    },
    /// More than a signed 64-bit count of nanoseconds.
    #[error("invalid duration {0:?}: out of range (at most 2562047h47m16.854775807s)")]
    Overflow(String),
    /// Negative where only a length of time makes sense.
    #[error("invalid duration {0:?}: must not be negative")]
    Negative(String),
}

const UNITS: [(&str, u64); 9] = [
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("", 0),
];

/// 2^63: the magnitude of the most negative duration.
const LIMIT: u64 = 1 << 63;

/// The leading digits of `s` as an integer (`None` past 2^63), and the rest.
fn leading_int(s: &str) -> (Option<u64>, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, rest) = s.split_at(end);
    let mut x: u64 = 0;
    for d in digits.bytes() {
        let next = x
            .checked_mul(10)
            .and_then(|x| x.checked_add(u64::from(d - b'0')))
            .filter(|x| *x <= LIMIT);
        match next {
            Some(n) => x = n,
            None => return (None, rest),
        }
    }
    (Some(x), rest)
}

/// The leading digits of a fraction: their value, the power of ten they scale by, and the
/// rest. Digits past what 63 bits hold are read and ignored.
fn leading_fraction(s: &str) -> (u64, f64, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, rest) = s.split_at(end);
    let (mut x, mut scale, mut full) = (0_u64, 1.0_f64, false);
    for d in digits.bytes() {
        if full {
            continue;
        }
        match x
            .checked_mul(10)
            .and_then(|x| x.checked_add(u64::from(d - b'0')))
            .filter(|x| *x <= LIMIT)
        {
            Some(n) => {
                x = n;
                scale *= 10.0;
            }
            None => full = true,
        }
    }
    (x, scale, rest)
}

/// Nanoseconds of `text` (negative allowed), exactly as Go's `time.ParseDuration`.
///
/// # Errors
/// Text outside the grammar, a missing or unknown unit, or more than 63 bits of nanoseconds.
pub fn parse_nanos(text: &str) -> Result<i64, GoDurationError> {
    let invalid = || GoDurationError::Invalid(text.to_owned());
    let (negative, mut s) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        let before = s.len();
        let (whole, rest) = leading_int(s);
        let whole = whole.ok_or_else(|| GoDurationError::Overflow(text.to_owned()))?;
        let pre = rest.len() != before;
        s = rest;
        let (mut fraction, mut scale, mut post) = (0, 1.0, false);
        if let Some(rest) = s.strip_prefix('.') {
            let (f, sc, tail) = leading_fraction(rest);
            post = tail.len() != rest.len();
            (fraction, scale, s) = (f, sc, tail);
        }
        if !pre && !post {
            return Err(invalid());
        }
        let unit_end = s
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        let (unit, rest) = s.split_at(unit_end);
        s = rest;
        if unit.is_empty() {
            return Err(GoDurationError::MissingUnit(text.to_owned()));
        }
        let Some(&(_, per)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            return Err(GoDurationError::UnknownUnit {
                text: text.to_owned(),
                unit: unit.to_owned(),
            });
        };
        let overflow = || GoDurationError::Overflow(text.to_owned());
        if whole > LIMIT / per {
            return Err(overflow());
        }
        let mut v = whole * per;
        if fraction > 0 {
            // As Go computes it: through a float, truncated; the fraction is below one unit.
            #[allow(
                clippy::cast_precision_loss,
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss
            )]
            let part = (fraction as f64 * (per as f64 / scale)) as u64;
            v = v
                .checked_add(part)
                .filter(|v| *v <= LIMIT)
                .ok_or_else(overflow)?;
        }
        total = total
            .checked_add(v)
            .filter(|t| *t <= LIMIT)
            .ok_or_else(overflow)?;
    }
    if negative {
        // total ≤ 2^63: -(2^63) is the most negative i64.
        Ok(0_i64.checked_sub_unsigned(total).unwrap_or(i64::MIN))
    } else {
        i64::try_from(total).map_err(|_| GoDurationError::Overflow(text.to_owned()))
    }
}

/// A Go duration that must not be negative, as a [`std::time::Duration`].
///
/// # Errors
/// What [`parse_nanos`] refuses, and a negative duration.
pub fn parse(text: &str) -> Result<std::time::Duration, GoDurationError> {
    let nanos = parse_nanos(text)?;
    u64::try_from(nanos)
        .map(std::time::Duration::from_nanos)
        .map_err(|_| GoDurationError::Negative(text.to_owned()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    const NS: i64 = 1;
    const US: i64 = 1_000;
    const MS: i64 = 1_000_000;
    const S: i64 = 1_000_000_000;
    const M: i64 = 60 * S;
    const H: i64 = 60 * M;

    /// What Go's `time.ParseDuration` answers for these (its documented behaviour).
    #[test]
    fn answers_as_go_does() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("5s", 5 * S),
            ("30s", 30 * S),
            ("1478s", 1478 * S),
            ("-5s", -5 * S),
            ("+5s", 5 * S),
            ("-0", 0),
            ("+0", 0),
            ("5.0s", 5 * S),
            ("5.6s", 5 * S + 600 * MS),
            ("5.s", 5 * S),
            (".5s", 500 * MS),
            ("1.0s", S),
            ("1.00s", S),
            ("1.004s", S + 4 * MS),
            ("1.0040s", S + 4 * MS),
            ("100.00100s", 100 * S + MS),
            ("10ns", 10 * NS),
            ("11us", 11 * US),
            ("12\u{b5}s", 12 * US),
            ("12\u{3bc}s", 12 * US),
            ("13ms", 13 * MS),
            ("14s", 14 * S),
            ("15m", 15 * M),
            ("16h", 16 * H),
            ("3h30m", 3 * H + 30 * M),
            ("10.5s4m", 4 * M + 10 * S + 500 * MS),
            ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
            (
                "1h2m3s4ms5us6ns",
                H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS,
            ),
            ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
            ("52763797000ns", 52_763_797_000 * NS),
            ("0.3333333333333333333h", 20 * M),
            ("9007199254740993ns", (1 << 53) + 1),
            ("9223372036854775807ns", i64::MAX),
            ("9223372036854775.807us", i64::MAX),
            ("9223372036s854ms775us807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("-9223372036854775.808us", i64::MIN),
            ("-9223372036s854ms775us808ns", i64::MIN),
            ("-2562047h47m16.854775808s", i64::MIN),
            ("0.100000000000000000000h", 6 * M),
            (
                "0.830103483285477580700h",
                49 * M + 48 * S + 372_539_827 * NS,
            ),
            ("500ms", 500 * MS),
            ("1m30s", 90 * S),
        ];
        for (text, want) in cases {
            assert_eq!(parse_nanos(text), Ok(*want), "{text}");
        }
    }

    #[test]
    fn refuses_as_go_does() {
        for text in [
            "",
            "3",
            "-",
            "s",
            ".",
            "-.",
            ".s",
            "+.s",
            "1d",
            "1sec",
            "\u{85}\u{85}",
            "hello \u{ff}ff world",
            "9223372036854775808ns",
            "9223372036854775.808us",
            "-9223372036854775809ns",
            "2562047h47m16.854775808s",
            "10s5",
            "1h 30m",
            " 1s",
        ] {
            assert!(parse_nanos(text).is_err(), "{text:?} is not a Go duration");
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert!(matches!(parse("3"), Err(GoDurationError::MissingUnit(_))));
        assert!(
            matches!(parse("1d"), Err(GoDurationError::UnknownUnit { unit, .. }) if unit == "d")
        );
        assert!(matches!(parse("-1s"), Err(GoDurationError::Negative(_))));
        assert!(matches!(
            parse("9223372036854775808ns"),
            Err(GoDurationError::Overflow(_))
        ));
        assert_eq!(parse("500ms"), Ok(std::time::Duration::from_millis(500)));
        assert_eq!(parse("-0"), Ok(std::time::Duration::ZERO));
    }

    mod grammar {
        use proptest::prelude::*;

        use super::super::*;

        const UNIT_NAMES: [&str; 8] = ["ns", "us", "\u{b5}s", "\u{3bc}s", "ms", "s", "m", "h"];

        fn per(unit: &str) -> u128 {
            u128::from(UNITS.iter().find(|(n, _)| *n == unit).unwrap().1)
        }

        /// One `<number><unit>`: whole digits, fraction digits (either may be empty, not
        /// both), the unit.
        fn component() -> impl Strategy<Value = (String, String, &'static str)> {
            (
                "[0-9]{0,12}",
                proptest::option::of("[0-9]{0,12}"),
                proptest::sample::select(UNIT_NAMES.to_vec()),
            )
                .prop_filter("a number has a digit", |(w, f, _)| {
                    !w.is_empty() || f.as_deref().is_some_and(|f| !f.is_empty())
                })
                .prop_map(|(w, f, u)| (w, f.map(|f| format!(".{f}")).unwrap_or_default(), u))
        }

        proptest! {
            /// Every text of the grammar parses; its value lies between the sum of its whole
            /// parts and that sum plus one of each unit (the fractions), exactly the sum when
            /// there are no fractions, or it is out of range.
            #[test]
            fn texts_of_the_grammar_parse(
                parts in proptest::collection::vec(component(), 1..5),
                negative in any::<bool>(),
            ) {
                let body: String = parts.iter().map(|(w, f, u)| format!("{w}{f}{u}")).collect();
                let text = if negative { format!("-{body}") } else { body };
                let low: u128 = parts.iter().map(|(w, _, u)| w.parse::<u128>().unwrap_or(0) * per(u)).sum();
                let fractions = parts.iter().any(|(_, f, _)| !f.trim_start_matches('.').trim_matches('0').is_empty());
                let high: u128 = low + parts.iter().map(|(_, _, u)| per(u)).sum::<u128>();
                match parse_nanos(&text) {
                    Ok(v) => {
                        let magnitude = u128::from(v.unsigned_abs());
                        prop_assert!(magnitude >= low && magnitude < high, "{text}: {v}");
                        if !fractions {
                            prop_assert_eq!(magnitude, low, "{}", text);
                        }
                        prop_assert!(v <= 0 || !negative);
                    }
                    Err(GoDurationError::Overflow(_)) => prop_assert!(low >= 1 << 63, "{text}"),
                    Err(e) => prop_assert!(false, "{text}: {e}"),
                }
            }

            /// A component without its unit, or with a unit Go does not know, fails the text.
            #[test]
            fn a_missing_or_unknown_unit_fails(
                parts in proptest::collection::vec(component(), 1..4),
                at in any::<prop::sample::Index>(),
                unit in "(|d|y|w|sec|min|hr|S|M|H|Ms)",
            ) {
                // Without a unit, only the last component fails the text ("5" + "3m" is "53m").
                let broken = if unit.is_empty() { parts.len() - 1 } else { at.index(parts.len()) };
                let text: String = parts
                    .iter()
                    .enumerate()
                    .map(|(i, (w, f, u))| format!("{w}{f}{}", if i == broken { unit.as_str() } else { u }))
                    .collect();
                // Go's one exception: "0" alone needs no unit.
                prop_assume!(text != "0");
                prop_assert!(parse_nanos(&text).is_err(), "{}", text);
            }
        }
    }
}
