//! evanphx/json-patch v4's `lazyNode.equal`, which `test` compares with, and the size a
//! `copy` adds (the length of the copied value's JSON).
//!
//! `equal` reads each side as an object first, then as a list, then compares the two
//! JSON texts: so a `null` (read as an empty object, or an empty list) equals `{}`, and
//! an empty list on the document's side equals a `null` value, but not the other way
//! round; scalars are equal when Go writes them alike (`1` and `1.0` are both `1` once
//! the apiserver has encoded them). A nil node (a `null` inside a list) makes Go panic.
//! Go walks an object in its random order; here in the document's, so where an object
//! has both a difference and a list with a null, Go may panic where this says unequal.

use super::Panic;
use super::node::{Doc, Shape};
use crate::k8s::go_text::{GoNumber, json_string_len};
use crate::tree::Tree;

/// The operation's side: its value, whose `null` at the top is a node of text `null`
/// and below it a nil node.
#[derive(Clone, Copy)]
pub(super) struct Value<'a, 't> {
    tree: &'a Tree<'t>,
    top: bool,
}

impl<'a, 't> Value<'a, 't> {
    pub fn top(tree: &'a Tree<'t>) -> Self {
        Value { tree, top: true }
    }

    fn shape(self) -> Shape<'a, 't> {
        match Doc::Tree(self.tree).shape() {
            Shape::Nil if self.top => Shape::RawNull,
            shape => shape,
        }
    }
}

/// Whether `doc` (a node of the document) equals `value`, as Go's `doc.equal(value)`.
pub(super) fn equal(doc: Doc<'_, '_>, value: Value<'_, '_>) -> Result<bool, Panic> {
    let (doc, value) = (doc.shape(), value.shape());
    if matches!(doc, Shape::Nil) || matches!(value, Shape::Nil) {
        return Err(Panic::NilInTest);
    }
    match doc {
        Shape::Scalar(scalar) => {
            Ok(matches!(value, Shape::Scalar(other) if same_text(scalar, other)))
        }
        Shape::RawNull | Shape::Map(_) => {
            let doc_len = match doc {
                Shape::Map(entries) => entries.len(),
                _ => 0,
            };
            let entries = match value {
                Shape::Map(entries) => Some(entries),
                Shape::RawNull => None,
                _ => return Ok(false),
            };
            if doc_len != entries.map_or(0, |e| e.len()) {
                return Ok(false);
            }
            let (Shape::Map(doc_entries), Some(entries)) = (doc, entries) else {
                return Ok(true);
            };
            for at in 0..doc_len {
                let (key, mine) = doc_entries.entry(at);
                let Some(Doc::Tree(theirs)) = entries.get(key) else {
                    return Ok(false);
                };
                let theirs = Value {
                    tree: theirs,
                    top: false,
                };
                match (
                    matches!(mine.shape(), Shape::Nil),
                    matches!(theirs.shape(), Shape::Nil),
                ) {
                    (true, true) => continue,
                    (false, false) => {
                        if !equal(mine, theirs)? {
                            return Ok(false);
                        }
                    }
                    _ => return Ok(false),
                }
            }
            Ok(true)
        }
        Shape::List(items) => {
            let theirs = match value {
                Shape::List(theirs) => Some(theirs),
                Shape::RawNull => None,
                _ => return Ok(false),
            };
            if items.len() != theirs.map_or(0, |t| t.len()) {
                return Ok(false);
            }
            let Some(theirs) = theirs else {
                return Ok(true);
            };
            for at in 0..items.len() {
                let Doc::Tree(other) = theirs.item(at) else {
                    return Ok(false);
                };
                if !equal(
                    items.item(at),
                    Value {
                        tree: other,
                        top: false,
                    },
                )? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        Shape::Nil => Err(Panic::NilInTest),
    }
}

/// Whether Go writes two scalars alike.
fn same_text(a: &Tree<'_>, b: &Tree<'_>) -> bool {
    match (a, b) {
        (Tree::String(a), Tree::String(b)) => a == b,
        (Tree::Bool(a), Tree::Bool(b)) => a == b,
        (Tree::Number(a), Tree::Number(b)) => {
            GoNumber::of(a).to_json() == GoNumber::of(b).to_json()
        }
        _ => false,
    }
}

/// The length of the JSON Go writes for `doc`, which a copy adds to the total it
/// checks against the limit.
pub(super) fn json_len(doc: Doc<'_, '_>) -> u64 {
    match doc.shape() {
        Shape::Nil | Shape::RawNull => 4,
        Shape::Scalar(scalar) => match scalar {
            Tree::Bool(true) => 4,
            Tree::Bool(false) => 5,
            Tree::Number(n) => GoNumber::of(n).to_json().len() as u64,
            Tree::String(s) => json_string_len(s) as u64,
            _ => 4,
        },
        Shape::Map(entries) => {
            let mut len = 1 + entries.len().max(1) as u64;
            for at in 0..entries.len() {
                let (key, value) = entries.entry(at);
                len += json_string_len(key) as u64 + 1 + json_len(value);
            }
            len
        }
        Shape::List(items) => {
            let mut len = 1 + items.len().max(1) as u64;
            for at in 0..items.len() {
                len += json_len(items.item(at));
            }
            len
        }
    }
}
