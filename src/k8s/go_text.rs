//! How Go writes values into the messages graft reproduces from kube-apiserver: a string
//! quoted by `strconv.Quote` (and `%q`), a float64 by `%v`, a number by `encoding/json`,
//! and an unstructured value (`map[string]interface{}`, `[]interface{}`, `int64`,
//! `float64`, `string`, `bool`, `nil`) by `%v`, `%#v` and `%T` as structured-merge-diff
//! prints it inside its `*value.valueUnstructured`.
//!
//! A JSON number is an `int64` when it is an integer that fits, a `float64` otherwise, as
//! Kubernetes decodes JSON into unstructured objects.
//!
//! `strconv.Quote` escapes the runes Go does not count as printable (`unicode.IsPrint`).
//! ASCII, controls, spaces other than U+0020, format characters, private use and
//! noncharacters are classified exactly; code points Unicode has not assigned yet are
//! printable here except in the planes that have none (4 to 13), where Go would escape
//! each of them.

use std::fmt::Write;

use crate::tree::Tree;

/// A JSON number as Go holds it in an unstructured object.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GoNumber {
    Int(i64),
    Float(f64),
}

impl GoNumber {
    /// The Go value of a JSON number.
    pub fn of(number: &serde_json::Number) -> GoNumber {
        match number.as_i64() {
            Some(int) => GoNumber::Int(int),
            // serde_json always has an f64 for a number that is not an i64.
            None => GoNumber::Float(number.as_f64().unwrap_or(f64::NAN)),
        }
    }

    /// The number as `%v` prints it.
    pub fn to_go_v(self) -> String {
        match self {
            GoNumber::Int(int) => int.to_string(),
            GoNumber::Float(float) => float_v(float),
        }
    }

    /// The number as `encoding/json` writes it.
    pub fn to_json(self) -> String {
        match self {
            GoNumber::Int(int) => int.to_string(),
            GoNumber::Float(float) => float_json(float),
        }
    }
}

/// The shortest decimal digits that read back as `float` (no sign, no leading zeros) and
/// the exponent of the first digit, as in `d.ddd × 10^exponent`.
fn shortest_digits(float: f64) -> (String, i32) {
    // Rust's `{:e}` writes the shortest digits that round-trip, as Go's `-1` precision.
    let text = format!("{:e}", float.abs());
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    (digits, exponent.parse().unwrap_or(0))
}

/// `strconv.FormatFloat(f, 'e', -1, 64)`: `1.5e+06`, `1e-07`.
fn float_e(float: f64) -> String {
    let (digits, exponent) = shortest_digits(float);
    let mut out = String::new();
    if float.is_sign_negative() {
        out.push('-');
    }
    out.push_str(&digits[..1]);
    if digits.len() > 1 {
        out.push('.');
        out.push_str(&digits[1..]);
    }
    let sign = if exponent < 0 { '-' } else { '+' };
    let _ = write!(out, "e{sign}{:02}", exponent.unsigned_abs());
    out
}

/// `strconv.FormatFloat(f, 'f', -1, 64)`: the shortest digits, without an exponent.
fn float_f(float: f64) -> String {
    // Rust's Display writes the shortest round-trip digits without an exponent, as Go's
    // 'f' with precision -1 does.
    format!("{float}")
}

/// A float64 as `%v` prints it: `%g` with the shortest digits, in exponent form when the
/// exponent is below -4 or at least 6 (`strconv` decides with precision 6 when asked for
/// the shortest digits): `100000`, `1e+06`, `0.0001`, `1e-05`.
pub fn float_v(float: f64) -> String {
    if float.is_nan() {
        return "NaN".to_string();
    }
    if float.is_infinite() {
        return if float > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if float == 0.0 {
        return float_f(float);
    }
    let (_, exponent) = shortest_digits(float);
    if !(-4..6).contains(&exponent) {
        float_e(float)
    } else {
        float_f(float)
    }
}

/// A float64 as `encoding/json` writes it: positional between 1e-6 and 1e21, otherwise
/// in exponent form with a negative exponent's leading zero dropped (`1e-7`, `1e+21`).
pub fn float_json(float: f64) -> String {
    let abs = float.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let text = float_e(float);
        // encoding/json cleans "e-07" up to "e-7".
        match text.split_once("e-0") {
            Some((mantissa, digit)) if digit.len() == 1 => format!("{mantissa}e-{digit}"),
            _ => text,
        }
    } else {
        float_f(float)
    }
}

/// `strconv.Quote(s)`, which `%q` and `%#v` write strings with.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if c < ' ' || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if is_print(c) => out.push(c),
            c if u32::from(c) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\U{:08x}", u32::from(c));
            }
        }
    }
    out.push('"');
    out
}

/// Go's `unicode.IsPrint` for a rune that is not ASCII (see the module's note).
fn is_print(c: char) -> bool {
    let code = u32::from(c);
    if c.is_ascii() {
        return (0x20..0x7f).contains(&code);
    }
    const NOT_PRINTABLE: &[(u32, u32)] = &[
        (0x80, 0xa0),        // C1 controls, NO-BREAK SPACE
        (0xad, 0xad),        // SOFT HYPHEN
        (0x600, 0x605),      // Arabic number signs
        (0x61c, 0x61c),      // ARABIC LETTER MARK
        (0x6dd, 0x6dd),      // ARABIC END OF AYAH
        (0x70f, 0x70f),      // SYRIAC ABBREVIATION MARK
        (0x890, 0x891),      // Arabic pound and piastre marks
        (0x8e2, 0x8e2),      // ARABIC DISPUTED END OF AYAH
        (0x1680, 0x1680),    // OGHAM SPACE MARK
        (0x180e, 0x180e),    // MONGOLIAN VOWEL SEPARATOR
        (0x2000, 0x200f),    // spaces, zero-width and direction marks
        (0x2028, 0x202f),    // line and paragraph separators, embeddings, NNBSP
        (0x205f, 0x2064),    // MEDIUM MATHEMATICAL SPACE, invisible operators
        (0x2066, 0x206f),    // isolates, deprecated format characters
        (0x3000, 0x3000),    // IDEOGRAPHIC SPACE
        (0xe000, 0xf8ff),    // private use
        (0xfdd0, 0xfdef),    // noncharacters
        (0xfeff, 0xfeff),    // ZERO WIDTH NO-BREAK SPACE
        (0xfff9, 0xfffb),    // interlinear annotation
        (0x110bd, 0x110bd),  // KAITHI NUMBER SIGN
        (0x110cd, 0x110cd),  // KAITHI NUMBER SIGN ABOVE
        (0x13430, 0x1343f),  // Egyptian hieroglyph format controls
        (0x1bca0, 0x1bca3),  // shorthand format controls
        (0x1d173, 0x1d17a),  // musical symbol format controls
        (0x40000, 0xdffff),  // planes without any assigned code point
        (0xe0000, 0xe007f),  // tags
        (0xf0000, 0x10ffff), // private use planes
    ];
    // Every plane's last two code points are noncharacters.
    if code & 0xfffe == 0xfffe {
        return false;
    }
    !NOT_PRINTABLE
        .iter()
        .any(|(low, high)| (*low..=*high).contains(&code))
}

/// A value inside SMD's `*value.valueUnstructured` as `%v` prints it: `&{map[a:1]}`.
pub fn value_v(value: &Tree<'_>) -> String {
    let mut out = String::from("&{");
    write_v(&mut out, value);
    out.push('}');
    out
}

/// A value inside SMD's `*value.valueUnstructured` as `%#v` prints it:
/// `&value.valueUnstructured{Value:map[string]interface {}{"a":1}}`.
pub fn value_sharp_v(value: &Tree<'_>) -> String {
    let mut out = String::from("&value.valueUnstructured{Value:");
    write_sharp_v(&mut out, value);
    out.push('}');
    out
}

/// The Go type of an unstructured value, as `%T` prints it.
pub fn type_name(value: &Tree<'_>) -> &'static str {
    match value.resolved() {
        Tree::Null => "<nil>",
        Tree::Bool(_) => "bool",
        Tree::Number(n) => match GoNumber::of(n) {
            GoNumber::Int(_) => "int64",
            GoNumber::Float(_) => "float64",
        },
        Tree::String(_) => "string",
        Tree::List(_) => "[]interface {}",
        // A text node resolves to a map or a list.
        Tree::Map(_) | Tree::Text(_) => "map[string]interface {}",
    }
}

/// The entries of a map in the order `fmt` prints a Go map: by key.
fn sorted_entries<'a, 't>(map: &'a crate::tree::Map<'t>) -> Vec<(&'a str, &'a Tree<'t>)> {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_by_key(|(key, _)| *key);
    entries
}

fn write_v(out: &mut String, value: &Tree<'_>) {
    match value.resolved() {
        Tree::Null => out.push_str("<nil>"),
        Tree::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Tree::Number(n) => out.push_str(&GoNumber::of(n).to_go_v()),
        Tree::String(s) => out.push_str(s),
        Tree::List(items) => {
            out.push('[');
            for (at, item) in items.iter().enumerate() {
                if at > 0 {
                    out.push(' ');
                }
                write_v(out, item);
            }
            out.push(']');
        }
        Tree::Map(map) => {
            out.push_str("map[");
            for (at, (key, item)) in sorted_entries(map).into_iter().enumerate() {
                if at > 0 {
                    out.push(' ');
                }
                out.push_str(key);
                out.push(':');
                write_v(out, item);
            }
            out.push(']');
        }
        Tree::Text(_) => {}
    }
}

fn write_sharp_v(out: &mut String, value: &Tree<'_>) {
    match value.resolved() {
        Tree::Null => out.push_str("interface {}(nil)"),
        Tree::String(s) => out.push_str(&quote(s)),
        Tree::List(items) => {
            out.push_str("[]interface {}{");
            for (at, item) in items.iter().enumerate() {
                if at > 0 {
                    out.push_str(", ");
                }
                write_sharp_v(out, item);
            }
            out.push('}');
        }
        Tree::Map(map) => {
            out.push_str("map[string]interface {}{");
            for (at, (key, item)) in sorted_entries(map).into_iter().enumerate() {
                if at > 0 {
                    out.push_str(", ");
                }
                out.push_str(&quote(key));
                out.push(':');
                write_sharp_v(out, item);
            }
            out.push('}');
        }
        scalar => write_v(out, scalar),
    }
}

/// The bytes `encoding/json` writes for `s`, quotes included: `"`, `\` and the controls
/// `\b \f \n \r \t` take two, other controls, `<`, `>`, `&`, U+2028 and U+2029 six
/// (`\u003c`: it escapes HTML), every other character its UTF-8 length.
pub fn json_string_len(s: &str) -> usize {
    2 + s
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\u{8}' | '\u{c}' | '\n' | '\r' | '\t' => 2,
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => 6,
            c if c < ' ' => 6,
            c => c.len_utf8(),
        })
        .sum::<usize>()
}

#[cfg(test)]
#[path = "go_text_tests.rs"]
mod tests;
