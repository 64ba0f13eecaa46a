//! evanphx's `test` cases, its `add` into an empty list, and `Equal`.

use serde_json::{Value, json};

use super::super::node::{Doc, Node};
use super::*;

#[test]
fn tests() {
    let failed = |path: &str| {
        Ok(Applied::TestFailed {
            path: path.to_string(),
        })
    };
    for (doc, patch, passes, path) in [
        (
            r#"{"baz": "qux", "foo": ["a", 2, "c"]}"#,
            json!([{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": 2}]),
            true,
            "",
        ),
        (
            r#"{"baz": "qux"}"#,
            json!([{"op": "test", "path": "/baz", "value": "bar"}]),
            false,
            "/baz",
        ),
        (
            r#"{"baz": "qux", "foo": ["a", 2, "c"]}"#,
            json!([{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": "c"}]),
            false,
            "/foo/1",
        ),
        (
            r#"{"baz": "qux"}"#,
            json!([{"op": "test", "path": "/foo", "value": 42}]),
            false,
            "/foo",
        ),
        // The test file passes these two: its null value is no value. MAP's is one.
        (
            r#"{"baz": "qux"}"#,
            json!([{"op": "test", "path": "/foo", "value": null}]),
            false,
            "/foo",
        ),
        (
            r#"{"foo": null}"#,
            json!([{"op": "test", "path": "/foo", "value": null}]),
            false,
            "/foo",
        ),
        // The test file fails these two; MAP's null value equals {} and [].
        (
            r#"{"foo": {}}"#,
            json!([{"op": "test", "path": "/foo", "value": null}]),
            true,
            "",
        ),
        (
            r#"{"foo": []}"#,
            json!([{"op": "test", "path": "/foo", "value": null}]),
            true,
            "",
        ),
        (
            r#"{"baz/foo": "qux"}"#,
            json!([{"op": "test", "path": "/baz~1foo", "value": "qux"}]),
            true,
            "",
        ),
        (
            r#"{"foo": []}"#,
            json!([{"op": "test", "path": "/foo"}]),
            false,
            "/foo",
        ),
        (
            r#"{"baz": []}"#,
            json!([{"op": "test", "path": "/foo"}]),
            true,
            "",
        ),
    ] {
        let result = run(doc, patch.clone(), COPY_SIZE_LIMIT);
        if passes {
            assert!(
                matches!(result, Ok(Applied::Patched(_))),
                "{doc} {patch}: {result:?}"
            );
        } else {
            assert_eq!(result, failed(path), "{doc} {patch}");
        }
    }
}

#[test]
fn adds_into_an_empty_list() {
    for (key, message) in [
        ("0", None),
        (
            "1",
            Some("Unable to access invalid index: 1: invalid index referenced"),
        ),
        ("-1", None),
        (
            "-2",
            Some("Unable to access invalid index: -2: invalid index referenced"),
        ),
    ] {
        let result = run(
            r#"{"l": []}"#,
            json!([{"op": "add", "path": format!("/l/{key}")}]),
            0,
        );
        match message {
            None => assert!(matches!(result, Ok(Applied::Patched(_))), "{key}"),
            Some(message) => assert_eq!(
                result.map(|_| ()),
                Err(Error::Failed {
                    op: "add",
                    path: format!("/l/{key}"),
                    cause: if key == "1" {
                        Cause::InvalidIndex(1)
                    } else {
                        Cause::InvalidIndex(-2)
                    },
                }),
                "{message}"
            ),
        }
    }
}

/// Go's `Equal(a, b)`: both texts read as nodes, a top-level `null` of text `null`.
fn go_equal(a: &Value, b: &Value) -> bool {
    let node = match a {
        Value::Null => Node::RawNull,
        other => Node::Tree(Tree::from(other)),
    };
    let b = Tree::from(b);
    super::equal::equal(Doc::Node(&node), super::equal::Value::top(&b)).expect("no panic")
}

#[test]
fn equality() {
    for (name, a, b, equal) in [
        (
            "ExtraKeyFalse",
            json!({"foo": "bar"}),
            json!({"foo": "bar", "baz": "qux"}),
            false,
        ),
        (
            "StripWhitespaceTrue",
            json!({"foo": "bar", "baz": "qux"}),
            json!({"foo": "bar", "baz": "qux"}),
            true,
        ),
        (
            "KeysOutOfOrderTrue",
            json!({"baz": "qux", "foo": "bar"}),
            json!({"foo": "bar", "baz": "qux"}),
            true,
        ),
        (
            "ComparingNullFalse",
            json!({"foo": null}),
            json!({"foo": "bar"}),
            false,
        ),
        (
            "ComparingNullTrue",
            json!({"foo": null}),
            json!({"foo": null}),
            true,
        ),
        (
            "ArrayOutOfOrderFalse",
            json!(["foo", "bar", "baz"]),
            json!(["bar", "baz", "foo"]),
            false,
        ),
        (
            "ArrayTrue",
            json!(["foo", "bar", "baz"]),
            json!(["foo", "bar", "baz"]),
            true,
        ),
        (
            "NonStringTypesTrue",
            json!({"int": 6, "bool": true, "float": 7.0, "string": "the_string", "null": null}),
            json!({"int": 6, "bool": true, "float": 7.0, "string": "the_string", "null": null}),
            true,
        ),
        (
            "NestedNullFalse",
            json!({"foo": ["an", "array"], "bar": {"an": "object"}}),
            json!({"foo": null, "bar": null}),
            false,
        ),
        ("NullCompareStringFalse", json!("foo"), json!(null), false),
        ("NullCompareIntFalse", json!(6), json!(null), false),
        ("NullCompareFloatFalse", json!(6.01), json!(null), false),
        ("NullCompareBoolFalse", json!(false), json!(null), false),
    ] {
        assert_eq!(go_equal(&a, &b), equal, "{name}");
        assert_eq!(go_equal(&b, &a), equal, "{name}, reversed");
    }
}
