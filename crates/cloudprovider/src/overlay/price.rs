//! A NodeOverlay's `price` or `priceAdjustment`, parsed once and applied to an offering's
//! price.
//!
//! Responsibility: the three forms upstream accepts — an absolute price (`"0.25"`), a signed
//! amount (`"+1.2"`, `"-0.5"`) and a signed percentage (`"+10%"`, `"-15%"`) — and upstream's
//! arithmetic: a result below zero is zero, nothing is rounded.
//! Inputs: the field text. Outputs: [`PriceChange`] or an error naming the field.

/// How an overlay changes an offering's price.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PriceChange {
    /// `price`: the offering costs exactly this.
    Set(f64),
    /// `priceAdjustment` as an amount: added to the price.
    Add(f64),
    /// `priceAdjustment` as a percentage: the price times `1 + p / 100`.
    Percent(f64),
}

impl PriceChange {
    /// Reads `spec.price`: a non-negative decimal.
    ///
    /// # Errors
    /// When the text is not one.
    pub fn price(text: &str) -> Result<Self, String> {
        let valid = !text.is_empty()
            && text.split_once('.').map_or_else(
                || digits(text),
                |(whole, fraction)| digits(whole) && digits(fraction),
            );
        match text.parse::<f64>() {
            Ok(p) if valid && p.is_finite() => Ok(Self::Set(p)),
            _ => Err(format!(
                "invalid price {text:?}: expected a non-negative decimal such as \"0.25\""
            )),
        }
    }

    /// Reads `spec.priceAdjustment`: `+`/`-` then a decimal, optionally followed by `%`
    /// (a decrease of at most 100 %).
    ///
    /// # Errors
    /// When the text is not one of those forms.
    pub fn adjustment(text: &str) -> Result<Self, String> {
        let err = || {
            format!(
                "invalid priceAdjustment {text:?}: expected a signed amount (\"+0.5\", \"-1.2\") \
                 or a signed percentage (\"+10%\", \"-15%\", at most \"-100%\")"
            )
        };
        let (negative, rest) = match text.as_bytes().first() {
            Some(b'+') => (false, text.get(1..).unwrap_or_default()),
            Some(b'-') => (true, text.get(1..).unwrap_or_default()),
            _ => return Err(err()),
        };
        let (number, percent) = match rest.strip_suffix('%') {
            Some(n) => (n, true),
            None => (rest, false),
        };
        let shape = match number.split_once('.') {
            Some((whole, fraction)) => {
                whole.bytes().all(|b| b.is_ascii_digit()) && digits(fraction)
            }
            None => digits(number),
        };
        let value: f64 = number.parse().map_err(|_| err())?;
        if !shape || !value.is_finite() || (percent && negative && value > 100.0) {
            return Err(err());
        }
        let signed = if negative { -value } else { value };
        Ok(if percent {
            Self::Percent(signed)
        } else {
            Self::Add(signed)
        })
    }

    /// The price after the change; never below zero.
    #[must_use]
    pub fn apply(self, base: f64) -> f64 {
        let price = match self {
            Self::Set(p) => p,
            Self::Add(d) => base + d,
            Self::Percent(p) => base * (1.0 + p / 100.0),
        };
        price.max(0.0)
    }

    /// Whether the change needs a known price to start from (an adjustment does; an
    /// absolute price does not).
    #[must_use]
    pub fn is_relative(self) -> bool {
        !matches!(self, Self::Set(_))
    }
}

fn digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::float_cmp)]
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn percentages_scale_the_base_and_stop_at_zero() {
        for (text, base, want) in [
            ("-10%", 10.0, 9.0),
            ("+10%", 10.0, 11.0),
            ("-50%", 10.0, 5.0),
            ("+100%", 10.0, 20.0),
            ("-100%", 10.0, 0.0),
            ("-25%", 1.5, 1.125),
            ("+298%", 1.0, 3.98),
            ("+100.102%", 1.0, 2.00102),
            ("-12.5%", 8.0, 7.0),
        ] {
            let change = PriceChange::adjustment(text).unwrap();
            assert!(close(change.apply(base), want), "{text} on {base}");
        }
    }

    #[test]
    fn amounts_add_to_the_base_and_stop_at_zero() {
        for (text, base, want) in [
            ("+0", 10.0, 10.0),
            ("+5", 10.0, 15.0),
            ("-2.5", 10.0, 7.5),
            ("-10", 10.0, 0.0),
            ("-15", 10.0, 0.0),
            ("+0.75", 1.25, 2.0),
            ("+100", 0.001, 100.001),
            ("+0.0001", 0.0001, 0.0002),
            ("+.5", 1.0, 1.5),
        ] {
            let change = PriceChange::adjustment(text).unwrap();
            assert!(close(change.apply(base), want), "{text} on {base}");
        }
    }

    #[test]
    fn a_price_replaces_the_base() {
        assert_eq!(PriceChange::price("80.0").unwrap().apply(10.0), 80.0);
        assert_eq!(
            PriceChange::price("13234.223").unwrap().apply(1.02),
            13234.223
        );
        assert_eq!(PriceChange::price("0").unwrap().apply(3.0), 0.0);
        assert!(!PriceChange::price("1").unwrap().is_relative());
        assert!(PriceChange::adjustment("+1").unwrap().is_relative());
    }

    #[test]
    fn malformed_text_is_refused_naming_the_field() {
        for bad in ["", "-1", "+1", "1.", ".5", "1e3", "abc", "1,5", " 1"] {
            let e = PriceChange::price(bad).unwrap_err();
            assert!(e.contains("invalid price"), "{bad}: {e}");
        }
        for bad in [
            "", "10", "10%", "+", "-", "+%", "-101%", "-200%", "+1.", "+1e3", "++1", "+ 1", "+1%%",
            "*2",
        ] {
            let e = PriceChange::adjustment(bad).unwrap_err();
            assert!(e.contains("invalid priceAdjustment"), "{bad}: {e}");
        }
    }
}
