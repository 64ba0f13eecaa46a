//! What an evaluation changed, and what was there before: the one record behind the
//! patch, the rollback of a failed or audited policy, and the original object of a
//! denied request.
//!
//! The object is the request's own, edited in place; nothing copies it whole. Before
//! every write the [`super::edit::Editor`] records the location as the object keys
//! leading to it, and the first record under a location keeps a copy of the value
//! there (its snapshot) while it is still as the running policy found it. A list that
//! writes only append to keeps its length instead ([`Before::ListOf`]): its earlier
//! items are copied only when another write is about to reach them. The running
//! policy's records (`open`) then give everything per policy:
//! - [`Journal::rollback`] puts its snapshots back, in place;
//! - [`Journal::changed`] compares them with the object, so "applied" is exact;
//! - [`Journal::open_patch`] is its own patch (audit mode);
//! - [`Journal::commit`] moves them into the review's records (`committed`), where a
//!   location keeps its first snapshot: the value the request came with.
//!
//! [`Journal::patch`] hands `json_patch::diff`'s recursion (`diff.rs`) each committed
//! snapshot and the current value, walking the levels above them in the order
//! `json_patch::diff` does, so the patch is the one the full diff of the original and
//! the mutated object gives (a property test holds the two equal), over the written
//! subtrees only.
//!
//! The maps above the snapshots keep their keys' order without a copy of the keys: a
//! write changes a key in place or adds it last, so the earlier keys are the current
//! ones less the added ones, until a key is removed. A removal is recorded as one
//! ([`Journal::record_removal`]; any raw JSON Patch operation counts as one), and the
//! first removal from a map copies its earlier keys, for the order of the patch's
//! removes and of a rolled-back map.
//!
//! Invariant: nothing writes to the object except the `Editor`, which records each
//! location first, and each removal as a removal. A recorded location is cut at the
//! first value that is missing or not a map, so every write lands at or below a
//! recorded location.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation};
use serde_json::{Map, Value};

use crate::jsonpath::Token;
use crate::jsonpath::lookup::{self, field, field_mut};

/// Keys deeper than this are not told apart: the subtree is kept and diffed whole.
/// Three keys reach a single annotation, label or nodeSelector entry.
const MAX_DEPTH: usize = 3;

/// The changes of one evaluation: those of the policies that kept theirs, and those of
/// the running policy.
#[derive(Debug, Default)]
pub struct Journal {
    /// Every location a committed policy wrote, with the value the request came with.
    committed: Node,
    /// Every location the running policy wrote, with the value it found there.
    open: Node,
}

#[derive(Debug, Default)]
struct Node {
    /// Set once anything at or below this location is written: what was here before.
    /// Nodes below a snapshot are not kept.
    snapshot: Option<Before>,
    /// Above a snapshot, once a key of this map is removed: the earlier map's keys, in
    /// order, for the order of removes and of a restored map. Until then the earlier
    /// keys are the current ones less those written where there was nothing
    /// ([`Node::earlier_keys`]): a write changes a key in place or adds it last, so
    /// the keys are copied only when the first removal would lose a key's place.
    keys: Option<Vec<String>>,
    children: Vec<(String, Node)>,
}

/// What a location held before the writes recorded under it.
#[derive(Debug)]
enum Before {
    /// This value (`None`: absent).
    Value(Option<Value>),
    /// A list that writes have only appended to so far: its first items, this many,
    /// are the earlier list, untouched. A sidecar merged into `containers` costs no
    /// copy of the containers; the first other write copies these items.
    ListOf(usize),
}

impl Before {
    /// The earlier value, given the `current` value of the location.
    fn value(&self, current: Option<&Value>) -> Option<Value> {
        match self {
            Before::Value(value) => value.clone(),
            Before::ListOf(len) => Some(Value::Array(
                current
                    .and_then(Value::as_array)
                    .map(|items| items[..(*len).min(items.len())].to_vec())
                    .unwrap_or_default(),
            )),
        }
    }
}

/// The index of the item a write at `at` adds or sets in the list its `keys` leading
/// keys name, when that item is all the write touches.
fn item_index(at: &[Token], keys: usize) -> Option<i64> {
    match at.get(keys..)? {
        [Token::Index(index)] => Some(*index),
        _ => None,
    }
}

/// Whether a write of the item at `index` only appends to `list`: the index is its
/// length, so its items stay as they are.
fn appends_to(list: Option<&Value>, index: Option<i64>) -> bool {
    let len = list.and_then(Value::as_array).map(Vec::len);
    index.is_some_and(|index| len.is_some_and(|len| i64::try_from(len) == Ok(index)))
}

impl Node {
    fn child(&self, key: &str) -> Option<&Node> {
        self.children
            .iter()
            .find_map(|(name, node)| (name == key).then_some(node))
    }

    fn child_mut(&mut self, key: &str) -> &mut Node {
        let index = match self.children.iter().position(|(name, _)| name == key) {
            Some(index) => index,
            None => {
                self.children.push((key.to_string(), Node::default()));
                self.children.len() - 1
            }
        };
        &mut self.children[index].1
    }

    /// Whether `key` was absent before the writes recorded here.
    fn added(&self, key: &str) -> bool {
        self.child(key)
            .is_some_and(|child| matches!(child.snapshot, Some(Before::Value(None))))
    }

    /// The earlier keys of this location's map, in order, given its `current` map.
    fn earlier_keys<'m>(&'m self, current: &'m Map<String, Value>) -> Vec<&'m str> {
        match &self.keys {
            Some(keys) => keys.iter().map(String::as_str).collect(),
            None => current
                .keys()
                .map(String::as_str)
                .filter(|key| !self.added(key))
                .collect(),
        }
    }

    fn is_empty(&self) -> bool {
        self.snapshot.is_none() && self.children.is_empty()
    }

    /// Whether a write recorded here may have changed anything at or under `keys`.
    fn intersects<'k>(&self, keys: impl IntoIterator<Item = &'k str>) -> bool {
        let mut node = self;
        for key in keys {
            if node.snapshot.is_some() {
                return true;
            }
            match node.child(key) {
                Some(child) => node = child,
                None => return false,
            }
        }
        !node.is_empty()
    }

    /// The earlier value of this location, given its `current` value.
    fn original(&self, current: Option<&Value>) -> Option<Value> {
        if let Some(before) = &self.snapshot {
            return before.value(current);
        }
        // Above a snapshot the value is a map that was never written as a whole: its
        // untouched keys are as they were, the touched ones come from below.
        let Some(Value::Object(map)) = current else {
            return current.cloned();
        };
        if self.children.is_empty() {
            return current.cloned();
        }
        let mut original = Map::new();
        for key in self.earlier_keys(map) {
            let value = match self.child(key) {
                Some(child) => child.original(field(map, key)),
                None => field(map, key).cloned(),
            };
            if let Some(value) = value {
                original.insert(key.to_string(), value);
            }
        }
        Some(Value::Object(original))
    }

    /// Records a write under `keys` into `object`, before it is made; `append` is the
    /// index of an item the write adds to the list at `keys`, if that is all it does,
    /// and `removes` whether the write may remove the key at `keys` from its map.
    fn record(&mut self, object: &Value, keys: &[&str], append: Option<i64>, removes: bool) {
        let whole = keys.len();
        // Cut at the first value that is missing (the write creates it) or not a map
        // (the write replaces it): below that, the earlier value has nothing to keep apart.
        let keys = &keys[..keys.len().min(MAX_DEPTH)];
        let mut depth = 0;
        let mut value = object;
        while depth < keys.len() {
            let Value::Object(map) = value else { break };
            depth += 1;
            match field(map, keys[depth - 1]) {
                Some(child) => value = child,
                None => break,
            }
        }
        let mut node = self;
        let mut current = Some(object);
        for (at, key) in keys[..depth].iter().enumerate() {
            if node.snapshot.is_some() {
                return;
            }
            if removes
                && at + 1 == whole
                && node.keys.is_none()
                && let Some(Value::Object(map)) = current
            {
                // The first removal from this map: its earlier keys, while each is in place.
                let earlier = node.earlier_keys(map).into_iter().map(str::to_owned);
                node.keys = Some(earlier.collect());
            }
            current = current.and_then(|value| lookup::child(value, key));
            node = node.child_mut(key);
        }
        let appended = depth == whole && appends_to(current, append);
        match node.snapshot {
            Some(Before::ListOf(_)) if appended => return,
            // Another write reaches the list's earlier items: keep them apart now.
            Some(Before::ListOf(_)) => {
                node.snapshot = Some(Before::Value(node.original(current)));
                return;
            }
            Some(Before::Value(_)) => return,
            None => {}
        }
        node.snapshot = Some(match current.and_then(Value::as_array) {
            Some(items) if appended && node.children.is_empty() => Before::ListOf(items.len()),
            _ => Before::Value(node.original(current)),
        });
        node.children = Vec::new();
        node.keys = None;
    }

    /// Before a write under `keys`: a list recorded here as only appended to keeps its
    /// earlier items apart, unless the write only appends to it too. Earlier records
    /// (`committed`) need this where a later write reaches into such a list.
    fn settle(&mut self, object: &Value, keys: &[&str], append: Option<i64>) {
        let mut node = self;
        let mut current = Some(object);
        let mut depth = 0;
        loop {
            match node.snapshot {
                Some(Before::ListOf(_)) => {
                    if !(depth == keys.len() && appends_to(current, append)) {
                        node.snapshot = Some(Before::Value(node.original(current)));
                    }
                    return;
                }
                Some(Before::Value(_)) => return,
                None => {}
            }
            let Some(key) = keys.get(depth) else {
                // The write replaces this location: it reaches every list below it too.
                node.settle_below(current);
                return;
            };
            let Some((_, child)) = node.children.iter_mut().find(|(name, _)| name == key) else {
                return;
            };
            node = child;
            current = current.and_then(|value| lookup::child(value, key));
            depth += 1;
        }
    }

    /// Every list below this location recorded as only appended to keeps its earlier
    /// items apart, from `current`, the location's value before a write replaces it.
    fn settle_below(&mut self, current: Option<&Value>) {
        for (key, child) in &mut self.children {
            let below = current.and_then(|value| lookup::child(value, key));
            match child.snapshot {
                Some(Before::ListOf(_)) => {
                    child.snapshot = Some(Before::Value(child.original(below)));
                }
                Some(Before::Value(_)) => {}
                None => child.settle_below(below),
            }
        }
    }

    /// Folds `later`, records made after this node's, into this node: where this node
    /// has no snapshot yet, `later`'s snapshot (the value before the later writes) with
    /// this node's own records put back is the earlier value.
    fn absorb(&mut self, later: Node) {
        if self.snapshot.is_some() {
            return;
        }
        if let Some(before) = later.snapshot {
            let earlier = match before {
                before if self.children.is_empty() => before,
                Before::Value(before) => Before::Value(self.original(before.as_ref())),
                // Not reached: records below here saw a map, and the write that made it
                // a list was recorded here or above, before the later ones.
                list @ Before::ListOf(_) => list,
            };
            self.snapshot = Some(earlier);
            self.children = Vec::new();
            self.keys = None;
            return;
        }
        if self.keys.is_none()
            && let Some(later_keys) = later.keys
        {
            // Nothing earlier was removed here: the keys the later records started
            // from are the earlier ones and those this node's records added.
            let earlier = later_keys.into_iter().filter(|key| !self.added(key));
            self.keys = Some(earlier.collect());
        }
        for (key, child) in later.children {
            self.child_mut(&key).absorb(child);
        }
    }

    /// Whether the current value differs from the recorded one anywhere.
    fn changed(&self, current: Option<&Value>) -> bool {
        match &self.snapshot {
            Some(Before::Value(before)) => return before.as_ref() != current,
            Some(Before::ListOf(len)) => {
                return current
                    .and_then(Value::as_array)
                    .is_none_or(|items| items.len() != *len);
            }
            None => {}
        }
        let Some(Value::Object(map)) = current else {
            return !self.children.is_empty();
        };
        self.children
            .iter()
            .any(|(key, child)| child.changed(field(map, key)))
    }

    /// Puts the recorded values back into `value`, the value at this node's location.
    fn restore(self, value: &mut Value) {
        match self.snapshot {
            Some(Before::Value(before)) => {
                *value = before.unwrap_or(Value::Null);
                return;
            }
            Some(Before::ListOf(len)) => {
                if let Value::Array(items) = value {
                    items.truncate(len);
                }
                return;
            }
            None => {}
        }
        if self.children.is_empty() {
            return;
        }
        let Value::Object(map) = value else {
            // Not reached while the invariant holds: a map above a snapshot stays a map.
            return;
        };
        for (key, child) in self.children {
            match child.snapshot {
                Some(Before::Value(Some(before))) => {
                    map.insert(key, before);
                }
                Some(Before::Value(None)) => {
                    map.shift_remove(&key);
                }
                Some(Before::ListOf(_)) | None => {
                    if let Some(value) = field_mut(map, &key) {
                        child.restore(value);
                    }
                }
            }
        }
        // A removed key inserted again goes last: put the keys back in their order.
        // Without a removal every key is still in its place.
        let Some(keys) = &self.keys else { return };
        if !map.keys().eq(keys.iter()) {
            let mut unordered = std::mem::take(map);
            for key in keys {
                if let Some(value) = unordered.swap_remove(key) {
                    map.insert(key.clone(), value);
                }
            }
            map.extend(unordered);
        }
    }
}

/// The leading object keys of a location: a list index ends them, so a write into a
/// list marks the whole list.
fn leading_keys(at: &[Token]) -> Vec<&str> {
    at.iter()
        .map_while(|token| match token {
            Token::Key(key) => Some(key.as_str()),
            Token::Index(_) => None,
        })
        .collect()
}

impl Journal {
    /// Nothing written yet.
    pub fn new() -> Journal {
        Journal::default()
    }

    /// Records a write at `at` into `object`, before it is made. The subtree under
    /// the leading object keys (at most [`MAX_DEPTH`]) counts as changed.
    pub fn record(&mut self, object: &Value, at: &[Token]) {
        self.record_write(object, at, false);
    }

    /// Records the removal of the value at `at` from `object`, before it is made.
    pub fn record_removal(&mut self, object: &Value, at: &[Token]) {
        self.record_write(object, at, true);
    }

    fn record_write(&mut self, object: &Value, at: &[Token], removes: bool) {
        let keys = leading_keys(at);
        let item = item_index(at, keys.len());
        self.committed.settle(object, &keys, item);
        self.open.record(object, &keys, item, removes);
    }

    /// Records the locations a raw JSON Patch operation reads from or writes to. Its
    /// tokens are taken as keys: where one is really a list index, the value above it
    /// is a list, which cuts the location there.
    pub fn record_operation(&mut self, object: &Value, operation: &PatchOperation) {
        let pointers: [Option<&PointerBuf>; 2] = match operation {
            PatchOperation::Add(op) => [Some(&op.path), None],
            PatchOperation::Remove(op) => [Some(&op.path), None],
            PatchOperation::Replace(op) => [Some(&op.path), None],
            PatchOperation::Move(op) => [Some(&op.path), Some(&op.from)],
            PatchOperation::Copy(op) => [Some(&op.path), None],
            PatchOperation::Test(_) => [None, None],
        };
        for pointer in pointers.into_iter().flatten() {
            let keys: Vec<String> = pointer
                .tokens()
                .map(|token| token.decoded().into_owned())
                .collect();
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            self.committed.settle(object, &keys, None);
            // Any operation may move or remove keys (serde_json's `remove`, which
            // json_patch uses, moves the last key into the removed one's place).
            self.open.record(object, &keys, None, true);
        }
    }

    /// Whether the running policy's writes changed `object`.
    pub fn changed(&self, object: &Value) -> bool {
        self.open.changed(Some(object))
    }

    /// The running policy's own patch: the operations its writes make to the object
    /// as it found it.
    pub fn open_patch(&self, object: &Value) -> Patch {
        patch_of(&self.open, object)
    }

    /// Keeps the running policy's writes.
    pub fn commit(&mut self) {
        let open = std::mem::take(&mut self.open);
        self.committed.absorb(open);
    }

    /// Undoes the running policy's writes: `object` is as the policy found it.
    pub fn rollback(&mut self, object: &mut Value) {
        std::mem::take(&mut self.open).restore(object);
    }

    /// Undoes every write: `object` is as the request came.
    pub fn rollback_all(&mut self, object: &mut Value) {
        self.rollback(object);
        std::mem::take(&mut self.committed).restore(object);
    }

    /// The object as the request came, without changing `object`.
    pub fn original(&self, object: &Value) -> Value {
        let open = self.open.original(Some(object));
        self.committed
            .original(open.as_ref())
            .unwrap_or(Value::Null)
    }

    /// The object as the running policy found it, without changing `object`.
    pub fn found(&self, object: &Value) -> Value {
        self.open.original(Some(object)).unwrap_or(Value::Null)
    }

    /// Whether a committed write may have changed anything at or under the location
    /// named by `keys`.
    pub fn intersects<'k>(&self, keys: impl IntoIterator<Item = &'k str>) -> bool {
        self.committed.intersects(keys)
    }

    /// Whether a write of the running policy may have changed anything at or under the
    /// location named by `keys`.
    pub fn open_intersects<'k>(&self, keys: impl IntoIterator<Item = &'k str>) -> bool {
        self.open.intersects(keys)
    }

    /// `json_patch::diff(original, object)`, where `object` is the object the
    /// committed writes were made to.
    pub fn patch(&self, object: &Value) -> Patch {
        patch_of(&self.committed, object)
    }
}

fn patch_of(node: &Node, object: &Value) -> Patch {
    let mut patch = Patch(Vec::new());
    diff_node(node, object, &mut PointerBuf::new(), &mut patch);
    patch
}

fn diff_node(node: &Node, current: &Value, at: &mut PointerBuf, patch: &mut Patch) {
    match &node.snapshot {
        Some(Before::Value(Some(original))) => {
            return super::diff::diff_into(original, current, at, patch);
        }
        Some(Before::Value(None)) => {
            return patch.0.push(PatchOperation::Add(AddOperation {
                path: at.clone(),
                value: current.clone(),
            }));
        }
        // The earlier items are as they were: what json_patch::diff gives is an add
        // for each item after them.
        Some(Before::ListOf(len)) => {
            let Value::Array(items) = current else {
                // Not reached while the invariant holds; the full diff is still right.
                let original = node.original(Some(current)).unwrap_or(Value::Null);
                return super::diff::diff_into(&original, current, at, patch);
            };
            for (index, item) in items.iter().enumerate().skip(*len) {
                at.push_back(index);
                patch.0.push(PatchOperation::Add(AddOperation {
                    path: at.clone(),
                    value: item.clone(),
                }));
                at.pop_back();
            }
            return;
        }
        None => {}
    }
    if node.children.is_empty() {
        return;
    }
    let Value::Object(map) = current else {
        // Not reached while the invariant holds; the full diff is still right.
        let original = node.original(Some(current)).unwrap_or(Value::Null);
        return super::diff::diff_into(&original, current, at, patch);
    };
    // Same order as json_patch::diff: keys of the current map (adds and changes), then
    // keys only in the original (removes), in original order.
    for (key, value) in map {
        if let Some(child) = node.child(key) {
            at.push_back(key.as_str());
            diff_node(child, value, at, patch);
            at.pop_back();
        }
    }
    // Without a removal recorded here no earlier key is missing.
    for key in node.keys.iter().flatten() {
        if field(map, key).is_none()
            && node
                .child(key)
                .is_some_and(|child| child.original(None).is_some())
        {
            at.push_back(key.as_str());
            patch
                .0
                .push(PatchOperation::Remove(RemoveOperation { path: at.clone() }));
            at.pop_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::edit::Editor;
    use super::*;
    use serde_json::json;

    fn key_path(keys: &[&str]) -> Vec<Token> {
        keys.iter()
            .map(|key| Token::Key((*key).to_string()))
            .collect()
    }

    #[test]
    fn nothing_recorded_gives_an_empty_patch() {
        let patch = Journal::new().patch(&json!({"a": 1}));
        assert!(patch.0.is_empty());
    }

    #[test]
    fn recorded_subtrees_give_the_full_diff() {
        let left = json!({
            "metadata": {"name": "p", "labels": {"a": "1", "gone": "x"}},
            "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n"}
        });
        let right = json!({
            "metadata": {"name": "p", "labels": {"a": "2", "new": "y"}, "annotations": {"k/v": "~"}},
            "spec": {"containers": [{"name": "c", "image": "j"}, {"name": "d"}], "nodeName": "n"}
        });
        let mut journal = Journal::new();
        journal.record(&left, &key_path(&["metadata", "labels", "a"]));
        journal.record_removal(&left, &key_path(&["metadata", "labels", "gone"]));
        journal.record(&left, &key_path(&["metadata", "labels", "new"]));
        journal.record(&left, &key_path(&["metadata", "annotations", "k/v"]));
        journal.record(
            &left,
            &[
                Token::Key("spec".into()),
                Token::Key("containers".into()),
                Token::Index(0),
                Token::Key("image".into()),
            ],
        );
        journal.commit();
        assert_eq!(journal.patch(&right), json_patch::diff(&left, &right));
    }

    #[test]
    fn a_shorter_record_covers_deeper_ones() {
        let left = json!({"spec": {"a": {"b": 1}, "c": 1}});
        let right = json!({"spec": {"a": {"b": 2}, "c": 2}});
        let mut journal = Journal::new();
        journal.record(&left, &key_path(&["spec", "a", "b"]));
        journal.record(&left, &key_path(&["spec"]));
        journal.record(&left, &key_path(&["spec", "a"]));
        journal.commit();
        assert_eq!(journal.patch(&right), json_patch::diff(&left, &right));
    }

    #[test]
    fn raw_patch_operations_record_both_ends_of_a_move() {
        let left = json!({"metadata": {"labels": {"a": "1"}}, "spec": {}});
        let right = json!({"metadata": {"labels": {}}, "spec": {"a": "1"}});
        let operation: PatchOperation = serde_json::from_value(
            json!({"op": "move", "from": "/metadata/labels/a", "path": "/spec/a"}),
        )
        .unwrap();
        let mut journal = Journal::new();
        journal.record_operation(&left, &operation);
        journal.commit();
        assert_eq!(journal.patch(&right), json_patch::diff(&left, &right));
    }

    #[test]
    fn a_merge_records_only_where_it_writes() {
        let left = json!({"metadata": {"name": "p", "annotations": {"a": "1"}}, "spec": "text"});
        let fragment = json!({
            "metadata": {"annotations": {"a": null, "b": "2"}},
            "spec": {"containers": [{"name": "c"}]}
        });
        let mut object = left.clone();
        let mut journal = Journal::new();
        Editor::new(&mut object, &mut journal)
            .merge(&[], fragment)
            .unwrap();
        assert!(!journal.open.child("metadata").unwrap().children.is_empty());
        assert!(journal.open.child("metadata").unwrap().snapshot.is_none());
        journal.commit();
        assert_eq!(journal.patch(&object), json_patch::diff(&left, &object));
        assert_eq!(journal.original(&object), left);
    }

    /// Every kind of edit, rolled back: the object is as it was, keys in their order.
    #[test]
    fn rollback_restores_every_kind_of_edit_in_place() {
        let before = json!({
            "metadata": {"labels": {"x": "1", "y": "2"}, "name": "p"},
            "spec": {"containers": [{"name": "app", "image": "a"}], "volumes": [{"name": "v"}]}
        });
        let mut object = before.clone();
        let mut journal = Journal::new();
        let mut editor = Editor::new(&mut object, &mut journal);
        editor
            .set(&key_path(&["metadata", "labels", "x"]), json!("2"))
            .unwrap();
        editor.remove(&key_path(&["metadata", "labels", "y"]));
        editor.remove(&key_path(&["metadata", "labels"]));
        editor
            .set(&key_path(&["metadata", "annotations", "n"]), json!("v"))
            .unwrap();
        editor.remove(&[
            Token::Key("spec".into()),
            Token::Key("volumes".into()),
            Token::Index(0),
        ]);
        editor
            .merge(
                &[],
                json!({"spec": {"containers": [{"name": "app", "image": "b"}, {"name": "side"}]}}),
            )
            .unwrap();
        editor
            .json_patch(
                &serde_json::from_value(json!([
                    {"op": "add", "path": "/kind", "value": "Pod"},
                    {"op": "move", "from": "/metadata/name", "path": "/spec/name"}
                ]))
                .unwrap(),
            )
            .unwrap();
        assert!(journal.changed(&object));
        assert_eq!(
            journal.open_patch(&object),
            json_patch::diff(&before, &object)
        );
        journal.rollback(&mut object);
        assert_eq!(object, before);
        assert_eq!(
            serde_json::to_string(&object).unwrap(),
            serde_json::to_string(&before).unwrap(),
            "keys in their original order"
        );
        assert!(!journal.changed(&object));
        journal.commit();
        assert!(journal.patch(&object).0.is_empty());
    }

    /// A rolled-back policy leaves the committed ones' writes; rolling back all of them
    /// gives the request's object.
    #[test]
    fn rollback_keeps_committed_writes_and_rollback_all_drops_them() {
        let before = json!({"metadata": {"labels": {"a": "1"}}});
        let mut object = before.clone();
        let mut journal = Journal::new();
        Editor::new(&mut object, &mut journal)
            .set(&key_path(&["metadata", "labels", "a"]), json!("2"))
            .unwrap();
        journal.commit();
        let committed = object.clone();
        Editor::new(&mut object, &mut journal)
            .set(&key_path(&["metadata", "labels", "a"]), json!("3"))
            .unwrap();
        assert_eq!(
            journal.open_patch(&object),
            json_patch::diff(&committed, &object),
            "the open patch starts where the committed writes left the object"
        );
        journal.rollback(&mut object);
        assert_eq!(object, committed);
        assert_eq!(journal.patch(&object), json_patch::diff(&before, &object));
        journal.rollback_all(&mut object);
        assert_eq!(object, before);
    }

    /// The earlier keys of a map are copied at its first removal, which may come in a
    /// later policy than the first write: additions before it are told apart, and
    /// every view of the earlier object keeps the keys' order.
    #[test]
    fn a_removal_after_committed_additions_keeps_the_earlier_order() {
        let before = json!({"metadata": {"labels": {"a": "1", "b": "2", "c": "3"}}});
        let labels = |key: &str| key_path(&["metadata", "labels", key]);
        for roll_back_the_second in [false, true] {
            let mut object = before.clone();
            let mut journal = Journal::new();
            let mut editor = Editor::new(&mut object, &mut journal);
            editor.set(&labels("added"), json!("x")).unwrap();
            editor.set(&labels("b"), json!("changed")).unwrap();
            journal.commit();
            let committed = object.clone();
            let mut editor = Editor::new(&mut object, &mut journal);
            editor.remove(&labels("a"));
            editor.set(&labels("later"), json!("y")).unwrap();
            editor.set(&labels("a"), json!("back")).unwrap();
            editor.remove(&labels("added"));
            if roll_back_the_second {
                journal.rollback(&mut object);
                assert_eq!(
                    serde_json::to_string(&object).unwrap(),
                    serde_json::to_string(&committed).unwrap()
                );
            }
            journal.commit();
            assert_eq!(journal.patch(&object), json_patch::diff(&before, &object));
            let original = journal.original(&object);
            assert_eq!(
                serde_json::to_string(&original).unwrap(),
                serde_json::to_string(&before).unwrap()
            );
            journal.rollback_all(&mut object);
            assert_eq!(
                serde_json::to_string(&object).unwrap(),
                serde_json::to_string(&before).unwrap()
            );
        }
    }

    /// A list a committed policy only appended to keeps its earlier items apart when a
    /// later policy replaces a location above it, before the later policy's writes.
    #[test]
    fn replacing_above_an_appended_list_keeps_its_earlier_items() {
        let before = json!({"spec": {"tolerations": ["t1"]}});
        let tolerations = key_path(&["spec", "tolerations"]);
        for roll_back_the_second in [false, true] {
            let mut object = before.clone();
            let mut journal = Journal::new();
            Editor::new(&mut object, &mut journal)
                .append(
                    &tolerations,
                    vec![json!("t2")],
                    crate::policy::model::Position::Last,
                )
                .unwrap();
            journal.commit();
            let committed = object.clone();
            let mut editor = Editor::new(&mut object, &mut journal);
            editor
                .set(&key_path(&["spec"]), json!({"tolerations": ["u1", "u2"]}))
                .unwrap();
            let mut item = tolerations.clone();
            item.push(Token::Index(1));
            editor.remove(&item);
            if roll_back_the_second {
                journal.rollback(&mut object);
                assert_eq!(object, committed);
            }
            journal.commit();
            assert_eq!(journal.patch(&object), json_patch::diff(&before, &object));
            assert_eq!(journal.original(&object), before);
            journal.rollback_all(&mut object);
            assert_eq!(object, before);
        }
    }

    /// Writing a value and then the old value back is no change.
    #[test]
    fn changed_compares_with_what_the_policy_found() {
        let mut object = json!({"metadata": {"labels": {"a": "1"}}});
        let mut journal = Journal::new();
        let mut editor = Editor::new(&mut object, &mut journal);
        editor
            .set(&key_path(&["metadata", "labels", "a"]), json!("2"))
            .unwrap();
        editor
            .set(&key_path(&["metadata", "labels", "a"]), json!("1"))
            .unwrap();
        assert!(!journal.changed(&object));
        assert!(journal.open_patch(&object).0.is_empty());
    }

    #[test]
    fn a_later_record_above_earlier_writes_keeps_the_original() {
        let original = json!({"spec": {"a": {"b": 1}, "c": 1, "d": 1}});
        let mut object = original.clone();
        let mut journal = Journal::new();
        journal.record(&object, &key_path(&["spec", "a", "b"]));
        object["spec"]["a"]["b"] = json!(2);
        journal.record_removal(&object, &key_path(&["spec", "c"]));
        object["spec"].as_object_mut().unwrap().shift_remove("c");
        journal.record(&object, &key_path(&["spec", "e"]));
        object["spec"]["e"] = json!(5);
        journal.commit();
        assert_eq!(journal.original(&object), original);
        assert_eq!(journal.patch(&object), json_patch::diff(&original, &object));

        journal.record(&object, &key_path(&["spec"]));
        object["spec"] = json!("replaced");
        journal.commit();
        assert_eq!(journal.original(&object), original);
        assert_eq!(journal.patch(&object), json_patch::diff(&original, &object));
    }

    #[test]
    fn removes_come_in_original_key_order() {
        let original = json!({"metadata": {"labels": {"a": "1", "b": "2", "c": "3"}}});
        let mut object = original.clone();
        let mut journal = Journal::new();
        for key in ["c", "a"] {
            journal.record_removal(&object, &key_path(&["metadata", "labels", key]));
            object["metadata"]["labels"]
                .as_object_mut()
                .unwrap()
                .shift_remove(key);
        }
        journal.commit();
        assert_eq!(journal.patch(&object), json_patch::diff(&original, &object));
    }

    #[test]
    fn a_location_under_a_missing_or_scalar_value_is_cut_there() {
        let original = json!({"metadata": {"name": "p"}, "spec": "text"});
        let mut object = original.clone();
        let mut journal = Journal::new();
        journal.record(&object, &key_path(&["metadata", "labels", "a"]));
        object["metadata"]["labels"] = json!({"a": "1"});
        journal.record(&object, &key_path(&["spec", "x", "y"]));
        object["spec"] = json!({"x": {"y": 1}});
        journal.commit();
        assert_eq!(journal.original(&object), original);
        assert_eq!(journal.patch(&object), json_patch::diff(&original, &object));
    }

    #[test]
    fn intersects_follows_recorded_keys() {
        let left = json!({"metadata": {"annotations": {"a": "1"}}});
        let mut journal = Journal::new();
        assert!(!journal.intersects([]));
        journal.record(&left, &key_path(&["metadata", "annotations", "a"]));
        journal.commit();
        assert!(journal.intersects([]));
        assert!(journal.intersects(["metadata"]));
        assert!(journal.intersects(["metadata", "annotations"]));
        assert!(journal.intersects(["metadata", "annotations", "a", "deeper"]));
        assert!(!journal.intersects(["metadata", "annotations", "b"]));
        assert!(!journal.intersects(["metadata", "labels"]));
        assert!(!journal.intersects(["spec"]));
        journal.record(&left, &key_path(&["spec"]));
        journal.commit();
        assert!(journal.intersects(["spec", "containers"]));
    }

    /// Lists only appended to keep no copy of their items; every other write reaches
    /// them through a copy made first, here or in the committed records. Each step is a
    /// policy's edits, kept or rolled back: a rollback restores the object as the step
    /// found it, and the patch and the original stay exact throughout.
    #[test]
    fn appends_keep_no_copy_and_other_writes_copy_first() {
        use super::super::edit::EditError;
        use crate::policy::model::Position;
        type Outcome = Result<(), EditError>;
        type Edit = fn(&mut Editor) -> Outcome;
        fn list(keys: &[&str]) -> Vec<Token> {
            key_path(keys)
        }
        fn first_image() -> Vec<Token> {
            let mut at = list(&["spec", "containers"]);
            at.extend([Token::Index(0), Token::Key("image".into())]);
            at
        }
        fn append(e: &mut Editor, keys: &[&str], item: Value, at: Position) -> Outcome {
            e.append(&list(keys), vec![item], at)
        }
        fn raw(operations: Value) -> json_patch::Patch {
            serde_json::from_value(operations).unwrap()
        }
        let steps: [(Edit, bool); 9] = [
            // Appends, kept; then appended to again and rolled back.
            (
                |e| {
                    e.merge(&[], json!({"spec": {"containers": [{"name": "side"}], "volumes": [{"name": "v2"}]}}))
                },
                true,
            ),
            (
                |e| {
                    append(
                        e,
                        &["spec", "containers"],
                        json!({"name": "x"}),
                        Position::Last,
                    )
                },
                false,
            ),
            // A write into an earlier item: the kept list is copied first.
            (|e| e.set(&first_image(), json!("b")), false),
            (
                |e| {
                    append(
                        e,
                        &["spec", "volumes"],
                        json!({"name": "v3"}),
                        Position::First,
                    )
                },
                true,
            ),
            (
                |e| {
                    append(
                        e,
                        &["spec", "containers"],
                        json!({"name": "y"}),
                        Position::Last,
                    )
                },
                true,
            ),
            // A raw operation into a kept appended-to list, a new list, a list removed.
            (
                |e| {
                    append(
                        e,
                        &["spec", "tolerations"],
                        json!({"key": "b"}),
                        Position::Last,
                    )
                },
                true,
            ),
            (
                |e| {
                    e.json_patch(&raw(
                        json!([{"op": "replace", "path": "/spec/tolerations/0/key", "value": "c"}]),
                    ))
                },
                true,
            ),
            (
                |e| {
                    append(
                        e,
                        &["spec", "initContainers"],
                        json!({"name": "i"}),
                        Position::Last,
                    )
                },
                true,
            ),
            (
                |e| {
                    e.remove(&list(&["spec", "containers"]));
                    Ok(())
                },
                true,
            ),
        ];
        let original = json!({
            "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "app", "image": "a"}],
                "volumes": [{"name": "v1"}],
                "tolerations": [{"key": "a"}]
            }
        });
        let mut object = original.clone();
        let mut journal = Journal::new();
        for (index, (edit, keep)) in steps.iter().enumerate() {
            let before = object.clone();
            edit(&mut Editor::new(&mut object, &mut journal)).unwrap();
            assert_eq!(
                journal.open_patch(&object),
                json_patch::diff(&before, &object),
                "step {index}"
            );
            if *keep {
                journal.commit();
            } else {
                journal.rollback(&mut object);
                assert_eq!(object, before, "step {index} rolled back");
            }
            assert_eq!(
                journal.patch(&object),
                json_patch::diff(&original, &object),
                "step {index}"
            );
            assert_eq!(journal.original(&object), original, "step {index}");
        }
        journal.rollback_all(&mut object);
        assert_eq!(object, original);
    }

    #[test]
    fn an_append_only_list_is_recorded_by_its_length() {
        let object = json!({"spec": {"containers": [{"name": "app"}]}});
        let recorded = |index: i64| {
            let mut journal = Journal::new();
            let mut at = key_path(&["spec", "containers"]);
            at.push(Token::Index(index));
            journal.record(&object, &at);
            let node = journal
                .open
                .child("spec")
                .and_then(|n| n.child("containers"));
            format!("{:?}", node.and_then(|n| n.snapshot.as_ref()))
        };
        assert_eq!(recorded(1), "Some(ListOf(1))");
        // An index that is not the length is not an append: the list is copied.
        assert!(
            recorded(0).starts_with("Some(Value(Some(Array"),
            "{}",
            recorded(0)
        );
    }

    #[test]
    fn a_write_at_the_root_diffs_everything() {
        let left = json!({"a": 1, "b": [1, 2]});
        let right = json!({"a": 2, "b": [1]});
        let mut journal = Journal::new();
        journal.record(&left, &[]);
        journal.commit();
        assert_eq!(journal.patch(&right), json_patch::diff(&left, &right));
    }
}
