//! The prototype document: maps are vectors of entries in their JSON order (found by a
//! scan, never hashed), lists and maps are shared by `Arc`, and strings are borrowed from
//! the body where they have no escapes.
//!
//! Built eagerly ([`Node::eager`]) the whole text becomes nodes. Built lazily
//! ([`Node::lazy`]) a map or list stays its JSON text until something reads into it; the
//! first read builds that one level (scalars as values, nested maps and lists as text
//! again), so a subtree nothing reads is scanned once and never built.
//!
//! An edit copies only the path to the changed node ([`Node::set`]); every other node
//! stays shared with the tree it was copied from, so the diff of the two roots
//! ([`diff`]) skips whatever both share by pointer.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, OnceLock};

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::value::RawValue;

pub type Entries<'t> = Vec<(Cow<'t, str>, Node<'t>)>;

#[derive(Clone, Debug)]
pub enum Node<'t> {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(Cow<'t, str>),
    List(Arc<Vec<Node<'t>>>),
    Map(Arc<Entries<'t>>),
    /// A map or list not read yet.
    Text(Arc<Text<'t>>),
}

#[derive(Debug)]
pub struct Text<'t> {
    raw: &'t RawValue,
    level: OnceLock<Node<'t>>,
}

impl<'t> Text<'t> {
    fn level(&self) -> &Node<'t> {
        self.level.get_or_init(|| {
            let mut deserializer = serde_json::Deserializer::from_str(self.raw.get());
            // The text was checked when its parent's level was built.
            Build::LAZY
                .deserialize(&mut deserializer)
                .unwrap_or(Node::Null)
        })
    }
}

impl<'t> Node<'t> {
    /// The whole text as nodes.
    pub fn eager(text: &'t str) -> serde_json::Result<Node<'t>> {
        Node::parse(text, Build::EAGER)
    }

    /// The whole text as nodes, but every `managedFields` as text.
    pub fn eager_without_managed_fields(text: &'t str) -> serde_json::Result<Node<'t>> {
        Node::parse(
            text,
            Build {
                managed_fields_as_text: true,
                ..Build::EAGER
            },
        )
    }

    /// The text's top level as nodes, every map and list below it as text. The whole
    /// text is checked here.
    pub fn lazy(text: &'t str) -> serde_json::Result<Node<'t>> {
        Node::parse(text, Build::LAZY)
    }

    fn parse(text: &'t str, build: Build) -> serde_json::Result<Node<'t>> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let node = build.deserialize(&mut deserializer)?;
        deserializer.end()?;
        Ok(node)
    }

    /// The node itself, or the level a text node stands for.
    fn resolved(&self) -> &Node<'t> {
        match self {
            Node::Text(text) => text.level(),
            node => node,
        }
    }

    pub fn get(&self, key: &str) -> Option<&Node<'t>> {
        match self.resolved() {
            Node::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::String(s) => Some(s),
            _ => None,
        }
    }

    /// The entries of this map, to change: a text node is built first, and entries shared
    /// with another tree are copied (the entries only: their values stay shared).
    fn entries_mut(&mut self) -> Option<&mut Entries<'t>> {
        if let Node::Text(text) = self {
            *self = text.level().clone();
        }
        match self {
            Node::Map(entries) => Some(Arc::make_mut(entries)),
            _ => None,
        }
    }

    /// Sets the value at `path` (map keys), creating maps on the way; `false` when a
    /// node on the way is not a map.
    pub fn set(&mut self, path: &[&str], value: Node<'t>) -> bool {
        let Some((first, rest)) = path.split_first() else {
            *self = value;
            return true;
        };
        let Some(entries) = self.entries_mut() else {
            return false;
        };
        let index = match entries.iter().position(|(k, _)| k == first) {
            Some(index) => index,
            None if rest.is_empty() => {
                entries.push((Cow::Owned(first.to_string()), value));
                return true;
            }
            None => {
                entries.push((
                    Cow::Owned(first.to_string()),
                    Node::Map(Arc::new(Vec::new())),
                ));
                entries.len() - 1
            }
        };
        entries[index].1.set(rest, value)
    }

    fn same(&self, other: &Node<'t>) -> bool {
        match (self, other) {
            (Node::Text(a), Node::Text(b)) => Arc::ptr_eq(a, b),
            (Node::Map(a), Node::Map(b)) => Arc::ptr_eq(a, b),
            (Node::List(a), Node::List(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// Builds a node: eagerly, or one level with maps and lists below it kept as text.
#[derive(Clone, Copy)]
struct Build {
    lazy: bool,
    /// Eagerly, but with every `managedFields` kept as text: what graft's parse leaves
    /// out today when no candidate policy can see it.
    managed_fields_as_text: bool,
}

impl Build {
    const EAGER: Build = Build {
        lazy: false,
        managed_fields_as_text: false,
    };
    const LAZY: Build = Build {
        lazy: true,
        managed_fields_as_text: false,
    };
}

impl<'de> DeserializeSeed<'de> for Build {
    type Value = Node<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node<'de>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// A value below a level being built lazily: a scalar as a node, a map or list as text.
struct Below;

impl<'de> DeserializeSeed<'de> for Below {
    type Value = Node<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node<'de>, D::Error> {
        let raw = <&'de RawValue as serde::Deserialize>::deserialize(deserializer)?;
        let text = raw.get();
        match text.as_bytes().first() {
            Some(b'{' | b'[') => Ok(Node::Text(Arc::new(Text {
                raw,
                level: OnceLock::new(),
            }))),
            _ => {
                let mut scalar = serde_json::Deserializer::from_str(text);
                Build::EAGER
                    .deserialize(&mut scalar)
                    .map_err(de::Error::custom)
            }
        }
    }
}

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
        formatter.write_str("a key")
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(s))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(s.to_string()))
    }
}

impl<'de> Visitor<'de> for Build {
    type Value = Node<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Node<'de>, E> {
        Ok(Node::Null)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Node<'de>, E> {
        Ok(Node::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Node<'de>, E> {
        Ok(Node::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Node<'de>, E> {
        Ok(Node::Number(n.into()))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Node<'de>, E> {
        serde_json::Number::from_f64(n)
            .map(Node::Number)
            .ok_or_else(|| E::custom("not a JSON number"))
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Node<'de>, E> {
        Ok(Node::String(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Node<'de>, E> {
        Ok(Node::String(Cow::Owned(s.to_string())))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node<'de>, A::Error> {
        let mut items = Vec::new();
        if self.lazy {
            while let Some(item) = seq.next_element_seed(Below)? {
                items.push(item);
            }
        } else {
            while let Some(item) = seq.next_element_seed(self)? {
                items.push(item);
            }
        }
        Ok(Node::List(Arc::new(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node<'de>, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key_seed(Key)? {
            let value = if self.lazy || (self.managed_fields_as_text && key == "managedFields") {
                map.next_value_seed(Below)?
            } else {
                map.next_value_seed(self)?
            };
            entries.push((key, value));
        }
        Ok(Node::Map(Arc::new(entries)))
    }
}

impl Serialize for Node<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Null => serializer.serialize_unit(),
            Node::Bool(b) => serializer.serialize_bool(*b),
            Node::Number(n) => n.serialize(serializer),
            Node::String(s) => serializer.serialize_str(s),
            Node::List(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items.iter() {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Node::Map(entries) => {
                let mut map = serializer.serialize_map(Some(entries.len()))?;
                for (key, value) in entries.iter() {
                    map.serialize_entry(key.as_ref(), value)?;
                }
                map.end()
            }
            Node::Text(text) => text.raw.serialize(serializer),
        }
    }
}

/// One JSON Patch operation; its value serialized from the node.
#[derive(serde::Serialize)]
pub struct Operation<'n, 't> {
    op: &'static str,
    path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'n Node<'t>>,
}

/// The operations that turn `old` into `new`, as `json_patch::diff` orders them;
/// subtrees both share are skipped without a look.
pub fn diff<'n, 't>(old: &'n Node<'t>, new: &'n Node<'t>) -> Vec<Operation<'n, 't>> {
    let mut operations = Vec::new();
    diff_node(old, new, &mut String::new(), &mut operations);
    operations
}

fn diff_node<'n, 't>(
    old: &'n Node<'t>,
    new: &'n Node<'t>,
    path: &mut String,
    operations: &mut Vec<Operation<'n, 't>>,
) {
    if old.same(new) {
        return;
    }
    match (old.resolved(), new.resolved()) {
        (Node::Map(a), Node::Map(b)) => {
            if Arc::ptr_eq(a, b) {
                return;
            }
            for (key, before) in a.iter() {
                let length = path.len();
                push_token(path, key);
                match b.iter().find(|(k, _)| k == key) {
                    Some((_, after)) => diff_node(before, after, path, operations),
                    None => operations.push(Operation {
                        op: "remove",
                        path: path.clone(),
                        value: None,
                    }),
                }
                path.truncate(length);
            }
            for (key, after) in b.iter() {
                if !a.iter().any(|(k, _)| k == key) {
                    let length = path.len();
                    push_token(path, key);
                    operations.push(Operation {
                        op: "add",
                        path: path.clone(),
                        value: Some(after),
                    });
                    path.truncate(length);
                }
            }
        }
        (Node::List(a), Node::List(b)) => {
            if Arc::ptr_eq(a, b) {
                return;
            }
            for (index, (before, after)) in a.iter().zip(b.iter()).enumerate() {
                let length = path.len();
                path.push('/');
                path.push_str(&index.to_string());
                diff_node(before, after, path, operations);
                path.truncate(length);
            }
            for (index, after) in b.iter().enumerate().skip(a.len()) {
                operations.push(Operation {
                    op: "add",
                    path: format!("{path}/{index}"),
                    value: Some(after),
                });
            }
            for index in (b.len()..a.len()).rev() {
                operations.push(Operation {
                    op: "remove",
                    path: format!("{path}/{index}"),
                    value: None,
                });
            }
        }
        (a, b) if scalar_equal(a, b) => {}
        (_, _) => operations.push(Operation {
            op: "replace",
            path: path.clone(),
            value: Some(new),
        }),
    }
}

fn scalar_equal(a: &Node<'_>, b: &Node<'_>) -> bool {
    match (a, b) {
        (Node::Null, Node::Null) => true,
        (Node::Bool(x), Node::Bool(y)) => x == y,
        (Node::Number(x), Node::Number(y)) => x == y,
        (Node::String(x), Node::String(y)) => x == y,
        _ => false,
    }
}

/// A map key as a JSON Pointer token.
fn push_token(path: &mut String, key: &str) {
    path.push('/');
    for c in key.chars() {
        match c {
            '~' => path.push_str("~0"),
            '/' => path.push_str("~1"),
            c => path.push(c),
        }
    }
}
