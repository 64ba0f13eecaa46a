use serde_json::{Value, json};

use super::*;

fn key(k: &str) -> Token {
    Token::Key(k.to_string())
}

/// Runs `edit` on `before` with an undo log, checks the result and the changed flag,
/// then checks that rollback restores `before`.
fn check(before: Value, edit: impl FnOnce(&mut Editor<'_>), expected: Value, changed: bool) {
    let mut document = before.clone();
    let mut editor = Editor::new(&mut document, true);
    edit(&mut editor);
    assert_eq!(editor.changed(), changed, "changed flag");
    assert_eq!(editor.document(), &expected);
    editor.rollback();
    assert_eq!(document, before, "rollback restores the original");
}

#[test]
fn set_creates_missing_parents() {
    let mut doc = json!({"metadata": {"name": "p"}});
    let mut editor = Editor::new(&mut doc, true);
    editor
        .set(
            &[key("metadata"), key("annotations"), key("a/b")],
            json!("v"),
        )
        .unwrap();
    assert!(editor.changed());
    assert_eq!(
        doc,
        json!({"metadata": {"name": "p", "annotations": {"a/b": "v"}}})
    );
}

#[test]
fn set_same_value_is_no_change() {
    let mut doc = json!({"a": {"b": 1}});
    let mut editor = Editor::new(&mut doc, true);
    editor.set(&[key("a"), key("b")], json!(1)).unwrap();
    assert!(!editor.changed());
}

#[test]
fn set_through_a_scalar_is_an_error() {
    let mut doc = json!({"a": "text"});
    let mut editor = Editor::new(&mut doc, true);
    let error = editor.set(&[key("a"), key("b")], json!(1)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "cannot set $.a.b: $.a is a string, not an object or list"
    );
}

#[test]
fn set_appends_at_list_end_and_refuses_gaps() {
    let mut doc = json!({"a": [1]});
    let mut editor = Editor::new(&mut doc, true);
    editor.set(&[key("a"), Token::Index(1)], json!(2)).unwrap();
    assert!(editor.set(&[key("a"), Token::Index(5)], json!(2)).is_err());
    assert_eq!(doc, json!({"a": [1, 2]}));
}

#[test]
fn rollback_restores_every_kind_of_edit() {
    let before = json!({
        "metadata": {"labels": {"x": "1"}},
        "spec": {"containers": [{"name": "app", "image": "a"}], "volumes": [{"name": "v"}]}
    });
    let mut doc = before.clone();
    let mut editor = Editor::new(&mut doc, true);
    editor
        .set(&[key("metadata"), key("labels"), key("x")], json!("2"))
        .unwrap();
    editor
        .set(&[key("metadata"), key("annotations"), key("n")], json!("v"))
        .unwrap();
    editor.remove(&[key("spec"), key("volumes"), Token::Index(0)]);
    editor
        .merge(
            &[],
            json!({"spec": {"containers": [{"name": "app", "image": "b"}, {"name": "side", "image": "s"}]}}),
        )
        .unwrap();
    editor
        .json_patch(
            &serde_json::from_value(json!([{"op": "add", "path": "/kind", "value": "Pod"}]))
                .unwrap(),
        )
        .unwrap();
    assert!(editor.changed());
    editor.rollback();
    assert_eq!(doc, before);
}

/// Containers merge by `name` and a container's ports by `containerPort`, Kubernetes'
/// merge keys: a new port is added beside the existing one.
#[test]
fn merge_named_lists_by_name_and_appends_new_items() {
    let mut doc = json!({"spec": {"containers": [{"name": "app", "image": "a", "ports": [{"containerPort": 1}]}]}});
    let mut editor = Editor::new(&mut doc, false);
    editor
        .merge(
            &[],
            json!({"spec": {"containers": [
                {"name": "side", "image": "s"},
                {"name": "app", "ports": [{"containerPort": 2}]}
            ]}}),
        )
        .unwrap();
    assert_eq!(
        doc,
        json!({"spec": {"containers": [
            {"name": "app", "image": "a", "ports": [{"containerPort": 1}, {"containerPort": 2}]},
            {"name": "side", "image": "s"}
        ]}})
    );
}

fn merged(
    mut doc: serde_json::Value,
    at: &[Token],
    fragment: serde_json::Value,
) -> serde_json::Value {
    Editor::new(&mut doc, false).merge(at, fragment).unwrap();
    doc
}

#[test]
fn merging_an_empty_keyed_list_changes_nothing() {
    let pod = json!({"spec": {"containers": [{"name": "app", "image": "a"}]}});
    assert_eq!(
        merged(pod.clone(), &[], json!({"spec": {"containers": []}})),
        pod
    );
    let containers = [Token::Key("spec".into()), Token::Key("containers".into())];
    assert_eq!(merged(pod.clone(), &containers, json!([])), pod);
    // Into a missing key: nothing is added.
    let volumes = json!({"spec": {"volumes": []}});
    assert_eq!(merged(pod.clone(), &[], volumes), pod);
    let init = [
        Token::Key("spec".into()),
        Token::Key("initContainers".into()),
    ];
    assert_eq!(merged(pod.clone(), &init, json!([])), pod);
}

#[test]
fn lists_merge_on_kubernetes_merge_keys() {
    let pod = json!({"spec": {"containers": [{
        "name": "app",
        "volumeMounts": [{"name": "data", "mountPath": "/a"}],
        "env": [{"name": "A", "value": "1"}]
    }], "tolerations": [{"key": "x", "operator": "Exists"}]}});
    let out = merged(
        pod,
        &[],
        json!({"spec": {"containers": [{
            "name": "app",
            // One volume at a second path is a second mount.
            "volumeMounts": [{"name": "data", "mountPath": "/b"}],
            "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]
        }], "tolerations": [{"key": "y", "operator": "Exists"}]}}),
    );
    assert_eq!(
        out,
        json!({"spec": {"containers": [{
            "name": "app",
            "volumeMounts": [
                {"name": "data", "mountPath": "/a"},
                {"name": "data", "mountPath": "/b"}
            ],
            "env": [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]
        }], "tolerations": [{"key": "y", "operator": "Exists"}]}}),
        "tolerations have no merge key: replaced"
    );
}

#[test]
fn an_item_without_its_merge_key_is_an_error_not_a_replacement() {
    let mut doc = json!({"spec": {"containers": [{"name": "app"}]}});
    let error = Editor::new(&mut doc, false)
        .merge(&[], json!({"spec": {"containers": [{"image": "x"}]}}))
        .unwrap_err();
    assert!(
        matches!(
            error,
            EditError::MergeKeyMissing {
                key: "name",
                item: 0,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(doc, json!({"spec": {"containers": [{"name": "app"}]}}));
}

#[test]
fn merge_null_removes_a_key_and_a_second_merge_changes_nothing() {
    let fragment = json!({"metadata": {"labels": {"gone": null, "new": "v"}}});
    let mut doc = json!({"metadata": {"labels": {"gone": "x", "kept": "y"}}});
    let mut editor = Editor::new(&mut doc, false);
    editor.merge(&[], fragment.clone()).unwrap();
    assert!(editor.changed());
    assert_eq!(
        doc,
        json!({"metadata": {"labels": {"kept": "y", "new": "v"}}})
    );
    let mut editor = Editor::new(&mut doc, false);
    editor.merge(&[], fragment).unwrap();
    assert!(!editor.changed());
}

#[test]
fn merge_into_missing_location_creates_it_without_nulls() {
    let mut doc = json!({});
    let mut editor = Editor::new(&mut doc, false);
    editor
        .merge(
            &[key("spec"), key("nodeSelector")],
            json!({"a": "1", "b": null}),
        )
        .unwrap();
    assert_eq!(doc, json!({"spec": {"nodeSelector": {"a": "1"}}}));
}

#[test]
fn remove_existing_list_item_and_roll_back() {
    check(
        json!({"a": [1, 2, 3]}),
        |editor| editor.remove(&[key("a"), Token::Index(1)]),
        json!({"a": [1, 3]}),
        true,
    );
}

#[test]
fn remove_missing_is_no_change() {
    check(
        json!({"a": 1}),
        |editor| editor.remove(&[key("b")]),
        json!({"a": 1}),
        false,
    );
}
