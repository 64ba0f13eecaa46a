//! Kubernetes `resource.Quantity` strings: `12`, `500m`, `1.5`, `32Gi`, `129e6`.
//!
//! Parsing keeps the exact decimal digits and the two exponents apart, so the
//! only rounding is the final conversion to `f64` (correctly rounded by the
//! standard library) and the power-of-two multiplication, which is exact.
//! Formatting rounds *down* to the unit, because graft uses it to derive
//! allocatable from capacity: rounding up would promise more than exists.

use std::fmt;

/// Inputs longer than this are not quantities anyone writes; refusing them
/// bounds the work done on hostile values.
const MAX_QUANTITY_LEN: usize = 1024;

/// Why a quantity could not be parsed or formatted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error(
        "'{value}' is not a Kubernetes quantity (expected a number with an optional suffix such as 500m, 1.5, 32Gi, 129e6)"
    )]
    Malformed { value: String },
    #[error("quantity '{value}' is out of range")]
    OutOfRange { value: String },
    #[error("cannot format {value} as a quantity: {reason}")]
    Unformattable { value: String, reason: &'static str },
    #[error(
        "unknown quantity unit '{unit}' (expected one of m, \"\", k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei)"
    )]
    UnknownUnit { unit: String },
}

/// A parsed quantity: `(-1)^negative * digits * 10^exp10 * 2^exp2`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantity {
    negative: bool,
    /// Significant decimal digits, without leading zeros (`"0"` for zero).
    digits: String,
    exp10: i64,
    exp2: u32,
}

impl Quantity {
    /// Parses the Kubernetes quantity grammar: an optionally signed decimal
    /// number, then a binary-SI suffix (`Ki`..`Ei`), a decimal-SI suffix
    /// (`n u m k M G T P E`) or a decimal exponent (`e3`, `E-2`).
    pub fn parse(text: &str) -> Result<Quantity, QuantityError> {
        let malformed = || QuantityError::Malformed {
            value: truncate(text),
        };
        if text.is_empty() || text.len() > MAX_QUANTITY_LEN {
            return Err(malformed());
        }
        let (negative, rest) = match text.as_bytes()[0] {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        let number_len = rest
            .bytes()
            .position(|b| !(b.is_ascii_digit() || b == b'.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_len);
        let (integer, fraction) = number.split_once('.').unwrap_or((number, ""));
        if fraction.contains('.') || (integer.is_empty() && fraction.is_empty()) {
            return Err(malformed());
        }
        let (exp10, exp2) = parse_suffix(suffix).ok_or_else(malformed)?;
        let fraction_len = i64::try_from(fraction.len()).map_err(|_| malformed())?;
        let exp10 = exp10.checked_sub(fraction_len).ok_or_else(malformed)?;
        let all_digits = format!("{integer}{fraction}");
        let trimmed = all_digits.trim_start_matches('0');
        let digits = if trimmed.is_empty() { "0" } else { trimmed };
        Ok(Quantity {
            negative,
            digits: digits.to_string(),
            exp10,
            exp2,
        })
    }

    /// The value in base units (cores, bytes).
    pub fn to_f64(&self) -> Result<f64, QuantityError> {
        let sign = if self.negative { "-" } else { "" };
        // The standard parser rounds a decimal of any length correctly, and
        // saturates huge exponents to infinity or zero instead of failing.
        let decimal: f64 = format!("{sign}{}e{}", self.digits, self.exp10)
            .parse()
            .map_err(|_| self.out_of_range())?;
        let value = decimal * 2f64.powi(self.exp2 as i32);
        if value.is_finite() {
            Ok(value)
        } else {
            Err(self.out_of_range())
        }
    }

    /// The value in billionths of a base unit, exactly, as Kubernetes keeps it: a
    /// finer value is rounded up in magnitude to the next billionth (`0.1n` is `1n`).
    /// Fails beyond about 1.7e29 base units.
    pub fn to_nanos(&self) -> Result<i128, QuantityError> {
        let trimmed = self.digits.trim_end_matches('0');
        if trimmed.is_empty() {
            return Ok(0);
        }
        let zeros =
            i64::try_from(self.digits.len() - trimmed.len()).map_err(|_| self.out_of_range())?;
        let digits: i128 = trimmed.parse().map_err(|_| self.out_of_range())?;
        let exp10 = self
            .exp10
            .checked_add(zeros)
            .and_then(|e| e.checked_add(9))
            .ok_or_else(|| self.out_of_range())?;
        let scaled = 2i128
            .checked_pow(self.exp2)
            .and_then(|power| digits.checked_mul(power))
            .ok_or_else(|| self.out_of_range())?;
        let magnitude = if exp10 >= 0 {
            u32::try_from(exp10)
                .ok()
                .and_then(|e| 10i128.checked_pow(e))
                .and_then(|power| scaled.checked_mul(power))
                .ok_or_else(|| self.out_of_range())?
        } else {
            match u32::try_from(-exp10)
                .ok()
                .and_then(|e| 10i128.checked_pow(e))
            {
                Some(power) => (scaled + power - 1) / power,
                // Smaller than a billionth: rounded up to one.
                None => 1,
            }
        };
        Ok(if self.negative { -magnitude } else { magnitude })
    }

    fn out_of_range(&self) -> QuantityError {
        QuantityError::OutOfRange {
            value: truncate(&self.to_string()),
        }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.negative { "-" } else { "" };
        write!(f, "{sign}{}e{}", self.digits, self.exp10)?;
        if self.exp2 > 0 {
            write!(f, "*2^{}", self.exp2)?;
        }
        Ok(())
    }
}

/// Parses a quantity string into base units.
pub fn quantity_value(text: &str) -> Result<f64, QuantityError> {
    Quantity::parse(text)?.to_f64()
}

/// The unit [`format_quantity`] rounds down to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Thousandths (`m`); whole numbers are written without a suffix.
    Milli,
    /// Whole base units, no suffix.
    Base,
    /// A decimal-SI suffix: `k` (10^3) to `E` (10^18).
    Decimal { suffix: &'static str, exp10: i32 },
    /// A binary-SI suffix: `Ki` (2^10) to `Ei` (2^60).
    Binary { suffix: &'static str, exp2: i32 },
}

impl Unit {
    pub fn parse(unit: &str) -> Result<Unit, QuantityError> {
        const DECIMAL: [&str; 6] = ["k", "M", "G", "T", "P", "E"];
        const BINARY: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
        if unit == "m" {
            return Ok(Unit::Milli);
        }
        if unit.is_empty() {
            return Ok(Unit::Base);
        }
        // The position in each table is the power of 1000 (or 1024) minus one.
        for (power, suffix) in (1i32..).zip(DECIMAL) {
            if unit == suffix {
                return Ok(Unit::Decimal {
                    suffix,
                    exp10: 3 * power,
                });
            }
        }
        for (power, suffix) in (1i32..).zip(BINARY) {
            if unit == suffix {
                return Ok(Unit::Binary {
                    suffix,
                    exp2: 10 * power,
                });
            }
        }
        Err(QuantityError::UnknownUnit {
            unit: truncate(unit),
        })
    }
}

/// Formats `value` (in base units) rounded down to `unit`.
///
/// `12.0` in `m` is `"12"`, `10.5` is `"10500m"`; `41231686041.6` in `Ki` is
/// `"40265318Ki"`. Negative, infinite and NaN values are errors.
pub fn format_quantity(value: f64, unit: &str) -> Result<String, QuantityError> {
    let unit = Unit::parse(unit)?;
    let unformattable = |reason| QuantityError::Unformattable {
        value: value.to_string(),
        reason,
    };
    if value.is_nan() || value.is_infinite() {
        return Err(unformattable("not a finite number"));
    }
    if value < 0.0 {
        return Err(unformattable("negative"));
    }
    let scaled = match unit {
        Unit::Milli => value * 1000.0,
        Unit::Base => value,
        Unit::Decimal { exp10, .. } => value / 10f64.powi(exp10),
        Unit::Binary { exp2, .. } => value / 2f64.powi(exp2),
    };
    let count = floor_guarded(scaled).ok_or_else(|| unformattable("too large"))?;
    Ok(match unit {
        Unit::Milli if count % 1000 == 0 => (count / 1000).to_string(),
        Unit::Milli => format!("{count}m"),
        Unit::Base => count.to_string(),
        Unit::Decimal { suffix, .. } | Unit::Binary { suffix, .. } => format!("{count}{suffix}"),
    })
}

/// Rounds down, but first nudges up by far less than one unit: a product such
/// as `0.7 * 3000.0` lands on `2099.9999999999995`, and must still count as
/// 2100, or every formatted quantity could lose one unit to float noise.
fn floor_guarded(scaled: f64) -> Option<u64> {
    let nudged = scaled + scaled * 1e-12 + 1e-9;
    // 2^64: any value at or above it does not fit a u64.
    if !(0.0..18_446_744_073_709_551_616.0).contains(&nudged) {
        return None;
    }
    // In range, so the cast neither saturates nor wraps.
    Some(nudged.floor() as u64)
}

/// Returns `(exp10, exp2)` for a suffix, `None` when it is not one.
fn parse_suffix(suffix: &str) -> Option<(i64, u32)> {
    let decimal = match suffix {
        "" => Some(0),
        "n" => Some(-9),
        "u" => Some(-6),
        "m" => Some(-3),
        "k" => Some(3),
        "M" => Some(6),
        "G" => Some(9),
        "T" => Some(12),
        "P" => Some(15),
        "E" => Some(18),
        _ => None,
    };
    if let Some(exp10) = decimal {
        return Some((exp10, 0));
    }
    let binary = match suffix {
        "Ki" => Some(10),
        "Mi" => Some(20),
        "Gi" => Some(30),
        "Ti" => Some(40),
        "Pi" => Some(50),
        "Ei" => Some(60),
        _ => None,
    };
    if let Some(exp2) = binary {
        return Some((0, exp2));
    }
    // A decimal exponent: `e` or `E` then a signed integer (`E` alone is exa).
    let exponent = suffix.strip_prefix(['e', 'E'])?;
    let unsigned = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((exponent.parse::<i64>().ok()?, 0))
}

/// Error messages quote the input; a hostile megabyte string should not be
/// quoted whole.
fn truncate(text: &str) -> String {
    const LIMIT: usize = 64;
    if text.len() <= LIMIT {
        return text.to_string();
    }
    let mut end = LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str) -> f64 {
        quantity_value(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn parses_plain_and_decimal_si() {
        let cases = [
            ("12", 12.0),
            ("0", 0.0),
            ("1.5", 1.5),
            (".5", 0.5),
            ("5.", 5.0),
            ("+3", 3.0),
            ("-2", -2.0),
            ("500m", 0.5),
            ("250u", 0.00025),
            ("100n", 0.0000001),
            ("1k", 1e3),
            ("2M", 2e6),
            ("3G", 3e9),
            ("4T", 4e12),
            ("5P", 5e15),
            ("6E", 6e18),
            ("128974848", 128_974_848.0),
            ("129e6", 129e6),
            ("129E6", 129e6),
            ("1e-3", 0.001),
            ("1.5e+2", 150.0),
            ("007", 7.0),
        ];
        for (text, expected) in cases {
            assert_eq!(value(text), expected, "{text}");
        }
    }

    #[test]
    fn parses_binary_si() {
        let cases = [
            ("1Ki", 1024.0),
            ("1Mi", 1_048_576.0),
            ("32Gi", 32.0 * 1_073_741_824.0),
            ("1Ti", 1_099_511_627_776.0),
            ("1Pi", 1_125_899_906_842_624.0),
            ("1Ei", 1_152_921_504_606_846_976.0),
            ("1.5Gi", 1.5 * 1_073_741_824.0),
        ];
        for (text, expected) in cases {
            assert_eq!(value(text), expected, "{text}");
        }
    }

    #[test]
    fn rejects_malformed_naming_the_value() {
        for text in [
            "", "abc", "1.2.3", "1Kb", "Gi", ".", "1 Gi", " 1", "1e", "1e+", "1ee3", "--1", "1mi",
            "0x10", "1,5",
        ] {
            let err = quantity_value(text).expect_err(text);
            assert!(err.to_string().contains(&format!("'{text}'")), "{err}");
        }
    }

    #[test]
    fn huge_inputs_error_without_panicking() {
        assert!(quantity_value("1e999999999999999999999").is_err());
        assert!(quantity_value("1e400").is_err());
        assert!(quantity_value(&"9".repeat(5000)).is_err());
        assert_eq!(value("1e-400"), 0.0);
        assert!(value(&"9".repeat(300)) > 1e299);
    }

    #[test]
    fn formats_millis() {
        assert_eq!(format_quantity(12.0, "m").as_deref(), Ok("12"));
        assert_eq!(format_quantity(10.5, "m").as_deref(), Ok("10500m"));
        assert_eq!(format_quantity(0.25, "m").as_deref(), Ok("250m"));
        assert_eq!(format_quantity(0.0, "m").as_deref(), Ok("0"));
        assert_eq!(format_quantity(0.0004, "m").as_deref(), Ok("0"));
        assert_eq!(format_quantity(1.2345, "m").as_deref(), Ok("1234m"));
    }

    #[test]
    fn formats_whole_and_suffixed_units() {
        assert_eq!(format_quantity(7.9, "").as_deref(), Ok("7"));
        assert_eq!(
            format_quantity(41_231_686_041.6, "Ki").as_deref(),
            Ok("40265318Ki")
        );
        assert_eq!(
            format_quantity(1536.0 * 1048576.0, "Mi").as_deref(),
            Ok("1536Mi")
        );
        assert_eq!(format_quantity(2.5e9, "G").as_deref(), Ok("2G"));
        assert_eq!(format_quantity(2.5e9, "M").as_deref(), Ok("2500M"));
        assert_eq!(format_quantity(1e3, "k").as_deref(), Ok("1k"));
    }

    #[test]
    fn float_noise_does_not_lose_a_unit() {
        // 0.7 * 3 == 2.0999999999999996 in binary floating point.
        assert_eq!(format_quantity(0.7 * 3.0, "m").as_deref(), Ok("2100m"));
        assert_eq!(format_quantity(1.1 * 3.0, "m").as_deref(), Ok("3300m"));
        let bytes = value("64Gi") * 0.9;
        assert_eq!(format_quantity(bytes, "Ki").as_deref(), Ok("60397977Ki"));
    }

    #[test]
    fn format_rejects_bad_values_and_units() {
        assert!(format_quantity(-1.0, "m").is_err());
        assert!(format_quantity(f64::NAN, "m").is_err());
        assert!(format_quantity(f64::INFINITY, "").is_err());
        assert!(format_quantity(1e300, "m").is_err());
        let err = format_quantity(1.0, "Kb").unwrap_err();
        assert!(err.to_string().contains("'Kb'"), "{err}");
    }

    #[test]
    fn nanos_are_exact_and_round_up() {
        let nanos = |text: &str| Quantity::parse(text).and_then(|q| q.to_nanos());
        assert_eq!(nanos("1"), Ok(1_000_000_000));
        assert_eq!(nanos("500m"), Ok(500_000_000));
        assert_eq!(nanos("1.5Gi"), Ok(1_610_612_736_000_000_000));
        assert_eq!(nanos("-2k"), Ok(-2_000_000_000_000));
        assert_eq!(nanos("0.1n"), Ok(1));
        assert_eq!(nanos("1e-20"), Ok(1));
        assert_eq!(nanos("0"), Ok(0));
        assert_eq!(
            nanos("1.000000000000000000000000000000000000000000"),
            Ok(1_000_000_000)
        );
        assert!(nanos("1e30").is_err());
        assert!(nanos("1e100").is_err());
    }

    #[test]
    fn parse_then_format_round_trips_canonical_values() {
        for (text, unit) in [("250m", "m"), ("3", "m"), ("40265318Ki", "Ki"), ("2G", "G")] {
            assert_eq!(
                format_quantity(value(text), unit).as_deref(),
                Ok(text),
                "{text}"
            );
        }
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parse_never_panics(text in "\\PC{0,40}") {
            let _ = quantity_value(&text);
        }

        #[test]
        fn parse_never_panics_on_near_quantities(text in "[-+]?[0-9.]{0,30}([eE][-+]?[0-9]{0,25}|[KMGTPE]i?|[numk])?") {
            let _ = quantity_value(&text);
        }

        #[test]
        fn millis_round_trip(millis in 0u64..10_000_000_000) {
            let text = format!("{millis}m");
            let formatted = format_quantity(quantity_value(&text).unwrap_or(-1.0), "m");
            let expected = if millis % 1000 == 0 { (millis / 1000).to_string() } else { text };
            prop_assert_eq!(formatted, Ok(expected));
        }

        #[test]
        fn whole_binary_units_round_trip(n in 0u64..1_000_000_000, unit in prop::sample::select(vec!["Ki", "Mi", "Gi"])) {
            let text = format!("{n}{unit}");
            prop_assert_eq!(format_quantity(quantity_value(&text).unwrap_or(-1.0), unit), Ok(text));
        }
    }
}
