//! The document as evanphx/json-patch v4 holds it while a patch applies: a tree of
//! nodes, where a map or list an operation writes into is opened (Go's `intoDoc`,
//! `intoAry`, here a copy of its entries, their values still shared) and the rest stays
//! the caller's tree.
//!
//! Go tells two nulls apart. A `null` of the document, or one inside a value, is a nil
//! node: a path through it resolves nothing. An operation's own `null` value is a node
//! whose text is `null`, which Go reads as an empty object: a path through it resolves
//! (and writing into it panics), and a `test` finds it equal to `{}`.

use std::borrow::Cow;

use super::{Cause, Failure, Panic};
use crate::tree::{Map, Tree};

pub(super) enum Node<'t> {
    /// A value as it came, from the document or an operation; a `null` is a nil node.
    Tree(Tree<'t>),
    /// An operation's `null` value.
    RawNull,
    /// A map opened for a change, in the document's order.
    Map(Vec<(Cow<'t, str>, Node<'t>)>),
    /// A list opened for a change.
    List(Vec<Node<'t>>),
}

impl<'t> Node<'t> {
    /// The tree the node stands for (both nulls are `null`), sharing what was not opened.
    pub fn into_tree(self) -> Tree<'t> {
        match self {
            Node::Tree(tree) => tree,
            Node::RawNull => Tree::Null,
            Node::Map(entries) => {
                let mut map = Map::with_capacity(entries.len());
                for (key, value) in entries {
                    map.insert(key, value.into_tree());
                }
                Tree::from(map)
            }
            Node::List(items) => {
                Tree::from(items.into_iter().map(Node::into_tree).collect::<Vec<_>>())
            }
        }
    }

    /// The node as its JSON text read back, which is what Go's copy makes of it: an
    /// operation's `null` stays one at the top and becomes a nil node below.
    pub fn copied(&self) -> Node<'t> {
        match self {
            Node::RawNull => Node::RawNull,
            Node::Tree(tree) => Node::Tree(tree.clone()),
            Node::Map(_) | Node::List(_) => Node::Tree(self.to_tree()),
        }
    }

    fn to_tree(&self) -> Tree<'t> {
        match self {
            Node::Tree(tree) => tree.clone(),
            Node::RawNull => Tree::Null,
            Node::Map(entries) => {
                let mut map = Map::with_capacity(entries.len());
                for (key, value) in entries {
                    map.insert(key.clone(), value.to_tree());
                }
                Tree::from(map)
            }
            Node::List(items) => Tree::from(items.iter().map(Node::to_tree).collect::<Vec<_>>()),
        }
    }

    /// Opens a map or list of the caller's tree for a change; `false` for a nil node or
    /// a scalar, which Go cannot read as a container.
    fn open(&mut self) -> bool {
        let Node::Tree(tree) = self else {
            return true;
        };
        let opened = match tree.resolved() {
            Tree::Map(map) => Node::Map(
                map.entries()
                    .iter()
                    .map(|(key, value)| (key.clone(), Node::Tree(value.clone())))
                    .collect(),
            ),
            Tree::List(items) => Node::List(items.iter().cloned().map(Node::Tree).collect()),
            _ => return false,
        };
        *self = opened;
        true
    }
}

/// A node to read, opened or not.
#[derive(Clone, Copy)]
pub(super) enum Doc<'a, 't> {
    Node(&'a Node<'t>),
    Tree(&'a Tree<'t>),
}

/// What a node is, to Go.
pub(super) enum Shape<'a, 't> {
    Nil,
    RawNull,
    Map(Entries<'a, 't>),
    List(Items<'a, 't>),
    Scalar(&'a Tree<'t>),
}

#[derive(Clone, Copy)]
pub(super) enum Entries<'a, 't> {
    Node(&'a [(Cow<'t, str>, Node<'t>)]),
    Tree(&'a Map<'t>),
}

#[derive(Clone, Copy)]
pub(super) enum Items<'a, 't> {
    Node(&'a [Node<'t>]),
    Tree(&'a [Tree<'t>]),
}

impl<'a, 't> Doc<'a, 't> {
    pub fn shape(self) -> Shape<'a, 't> {
        let tree = match self {
            Doc::Node(Node::Tree(tree)) | Doc::Tree(tree) => tree,
            Doc::Node(Node::RawNull) => return Shape::RawNull,
            Doc::Node(Node::Map(entries)) => return Shape::Map(Entries::Node(entries)),
            Doc::Node(Node::List(items)) => return Shape::List(Items::Node(items)),
        };
        match tree.resolved() {
            Tree::Null => Shape::Nil,
            Tree::Map(map) => Shape::Map(Entries::Tree(map)),
            Tree::List(items) => Shape::List(Items::Tree(items)),
            scalar => Shape::Scalar(scalar),
        }
    }
}

impl<'a, 't> Entries<'a, 't> {
    pub fn len(self) -> usize {
        match self {
            Entries::Node(entries) => entries.len(),
            Entries::Tree(map) => map.len(),
        }
    }

    pub fn get(self, key: &str) -> Option<Doc<'a, 't>> {
        match self {
            Entries::Node(entries) => entries
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, value)| Doc::Node(value)),
            Entries::Tree(map) => map.get(key).map(Doc::Tree),
        }
    }

    pub fn entry(self, at: usize) -> (&'a str, Doc<'a, 't>) {
        match self {
            Entries::Node(entries) => (&entries[at].0, Doc::Node(&entries[at].1)),
            Entries::Tree(map) => (&map.entries()[at].0, Doc::Tree(&map.entries()[at].1)),
        }
    }
}

impl<'a, 't> Items<'a, 't> {
    pub fn len(self) -> usize {
        match self {
            Items::Node(items) => items.len(),
            Items::Tree(items) => items.len(),
        }
    }

    pub fn item(self, at: usize) -> Doc<'a, 't> {
        match self {
            Items::Node(items) => Doc::Node(&items[at]),
            Items::Tree(items) => Doc::Tree(&items[at]),
        }
    }
}

/// The path's segments below the root and its last one, decoded: `None` for a path
/// without a `/`. Go drops the first segment unseen (`spec/replicas` is `/replicas`).
fn segments(path: &str) -> Option<(impl Iterator<Item = String> + '_, String)> {
    let (parents, last) = path.rsplit_once('/')?;
    let middle = parents.split('/').skip(1).map(decode);
    Some((middle, decode(last)))
}

/// A segment unescaped as Go's `strings.NewReplacer("~1", "/", "~0", "~")` does it: one
/// pass, left to right.
pub(super) fn decode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    let mut chars = segment.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('~', Some('1')) => {
                chars.next();
                out.push('/');
            }
            ('~', Some('0')) => {
                chars.next();
                out.push('~');
            }
            (c, _) => out.push(c),
        }
    }
    out
}

/// The container `path` names (a map, a list, or an operation's `null` read as an
/// empty map) and the key in it, to read (Go's `findObject`).
pub(super) fn find<'a, 't>(root: &'a Node<'t>, path: &str) -> Option<(Shape<'a, 't>, String)> {
    let (middle, last) = segments(path)?;
    let mut container = Doc::Node(root).shape();
    for segment in middle {
        let next = get(&container, &segment).ok()??;
        container = match next.shape() {
            shape @ (Shape::RawNull | Shape::Map(_) | Shape::List(_)) => shape,
            Shape::Nil | Shape::Scalar(_) => return None,
        };
    }
    Some((container, last))
}

/// The value of `key` in a container found to read: `None` for a key a map does not
/// have (or an operation's `null`); a list's index must be one of its items.
pub(super) fn get<'a, 't>(
    container: &Shape<'a, 't>,
    key: &str,
) -> Result<Option<Doc<'a, 't>>, Cause> {
    match container {
        Shape::Map(entries) => Ok(entries.get(key)),
        Shape::List(items) => Ok(Some(items.item(item_index(key, items.len())?))),
        Shape::RawNull | Shape::Nil | Shape::Scalar(_) => Ok(None),
    }
}

/// A container found to change.
pub(super) enum Container<'a, 't> {
    Map(&'a mut Vec<(Cow<'t, str>, Node<'t>)>),
    List(&'a mut Vec<Node<'t>>),
    /// An operation's `null`, read as a map Go has not made (a nil map).
    Nil,
}

/// The container `path` names and the key in it, with every map and list on the way
/// opened for the change.
pub(super) fn find_mut<'a, 't>(
    root: &'a mut Node<'t>,
    path: &str,
) -> Option<(Container<'a, 't>, String)> {
    let (middle, last) = segments(path)?;
    let mut node = root;
    if !node.open() {
        return None;
    }
    for segment in middle {
        node = match node {
            Node::Map(entries) => &mut entries.iter_mut().find(|(key, _)| *key == segment)?.1,
            Node::List(items) => {
                let at = item_index(&segment, items.len()).ok()?;
                &mut items[at]
            }
            Node::RawNull | Node::Tree(_) => return None,
        };
        if !node.open() {
            return None;
        }
    }
    let container = match node {
        Node::Map(entries) => Container::Map(entries),
        Node::List(items) => Container::List(items),
        Node::RawNull | Node::Tree(_) => Container::Nil,
    };
    Some((container, last))
}

impl<'t> Container<'_, 't> {
    /// Go's `get`: whether `key` names a value (a list checks its index).
    pub fn check(&self, key: &str) -> Result<(), Cause> {
        match self {
            Container::List(items) => item_index(key, items.len()).map(drop),
            Container::Map(_) | Container::Nil => Ok(()),
        }
    }

    /// Go's `add`: a map's key set, or a value inserted into a list (`-` after the last,
    /// `-k` at `len + 1 - k`).
    pub fn add(self, key: String, value: Node<'t>) -> Result<(), Failure> {
        match self {
            Container::Map(entries) => {
                set(entries, key, value);
                Ok(())
            }
            Container::Nil => Err(Failure::Panic(Panic::WriteIntoNull)),
            Container::List(items) if key == "-" => {
                items.push(value);
                Ok(())
            }
            Container::List(items) => {
                let index = atoi(&key).map_err(|atoi| Cause::NotAnIndex { key, atoi })?;
                let slots = i64::try_from(items.len())
                    .unwrap_or(i64::MAX)
                    .saturating_add(1);
                if index >= slots || index < -slots {
                    return Err(Failure::Cause(Cause::InvalidIndex(index)));
                }
                let at = if index < 0 { index + slots } else { index };
                items.insert(usize::try_from(at).unwrap_or_default(), value);
                Ok(())
            }
        }
    }

    /// Go's `set`, for `replace`: the key a `check` found.
    pub fn set(self, key: String, value: Node<'t>) -> Result<(), Failure> {
        match self {
            Container::Map(entries) => {
                set(entries, key, value);
                Ok(())
            }
            Container::Nil => Err(Failure::Panic(Panic::WriteIntoNull)),
            Container::List(items) => {
                let at = item_index(&key, items.len())?;
                items[at] = value;
                Ok(())
            }
        }
    }

    /// Go's `get` then `remove`, for `move`: the value taken out.
    pub fn take(self, key: &str) -> Result<Node<'t>, Cause> {
        match self {
            Container::Map(entries) => {
                let at = entries.iter().position(|(k, _)| k == key);
                let at = at.ok_or_else(|| Cause::NonexistentKey(key.to_string()))?;
                Ok(entries.remove(at).1)
            }
            Container::Nil => Err(Cause::NonexistentKey(key.to_string())),
            Container::List(items) => {
                let at = item_index(key, items.len())?;
                Ok(items.remove(at))
            }
        }
    }

    /// Go's `remove`.
    pub fn remove(self, key: &str) -> Result<(), Cause> {
        match self {
            Container::List(items) => {
                // Go's remove checks the upper bound before making a negative index
                // count from the end.
                let index = atoi(key).map_err(Cause::Atoi)?;
                let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
                if index >= len || index < -len {
                    return Err(Cause::InvalidIndex(index));
                }
                let at = if index < 0 { index + len } else { index };
                items.remove(usize::try_from(at).unwrap_or_default());
                Ok(())
            }
            container => container.take(key).map(drop),
        }
    }
}

fn set<'t>(entries: &mut Vec<(Cow<'t, str>, Node<'t>)>, key: String, value: Node<'t>) {
    match entries.iter_mut().find(|(k, _)| *k == key) {
        Some((_, slot)) => *slot = value,
        None => entries.push((Cow::Owned(key), value)),
    }
}

/// The item a list index names (Go's `partialArray.get`): `-k` counts from the end.
fn item_index(key: &str, len: usize) -> Result<usize, Cause> {
    let index = atoi(key).map_err(Cause::Atoi)?;
    let signed_len = i64::try_from(len).unwrap_or(i64::MAX);
    let at = if index < 0 {
        if index < -signed_len {
            return Err(Cause::InvalidIndex(index));
        }
        index + signed_len
    } else {
        index
    };
    if at >= signed_len {
        return Err(Cause::InvalidIndex(at));
    }
    usize::try_from(at).map_err(|_| Cause::InvalidIndex(at))
}

/// Go's `strconv.Atoi`: an optional sign, then decimal digits (leading zeros and `+`
/// allowed), in the int64 range.
pub(super) fn atoi(key: &str) -> Result<i64, super::Atoi> {
    let error = |out_of_range| super::Atoi {
        input: key.to_string(),
        out_of_range,
    };
    let (negative, digits) = match key.as_bytes().first() {
        Some(b'-') => (true, &key[1..]),
        Some(b'+') => (false, &key[1..]),
        _ => (false, key),
    };
    if digits.is_empty() {
        return Err(error(false));
    }
    let mut value: u64 = 0;
    for byte in digits.bytes() {
        if !byte.is_ascii_digit() {
            return Err(error(false));
        }
        // Go's ParseUint stops with a range error at the digit that overflows.
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(byte - b'0')))
            .ok_or_else(|| error(true))?;
    }
    if negative {
        0i64.checked_sub_unsigned(value).ok_or_else(|| error(true))
    } else {
        i64::try_from(value).map_err(|_| error(true))
    }
}
