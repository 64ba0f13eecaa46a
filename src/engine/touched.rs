//! Where an evaluation wrote, and what was there before, so the working document can
//! be the request's own object, edited in place, and the patch is computed over the
//! written subtrees only.
//!
//! Cloning the whole object and handing both trees to `json_patch::diff` cost more than
//! a third of a review for a pod with managedFields, although policies write under a
//! handful of keys. Instead every write first records its location as the object keys
//! leading to it; the first record under a location keeps a copy of the value there
//! (its snapshot), while it is still the original. [`Touched::diff`] then hands
//! `json_patch::diff` each snapshot and the current value, and walks the levels above
//! them in the order `json_patch::diff` does (`diff.rs` is that diff, minus its cost on
//! equal subtrees), so the patch is the one the full diff of
//! the original and the mutated object gives (a property test holds the two equal).
//!
//! Invariant: nothing writes to the document except right after recording the
//! location (`run::apply`). A recorded location is cut at the first value that is
//! missing or not a map, so every write lands at or below a recorded location.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation};
use serde_json::{Map, Value};

use crate::jsonpath::Token;

/// Keys deeper than this are not told apart: the subtree is kept and diffed whole.
/// Three keys reach a single annotation, label or nodeSelector entry.
const MAX_DEPTH: usize = 3;

/// The subtrees an evaluation may have changed, with their original values.
#[derive(Debug, Default, Clone)]
pub struct Touched {
    root: Node,
}

#[derive(Debug, Default, Clone)]
struct Node {
    /// Set once anything at or below this location is written: the original value
    /// here (`None`: absent). Nodes below a snapshot are not kept.
    snapshot: Option<Option<Value>>,
    /// Above a snapshot: the original map's keys, in order, for the order of removes.
    keys: Vec<String>,
    children: Vec<(String, Node)>,
}

impl Node {
    fn child(&self, key: &str) -> Option<&Node> {
        self.children
            .iter()
            .find_map(|(name, node)| (name == key).then_some(node))
    }

    /// The original value of this location, given its `current` value.
    fn original(&self, current: Option<&Value>) -> Option<Value> {
        if let Some(snapshot) = &self.snapshot {
            return snapshot.clone();
        }
        // Above a snapshot the value is a map that was never written as a whole: its
        // untouched keys are original, the touched ones come from below.
        let Some(Value::Object(map)) = current else {
            return current.cloned();
        };
        if self.children.is_empty() {
            return current.cloned();
        }
        let mut original = Map::new();
        for key in &self.keys {
            let value = match self.child(key) {
                Some(child) => child.original(map.get(key)),
                None => map.get(key).cloned(),
            };
            if let Some(value) = value {
                original.insert(key.clone(), value);
            }
        }
        Some(Value::Object(original))
    }
}

impl Touched {
    /// Nothing written yet.
    pub fn new() -> Touched {
        Touched::default()
    }

    /// Records a write at `at` into `document`, before it is made. The subtree under
    /// the leading object keys (at most [`MAX_DEPTH`]) counts as changed; a list index
    /// ends the keys, so a write into a list marks the whole list.
    pub fn record(&mut self, document: &Value, at: &[Token]) {
        let keys: Vec<&str> = at
            .iter()
            .map_while(|token| match token {
                Token::Key(key) => Some(key.as_str()),
                Token::Index(_) => None,
            })
            .collect();
        self.record_keys(document, &keys);
    }

    /// Records a merge of `fragment` at `at`: a merge writes only under the fragment's
    /// keys, so a merge at the root that adds one annotation touches one annotation.
    pub fn record_merge(&mut self, document: &Value, at: &[Token], fragment: &Value) {
        let mut location = at.to_vec();
        self.record_fragment(document, &mut location, fragment);
    }

    fn record_fragment(&mut self, document: &Value, location: &mut Vec<Token>, fragment: &Value) {
        let all_keys = location.iter().all(|token| matches!(token, Token::Key(_)));
        match fragment {
            Value::Object(entries)
                if !entries.is_empty() && all_keys && location.len() < MAX_DEPTH =>
            {
                for (key, value) in entries {
                    location.push(Token::Key(key.clone()));
                    self.record_fragment(document, location, value);
                    location.pop();
                }
            }
            _ => self.record(document, location),
        }
    }

    /// Records the locations a raw JSON Patch operation reads from or writes to. Its
    /// tokens are taken as keys: where one is really a list index, the value above it
    /// is a list, which cuts the location there.
    pub fn record_operation(&mut self, document: &Value, operation: &PatchOperation) {
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
            self.record_keys(document, &keys);
        }
    }

    fn record_keys(&mut self, document: &Value, keys: &[&str]) {
        // Cut at the first value that is missing (the write creates it) or not a map
        // (the write replaces it): below that, the original has nothing to keep apart.
        let keys = &keys[..keys.len().min(MAX_DEPTH)];
        let mut depth = 0;
        let mut value = document;
        while depth < keys.len() {
            let Value::Object(map) = value else { break };
            depth += 1;
            match map.get(keys[depth - 1]) {
                Some(child) => value = child,
                None => break,
            }
        }
        let mut node = &mut self.root;
        let mut current = Some(document);
        for key in &keys[..depth] {
            if node.snapshot.is_some() {
                return;
            }
            if node.children.is_empty()
                && let Some(Value::Object(map)) = current
            {
                // The first write below this map: its keys are still the original ones.
                node.keys = map.keys().cloned().collect();
            }
            current = current.and_then(|value| value.get(*key));
            let index = match node.children.iter().position(|(name, _)| name == key) {
                Some(index) => index,
                None => {
                    node.children.push(((*key).to_string(), Node::default()));
                    node.children.len() - 1
                }
            };
            node = &mut node.children[index].1;
        }
        if node.snapshot.is_some() {
            return;
        }
        node.snapshot = Some(node.original(current));
        node.children = Vec::new();
        node.keys = Vec::new();
    }

    /// Whether anything at or under the location named by `keys` may have changed.
    pub fn intersects<'k>(&self, keys: impl IntoIterator<Item = &'k str>) -> bool {
        let mut node = &self.root;
        for key in keys {
            if node.snapshot.is_some() {
                return true;
            }
            match node.child(key) {
                Some(child) => node = child,
                None => return false,
            }
        }
        node.snapshot.is_some() || !node.children.is_empty()
    }

    /// The original document: `current` with every recorded location put back.
    pub fn original(&self, current: &Value) -> Value {
        self.root.original(Some(current)).unwrap_or(Value::Null)
    }

    /// `json_patch::diff(original, current)`, where `current` is the document the
    /// recorded writes were made to.
    pub fn diff(&self, current: &Value) -> Patch {
        let mut patch = Patch(Vec::new());
        diff_node(&self.root, current, &mut PointerBuf::new(), &mut patch);
        patch
    }
}

fn diff_node(node: &Node, current: &Value, at: &mut PointerBuf, patch: &mut Patch) {
    match &node.snapshot {
        Some(Some(original)) => return diff_whole(original, current, at, patch),
        Some(None) => {
            return patch.0.push(PatchOperation::Add(AddOperation {
                path: at.clone(),
                value: current.clone(),
            }));
        }
        None => {}
    }
    if node.children.is_empty() {
        return;
    }
    let Value::Object(map) = current else {
        // Not reached while the invariant holds; the full diff is still right.
        let original = node.original(Some(current)).unwrap_or(Value::Null);
        return diff_whole(&original, current, at, patch);
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
    for key in &node.keys {
        if !map.contains_key(key)
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

/// Diffs one subtree, placing its operations under `at`.
fn diff_whole(left: &Value, right: &Value, at: &mut PointerBuf, patch: &mut Patch) {
    super::diff::diff_into(left, right, at, patch);
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
        let patch = Touched::new().diff(&json!({"a": 1}));
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
        touched.record(&left, &key_path(&["metadata", "labels", "a"]));
        touched.record(&left, &key_path(&["metadata", "labels", "gone"]));
        touched.record(&left, &key_path(&["metadata", "labels", "new"]));
        touched.record(&left, &key_path(&["metadata", "annotations", "k/v"]));
        touched.record(
            &left,
            &[
                Token::Key("spec".into()),
                Token::Key("containers".into()),
                Token::Index(0),
                Token::Key("image".into()),
            ],
        );
        assert_eq!(touched.diff(&right), json_patch::diff(&left, &right));
    }

    #[test]
    fn a_shorter_record_covers_deeper_ones() {
        let left = json!({"spec": {"a": {"b": 1}, "c": 1}});
        let right = json!({"spec": {"a": {"b": 2}, "c": 2}});
        let mut touched = Touched::new();
        touched.record(&left, &key_path(&["spec", "a", "b"]));
        touched.record(&left, &key_path(&["spec"]));
        touched.record(&left, &key_path(&["spec", "a"]));
        assert_eq!(touched.diff(&right), json_patch::diff(&left, &right));
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
        touched.record_operation(&left, &operation);
        assert_eq!(touched.diff(&right), json_patch::diff(&left, &right));
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
        touched.record_merge(&left, &[], &fragment);
        assert_eq!(touched.diff(&right), json_patch::diff(&left, &right));
        assert_eq!(touched.original(&right), left);
    }

    #[test]
    fn a_later_record_above_earlier_writes_keeps_the_original() {
        let original = json!({"spec": {"a": {"b": 1}, "c": 1, "d": 1}});
        let mut document = original.clone();
        let mut touched = Touched::new();
        touched.record(&document, &key_path(&["spec", "a", "b"]));
        document["spec"]["a"]["b"] = json!(2);
        touched.record(&document, &key_path(&["spec", "c"]));
        document["spec"].as_object_mut().unwrap().shift_remove("c");
        touched.record(&document, &key_path(&["spec", "e"]));
        document["spec"]["e"] = json!(5);
        assert_eq!(touched.original(&document), original);
        assert_eq!(
            touched.diff(&document),
            json_patch::diff(&original, &document)
        );

        touched.record(&document, &key_path(&["spec"]));
        document["spec"] = json!("replaced");
        assert_eq!(touched.original(&document), original);
        assert_eq!(
            touched.diff(&document),
            json_patch::diff(&original, &document)
        );
    }

    #[test]
    fn removes_come_in_original_key_order() {
        let original = json!({"metadata": {"labels": {"a": "1", "b": "2", "c": "3"}}});
        let mut document = original.clone();
        let mut touched = Touched::new();
        for key in ["c", "a"] {
            touched.record(&document, &key_path(&["metadata", "labels", key]));
            document["metadata"]["labels"]
                .as_object_mut()
                .unwrap()
                .shift_remove(key);
        }
        assert_eq!(
            touched.diff(&document),
            json_patch::diff(&original, &document)
        );
    }

    #[test]
    fn a_location_under_a_missing_or_scalar_value_is_cut_there() {
        let original = json!({"metadata": {"name": "p"}, "spec": "text"});
        let mut document = original.clone();
        let mut touched = Touched::new();
        touched.record(&document, &key_path(&["metadata", "labels", "a"]));
        document["metadata"]["labels"] = json!({"a": "1"});
        touched.record(&document, &key_path(&["spec", "x", "y"]));
        document["spec"] = json!({"x": {"y": 1}});
        assert_eq!(touched.original(&document), original);
        assert_eq!(
            touched.diff(&document),
            json_patch::diff(&original, &document)
        );
    }

    #[test]
    fn intersects_follows_recorded_keys() {
        let left = json!({"metadata": {"annotations": {"a": "1"}}});
        let mut touched = Touched::new();
        assert!(!touched.intersects([]));
        touched.record(&left, &key_path(&["metadata", "annotations", "a"]));
        assert!(touched.intersects([]));
        assert!(touched.intersects(["metadata"]));
        assert!(touched.intersects(["metadata", "annotations"]));
        assert!(touched.intersects(["metadata", "annotations", "a", "deeper"]));
        assert!(!touched.intersects(["metadata", "annotations", "b"]));
        assert!(!touched.intersects(["metadata", "labels"]));
        assert!(!touched.intersects(["spec"]));
        touched.record(&left, &key_path(&["spec"]));
        assert!(touched.intersects(["spec", "containers"]));
    }

    #[test]
    fn a_write_at_the_root_diffs_everything() {
        let left = json!({"a": 1, "b": [1, 2]});
        let right = json!({"a": 2, "b": [1]});
        let mut touched = Touched::new();
        touched.record(&left, &[]);
        assert_eq!(touched.diff(&right), json_patch::diff(&left, &right));
    }
}
