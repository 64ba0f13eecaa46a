//! Where an evaluation wrote, so the patch is computed over those subtrees only.
//!
//! `json_patch::diff` walks both whole trees and looks up every key of one in the
//! other; for a pod with managedFields that was a fifth of a review's cost, although
//! policies write under a handful of keys. Every write is recorded here as the object
//! keys leading to it, and [`Touched::diff`] hands `json_patch::diff` only the recorded
//! subtrees. Untouched subtrees are equal on both sides by construction, and the walk
//! visits keys in the order `json_patch::diff` does, so the patch is the one the full
//! diff gives (a property test holds the two equal).

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation};
use serde_json::Value;

use super::path::Token;

/// Keys deeper than this are not told apart: the subtree is diffed whole. Three keys
/// reach a single annotation, label or nodeSelector entry.
const MAX_DEPTH: usize = 3;

/// The subtrees an evaluation may have changed, as a tree of object keys.
#[derive(Debug, Default, Clone)]
pub struct Touched {
    root: Node,
}

#[derive(Debug, Default, Clone)]
struct Node {
    /// Anything below may have changed.
    whole: bool,
    children: Vec<(String, Node)>,
}

impl Node {
    fn child(&self, key: &str) -> Option<&Node> {
        self.children
            .iter()
            .find_map(|(name, node)| (name == key).then_some(node))
    }
}

impl Touched {
    /// Nothing written yet.
    pub fn new() -> Touched {
        Touched::default()
    }

    /// Records a write at `at`. The subtree under the leading object keys (at most
    /// [`MAX_DEPTH`]) counts as changed; a list index ends the keys, so a write into a
    /// list marks the whole list.
    pub fn record(&mut self, at: &[Token]) {
        self.record_keys(at.iter().map_while(|token| match token {
            Token::Key(key) => Some(key.as_str()),
            Token::Index(_) => None,
        }));
    }

    /// Records a merge of `fragment` at `at`: a merge writes only under the fragment's
    /// keys, so a merge at the root that adds one annotation touches one annotation.
    pub fn record_merge(&mut self, at: &[Token], fragment: &Value) {
        let mut location = at.to_vec();
        self.record_fragment(&mut location, fragment);
    }

    fn record_fragment(&mut self, location: &mut Vec<Token>, fragment: &Value) {
        let all_keys = location.iter().all(|token| matches!(token, Token::Key(_)));
        match fragment {
            Value::Object(entries)
                if !entries.is_empty() && all_keys && location.len() < MAX_DEPTH =>
            {
                for (key, value) in entries {
                    location.push(Token::Key(key.clone()));
                    self.record_fragment(location, value);
                    location.pop();
                }
            }
            _ => self.record(location),
        }
    }

    /// Records the locations a raw JSON Patch operation reads from or writes to. Its
    /// tokens are taken as keys: where one is really a list index, the values there
    /// are lists, and lists are diffed whole.
    pub fn record_operation(&mut self, operation: &PatchOperation) {
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
            self.record_keys(keys.iter().map(String::as_str));
        }
    }

    fn record_keys<'k>(&mut self, keys: impl Iterator<Item = &'k str>) {
        let mut node = &mut self.root;
        for key in keys.take(MAX_DEPTH) {
            if node.whole {
                return;
            }
            let index = match node.children.iter().position(|(name, _)| name == key) {
                Some(index) => index,
                None => {
                    node.children.push((key.to_string(), Node::default()));
                    node.children.len() - 1
                }
            };
            node = &mut node.children[index].1;
        }
        node.whole = true;
        node.children.clear();
    }

    /// Whether anything at or under the location named by `keys` may have changed.
    pub fn intersects<'k>(&self, keys: impl IntoIterator<Item = &'k str>) -> bool {
        let mut node = &self.root;
        for key in keys {
            if node.whole {
                return true;
            }
            match node.child(key) {
                Some(child) => node = child,
                None => return false,
            }
        }
        node.whole || !node.children.is_empty()
    }

    /// `json_patch::diff(left, right)`, given that `left` and `right` differ only
    /// under the recorded subtrees.
    pub fn diff(&self, left: &Value, right: &Value) -> Patch {
        let mut patch = Patch(Vec::new());
        diff_node(&self.root, left, right, &mut PointerBuf::new(), &mut patch);
        patch
    }
}

fn diff_node(node: &Node, left: &Value, right: &Value, at: &mut PointerBuf, patch: &mut Patch) {
    let (Value::Object(left_map), Value::Object(right_map)) = (left, right) else {
        return diff_whole(left, right, at, patch);
    };
    if node.whole {
        return diff_whole(left, right, at, patch);
    }
    if node.children.is_empty() {
        return;
    }
    // Same order as json_patch::diff: keys of the right side (adds and changes), then
    // keys only on the left (removes), in left order.
    for (key, right_value) in right_map {
        let Some(child) = node.child(key) else {
            continue;
        };
        at.push_back(key.as_str());
        match left_map.get(key) {
            Some(left_value) => diff_node(child, left_value, right_value, at, patch),
            None => patch.0.push(PatchOperation::Add(AddOperation {
                path: at.clone(),
                value: right_value.clone(),
            })),
        }
        at.pop_back();
    }
    for key in left_map.keys() {
        if node.child(key).is_some() && !right_map.contains_key(key) {
            at.push_back(key.as_str());
            patch
                .0
                .push(PatchOperation::Remove(RemoveOperation { path: at.clone() }));
            at.pop_back();
        }
    }
}

/// Diffs one subtree with json_patch and places its operations under `at`.
fn diff_whole(left: &Value, right: &Value, at: &PointerBuf, patch: &mut Patch) {
    let sub = json_patch::diff(left, right);
    if at.is_root() {
        patch.0.extend(sub.0);
        return;
    }
    patch.0.extend(sub.0.into_iter().map(|mut operation| {
        match &mut operation {
            PatchOperation::Add(op) => op.path = at.concat(&op.path),
            PatchOperation::Remove(op) => op.path = at.concat(&op.path),
            PatchOperation::Replace(op) => op.path = at.concat(&op.path),
            PatchOperation::Move(op) => {
                op.path = at.concat(&op.path);
                op.from = at.concat(&op.from);
            }
            PatchOperation::Copy(op) => {
                op.path = at.concat(&op.path);
                op.from = at.concat(&op.from);
            }
            PatchOperation::Test(op) => op.path = at.concat(&op.path),
        }
        operation
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key_path(keys: &[&str]) -> Vec<Token> {
        keys.iter()
            .map(|key| Token::Key((*key).to_string()))
            .collect()
    }

    #[test]
    fn nothing_recorded_gives_an_empty_patch() {
        let patch = Touched::new().diff(&json!({"a": 1}), &json!({"a": 1}));
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
        let mut touched = Touched::new();
        touched.record(&key_path(&["metadata", "labels", "a"]));
        touched.record(&key_path(&["metadata", "labels", "gone"]));
        touched.record(&key_path(&["metadata", "labels", "new"]));
        touched.record(&key_path(&["metadata", "annotations", "k/v"]));
        touched.record(&[
            Token::Key("spec".into()),
            Token::Key("containers".into()),
            Token::Index(0),
            Token::Key("image".into()),
        ]);
        assert_eq!(touched.diff(&left, &right), json_patch::diff(&left, &right));
    }

    #[test]
    fn a_shorter_record_covers_deeper_ones() {
        let left = json!({"spec": {"a": {"b": 1}, "c": 1}});
        let right = json!({"spec": {"a": {"b": 2}, "c": 2}});
        let mut touched = Touched::new();
        touched.record(&key_path(&["spec", "a", "b"]));
        touched.record(&key_path(&["spec"]));
        touched.record(&key_path(&["spec", "a"]));
        assert_eq!(touched.diff(&left, &right), json_patch::diff(&left, &right));
    }

    #[test]
    fn raw_patch_operations_record_both_ends_of_a_move() {
        let left = json!({"metadata": {"labels": {"a": "1"}}, "spec": {}});
        let right = json!({"metadata": {"labels": {}}, "spec": {"a": "1"}});
        let operation: PatchOperation = serde_json::from_value(
            json!({"op": "move", "from": "/metadata/labels/a", "path": "/spec/a"}),
        )
        .unwrap();
        let mut touched = Touched::new();
        touched.record_operation(&operation);
        assert_eq!(touched.diff(&left, &right), json_patch::diff(&left, &right));
    }

    #[test]
    fn a_merge_records_the_keys_of_its_fragment() {
        let left = json!({"metadata": {"name": "p", "annotations": {"a": "1"}}, "spec": "text"});
        let right = json!({
            "metadata": {"name": "p", "annotations": {"b": "2"}},
            "spec": {"containers": [{"name": "c"}]}
        });
        let fragment = json!({
            "metadata": {"annotations": {"a": null, "b": "2"}},
            "spec": {"containers": [{"name": "c"}]}
        });
        let mut touched = Touched::new();
        touched.record_merge(&[], &fragment);
        assert_eq!(touched.diff(&left, &right), json_patch::diff(&left, &right));
        // Nothing outside the fragment's keys is visited.
        let unrelated = json!({"metadata": {"name": "q"}});
        let changed_elsewhere = json!({"metadata": {"name": "r"}});
        assert!(touched.diff(&unrelated, &changed_elsewhere).0.is_empty());
    }

    #[test]
    fn intersects_follows_recorded_keys() {
        let mut touched = Touched::new();
        assert!(!touched.intersects([]));
        touched.record(&key_path(&["metadata", "annotations", "a"]));
        assert!(touched.intersects([]));
        assert!(touched.intersects(["metadata"]));
        assert!(touched.intersects(["metadata", "annotations"]));
        assert!(touched.intersects(["metadata", "annotations", "a", "deeper"]));
        assert!(!touched.intersects(["metadata", "annotations", "b"]));
        assert!(!touched.intersects(["metadata", "labels"]));
        assert!(!touched.intersects(["spec"]));
        touched.record(&key_path(&["spec"]));
        assert!(touched.intersects(["spec", "containers"]));
    }

    #[test]
    fn a_write_at_the_root_diffs_everything() {
        let left = json!({"a": 1, "b": [1, 2]});
        let right = json!({"a": 2, "b": [1]});
        let mut touched = Touched::new();
        touched.record(&[]);
        assert_eq!(touched.diff(&left, &right), json_patch::diff(&left, &right));
    }
}
