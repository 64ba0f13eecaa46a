//! SMD's merge with the rule "keep the right-hand side" (`typed/merge.go`), the live
//! object on the left and the patch on the right, both validated already.
//!
//! SMD rebuilds the whole object; here what the patch does not reach is the live
//! object's own node, shared, and a map or list the patch reaches but does not change
//! is the live node too, so that the diff of the result against the request skips it. A
//! changed map keeps the live map's order, with new keys after it in the patch's order.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use super::atom::{ListAtom, ListRelationship, MapAtom, Side, atom};
use super::keys::{Canon, item_key};
use crate::k8s::schema::TypeRef;
use crate::tree::Tree;

/// The merge of `patch` into `live` as a `ty`.
pub(super) fn merge<'t>(live: Option<&Tree<'t>>, patch: &Tree<'t>, ty: TypeRef<'_>) -> Tree<'t> {
    // SMD handles the pair with the side the patch's value takes; when the live value
    // takes another (an untyped field holding a map on one side and a scalar on the
    // other), handling it with the live side only collects errors, never the result.
    match atom(ty).side(patch) {
        Some(Side::Map(map)) => merge_map(live, patch, map),
        Some(Side::List(list)) => merge_list(live, patch, list),
        Some(Side::Scalar(_)) | None => leaf(live, patch),
    }
}

/// A leaf (scalar, atomic map or list, or empty on both sides) takes the patch's value;
/// the live node stands for it when the two are equal.
fn leaf<'t>(live: Option<&Tree<'t>>, patch: &Tree<'t>) -> Tree<'t> {
    match live {
        Some(live) if live == patch => live.clone(),
        _ => patch.clone(),
    }
}

/// Whether a merged value is the live one: one node, or an equal scalar.
fn unchanged(merged: &Tree<'_>, live: &Tree<'_>) -> bool {
    merged.same(live)
        || match (merged, live) {
            (Tree::Null, Tree::Null) => true,
            (Tree::Bool(a), Tree::Bool(b)) => a == b,
            (Tree::Number(a), Tree::Number(b)) => a == b,
            (Tree::String(a), Tree::String(b)) => a == b,
            _ => false,
        }
}

fn merge_map<'t>(live: Option<&Tree<'t>>, patch: &Tree<'t>, map: MapAtom<'_>) -> Tree<'t> {
    let live_map = live.and_then(Tree::as_map);
    let patch_map = patch.as_map();
    let empty = |map: Option<&crate::tree::Map<'_>>| map.is_none_or(|map| map.is_empty());
    if map.atomic || (empty(live_map) && empty(patch_map)) {
        return leaf(live, patch);
    }
    let (Some(live_map), Some(patch_map)) = (live_map, patch_map) else {
        // One side is a non-empty map and the other none (null, absent, or of another
        // kind in an untyped field): each key merges with nothing and keeps its value.
        return match patch_map {
            Some(_) => patch.clone(),
            None => live.cloned().unwrap_or_default(),
        };
    };
    let mut merged: Option<crate::tree::Map<'t>> = None;
    for (key, patch_value) in patch_map.entries() {
        let value = match live_map.get(key) {
            Some(live_value) => {
                // Validation refused a key without a type; were one here, its live
                // value would stay.
                let Some(ty) = map.value_type(key) else {
                    continue;
                };
                let value = merge(Some(live_value), patch_value, ty);
                if unchanged(&value, live_value) {
                    continue;
                }
                value
            }
            None => patch_value.clone(),
        };
        merged
            .get_or_insert_with(|| live_map.clone())
            .insert(key.clone(), value);
    }
    match (merged, live) {
        (Some(merged), _) => Tree::Map(Arc::new(merged)),
        (None, Some(live)) => live.clone(),
        (None, None) => patch.clone(),
    }
}

fn merge_list<'t>(live: Option<&Tree<'t>>, patch: &Tree<'t>, list: ListAtom<'_>) -> Tree<'t> {
    let live_items = live.and_then(Tree::as_list);
    let patch_items = patch.as_list();
    let empty = |items: Option<&Vec<Tree<'_>>>| items.is_none_or(Vec::is_empty);
    let atomic = matches!(list.relationship, ListRelationship::Atomic);
    if atomic || (empty(live_items) && empty(patch_items)) {
        return leaf(live, patch);
    }
    let Some(patch_items) = patch_items else {
        // A null patch over a non-empty list: every item kept.
        return live.cloned().unwrap_or_default();
    };
    let live_items: &[Tree<'t>] = live_items.map_or(&[], Vec::as_slice);
    let items = merge_items(live_items, patch_items, list);
    let kept = items.len() == live_items.len()
        && items
            .iter()
            .zip(live_items)
            .all(|(item, live)| unchanged(item, live));
    match live {
        Some(live) if kept => live.clone(),
        _ => Tree::List(Arc::new(items)),
    }
}

/// The keys of `items`, each with its index. Both sides were validated, so every item
/// has a key; an item without one would be left out, as SMD's merge leaves it out.
fn keyed<'a>(items: &'a [Tree<'_>], list: &ListAtom<'a>) -> Vec<(Canon<'a>, usize)> {
    items
        .iter()
        .enumerate()
        .filter_map(|(at, item)| Some((item_key(list, item).ok()?.canon(), at)))
        .collect()
}

/// Where a key is in the live list: at one index, or at several (`AllowDuplicates`).
#[derive(Clone, Copy)]
enum Live {
    At(usize),
    Duplicated,
}

/// SMD's `visitListItems`: live items the patch does not name keep their places, items
/// both have come out merged in the patch's order, and an item only the patch has comes
/// just before the next item both have that follows it in the patch, or after all of
/// them. A key the live list has several times comes out once, as the patch's item.
fn merge_items<'t>(live: &[Tree<'t>], patch: &[Tree<'t>], list: ListAtom<'_>) -> Vec<Tree<'t>> {
    let live_keys = keyed(live, &list);
    let patch_keys = keyed(patch, &list);
    let mut in_live: HashMap<&Canon<'_>, Live> = HashMap::with_capacity(live_keys.len());
    for (key, at) in &live_keys {
        in_live
            .entry(key)
            .and_modify(|seen| *seen = Live::Duplicated)
            .or_insert(Live::At(*at));
    }
    let in_patch: HashMap<&Canon<'_>, usize> =
        patch_keys.iter().map(|(key, at)| (key, *at)).collect();
    let mut shared: VecDeque<&Canon<'_>> = patch_keys
        .iter()
        .map(|(key, _)| key)
        .filter(|key| in_live.contains_key(key))
        .collect();
    let mut next_shared = shared.pop_front();
    let mut merged_patch: HashSet<&Canon<'_>> = HashSet::with_capacity(patch_keys.len());
    let mut out = Vec::with_capacity(live_keys.len().max(patch_keys.len()));
    let merge_item = |key: &Canon<'_>, patch_item: &Tree<'t>| -> Tree<'t> {
        match in_live.get(key) {
            Some(Live::At(at)) => merge(Some(&live[*at]), patch_item, list.element),
            // SMD merges the patch's item with a null for a duplicated key.
            Some(Live::Duplicated) => merge(Some(&Tree::Null), patch_item, list.element),
            None => patch_item.clone(),
        }
    };
    let (mut l, mut r) = (0, 0);
    while l < live_keys.len() || r < patch_keys.len() {
        if l < live_keys.len() && r < patch_keys.len() {
            let key = &live_keys[l].0;
            if *key == patch_keys[r].0 {
                merged_patch.insert(key);
                out.push(merge_item(key, &patch[patch_keys[r].1]));
                l += 1;
                r += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if in_patch.contains_key(key) && next_shared.is_some_and(|next| next != key) {
                // A shared item, but not the one the patch's order wants next.
                l += 1;
                continue;
            }
        }
        if l < live_keys.len() {
            let (key, at) = &live_keys[l];
            if !in_patch.contains_key(key) {
                out.push(live[*at].clone());
                l += 1;
                continue;
            } else if merged_patch.contains(key) {
                l += 1;
            }
        }
        if r < patch_keys.len() {
            let (key, at) = &patch_keys[r];
            merged_patch.insert(key);
            out.push(merge_item(key, &patch[*at]));
            r += 1;
            if next_shared == Some(key) {
                next_shared = shared.pop_front();
            }
        }
    }
    out
}
