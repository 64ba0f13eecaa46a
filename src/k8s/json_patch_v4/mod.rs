//! A MutatingAdmissionPolicy's JSONPatch applied as kube-apiserver v1.36.2 applies it:
//! with evanphx/json-patch v4 (`gopkg.in/evanphx/json-patch.v4`, the vendored v4.13.0),
//! which departs from RFC 6902 (graft's own `jsonPatch` mutations keep RFC 6902's
//! all-or-nothing patch, `tree::apply_patch`):
//!
//! - `replace` of a key an object lacks adds it; `remove`, `replace` and `test` take
//!   negative list indices (`-1` is the last item) and `add` inserts at `-k` as at
//!   `len + 1 - k`; an index may be written `+1` or `01`;
//! - a path without a leading `/` loses its first segment (`spec/replicas` is
//!   `/replicas`), and a path without any `/` names nothing;
//! - `add` or `replace` without a value writes `null`; `copy` from a key an object lacks
//!   copies `null`, and `move` from one fails only when it removes it;
//! - `test` of a key an object lacks (or holds `null` at) passes exactly when the
//!   operation has no value, and its failure is not an error: the patch does nothing
//!   ([`Applied::TestFailed`]); scalars are compared as Go writes them, a `null` value
//!   equals `{}`, and a path whose parent is missing is an error;
//! - `copy` adds at most 3 MiB in all ([`COPY_SIZE_LIMIT`], the apiserver's
//!   `JSONPatchMaxCopyBytes`).
//!
//! An operation's own `null` value is not the document's: a path through it resolves,
//! as an empty object, and writing into it panics in Go, as does a `replace` or `test` of
//! the whole document without a value or a `test` that compares a list holding `null`.
//! The apiserver answers those with a 500; here they are [`Error::Internal`]. Operations'
//! `op`, `path` and `from` reach evanphx quoted by Go's `strconv.Quote`, which is not
//! always JSON (a control character other than `\b \f \n \r \t`): such a field does not
//! decode, and the error is the one evanphx gives for it.
//!
//! The result shares every map and list no operation wrote into with the document, and
//! keeps each map's order (a new key last).

mod equal;
mod node;

#[cfg(test)]
mod evanphx_tests;
#[cfg(test)]
mod patcher_tests;
#[cfg(test)]
mod tests;

use std::fmt;

use equal::{Value, equal, json_len};
use node::{Doc, Node, Shape, find, find_mut, get};

use crate::k8s::go_text::quote;
use crate::tree::Tree;

/// The most a patch's `copy` operations may add, in bytes of JSON, in kube-apiserver.
pub const COPY_SIZE_LIMIT: u64 = 3 * 1024 * 1024;

/// One operation, as MAP's patcher builds it from a CEL `JSONPatch`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Operation<'t> {
    pub op: String,
    pub path: String,
    /// `None` when the JSONPatch has none; MAP leaves an empty `from` out too, and so
    /// does [`apply`].
    pub from: Option<String>,
    /// `None` when the JSONPatch has no value; `Some(Tree::Null)` for a `null` one.
    pub value: Option<Tree<'t>>,
}

/// What a patch did.
#[derive(Debug, PartialEq)]
pub enum Applied<'t> {
    /// Every operation applied: the new object.
    Patched(Tree<'t>),
    /// A `test` failed (at this path): the apiserver leaves the object as it was.
    TestFailed { path: String },
}

/// Why a patch could not be applied, worded as evanphx words it (MAP prefixes
/// `JSON Patch: `).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("Unexpected kind: {0}")]
    UnexpectedKind(String),
    #[error("{op} operation failed to decode {field}: {reason}")]
    Decode {
        op: &'static str,
        field: &'static str,
        reason: String,
    },
    #[error("{op} operation does not apply: doc is missing path: \"{path}\": missing value")]
    MissingPath { op: &'static str, path: String },
    #[error("replace operation does not apply: doc is missing path: {path}: missing value")]
    ReplaceMissingPath { path: String },
    #[error("replace operation does not apply: doc is missing key: {path}: missing value")]
    ReplaceMissingKey { path: String },
    #[error("replace operation value must be object or array: %!w(<nil>)")]
    ReplaceDocument,
    #[error("{op} operation does not apply: doc is missing from path: {from}: missing value")]
    MissingFrom { op: &'static str, from: String },
    #[error(
        "{op} operation does not apply: doc is missing destination path: {path}: missing value"
    )]
    MissingDestination { op: &'static str, path: String },
    #[error("test operation does not apply: is missing path: {path}: missing value")]
    TestMissingPath { path: String },
    #[error("error in {op} for path: '{path}': {cause}")]
    Failed {
        op: &'static str,
        path: String,
        cause: Cause,
    },
    #[error("error in copy for from: '{from}': {cause}")]
    CopyFrom { from: String, cause: Cause },
    #[error("error while adding value during copy: {cause}")]
    CopyAdd { cause: Cause },
    #[error(
        "Unable to complete the copy, the accumulated size increase of copy is {accumulated}, exceeding the limit {limit}"
    )]
    CopySize { accumulated: u64, limit: u64 },
    /// The document is a scalar, which evanphx cannot read.
    #[error("json: cannot unmarshal {0} into Go value of type jsonpatch.partialDoc")]
    NotADocument(&'static str),
    /// Where evanphx panics, and the apiserver answers 500.
    #[error("internal error: evanphx/json-patch panics here: {0}")]
    Internal(Panic),
}

/// Why an operation failed on the value it reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Cause {
    #[error("Unable to remove nonexistent key: {0}: missing value")]
    NonexistentKey(String),
    #[error("Unable to access invalid index: {0}: invalid index referenced")]
    InvalidIndex(i64),
    #[error("value was not a proper array index: '{key}': {atoi}")]
    NotAnIndex { key: String, atoi: Atoi },
    #[error("{0}")]
    Atoi(Atoi),
}

/// Go's `strconv.Atoi` error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Atoi {
    pub input: String,
    pub out_of_range: bool,
}

impl fmt::Display for Atoi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reason = if self.out_of_range {
            "value out of range"
        } else {
            "invalid syntax"
        };
        write!(f, "strconv.Atoi: parsing {}: {reason}", quote(&self.input))
    }
}

/// What makes evanphx panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Panic {
    #[error("assignment to entry in nil map (writing into a null an earlier operation added)")]
    WriteIntoNull,
    #[error("nil pointer dereference (a replace or test of the whole document without a value)")]
    NoValue,
    #[error("nil pointer dereference (a test comparing a list that holds null)")]
    NilInTest,
}

/// An operation's failure below the operation's own wording.
#[derive(Debug)]
enum Failure {
    Cause(Cause),
    Panic(Panic),
}

impl From<Cause> for Failure {
    fn from(cause: Cause) -> Self {
        Failure::Cause(cause)
    }
}

/// Applies `operations` to `doc` in order, with the apiserver's copy limit.
pub fn apply<'t>(doc: &Tree<'t>, operations: &[Operation<'t>]) -> Result<Applied<'t>, Error> {
    apply_with_copy_limit(doc, operations, COPY_SIZE_LIMIT)
}

/// Applies `operations` with another limit on what `copy` adds (`0`: none).
pub fn apply_with_copy_limit<'t>(
    doc: &Tree<'t>,
    operations: &[Operation<'t>],
    copy_limit: u64,
) -> Result<Applied<'t>, Error> {
    let mut root = match doc.resolved() {
        Tree::Map(_) | Tree::List(_) => Node::Tree(doc.clone()),
        // Go reads a null document as a nil map.
        Tree::Null => Node::RawNull,
        Tree::Bool(_) => return Err(Error::NotADocument("bool")),
        Tree::Number(_) => return Err(Error::NotADocument("number")),
        Tree::String(_) | Tree::Text(_) => return Err(Error::NotADocument("string")),
    };
    let mut patch = Patch {
        root: &mut root,
        copied: 0,
        copy_limit,
    };
    for operation in operations {
        if let Some(path) = patch.operation(operation)? {
            return Ok(Applied::TestFailed { path });
        }
    }
    Ok(Applied::Patched(root.into_tree()))
}

struct Patch<'r, 't> {
    root: &'r mut Node<'t>,
    copied: u64,
    copy_limit: u64,
}

/// A field as evanphx reads it: Go's `strconv.Quote` of it, decoded as JSON. The text
/// when that is JSON, otherwise the JSON error.
fn decoded(field: &str) -> Result<&str, String> {
    let quoted = quote(field);
    let mut chars = quoted.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            continue;
        }
        match chars.next() {
            Some('"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' | 'u') => {}
            Some(bad) => return Err(format!("invalid character '{bad}' in string escape code")),
            None => {}
        }
    }
    Ok(field)
}

/// An operation's value as the node Go makes of it.
fn value_node<'t>(value: Option<&Tree<'t>>) -> Node<'t> {
    match value {
        None => Node::Tree(Tree::Null),
        Some(Tree::Null) => Node::RawNull,
        Some(value) => Node::Tree(value.clone()),
    }
}

impl<'t> Patch<'_, 't> {
    /// Applies one operation; `Some(path)` when it is a `test` that failed.
    fn operation(&mut self, operation: &Operation<'t>) -> Result<Option<String>, Error> {
        let op = decoded(&operation.op).unwrap_or("unknown");
        let path = decoded(&operation.path);
        // MAP leaves an empty `from` out.
        let from = operation.from.as_deref().filter(|from| !from.is_empty());
        let value = operation.value.as_ref();
        match op {
            "add" => self.add(path.map_err(|_| missing_value("add", "path"))?, value),
            "remove" => self.remove(path.map_err(|_| missing_value("remove", "path"))?),
            "replace" => self.replace(
                path.map_err(|reason| undecodable("replace", "path", reason))?,
                value,
            ),
            "move" => self.move_value(from, path),
            "copy" => self.copy(from, path),
            "test" => {
                return self.test(
                    path.map_err(|reason| undecodable("test", "path", reason))?,
                    value,
                );
            }
            other => Err(Error::UnexpectedKind(other.to_string())),
        }
        .map(|()| None)
    }

    fn add(&mut self, path: &str, value: Option<&Tree<'t>>) -> Result<(), Error> {
        let (container, key) = find_mut(self.root, path).ok_or_else(|| Error::MissingPath {
            op: "add",
            path: path.to_string(),
        })?;
        container
            .add(key, value_node(value))
            .map_err(|failure| failed("add", path, failure))
    }

    fn remove(&mut self, path: &str) -> Result<(), Error> {
        let (container, key) = find_mut(self.root, path).ok_or_else(|| Error::MissingPath {
            op: "remove",
            path: path.to_string(),
        })?;
        container
            .remove(&key)
            .map_err(|cause| failed("remove", path, cause.into()))
    }

    fn replace(&mut self, path: &str, value: Option<&Tree<'t>>) -> Result<(), Error> {
        if path.is_empty() {
            let value = value.ok_or(Error::Internal(Panic::NoValue))?;
            *self.root = match value.resolved() {
                Tree::Null => Node::RawNull,
                Tree::Map(_) | Tree::List(_) => Node::Tree(value.clone()),
                _ => return Err(Error::ReplaceDocument),
            };
            return Ok(());
        }
        let (container, key) =
            find_mut(self.root, path).ok_or_else(|| Error::ReplaceMissingPath {
                path: path.to_string(),
            })?;
        if container.check(&key).is_err() {
            return Err(Error::ReplaceMissingKey {
                path: path.to_string(),
            });
        }
        container
            .set(key, value_node(value))
            .map_err(|failure| failed("remove", path, failure))
    }

    fn move_value(&mut self, from: Option<&str>, path: Result<&str, String>) -> Result<(), Error> {
        let from = from.ok_or_else(|| missing_from("move"))?;
        let from = decoded(from).map_err(|reason| undecodable("move", "from", reason))?;
        let (container, key) = find_mut(self.root, from).ok_or_else(|| Error::MissingFrom {
            op: "move",
            from: from.to_string(),
        })?;
        let value = container.take(&key).map_err(|cause| Error::Failed {
            op: "move",
            path: key.clone(),
            cause,
        })?;
        let path = path.map_err(|reason| undecodable("move", "path", reason))?;
        let (container, key) =
            find_mut(self.root, path).ok_or_else(|| Error::MissingDestination {
                op: "move",
                path: path.to_string(),
            })?;
        container
            .add(key, value)
            .map_err(|failure| failed("move", path, failure))
    }

    fn copy(&mut self, from: Option<&str>, path: Result<&str, String>) -> Result<(), Error> {
        let from = from.ok_or_else(|| missing_from("copy"))?;
        let from = decoded(from).map_err(|reason| undecodable("copy", "from", reason))?;
        let (container, key) = find(self.root, from).ok_or_else(|| Error::MissingFrom {
            op: "copy",
            from: from.to_string(),
        })?;
        let found = get(&container, &key).map_err(|cause| Error::CopyFrom {
            from: from.to_string(),
            cause,
        })?;
        // Go copies a missing or nil value as a nil node, adding nothing to the total.
        let (copy, size) = match found {
            Some(doc) if !matches!(doc.shape(), Shape::Nil) => (
                match doc {
                    Doc::Node(node) => node.copied(),
                    Doc::Tree(tree) => Node::Tree(tree.clone()),
                },
                json_len(doc),
            ),
            _ => (Node::Tree(Tree::Null), 0),
        };
        let path = path.map_err(|_| missing_value("copy", "path"))?;
        let (container, key) =
            find_mut(self.root, path).ok_or_else(|| Error::MissingDestination {
                op: "copy",
                path: path.to_string(),
            })?;
        self.copied = self.copied.saturating_add(size);
        if self.copy_limit > 0 && self.copied > self.copy_limit {
            return Err(Error::CopySize {
                accumulated: self.copied,
                limit: self.copy_limit,
            });
        }
        container.add(key, copy).map_err(|failure| match failure {
            Failure::Cause(cause) => Error::CopyAdd { cause },
            Failure::Panic(panic) => Error::Internal(panic),
        })
    }

    /// `Some(path)` when the test fails.
    fn test(&mut self, path: &str, value: Option<&Tree<'t>>) -> Result<Option<String>, Error> {
        let failed = Some(path.to_string());
        if path.is_empty() {
            let value = value.ok_or(Error::Internal(Panic::NoValue))?;
            let equal = equal(Doc::Node(self.root), Value::top(value)).map_err(Error::Internal)?;
            return Ok(if equal { None } else { failed });
        }
        let (container, key) = find(self.root, path).ok_or_else(|| Error::TestMissingPath {
            path: path.to_string(),
        })?;
        let found = get(&container, &key).map_err(|cause| Error::Failed {
            op: "test",
            path: path.to_string(),
            cause,
        })?;
        let found = found.filter(|doc| !matches!(doc.shape(), Shape::Nil));
        match (found, value) {
            // A missing or nil value passes exactly when the test has no value.
            (None, None) => Ok(None),
            (None, Some(_)) | (Some(_), None) => Ok(failed),
            (Some(doc), Some(value)) => {
                let equal = equal(doc, Value::top(value)).map_err(Error::Internal)?;
                Ok(if equal { None } else { failed })
            }
        }
    }
}

fn missing_value(op: &'static str, field: &'static str) -> Error {
    Error::Decode {
        op,
        field,
        reason: "missing value".to_string(),
    }
}

fn missing_from(op: &'static str) -> Error {
    Error::Decode {
        op,
        field: "from",
        reason: "operation, missing from field: missing value".to_string(),
    }
}

fn undecodable(op: &'static str, field: &'static str, reason: String) -> Error {
    Error::Decode { op, field, reason }
}

fn failed(op: &'static str, path: &str, failure: Failure) -> Error {
    match failure {
        Failure::Cause(cause) => Error::Failed {
            op,
            path: path.to_string(),
            cause,
        },
        Failure::Panic(panic) => Error::Internal(panic),
    }
}
