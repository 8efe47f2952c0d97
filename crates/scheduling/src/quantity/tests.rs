//! Unit tests for [`Quantity`]: parsing, canonical printing and arithmetic, largely ported as data
//! from apimachinery's `quantity_test.go` (`TestQuantityParse`, `TestQuantityString`,
//! `TestQuantityParseEmit`, `TestParseQuantity`, `TestMilliNewSet`, `TestNewSet`, `TestAdd`, ...).

use super::*;

mod arithmetic;
mod formatting;
mod parsing;

/// `mantissa · 10^exponent` units as nano-units, like apimachinery's test helper `decQuantity`.
fn dec(mantissa: i128, exponent: i32) -> i128 {
    let shift = exponent + 9;
    if shift >= 0 {
        mantissa * 10_i128.pow(shift.unsigned_abs())
    } else {
        mantissa / 10_i128.pow(shift.unsigned_abs())
    }
}

fn q(input: &str) -> Quantity {
    input
        .parse()
        .unwrap_or_else(|e| panic!("{input:?} should parse: {e}"))
}

fn kind(input: &str) -> ParseQuantityErrorKind {
    match input.parse::<Quantity>() {
        Ok(parsed) => panic!("{input:?} should be rejected, parsed as {parsed:?}"),
        Err(e) => e.kind(),
    }
}

use Format::{BinarySI as Bin, DecimalExponent as Exp, DecimalSI as Si};
