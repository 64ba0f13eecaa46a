//! The RFC 6902 diff of two trees: the patch `json_patch::diff` gives for their JSON,
//! operation for operation, without looking into what the two share.
//!
//! The walk is `json_patch::diff`'s recursion in its order (a map's keys as the right
//! side lists them, changes and adds, then the left side's keys the right lacks,
//! removes; a list's items paired by index, then the removes at the first unpaired index
//! or the adds), with one shortcut: a pair of nodes that is one shared node is skipped
//! before its path is written. After an edit copies only the path to what it changed,
//! everything beside that path is shared, so the diff of a review's object is as long as
//! the paths its policies wrote. A pair that is not shared is walked, not compared first:
//! comparing a changed map's entries before walking into them read each changed path
//! twice, and an equal pair walks to no operation.

use std::sync::Arc;

use json_patch::jsonptr::{PointerBuf, Token};
use json_patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
use serde::ser::{Serialize, SerializeMap, Serializer};

use super::{Map, Tree};

/// RFC 6902 operations whose values are subtrees of the tree they lead to: a value the
/// diff puts in an operation is that tree's own node, shared, never converted. It
/// serialises as `json_patch::Patch` does, and [`Patch::to_json_patch`] is that patch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Patch<'t>(pub Vec<Operation<'t>>);

/// One operation of a [`Patch`]; the diff writes no others.
#[derive(Clone, Debug, PartialEq)]
pub enum Operation<'t> {
    Add { path: PointerBuf, value: Tree<'t> },
    Remove { path: PointerBuf },
    Replace { path: PointerBuf, value: Tree<'t> },
}

impl Patch<'_> {
    /// The patch as `json_patch`'s operations, their values converted.
    pub fn to_json_patch(&self) -> json_patch::Patch {
        json_patch::Patch(self.0.iter().map(Operation::to_json_patch).collect())
    }

    /// The patch with values free of the text their tree was parsed from, for a patch
    /// kept beyond it (an audited policy's, in the evaluation's report).
    pub fn into_static(self) -> Patch<'static> {
        Patch(self.0.into_iter().map(Operation::into_static).collect())
    }
}

impl Operation<'_> {
    /// The pointer the operation writes at, to change.
    pub fn path_mut(&mut self) -> &mut PointerBuf {
        match self {
            Operation::Add { path, .. }
            | Operation::Remove { path }
            | Operation::Replace { path, .. } => path,
        }
    }

    fn into_static(self) -> Operation<'static> {
        match self {
            Operation::Add { path, value } => Operation::Add {
                path,
                value: value.into_static(),
            },
            Operation::Remove { path } => Operation::Remove { path },
            Operation::Replace { path, value } => Operation::Replace {
                path,
                value: value.into_static(),
            },
        }
    }

    fn to_json_patch(&self) -> PatchOperation {
        match self {
            Operation::Add { path, value } => PatchOperation::Add(AddOperation {
                path: path.clone(),
                value: value.to_value(),
            }),
            Operation::Remove { path } => {
                PatchOperation::Remove(RemoveOperation { path: path.clone() })
            }
            Operation::Replace { path, value } => PatchOperation::Replace(ReplaceOperation {
                path: path.clone(),
                value: value.to_value(),
            }),
        }
    }
}

impl Serialize for Patch<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(&self.0)
    }
}

/// `{"op": ..., "path": ..., "value": ...}`, in `json_patch`'s order.
impl Serialize for Operation<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (op, path, value) = match self {
            Operation::Add { path, value } => ("add", path, Some(value)),
            Operation::Remove { path } => ("remove", path, None),
            Operation::Replace { path, value } => ("replace", path, Some(value)),
        };
        let mut map = serializer.serialize_map(Some(2 + usize::from(value.is_some())))?;
        map.serialize_entry("op", op)?;
        map.serialize_entry("path", path)?;
        if let Some(value) = value {
            map.serialize_entry("value", value)?;
        }
        map.end()
    }
}

/// The operations that turn `left` into `right`.
pub fn diff<'t>(left: &Tree<'t>, right: &Tree<'t>) -> Patch<'t> {
    let mut patch = Patch(Vec::new());
    diff_into(left, right, &mut Vec::new(), &mut patch);
    patch
}

/// Where the walk is, as the tokens of the path to it: a step in is a push and a step
/// out a pop, and only an operation's path is written out as a pointer (`PointerBuf`'s
/// own `pop_back` allocates the token it removes).
type Path<'a> = Vec<Token<'a>>;

fn pointer(at: &Path<'_>) -> PointerBuf {
    // Sized once: `PointerBuf::from_tokens` grows its text a token at a time.
    let length = at.iter().map(|token| 1 + token.encoded().len()).sum();
    let mut text = String::with_capacity(length);
    for token in at {
        text.push('/');
        text.push_str(token.encoded());
    }
    // Encoded tokens after slashes always parse; the fallback only keeps this total.
    PointerBuf::parse(text).unwrap_or_else(|_| PointerBuf::from_tokens(at))
}

fn diff_into<'a, 't>(
    left: &'a Tree<'t>,
    right: &'a Tree<'t>,
    at: &mut Path<'a>,
    patch: &mut Patch<'t>,
) {
    if left.same(right) {
        return;
    }
    match (left.resolved(), right.resolved()) {
        (Tree::Map(l), Tree::Map(r)) if !Arc::ptr_eq(l, r) => diff_maps(l, r, at, patch),
        (Tree::List(l), Tree::List(r)) if !Arc::ptr_eq(l, r) => diff_lists(l, r, at, patch),
        (l, r) if l == r => {}
        (_, _) => patch.0.push(Operation::Replace {
            path: pointer(at),
            value: right.clone(),
        }),
    }
}

fn diff_lists<'a, 't>(
    left: &'a [Tree<'t>],
    right: &'a [Tree<'t>],
    at: &mut Path<'a>,
    patch: &mut Patch<'t>,
) {
    let paired = left.len().min(right.len());
    for (index, (l, r)) in left.iter().zip(right).enumerate() {
        if !l.same(r) {
            at.push(Token::from(index));
            diff_into(l, r, at, patch);
            at.pop();
        }
    }
    for _ in paired..left.len() {
        at.push(Token::from(paired));
        patch.0.push(Operation::Remove { path: pointer(at) });
        at.pop();
    }
    for (index, r) in right.iter().enumerate().skip(paired) {
        at.push(Token::from(index));
        patch.0.push(Operation::Add {
            path: pointer(at),
            value: r.clone(),
        });
        at.pop();
    }
}

fn diff_maps<'a, 't>(
    left: &'a Map<'t>,
    right: &'a Map<'t>,
    at: &mut Path<'a>,
    patch: &mut Patch<'t>,
) {
    let mut in_step = left.entries().iter();
    let mut stepping = true;
    let mut paired_in_step = 0;
    for (key, r) in right.entries() {
        let l = match in_step.next() {
            Some((left_key, l)) if stepping && left_key == key => {
                paired_in_step += 1;
                Some(l)
            }
            _ => {
                stepping = false;
                left.get(key)
            }
        };
        match l {
            Some(l) if l.same(r) => {}
            Some(l) => {
                at.push(Token::new(&**key));
                diff_into(l, r, at, patch);
                at.pop();
            }
            None => {
                at.push(Token::new(&**key));
                patch.0.push(Operation::Add {
                    path: pointer(at),
                    value: r.clone(),
                });
                at.pop();
            }
        }
    }
    // Every left key was paired with a right key in step: nothing was removed.
    if paired_in_step == left.len() {
        return;
    }
    for key in left.keys() {
        if !right.contains_key(key) {
            at.push(Token::new(key));
            patch.0.push(Operation::Remove { path: pointer(at) });
            at.pop();
        }
    }
}
