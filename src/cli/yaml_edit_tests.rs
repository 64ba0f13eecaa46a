use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::cli::yaml_out::tests::tree;

/// `text` with its document changed to `new`; the result must read back as `new`.
fn edit(text: &str, new: &Value) -> String {
    let root = yaml_layout::parse(text).unwrap();
    let old: Value = serde_yaml::from_str(text).unwrap();
    let mut editor = Editor::new(text, &root);
    editor.change(&root, Place::Document, &old, new).unwrap();
    let edited = editor.finish().unwrap();
    let read: Value = serde_yaml::from_str(&edited).unwrap();
    assert_eq!(&read, new, "{edited}");
    edited
}

/// The lines of `after` that are not in `before` at the same place, as a line diff.
fn changed_lines(before: &str, after: &str) -> Vec<String> {
    similar::TextDiff::from_lines(before, after)
        .iter_all_changes()
        .filter(|change| change.tag() != similar::ChangeTag::Equal)
        .map(|change| format!("{}{}", change.tag(), change.value().trim_end()))
        .collect()
}

const PATCH: &str = "\
# Leading comment.
patch:
  - op: add   # the op
    path: /metadata/annotations/networks
    value: '[{\"name\":\"roce5\"},{\"name\":\"roce7\"}]'
  # between items
  - {op: add, path: /metadata/labels/a, value: x}
  - op: remove
    path: /spec/x
applied: [one, two]
";

fn patch_value() -> Value {
    serde_yaml::from_str(PATCH).unwrap()
}

#[test]
fn a_changed_word_is_one_changed_line_in_its_quoting() {
    let mut new = patch_value();
    new["patch"][0]["value"] = json!(r#"[{"name":"roce5"},{"name":"roce9"}]"#);
    let edited = edit(PATCH, &new);
    assert_eq!(
        changed_lines(PATCH, &edited),
        [
            r#"-    value: '[{"name":"roce5"},{"name":"roce7"}]'"#,
            r#"+    value: '[{"name":"roce5"},{"name":"roce9"}]'"#,
        ]
    );
    // Inside a flow mapping, the same: the scalar only.
    let mut new = patch_value();
    new["patch"][1]["value"] = json!("z");
    assert_eq!(edit(PATCH, &new), PATCH.replace("value: x}", "value: z}"));
}

#[test]
fn an_item_added_or_removed_in_the_middle_leaves_its_siblings_as_they_were() {
    let mut new = patch_value();
    let items = new["patch"].as_array_mut().unwrap();
    items.insert(
        1,
        json!({"op": "add", "path": "/spec/y", "value": "[\"it's\"]"}),
    );
    let edited = edit(PATCH, &new);
    assert_eq!(
        changed_lines(PATCH, &edited),
        [
            "+  - op: add",
            "+    path: /spec/y",
            "+    value: '[\"it''s\"]'",
        ]
    );
    let mut new = patch_value();
    new["patch"].as_array_mut().unwrap().remove(1);
    let edited = edit(PATCH, &new);
    assert_eq!(
        changed_lines(PATCH, &edited),
        ["-  - {op: add, path: /metadata/labels/a, value: x}"]
    );
    // A flow sequence that grows stays one.
    let mut new = patch_value();
    new["applied"] = json!(["one", "two", "three"]);
    assert_eq!(
        edit(PATCH, &new),
        PATCH.replace("[one, two]", "[one, two, three]")
    );
}

#[test]
fn a_key_that_replaces_another_takes_its_place() {
    let text = "expect:\n  unchanged: true  # nothing yet\n  warnings: [w]\nnext: 1\n";
    let new = json!({"expect": {"patch": [{"op": "add", "path": "/a", "value": 1}], "warnings": ["w"]}, "next": 1});
    assert_eq!(
        edit(text, &new),
        "expect:\n  patch:\n    - op: add\n      path: /a\n      value: 1\n  warnings: [w]\nnext: 1\n"
    );
    // A flow mapping whose keys change is rewritten in flow style while it fits.
    let text = "expect: {unchanged: true}\n";
    assert_eq!(
        edit(text, &json!({"expect": {"applied": ["a"]}})),
        "expect: {applied: [a]}\n"
    );
    // And in block style when it would not.
    let long = "x".repeat(120);
    assert_eq!(
        edit(
            text,
            &json!({"expect": {"patch": [{"op": "add", "path": "/a", "value": long}]}})
        ),
        format!("expect:\n  patch:\n    - op: add\n      path: /a\n      value: {long}\n")
    );
}

#[test]
fn a_scalar_and_a_collection_replace_each_other() {
    let text = "a: 1\nb:\n  c: d  # a comment stays\nz: end\n";
    assert_eq!(
        edit(
            text,
            &json!({"a": {"x": [1, 2]}, "b": "scalar", "z": "end"})
        ),
        "a:\n  x:\n    - 1\n    - 2\nb: scalar  # a comment stays\nz: end\n"
    );
}

#[test]
fn new_text_follows_the_files_sequence_indentation_and_line_ends() {
    let text = "list:\r\n- a\r\n- b\r\nmap:\r\n  k: v\r\n";
    assert_eq!(
        edit(
            text,
            &json!({"list": ["a", "b", "c"], "map": {"k": "v", "extra": ["x"]}})
        ),
        "list:\r\n- a\r\n- b\r\n- c\r\nmap:\r\n  k: v\r\n  extra:\r\n  - x\r\n"
    );
}

#[test]
fn a_string_that_can_no_longer_be_plain_is_quoted() {
    let text = "a: plain\nb: [plain]\n";
    assert_eq!(
        edit(text, &json!({"a": "yes", "b": ["x, y"]})),
        "a: \"yes\"\nb: [\"x, y\"]\n"
    );
    // A multi-line string becomes a literal block at the value's indentation.
    assert_eq!(
        edit("m:\n  a: plain\n", &json!({"m": {"a": "one\ntwo"}})),
        "m:\n  a: |-\n    one\n    two\n"
    );
}

#[test]
fn a_file_without_a_final_line_break_gets_lines_added_at_its_end() {
    let text = "a:\n  - x";
    assert_eq!(edit(text, &json!({"a": ["x", "z"]})), "a:\n  - x\n  - z");
}

/// `value` changed at places `seeds` pick: scalars, items and keys replaced, added and
/// removed, whole subtrees replaced by `other`.
fn mutate(value: &Value, other: &Value, seeds: &mut std::slice::Iter<'_, u32>) -> Value {
    let Some(&seed) = seeds.next() else {
        return value.clone();
    };
    match (seed % 6, value) {
        (0, _) => other.clone(),
        (1, Value::Object(map)) => {
            let mut map: Map<String, Value> = map
                .iter()
                .map(|(key, item)| (key.clone(), mutate(item, other, seeds)))
                .collect();
            map.insert(format!("added{seed}"), other.clone());
            Value::Object(map)
        }
        (2, Value::Object(map)) => {
            let mut map = map.clone();
            let first = map.keys().next().cloned();
            if let Some(first) = first {
                map.shift_remove(&first);
            }
            Value::Object(map)
        }
        (1, Value::Array(items)) => {
            let mut items: Vec<Value> = items
                .iter()
                .map(|item| mutate(item, other, seeds))
                .collect();
            let at = seed as usize % (items.len() + 1);
            items.insert(at, other.clone());
            Value::Array(items)
        }
        (2, Value::Array(items)) if !items.is_empty() => {
            let mut items = items.clone();
            items.remove(seed as usize % items.len());
            Value::Array(items)
        }
        (3, Value::Object(_) | Value::Array(_))
        | (_, Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null)
            if seed % 6 == 3 =>
        {
            Value::String(format!("word{seed}"))
        }
        (_, Value::Object(map)) => Value::Object(
            map.iter()
                .map(|(key, item)| (key.clone(), mutate(item, other, seeds)))
                .collect(),
        ),
        (_, Value::Array(items)) => Value::Array(
            items
                .iter()
                .map(|item| mutate(item, other, seeds))
                .collect(),
        ),
        (_, scalar) => scalar.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Whatever the change, in block style (either sequence indentation) or flow style,
    /// with either line end, the edited text reads back as the new value.
    #[test]
    fn any_change_reads_back_as_the_new_value(
        old in tree(),
        other in tree(),
        seeds in prop::collection::vec(any::<u32>(), 0..12),
        sequence_indent in 0usize..3,
        flow in any::<bool>(),
        crlf in any::<bool>(),
    ) {
        let old = json!({"doc": old, "tail": [1, {"k": "v"}]});
        let new = mutate(&old, &other, &mut seeds.iter());
        let layout = Layout { sequence_indent, single_quotes: true };
        let mut text = if flow {
            format!("{}\n", yaml_out::to_flow_string(&old, layout).unwrap())
        } else {
            yaml_out::to_string_with(&old, layout).unwrap()
        };
        if crlf {
            text = text.replace('\n', "\r\n");
        }
        let read: Value = serde_yaml::from_str(&text).unwrap();
        prop_assume!(read == old);
        edit(&text, &new);
    }
}

#[test]
fn an_item_below_its_dash_is_replaced_beside_it() {
    let text = "list:\n  -\n      a: 1\n  - b\n";
    assert_eq!(
        edit(text, &json!({"list": ["x", "b"]})),
        "list:\n  - x\n  - b\n"
    );
    assert_eq!(
        edit(text, &json!({"list": [[1, 2], "b"]})),
        "list:\n  - - 1\n    - 2\n  - b\n"
    );
}
