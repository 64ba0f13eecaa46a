//! RFC 6902 patches applied to a tree, as `json_patch::patch` applies them to a
//! `serde_json::Value`: the same operations succeed and fail, and a patch that fails
//! leaves the tree as it was. json-patch itself only patches a `Value`.
//!
//! A patch is applied to a copy of the tree (one reference count), which replaces the
//! tree only when every operation succeeded; the copy shares all that the patch did not
//! touch.

use json_patch::PatchOperation;

use super::{Tree, list_index, tokens};

/// Why an operation of a patch could not be applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PatchFailure {
    #[error("path does not point to a value the operation can apply to")]
    InvalidPointer,
    #[error("\"from\" does not point to a value")]
    InvalidFromPointer,
    #[error("a value cannot be moved inside itself")]
    CannotMoveInsideItself,
    #[error("the value is not the one the test expects")]
    TestFailed,
}

/// A patch that could not be applied: which operation, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("operation {operation} of the patch (path {path:?}): {failure}")]
pub struct PatchError {
    pub operation: usize,
    pub path: String,
    pub failure: PatchFailure,
}

/// Applies `patch` to `tree`, all of it or (on the first operation that fails) none of it.
pub fn apply(tree: &mut Tree<'_>, patch: &[PatchOperation]) -> Result<(), PatchError> {
    let mut patched = tree.clone();
    for (operation, step) in patch.iter().enumerate() {
        apply_one(&mut patched, step).map_err(|failure| PatchError {
            operation,
            path: target(step).to_string(),
            failure,
        })?;
    }
    *tree = patched;
    Ok(())
}

fn target(operation: &PatchOperation) -> &str {
    match operation {
        PatchOperation::Add(op) => op.path.as_str(),
        PatchOperation::Remove(op) => op.path.as_str(),
        PatchOperation::Replace(op) => op.path.as_str(),
        PatchOperation::Move(op) => op.path.as_str(),
        PatchOperation::Copy(op) => op.path.as_str(),
        PatchOperation::Test(op) => op.path.as_str(),
    }
}

fn apply_one(tree: &mut Tree<'_>, operation: &PatchOperation) -> Result<(), PatchFailure> {
    match operation {
        PatchOperation::Add(op) => add(tree, op.path.as_str(), Tree::from(&op.value)),
        PatchOperation::Remove(op) => remove(tree, op.path.as_str()).map(drop),
        PatchOperation::Replace(op) => {
            let at = tree
                .pointer_mut(op.path.as_str())
                .ok_or(PatchFailure::InvalidPointer)?;
            *at = Tree::from(&op.value);
            Ok(())
        }
        PatchOperation::Move(op) => {
            let (from, path) = (op.from.as_str(), op.path.as_str());
            if path.len() != from.len() && inside(path, from) {
                return Err(PatchFailure::CannotMoveInsideItself);
            }
            let value = remove(tree, from).map_err(|failure| match failure {
                PatchFailure::InvalidPointer => PatchFailure::InvalidFromPointer,
                failure => failure,
            })?;
            add(tree, path, value)
        }
        PatchOperation::Copy(op) => {
            let value = tree
                .pointer(op.from.as_str())
                .ok_or(PatchFailure::InvalidFromPointer)?
                .clone();
            add(tree, op.path.as_str(), value)
        }
        PatchOperation::Test(op) => {
            let found = tree
                .pointer(op.path.as_str())
                .ok_or(PatchFailure::InvalidPointer)?;
            if *found == op.value {
                Ok(())
            } else {
                Err(PatchFailure::TestFailed)
            }
        }
    }
}

/// Whether `path` is `from` or below it, token by token.
fn inside(path: &str, from: &str) -> bool {
    path.starts_with(from)
        && (path.len() == from.len() || path.as_bytes().get(from.len()) == Some(&b'/'))
}

/// The pointer to the parent and the decoded last token; `None` for the root.
fn split_last(path: &str) -> Option<(&str, String)> {
    let at = path.rfind('/')?;
    let last = tokens(&path[at..])?.next()?;
    Some((&path[..at], last))
}

/// Adds `value` at `path`: the whole tree at the root, a key of a map (replaced if there),
/// or an item inserted into a list (`-` after the last).
fn add<'t>(tree: &mut Tree<'t>, path: &str, value: Tree<'t>) -> Result<(), PatchFailure> {
    let Some((parent, last)) = split_last(path) else {
        *tree = value;
        return Ok(());
    };
    let parent = tree
        .pointer_mut(parent)
        .ok_or(PatchFailure::InvalidPointer)?;
    if parent.as_map().is_some() {
        if let Some(map) = parent.map_mut() {
            map.insert(last, value);
        }
        return Ok(());
    }
    let items = parent.list_mut().ok_or(PatchFailure::InvalidPointer)?;
    let index = match last.as_str() {
        "-" => items.len(),
        token => list_index(token)
            .filter(|index| *index <= items.len())
            .ok_or(PatchFailure::InvalidPointer)?,
    };
    items.insert(index, value);
    Ok(())
}

/// Removes the value at `path`, a key of a map or an item of a list, and returns it.
fn remove<'t>(tree: &mut Tree<'t>, path: &str) -> Result<Tree<'t>, PatchFailure> {
    let (parent, last) = split_last(path).ok_or(PatchFailure::InvalidPointer)?;
    let parent = tree
        .pointer_mut(parent)
        .ok_or(PatchFailure::InvalidPointer)?;
    if parent.as_map().is_some() {
        return parent
            .map_mut()
            .and_then(|map| map.remove(&last))
            .ok_or(PatchFailure::InvalidPointer);
    }
    let items = parent.list_mut().ok_or(PatchFailure::InvalidPointer)?;
    let index = list_index(&last)
        .filter(|index| *index < items.len())
        .ok_or(PatchFailure::InvalidPointer)?;
    Ok(items.remove(index))
}
