//! Canonical printing of quantities, exactly as Kubernetes' `Quantity.String()` prints them.
//!
//! Responsibility: turn a nano-unit value and its [`Format`] into the canonical string
//! (`CanonicalizeBytes`): no fractional digits, the largest suffix that loses no precision, and a
//! sign only when negative. Input: the value and format. Output: text written to a formatter,
//! without allocating.
//!
//! Rules, from apimachinery:
//! - Zero prints as `0` in every format.
//! - Decimal formats strip factors of 1000 while the value stays whole at that scale, so the
//!   exponent is the largest multiple of 3 possible: `1.5` → `1500m`, `1000m` → `1`,
//!   `12e6` stays `12e6`. DecimalSI uses `n u m "" k M G T P E` and falls back to `e<exp>`
//!   beyond `E` (10^18), as current apimachinery does rather than dropping the exponent.
//! - BinarySI prints as DecimalSI when the magnitude is below 1024 or not a whole number of units;
//!   otherwise it strips factors of 1024: `1536Mi`, `1025`. It stops at `Ei`: a value past
//!   2^70 prints as `<n>Ei`, where apimachinery would print a bare number and lose the exponent.

use std::fmt::{self, Write};

use super::{Format, NANOS_PER_UNIT};

/// Decimal SI suffixes from 10^-9 to 10^18, one per power of 1000.
const DECIMAL_SUFFIXES: [&str; 10] = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"];

/// Binary SI suffixes from 2^0 to 2^60, one per power of 1024.
const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// Writes the canonical string of `nanos` in `format`, honouring the formatter's padding.
pub(super) fn write_canonical(
    nanos: i128,
    format: Format,
    f: &mut fmt::Formatter<'_>,
) -> fmt::Result {
    let mut buffer = StackBuffer::default();
    write_unpadded(nanos, format, &mut buffer)?;
    f.pad(buffer.as_str()?)
}

fn write_unpadded(nanos: i128, format: Format, out: &mut impl Write) -> fmt::Result {
    if nanos == 0 {
        return out.write_str("0");
    }
    if nanos < 0 {
        out.write_char('-')?;
    }
    let magnitude = nanos.unsigned_abs();
    let unit = NANOS_PER_UNIT.unsigned_abs();
    let binary =
        format == Format::BinarySI && magnitude >= 1024 * unit && magnitude.is_multiple_of(unit);
    if binary {
        let mut mantissa = magnitude / unit;
        let mut power = 0;
        while power + 1 < BINARY_SUFFIXES.len() && mantissa.is_multiple_of(1024) {
            mantissa /= 1024;
            power += 1;
        }
        let suffix = BINARY_SUFFIXES.get(power).copied().unwrap_or_default();
        return write!(out, "{mantissa}{suffix}");
    }
    let mut mantissa = magnitude;
    let mut exponent: i32 = -9;
    while mantissa.is_multiple_of(1000) {
        mantissa /= 1000;
        exponent += 3;
    }
    write!(out, "{mantissa}")?;
    let si_suffix = usize::try_from((exponent + 9) / 3)
        .ok()
        .and_then(|i| DECIMAL_SUFFIXES.get(i));
    match (format, si_suffix) {
        (Format::DecimalSI | Format::BinarySI, Some(suffix)) => out.write_str(suffix),
        (_, _) if exponent == 0 => Ok(()),
        (_, _) => write!(out, "e{exponent}"),
    }
}

/// A fixed buffer large enough for any canonical quantity: a sign, 39 digits and a suffix.
struct StackBuffer {
    bytes: [u8; 64],
    len: usize,
}

impl Default for StackBuffer {
    fn default() -> Self {
        StackBuffer {
            bytes: [0; 64],
            len: 0,
        }
    }
}

impl StackBuffer {
    fn as_str(&self) -> Result<&str, fmt::Error> {
        let written = self.bytes.get(..self.len).ok_or(fmt::Error)?;
        std::str::from_utf8(written).map_err(|_| fmt::Error)
    }
}

impl Write for StackBuffer {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        let target = self.bytes.get_mut(self.len..end).ok_or(fmt::Error)?;
        target.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}
