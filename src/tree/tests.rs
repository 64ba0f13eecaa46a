use serde_json::{Value, json};

use super::*;

fn tree(value: &Value) -> Tree<'static> {
    Tree::parse_owned(&value.to_string()).expect("valid JSON")
}

#[test]
fn a_parse_writes_back_what_serde_json_writes() {
    let text = r#"{"b":1,"a":[true,null,-2.5,"x\"y"],"c":{"d":{}},"b":2}"#;
    let tree = Tree::parse(text).unwrap();
    let value: Value = serde_json::from_str(text).unwrap();
    assert_eq!(serde_json::to_string(&tree).unwrap(), value.to_string());
    assert_eq!(tree.to_value(), value);
}

#[test]
fn what_serde_json_refuses_the_tree_refuses() {
    for text in [
        "{",
        "[1,]",
        r#"{"a" 1}"#,
        "01",
        "1e400",
        r#""\ud800""#,
        "[] x",
    ] {
        assert!(serde_json::from_str::<Value>(text).is_err(), "{text}");
        assert!(Tree::parse(text).is_err(), "{text}");
        assert!(Tree::parse_keeping(text, &["a"]).is_err(), "{text}");
    }
}

#[test]
fn a_kept_value_is_checked_now_and_built_on_first_read() {
    let text = r#"{"metadata":{"name":"p","managedFields":[{"manager":"kubectl"}],"uid":"u"}}"#;
    let tree = Tree::parse_keeping(text, &["managedFields"]).unwrap();
    let kept = tree.pointer("/metadata/managedFields").unwrap();
    let Tree::Text(text_node) = kept else {
        panic!("kept as text: {kept:?}");
    };
    assert!(text_node.built.get().is_none(), "not built before a read");
    assert_eq!(
        tree.pointer("/metadata/managedFields/0/manager")
            .and_then(Tree::as_str),
        Some("kubectl")
    );
    assert!(text_node.built.get().is_some(), "built by the read");
    assert_eq!(tree, Tree::parse(text).unwrap());
    assert_eq!(
        serde_json::to_string(&tree).unwrap(),
        serde_json::to_string(&Tree::parse(text).unwrap()).unwrap()
    );
    // A kept key's scalar value is built as any scalar.
    let scalar = Tree::parse_keeping(r#"{"managedFields":"x"}"#, &["managedFields"]).unwrap();
    assert_eq!(
        scalar.get("managedFields").and_then(Tree::as_str),
        Some("x")
    );
}

#[test]
fn a_kept_value_nested_past_the_limit_is_refused_as_serde_json_refuses_it() {
    let nested = |depth: usize| format!(r#"{{"m":{}1{}}}"#, "[".repeat(depth), "]".repeat(depth));
    for depth in [MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 5] {
        let text = nested(depth);
        let whole = serde_json::from_str::<Value>(&text).is_ok();
        assert_eq!(Tree::parse(&text).is_ok(), whole, "depth {depth}");
        assert_eq!(
            Tree::parse_keeping(&text, &["m"]).is_ok(),
            whole,
            "depth {depth}"
        );
    }
    assert!(Tree::parse(&nested(MAX_DEPTH - 1)).is_ok());
    assert!(Tree::parse(&nested(MAX_DEPTH)).is_err());
}

#[test]
fn a_key_written_twice_keeps_its_first_place_and_last_value() {
    let text = r#"{"a":1,"b":2,"a":3}"#;
    let tree = Tree::parse(text).unwrap();
    assert_eq!(serde_json::to_string(&tree).unwrap(), r#"{"a":3,"b":2}"#);
    // The same past the size where keys are indexed.
    let many: Vec<String> = (0..100).map(|i| format!(r#""k{i}":{i}"#)).collect();
    let text = format!(r#"{{{},"k7":"again"}}"#, many.join(","));
    let tree = Tree::parse(&text).unwrap();
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(tree.to_value(), value);
    assert_eq!(tree.get("k7").and_then(Tree::as_str), Some("again"));
    assert_eq!(tree.as_map().unwrap().len(), 100);
}

#[test]
fn maps_and_lists_nested_in_one_another_build_as_serde_json_reads_them() {
    // The read shares one stack of entries and items between the levels: each level
    // takes off exactly what it put on, whatever is nested in it.
    let inner = |n: usize| -> String {
        let keys: Vec<String> = (0..n)
            .map(|i| format!(r#""i{i}":[{i},{{"d":{i}}}]"#))
            .collect();
        format!("{{{}}}", keys.join(","))
    };
    let texts = [
        r#"{"a":{"x":1,"x":2},"b":[{"y":1},{"y":2,"y":3}],"a":{"z":0}}"#.to_string(),
        r#"[[],{},[{}],{"":[]},[[[1]],{"k":{"k":{}}}]]"#.to_string(),
        // A duplicate as the entry that makes a map large enough to index, then after.
        format!(
            r#"{{{},"k0":"again","k40":1,"k1":"again"}}"#,
            (0..SCANNED)
                .map(|i| format!(r#""k{i}":{}"#, inner(i % 4)))
                .collect::<Vec<_>>()
                .join(",")
        ),
    ];
    for text in texts {
        let tree = Tree::parse(&text).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(tree.to_value(), value, "{text}");
        assert_eq!(serde_json::to_string(&tree).unwrap(), value.to_string());
    }
}

#[test]
fn an_edit_copies_only_the_path_to_what_it_changes() {
    let original = tree(&json!({
        "metadata": {"labels": {"a": "1"}, "annotations": {"x": "y"}},
        "spec": {"containers": [{"name": "c"}]}
    }));
    let mut edited = original.clone();
    edited
        .pointer_mut("/metadata/labels")
        .and_then(Tree::map_mut)
        .unwrap()
        .insert("b", Tree::from("2"));
    assert!(
        edited
            .get("spec")
            .unwrap()
            .same(original.get("spec").unwrap())
    );
    let (before, after) = (
        original.get("metadata").unwrap(),
        edited.get("metadata").unwrap(),
    );
    assert!(!before.same(after));
    assert!(
        after
            .get("annotations")
            .unwrap()
            .same(before.get("annotations").unwrap())
    );
    assert_eq!(
        original.pointer("/metadata/labels/b"),
        None,
        "the original is untouched"
    );
    assert_eq!(
        serde_json::to_value(diff(&original, &edited)).unwrap(),
        json!([{"op": "add", "path": "/metadata/labels/b", "value": "2"}])
    );
}

#[test]
fn removing_keeps_the_order_and_the_index_follows() {
    let entries: Vec<(String, Tree)> = (0..40)
        .map(|i| (format!("k{i}"), Tree::from(i64::from(i))))
        .collect();
    let mut map: Map = entries.into_iter().collect();
    assert_eq!(map.get("k39").and_then(Tree::as_i64), Some(39));
    assert_eq!(map.remove("k3").and_then(|t| t.as_i64()), Some(3));
    assert_eq!(map.get("k39").and_then(Tree::as_i64), Some(39));
    assert_eq!(map.get("k3"), None);
    assert_eq!(map.keys().nth(3), Some("k4"));
    map.insert("k3", Tree::from("back"));
    assert_eq!(map.keys().last(), Some("k3"));
    assert_eq!(map.get("k3").and_then(Tree::as_str), Some("back"));
    assert_eq!(
        map.insert("k0", Tree::Null).and_then(|t| t.as_i64()),
        Some(0)
    );
    assert_eq!(map.keys().next(), Some("k0"));
}

#[test]
fn pointers_follow_rfc_6901() {
    let tree = tree(&json!({"a/b": {"m~n": [10, 20]}, "": 1}));
    assert_eq!(
        tree.pointer("/a~1b/m~0n/1").and_then(Tree::as_i64),
        Some(20)
    );
    assert_eq!(tree.pointer("/").and_then(Tree::as_i64), Some(1));
    assert_eq!(tree.pointer(""), Some(&tree));
    assert_eq!(tree.pointer("/a~1b/m~0n/01"), None);
    assert_eq!(tree.pointer("/a~1b/m~0n/-"), None);
    assert_eq!(tree.pointer("a"), None);
}

#[test]
fn jsonpath_queries_a_tree_as_it_queries_a_value() {
    use jsonpath_rust::query::js_path_vals;
    let value = json!({
        "metadata": {"ownerReferences": [{"kind": "StatefulSet", "name": "s"}, {"kind": "Job"}]},
        "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b"}]},
        "list": ["a", "c"]
    });
    let tree = tree(&value);
    for path in [
        "$.metadata.ownerReferences[?@.kind == 'StatefulSet']",
        "$.spec.containers[*].name",
        "$..name",
        "$.spec.containers[?@.image]",
        "$.spec.containers[?in(@.name, $.list)]",
        "$.nothing",
    ] {
        let on_value: Vec<Value> = js_path_vals(path, &value)
            .unwrap()
            .into_iter()
            .cloned()
            .collect();
        let on_tree: Vec<Value> = js_path_vals(path, &tree)
            .unwrap()
            .into_iter()
            .map(Tree::to_value)
            .collect();
        assert_eq!(on_tree, on_value, "{path}");
    }
}

#[test]
fn a_kept_text_is_refused_where_serde_json_refuses_to_build_it() {
    let escapes = [
        r"\u0041",
        r"\ud800",
        r"\udbff",
        r"\udc00",
        r"\udfff",
        r"\ud800\udc00",
        r"\ud800\u0041",
        r"\ud800\n",
        r"\ud800x",
        r"\ud83d\ude00\udc00",
        r"\\ud800",
        r"\u00e9\ud800\udfff",
    ];
    let numbers = [
        "0",
        "-0",
        "1e308",
        "1e309",
        "-1e400",
        "1e-400",
        "1.5E+3",
        "18446744073709551616",
        "123456789012345678901234567890",
        &format!("1{}", "0".repeat(400)),
        "2.5e-3",
    ];
    let mut texts: Vec<String> = Vec::new();
    for escape in escapes {
        texts.push(format!(r#"{{"m":{{"k":"a{escape}b"}}}}"#));
        texts.push(format!(r#"{{"m":{{"a{escape}":1}}}}"#));
    }
    for number in numbers {
        texts.push(format!(r#"{{"m":[{number}]}}"#));
        texts.push(format!(r#"{{"m":{{"n":{number},"s":"{number}"}}}}"#));
    }
    for text in &texts {
        let serde_json_builds = serde_json::from_str::<Value>(text).is_ok();
        assert_eq!(Tree::parse(text).is_ok(), serde_json_builds, "{text}");
        let kept = Tree::parse_keeping(text, &["m"]);
        assert_eq!(kept.is_ok(), serde_json_builds, "{text}");
        if let Ok(kept) = kept {
            assert_eq!(
                kept.to_value(),
                serde_json::from_str::<Value>(text).unwrap(),
                "{text}"
            );
        }
    }
}

/// A kept text's strings are scanned eight bytes at a time: an escape or the closing
/// quote at any offset, in strings of any length, ends the string where serde_json ends it.
#[test]
fn a_kept_string_ends_where_serde_json_ends_it_at_every_offset() {
    for escape in [r#"\""#, r"\\", r"\u0041", r"\ud83d\ude00", r"\ud800"] {
        for length in 0..20 {
            for at in 0..=length {
                let content = format!("{}{escape}{}", "a".repeat(at), "é".repeat(length - at));
                for text in [
                    format!(r#"{{"m":{{"k":"{content}","after":"x\"y"}}}}"#),
                    format!(r#"{{"m":["{content}",1,"{content}"]}}"#),
                    format!(r#"{{"m":{{"{content}":true}}}}"#),
                ] {
                    let expected = serde_json::from_str::<Value>(&text);
                    let kept = Tree::parse_keeping(&text, &["m"]);
                    assert_eq!(kept.is_ok(), expected.is_ok(), "{text}");
                    if let (Ok(kept), Ok(expected)) = (kept, expected) {
                        assert_eq!(kept.to_value(), expected, "{text}");
                    }
                }
            }
        }
    }
}

#[test]
fn strings_borrow_from_the_text_and_owned_trees_fit_into_borrowed_ones() {
    use std::borrow::Cow;
    let text = String::from(r#"{"name":"web","escaped":"a\"b","labels":{}}"#);
    let mut tree = Tree::parse(&text).unwrap();
    assert!(matches!(
        tree.get("name"),
        Some(Tree::String(Cow::Borrowed("web")))
    ));
    assert!(matches!(
        tree.get("escaped"),
        Some(Tree::String(Cow::Owned(_)))
    ));
    assert!(
        tree.as_map()
            .unwrap()
            .entries()
            .iter()
            .all(|(key, _)| matches!(key, Cow::Borrowed(_)))
    );
    // A tree that owns its strings (a policy's literal) goes into one that borrows, as it is.
    let literal: Tree<'static> = Tree::parse_owned(r#"{"app":"web"}"#).unwrap();
    tree.map_mut().unwrap().insert("labels", literal.clone());
    assert!(tree.get("labels").unwrap().same(&literal));
    let owned: Tree<'static> = tree.clone().into_static();
    drop(tree);
    drop(text);
    assert_eq!(
        owned.pointer("/labels/app").and_then(Tree::as_str),
        Some("web")
    );
}

#[test]
fn every_key_is_a_key_as_written_as_graft_reads_request_json() {
    const RAW: &str = "$serde_json::private::RawValue";
    // `json!` builds its maps key by key, so these keys are plain keys too.
    for (text, plain) in [
        (format!(r#"{{"{RAW}":"[1,2]"}}"#), json!({RAW: "[1,2]"})),
        (format!(r#"{{"{RAW}":5,"b":1}}"#), json!({RAW: 5, "b": 1})),
        (
            format!(r#"{{"a":{{"{RAW}":"\"x\""}}}}"#),
            json!({"a": {RAW: "\"x\""}}),
        ),
    ] {
        assert_eq!(Tree::parse(&text).unwrap().to_value(), plain, "{text}");
        assert_eq!(
            Tree::parse_keeping(&text, &["a"]).unwrap().to_value(),
            plain,
            "{text}"
        );
    }
}

#[test]
fn json_reads_as_serde_json_reads_it_keys_in_their_order() {
    for text in [
        r#"{"b": 1, "a": [true, null, -2, 2.5, 18446744073709551615, "s\u00e9\n"], "c": {}}"#,
        "[]",
        "\"s\"",
        "1e300",
        "null",
    ] {
        let tree = Tree::parse_owned(text).unwrap();
        let value = serde_json::from_str::<Value>(text).unwrap();
        assert_eq!(tree, value, "{text}");
        // The key order is kept too.
        assert_eq!(tree.to_string(), value.to_string());
    }
}

#[test]
fn serde_jsons_raw_value_key_is_a_key_like_any_other() {
    const RAW: &str = "$serde_json::private::RawValue";
    let text = json!({"spec": {RAW: "{\"replaced\": true}"}}).to_string();
    // What `Value`'s own visitor makes of it, which is not what the text says.
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        json!({"spec": {"replaced": true}})
    );
    assert_eq!(
        Tree::parse_owned(&text).unwrap(),
        json!({"spec": {RAW: "{\"replaced\": true}"}})
    );
    assert_eq!(
        Tree::parse_owned(&json!({RAW: 5}).to_string()).unwrap(),
        json!({RAW: 5})
    );
}

#[test]
fn one_recursion_limit_for_the_whole_text() {
    const RAW: &str = "$serde_json::private::RawValue";
    // Each level hides the next in a string, which `Value`'s visitor parses with a
    // fresh limit, down to the innermost value; here the text is read as written.
    let mut text = "1".to_string();
    for _ in 0..6 {
        text = json!({RAW: text}).to_string();
    }
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), json!(1));
    let tree = Tree::parse_owned(&text).unwrap();
    assert!(matches!(tree.get(RAW), Some(Tree::String(_))), "{tree}");
    let deep = format!("{}{}", "[".repeat(129), "]".repeat(129));
    assert!(Tree::parse_owned(&deep).is_err());
    let invalid = ["{\"a\": 1e400}", "[1,]", "{\"a\": \"\\ud800\"}", "1 2"];
    for text in invalid {
        assert!(Tree::parse_owned(text).is_err(), "{text}");
    }
}

#[test]
fn equality_and_the_diff_stay_linear_however_deep_the_maps_nest() {
    // Equal all the way down but for the innermost value, with a sibling at each level: a
    // comparison that looked at a level twice would take 2^100 steps here.
    let nested = |innermost: i64| {
        let mut value = json!(innermost);
        for _ in 0..100 {
            value = json!({"a": value, "b": "sibling"});
        }
        value
    };
    let (left, right) = (tree(&nested(1)), tree(&nested(2)));
    assert_ne!(left, right);
    assert_eq!(left, tree(&nested(1)));
    let pointer = "/a".repeat(100);
    assert_eq!(
        serde_json::to_value(diff(&left, &right)).unwrap(),
        json!([{"op": "replace", "path": pointer, "value": 2}])
    );
    let mut edited = left.clone();
    *edited.pointer_mut(&pointer).unwrap() = Tree::from(3i64);
    assert_eq!(diff(&left, &edited).0.len(), 1);
}

#[test]
fn removing_from_an_indexed_map_keeps_its_index_right() {
    let entries: Vec<(String, Tree)> = (0..100)
        .map(|i| (format!("k{i}"), Tree::from(i64::from(i))))
        .collect();
    let mut map: Map = entries.into_iter().collect();
    assert_eq!(
        map.get("k50").and_then(Tree::as_i64),
        Some(50),
        "the index is built"
    );
    for i in (0..100).step_by(3) {
        assert_eq!(
            map.remove(&format!("k{i}")).and_then(|t| t.as_i64()),
            Some(i)
        );
    }
    for i in 0..100 {
        let expected = (i % 3 != 0).then_some(i);
        assert_eq!(
            map.get(&format!("k{i}")).and_then(Tree::as_i64),
            expected,
            "k{i}"
        );
    }
    map.insert("k0", Tree::from("again"));
    assert_eq!(map.keys().last(), Some("k0"));
    assert_eq!(map.get("k0").and_then(Tree::as_str), Some("again"));
    assert_eq!(map.get("k98").and_then(Tree::as_i64), Some(98));
}

#[test]
fn a_patch_applies_whole_or_not_at_all() {
    let original = tree(&json!({"a": {"b": [1, 2]}, "c": "x"}));
    let patch =
        |operations: Value| -> json_patch::Patch { serde_json::from_value(operations).unwrap() };
    let mut patched = original.clone();
    apply_patch(
        &mut patched,
        &patch(json!([
            {"op": "add", "path": "/a/b/-", "value": 3},
            {"op": "move", "from": "/c", "path": "/a/d"},
            {"op": "test", "path": "/a/d", "value": "x"}
        ])),
    )
    .unwrap();
    assert_eq!(patched.to_value(), json!({"a": {"b": [1, 2, 3], "d": "x"}}));
    assert_eq!(original.to_value(), json!({"a": {"b": [1, 2]}, "c": "x"}));

    let mut failed = original.clone();
    let error = apply_patch(
        &mut failed,
        &patch(json!([
            {"op": "remove", "path": "/c"},
            {"op": "move", "from": "/a", "path": "/a/b/0"}
        ])),
    )
    .unwrap_err();
    assert_eq!(
        (error.operation, error.failure),
        (1, PatchFailure::CannotMoveInsideItself)
    );
    assert!(
        failed.same(&original),
        "nothing applied, not even the remove before it"
    );
}
