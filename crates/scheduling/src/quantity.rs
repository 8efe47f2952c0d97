//! Exact Kubernetes resource quantities (`k8s.io/apimachinery/pkg/api/resource.Quantity`).
//!
//! Responsibility: represent a resource amount exactly, parse every string Kubernetes accepts,
//! print the canonical string Kubernetes prints, and do allocation-free exact integer arithmetic
//! and comparison for the scheduler's fit checks.
//!
//! Inputs: quantity strings (`"100m"`, `"1.5Gi"`, `"12e6"`) or integers (`from_value`,
//! `from_milli`, `from_bytes`). Outputs: [`Quantity`] values, their canonical strings
//! ([`Display`](std::fmt::Display)), and typed [`ParseQuantityError`]s for invalid input.
//!
//! Representation: a signed count of nano-units (`i128`) plus the [`Format`] the value was
//! written in (which only affects printing). The range is ±[`Quantity::MAX`] =
//! ±(2^127 − 1) nano-units, about ±1.7·10^29 units: far beyond any real resource, and beyond the
//! 2^63 − 1 that Kubernetes' int64 accessors handle. Like Kubernetes, parsing keeps a value only
//! down to the nano-unit and rounds anything finer away from zero (`"0.1n"` is `1n`), and silently
//! caps a binary-suffixed (`Ki`…`Ei`) value at 2^63 − 1 units. Unlike Kubernetes (which keeps
//! arbitrary-precision decimals), a decimal value outside the `i128` nano range is an error, not
//! a value. Equality, ordering and hashing are numeric: `1000m == 1` whatever their formats.

mod format;
mod parse;

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Neg;
use std::str::FromStr;

pub use parse::{ParseQuantityError, ParseQuantityErrorKind};

/// Nano-units in one unit (10^9): the resolution of every [`Quantity`].
pub const NANOS_PER_UNIT: i128 = 1_000_000_000;

/// Nano-units in one milli-unit (10^6).
const NANOS_PER_MILLI: i128 = 1_000_000;

/// How a quantity is printed, remembered from the string it was parsed from.
///
/// The format never affects the value, equality or ordering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Format {
    /// Decimal exponent notation, e.g. `12e6`.
    DecimalExponent,
    /// Binary SI suffixes, e.g. `12Mi` (12 · 2^20). Values that are not a whole number of units,
    /// or whose magnitude is below 1024, print as [`Format::DecimalSI`].
    BinarySI,
    /// Decimal SI suffixes, e.g. `12M` (12 · 10^6) or `100m`.
    #[default]
    DecimalSI,
}

/// An exact resource quantity: an integer number of nano-units plus its print [`Format`].
///
/// `Copy`, 32 bytes, and every arithmetic or comparison operation is a few integer instructions
/// with no allocation. Equality, ordering and hashing only look at the numeric value.
#[derive(Clone, Copy)]
pub struct Quantity {
    nanos: i128,
    format: Format,
}

impl Quantity {
    /// Zero, in [`Format::DecimalSI`].
    pub const ZERO: Quantity = Quantity {
        nanos: 0,
        format: Format::DecimalSI,
    };
    /// The largest representable quantity: 2^127 − 1 nano-units.
    pub const MAX: Quantity = Quantity {
        nanos: i128::MAX,
        format: Format::DecimalSI,
    };
    /// The smallest representable quantity, `-MAX` (the range is symmetric, so negation never
    /// overflows).
    pub const MIN: Quantity = Quantity {
        nanos: -i128::MAX,
        format: Format::DecimalSI,
    };

    /// `value` whole units in [`Format::DecimalSI`] (Kubernetes `NewQuantity(v, DecimalSI)`).
    #[must_use]
    pub const fn from_value(value: i64) -> Quantity {
        Quantity::new(value, Format::DecimalSI)
    }

    /// `value` milli-units in [`Format::DecimalSI`] (Kubernetes `NewMilliQuantity`), e.g. CPU.
    #[must_use]
    pub const fn from_milli(milli: i64) -> Quantity {
        Quantity {
            nanos: milli as i128 * NANOS_PER_MILLI,
            format: Format::DecimalSI,
        }
    }

    /// `bytes` whole units in [`Format::BinarySI`] (Kubernetes `NewQuantity(v, BinarySI)`), e.g.
    /// memory.
    #[must_use]
    pub const fn from_bytes(bytes: i64) -> Quantity {
        Quantity::new(bytes, Format::BinarySI)
    }

    /// `value` whole units printed in `format`.
    #[must_use]
    pub const fn new(value: i64, format: Format) -> Quantity {
        Quantity {
            nanos: value as i128 * NANOS_PER_UNIT,
            format,
        }
    }

    /// `nanos` nano-units printed in `format`, or `None` for `i128::MIN` (outside the symmetric
    /// range).
    #[must_use]
    pub const fn from_nanos(nanos: i128, format: Format) -> Option<Quantity> {
        if nanos == i128::MIN {
            None
        } else {
            Some(Quantity { nanos, format })
        }
    }

    /// Parses a Kubernetes quantity string; the same as [`str::parse`].
    ///
    /// # Errors
    /// [`ParseQuantityError`] naming the input when it is not a valid quantity or is out of range.
    pub fn parse(input: &str) -> Result<Quantity, ParseQuantityError> {
        parse::parse(input)
    }

    /// The same value printed in `format`.
    #[must_use]
    pub const fn with_format(self, format: Format) -> Quantity {
        Quantity {
            nanos: self.nanos,
            format,
        }
    }

    /// The exact value in nano-units.
    #[must_use]
    pub const fn as_nanos(self) -> i128 {
        self.nanos
    }

    /// The print format.
    #[must_use]
    pub const fn format(self) -> Format {
        self.format
    }

    /// Whether the value is zero.
    #[must_use]
    pub const fn is_zero(self) -> bool {
        self.nanos == 0
    }

    /// Whether the value is below zero.
    #[must_use]
    pub const fn is_negative(self) -> bool {
        self.nanos < 0
    }

    /// −1, 0 or 1 with the sign of the value (Kubernetes `Sign`).
    #[must_use]
    pub const fn signum(self) -> i32 {
        self.nanos.signum() as i32
    }

    /// The value in whole units, rounded away from zero (Kubernetes `Value`: `1100m` → 2,
    /// `-1100m` → −2), saturating at the `i64` bounds where Kubernetes silently overflows.
    #[must_use]
    pub const fn value(self) -> i64 {
        scaled_away_from_zero(self.nanos, NANOS_PER_UNIT)
    }

    /// The value in milli-units, rounded away from zero (Kubernetes `MilliValue`: `1n` → 1),
    /// saturating at the `i64` bounds where Kubernetes silently overflows.
    #[must_use]
    pub const fn milli_value(self) -> i64 {
        scaled_away_from_zero(self.nanos, NANOS_PER_MILLI)
    }

    /// `self + rhs`, or `None` outside the range. The result keeps `self`'s format, or takes
    /// `rhs`'s when `self` is zero (Kubernetes `Add`).
    #[must_use]
    pub const fn checked_add(self, rhs: Quantity) -> Option<Quantity> {
        match self.nanos.checked_add(rhs.nanos) {
            Some(nanos) => Quantity::from_nanos(nanos, self.format_for(rhs)),
            None => None,
        }
    }

    /// `self - rhs`, or `None` outside the range. Formats as [`Quantity::checked_add`].
    #[must_use]
    pub const fn checked_sub(self, rhs: Quantity) -> Option<Quantity> {
        match self.nanos.checked_sub(rhs.nanos) {
            Some(nanos) => Quantity::from_nanos(nanos, self.format_for(rhs)),
            None => None,
        }
    }

    /// `self * factor`, or `None` outside the range. Keeps `self`'s format.
    #[must_use]
    pub const fn checked_mul(self, factor: i64) -> Option<Quantity> {
        match self.nanos.checked_mul(factor as i128) {
            Some(nanos) => Quantity::from_nanos(nanos, self.format),
            None => None,
        }
    }

    /// `self + rhs`, clamped to [`Quantity::MIN`]..=[`Quantity::MAX`].
    #[must_use]
    pub const fn saturating_add(self, rhs: Quantity) -> Quantity {
        Quantity::clamped(self.nanos.saturating_add(rhs.nanos), self.format_for(rhs))
    }

    /// `self - rhs`, clamped to [`Quantity::MIN`]..=[`Quantity::MAX`].
    #[must_use]
    pub const fn saturating_sub(self, rhs: Quantity) -> Quantity {
        Quantity::clamped(self.nanos.saturating_sub(rhs.nanos), self.format_for(rhs))
    }

    /// `self * factor`, clamped to [`Quantity::MIN`]..=[`Quantity::MAX`].
    #[must_use]
    pub const fn saturating_mul(self, factor: i64) -> Quantity {
        Quantity::clamped(self.nanos.saturating_mul(factor as i128), self.format)
    }

    /// The format of `self op rhs`: Kubernetes lets a zero left operand adopt the right's format.
    const fn format_for(self, rhs: Quantity) -> Format {
        if self.nanos == 0 {
            rhs.format
        } else {
            self.format
        }
    }

    /// A quantity from a saturated `i128`, mapping `i128::MIN` to `-MAX`.
    const fn clamped(nanos: i128, format: Format) -> Quantity {
        Quantity {
            nanos: if nanos == i128::MIN {
                -i128::MAX
            } else {
                nanos
            },
            format,
        }
    }
}

/// `ceil(|nanos| / divisor)` with the sign of `nanos`, saturated to `i64`.
const fn scaled_away_from_zero(nanos: i128, divisor: i128) -> i64 {
    let mut scaled = nanos / divisor;
    if nanos % divisor != 0 {
        scaled += nanos.signum();
    }
    if scaled > i64::MAX as i128 {
        i64::MAX
    } else if scaled < i64::MIN as i128 {
        i64::MIN
    } else {
        scaled as i64
    }
}

impl Default for Quantity {
    fn default() -> Self {
        Quantity::ZERO
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl Hash for Quantity {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.nanos.hash(state);
    }
}

impl Neg for Quantity {
    type Output = Quantity;

    /// Never overflows: the range is symmetric. Keeps the format.
    fn neg(self) -> Quantity {
        Quantity {
            nanos: -self.nanos,
            format: self.format,
        }
    }
}

impl FromStr for Quantity {
    type Err = ParseQuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse::parse(s)
    }
}

impl fmt::Display for Quantity {
    /// The canonical Kubernetes string (`Quantity.String()`); honours width and alignment.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        format::write_canonical(self.nanos, self.format, f)
    }
}

impl fmt::Debug for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Quantity({self} {:?})", self.format)
    }
}

#[cfg(test)]
mod tests;
