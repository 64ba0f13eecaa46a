//! The key of an item of a set or of a keyed list (SMD's `PathElement`), how it is
//! written in a path (`[name="x"]`, `[containerPort=80,protocol="TCP"]`, `[="value"]`),
//! and a form of it to hash, equal where SMD's `value.Equals` holds.

use std::fmt;

use super::atom::{ListAtom, ListRelationship};
use crate::k8s::go_text::{GoNumber, quote};
use crate::tree::Tree;

/// The key of a list item.
pub(super) enum ItemKey<'a, 't> {
    /// The key fields of a map item that has them (or a default for them), sorted by
    /// name.
    Fields(Vec<(&'a str, &'a Tree<'t>)>),
    /// A set item: the value itself.
    Value(&'a Tree<'t>),
}

/// The key of `item` in a list of `list`'s relationship, or SMD's reason it has none.
pub(super) fn item_key<'a, 't>(
    list: &ListAtom<'a>,
    item: &'a Tree<'t>,
) -> Result<ItemKey<'a, 't>, String> {
    match list.relationship {
        ListRelationship::Keyed(keys) => {
            let map = match item.resolved() {
                Tree::Null => {
                    return Err("associative list with keys may not have a null element".into());
                }
                Tree::Map(map) => map,
                _ => {
                    return Err("associative list with keys may not have non-map elements".into());
                }
            };
            let mut fields = Vec::with_capacity(keys.len());
            for key in keys {
                // A key field that is there keys the item even when it is null; one that
                // is not takes its default, and without one is left out of the key.
                if let Some(value) = map.get(key.name()) {
                    fields.push((key.name(), value));
                } else if let Some(default) = key.default() {
                    fields.push((key.name(), default));
                }
            }
            if fields.is_empty() {
                let names: Vec<String> = keys.iter().map(|key| quote(key.name())).collect();
                return Err(format!(
                    "associative list with keys has an element that omits all key fields [{}] \
                     (and doesn't have default values for any key fields)",
                    names.join(" ")
                ));
            }
            fields.sort_by_key(|(name, _)| *name);
            Ok(ItemKey::Fields(fields))
        }
        ListRelationship::Set | ListRelationship::Atomic => match item.resolved() {
            Tree::Map(_) | Tree::Text(_) => {
                Err("associative list without keys has an element that's a map type".into())
            }
            Tree::List(_) => Err("not supported: associative list with lists as elements".into()),
            Tree::Null => {
                Err("associative list without keys has an element that's an explicit null".into())
            }
            scalar => Ok(ItemKey::Value(scalar)),
        },
    }
}

impl<'a> ItemKey<'a, '_> {
    /// The key in a form to hash and compare.
    pub fn canon(&self) -> Canon<'a> {
        match self {
            ItemKey::Fields(fields) => Canon::Fields(
                fields
                    .iter()
                    .map(|(name, value)| (*name, canon(value)))
                    .collect(),
            ),
            ItemKey::Value(value) => canon(value),
        }
    }
}

/// `PathElement.String()`: `[name="x",port=80]` or `[="x"]`.
impl fmt::Display for ItemKey<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ItemKey::Fields(fields) => {
                f.write_str("[")?;
                for (at, (name, value)) in fields.iter().enumerate() {
                    if at > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{name}={}", ToGoString(value))?;
                }
                f.write_str("]")
            }
            ItemKey::Value(value) => write!(f, "[={}]", ToGoString(value)),
        }
    }
}

/// SMD's `value.ToString`: strings quoted, maps as `k=v` pairs run together (in the
/// map's order here; Go's is random), lists as `[a,b]`.
struct ToGoString<'a, 't>(&'a Tree<'t>);

impl fmt::Display for ToGoString<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.resolved() {
            Tree::Null => f.write_str("null"),
            Tree::Bool(b) => write!(f, "{b}"),
            Tree::Number(n) => f.write_str(&GoNumber::of(n).to_go_v()),
            Tree::String(s) => f.write_str(&quote(s)),
            Tree::List(items) => {
                f.write_str("[")?;
                for (at, item) in items.iter().enumerate() {
                    if at > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{}", ToGoString(item))?;
                }
                f.write_str("]")
            }
            Tree::Map(map) => {
                for (key, value) in map.iter() {
                    write!(f, "{key}={}", ToGoString(value))?;
                }
                Ok(())
            }
            Tree::Text(_) => Ok(()),
        }
    }
}

/// A key value to hash: equal exactly when SMD's `value.Equals` holds, numbers compared
/// by value across int64 and float64 (`1` is `1.0`). An integral float is written as the
/// integer it is; for integers beyond 2^53, where Go compares an int64 to a float64
/// after rounding the int64, the two may differ.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) enum Canon<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(u64),
    Str(&'a str),
    List(Vec<Canon<'a>>),
    /// A map's entries, sorted by key (map equality ignores order).
    Map(Vec<(&'a str, Canon<'a>)>),
    /// The key fields of a keyed item, sorted by name.
    Fields(Vec<(&'a str, Canon<'a>)>),
}

fn canon<'a>(value: &'a Tree<'_>) -> Canon<'a> {
    match value.resolved() {
        Tree::Null => Canon::Null,
        Tree::Bool(b) => Canon::Bool(*b),
        Tree::Number(n) => match GoNumber::of(n) {
            GoNumber::Int(int) => Canon::Int(int),
            GoNumber::Float(float) => {
                // Inside the i64 range an integral float is that integer (and -0.0 is 0).
                #[expect(
                    clippy::cast_possible_truncation,
                    reason = "the float is integral and inside the i64 range"
                )]
                let int = float as i64;
                if float.fract() == 0.0
                    && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&float)
                {
                    Canon::Int(int)
                } else {
                    Canon::Float(float.to_bits())
                }
            }
        },
        Tree::String(s) => Canon::Str(s),
        Tree::List(items) => Canon::List(items.iter().map(canon).collect()),
        Tree::Map(map) => {
            let mut entries: Vec<_> = map.iter().map(|(key, value)| (key, canon(value))).collect();
            entries.sort_by_key(|(key, _)| *key);
            Canon::Map(entries)
        }
        Tree::Text(_) => Canon::Null,
    }
}
