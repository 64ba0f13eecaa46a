//! The JSON tree the engine's object is: maps are vectors of entries in their JSON
//! order (a key is found by a scan, never hashed), maps and lists are shared by `Arc`,
//! strings and keys are borrowed from the text the tree was parsed from, and a subtree
//! may stay JSON text until it is first read.
//!
//! Why this shape, measured (`bench/document_probe`, BENCHMARKS.md): parsing a review into
//! vector maps with borrowed strings costs about half of parsing it into
//! `serde_json::Value`'s hashed ordered maps of owned strings; sharing makes a copy of the
//! tree one reference count, and an edit copies only the maps and lists on the path to
//! what it changes ([`Tree::map_mut`], [`Tree::list_mut`]), so keeping the tree as it was
//! before a policy is keeping its root, and the diff of two roots ([`diff`]) skips every
//! subtree they share without looking into it.
//!
//! The tree is covariant in the lifetime of its text: a tree that owns its strings
//! (`Tree<'static>`, a policy's literal) goes into one that borrows them as it is.
//!
//! Text nodes are for what is big and rarely read, such as `metadata.managedFields`: the
//! parse checks the text as building it would ([`Tree::parse_keeping`]) and keeps it, and
//! the first read builds it. Nothing needs to know in advance whether it will be read.
//! Building a level of text only when it is read, everywhere, does not pay: each level's
//! text would be read again by each level below it.

mod diff;
mod parse;
mod patch;
mod query;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

pub use diff::{Operation, Patch, diff};
pub use parse::{MAX_DEPTH, seed, text_seed};
pub use patch::{PatchError, PatchFailure, apply as apply_patch};

/// A JSON value. Its strings and keys borrow from the text it was parsed from (`'t`)
/// where they are in it as they are, and are their own otherwise.
#[derive(Clone, Debug, Default)]
pub enum Tree<'t> {
    #[default]
    Null,
    Bool(bool),
    Number(serde_json::Number),
    String(Cow<'t, str>),
    List(Arc<Vec<Tree<'t>>>),
    Map(Arc<Map<'t>>),
    /// A map or list kept as its JSON text until it is first read.
    Text(Arc<Text<'t>>),
}

/// A JSON object: its entries in order, each key once.
///
/// A key is found by a scan while the map is small, which is faster than hashing it; a
/// larger map builds an index of its keys on its first lookup, so that no map makes a
/// lookup (or a parse, or a diff) quadratic.
#[derive(Debug, Default)]
pub struct Map<'t> {
    entries: Vec<(Cow<'t, str>, Tree<'t>)>,
    #[expect(
        clippy::box_collection,
        reason = "a box is one pointer where a map is six words: the many small maps that never build an index stay small"
    )]
    index: OnceLock<Box<HashMap<Box<str>, usize>>>,
}

/// Up to this many entries a key is found by a scan.
pub(super) const SCANNED: usize = 32;

/// A copy leaves the index behind: the copy is made to be changed.
impl Clone for Map<'_> {
    fn clone(&self) -> Self {
        Map {
            entries: self.entries.clone(),
            index: OnceLock::new(),
        }
    }
}

/// A map or list kept as JSON text, checked when it was kept, built on first read (its
/// strings its own, so that the tree stays free to live as long as its text).
#[derive(Debug)]
pub struct Text<'t> {
    text: &'t str,
    built: OnceLock<Tree<'static>>,
}

impl<'t> Text<'t> {
    fn new(text: &'t str) -> Self {
        Text {
            text,
            built: OnceLock::new(),
        }
    }

    /// The text as a tree, built on the first call.
    fn tree(&self) -> &Tree<'t> {
        // The text was checked as building it checks it when it was kept; a build that
        // failed anyway would be a bug, and `null` its most harmless answer.
        self.built
            .get_or_init(|| Tree::parse_owned(self.text).unwrap_or(Tree::Null))
    }

    /// The JSON text, as it was in the body.
    pub fn as_str(&self) -> &'t str {
        self.text
    }

    /// Whether the text has been built into a tree: it is, once something read it.
    pub fn is_built(&self) -> bool {
        self.built.get().is_some()
    }
}

impl<'t> Map<'t> {
    pub fn new() -> Self {
        Map::default()
    }

    /// A map of `entries`, whose keys are each there once.
    pub(super) fn from_unique(entries: Vec<(Cow<'t, str>, Tree<'t>)>) -> Self {
        Map {
            entries,
            index: OnceLock::new(),
        }
    }

    pub fn with_capacity(capacity: usize) -> Self {
        Map {
            entries: Vec::with_capacity(capacity),
            index: OnceLock::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Where `key` is among the entries.
    pub fn position(&self, key: &str) -> Option<usize> {
        if self.entries.len() <= SCANNED {
            return self.entries.iter().position(|(k, _)| &**k == key);
        }
        self.index
            .get_or_init(|| {
                let mut index = HashMap::with_capacity(self.entries.len());
                for (at, (key, _)) in self.entries.iter().enumerate() {
                    index.insert(Box::<str>::from(&**key), at);
                }
                Box::new(index)
            })
            .get(key)
            .copied()
    }

    pub fn get(&self, key: &str) -> Option<&Tree<'t>> {
        self.position(key).map(|at| &self.entries[at].1)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Tree<'t>> {
        self.position(key).map(|at| &mut self.entries[at].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    /// Sets `key` to `value`: in its place when the key is there, last otherwise (as
    /// `serde_json::Map` keeps its order). The value it had, if any.
    pub fn insert(&mut self, key: impl Into<Cow<'t, str>>, value: Tree<'t>) -> Option<Tree<'t>> {
        let key = key.into();
        match self.position(&key) {
            Some(at) => Some(std::mem::replace(&mut self.entries[at].1, value)),
            None => {
                if let Some(index) = self.index.get_mut() {
                    index.insert(Box::<str>::from(&*key), self.entries.len());
                }
                self.entries.push((key, value));
                None
            }
        }
    }

    /// Removes `key`, keeping the order of the others. The value it had, if any.
    pub fn remove(&mut self, key: &str) -> Option<Tree<'t>> {
        let at = self.position(key)?;
        if let Some(index) = self.index.get_mut() {
            // The entries after it move up one, as in the vector.
            index.remove(key);
            for position in index.values_mut() {
                if *position > at {
                    *position -= 1;
                }
            }
        }
        Some(self.entries.remove(at).1)
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &Tree<'t>)> {
        self.entries.iter().map(|(key, value)| (&**key, value))
    }

    pub fn iter_mut(&mut self) -> impl ExactSizeIterator<Item = (&str, &mut Tree<'t>)> {
        self.entries.iter_mut().map(|(key, value)| (&**key, value))
    }

    pub fn keys(&self) -> impl ExactSizeIterator<Item = &str> + Clone {
        self.entries.iter().map(|(key, _)| &**key)
    }

    /// The entries in order, with their shared keys.
    pub fn entries(&self) -> &[(Cow<'t, str>, Tree<'t>)] {
        &self.entries
    }
}

/// Maps are equal when they hold the same keys with equal values, in any order, as
/// `serde_json::Map`s are. Each value is compared once, so that equality stays linear
/// however deep the maps nest.
impl PartialEq for Map<'_> {
    fn eq(&self, other: &Self) -> bool {
        if self.len() != other.len() {
            return false;
        }
        let in_order = self
            .entries
            .iter()
            .zip(&other.entries)
            .all(|((left, _), (right, _))| left == right);
        if in_order {
            self.entries
                .iter()
                .zip(&other.entries)
                .all(|((_, left), (_, right))| left == right)
        } else {
            // A map holds each key once: the same keys in another order are found by lookup.
            self.iter()
                .all(|(key, value)| other.get(key).is_some_and(|v| v == value))
        }
    }
}

impl<'t> FromIterator<(String, Tree<'t>)> for Map<'t> {
    /// A later entry with the key of an earlier one replaces its value in place.
    fn from_iter<I: IntoIterator<Item = (String, Tree<'t>)>>(entries: I) -> Self {
        let mut map = Map::new();
        for (key, value) in entries {
            map.insert(key, value);
        }
        map
    }
}

impl<'t> Tree<'t> {
    /// A map or list, as itself; a text node as the tree its text is built into.
    pub fn resolved(&self) -> &Tree<'t> {
        match self {
            Tree::Text(text) => text.tree(),
            tree => tree,
        }
    }

    /// Whether `self` and `other` are one node: shared maps, lists, strings or texts.
    /// Equal trees that are not shared are not the same.
    pub fn same(&self, other: &Tree<'t>) -> bool {
        match (self, other) {
            (Tree::Map(l), Tree::Map(r)) => Arc::ptr_eq(l, r),
            (Tree::List(l), Tree::List(r)) => Arc::ptr_eq(l, r),
            (Tree::String(l), Tree::String(r)) => std::ptr::eq::<str>(&**l, &**r),
            (Tree::Text(l), Tree::Text(r)) => Arc::ptr_eq(l, r),
            _ => false,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Tree::Null)
    }

    /// The JSON type of the tree, with its article (`an object`, `a list`, `null`), as
    /// messages name what they found: never the value itself, which may be the object's
    /// contents, and reasons are logged.
    pub fn type_name(&self) -> &'static str {
        match self.resolved() {
            Tree::Null | Tree::Text(_) => "null",
            Tree::Bool(_) => "a boolean",
            Tree::Number(_) => "a number",
            Tree::String(_) => "a string",
            Tree::List(_) => "a list",
            Tree::Map(_) => "an object",
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Tree::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_number(&self) -> Option<&serde_json::Number> {
        match self {
            Tree::Number(n) => Some(n),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        self.as_number().and_then(serde_json::Number::as_i64)
    }

    pub fn as_u64(&self) -> Option<u64> {
        self.as_number().and_then(serde_json::Number::as_u64)
    }

    pub fn as_f64(&self) -> Option<f64> {
        self.as_number().and_then(serde_json::Number::as_f64)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Tree::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&Map<'t>> {
        match self.resolved() {
            Tree::Map(map) => Some(map),
            _ => None,
        }
    }

    pub fn as_list(&self) -> Option<&Vec<Tree<'t>>> {
        match self.resolved() {
            Tree::List(items) => Some(items),
            _ => None,
        }
    }

    /// The value of `key` in a map.
    pub fn get(&self, key: &str) -> Option<&Tree<'t>> {
        self.as_map()?.get(key)
    }

    /// The item at `index` of a list.
    pub fn item(&self, index: usize) -> Option<&Tree<'t>> {
        self.as_list()?.get(index)
    }

    /// The map, to change: a text node is built first, and a map shared with another tree
    /// is copied (its entries only: their values stay shared).
    pub fn map_mut(&mut self) -> Option<&mut Map<'t>> {
        self.build_text();
        match self {
            Tree::Map(map) => Some(Arc::make_mut(map)),
            _ => None,
        }
    }

    /// The list, to change, as [`Tree::map_mut`] the map.
    pub fn list_mut(&mut self) -> Option<&mut Vec<Tree<'t>>> {
        self.build_text();
        match self {
            Tree::List(items) => Some(Arc::make_mut(items)),
            _ => None,
        }
    }

    fn build_text(&mut self) {
        if let Tree::Text(text) = self {
            *self = text.tree().clone();
        }
    }

    /// The value at a JSON Pointer (RFC 6901): `""` is the whole tree.
    pub fn pointer(&self, pointer: &str) -> Option<&Tree<'t>> {
        let mut tree = self;
        for token in tokens(pointer)? {
            tree = match tree.resolved() {
                Tree::Map(map) => map.get(&token)?,
                Tree::List(items) => items.get(list_index(&token)?)?,
                _ => return None,
            };
        }
        Some(tree)
    }

    /// The value at a JSON Pointer, to change; the maps and lists on the way are copied
    /// where they are shared.
    pub fn pointer_mut(&mut self, pointer: &str) -> Option<&mut Tree<'t>> {
        let mut tree = self;
        for token in tokens(pointer)? {
            tree.build_text();
            tree = match tree {
                Tree::Map(map) => Arc::make_mut(map).get_mut(&token)?,
                Tree::List(items) => Arc::make_mut(items).get_mut(list_index(&token)?)?,
                _ => return None,
            };
        }
        Some(tree)
    }

    /// The tree with every string its own, free of the text it was parsed from. Maps and
    /// lists are copied, since their type changes; for what must outlive the text.
    pub fn into_static(self) -> Tree<'static> {
        match self {
            Tree::Null => Tree::Null,
            Tree::Bool(b) => Tree::Bool(b),
            Tree::Number(n) => Tree::Number(n),
            Tree::String(s) => Tree::String(Cow::Owned(s.into_owned())),
            Tree::List(items) => Tree::List(Arc::new(
                items
                    .iter()
                    .map(|item| item.clone().into_static())
                    .collect(),
            )),
            Tree::Map(map) => {
                let mut entries = Vec::with_capacity(map.len());
                for (key, value) in map.entries() {
                    entries.push((
                        Cow::Owned(key.clone().into_owned()),
                        value.clone().into_static(),
                    ));
                }
                Tree::Map(Arc::new(Map {
                    entries,
                    index: OnceLock::new(),
                }))
            }
            Tree::Text(text) => text.tree().clone().into_static(),
        }
    }

    /// The tree as a `serde_json::Value`, for what still speaks it.
    pub fn to_value(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Tree::Null => Value::Null,
            Tree::Bool(b) => Value::Bool(*b),
            Tree::Number(n) => Value::Number(n.clone()),
            Tree::String(s) => Value::String(s.to_string()),
            Tree::List(items) => Value::Array(items.iter().map(Tree::to_value).collect()),
            Tree::Map(map) => Value::Object(
                map.iter()
                    .map(|(key, value)| (key.to_string(), value.to_value()))
                    .collect(),
            ),
            Tree::Text(text) => text.tree().to_value(),
        }
    }
}

/// The decoded reference tokens of a JSON Pointer; `None` for text that is not one.
fn tokens(pointer: &str) -> Option<impl Iterator<Item = String> + '_> {
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return None;
    }
    Some(
        pointer
            .split('/')
            .skip(1)
            .map(|token| token.replace("~1", "/").replace("~0", "~")),
    )
}

/// A list index as RFC 6901 writes one: digits, without leading zeros.
fn list_index(token: &str) -> Option<usize> {
    if token.is_empty() || (token.len() > 1 && token.starts_with('0')) {
        return None;
    }
    if !token.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    token.parse().ok()
}

/// Trees are equal when their JSON is: a text node equals the tree its text builds into.
impl PartialEq for Tree<'_> {
    fn eq(&self, other: &Self) -> bool {
        if self.same(other) {
            return true;
        }
        match (self.resolved(), other.resolved()) {
            (Tree::Null, Tree::Null) => true,
            (Tree::Bool(l), Tree::Bool(r)) => l == r,
            (Tree::Number(l), Tree::Number(r)) => l == r,
            (Tree::String(l), Tree::String(r)) => l == r,
            (Tree::List(l), Tree::List(r)) => Arc::ptr_eq(l, r) || l == r,
            (Tree::Map(l), Tree::Map(r)) => Arc::ptr_eq(l, r) || l == r,
            _ => false,
        }
    }
}

/// A tree equals a `serde_json::Value` holding the same JSON.
impl PartialEq<serde_json::Value> for Tree<'_> {
    fn eq(&self, other: &serde_json::Value) -> bool {
        self.to_value() == *other
    }
}

impl From<&serde_json::Value> for Tree<'static> {
    fn from(value: &serde_json::Value) -> Tree<'static> {
        use serde_json::Value;
        match value {
            Value::Null => Tree::Null,
            Value::Bool(b) => Tree::Bool(*b),
            Value::Number(n) => Tree::Number(n.clone()),
            Value::String(s) => Tree::String(Cow::Owned(s.clone())),
            Value::Array(items) => Tree::List(Arc::new(items.iter().map(Tree::from).collect())),
            Value::Object(fields) => {
                let mut map = Map::with_capacity(fields.len());
                for (key, value) in fields {
                    // serde_json's map holds each key once.
                    map.entries
                        .push((Cow::Owned(key.clone()), Tree::from(value)));
                }
                Tree::Map(Arc::new(map))
            }
        }
    }
}

impl From<serde_json::Value> for Tree<'static> {
    fn from(value: serde_json::Value) -> Tree<'static> {
        Tree::from(&value)
    }
}

/// A string of its own: jsonpath-rust needs a tree from a `&str` of any lifetime.
impl From<&str> for Tree<'_> {
    fn from(s: &str) -> Self {
        Tree::String(Cow::Owned(s.to_string()))
    }
}

impl From<String> for Tree<'_> {
    fn from(s: String) -> Self {
        Tree::String(Cow::Owned(s))
    }
}

impl From<bool> for Tree<'_> {
    fn from(b: bool) -> Self {
        Tree::Bool(b)
    }
}

impl From<i64> for Tree<'_> {
    fn from(n: i64) -> Self {
        Tree::Number(n.into())
    }
}

/// A float that is not finite is `null`, as serde_json makes it.
impl From<f64> for Tree<'_> {
    fn from(n: f64) -> Self {
        serde_json::Number::from_f64(n).map_or(Tree::Null, Tree::Number)
    }
}

impl<'t> From<Vec<Tree<'t>>> for Tree<'t> {
    fn from(items: Vec<Tree<'t>>) -> Self {
        Tree::List(Arc::new(items))
    }
}

impl<'t> From<Map<'t>> for Tree<'t> {
    fn from(map: Map<'t>) -> Self {
        Tree::Map(Arc::new(map))
    }
}
