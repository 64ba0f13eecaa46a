//! `string.format(list)` as Kubernetes' cel-go has it (strings extension version 2: the
//! first formatter, locale `en_US`). The `cel` crate's reads the same clauses as the CEL
//! spec's later formatter: this overload is declared first, so calls find it.
//!
//! | Clause | Argument | Output |
//! |---|---|---|
//! | `%s` | any value but an optional or a struct | as `string()` gives it; a double as Go's `%g`; lists and maps as CEL literals (`[1, "a"]`, `{"k":"v"}`) |
//! | `%d` | int, uint | decimal |
//! | `%f`, `%.Nf` | double, or `"NaN"`, `"Infinity"`, `"-Infinity"` | `N` (6) decimals, digits grouped: `1,234.50` |
//! | `%e` | as `%f` | `1.200000×10⁰³`: the precision is read as a width, as cel-go does |
//! | `%b`, `%o`, `%x`, `%X` | int, uint; `%b` bool; `%x` string, bytes | binary, octal, hex |
//! | `%%` | | `%` |

use std::fmt::Write;

use cel::ExecutionError;
use cel::common::types::{
    CelBool, CelBytes, CelDouble, CelDuration, CelInt, CelString, CelTimestamp, CelType, CelUInt,
    DYN_TYPE, Kind, STRING_TYPE,
};
use cel::common::value::{CowVal, Val};

use super::functions::{Overload, arity, fail};
use crate::k8s::go_text;

type CelResult<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

/// The overload, to be declared before the `cel` crate's strings extension.
pub fn overloads() -> Vec<Overload> {
    vec![Overload::method(
        "format",
        "string_format_list_v1",
        STRING_TYPE,
        vec![DYN_TYPE],
        format,
    )]
}

/// Digits after the point when a clause gives no precision.
const DEFAULT_PRECISION: usize = 6;

fn format<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [template, list] = arity::<2>("format", &args)?;
    let template = template
        .downcast_ref::<CelString>()
        .ok_or_else(|| fail("format", "expected a string"))?;
    let args = list
        .as_iterable()
        .filter(|_| list.get_type().kind() == Kind::List)
        .ok_or_else(|| {
            ExecutionError::no_such_member_overload(
                "format",
                vec!["string".to_owned(), list.get_type().name().to_owned()],
            )
        })?;
    let mut values = Vec::new();
    let mut items = args.iter();
    while let Some(item) = items.next() {
        values.push(item);
    }
    let text = interpolate(template.inner(), &values).map_err(|e| fail("format", e))?;
    Ok(CowVal::owned(CelString::from(text)))
}

/// `template` with each clause replaced by its argument, or cel-go's message.
pub fn interpolate(template: &str, args: &[&dyn Val]) -> Result<String, String> {
    let bytes = template.as_bytes();
    let mut out = String::with_capacity(template.len());
    let mut literal_start = 0;
    let mut at = 0;
    let mut next_arg = 0;
    while at < bytes.len() {
        if bytes[at] != b'%' {
            at += 1;
            continue;
        }
        out.push_str(&template[literal_start..at]);
        if bytes.get(at + 1) == Some(&b'%') {
            out.push('%');
            at += 2;
            literal_start = at;
            continue;
        }
        let arg = args
            .get(next_arg)
            .ok_or_else(|| format!("index {next_arg} out of range"))?;
        if at + 1 >= bytes.len() {
            return Err("unexpected end of string".to_owned());
        }
        let (read, clause) = clause(&template[at + 1..])
            .map_err(|e| format!("could not parse formatting clause: {e}"))?;
        let text = clause
            .apply(*arg)
            .map_err(|e| format!("error during formatting: {e}"))?;
        out.push_str(&text);
        at += 1 + read;
        literal_start = at;
        next_arg += 1;
    }
    out.push_str(&template[literal_start..]);
    Ok(out)
}

/// The verbs of `template`'s clauses (`s`, `d`, ...), and cel-go's message for what ends
/// them early: what its compile-time check of a literal format string reads.
pub fn verbs(template: &str) -> (Vec<char>, Option<String>) {
    let bytes = template.as_bytes();
    let mut verbs = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] != b'%' {
            at += 1;
            continue;
        }
        if bytes.get(at + 1) == Some(&b'%') {
            at += 2;
            continue;
        }
        if at + 1 >= bytes.len() {
            return (verbs, Some("unexpected end of string".to_owned()));
        }
        match clause(&template[at + 1..]) {
            Ok((read, _)) => {
                let verb = template[at + 1..at + 1 + read]
                    .chars()
                    .last()
                    .unwrap_or('s');
                verbs.push(verb);
                at += 1 + read;
            }
            Err(e) => {
                return (
                    verbs,
                    Some(format!("could not parse formatting clause: {e}")),
                );
            }
        }
    }
    (verbs, None)
}

#[derive(Debug, Clone, Copy)]
enum Clause {
    String,
    Decimal,
    Fixed(usize),
    Scientific(Option<usize>),
    Binary,
    Hex { upper: bool },
    Octal,
}

/// The clause at the start of `text` (after the `%`) and how many bytes it takes.
fn clause(text: &str) -> Result<(usize, Clause), String> {
    let bytes = text.as_bytes();
    let mut at = 0;
    let mut precision = None;
    if bytes.first() == Some(&b'.') {
        at = 1;
        while bytes.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        if at >= bytes.len() {
            return Err(
                "error while parsing precision: could not find end of precision specifier"
                    .to_owned(),
            );
        }
        let digits = &text[1..at];
        precision = Some(digits.parse::<usize>().map_err(|_| {
            format!(
                "error while parsing precision: error while converting precision to integer: \
                 strconv.Atoi: parsing \"{digits}\": invalid syntax"
            )
        })?);
    }
    let verb = text[at..].chars().next().unwrap_or('%');
    let clause = match verb {
        's' => Clause::String,
        'd' => Clause::Decimal,
        'f' => Clause::Fixed(precision.unwrap_or(DEFAULT_PRECISION)),
        'e' => Clause::Scientific(precision),
        'b' => Clause::Binary,
        'x' | 'X' => Clause::Hex { upper: verb == 'X' },
        'o' => Clause::Octal,
        other => return Err(format!("unrecognized formatting clause \"{other}\"")),
    };
    Ok((at + verb.len_utf8(), clause))
}

impl Clause {
    fn apply(self, arg: &dyn Val) -> Result<String, String> {
        let type_name = arg.get_type().name();
        match self {
            Clause::String => string(arg),
            Clause::Decimal => int_text(arg, 10).ok_or_else(|| {
                format!("decimal clause can only be used on integers, was given {type_name}")
            }),
            Clause::Fixed(precision) => {
                float_arg(arg).map(|f| fixed(f, precision)).ok_or_else(|| {
                    format!("fixed-point clause can only be used on doubles, was given {type_name}")
                })
            }
            Clause::Scientific(width) => float_arg(arg)
                .map(|f| pad(scientific(f), width))
                .ok_or_else(|| {
                    format!("scientific clause can only be used on doubles, was given {type_name}")
                }),
            Clause::Binary => match arg.downcast_ref::<CelBool>() {
                Some(b) => Ok(if *b.inner() { "1" } else { "0" }.to_owned()),
                None => int_text(arg, 2).ok_or_else(|| {
                    format!(
                        "only integers and bools can be formatted as binary, was given {type_name}"
                    )
                }),
            },
            Clause::Hex { upper } => {
                let bytes = arg
                    .downcast_ref::<CelString>()
                    .map(|s| s.inner().as_bytes())
                    .or_else(|| arg.downcast_ref::<CelBytes>().map(|b| b.inner()));
                let text = match bytes {
                    Some(bytes) => Some(bytes.iter().fold(String::new(), |mut out, b| {
                        let _ = write!(out, "{b:02x}");
                        out
                    })),
                    None => int_text(arg, 16),
                };
                let text = text.ok_or_else(|| {
                    format!(
                        "only integers, byte buffers, and strings can be formatted as hex, was \
                         given {type_name}"
                    )
                })?;
                Ok(if upper { text.to_uppercase() } else { text })
            }
            Clause::Octal => int_text(arg, 8).ok_or_else(|| {
                format!("octal clause can only be used on integers, was given {type_name}")
            }),
        }
    }
}

/// An int or uint in `radix`, as Go's `%d`, `%b`, `%o`, `%x` write it (`-ff`).
fn int_text(arg: &dyn Val, radix: u32) -> Option<String> {
    let (negative, magnitude) = if let Some(i) = arg.downcast_ref::<CelInt>() {
        (*i.inner() < 0, i.inner().unsigned_abs())
    } else {
        (false, *arg.downcast_ref::<CelUInt>()?.inner())
    };
    let digits = match radix {
        2 => format!("{magnitude:b}"),
        8 => format!("{magnitude:o}"),
        16 => format!("{magnitude:x}"),
        _ => magnitude.to_string(),
    };
    Some(if negative {
        format!("-{digits}")
    } else {
        digits
    })
}

/// A double, or one of the strings `%f` and `%e` accept for the special values.
fn float_arg(arg: &dyn Val) -> Option<f64> {
    if let Some(d) = arg.downcast_ref::<CelDouble>() {
        return Some(*d.inner());
    }
    match arg.downcast_ref::<CelString>()?.inner() {
        "NaN" => Some(f64::NAN),
        "Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

/// NaN and the infinities as the en_US number format writes them.
fn special(f: f64) -> Option<String> {
    if f.is_nan() {
        Some("NaN".to_owned())
    } else if f.is_infinite() {
        Some(if f > 0.0 { "∞" } else { "-∞" }.to_owned())
    } else {
        None
    }
}

/// `%.Nf` through golang.org/x/text's printer for en_US: `N` decimals, the whole part
/// grouped by thousands.
fn fixed(f: f64, precision: usize) -> String {
    if let Some(text) = special(f) {
        return text;
    }
    let text = format!("{:.precision$}", f.abs());
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    let mut out = String::new();
    if f.is_sign_negative() && text.bytes().any(|b| b.is_ascii_digit() && b != b'0') {
        out.push('-');
    }
    for (i, digit) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    if !fraction.is_empty() {
        out.push('.');
        out.push_str(fraction);
    }
    out
}

/// `%e` through golang.org/x/text's printer for en_US: six decimals and the exponent
/// in superscript, `1.200000×10⁰³`.
fn scientific(f: f64) -> String {
    if let Some(text) = special(f) {
        return text;
    }
    let text = format!("{:.6e}", f.abs());
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    const SUPER: [char; 10] = ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'];
    let mut out = String::new();
    if f.is_sign_negative() && f != 0.0 {
        out.push('-');
    }
    out.push_str(mantissa);
    out.push_str("×10");
    if exponent < 0 {
        out.push('⁻');
    }
    let digits = format!("{:02}", exponent.unsigned_abs());
    out.extend(digits.bytes().map(|b| SUPER[usize::from(b - b'0')]));
    out
}

/// cel-go builds `%Ne` for a precision `N`, which Go reads as a width: the text padded
/// on the left with spaces to `N` characters.
fn pad(text: String, width: Option<usize>) -> String {
    let length = text.chars().count();
    match width {
        Some(width) if width > length => format!("{}{text}", " ".repeat(width - length)),
        _ => text,
    }
}

/// `%s`: `FormatString`.
fn string(arg: &dyn Val) -> Result<String, String> {
    match arg.get_type().kind() {
        Kind::List => list(arg),
        Kind::Map => map(arg),
        Kind::NullType => Ok("null".to_owned()),
        _ => scalar(arg).ok_or_else(|| {
            format!(
                "string clause can only be used on strings, bools, bytes, ints, doubles, maps, \
                 lists, types, durations, and timestamps, was given {}",
                arg.get_type().name()
            )
        }),
    }
}

/// A scalar as cel-go converts it to a string.
fn scalar(arg: &dyn Val) -> Option<String> {
    if let Some(s) = arg.downcast_ref::<CelString>() {
        return Some(s.inner().to_owned());
    }
    if let Some(b) = arg.downcast_ref::<CelBool>() {
        return Some(b.inner().to_string());
    }
    if let Some(d) = arg.downcast_ref::<CelDouble>() {
        return Some(go_text::float_v(*d.inner()));
    }
    if let Some(b) = arg.downcast_ref::<CelBytes>() {
        return Some(String::from_utf8_lossy(b.inner()).into_owned());
    }
    if let Some(t) = arg.downcast_ref::<CelTimestamp>() {
        return Some(timestamp(t));
    }
    if let Some(d) = arg.downcast_ref::<CelDuration>() {
        return Some(duration(d));
    }
    if let Some(t) = arg.downcast_ref::<CelType>() {
        return Some(t.name().to_owned());
    }
    int_text(arg, 10)
}

/// Go's `time.RFC3339Nano`, in the offset the timestamp has.
pub fn timestamp(t: &CelTimestamp) -> String {
    let t = t.inner();
    let mut out = t.format("%Y-%m-%dT%H:%M:%S").to_string();
    let nanos = t.timestamp_subsec_nanos();
    if nanos > 0 {
        let fraction = format!("{nanos:09}");
        out.push('.');
        out.push_str(fraction.trim_end_matches('0'));
    }
    let offset = t.offset().local_minus_utc();
    if offset == 0 {
        out.push('Z');
    } else {
        let sign = if offset < 0 { '-' } else { '+' };
        let minutes = offset.unsigned_abs() / 60;
        let _ = write!(out, "{sign}{:02}:{:02}", minutes / 60, minutes % 60);
    }
    out
}

/// cel-go's `string(duration)`: seconds, as few digits as it takes, and `s`.
pub fn duration(d: &CelDuration) -> String {
    let d = d.inner();
    let seconds = match d.num_nanoseconds() {
        Some(nanos) => nanos as f64 / 1e9,
        None => d.num_seconds() as f64,
    };
    format!("{seconds}s")
}

/// An element of a list or a map printed by `%s`: as a CEL literal.
fn element(arg: &dyn Val) -> Result<String, String> {
    let kind = arg.get_type().kind();
    Ok(match kind {
        Kind::List => list(arg)?,
        Kind::Map => map(arg)?,
        Kind::NullType => "null".to_owned(),
        Kind::String => go_text::quote(&scalar(arg).unwrap_or_default()),
        Kind::Bytes => format!("b{}", go_text::quote(&scalar(arg).unwrap_or_default())),
        Kind::Double => {
            let d = arg.downcast_ref::<CelDouble>().map_or(0.0, |d| *d.inner());
            let text = if d.is_nan() {
                "NaN".to_owned()
            } else if d.is_infinite() {
                if d > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
            } else {
                format!("{d:.6}")
            };
            if d.is_finite() {
                text
            } else {
                go_text::quote(&text)
            }
        }
        Kind::Timestamp => format!(
            "timestamp({})",
            go_text::quote(&scalar(arg).unwrap_or_default())
        ),
        Kind::Duration => format!(
            "duration({})",
            go_text::quote(&scalar(arg).unwrap_or_default())
        ),
        Kind::Int | Kind::UInt | Kind::Boolean | Kind::Type => scalar(arg).unwrap_or_default(),
        _ => {
            return Err(format!(
                "no formatting function for {}",
                arg.get_type().name()
            ));
        }
    })
}

fn list(arg: &dyn Val) -> Result<String, String> {
    let iterable = arg.as_iterable().ok_or("expected a list")?;
    let mut items = iterable.iter();
    let mut parts = Vec::new();
    while let Some(item) = items.next() {
        parts.push(element(item)?);
    }
    Ok(format!("[{}]", parts.join(", ")))
}

fn map(arg: &dyn Val) -> Result<String, String> {
    let (Some(iterable), Some(indexer)) = (arg.as_iterable(), arg.as_indexer()) else {
        return Err("expected a map".to_owned());
    };
    let mut keys = iterable.iter();
    let mut entries = Vec::new();
    while let Some(key) = keys.next() {
        let key_text = match key.get_type().kind() {
            Kind::String => go_text::quote(&scalar(key).unwrap_or_default()),
            Kind::Boolean | Kind::Int | Kind::UInt => scalar(key).unwrap_or_default(),
            _ => {
                return Err(format!(
                    "no formatting function for map key of type {}",
                    key.get_type().name()
                ));
            }
        };
        let value = indexer.get(key).map_err(|e| e.to_string())?;
        entries.push((key_text, element(value.as_ref())?));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let parts: Vec<String> = entries.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    Ok(format!("{{{}}}", parts.join(", ")))
}

#[cfg(test)]
#[path = "format_tests.rs"]
mod tests;
