//! Property tests of `graft::tree`: on random JSON, the tree reads and writes what
//! `serde_json::Value` does, its diff is `json_patch::diff`, its patches apply as
//! `json_patch::patch` applies them, and an edit of a copy leaves the original as it was.

use crate::support::proptest_cases::config;
use graft::tree::{Tree, apply_patch, diff};
use proptest::prelude::*;
use serde_json::Value;

/// Map keys, including the two characters a JSON Pointer must escape, and the key kept
/// as text below.
const KEYS: &[&str] = &["a", "b", "c", "x/y", "t~n", "kept", "0"];

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "[a-z~/\"\\\\\u{e9} ]{0,6}".prop_map(Value::from),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(4, 40, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..5).prop_map(|entries| {
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(key, value)| (key.to_string(), value))
                        .collect(),
                )
            }),
        ]
    })
}

/// Every JSON Pointer into `value`, the root's `""` first.
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let token = key.replace('~', "~0").replace('/', "~1");
                pointers(inner, format!("{at}/{token}"), out);
            }
        }
        Value::Array(items) => {
            for (index, inner) in items.iter().enumerate() {
                pointers(inner, format!("{at}/{index}"), out);
            }
        }
        _ => {}
    }
}

/// A JSON Patch operation at one of the document's pointers (or a pointer beside one,
/// past a list's end, or `-`), from one of them for `move` and `copy`.
fn patch_operation(pointers: Vec<String>) -> impl Strategy<Value = Value> {
    let pointer = prop_oneof![
        4 => prop::sample::select(pointers),
        1 => (prop::sample::select(KEYS), 0..3usize).prop_map(|(key, n)| {
            let token = key.replace('~', "~0").replace('/', "~1");
            match n {
                0 => format!("/{token}"),
                1 => format!("/{token}/-"),
                _ => format!("/{token}/7"),
            }
        }),
    ];
    (
        prop::sample::select(&["add", "remove", "replace", "move", "copy", "test"][..]),
        pointer.clone(),
        pointer,
        value(),
        any::<bool>(),
    )
        .prop_map(|(op, path, from, value, suffix)| {
            // An item position or `-` below the chosen node, now and then.
            let path = if suffix && op == "add" {
                format!("{path}/-")
            } else {
                path
            };
            match op {
                "remove" => serde_json::json!({"op": op, "path": path}),
                "move" | "copy" => serde_json::json!({"op": op, "path": path, "from": from}),
                _ => serde_json::json!({"op": op, "path": path, "value": value}),
            }
        })
}

fn document_and_patch() -> impl Strategy<Value = (Value, Vec<Value>)> {
    value().prop_flat_map(|document| {
        let mut all = Vec::new();
        pointers(&document, String::new(), &mut all);
        let operations = prop::collection::vec(patch_operation(all), 1..4);
        (Just(document), operations)
    })
}

/// An edit at one of a value's nodes.
#[derive(Clone, Debug)]
enum Edit {
    /// Replace the node with a value.
    Replace(Value),
    /// Set a key of the map there (added last, or replaced in place).
    Insert(String, Value),
    /// Remove a key of the map there.
    Remove(String),
    /// Append to the list there.
    Push(Value),
}

fn edit() -> impl Strategy<Value = Edit> {
    let key = prop::sample::select(KEYS).prop_map(str::to_string);
    prop_oneof![
        value().prop_map(Edit::Replace),
        (key.clone(), value()).prop_map(|(k, v)| Edit::Insert(k, v)),
        key.prop_map(Edit::Remove),
        value().prop_map(Edit::Push),
    ]
}

/// Applies `edit` at `pointer` to both; both must change alike.
fn apply(edit: &Edit, pointer: &str, value: &mut Value, tree: &mut Tree<'_>) {
    let (Some(v), Some(t)) = (value.pointer_mut(pointer), tree.pointer_mut(pointer)) else {
        panic!("{pointer} is in both");
    };
    match edit {
        Edit::Replace(new) => {
            *v = new.clone();
            *t = Tree::from(new);
        }
        Edit::Insert(key, new) => {
            if let (Some(v), Some(t)) = (v.as_object_mut(), t.map_mut()) {
                v.insert(key.clone(), new.clone());
                t.insert(key.clone(), Tree::from(new));
            }
        }
        Edit::Remove(key) => {
            if let (Some(v), Some(t)) = (v.as_object_mut(), t.map_mut()) {
                assert_eq!(v.shift_remove(key).is_some(), t.remove(key).is_some());
            }
        }
        Edit::Push(new) => {
            if let (Some(v), Some(t)) = (v.as_array_mut(), t.list_mut()) {
                v.push(new.clone());
                t.push(Tree::from(new));
            }
        }
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn the_tree_reads_and_writes_json_as_serde_json_does(value in value()) {
        let text = value.to_string();
        for tree in [Tree::parse(&text).unwrap(), Tree::parse_keeping(&text, &["kept"]).unwrap()] {
            prop_assert_eq!(serde_json::to_string(&tree).unwrap(), text.clone());
            prop_assert_eq!(tree.to_value(), value.clone());
            prop_assert_eq!(&tree, &Tree::from(&value));
        }
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        prop_assert_eq!(Tree::parse_keeping(&pretty, &["kept"]).unwrap().to_value(), value);
    }

    #[test]
    fn the_diff_of_two_trees_is_json_patchs(left in value(), right in value()) {
        let (l, r) = (Tree::from(&left), Tree::from(&right));
        let ours = serde_json::to_value(diff(&l, &r)).unwrap();
        let theirs = serde_json::to_value(json_patch::diff(&left, &right)).unwrap();
        prop_assert_eq!(ours, theirs);
    }

    #[test]
    fn edits_of_a_copy_diff_as_json_patch_and_leave_the_original(
        original in value(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), edit()), 1..5),
    ) {
        let text = original.to_string();
        let tree = Tree::parse_keeping(&text, &["kept"]).unwrap();
        let mut edited = tree.clone();
        let mut expected = original.clone();
        for (at, edit) in &edits {
            let mut all = Vec::new();
            pointers(&expected, String::new(), &mut all);
            let pointer = all[at.index(all.len())].clone();
            apply(edit, &pointer, &mut expected, &mut edited);
        }
        prop_assert_eq!(tree.to_value(), original.clone(), "the original is untouched");
        prop_assert_eq!(edited.to_value(), expected.clone());
        let patch = diff(&tree, &edited);
        prop_assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            serde_json::to_value(json_patch::diff(&original, &expected)).unwrap()
        );
        prop_assert_eq!(patch.to_json_patch(), json_patch::diff(&original, &expected));
        let mut patched = original.clone();
        json_patch::patch(&mut patched, &patch.to_json_patch()).unwrap();
        prop_assert_eq!(patched, expected);
    }

    #[test]
    fn patches_apply_to_a_tree_as_json_patch_applies_them((document, operations) in document_and_patch()) {
        let patch: json_patch::Patch = serde_json::from_value(Value::Array(operations)).unwrap();
        let text = document.to_string();
        let original = Tree::parse_keeping(&text, &["kept"]).unwrap();
        let mut tree = original.clone();
        // json-patch one operation at a time, the whole patch undone on a failure: with
        // several operations, json-patch panics where it cannot undo a failed move.
        let mut expected = document.clone();
        let mut failed_at = None;
        for (at, operation) in patch.0.iter().enumerate() {
            if json_patch::patch(&mut expected, std::slice::from_ref(operation)).is_err() {
                failed_at = Some(at);
                expected = document.clone();
                break;
            }
        }
        let ours = apply_patch(&mut tree, &patch);
        prop_assert_eq!(ours.as_ref().err().map(|e| e.operation), failed_at, "{:?}", ours);
        prop_assert_eq!(tree.to_value(), expected, "both patched alike, or both left alone");
        prop_assert_eq!(original.to_value(), document, "the copy it was applied to is untouched");
    }
}
