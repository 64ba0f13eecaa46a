//! Kubernetes `resource.Quantity` strings: `12`, `500m`, `1.5`, `32Gi`, `129e6`.
//!
//! Parsing keeps the exact decimal digits and the two exponents apart, so the
//! only rounding is the final conversion to `f64` (correctly rounded by the
//! standard library) and the power-of-two multiplication, which is exact.
//! Formatting rounds *down* to the unit, because graft uses it to derive
//! allocatable from capacity: rounding up would promise more than exists. It
//! works on exact values, never on doubles, so no float error can push a count
//! past the true value (see [`format_quantity`] for how a double is read).
//!
//! Errors never quote the value: it comes from the object under review, and
//! the reasons end up in logs (see SECURITY.md).

use std::fmt;

use num_bigint::BigUint;

/// Inputs longer than this are not quantities anyone writes; refusing them
/// bounds the work done on hostile values.
const MAX_QUANTITY_LEN: usize = 1024;

/// Why a quantity could not be parsed or formatted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error(
        "the value is not a Kubernetes quantity (expected a number with an optional suffix such as 500m, 1.5, 32Gi, 129e6)"
    )]
    Malformed,
    #[error("the quantity is out of range ({limit})")]
    OutOfRange { limit: &'static str },
    #[error("cannot format the value as a quantity: {reason}")]
    Unformattable { reason: &'static str },
    #[error(
        "unknown quantity unit (expected one of m, \"\", k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei)"
    )]
    UnknownUnit,
}

const DOUBLE_LIMIT: &str = "a double holds up to about 1.8e308 base units";
const NANOS_LIMIT: &str = "an exact quantity holds up to about 1.7e29 base units";

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
        let malformed = || QuantityError::Malformed;
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
        let out_of_range = || QuantityError::OutOfRange {
            limit: DOUBLE_LIMIT,
        };
        let decimal: f64 = format!("{sign}{}e{}", self.digits, self.exp10)
            .parse()
            .map_err(|_| out_of_range())?;
        let value = decimal * 2f64.powi(self.exp2 as i32);
        if value.is_finite() {
            Ok(value)
        } else {
            Err(out_of_range())
        }
    }

    /// The value in billionths of a base unit, exactly, as Kubernetes keeps it: a
    /// finer value is rounded up in magnitude to the next billionth (`0.1n` is `1n`).
    /// Fails beyond about 1.7e29 base units.
    pub fn to_nanos(&self) -> Result<i128, QuantityError> {
        let out_of_range = || QuantityError::OutOfRange { limit: NANOS_LIMIT };
        let trimmed = self.digits.trim_end_matches('0');
        if trimmed.is_empty() {
            return Ok(0);
        }
        let zeros = i64::try_from(self.digits.len() - trimmed.len()).map_err(|_| out_of_range())?;
        let digits: i128 = trimmed.parse().map_err(|_| out_of_range())?;
        let exp10 = self
            .exp10
            .checked_add(zeros)
            .and_then(|e| e.checked_add(9))
            .ok_or_else(out_of_range)?;
        let scaled = 2i128
            .checked_pow(self.exp2)
            .and_then(|power| digits.checked_mul(power))
            .ok_or_else(out_of_range)?;
        let magnitude = if exp10 >= 0 {
            u32::try_from(exp10)
                .ok()
                .and_then(|e| 10i128.checked_pow(e))
                .and_then(|power| scaled.checked_mul(power))
                .ok_or_else(out_of_range)?
        } else {
            match u32::try_from(-exp10)
                .ok()
                .and_then(|e| 10i128.checked_pow(e))
            {
                // Rounded up, without the `scaled + power - 1` that overflows near
                // i128::MAX.
                Some(power) => scaled / power + i128::from(scaled % power != 0),
                // Smaller than a billionth: rounded up to one.
                None => 1,
            }
        };
        Ok(if self.negative { -magnitude } else { magnitude })
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
        Err(QuantityError::UnknownUnit)
    }
}

/// Formats `value` (in base units) rounded down to `unit`.
///
/// A whole double is read at its exact value: `2^60` (`1Ei`) stays exact,
/// though it prints as `1.152921504606847e18`. Any other double is not a
/// number anyone means exactly (`0.7` is really 0.69999999999999995559...), and
/// is read as the shortest decimal that converts back to it, as it prints: `0.7`
/// is seven tenths, and `quantity_value("12345m")` formats back as `"12345m"`.
/// `0.7 * 3.0` prints as `2.0999999999999996`, so it is `"2099m"` ([`scale_quantity`]
/// multiplies exactly). The count is then rounded down exactly: `12.0` in `m` is `"12"`,
/// `10.5` is `"10500m"`, `1e15` is `"1000000000000000"`; `41231686041.6` in
/// `Ki` is `"40265318Ki"`. Negative, infinite and NaN values are errors.
pub fn format_quantity(value: f64, unit: &str) -> Result<String, QuantityError> {
    let unit = Unit::parse(unit)?;
    format_product(&[Exact::from_f64(value)?], unit)
}

/// `quantity × factor` rounded down to `unit`, the product taken exactly (the
/// factor read as [`format_quantity`] reads a double): `scale_quantity("3", 0.7,
/// "m")` is `"2100m"`, where `3.0 * 0.7` as doubles would lose a millicore, and
/// the result never exceeds the product. A quantity [`quantity_value`] refuses
/// is an error here too.
pub fn scale_quantity(quantity: &str, factor: f64, unit: &str) -> Result<String, QuantityError> {
    let quantity = Quantity::parse(quantity)?;
    quantity.to_f64()?;
    let factor = Exact::from_f64(factor)?;
    format_product(&[Exact::from(&quantity), factor], Unit::parse(unit)?)
}

const NOT_FINITE: &str = "it is not a finite number";
const NEGATIVE: &str = "it is negative";
const TOO_LARGE: &str = "the count of units does not fit 64 bits (use a larger unit)";

/// A value held exactly: `(-1)^negative * digits * 10^exp10 * 2^exp2`, `digits`
/// a whole number without leading zeros.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Exact {
    negative: bool,
    digits: String,
    exp10: i128,
    exp2: i128,
}

impl From<&Quantity> for Exact {
    fn from(quantity: &Quantity) -> Exact {
        Exact {
            negative: quantity.negative,
            digits: quantity.digits.clone(),
            exp10: i128::from(quantity.exp10),
            exp2: i128::from(quantity.exp2),
        }
    }
}

impl Exact {
    /// A double as [`format_quantity`] reads it.
    fn from_f64(value: f64) -> Result<Exact, QuantityError> {
        let not_finite = || QuantityError::Unformattable { reason: NOT_FINITE };
        if !value.is_finite() {
            return Err(not_finite());
        }
        if value.fract() == 0.0 {
            let (mantissa, exp2) = binary_parts(value);
            return Ok(Exact {
                negative: value.is_sign_negative(),
                digits: mantissa.to_string(),
                exp10: 0,
                exp2,
            });
        }
        // `{:e}` prints the shortest decimal that converts back to `value`.
        Quantity::parse(&format!("{value:e}"))
            .map(|printed| Exact::from(&printed))
            .map_err(|_| not_finite())
    }

    fn is_zero(&self) -> bool {
        self.digits == "0"
    }
}

/// `|value| = mantissa * 2^exp2` for a finite `value`, `mantissa` odd (or zero).
fn binary_parts(value: f64) -> (u64, i128) {
    let bits = value.abs().to_bits();
    let biased = (bits >> 52) & 0x7ff;
    let fraction = bits & ((1 << 52) - 1);
    // Subnormals have no implicit leading bit, and the smallest exponent.
    let (mantissa, exp2) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1 << 52), i128::from(biased) - 1075)
    };
    if mantissa == 0 {
        return (0, 0);
    }
    let zeros = mantissa.trailing_zeros();
    (mantissa >> zeros, exp2 + i128::from(zeros))
}

/// The product of `factors`, rounded down to `unit` and written with its suffix.
fn format_product(factors: &[Exact], unit: Unit) -> Result<String, QuantityError> {
    let unformattable = |reason| QuantityError::Unformattable { reason };
    let count = if factors.iter().any(Exact::is_zero) {
        0
    } else {
        if factors.iter().filter(|factor| factor.negative).count() % 2 == 1 {
            return Err(unformattable(NEGATIVE));
        }
        let mut exp10: i128 = factors.iter().map(|f| f.exp10).sum();
        let mut exp2: i128 = factors.iter().map(|f| f.exp2).sum();
        match unit {
            Unit::Milli => exp10 += 3,
            Unit::Base => {}
            Unit::Decimal { exp10: unit10, .. } => exp10 -= i128::from(unit10),
            Unit::Binary { exp2: unit2, .. } => exp2 -= i128::from(unit2),
        }
        let digits: Vec<&str> = factors.iter().map(|f| f.digits.as_str()).collect();
        floor_exact(&digits, exp10, exp2).ok_or_else(|| unformattable(TOO_LARGE))?
    };
    Ok(match unit {
        Unit::Milli if count % 1000 == 0 => (count / 1000).to_string(),
        Unit::Milli => format!("{count}m"),
        Unit::Base => count.to_string(),
        Unit::Decimal { suffix, .. } | Unit::Binary { suffix, .. } => format!("{count}{suffix}"),
    })
}

/// `floor(d1 * d2 * ... * 10^exp10 * 2^exp2)` for whole numbers `d1, d2, ...`
/// written without leading zeros, or `None` when it does not fit a `u64`.
fn floor_exact(digits: &[&str], exp10: i128, exp2: i128) -> Option<u64> {
    // A product of k whole numbers of n1, n2, ... digits lies in
    // [10^(n1 + n2 + ... - k), 10^(n1 + n2 + ...)). Settling the far too large
    // and the below-one by that alone keeps the exact arithmetic small whatever
    // the exponents (`1e999999`); the margins cover the rounding of the estimate.
    let total: i128 = digits.iter().map(|d| d.len() as i128).sum();
    let count = digits.len() as i128;
    let binary = exp2 as f64 * std::f64::consts::LOG10_2;
    if (total - count + exp10) as f64 + binary > 20.0 {
        return None;
    }
    if (total + exp10) as f64 + binary < -1.0 {
        return Some(0);
    }
    let mut value = BigUint::from(1u32);
    for factor in digits {
        value *= factor.parse::<BigUint>().ok()?;
    }
    // Multiplying before dividing, and dividing by whole numbers only, keeps it
    // exact: floor(floor(x / a) / b) is floor(x / (a * b)).
    let (up10, down10) = split_sign(exp10)?;
    let (up2, down2) = split_sign(exp2)?;
    value *= BigUint::from(10u32).pow(up10);
    value <<= up2;
    value /= BigUint::from(10u32).pow(down10);
    value >>= down2;
    u64::try_from(value).ok()
}

/// `(e, 0)` for a positive exponent, `(0, -e)` for a negative one.
fn split_sign(exponent: i128) -> Option<(u32, u32)> {
    let magnitude = u32::try_from(exponent.unsigned_abs()).ok()?;
    Some(if exponent >= 0 {
        (magnitude, 0)
    } else {
        (0, magnitude)
    })
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
    fn rejects_malformed_without_quoting_the_value() {
        for text in [
            "", "abc", "1.2.3", "1Kb", "Gi", ".", "1 Gi", " 1", "1e", "1e+", "1ee3", "--1", "1mi",
            "0x10", "1,5",
        ] {
            assert_eq!(
                quantity_value(text),
                Err(QuantityError::Malformed),
                "{text}"
            );
        }
        assert_eq!(
            QuantityError::Malformed.to_string(),
            "the value is not a Kubernetes quantity (expected a number with an optional suffix \
             such as 500m, 1.5, 32Gi, 129e6)"
        );
    }

    #[test]
    fn errors_never_quote_the_value() {
        let secret = "12345678987654321";
        let errors = [
            quantity_value(&format!("{secret}x")),
            quantity_value(&format!("{secret}e999")),
            Quantity::parse(&format!("{secret}e999")).and_then(|q| q.to_nanos().map(|_| 0.0)),
            format_quantity(-12_345_678_987_654_321.0, "m").map(|_| 0.0),
            format_quantity(12_345_678_987_654_321e10, "m").map(|_| 0.0),
            scale_quantity(&format!("{secret}x"), 1.0, "m").map(|_| 0.0),
            scale_quantity("1", 1.0, secret).map(|_| 0.0),
        ];
        for error in errors {
            let message = error.expect_err("an error").to_string();
            assert!(!message.contains("12345678"), "{message}");
            assert!(!message.contains("1.2345678"), "{message}");
        }
        assert_eq!(
            quantity_value("1e400").map_err(|e| e.to_string()),
            Err(
                "the quantity is out of range (a double holds up to about 1.8e308 base units)"
                    .to_string()
            )
        );
        assert_eq!(
            Quantity::parse("1e30").and_then(|q| q.to_nanos()).map_err(|e| e.to_string()),
            Err(
                "the quantity is out of range (an exact quantity holds up to about 1.7e29 base units)"
                    .to_string()
            )
        );
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
        // 3 * 0.7 as doubles is 2.0999999999999996; scaling multiplies the decimals.
        assert_eq!(scale_quantity("3", 0.7, "m").as_deref(), Ok("2100m"));
        assert_eq!(scale_quantity("3", 1.1, "m").as_deref(), Ok("3300m"));
        assert_eq!(
            scale_quantity("64Gi", 0.9, "Ki").as_deref(),
            Ok("60397977Ki")
        );
        // A double that is not exactly a short number is the decimal it prints as.
        assert_eq!(format_quantity(0.7, "m").as_deref(), Ok("700m"));
        assert_eq!(format_quantity(1.1 * 3.0, "m").as_deref(), Ok("3300m"));
        let bytes = value("64Gi") * 0.9;
        assert_eq!(format_quantity(bytes, "Ki").as_deref(), Ok("60397977Ki"));
    }

    #[test]
    fn a_double_below_a_unit_is_not_rounded_up() {
        // 2.0999999999999996 is below 2.1: counting 2100m would exceed it.
        assert_eq!(format_quantity(0.7 * 3.0, "m").as_deref(), Ok("2099m"));
        let below = 1_099_511_627_776f64.next_down();
        assert_eq!(format_quantity(below, "").as_deref(), Ok("1099511627775"));
        assert_eq!(format_quantity(below, "Ki").as_deref(), Ok("1073741823Ki"));
    }

    #[test]
    fn large_counts_are_exact() {
        let cases = [
            (format_quantity(1e12, ""), "1000000000000"),
            (format_quantity(1e15, "m"), "1000000000000000"),
            (format_quantity(1e15 + 0.5, "m"), "1000000000000000500m"),
            (format_quantity(1e18, ""), "1000000000000000000"),
            (format_quantity(value("1Ti"), ""), "1099511627776"),
            (format_quantity(value("1Ei"), ""), "1152921504606846976"),
            (format_quantity(value("1Ei"), "k"), "1152921504606846k"),
            (format_quantity(value("15Ei"), ""), "17293822569102704640"),
            (format_quantity(2f64.powi(53) + 2.0, ""), "9007199254740994"),
            (scale_quantity("1Ti", 1.0, ""), "1099511627776"),
            (scale_quantity("1Ti", 1.5, "Ki"), "1610612736Ki"),
            (scale_quantity("1Ei", 1.0, ""), "1152921504606846976"),
            (scale_quantity("1Ei", 1.2, "Ki"), "1351079888211148Ki"),
            (
                scale_quantity("999999999999999999", 1.0, ""),
                "999999999999999999",
            ),
            (
                scale_quantity("9223372036854775807", 1.5, ""),
                "13835058055282163710",
            ),
            (scale_quantity("1E", 1.5, ""), "1500000000000000000"),
            (
                scale_quantity("1000000000000003m", 0.5, "m"),
                "500000000000001m",
            ),
            (
                scale_quantity("0.000000000000000000000000000000000001Gi", 1e36, ""),
                "1073741824",
            ),
        ];
        for (result, expected) in cases {
            assert_eq!(result.as_deref(), Ok(expected));
        }
        assert!(format_quantity(2f64.powi(64), "").is_err());
        assert!(scale_quantity("16Ei", 1.0, "").is_err());
        assert_eq!(
            scale_quantity("16Ei", 1.0, "Ki").as_deref(),
            Ok("18014398509481984Ki")
        );
    }

    #[test]
    fn scaling_follows_quantity_value_at_the_edges() {
        assert_eq!(scale_quantity("12", 2.0, "m").as_deref(), Ok("24"));
        assert_eq!(scale_quantity("0", -1.0, "m").as_deref(), Ok("0"));
        assert_eq!(scale_quantity("-2", -1.5, "m").as_deref(), Ok("3"));
        assert_eq!(scale_quantity("1n", 0.5, "m").as_deref(), Ok("0"));
        assert_eq!(scale_quantity("1e-400", 1.0, "m").as_deref(), Ok("0"));
        let reason = |result: Result<String, QuantityError>| result.unwrap_err();
        assert_eq!(
            reason(scale_quantity("2", -1.0, "m")),
            QuantityError::Unformattable { reason: NEGATIVE }
        );
        assert_eq!(
            reason(scale_quantity("2", f64::INFINITY, "m")),
            QuantityError::Unformattable { reason: NOT_FINITE }
        );
        assert_eq!(
            reason(scale_quantity("1e400", 0.0, "m")),
            QuantityError::OutOfRange {
                limit: DOUBLE_LIMIT
            }
        );
        assert_eq!(
            reason(scale_quantity("2 Gi", 1.0, "m")),
            QuantityError::Malformed
        );
        assert_eq!(
            reason(scale_quantity("2", 1.0, "Kb")),
            QuantityError::UnknownUnit
        );
        assert_eq!(
            reason(scale_quantity(&"9".repeat(300), 1.0, "Ei")),
            QuantityError::Unformattable { reason: TOO_LARGE }
        );
        assert_eq!(
            scale_quantity(&format!("0.{}1", "0".repeat(900)), 1e300, "").as_deref(),
            Ok("0")
        );
    }

    #[test]
    fn format_rejects_bad_values_and_units() {
        assert!(format_quantity(-1.0, "m").is_err());
        assert!(format_quantity(f64::NAN, "m").is_err());
        assert!(format_quantity(f64::INFINITY, "").is_err());
        assert!(format_quantity(1e300, "m").is_err());
        let message = |result: Result<String, QuantityError>| result.unwrap_err().to_string();
        assert_eq!(
            message(format_quantity(1.0, "Kb")),
            r#"unknown quantity unit (expected one of m, "", k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei)"#
        );
        assert_eq!(
            message(format_quantity(-1.0, "m")),
            "cannot format the value as a quantity: it is negative"
        );
        assert_eq!(
            message(format_quantity(f64::NAN, "m")),
            "cannot format the value as a quantity: it is not a finite number"
        );
        assert_eq!(
            message(format_quantity(1e300, "m")),
            "cannot format the value as a quantity: the count of units does not fit 64 bits \
             (use a larger unit)"
        );
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
        // The largest count of nanos a quantity can spell rounds up without overflow.
        let max = i128::MAX;
        assert_eq!(nanos(&format!("{max}e-30")), Ok(max / 10i128.pow(21) + 1));
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

    const SUFFIXES: [&str; 13] = [
        "", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
    ];
    const UNITS: [&str; 14] = [
        "m", "", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
    ];

    /// How many base units one `suffix` is, or one `unit` counts in millis for `m`:
    /// `(numerator, denominator)`.
    fn scale_of(suffix: &str) -> (u128, u128) {
        match suffix {
            "m" => (1, 1000),
            "" => (1, 1),
            "k" => (1000, 1),
            "M" => (10u128.pow(6), 1),
            "G" => (10u128.pow(9), 1),
            "T" => (10u128.pow(12), 1),
            "P" => (10u128.pow(15), 1),
            "E" => (10u128.pow(18), 1),
            binary => {
                let position = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
                    .iter()
                    .position(|b| *b == binary)
                    .unwrap_or_else(|| panic!("unit {binary}"));
                (1 << (10 * (position + 1)), 1)
            }
        }
    }

    /// The count of `unit`s a formatted quantity says.
    fn count_of(text: &str, unit: &str) -> u128 {
        let (digits, factor) = match (unit, text.strip_suffix('m')) {
            ("m", Some(millis)) => (millis, 1),
            ("m", None) => (text, 1000),
            _ => (text.strip_suffix(unit).unwrap_or(text), 1),
        };
        digits
            .parse::<u128>()
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            * factor
    }

    /// `n` with a decimal point `fraction` digits from the right: `12345, 2` is `123.45`.
    fn with_point(n: u128, fraction: u32) -> String {
        let text = format!("{n:0>width$}", width = fraction as usize + 1);
        let (whole, decimals) = text.split_at(text.len() - fraction as usize);
        if decimals.is_empty() {
            whole.to_string()
        } else {
            format!("{whole}.{decimals}")
        }
    }

    /// Checks `result` against the exact `numerator / denominator` units: the
    /// count is at most that and less than one unit below it, or an error when
    /// the count does not fit 64 bits.
    fn check_floor(
        result: Result<String, QuantityError>,
        unit: &str,
        numerator: u128,
        denominator: u128,
    ) -> Result<(), TestCaseError> {
        if numerator / denominator > u128::from(u64::MAX) {
            prop_assert_eq!(
                result,
                Err(QuantityError::Unformattable { reason: TOO_LARGE })
            );
            return Ok(());
        }
        let text = result.map_err(|e| TestCaseError::fail(e.to_string()))?;
        let count = count_of(&text, unit);
        prop_assert!(
            count * denominator <= numerator,
            "{} exceeds {}/{}",
            text,
            numerator,
            denominator
        );
        prop_assert!(
            numerator < (count + 1) * denominator,
            "{} is more than a unit below {}/{}",
            text,
            numerator,
            denominator
        );
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

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

        /// Quantities from 1 to 1e18 base units, with every suffix and up to three
        /// decimals, times a decimal ratio: the count never exceeds the exact product
        /// and is within one unit of it.
        #[test]
        fn scaling_rounds_the_exact_product_down(
            magnitude in 0u32..18,
            seed: u64,
            fraction in 0u32..=3,
            suffix in prop::sample::select(SUFFIXES.to_vec()),
            ratio in 1u128..=40_000,
            ratio_decimals in 0u32..=4,
            unit in prop::sample::select(UNITS.to_vec()),
        ) {
            let power = 10u128.pow(magnitude);
            let target = power + u128::from(seed) % (9 * power);
            let (per_suffix, _) = scale_of(suffix);
            let n = (target * 10u128.pow(fraction) / per_suffix).max(1);
            let text = format!("{}{suffix}", with_point(n, fraction));
            let factor: f64 = format!("{ratio}e-{ratio_decimals}").parse().unwrap_or(f64::NAN);
            let (unit_numerator, unit_denominator) = scale_of(unit);
            // n * per_suffix / 10^fraction base units, times ratio / 10^decimals,
            // in units of unit_numerator / unit_denominator base units.
            let numerator = n * per_suffix * ratio * unit_denominator;
            let denominator = 10u128.pow(fraction + ratio_decimals) * unit_numerator;
            check_floor(scale_quantity(&text, factor, unit), unit, numerator, denominator)?;
            // A factor of one is the quantity itself, to the unit.
            let (numerator, denominator) =
                (n * per_suffix * unit_denominator, 10u128.pow(fraction) * unit_numerator);
            check_floor(scale_quantity(&text, 1.0, unit), unit, numerator, denominator)?;
        }

        /// Whole quantities from 1 to 1e18 base units, read by quantityValue (a
        /// double, exact below 2^53 and for these multiples of binary suffixes) and
        /// formatted: the exact count.
        #[test]
        fn formatting_exact_doubles_is_exact(
            magnitude in 0u32..18,
            seed: u64,
            suffix in prop::sample::select(SUFFIXES.to_vec()),
            unit in prop::sample::select(UNITS.to_vec()),
        ) {
            let power = 10u128.pow(magnitude);
            let target = power + u128::from(seed) % (9 * power);
            let (per_suffix, _) = scale_of(suffix);
            // Binary suffixes keep at most 53 significant bits, so the double is exact.
            let n = (target / per_suffix).clamp(1, 1 << 53);
            let text = format!("{n}{suffix}");
            let value = quantity_value(&text).unwrap_or(f64::NAN);
            prop_assume!(value == (n * per_suffix) as f64 && (value as u128) == n * per_suffix);
            let (unit_numerator, unit_denominator) = scale_of(unit);
            check_floor(
                format_quantity(value, unit),
                unit,
                n * per_suffix * unit_denominator,
                unit_numerator,
            )?;
        }

        /// Decimals of up to 15 significant digits, as a policy writes them, are
        /// formatted as those decimals.
        #[test]
        fn formatting_short_decimals_is_exact(
            digits in 1u128..1_000_000_000_000_000,
            decimals in 0u32..=6,
            unit in prop::sample::select(UNITS.to_vec()),
        ) {
            let value: f64 = format!("{digits}e-{decimals}").parse().unwrap_or(f64::NAN);
            let (unit_numerator, unit_denominator) = scale_of(unit);
            check_floor(
                format_quantity(value, unit),
                unit,
                digits * unit_denominator,
                10u128.pow(decimals) * unit_numerator,
            )?;
        }
    }
}
