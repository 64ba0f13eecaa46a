//! The RFC 6902 diff of two trees: the patch `json_patch::diff` gives for their JSON,
//! operation for operation, without looking into what the two share.
//!
//! The walk is `json_patch::diff`'s recursion in its order (a map's keys as the right
//! side lists them, changes and adds, then the left side's keys the right lacks,
//! removes; a list's items paired by index, then the removes at the first unpaired index
//! or the adds), with one shortcut: a pair of nodes that is one shared node, or equal
//! (which a shared node decides at once), is skipped before its path is written. After an
//! edit copies only the path to what it changed, everything beside that path is shared,
//! so the diff of a review's object is as long as the paths its policies wrote. It is
//! `engine/diff.rs`'s walk over `serde_json::Value`, which it replaces when the engine's
//! object becomes a tree.

use std::sync::Arc;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation, ReplaceOperation};

use super::{Map, Tree};

/// The operations that turn `left` into `right`.
pub fn diff(left: &Tree<'_>, right: &Tree<'_>) -> Patch {
    let mut patch = Patch(Vec::new());
    diff_into(left, right, &mut PointerBuf::new(), &mut patch);
    patch
}

fn diff_into(left: &Tree<'_>, right: &Tree<'_>, at: &mut PointerBuf, patch: &mut Patch) {
    if left.same(right) {
        return;
    }
    match (left.resolved(), right.resolved()) {
        (Tree::Map(l), Tree::Map(r)) if !Arc::ptr_eq(l, r) => diff_maps(l, r, at, patch),
        (Tree::List(l), Tree::List(r)) if !Arc::ptr_eq(l, r) => diff_lists(l, r, at, patch),
        (l, r) if l == r => {}
        (_, r) => patch.0.push(PatchOperation::Replace(ReplaceOperation {
            path: at.clone(),
            value: r.to_value(),
        })),
    }
}

fn diff_lists(left: &[Tree<'_>], right: &[Tree<'_>], at: &mut PointerBuf, patch: &mut Patch) {
    let paired = left.len().min(right.len());
    for (index, (l, r)) in left.iter().zip(right).enumerate() {
        if l != r {
            at.push_back(index);
            diff_into(l, r, at, patch);
            at.pop_back();
        }
    }
    for _ in paired..left.len() {
        at.push_back(paired);
        patch
            .0
            .push(PatchOperation::Remove(RemoveOperation { path: at.clone() }));
        at.pop_back();
    }
    for (index, r) in right.iter().enumerate().skip(paired) {
        at.push_back(index);
        patch.0.push(PatchOperation::Add(AddOperation {
            path: at.clone(),
            value: r.to_value(),
        }));
        at.pop_back();
    }
}

fn diff_maps(left: &Map<'_>, right: &Map<'_>, at: &mut PointerBuf, patch: &mut Patch) {
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
            Some(l) if l == r => {}
            Some(l) => {
                at.push_back(&**key);
                diff_into(l, r, at, patch);
                at.pop_back();
            }
            None => {
                at.push_back(&**key);
                patch.0.push(PatchOperation::Add(AddOperation {
                    path: at.clone(),
                    value: r.to_value(),
                }));
                at.pop_back();
            }
        }
    }
    // Every left key was paired with a right key in step: nothing was removed.
    if paired_in_step == left.len() {
        return;
    }
    for key in left.keys() {
        if !right.contains_key(key) {
            at.push_back(key);
            patch
                .0
                .push(PatchOperation::Remove(RemoveOperation { path: at.clone() }));
            at.pop_back();
        }
    }
}
