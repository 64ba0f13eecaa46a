//! YAML output that kubectl reads back as written.
//!
//! kubectl reads YAML 1.1 (go-yaml v2 under sigs.k8s.io/yaml), where `on`, `1_000`,
//! `0b1010`, `1:20` and `2001-12-14` are not strings, while serde_yaml quotes by YAML
//! 1.2's rules; patching its text afterwards cannot tell a scalar from a block scalar's
//! line. So the document is written here from the value, and every string is decided on
//! its own: plain only when no YAML 1.1 or 1.2 reader (nor go-yaml's extensions) could
//! read it as anything but that string, double-quoted otherwise, and multi-line strings
//! as literal blocks when a block keeps them exactly. Numbers are written as JSON writes
//! them (`1e21`), which go-yaml and YAML 1.2 read as numbers; a strict YAML 1.1 reader
//! wants a `.` in a float and would read such a number as a string.
//!
//! The same rules write values into a file a person keeps (`graft test --update`), in
//! its layout ([`Layout`]): block style with its sequence indentation, or flow style.

use std::fmt::{self, Write as _};

use serde_json::{Map, Value};

/// How a document is laid out. The default is kubectl's.
#[derive(Debug, Clone, Copy, Default)]
pub struct Layout {
    /// How far a mapping's sequence value is indented past its key: kubectl writes 0
    /// (`key:` then `- item` at the key's column), many hand-written files 2.
    pub sequence_indent: usize,
    /// Strings holding `"` or `\` that cannot be plain are single-quoted, which reads
    /// better than escaping them (a JSON annotation value), when the string allows it.
    pub single_quotes: bool,
}

/// Serialises `value` as one YAML document that YAML 1.1 and 1.2 readers read back as
/// `value`.
pub fn to_string(value: &Value) -> Result<String, fmt::Error> {
    to_string_with(value, Layout::default())
}

/// [`to_string`] in `layout`.
pub fn to_string_with(value: &Value, layout: Layout) -> Result<String, fmt::Error> {
    let mut out = String::new();
    Writer {
        out: &mut out,
        layout,
    }
    .node(value, Position::Document)?;
    Ok(out)
}

/// `value` in flow style, on one line: `{op: add, path: /a, value: [1, 2]}`.
pub fn to_flow_string(value: &Value, layout: Layout) -> Result<String, fmt::Error> {
    let mut out = String::new();
    write_flow(&mut out, value, layout)?;
    Ok(out)
}

/// A scalar (or empty collection) as it would be written after `key:` or `- `, without
/// the space; `block_indent` is the column of a literal block's lines, and `flow` says
/// the scalar sits inside a flow collection, where only one-line forms can go.
pub fn scalar_text(
    value: &Value,
    layout: Layout,
    block_indent: usize,
    flow: bool,
) -> Result<String, fmt::Error> {
    let mut out = String::new();
    match value {
        Value::String(text) if flow => write_flow_string(&mut out, text, layout)?,
        Value::String(text) => write_string(&mut out, text, block_indent.max(1), layout)?,
        other => write_flow(&mut out, other, layout)?,
    }
    Ok(out)
}

/// `text` single-quoted, when a single-quoted scalar can hold it on one line.
pub fn single_quoted(text: &str) -> Option<String> {
    let quotable = text.chars().all(is_printable);
    quotable.then(|| format!("'{}'", text.replace('\'', "''")))
}

/// `text` double-quoted, escaping what a reader would change.
pub fn double_quoted(text: &str) -> String {
    let mut out = String::new();
    // Writing to a String does not fail.
    let _ = write_double_quoted(&mut out, text);
    out
}

/// Whether `text` can be written unquoted (inside a flow collection when `flow`) and
/// read back as this string by any YAML 1.1 or 1.2 reader.
pub fn is_plain(text: &str, flow: bool) -> bool {
    if flow {
        is_flow_plain_safe(text)
    } else {
        is_plain_safe(text)
    }
}

/// What the current line already holds when a node is written.
#[derive(Clone, Copy)]
enum Position {
    /// Nothing: the node is the document.
    Document,
    /// `key:` of a mapping whose entries start at this column.
    AfterKey(usize),
    /// `- ` of a sequence whose items start at this column.
    AfterDash(usize),
}

impl Position {
    /// The column of a mapping's entries under this position.
    fn child_indent(self) -> usize {
        match self {
            Position::Document => 0,
            Position::AfterKey(column) | Position::AfterDash(column) => column + 2,
        }
    }

    /// The column of a literal block's lines under this position: readers take a block
    /// at column 0 as empty.
    fn block_indent(self) -> usize {
        self.child_indent().max(2)
    }
}

/// Longer keys are written as explicit `? key` entries: a reader looks at most 1024
/// characters ahead for an implicit key's `:`, and libyaml's emitter, like kubectl's, gives
/// up on implicit keys at 128.
const MAX_IMPLICIT_KEY: usize = 128;

struct Writer<'o> {
    out: &'o mut String,
    layout: Layout,
}

impl Writer<'_> {
    fn node(&mut self, value: &Value, position: Position) -> fmt::Result {
        match value {
            Value::Object(map) if !map.is_empty() => self.mapping(map, position),
            Value::Array(items) if !items.is_empty() => self.sequence(items, position),
            scalar => {
                if let Position::AfterKey(_) = position {
                    self.out.push(' ');
                }
                match scalar {
                    Value::String(text) => {
                        write_string(self.out, text, position.block_indent(), self.layout)?;
                    }
                    other => write_flow(self.out, other, self.layout)?,
                }
                self.out.push('\n');
                Ok(())
            }
        }
    }

    fn mapping(&mut self, map: &Map<String, Value>, position: Position) -> fmt::Result {
        let column = position.child_indent();
        // After `- ` the first entry shares the dash's line, as kubectl writes it.
        let mut on_fresh_line = !matches!(position, Position::AfterDash(_));
        if let Position::AfterKey(_) = position {
            self.out.push('\n');
        }
        for (key, value) in map {
            if on_fresh_line {
                indent(self.out, column);
            }
            on_fresh_line = true;
            let start = self.out.len();
            write_key(self.out, key)?;
            if self.out[start..].chars().count() > MAX_IMPLICIT_KEY {
                self.out.insert_str(start, "? ");
                self.out.push('\n');
                indent(self.out, column);
            }
            self.out.push(':');
            self.node(value, Position::AfterKey(column))?;
        }
        Ok(())
    }

    fn sequence(&mut self, items: &[Value], position: Position) -> fmt::Result {
        // A mapping's sequence value sits at the key's column, as kubectl writes it,
        // or as far past it as the layout says.
        let column = match position {
            Position::Document => 0,
            Position::AfterKey(column) => column + self.layout.sequence_indent,
            Position::AfterDash(column) => column + 2,
        };
        let mut on_fresh_line = !matches!(position, Position::AfterDash(_));
        if let Position::AfterKey(_) = position {
            self.out.push('\n');
        }
        for item in items {
            if on_fresh_line {
                indent(self.out, column);
            }
            on_fresh_line = true;
            self.out.push_str("- ");
            self.node(item, Position::AfterDash(column))?;
        }
        Ok(())
    }
}

/// A value in flow style. Strings are never literal blocks here: a flow collection
/// holds no block.
fn write_flow(out: &mut String, value: &Value, layout: Layout) -> fmt::Result {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(flag) => out.push_str(if *flag { "true" } else { "false" }),
        Value::Number(number) => write!(out, "{number}")?,
        Value::String(text) => write_flow_string(out, text, layout)?,
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push_str(", ");
                }
                write_flow(out, item, layout)?;
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (index, (key, item)) in map.iter().enumerate() {
                if index > 0 {
                    out.push_str(", ");
                }
                write_flow_string(out, key, layout)?;
                out.push_str(": ");
                write_flow(out, item, layout)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

fn write_flow_string(out: &mut String, text: &str, layout: Layout) -> fmt::Result {
    if is_flow_plain_safe(text) {
        out.push_str(text);
        return Ok(());
    }
    write_quoted(out, text, layout)
}

/// Double quotes, or single quotes where the layout prefers them and they keep the text.
fn write_quoted(out: &mut String, text: &str, layout: Layout) -> fmt::Result {
    if layout.single_quotes
        && text.contains(['"', '\\'])
        && let Some(quoted) = single_quoted(text)
    {
        out.push_str(&quoted);
        return Ok(());
    }
    write_double_quoted(out, text)
}

fn indent(out: &mut String, column: usize) {
    out.extend(std::iter::repeat_n(' ', column));
}

/// A key is never a literal block: a block cannot be an implicit key.
fn write_key(out: &mut String, key: &str) -> fmt::Result {
    if is_plain_safe(key) {
        out.push_str(key);
        Ok(())
    } else {
        write_double_quoted(out, key)
    }
}

/// `block_indent` is the column of a literal block's lines.
fn write_string(out: &mut String, text: &str, block_indent: usize, layout: Layout) -> fmt::Result {
    if is_plain_safe(text) {
        out.push_str(text);
        return Ok(());
    }
    let Some(body) = literal_block_body(text) else {
        return write_quoted(out, text, layout);
    };
    // `|` keeps the one final newline, `|-` strips it when there was none.
    out.push_str(if body.len() < text.len() { "|" } else { "|-" });
    for line in body.split('\n') {
        out.push('\n');
        if !line.is_empty() {
            indent(out, block_indent);
            out.push_str(line);
        }
    }
    Ok(())
}

/// `text` without its final newline, when a literal block with auto-detected indentation
/// reads back exactly `text`.
fn literal_block_body(text: &str) -> Option<&str> {
    let body = text.strip_suffix('\n').unwrap_or(text);
    let readable = body.contains('\n')
        // The first line sets the block's indentation: leading white space would join it,
        // and a leading empty line would need an indentation indicator.
        && !body.starts_with([' ', '\t', '\n'])
        // More than one final newline would need `|+`, whose trailing empty lines are
        // easy to lose in editing.
        && !body.ends_with('\n')
        // Trailing white space survives a read but rarely an editor.
        && body.split('\n').all(|line| !line.ends_with([' ', '\t']))
        && body.chars().all(|c| c == '\n' || c == '\t' || is_printable(c));
    readable.then_some(body)
}

/// Characters YAML 1.1 and 1.2 allow unescaped in a scalar, apart from tab and line
/// breaks: NEL, LS and PS are line breaks in YAML 1.1, and a BOM may be taken for one.
fn is_printable(c: char) -> bool {
    matches!(c, ' '..='~')
        || (c >= '\u{A0}'
            && !matches!(
                c,
                '\u{2028}' | '\u{2029}' | '\u{FEFF}' | '\u{FFFE}' | '\u{FFFF}'
            ))
}

fn write_double_quoted(out: &mut String, text: &str) -> fmt::Result {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            // Every character outside is_printable is in the Basic Multilingual Plane.
            c if !is_printable(c) => write!(out, "\\u{:04X}", u32::from(c))?,
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(())
}

/// Characters that start something other than a plain scalar somewhere in YAML 1.1 or
/// 1.2 (`-`, `?` and `:` only when a space follows, but not worth the difference).
const INDICATORS: &[char] = &[
    '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`',
];

/// Whether `text` can be written unquoted and read back as this string by any YAML 1.1
/// or 1.2 reader.
fn is_plain_safe(text: &str) -> bool {
    !text.is_empty()
        && !text.starts_with(INDICATORS)
        && !text.starts_with(' ')
        && !text.ends_with(' ')
        && text.chars().all(is_printable)
        // `: ` ends a key, ` #` starts a comment, and a final `:` ends a key at the line's end.
        && !text.contains(": ")
        && !text.contains(" #")
        && !text.ends_with(':')
        // At a line's start `---` and `...` followed by a blank end or start a document.
        && !text.starts_with("---")
        && !text.starts_with("...")
        && !resolves_to_non_string(text)
}

/// [`is_plain_safe`], and read back as this string inside a flow collection too, where
/// `,`, `[`, `]`, `{` and `}` end a plain scalar, and where older readers (libyaml 0.1,
/// go-yaml v2) refuse a `:` or `?` inside one.
fn is_flow_plain_safe(text: &str) -> bool {
    is_plain_safe(text) && !text.contains([',', '[', ']', '{', '}', ':', '?'])
}

/// Whether a plain `text` is read as something other than a string by YAML 1.1, the
/// YAML 1.2 core schema or go-yaml v2: null, a boolean, a number, a timestamp, a merge
/// or value key. Case is ignored throughout: some readers ignore it, and quoting a
/// string that needed none costs nothing.
fn resolves_to_non_string(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    matches!(
        lower.as_str(),
        "~" | "null" | "y" | "yes" | "n" | "no" | "true" | "false" | "on" | "off" | "<<" | "="
    ) || is_number(&lower)
        || is_timestamp(&lower)
}

/// YAML 1.1's int and float (binary, octal, hex, sexagesimal, `_` separators anywhere,
/// `.inf`, `.nan`, and its float pattern's `[0-9.]*` that takes `1.2.3` and `.`), the
/// YAML 1.2 core schema's (`0o17`, `1e3`), and what go-yaml v2 adds by handing the
/// scalar to Go's number parsers (`0B11`, `+Inf`). `lower` is lower-case.
fn is_number(lower: &str) -> bool {
    let unsigned = lower.strip_prefix(['+', '-']).unwrap_or(lower);
    if matches!(unsigned, ".inf" | ".nan" | "inf" | "infinity" | "nan") {
        return true;
    }
    if !unsigned.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return false;
    }
    let digits: String = unsigned.chars().filter(|&c| c != '_').collect();
    let radix_digits = |prefix: &str, radix: u32| {
        digits
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.chars().all(|c| c.is_digit(radix)))
    };
    if radix_digits("0b", 2) || radix_digits("0o", 8) || radix_digits("0x", 16) {
        return true;
    }
    let all_decimal = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    // Sexagesimal, `1:20` or `1:20:30.5`.
    if digits.contains(':') {
        let (whole, fraction) = digits.split_once('.').unwrap_or((&digits, ""));
        return whole.split(':').all(all_decimal) && fraction.bytes().all(|b| b.is_ascii_digit());
    }
    let (mantissa, exponent) = digits.split_once('e').unwrap_or((&digits, "0"));
    !mantissa.is_empty()
        && mantissa.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && all_decimal(exponent.strip_prefix(['+', '-']).unwrap_or(exponent))
}

/// YAML 1.1's timestamp starts `yyyy-`; go-yaml v2 tries a timestamp on any plain
/// scalar that does.
fn is_timestamp(lower: &str) -> bool {
    let bytes = lower.as_bytes();
    bytes.len() > 4 && bytes[..4].iter().all(u8::is_ascii_digit) && bytes[4] == b'-'
}

#[cfg(test)]
pub(super) mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    /// One class of scalar YAML 1.1 or 1.2 reads as something else when plain.
    const NOT_PLAIN: &[(&str, &[&str])] = &[
        (
            "YAML 1.1 booleans, any case",
            &[
                "y", "Y", "yes", "Yes", "YES", "yEs", "n", "N", "no", "NO", "nO", "on", "On", "ON",
                "oN", "off", "Off", "OFF", "oFf", "true", "True", "TRUE", "tRue", "false", "False",
                "FALSE",
            ],
        ),
        ("nulls", &["~", "null", "Null", "NULL", "nUll", ""]),
        (
            "ints",
            &[
                "0",
                "1",
                "+1",
                "-1",
                "08",
                "0017",
                "1_000",
                "1__0",
                "1_",
                "-1_000",
                "+0",
                "12345678901234567890123",
            ],
        ),
        (
            "binary, octal and hex",
            &[
                "0b1010", "0B11", "-0b1010", "0b1_0", "0o17", "0O17", "017", "0x1F", "0X1f",
                "0x_ff", "-0x1F", "0b", "0x",
            ],
        ),
        (
            "floats",
            &[
                "1.5",
                "1.",
                ".5",
                "-.5",
                "+1.5",
                "1e3",
                "1E3",
                "1e+3",
                "1e-3",
                "1.5e-3",
                "1_000.5",
                "1e_3",
                ".",
                "1.2.3",
                "192.168.0.1",
                "...",
            ],
        ),
        (
            "infinities and NaNs",
            &[
                ".inf",
                ".Inf",
                ".INF",
                "+.inf",
                "-.inf",
                "-.INF",
                ".nan",
                ".NaN",
                ".NAN",
                "+.nan",
                "+Inf",
                "-inf",
                "+infinity",
                "inf",
                "nan",
                "NaN",
            ],
        ),
        (
            "sexagesimal",
            &[
                "1:20",
                "190:20:30",
                "190:20:30.15",
                "-1:20",
                "1_0:20",
                "10:80",
            ],
        ),
        (
            "timestamps",
            &[
                "2001-12-14",
                "2001-12-14t21:59:43.10-05:00",
                "2001-12-14 21:59:43.10 -5",
                "2001-1-2",
                "2024-01-01-release",
            ],
        ),
        ("merge and value keys", &["<<", "="]),
        (
            "indicators",
            &[
                "-", "- a", "-a", "--- a", "?", "? a", ":", ":a", ",a", "[a]", "]", "{a}", "}",
                "#a", "&a", "*a", "!a", "|", "|a", ">", ">a", "'a", "\"a", "%a", "@a", "`a",
            ],
        ),
        (
            "document markers at a line's start",
            &["...", "... a", "... 0", "---", "---a", "....x"],
        ),
        (
            "comments, keys and spaces",
            &[
                "a #b", "a: b", "a:", "a::", " a", "a ", " ", "\ta", "a\tb", "a\t#b",
            ],
        ),
        (
            "control characters and YAML 1.1 line breaks",
            &[
                "a\rb",
                "a\u{0}b",
                "a\u{7}b",
                "a\u{7F}b",
                "a\u{85}b",
                "a\u{2028}b",
                "a\u{2029}b",
                "\u{FEFF}a",
                "a\u{9F}b",
                "a\u{FFFE}",
            ],
        ),
    ];

    /// Strings no reader mistakes, which stay plain for readability.
    const PLAIN: &[&str] = &[
        "nginx",
        "nginx:1.25.3",
        "registry.example.com:5000/team/app@sha256:abc",
        "http://example.com/a#b",
        "128Mi",
        "500m",
        "1Gi",
        "v1.2.3",
        "app.kubernetes.io/name",
        ".dockerconfigjson",
        "<b>",
        "a>",
        "a|",
        "a-b",
        "a,b",
        "a[0]",
        "a#b",
        "a:b",
        "a b c",
        "yess",
        "only",
        "nulls",
        "0xg",
        "1-2",
        "1e",
        "e3",
        "_1",
        "café",
        "日本",
        "😀",
    ];

    fn plain_value_line(text: &str) -> String {
        format!("k: {text}\n")
    }

    #[test]
    fn strings_readers_take_for_other_types_are_quoted_as_values_keys_and_items() {
        for (class, strings) in NOT_PLAIN {
            for text in *strings {
                assert!(!is_plain_safe(text), "{class}: {text:?} left plain");
                let value = json!({"k": text, *text: "v", "s": [text]});
                let yaml = to_string(&value).unwrap();
                assert!(
                    !yaml.contains(&plain_value_line(text))
                        && !yaml.contains(&format!("\n{text}: v\n"))
                        && !yaml.contains(&format!("\n- {text}\n")),
                    "{class}: {text:?} left plain in\n{yaml}"
                );
                let back: Value = serde_yaml::from_str(&yaml).unwrap();
                assert_eq!(back, value, "{class}: {text:?} in\n{yaml}");
            }
        }
    }

    #[test]
    fn ordinary_strings_stay_plain_and_round_trip() {
        for text in PLAIN {
            assert!(is_plain_safe(text), "{text:?} quoted");
            let value = json!({"k": text, *text: "v", "s": [text]});
            let yaml = to_string(&value).unwrap();
            assert!(yaml.contains(&plain_value_line(text)), "{yaml}");
            assert!(yaml.contains(&format!("\n{text}: v\n")), "{yaml}");
            assert!(yaml.contains(&format!("\n- {text}\n")), "{yaml}");
            let back: Value = serde_yaml::from_str(&yaml).unwrap();
            assert_eq!(back, value, "{yaml}");
        }
    }

    #[test]
    fn a_value_ending_in_a_block_indicator_does_not_hide_the_rest_of_the_mapping() {
        let value = json!({
            "metadata": {"annotations": {"html": "<b>", "pipe": "a |", "count": "1_000"}},
            "env": [{"value": "<b>", "name": "on"}, {"value": "x >", "name": "off"}],
        });
        let yaml = to_string(&value).unwrap();
        assert_eq!(
            yaml,
            "metadata:\n  annotations:\n    html: <b>\n    pipe: a |\n    count: \"1_000\"\n\
             env:\n- value: <b>\n  name: \"on\"\n- value: x >\n  name: \"off\"\n"
        );
        let back: Value = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn layout_is_kubectls() {
        let value = json!({
            "a": {"b": 1, "c": {}, "d": []},
            "e": [1, {"f": 2, "g": [true, null]}, [], [1.5, [2]], {"h": {"i": "j"}}],
            "k": "l",
        });
        let yaml = to_string(&value).unwrap();
        assert_eq!(
            yaml,
            "a:\n  b: 1\n  c: {}\n  d: []\ne:\n- 1\n- f: 2\n  g:\n  - true\n  - null\n- []\n\
             - - 1.5\n  - - 2\n- h:\n    i: j\nk: l\n"
        );
        let back: Value = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(back, value);
        assert_eq!(to_string(&json!("on")).unwrap(), "\"on\"\n");
        assert_eq!(to_string(&json!(7)).unwrap(), "7\n");
    }

    #[test]
    fn multi_line_strings_are_literal_blocks_when_a_block_keeps_them() {
        let value = json!({
            "script": "set -e\n  echo on\n\necho 1_000\n",
            "list": ["a\nb", {"k": "#!/bin/sh\nexit 0"}],
        });
        let yaml = to_string(&value).unwrap();
        assert_eq!(
            yaml,
            "script: |\n  set -e\n    echo on\n\n  echo 1_000\nlist:\n- |-\n  a\n  b\n\
             - k: |-\n    #!/bin/sh\n    exit 0\n"
        );
        let back: Value = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(back, value);
        assert_eq!(to_string(&json!("a\nb")).unwrap(), "|-\n  a\n  b\n");
    }

    #[test]
    fn multi_line_strings_a_block_would_change_are_double_quoted() {
        for text in [
            " leading\nspace",
            "\tleading\ntab",
            "\nleading newline",
            "two final\nnewlines\n\n",
            "trailing \nspace",
            "trailing\ntab\t",
            "carriage\r\nreturn",
            "next\u{85}line\nx",
            "line\u{2028}separator\nx",
            "\n",
            "\n\n",
        ] {
            let value = json!({"k": text, "s": [text]});
            let yaml = to_string(&value).unwrap();
            assert!(yaml.starts_with("k: \""), "{text:?} in\n{yaml}");
            let back: Value = serde_yaml::from_str(&yaml).unwrap();
            assert_eq!(back, value, "{text:?} in\n{yaml}");
        }
    }

    #[test]
    fn double_quotes_escape_what_a_reader_would_change() {
        let mut out = String::new();
        write_double_quoted(&mut out, "a\"b\\c\nd\te\rf\u{0}\u{85}\u{2028}\u{FEFF}é😀").unwrap();
        assert_eq!(out, r#""a\"b\\c\nd\te\rf\u0000\u0085\u2028\uFEFFé😀""#);
    }

    #[test]
    fn long_keys_are_explicit() {
        let long = "k".repeat(MAX_IMPLICIT_KEY + 1);
        let value = json!({
            &long: "v",
            "m": {&long: {"a": [1]}},
            "s": [{&long: [1, 2]}],
        });
        let yaml = to_string(&value).unwrap();
        assert!(yaml.starts_with(&format!("? {long}\n: v\n")), "{yaml}");
        let back: Value = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(back, value, "{yaml}");
        let short = "k".repeat(MAX_IMPLICIT_KEY);
        let yaml = to_string(&json!({&short: "v"})).unwrap();
        assert_eq!(yaml, format!("{short}: v\n"));
    }

    pub(in crate::cli) fn scalar_text() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop::sample::select(vec![
                "a", "Y", "n", "on", "0", "1", "_", ".", "e", "x", "b", "+", "-", ":", "#", " ",
                "\t", "\n", "\r", "|", ">", "<", "=", "~", "?", "'", "\"", "\\", "[", "{", ",",
                "!", "&", "*", "%", "@", "`", "é", "\u{85}", "\u{2028}", "\u{FEFF}", "\u{1}",
            ]),
            0..8,
        )
        .prop_map(|parts| parts.concat())
    }

    pub(in crate::cli) fn tree() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            scalar_text().prop_map(Value::String),
            any::<i64>().prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
            Just(Value::Null),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((scalar_text(), inner), 0..4)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_tree_reads_back_as_written(value in tree()) {
            let yaml = to_string(&value).unwrap();
            let back: Value = serde_yaml::from_str(&yaml).unwrap();
            prop_assert_eq!(back, value, "{}", yaml);
        }
    }
}
