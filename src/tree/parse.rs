//! JSON text to a tree and back, through serde_json's own reader and writer: the tree
//! refuses and accepts exactly the texts `serde_json::Value` does, and writes what
//! `serde_json::Value` writes for the same JSON, with one difference: every key is a key
//! as written, where `serde_json::Value` (with the `raw_value` feature) reads a map whose
//! first key is its private `$serde_json::private::RawValue` as the JSON text in that
//! key's string. That value is not the JSON the text holds (a patch computed against it
//! would be against another shape), and each such string is parsed with a fresh
//! recursion limit, so a few kilobytes of them nest deep enough to overflow a thread's
//! stack; a tree's text has one recursion limit, for all of it. Anything may hold such
//! a key (a custom resource that keeps unknown fields, an annotation), so every JSON
//! text graft reads from a request (the review, an annotation CEL decodes, the Multus
//! annotation) is read here.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::value::RawValue;

use super::{Map, SCANNED, Text, Tree};

/// How deep maps and lists may nest: serde_json refuses the 128th map or list inside
/// another, and a text node's check counts the maps and lists around it too.
pub const MAX_DEPTH: usize = 127;

impl<'t> Tree<'t> {
    /// The JSON text as a tree, built whole, its strings borrowed from `text`.
    pub fn parse(text: &'t str) -> serde_json::Result<Tree<'t>> {
        Tree::parse_keeping(text, &[])
    }

    /// The JSON text as a tree, with the map or list value of any entry whose key is in
    /// `kept` kept as text ([`Tree::Text`]), at any depth: checked now as building it
    /// would check it, built when first read.
    pub fn parse_keeping(text: &'t str, kept: &[&str]) -> serde_json::Result<Tree<'t>> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let tree = Root { depth: 0, kept }.deserialize(&mut deserializer)?;
        deserializer.end()?;
        Ok(tree)
    }
}

/// Reads a value inside a larger JSON text as a tree, for a reader of that text that
/// hands this seed the value (`MapAccess::next_value_seed`): `depth` maps and lists
/// enclose the value in the text, and the map or list values of the `kept` keys are
/// kept as text, as [`Tree::parse_keeping`] keeps them.
pub fn seed<'k>(
    depth: usize,
    kept: &'k [&'k str],
) -> impl for<'de> DeserializeSeed<'de, Value = Tree<'de>> + 'k {
    Root { depth, kept }
}

/// Reads a value inside a larger JSON text as a text node ([`Tree::Text`]) when it is a
/// map or list, checked as building it would check it; anything else is built.
pub fn text_seed(depth: usize) -> impl for<'de> DeserializeSeed<'de, Value = Tree<'de>> {
    Kept { depth }
}

impl Tree<'static> {
    /// The JSON text as a tree, built whole, its strings its own.
    pub fn parse_owned(text: &str) -> serde_json::Result<Tree<'static>> {
        Tree::parse(text).map(Tree::into_static)
    }
}

impl<'de: 't, 't> serde::Deserialize<'de> for Tree<'t> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Tree<'t>, D::Error> {
        Root {
            depth: 0,
            kept: &[],
        }
        .deserialize(deserializer)
    }
}

/// Builds a value as [`Build`] does, with a stack of its own.
#[derive(Clone, Copy)]
struct Root<'k> {
    depth: usize,
    kept: &'k [&'k str],
}

impl<'de> DeserializeSeed<'de> for Root<'_> {
    type Value = Tree<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Tree<'de>, D::Error> {
        let stack = Stack::default();
        Build {
            depth: self.depth,
            kept: self.kept,
            stack: &stack,
        }
        .deserialize(deserializer)
    }
}

/// The entries and items of the maps and lists being read, shared by one whole read: a
/// map's entries go on top while it is read and move into a vector of their exact
/// number when it ends, instead of growing a vector of their own a doubling (and a copy)
/// at a time. A nested map takes what it pushed off again before its parent goes on.
#[derive(Default)]
struct Stack<'de> {
    entries: RefCell<Vec<(Cow<'de, str>, Tree<'de>)>>,
    items: RefCell<Vec<Tree<'de>>>,
}

/// Builds a value: `depth` maps and lists enclose it, and the values of the `kept` keys
/// below it are kept as text.
#[derive(Clone, Copy)]
struct Build<'k, 's, 'de> {
    depth: usize,
    kept: &'k [&'k str],
    stack: &'s Stack<'de>,
}

impl Build<'_, '_, '_> {
    fn below(self) -> Self {
        Build {
            depth: self.depth + 1,
            ..self
        }
    }
}

impl<'de> DeserializeSeed<'de> for Build<'_, '_, 'de> {
    type Value = Tree<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Tree<'de>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Build<'_, '_, 'de> {
    type Value = Tree<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any valid JSON value")
    }

    fn visit_unit<E>(self) -> Result<Tree<'de>, E> {
        Ok(Tree::Null)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Tree<'de>, E> {
        Ok(Tree::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Tree<'de>, E> {
        Ok(Tree::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Tree<'de>, E> {
        Ok(Tree::Number(n.into()))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Tree<'de>, E> {
        // serde_json hands over finite floats only, and makes anything else null too.
        Ok(Tree::from(n))
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Tree<'de>, E> {
        Ok(Tree::String(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Tree<'de>, E> {
        Ok(Tree::String(Cow::Owned(s.to_string())))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tree<'de>, A::Error> {
        let start = self.stack.items.borrow().len();
        while let Some(item) = seq.next_element_seed(self.below())? {
            self.stack.items.borrow_mut().push(item);
        }
        let items = self.stack.items.borrow_mut().split_off(start);
        Ok(Tree::List(Arc::new(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Tree<'de>, A::Error> {
        let start = self.stack.entries.borrow().len();
        // Past `SCANNED` entries, a map that finds its keys by an index instead of a scan.
        let mut large: Option<Map<'de>> = None;
        while let Some(key) = access.next_key_seed(Key)? {
            let value = if self.kept.contains(&&*key) {
                access.next_value_seed(Kept {
                    depth: self.depth + 1,
                })?
            } else {
                access.next_value_seed(self.below())?
            };
            // A key written twice keeps its first place and its last value, as in
            // `serde_json::Value`.
            if let Some(map) = &mut large {
                map.insert(key, value);
                continue;
            }
            let mut entries = self.stack.entries.borrow_mut();
            let read = entries.get_mut(start..).unwrap_or_default();
            match read.iter_mut().find(|(k, _)| *k == key) {
                Some((_, earlier)) => *earlier = value,
                None => entries.push((key, value)),
            }
            if entries.len() - start > SCANNED {
                large = Some(Map::from_unique(entries.split_off(start)));
            }
        }
        let map = match large {
            Some(map) => map,
            None => Map::from_unique(self.stack.entries.borrow_mut().split_off(start)),
        };
        Ok(Tree::Map(Arc::new(map)))
    }
}

/// The value of a kept key, `depth` maps and lists around it: a map or list as a text
/// node, anything else built.
struct Kept {
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Kept {
    type Value = Tree<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Tree<'de>, D::Error> {
        let raw = <&'de RawValue as serde::Deserialize>::deserialize(deserializer)?;
        let text = raw.get();
        if !text.starts_with(['{', '[']) {
            let mut scalar = serde_json::Deserializer::from_str(text);
            let scalar_seed = Root {
                depth: self.depth,
                kept: &[],
            };
            return scalar_seed
                .deserialize(&mut scalar)
                .map_err(de::Error::custom);
        }
        check_kept(text, self.depth).map_err(de::Error::custom)?;
        Ok(Tree::Text(Arc::new(Text::new(text))))
    }
}

/// What serde_json checks when it builds JSON and not when it reads a raw value, which
/// found `text` valid already: how deep maps and lists nest (counting the `depth` around
/// the text), that every number is finite, and that `\u` escapes pair their surrogates.
/// A text that passes builds as it would have built in place, so a kept text is refused
/// or accepted with the body, never when it is read.
///
/// A scan of the bytes rather than a second parse by serde_json: that parse cost as much
/// as building the text would.
fn check_kept(text: &str, depth: usize) -> Result<(), &'static str> {
    let bytes = text.as_bytes();
    let mut depth = depth;
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'[' | b'{' => {
                if depth >= MAX_DEPTH {
                    return Err("recursion limit exceeded");
                }
                depth += 1;
                at += 1;
            }
            b']' | b'}' => {
                depth = depth.saturating_sub(1);
                at += 1;
            }
            b'"' => at = string_end(bytes, at + 1)?,
            b'-' | b'0'..=b'9' => {
                let length = bytes[at..]
                    .iter()
                    .position(|b| !matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
                    .unwrap_or(bytes.len() - at);
                let number = &text[at..at + length];
                if !number.parse::<f64>().is_ok_and(f64::is_finite) {
                    return Err("number out of range");
                }
                at += length;
            }
            _ => at += 1,
        }
    }
    Ok(())
}

/// Where the string whose content starts at `at` ends (after its closing quote), its
/// `\u` escapes checked as serde_json checks them for a string: a trailing surrogate
/// alone, or a leading one not followed by a trailing one, is refused.
fn string_end(bytes: &[u8], mut at: usize) -> Result<usize, &'static str> {
    loop {
        at += quote_or_backslash(&bytes[at..]).ok_or("unterminated string")?;
        if bytes[at] == b'"' {
            return Ok(at + 1);
        }
        if bytes.get(at + 1) != Some(&b'u') {
            at += 2;
            continue;
        }
        let unit = hex_escape(bytes, at)?;
        at += 6;
        if (0xDC00..=0xDFFF).contains(&unit) {
            return Err("lone leading surrogate in hex escape");
        }
        if (0xD800..=0xDBFF).contains(&unit) {
            if bytes.get(at..at + 2) != Some(b"\\u") {
                return Err("unexpected end of hex escape");
            }
            if !(0xDC00..=0xDFFF).contains(&hex_escape(bytes, at)?) {
                return Err("lone leading surrogate in hex escape");
            }
            at += 6;
        }
    }
}

/// Where the first `"` or `\` of `bytes` is. Eight bytes at a time in a `u64`: the
/// strings of a kept text are mostly short keys (`"f:metadata"`), where a vector search's
/// set-up costs more than it saves.
fn quote_or_backslash(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    const QUOTES: u64 = u64::from_ne_bytes([b'"'; 8]);
    const BACKSLASHES: u64 = u64::from_ne_bytes([b'\\'; 8]);
    // A byte of `x` is zero where the word has the byte looked for; the lowest byte
    // flagged by `(x - ONES) & !x & HIGHS` is the first zero byte of `x`.
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let mut chunks = bytes.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let word = u64::from_le_bytes(word);
        let found = zero(word ^ QUOTES) | zero(word ^ BACKSLASHES);
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&byte| byte == b'"' || byte == b'\\')
        .map(|position| at + position)
}

/// The code unit of the `\uXXXX` escape at `at`.
fn hex_escape(bytes: &[u8], at: usize) -> Result<u16, &'static str> {
    bytes
        .get(at + 2..at + 6)
        .and_then(|digits| std::str::from_utf8(digits).ok())
        .and_then(|digits| u16::from_str_radix(digits, 16).ok())
        .ok_or("invalid escape")
}

/// A map key, read as serde_json reads one for a `Value`: borrowed from the text unless
/// it had escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a string key")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(s))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(s.to_string()))
    }
}

impl Serialize for Tree<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Tree::Null => serializer.serialize_unit(),
            Tree::Bool(b) => serializer.serialize_bool(*b),
            Tree::Number(n) => n.serialize(serializer),
            Tree::String(s) => serializer.serialize_str(s),
            Tree::List(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items.iter() {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Tree::Map(map) => map.serialize(serializer),
            // Written as built, so that the output does not depend on whether it was read.
            Tree::Text(text) => text.tree().serialize(serializer),
        }
    }
}

/// A map's entries in their order, as the map of a [`Tree`] writes them.
impl Serialize for Map<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_map(Some(self.len()))?;
        for (key, value) in self.iter() {
            out.serialize_entry(key, value)?;
        }
        out.end()
    }
}

/// Compact JSON text, as `serde_json::Value` displays the same JSON.
impl fmt::Display for Tree<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        formatter.write_str(&text)
    }
}
