//! Parsing of Kubernetes quantity strings into exact nano-unit values.
//!
//! Responsibility: accept exactly the strings Kubernetes' `ParseQuantity` accepts (with the two
//! documented exceptions below) and compute their value exactly, rounding anything finer than a
//! nano-unit away from zero and capping binary-suffixed values at 2^63 − 1 units as Kubernetes
//! does. Input: a `&str`. Output: a [`Quantity`] or a [`ParseQuantityError`] naming the input.
//!
//! Grammar (Kubernetes' own): `[+-]? (digits | digits '.' digits? | '.' digits) suffix`, where
//! `suffix` is one of `"" n u m k M G T P E`, `Ki Mi Gi Ti Pi Ei`, or `e`/`E` followed by a signed
//! integer exponent. No whitespace anywhere.
//!
//! Deliberate differences from apimachinery:
//! - A number without any digit (`"+"`, `"."`, `"-."`, `"e3"`, `"Ki"`) is rejected, as the
//!   OpenAPI pattern for quantities rejects it; apimachinery's scanner reads it as zero.
//! - An exponent outside the `i32` range is rejected; apimachinery truncates it to 32 bits, so
//!   `"1e4294967296"` would be 1 there.
//! - A decimal value beyond ±(2^127 − 1) nano-units is rejected as out of range; apimachinery
//!   keeps it as an arbitrary-precision decimal.

use super::{Format, NANOS_PER_UNIT, Quantity};

/// Binary-suffixed values are capped here, in nano-units: 2^63 − 1 units, as Kubernetes does.
const BINARY_CAP_NANOS: u128 = (i64::MAX as u128) * (NANOS_PER_UNIT as u128);

/// The longest input prefix an error message repeats.
const MAX_ERROR_INPUT_CHARS: usize = 64;

/// Why a string is not a valid quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseQuantityErrorKind {
    /// The string is empty.
    #[error("the string is empty")]
    Empty,
    /// The number part has no digit (`"+"`, `"."`, `"Ki"`).
    #[error("the number has no digits")]
    NoDigits,
    /// The string does not have the shape `<sign><number><suffix>` (e.g. whitespace, `"1.2.3"`).
    #[error("expected [+-]<digits>[.<digits>]<suffix> with no spaces")]
    Malformed,
    /// The suffix is not one Kubernetes knows (e.g. `"GB"`, `"Mii"`, `"e"`).
    #[error(
        "unknown suffix; expected n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or e<exponent>"
    )]
    UnknownSuffix,
    /// The decimal exponent does not fit in 32 bits.
    #[error("the exponent is outside the 32-bit range")]
    ExponentOutOfRange,
    /// The magnitude exceeds what a [`Quantity`] can hold.
    #[error("the magnitude exceeds the supported range of ±(2^127 - 1) nano-units (about 1.7e29)")]
    OutOfRange,
}

/// A string that is not a valid Kubernetes quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {input:?}: {kind}")]
pub struct ParseQuantityError {
    input: String,
    kind: ParseQuantityErrorKind,
}

impl ParseQuantityError {
    fn new(input: &str, kind: ParseQuantityErrorKind) -> Self {
        let input = match input.char_indices().nth(MAX_ERROR_INPUT_CHARS) {
            Some((cut, _)) => format!("{}…", input.get(..cut).unwrap_or_default()),
            None => input.to_owned(),
        };
        ParseQuantityError { input, kind }
    }

    /// The rejected input (its first 64 characters, then `…`, if it was longer).
    #[must_use]
    pub fn input(&self) -> &str {
        &self.input
    }

    /// Why it was rejected.
    #[must_use]
    pub fn kind(&self) -> ParseQuantityErrorKind {
        self.kind
    }
}

/// What a suffix multiplies the number by.
#[derive(Clone, Copy)]
enum Scale {
    /// 10^exponent.
    Decimal(i32),
    /// 2^bits.
    Binary(u32),
}

/// Parses `input`; see the module documentation for the accepted grammar.
pub(super) fn parse(input: &str) -> Result<Quantity, ParseQuantityError> {
    use ParseQuantityErrorKind as Kind;
    let error = |kind| ParseQuantityError::new(input, kind);
    let bytes = input.as_bytes();
    let (negative, rest) = match bytes.split_first() {
        None => return Err(error(Kind::Empty)),
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        Some(_) => (false, bytes),
    };
    let (integer, rest) = split_digits(rest);
    let (fraction, suffix) = match rest.split_first() {
        Some((b'.', after_point)) => split_digits(after_point),
        _ => (&[][..], rest),
    };
    if integer.is_empty() && fraction.is_empty() {
        return Err(error(match unknown_or_malformed(suffix) {
            Kind::Malformed => Kind::Malformed,
            _ => Kind::NoDigits,
        }));
    }
    let (scale, format) = interpret_suffix(suffix).map_err(error)?;
    let digits = Digits { integer, fraction };
    let magnitude = match scale {
        Scale::Decimal(exponent) => {
            let shift = i128::from(exponent) + 9 - fraction.len() as i128;
            digits
                .scaled_magnitude(shift, 1)
                .ok_or(error(Kind::OutOfRange))?
        }
        Scale::Binary(bits) => {
            let shift = 9 - fraction.len() as i128;
            let exact = digits.scaled_magnitude(shift, 1 << bits);
            exact.map_or(BINARY_CAP_NANOS, |nanos| nanos.min(BINARY_CAP_NANOS))
        }
    };
    let magnitude = i128::try_from(magnitude).map_err(|_| error(Kind::OutOfRange))?;
    // Kubernetes prints a binary value below one unit in decimal, and remembers that at parse.
    let format = if format == Format::BinarySI && magnitude > 0 && magnitude < NANOS_PER_UNIT {
        Format::DecimalSI
    } else {
        format
    };
    Ok(Quantity {
        nanos: if negative { -magnitude } else { magnitude },
        format,
    })
}

/// Splits off the leading ASCII digits.
fn split_digits(bytes: &[u8]) -> (&[u8], &[u8]) {
    let end = bytes
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(bytes.len());
    bytes.split_at(end)
}

/// Maps a suffix to its scale and format.
fn interpret_suffix(suffix: &[u8]) -> Result<(Scale, Format), ParseQuantityErrorKind> {
    let decimal = |exponent| Ok((Scale::Decimal(exponent), Format::DecimalSI));
    let binary = |bits| Ok((Scale::Binary(bits), Format::BinarySI));
    match suffix {
        b"" => decimal(0),
        b"n" => decimal(-9),
        b"u" => decimal(-6),
        b"m" => decimal(-3),
        b"k" => decimal(3),
        b"M" => decimal(6),
        b"G" => decimal(9),
        b"T" => decimal(12),
        b"P" => decimal(15),
        b"E" => decimal(18),
        b"Ki" => binary(10),
        b"Mi" => binary(20),
        b"Gi" => binary(30),
        b"Ti" => binary(40),
        b"Pi" => binary(50),
        b"Ei" => binary(60),
        [b'e' | b'E', exponent @ ..] => {
            let exponent = parse_exponent(exponent).ok_or(unknown_or_malformed(suffix))?;
            let exponent =
                i32::try_from(exponent).map_err(|_| ParseQuantityErrorKind::ExponentOutOfRange)?;
            Ok((Scale::Decimal(exponent), Format::DecimalExponent))
        }
        _ => Err(unknown_or_malformed(suffix)),
    }
}

/// A signed decimal integer (`[+-]?[0-9]+`), its magnitude saturated at `i64::MAX` so that any
/// overlong exponent still reads as out of range; `None` when it is not an integer at all.
fn parse_exponent(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', digits)) => (true, digits),
        Some((b'+', digits)) => (false, digits),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let magnitude = digits.iter().fold(0_i64, |value, digit| {
        value
            .saturating_mul(10)
            .saturating_add(i64::from(digit - b'0'))
    });
    Some(if negative { -magnitude } else { magnitude })
}

/// Kubernetes' scanner first checks the suffix has the shape `[eEinumkKMGTP]*[+-]?[0-9]*`
/// ("malformed" otherwise) and only then looks it up ("unknown suffix").
fn unknown_or_malformed(suffix: &[u8]) -> ParseQuantityErrorKind {
    let letters = suffix
        .iter()
        .position(|b| !b"eEinumkKMGTP".contains(b))
        .unwrap_or(suffix.len());
    let rest = suffix.get(letters..).unwrap_or_default();
    let rest = match rest.split_first() {
        Some((b'+' | b'-', after_sign)) => after_sign,
        _ => rest,
    };
    if rest.iter().all(u8::is_ascii_digit) {
        ParseQuantityErrorKind::UnknownSuffix
    } else {
        ParseQuantityErrorKind::Malformed
    }
}

/// The mantissa's digits, integer part then fraction part, read as one integer.
struct Digits<'a> {
    integer: &'a [u8],
    fraction: &'a [u8],
}

impl Digits<'_> {
    fn len(&self) -> usize {
        self.integer.len() + self.fraction.len()
    }

    /// The digit value at `index` of the concatenated digits.
    fn get(&self, index: usize) -> u128 {
        let byte = match index.checked_sub(self.integer.len()) {
            None => self.integer.get(index),
            Some(in_fraction) => self.fraction.get(in_fraction),
        };
        byte.map_or(0, |b| u128::from(b - b'0'))
    }

    /// `ceil(D · 10^shift · multiplier)` where `D` is the digits read as an integer, or `None`
    /// when that overflows `u128`. Exact for any number of digits and any shift; never loops
    /// longer than the input.
    fn scaled_magnitude(&self, shift: i128, multiplier: u128) -> Option<u128> {
        let Some(first) = (0..self.len()).find(|&i| self.get(i) != 0) else {
            return Some(0);
        };
        // `first` exists, so there is a last non-zero digit; trailing zeros move into the shift.
        let last = (first..self.len())
            .rev()
            .find(|&i| self.get(i) != 0)
            .unwrap_or(first);
        let shift = shift + (self.len() - 1 - last) as i128;
        let significant = first..last + 1;
        if shift >= 0 {
            let power = 10_u128.checked_pow(u32::try_from(shift).ok()?)?;
            let mantissa = self.accumulate(significant)?;
            return mantissa.checked_mul(power)?.checked_mul(multiplier);
        }
        // Digits past `point` are below a nano-unit; `gap` zeros sit between them and the point.
        let below = usize::try_from(-shift).unwrap_or(usize::MAX);
        let point = last + 1 - below.min(last + 1 - first);
        let gap = below.saturating_sub(last + 1 - first);
        let whole = self.accumulate(first..point)?.checked_mul(multiplier)?;
        // Long multiplication of 0.<digits> by the multiplier, from the right: `carry` ends as the
        // whole part of the product, `inexact` records a non-zero fractional part.
        let mut carry = 0_u128;
        let mut inexact = false;
        for index in (point..last + 1).rev() {
            let product = self.get(index) * multiplier + carry;
            inexact |= !product.is_multiple_of(10);
            carry = product / 10;
        }
        let carry = match 10_u128.checked_pow(u32::try_from(gap).unwrap_or(u32::MAX)) {
            Some(divisor) => {
                inexact |= !carry.is_multiple_of(divisor);
                carry / divisor
            }
            None => {
                inexact |= carry != 0;
                0
            }
        };
        whole.checked_add(carry)?.checked_add(u128::from(inexact))
    }

    /// The digits in `range` read as an integer, or `None` on overflow.
    fn accumulate(&self, range: std::ops::Range<usize>) -> Option<u128> {
        range.map(|i| self.get(i)).try_fold(0_u128, |value, digit| {
            value.checked_mul(10)?.checked_add(digit)
        })
    }
}
