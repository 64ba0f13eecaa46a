//! Each way evanphx v4 departs from RFC 6902 (map-semantics.md §5.3.1 and §8), the places
//! where it panics, and what the result shares with the document.

use serde_json::{Value, json};

use super::*;

fn op(op: &str, path: &str, value: Option<Value>) -> Operation<'static> {
    Operation {
        op: op.to_string(),
        path: path.to_string(),
        from: None,
        value: value.map(Tree::from),
    }
}

fn op_from(op: &str, from: &str, path: &str) -> Operation<'static> {
    Operation {
        from: Some(from.to_string()),
        ..self::op(op, path, None)
    }
}

fn run(doc: Value, operations: &[Operation<'static>]) -> Result<Value, String> {
    match apply(&Tree::from(&doc), operations) {
        Ok(Applied::Patched(tree)) => Ok(tree.to_value()),
        Ok(Applied::TestFailed { path }) => Err(format!("test failed at {path}")),
        Err(error) => Err(error.to_string()),
    }
}

#[test]
fn replace_of_a_missing_key_adds_it() {
    assert_eq!(
        run(json!({"a": {}}), &[op("replace", "/a/b", Some(json!(1)))]),
        Ok(json!({"a": {"b": 1}}))
    );
}

#[test]
fn negative_and_loosely_written_indices() {
    let doc = || json!({"l": ["a", "b", "c"]});
    for (operation, result) in [
        (op("remove", "/l/-1", None), json!(["a", "b"])),
        (op("remove", "/l/-3", None), json!(["b", "c"])),
        (
            op("replace", "/l/-2", Some(json!("x"))),
            json!(["a", "x", "c"]),
        ),
        (
            op("add", "/l/-1", Some(json!("x"))),
            json!(["a", "b", "c", "x"]),
        ),
        (
            op("add", "/l/-4", Some(json!("x"))),
            json!(["x", "a", "b", "c"]),
        ),
        (
            op("add", "/l/+1", Some(json!("x"))),
            json!(["a", "x", "b", "c"]),
        ),
        (
            op("add", "/l/01", Some(json!("x"))),
            json!(["a", "x", "b", "c"]),
        ),
        (op("remove", "/l/-0", None), json!(["b", "c"])),
    ] {
        let label = format!("{operation:?}");
        assert_eq!(
            run(doc(), &[operation]),
            Ok(json!({"l": result})),
            "{label}"
        );
    }
    assert_eq!(
        run(doc(), &[op("test", "/l/-1", Some(json!("c")))]),
        Ok(doc())
    );
    assert_eq!(
        run(doc(), &[op("add", "/l/1x", Some(json!(1)))]),
        Err(r#"error in add for path: '/l/1x': value was not a proper array index: '1x': strconv.Atoi: parsing "1x": invalid syntax"#.to_string())
    );
    assert_eq!(
        run(doc(), &[op("remove", "/l/99999999999999999999", None)]),
        Err(r#"error in remove for path: '/l/99999999999999999999': strconv.Atoi: parsing "99999999999999999999": value out of range"#.to_string())
    );
    assert_eq!(
        run(doc(), &[op("test", "/l/3", Some(json!(1)))]),
        Err("error in test for path: '/l/3': Unable to access invalid index: 3: invalid index referenced".to_string())
    );
}

#[test]
fn a_path_without_a_leading_slash_loses_its_first_segment() {
    assert_eq!(
        run(
            json!({"spec": {"replicas": 1}}),
            &[op("add", "spec/replicas", Some(json!(3)))]
        ),
        Ok(json!({"spec": {"replicas": 1}, "replicas": 3}))
    );
    assert_eq!(
        run(json!({}), &[op("add", "replicas", Some(json!(3)))]),
        Err(
            r#"add operation does not apply: doc is missing path: "replicas": missing value"#
                .to_string()
        )
    );
}

#[test]
fn missing_values_are_nulls() {
    assert_eq!(
        run(json!({}), &[op("add", "/a", None)]),
        Ok(json!({"a": null}))
    );
    assert_eq!(
        run(json!({"a": 1}), &[op("replace", "/a", None)]),
        Ok(json!({"a": null}))
    );
    assert_eq!(
        run(json!({"a": 1}), &[op_from("copy", "/b", "/c")]),
        Ok(json!({"a": 1, "c": null}))
    );
    assert_eq!(
        run(json!({"a": 1}), &[op_from("move", "/b", "/c")]),
        Err(
            "error in move for path: 'b': Unable to remove nonexistent key: b: missing value"
                .to_string()
        )
    );
}

#[test]
fn test_of_a_missing_key_passes_only_without_a_value() {
    assert_eq!(run(json!({}), &[op("test", "/a", None)]), Ok(json!({})));
    assert_eq!(
        run(json!({}), &[op("test", "/a", Some(json!(null)))]),
        Err("test failed at /a".to_string())
    );
    assert_eq!(
        run(json!({"a": null}), &[op("test", "/a", None)]),
        Ok(json!({"a": null}))
    );
    assert_eq!(
        run(json!({"a": 1}), &[op("test", "/a", None)]),
        Err("test failed at /a".to_string())
    );
    // A missing parent is an error, not a failed test.
    assert_eq!(
        run(json!({}), &[op("test", "/a/b", Some(json!(1)))]),
        Err("test operation does not apply: is missing path: /a/b: missing value".to_string())
    );
}

#[test]
fn test_compares_as_go_writes_values() {
    let doc = json!({"n": 1, "f": 1.5, "s": "1", "m": {}, "l": [], "o": {"a": [1, {"b": null}]}});
    for (path, value, passes) in [
        ("/n", json!(1.0), true),
        ("/n", json!(1), true),
        ("/n", json!("1"), false),
        ("/s", json!(1), false),
        ("/f", json!(1.5), true),
        ("/m", json!(null), true),
        ("/m", json!({}), true),
        ("/m", json!([]), false),
        ("/l", json!(null), true),
        ("/l", json!({}), false),
        ("/o", json!({"a": [1.0, {"b": null}]}), true),
        ("/o", json!({"a": [1, {"b": {}}]}), false),
        ("/o", json!({"a": [1, {}]}), false),
    ] {
        let result = run(doc.clone(), &[op("test", path, Some(value.clone()))]);
        assert_eq!(result.is_ok(), passes, "{path} {value}: {result:?}");
    }
    // The whole document.
    assert_eq!(
        run(json!({"a": 1}), &[op("test", "", Some(json!({"a": 1})))]),
        Ok(json!({"a": 1}))
    );
    assert_eq!(
        run(json!({}), &[op("test", "", Some(json!(null)))]),
        Ok(json!({}))
    );
}

#[test]
fn a_failed_test_undoes_the_whole_patch() {
    let operations = [
        op("add", "/a", Some(json!(1))),
        op("test", "/a", Some(json!(2))),
        op("add", "/b", Some(json!(1))),
    ];
    assert_eq!(
        apply(&Tree::from(json!({})), &operations),
        Ok(Applied::TestFailed {
            path: "/a".to_string()
        })
    );
}

#[test]
fn an_operations_null_is_an_empty_object_to_paths_through_it() {
    // A null of the document resolves nothing.
    assert_eq!(
        run(json!({"a": null}), &[op("add", "/a/b", Some(json!(1)))]),
        Err(
            r#"add operation does not apply: doc is missing path: "/a/b": missing value"#
                .to_string()
        )
    );
    // One an operation added resolves, as an object Go cannot write into.
    let added = op("add", "/a", Some(json!(null)));
    for (then, result) in [
        (
            op("add", "/a/b", Some(json!(1))),
            "internal error: evanphx/json-patch panics here: assignment to entry in nil map (writing into a null an earlier operation added)",
        ),
        (
            op("replace", "/a/b", Some(json!(1))),
            "internal error: evanphx/json-patch panics here: assignment to entry in nil map (writing into a null an earlier operation added)",
        ),
        (
            op("remove", "/a/b", None),
            "error in remove for path: '/a/b': Unable to remove nonexistent key: b: missing value",
        ),
        (op("test", "/a", Some(json!({}))), "passes"),
        (op("test", "/a/b", None), "passes"),
        (op("test", "/a", None), "test failed at /a"),
    ] {
        let label = format!("{then:?}");
        let outcome = match run(json!({}), &[added.clone(), then]) {
            Ok(_) => "passes".to_string(),
            Err(error) => error,
        };
        assert_eq!(outcome, result, "{label}");
    }
    // A copy keeps it an operation's null; a copy of a map holding one does not.
    assert_eq!(
        run(json!({}), &[added.clone(), op_from("copy", "/a", "/c"), op("add", "/c/x", Some(json!(1)))])
            .map(|_| ()),
        Err("internal error: evanphx/json-patch panics here: assignment to entry in nil map (writing into a null an earlier operation added)".to_string())
    );
    assert_eq!(
        run(
            json!({"m": {}}),
            &[
                op("add", "/m/n", Some(json!(null))),
                op_from("copy", "/m", "/c"),
                op("add", "/c/n/x", Some(json!(1)))
            ]
        ),
        Err(
            r#"add operation does not apply: doc is missing path: "/c/n/x": missing value"#
                .to_string()
        )
    );
}

#[test]
fn where_go_panics() {
    let internal = |what: Panic| Err(Error::Internal(what).to_string());
    assert_eq!(
        run(json!({}), &[op("replace", "", None)]),
        internal(Panic::NoValue)
    );
    assert_eq!(
        run(json!({}), &[op("test", "", None)]),
        internal(Panic::NoValue)
    );
    assert_eq!(
        run(
            json!({"l": [null]}),
            &[op("test", "/l", Some(json!([null])))]
        ),
        internal(Panic::NilInTest)
    );
    assert_eq!(
        run(json!({"l": [1]}), &[op("test", "/l", Some(json!([null])))]),
        internal(Panic::NilInTest)
    );
    // A difference before the null ends the comparison first.
    assert_eq!(
        run(
            json!({"l": [1, null]}),
            &[op("test", "/l", Some(json!([2, null])))]
        ),
        Err("test failed at /l".to_string())
    );
}

#[test]
fn replacing_the_whole_document() {
    assert_eq!(
        run(json!({"a": 1}), &[op("replace", "", Some(json!([1])))]),
        Ok(json!([1]))
    );
    assert_eq!(
        run(json!({"a": 1}), &[op("replace", "", Some(json!("x")))]),
        Err("replace operation value must be object or array: %!w(<nil>)".to_string())
    );
    assert_eq!(
        run(json!({"a": 1}), &[op("replace", "", Some(json!(null)))]),
        Ok(json!(null))
    );
    assert_eq!(
        apply(&Tree::from(json!(3)), &[]),
        Err(Error::NotADocument("number"))
    );
}

#[test]
fn moves_and_copies() {
    // No check that the destination is not inside the source: it is gone by then.
    assert_eq!(
        run(json!({"a": {"b": 1}}), &[op_from("move", "/a", "/a/c")]),
        Err(
            "move operation does not apply: doc is missing destination path: /a/c: missing value"
                .to_string()
        )
    );
    // An empty `from` is none, as MAP leaves it out.
    assert_eq!(
        run(json!({"a": 1}), &[op_from("move", "", "/b")]),
        Err(
            "move operation failed to decode from: operation, missing from field: missing value"
                .to_string()
        )
    );
    assert_eq!(
        run(json!({"a": 1}), &[op_from("copy", "/x/y", "/b")]),
        Err(
            "copy operation does not apply: doc is missing from path: /x/y: missing value"
                .to_string()
        )
    );
    assert_eq!(
        run(json!({"a": 1}), &[op_from("copy", "/a", "/x/y")]),
        Err(
            "copy operation does not apply: doc is missing destination path: /x/y: missing value"
                .to_string()
        )
    );
    assert_eq!(
        run(json!({"a": [1]}), &[op_from("copy", "/a/5", "/b")]),
        Err("error in copy for from: '/a/5': Unable to access invalid index: 5: invalid index referenced".to_string())
    );
}

#[test]
fn copies_add_at_most_three_mebibytes() {
    let big = "x".repeat(1024 * 1024);
    let copy = op_from("copy", "/s", "/l/-");
    let doc = json!({"s": big, "l": []});
    assert!(run(doc.clone(), &[copy.clone(), copy.clone()]).is_ok());
    // Each copy adds the string and its quotes: the third passes 3 MiB.
    assert_eq!(
        run(doc, &[copy.clone(), copy.clone(), copy]),
        Err(format!(
            "Unable to complete the copy, the accumulated size increase of copy is {}, exceeding the limit {}",
            3 * (1024 * 1024 + 2),
            COPY_SIZE_LIMIT
        ))
    );
}

#[test]
fn fields_that_go_cannot_quote_as_json() {
    assert_eq!(
        run(json!({}), &[op("ad\u{1}d", "/a", Some(json!(1)))]),
        Err("Unexpected kind: unknown".to_string())
    );
    assert_eq!(
        run(json!({}), &[op("replace", "/a\u{7}", Some(json!(1)))]),
        Err(
            "replace operation failed to decode path: invalid character 'a' in string escape code"
                .to_string()
        )
    );
    assert_eq!(
        run(json!({}), &[op("test", "/a\u{b}", Some(json!(1)))]),
        Err(
            "test operation failed to decode path: invalid character 'v' in string escape code"
                .to_string()
        )
    );
    assert_eq!(
        run(json!({"a": 1}), &[op_from("move", "/a\u{f0000}", "/b")]),
        Err(
            "move operation failed to decode from: invalid character 'U' in string escape code"
                .to_string()
        )
    );
    // Newlines, tabs and printable text quote as JSON.
    assert_eq!(
        run(json!({}), &[op("add", "/a\n\té", Some(json!(1)))]),
        Ok(json!({"a\n\té": 1}))
    );
}

#[test]
fn the_result_shares_what_no_operation_wrote_into() {
    let doc = Tree::from(
        json!({"metadata": {"labels": {"a": "1"}, "annotations": {"x": "y"}},
        "spec": {"containers": [{"name": "c"}], "volumes": [{"name": "v"}]}}),
    );
    let operations = [
        op("add", "/metadata/labels/b", Some(json!("2"))),
        op("replace", "/metadata/labels/a", Some(json!("3"))),
        op("test", "/spec/volumes/0/name", Some(json!("v"))),
        op_from("copy", "/spec/volumes", "/spec/copied"),
    ];
    let Ok(Applied::Patched(result)) = apply(&doc, &operations) else {
        panic!("patched");
    };
    let at = |tree: &Tree<'static>, pointer: &str| tree.pointer(pointer).expect(pointer).clone();
    for shared in ["/metadata/annotations", "/spec/containers", "/spec/volumes"] {
        assert!(at(&result, shared).same(&at(&doc, shared)), "{shared}");
    }
    assert!(at(&result, "/spec/copied").same(&at(&doc, "/spec/volumes")));
    let labels: Vec<&str> = result
        .pointer("/metadata/labels")
        .and_then(Tree::as_map)
        .map(|map| map.keys().collect())
        .unwrap_or_default();
    assert_eq!(labels, ["a", "b"], "in place, then appended");
    // Only reads: the document itself.
    let Ok(Applied::Patched(read)) = apply(&doc, &[op("test", "/nothing", None)]) else {
        panic!("a test of a missing key without a value passes");
    };
    assert!(read.same(&doc));
}
