//! The cases of kube-apiserver's `patch/json_patch_test.go` (`TestJSONPatch`), with their
//! CEL expressions evaluated into operations. Each document is the JSON the apiserver
//! encodes the test's typed Deployment to (`creationTimestamp: null`, `selector: null`,
//! `strategy: {}`, `containers: null`, `resources: {}`, `status: {}`; an empty label map
//! left out); each expected object is the patched JSON, before the apiserver decodes it
//! into a Deployment (where the Go test compares).
//!
//! Not reproduced: "jsonPatch invalid CEL initializer type" fails in CEL (`type mismatch:
//! unexpected type name …`) before any patch; "jsonPatch invalid CEL initializer field"
//! applies here, and its error (`strict decoding error: unknown field …`) is the
//! decoding after the patch, whose input the test below checks.

use serde_json::{Value, json};

use super::*;

fn deployment(metadata: Value, spec: Value, containers: Value) -> Value {
    let mut full = json!({
        "selector": null,
        "strategy": {},
        "template": {"metadata": {"creationTimestamp": null}, "spec": {"containers": containers}},
    });
    for (key, value) in spec.as_object().expect("spec").clone() {
        full[key] = value;
    }
    let mut meta = json!({"creationTimestamp": null});
    for (key, value) in metadata.as_object().expect("metadata").clone() {
        meta[key] = value;
    }
    json!({"metadata": meta, "spec": full, "status": {}})
}

fn with_replicas(replicas: i64) -> Value {
    deployment(json!({}), json!({"replicas": replicas}), Value::Null)
}

fn with_labels(labels: Value) -> Value {
    deployment(json!({"labels": labels}), json!({}), Value::Null)
}

fn without_labels() -> Value {
    deployment(json!({}), json!({}), Value::Null)
}

/// Containers as Go encodes `Container{Name: n}`.
fn with_containers(names: &[&str]) -> Value {
    let containers: Vec<Value> = names
        .iter()
        .map(|name| json!({"name": name, "resources": {}}))
        .collect();
    deployment(json!({}), json!({}), Value::Array(containers))
}

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

fn patched(doc: Value, operations: &[Operation<'static>]) -> Value {
    match apply(&Tree::from(&doc), operations) {
        Ok(Applied::Patched(tree)) => tree.to_value(),
        other => panic!("not patched: {other:?}"),
    }
}

#[test]
fn json_patch_with_false_test_operation() {
    let operations = [
        op("test", "/spec/replicas", Some(json!(100))),
        op("replace", "/spec/replicas", Some(json!(3))),
    ];
    assert_eq!(
        apply(&Tree::from(&with_replicas(1)), &operations),
        Ok(Applied::TestFailed {
            path: "/spec/replicas".to_string()
        })
    );
}

#[test]
fn json_patch_with_true_test_operation() {
    let operations = [
        op("test", "/spec/replicas", Some(json!(1))),
        op("replace", "/spec/replicas", Some(json!(3))),
    ];
    assert_eq!(patched(with_replicas(1), &operations), with_replicas(3));
}

#[test]
fn json_patch_remove_to_unset_field() {
    assert_eq!(
        patched(with_replicas(1), &[op("remove", "/spec/replicas", None)]),
        without_labels()
    );
}

#[test]
fn json_patch_remove_map_entry_by_key() {
    assert_eq!(
        patched(
            with_labels(json!({"x": "1", "y": "1"})),
            &[op("remove", "/metadata/labels/y", None)]
        ),
        with_labels(json!({"x": "1"}))
    );
}

#[test]
fn json_patch_remove_element_in_list() {
    let path = "/spec/template/spec/containers/1";
    assert_eq!(
        patched(
            with_containers(&["a", "b", "c"]),
            &[op("remove", path, None)]
        ),
        with_containers(&["a", "c"])
    );
}

#[test]
fn json_patch_copy_map_entry_by_key() {
    assert_eq!(
        patched(
            with_labels(json!({"x": "1"})),
            &[op_from("copy", "/metadata/labels/x", "/metadata/labels/y")]
        ),
        with_labels(json!({"x": "1", "y": "1"}))
    );
}

#[test]
fn json_patch_copy_first_element_to_end_of_list() {
    let operation = op_from(
        "copy",
        "/spec/template/spec/containers/0",
        "/spec/template/spec/containers/-",
    );
    assert_eq!(
        patched(with_containers(&["a", "b", "c"]), &[operation]),
        with_containers(&["a", "b", "c", "a"])
    );
}

#[test]
fn json_patch_move_map_entry_by_key() {
    assert_eq!(
        patched(
            with_labels(json!({"x": "1"})),
            &[op_from("move", "/metadata/labels/x", "/metadata/labels/y")]
        ),
        with_labels(json!({"y": "1"}))
    );
}

#[test]
fn json_patch_move_first_element_to_end_of_list() {
    let operation = op_from(
        "move",
        "/spec/template/spec/containers/0",
        "/spec/template/spec/containers/-",
    );
    assert_eq!(
        patched(with_containers(&["a", "b", "c"]), &[operation]),
        with_containers(&["b", "c", "a"])
    );
}

#[test]
fn json_patch_add_map_entry_by_key_and_value() {
    assert_eq!(
        patched(
            with_labels(json!({"y": "1"})),
            &[op("add", "/metadata/labels/x", Some(json!("2")))]
        ),
        with_labels(json!({"y": "1", "x": "2"}))
    );
}

#[test]
fn json_patch_add_map_value_to_field() {
    assert_eq!(
        patched(
            without_labels(),
            &[op("add", "/metadata/labels", Some(json!({"y": "2"})))]
        ),
        with_labels(json!({"y": "2"}))
    );
}

#[test]
fn json_patch_add_map_to_existing_map() {
    assert_eq!(
        patched(
            with_labels(json!({"x": "1"})),
            &[op("add", "/metadata/labels", Some(json!({"y": "2"})))]
        ),
        with_labels(json!({"y": "2"}))
    );
}

#[test]
fn json_patch_add_to_start_and_end_of_list() {
    let x = json!({"name": "x"});
    let mut start = with_containers(&["a"]);
    start["spec"]["template"]["spec"]["containers"] = json!([x, {"name": "a", "resources": {}}]);
    assert_eq!(
        patched(
            with_containers(&["a"]),
            &[op(
                "add",
                "/spec/template/spec/containers/0",
                Some(x.clone())
            )]
        ),
        start
    );
    let mut end = with_containers(&["a"]);
    end["spec"]["template"]["spec"]["containers"] = json!([{"name": "a", "resources": {}}, x]);
    assert_eq!(
        patched(
            with_containers(&["a"]),
            &[op(
                "add",
                "/spec/template/spec/containers/-",
                Some(x.clone())
            )]
        ),
        end
    );
}

#[test]
fn json_patch_replace_key_in_map() {
    // The key is not there: replace adds it.
    assert_eq!(
        patched(
            with_labels(json!({"y": "1"})),
            &[op("replace", "/metadata/labels/x", Some(json!("2")))]
        ),
        with_labels(json!({"y": "1", "x": "2"}))
    );
}

#[test]
fn json_patch_replace_map_value_of_unset_and_set_field() {
    let replace = [op("replace", "/metadata/labels", Some(json!({"y": "2"})))];
    assert_eq!(
        patched(without_labels(), &replace),
        with_labels(json!({"y": "2"}))
    );
    assert_eq!(
        patched(with_labels(json!({"x": "1"})), &replace),
        with_labels(json!({"y": "2"}))
    );
}

#[test]
fn json_patch_replace_first_element_in_list() {
    let mut expected = with_containers(&["a"]);
    expected["spec"]["template"]["spec"]["containers"] = json!([{"name": "x"}]);
    assert_eq!(
        patched(
            with_containers(&["a"]),
            &[op(
                "replace",
                "/spec/template/spec/containers/0",
                Some(json!({"name": "x"}))
            )]
        ),
        expected
    );
}

#[test]
fn json_patch_add_object_value_to_spec() {
    // Object.spec{selector: Object.spec.selector{}, replicas: 10}
    let value = json!({"selector": {}, "replicas": 10});
    let mut expected = without_labels();
    expected["spec"] = value.clone();
    assert_eq!(
        patched(without_labels(), &[op("add", "/spec", Some(value))]),
        expected
    );
}

#[test]
fn json_patch_label_maps_built_by_cel() {
    // "patch type has field access", "has field testing" and "equality": the values are
    // CEL's; the patch adds the map they make.
    for labels in [
        json!({"op": "opValue", "path": "pathValue", "from": "fromValue", "value": "valueValue"}),
        json!({"op": "true", "path": "true", "from": "true", "value": "true",
            "op-unset": "false", "path-unset": "false", "from-unset": "false",
            "value-unset": "false"}),
        json!({"empty": "true", "partial": "true", "same-all": "true", "different-op": "false",
            "different-path": "false", "different-from": "false", "different-value": "false"}),
    ] {
        assert_eq!(
            patched(
                without_labels(),
                &[op("add", "/metadata/labels", Some(labels.clone()))]
            ),
            with_labels(labels)
        );
    }
}

#[test]
fn json_patch_key_escaping() {
    let operations = [
        op("add", "/metadata/labels", Some(json!({}))),
        op("add", "/metadata/labels/k8s.io~1x~0y", Some(json!("true"))),
    ];
    assert_eq!(
        patched(without_labels(), &operations),
        with_labels(json!({"k8s.io/x~y": "true"}))
    );
}

#[test]
fn json_patch_with_cel_initializer() {
    let container = json!({"name": "x", "ports": [{"containerPort": 8080}]});
    let mut expected = with_containers(&["a"]);
    expected["spec"]["template"]["spec"]["containers"] =
        json!([{"name": "a", "resources": {}}, container]);
    assert_eq!(
        patched(
            with_containers(&["a"]),
            &[op(
                "add",
                "/spec/template/spec/containers/-",
                Some(container.clone())
            )]
        ),
        expected
    );
}

#[test]
fn json_patch_invalid_cel_initializer_field_reaches_the_decoding() {
    // The patch applies; the apiserver's strict decoding then finds
    // spec.template.spec.containers[1].ports[0].containerPortZ.
    let container = json!({"name": "x", "ports": [{"containerPortZ": 8080}]});
    let result = patched(
        with_containers(&["a"]),
        &[op(
            "add",
            "/spec/template/spec/containers/-",
            Some(container),
        )],
    );
    assert_eq!(
        result["spec"]["template"]["spec"]["containers"][1]["ports"][0]["containerPortZ"],
        json!(8080)
    );
}

#[test]
fn json_patch_replace_end_of_list_with_dash_not_allowed() {
    let operation = op(
        "replace",
        "/spec/template/spec/containers/-",
        Some(json!({"name": "x"})),
    );
    let error = apply(&Tree::from(&with_containers(&["a"])), &[operation]).expect_err("refused");
    assert_eq!(
        format!("JSON Patch: {error}"),
        "JSON Patch: replace operation does not apply: doc is missing key: \
         /spec/template/spec/containers/-: missing value"
    );
}
