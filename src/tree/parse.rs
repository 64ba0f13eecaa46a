//! JSON text to a tree and back, through serde_json's own reader and writer: the tree
//! refuses and accepts exactly the texts `serde_json::Value` does, and writes what
//! `serde_json::Value` writes for the same JSON.

use std::fmt;
use std::sync::Arc;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::value::RawValue;

use super::{Map, Text, Tree};

/// How deep maps and lists may nest: serde_json refuses the 128th map or list inside
/// another, and a text node's check counts the maps and lists around it too.
pub const MAX_DEPTH: usize = 127;

impl Tree {
    /// The JSON text as a tree, built whole.
    pub fn parse(text: &str) -> serde_json::Result<Tree> {
        Tree::parse_keeping(text, &[])
    }

    /// The JSON text as a tree, with the map or list value of any entry whose key is in
    /// `kept` kept as text ([`Tree::Text`]), at any depth: checked now as if it were
    /// built, built when first read.
    pub fn parse_keeping(text: &str, kept: &[&str]) -> serde_json::Result<Tree> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let tree = Build { depth: 0, kept }.deserialize(&mut deserializer)?;
        deserializer.end()?;
        Ok(tree)
    }
}

impl<'de> serde::Deserialize<'de> for Tree {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Tree, D::Error> {
        Build {
            depth: 0,
            kept: &[],
        }
        .deserialize(deserializer)
    }
}

/// Builds a value: `depth` maps and lists enclose it, and the values of the `kept` keys
/// below it are kept as text.
#[derive(Clone, Copy)]
struct Build<'k> {
    depth: usize,
    kept: &'k [&'k str],
}

impl Build<'_> {
    fn below(self) -> Self {
        Build {
            depth: self.depth + 1,
            ..self
        }
    }
}

impl<'de> DeserializeSeed<'de> for Build<'_> {
    type Value = Tree;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Tree, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Build<'_> {
    type Value = Tree;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any valid JSON value")
    }

    fn visit_unit<E>(self) -> Result<Tree, E> {
        Ok(Tree::Null)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Tree, E> {
        Ok(Tree::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Tree, E> {
        Ok(Tree::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Tree, E> {
        Ok(Tree::Number(n.into()))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Tree, E> {
        // serde_json hands over finite floats only, and makes anything else null too.
        Ok(Tree::from(n))
    }

    fn visit_str<E>(self, s: &str) -> Result<Tree, E> {
        Ok(Tree::String(s.into()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tree, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.below())? {
            items.push(item);
        }
        Ok(Tree::List(Arc::new(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Tree, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key_seed(Key)? {
            let value = if self.kept.contains(&&*key) {
                access.next_value_seed(Kept(self.below()))?
            } else {
                access.next_value_seed(self.below())?
            };
            // A key written twice keeps its first place and its last value, as in
            // `serde_json::Value`.
            map.insert(key, value);
        }
        Ok(Tree::Map(Arc::new(map)))
    }
}

/// The value of a kept key: a map or list as a text node, anything else built.
struct Kept<'k>(Build<'k>);

impl<'de> DeserializeSeed<'de> for Kept<'_> {
    type Value = Tree;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Tree, D::Error> {
        let raw = <&RawValue as serde::Deserialize>::deserialize(deserializer)?;
        let text = raw.get();
        let mut check = serde_json::Deserializer::from_str(text);
        let tree = Check {
            depth: self.0.depth,
        }
        .deserialize(&mut check)
        .map_err(de::Error::custom)?;
        match tree {
            Some(scalar) => Ok(scalar),
            None => Ok(Tree::Text(Arc::new(Text::new(text)))),
        }
    }
}

/// Reads a value as building it would, the nesting counted from `depth`: a scalar is
/// built (`Some`), a map or list only checked (`None`).
#[derive(Clone, Copy)]
struct Check {
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Check {
    type Value = Option<Tree>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Check {
    fn enter<E: de::Error>(self) -> Result<Check, E> {
        if self.depth >= MAX_DEPTH {
            return Err(E::custom("recursion limit exceeded"));
        }
        Ok(Check {
            depth: self.depth + 1,
        })
    }
}

impl<'de> Visitor<'de> for Check {
    type Value = Option<Tree>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any valid JSON value")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Some(Tree::Null))
    }

    fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
        Ok(Some(Tree::Bool(b)))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Self::Value, E> {
        Ok(Some(Tree::Number(n.into())))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Self::Value, E> {
        Ok(Some(Tree::Number(n.into())))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Self::Value, E> {
        Ok(Some(Tree::from(n)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Some(Tree::String(s.into())))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let inner = self.enter()?;
        while seq.next_element_seed(inner)?.is_some() {}
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
        let inner = self.enter()?;
        while access.next_key_seed(CheckedKey)?.is_some() {
            access.next_value_seed(inner)?;
        }
        Ok(None)
    }
}

/// A map key, read as serde_json reads one for a `Value`.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Arc<str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Arc<str>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for Key {
    type Value = Arc<str>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a string key")
    }

    fn visit_str<E>(self, s: &str) -> Result<Arc<str>, E> {
        Ok(s.into())
    }
}

/// A map key read as [`Key`] reads it (escapes and all), and dropped.
struct CheckedKey;

impl<'de> DeserializeSeed<'de> for CheckedKey {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for CheckedKey {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a string key")
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
}

impl Serialize for Tree {
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
            Tree::Map(map) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (key, value) in map.iter() {
                    out.serialize_entry(key, value)?;
                }
                out.end()
            }
            // Written as built, so that the output does not depend on whether it was read.
            Tree::Text(text) => text.tree().serialize(serializer),
        }
    }
}
