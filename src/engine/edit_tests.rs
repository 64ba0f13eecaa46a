use serde_json::{Value, json};

use super::*;
use crate::policy::model::Position;
use crate::tree::Tree;

fn key(k: &str) -> Token {
    Token::Key(k.to_string())
}

/// Runs `edit` on `before`, checks the result and whether the root differs from the
/// one the edit started from, then checks that the root kept from before the edit
/// still holds `before`.
fn check(
    before: Value,
    edit: impl FnOnce(&mut Editor<'_, 'static>),
    expected: Value,
    changed: bool,
) {
    let original = Tree::from(&before);
    let mut object = original.clone();
    edit(&mut Editor::new(&mut object));
    assert_eq!(object != original, changed, "changed flag");
    assert_eq!(object.to_value(), expected);
    assert_eq!(
        original.to_value(),
        before,
        "the old root keeps the original"
    );
}

#[test]
fn set_creates_missing_parents() {
    let object = json!({"metadata": {"name": "p"}});
    let mut object = Tree::from(object);
    let original = object.clone();
    let mut editor = Editor::new(&mut object);
    editor
        .set(
            &[key("metadata"), key("annotations"), key("a/b")],
            Tree::from(json!("v")),
        )
        .unwrap();
    assert!(object != original);
    assert_eq!(
        object,
        json!({"metadata": {"name": "p", "annotations": {"a/b": "v"}}})
    );
}

#[test]
fn set_same_value_is_no_change() {
    let object = json!({"a": {"b": 1}});
    let mut object = Tree::from(object);
    let original = object.clone();
    let mut editor = Editor::new(&mut object);
    editor
        .set(&[key("a"), key("b")], Tree::from(json!(1)))
        .unwrap();
    assert!(object == original);
}

/// A step that does not fit what is there says what it needs: an index into an object
/// needs a list, a key into a list an object.
#[test]
fn a_step_of_the_wrong_kind_says_what_it_needs() {
    let mut object = Tree::from(json!({"spec": {"nodeSelector": {"a": "b"}, "list": [1]}}));
    let mut editor = Editor::new(&mut object);
    let into_map = [key("spec"), key("nodeSelector"), Token::Index(0)];
    assert_eq!(
        editor
            .set(&into_map, Tree::from(json!(1)))
            .unwrap_err()
            .to_string(),
        "cannot set $.spec.nodeSelector[0]: $.spec.nodeSelector is an object, not a list"
    );
    let into_list = [key("spec"), key("list"), key("x")];
    assert_eq!(
        editor
            .set(&into_list, Tree::from(json!(1)))
            .unwrap_err()
            .to_string(),
        "cannot set $.spec.list.x: $.spec.list is a list, not an object"
    );
}

/// At the root a merge takes an object, and merges into an object: anything else was
/// once a silent no-op.
#[test]
fn a_merge_at_the_root_takes_an_object() {
    for (object, fragment, message) in [
        (
            json!({"metadata": {}}),
            json!([{"metadata": {"labels": {"a": "b"}}}]),
            "cannot merge at the root: the value is a list, not an object",
        ),
        (
            json!({"metadata": {}}),
            json!(5),
            "cannot merge at the root: the value is a number, not an object",
        ),
        (
            json!([1]),
            json!({"a": 1}),
            "cannot merge at the root: the object is a list, not an object",
        ),
    ] {
        let mut object = Tree::from(object);
        let error = Editor::new(&mut object)
            .merge(&[], Tree::from(fragment))
            .unwrap_err();
        assert_eq!(error.to_string(), message);
    }
}

#[test]
fn set_through_a_scalar_is_an_error() {
    let object = json!({"a": "text"});
    let mut object = Tree::from(object);
    let mut editor = Editor::new(&mut object);
    let error = editor
        .set(&[key("a"), key("b")], Tree::from(json!(1)))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "cannot set $.a.b: $.a is a string, not an object"
    );
}

#[test]
fn set_appends_at_list_end_and_refuses_gaps() {
    let object = json!({"a": [1]});
    let mut object = Tree::from(object);
    let mut editor = Editor::new(&mut object);
    editor
        .set(&[key("a"), Token::Index(1)], Tree::from(json!(2)))
        .unwrap();
    assert!(
        editor
            .set(&[key("a"), Token::Index(5)], Tree::from(json!(2)))
            .is_err()
    );
    assert_eq!(object, json!({"a": [1, 2]}));
}

/// Containers merge by `name` and a container's ports by `containerPort`, Kubernetes'
/// merge keys: a new port is added beside the existing one.
#[test]
fn merge_named_lists_by_name_and_appends_new_items() {
    let object = json!({"spec": {"containers": [{"name": "app", "image": "a", "ports": [{"containerPort": 1}]}]}});
    let mut object = Tree::from(object);
    let mut editor = Editor::new(&mut object);
    editor
        .merge(
            &[],
            Tree::from(json!({"spec": {"containers": [
                {"name": "side", "image": "s"},
                {"name": "app", "ports": [{"containerPort": 2}]}
            ]}})),
        )
        .unwrap();
    assert_eq!(
        object,
        json!({"spec": {"containers": [
            {"name": "app", "image": "a", "ports": [{"containerPort": 1}, {"containerPort": 2}]},
            {"name": "side", "image": "s"}
        ]}})
    );
}

fn merged(
    object: serde_json::Value,
    at: &[Token],
    fragment: serde_json::Value,
) -> serde_json::Value {
    let mut object = Tree::from(object);
    Editor::new(&mut object)
        .merge(at, Tree::from(fragment))
        .unwrap();
    object.to_value()
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
    let object = json!({"spec": {"containers": [{"name": "app"}]}});
    let mut object = Tree::from(object);
    let error = Editor::new(&mut object)
        .merge(
            &[],
            Tree::from(json!({"spec": {"containers": [{"image": "x"}]}})),
        )
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
    assert_eq!(object, json!({"spec": {"containers": [{"name": "app"}]}}));
}

#[test]
fn merge_null_removes_a_key_and_a_second_merge_changes_nothing() {
    let fragment = json!({"metadata": {"labels": {"gone": null, "new": "v"}}});
    let object = json!({"metadata": {"labels": {"gone": "x", "kept": "y"}}});
    let mut object = Tree::from(object);
    let original = object.clone();
    let mut editor = Editor::new(&mut object);
    editor.merge(&[], Tree::from(fragment.clone())).unwrap();
    assert!(object != original);
    assert_eq!(
        object,
        json!({"metadata": {"labels": {"kept": "y", "new": "v"}}})
    );
    let original = object.clone();
    let mut editor = Editor::new(&mut object);
    editor.merge(&[], Tree::from(fragment)).unwrap();
    assert!(object == original);
}

/// The object `{}` becomes when `fragment` is merged at `at`.
fn merged_into_empty(at: &[Token], fragment: Value) -> Result<Value, EditError> {
    let mut object = Tree::from(json!({}));
    Editor::new(&mut object).merge(at, Tree::from(fragment))?;
    Ok(object.to_value())
}

#[test]
fn merge_into_missing_location_creates_it_without_nulls() {
    let object = merged_into_empty(
        &[key("spec"), key("nodeSelector")],
        json!({"a": "1", "b": null}),
    )
    .unwrap();
    assert_eq!(object, json!({"spec": {"nodeSelector": {"a": "1"}}}));
}

/// What a merge writes where nothing was: nulls dropped at every depth, inside keyed
/// list items too, an empty keyed list left out with its key, the key order kept.
#[test]
fn merge_into_missing_location_prunes_at_every_depth() {
    let object = merged_into_empty(
        &[key("spec")],
        json!({
            "z": {"gone": null, "kept": {"deeper": null, "x": 1}},
            "containers": [{"name": "a", "image": null, "env": [{"name": "E", "value": null}]}],
            "volumes": [],
            "a": [null, 1],
            "m": null,
        }),
    )
    .unwrap();
    assert_eq!(
        serde_json::to_string(&object).unwrap(),
        r#"{"spec":{"z":{"kept":{"x":1}},"containers":[{"name":"a","env":[{"name":"E"}]}],"a":[null,1]}}"#
    );
    let error = merged_into_empty(
        &[key("spec")],
        json!({"containers": [{"name": "a"}, {"image": "i"}]}),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "cannot merge into $.spec.containers: Kubernetes merges this list by \"name\", \
         and item 1 of the value has no \"name\""
    );
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

fn if_absent() -> MergeOptions {
    MergeOptions {
        if_absent: true,
        position: Position::Last,
    }
}

/// With `if_absent`, a merge adds keys and named items that are missing, at any depth,
/// and replaces, removes or merges into nothing: a named item that is there stays as it is.
#[test]
fn merge_if_absent_adds_only_what_is_missing() {
    check(
        json!({"spec": {"securityContext": {"runAsNonRoot": false, "other": 1},
                        "containers": [{"name": "app", "image": "a"}], "args": ["x"]}}),
        |editor| {
            editor
                .merge_with(
                    &[],
                    Tree::from(json!({"spec": {
                        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}, "other": null},
                        "containers": [{"name": "app", "image": "b", "imagePullPolicy": "Always"}, {"name": "side", "image": "s"}],
                        "args": ["y"],
                        "hostNetwork": false
                    }})),
                    if_absent(),
                )
                .unwrap();
        },
        json!({"spec": {"securityContext": {"runAsNonRoot": false, "other": 1, "seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": [{"name": "app", "image": "a"}, {"name": "side", "image": "s"}],
                        "args": ["x"], "hostNetwork": false}}),
        true,
    );
}

/// A null value counts as absent.
#[test]
fn merge_if_absent_fills_a_null() {
    check(
        json!({"spec": {"dnsPolicy": null}}),
        |editor| {
            editor
                .merge_with(
                    &[],
                    Tree::from(json!({"spec": {"dnsPolicy": "None"}})),
                    if_absent(),
                )
                .unwrap();
        },
        json!({"spec": {"dnsPolicy": "None"}}),
        true,
    );
}

/// `Position::First` puts new named items before the existing ones, in the order given,
/// and leaves existing items where they are.
#[test]
fn merge_first_puts_new_named_items_first() {
    let options = MergeOptions {
        if_absent: false,
        position: Position::First,
    };
    check(
        json!({"spec": {"initContainers": [{"name": "a"}, {"name": "b"}]}}),
        |editor| {
            editor
                .merge_with(
                    &[],
                    Tree::from(json!({"spec": {"initContainers": [{"name": "x"}, {"name": "b", "image": "i"}, {"name": "y"}]}})),
                    options,
                )
                .unwrap();
        },
        json!({"spec": {"initContainers": [{"name": "x"}, {"name": "y"}, {"name": "a"}, {"name": "b", "image": "i"}]}}),
        true,
    );
}

#[test]
fn append_adds_items_not_already_there() {
    let tolerations = [key("spec"), key("tolerations")];
    check(
        json!({"spec": {"tolerations": [{"key": "a", "operator": "Exists"}]}}),
        |editor| {
            editor
                .append(
                    &tolerations,
                    vec![
                        Tree::from(json!({"operator": "Exists", "key": "a"})),
                        Tree::from(json!({"key": "b", "operator": "Exists"})),
                        Tree::from(json!({"key": "b", "operator": "Exists"})),
                    ],
                    Position::Last,
                )
                .unwrap();
        },
        json!({"spec": {"tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]}}),
        true,
    );
    check(
        json!({"spec": {"args": ["--v"]}}),
        |editor| {
            editor
                .append(
                    &[key("spec"), key("args")],
                    vec![
                        Tree::from(json!("--a")),
                        Tree::from(json!("--v")),
                        Tree::from(json!("--b")),
                    ],
                    Position::First,
                )
                .unwrap();
        },
        json!({"spec": {"args": ["--a", "--b", "--v"]}}),
        true,
    );
}

#[test]
fn append_creates_a_missing_list_and_changes_nothing_when_all_are_there() {
    check(
        json!({"spec": {}}),
        |editor| {
            editor
                .append(
                    &[key("spec"), key("imagePullSecrets")],
                    vec![
                        Tree::from(json!({"name": "r"})),
                        Tree::from(json!({"name": "r"})),
                    ],
                    Position::Last,
                )
                .unwrap();
        },
        json!({"spec": {"imagePullSecrets": [{"name": "r"}]}}),
        true,
    );
    check(
        json!({"spec": {"args": ["a"]}}),
        |editor| {
            editor
                .append(
                    &[key("spec"), key("args")],
                    vec![Tree::from(json!("a"))],
                    Position::First,
                )
                .unwrap();
        },
        json!({"spec": {"args": ["a"]}}),
        false,
    );
}

#[test]
fn append_to_a_value_that_is_not_a_list_fails() {
    let object = json!({"spec": {"args": "a"}});
    let mut object = Tree::from(object);
    let error = Editor::new(&mut object)
        .append(
            &[key("spec"), key("args")],
            vec![Tree::from(json!("b"))],
            Position::Last,
        )
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "cannot append to $.spec.args: it is a string, not a list"
    );
}
