//! The patch and the live object validated as SMD validates them, with its messages.

use serde_json::json;

use super::*;

#[test]
fn scalar_type_errors_are_worded_as_smd_words_them() {
    for (patch, message) in [
        (
            json!({"spec": {"priority": "high"}}),
            ".spec.priority: expected numeric (int or float), got string",
        ),
        (
            json!({"spec": {"priority": {"a": 1}}}),
            ".spec.priority: expected numeric (int or float), got map[string]interface {}",
        ),
        (
            json!({"spec": {"hostname": 5}}),
            ".spec.hostname: expected string, got &value.valueUnstructured{Value:5}",
        ),
        (
            json!({"spec": {"hostname": ["a"]}}),
            r#".spec.hostname: expected string, got &value.valueUnstructured{Value:[]interface {}{"a"}}"#,
        ),
        (
            json!({"spec": {"hostNetwork": "yes"}}),
            ".spec.hostNetwork: expected boolean, got &{yes}",
        ),
        (
            json!({"metadata": {"creationTimestamp": {"a": 1}}}),
            ".metadata.creationTimestamp: expected any scalar, got &{map[a:1]}",
        ),
        (
            json!({"spec": {"overhead": {"cpu": [1, 2]}}}),
            ".spec.overhead.cpu: expected any scalar, got &{[1 2]}",
        ),
        (json!({"spec": 3}), ".spec: expected map, got &{3}"),
        (
            json!({"spec": {"containers": {"name": "a"}}}),
            ".spec.containers: expected list, got &{map[name:a]}",
        ),
    ] {
        assert_eq!(
            patch_error(patch.clone()),
            format!("{INVALID}{message}"),
            "{patch}"
        );
    }
}

#[test]
fn null_is_every_type() {
    let live = json!({"spec": {"hostname": "h"}});
    let patch = json!({"metadata": {"labels": null, "creationTimestamp": null}, "spec": {
        "hostname": null, "containers": null, "priority": null, "affinity": null,
    }});
    assert_eq!(
        run(live, patch),
        Ok(
            json!({"spec": {"hostname": null, "containers": null, "priority": null,
            "affinity": null}, "metadata": {"labels": null, "creationTimestamp": null}})
        )
    );
}

#[test]
fn keyed_list_and_set_items_without_keys() {
    for (patch, message) in [
        (
            json!({"spec": {"containers": [{"name": "a"}, null]}}),
            ".spec.containers: element 1: associative list with keys may not have a null element",
        ),
        (
            json!({"spec": {"containers": ["a"]}}),
            ".spec.containers: element 0: associative list with keys may not have non-map elements",
        ),
        (
            json!({"metadata": {"finalizers": [{"a": 1}]}}),
            ".metadata.finalizers: element 0: associative list without keys has an element that's a map type",
        ),
        (
            json!({"metadata": {"finalizers": [["a"]]}}),
            ".metadata.finalizers: element 0: not supported: associative list with lists as elements",
        ),
        (
            json!({"metadata": {"finalizers": ["a", null]}}),
            ".metadata.finalizers: element 1: associative list without keys has an element that's an explicit null",
        ),
        (
            json!({"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}),
            r#".spec.containers: duplicate entries for key [name="a"]"#,
        ),
        (
            json!({"metadata": {"finalizers": ["f", "f"]}}),
            r#".metadata.finalizers: duplicate entries for key [="f"]"#,
        ),
        (
            json!({"spec": {"containers": [{"name": "a", "ports": [
                {"containerPort": 80}, {"containerPort": 80.0, "protocol": "TCP"},
            ]}]}}),
            r#".spec.containers[name="a"].ports: duplicate entries for key [containerPort=80,protocol="TCP"]"#,
        ),
    ] {
        assert_eq!(
            patch_error(patch.clone()),
            format!("{INVALID}{message}"),
            "{patch}"
        );
    }
}

#[test]
fn errors_below_list_items_name_them_by_key_or_index() {
    assert_eq!(
        patch_error(json!({"spec": {"containers": [{"name": "a", "imagex": "i"}]}})),
        format!(r#"{INVALID}.spec.containers[name="a"].imagex: field not declared in schema"#)
    );
    assert_eq!(
        patch_error(json!({"spec": {"containers": [{"name": "a", "args": [1]}]}})),
        format!(
            r#"{INVALID}.spec.containers[name="a"].args[0]: expected string, got &value.valueUnstructured{{Value:1}}"#
        )
    );
    assert_eq!(
        patch_error(json!({"metadata": {"finalizers": [1.5]}})),
        format!(
            "{INVALID}.metadata.finalizers[=1.5]: expected string, got &value.valueUnstructured{{Value:1.5}}"
        )
    );
}

#[test]
fn several_errors_are_listed_and_a_map_stops_at_its_first_undeclared_field() {
    let patch = json!({"spec": {"hostname": 1, "nodeName": 2, "bogus": 3, "priority": "x"},
        "metadata": {"name": 4}});
    assert_eq!(
        patch_error(patch),
        format!(
            "{INVALID}errors:\n  .spec.hostname: expected string, got &value.valueUnstructured{{Value:1}}\
             \n  .spec.nodeName: expected string, got &value.valueUnstructured{{Value:2}}\
             \n  .spec.bogus: field not declared in schema\
             \n  .metadata.name: expected string, got &value.valueUnstructured{{Value:4}}"
        )
    );
    // A container without a name is keyed by the default name, "".
    assert_eq!(
        patch_error(json!({"spec": {"containers": [{"image": 1}, {"name": 2}]}})),
        format!(
            "{INVALID}errors:\n  .spec.containers[name=\"\"].image: expected string, got \
             &value.valueUnstructured{{Value:1}}\n  .spec.containers[name=2].name: expected \
             string, got &value.valueUnstructured{{Value:2}}"
        )
    );
}

#[test]
fn an_item_without_any_key_ends_the_look_at_its_list() {
    // A ServiceAccount's secrets are keyed by a name without a default.
    let account = kind("", "v1", "ServiceAccount");
    assert_eq!(
        run_as(
            account,
            json!({}),
            json!({"secrets": [{"name": "a", "uid": 1}, {"namespace": 1}, {"name": 2}]})
        ),
        Err(format!(
            "{INVALID}errors:\n  .secrets[name=\"a\"].uid: expected string, got \
             &value.valueUnstructured{{Value:1}}\n  .secrets: element 1: associative list with \
             keys has an element that omits all key fields [\"name\"] (and doesn't have default \
             values for any key fields)"
        ))
    );
}

#[test]
fn the_live_object_is_validated_with_duplicates_allowed() {
    assert_eq!(
        run(
            json!({"spec": {"bogus": 1}}),
            json!({"spec": {"hostname": "h"}})
        ),
        Err(
            "error applying patch: failed to convert original object to typed object: \
             .spec.bogus: field not declared in schema"
                .to_string()
        )
    );
    let live = json!({"metadata": {"finalizers": ["f", "f"]}});
    assert_eq!(
        run(live, json!({"metadata": {"finalizers": ["g"]}})),
        Ok(json!({"metadata": {"finalizers": ["f", "f", "g"]}}))
    );
}

/// A CEL null in an ApplyConfiguration is Go's `structpb.NullValue` to the apiserver: no
/// type's value, worded as SMD's `%T`, `%#v` and `%v` print it (the first two recorded
/// from kube-apiserver v1.36.2, cases 102 and 103 of tests/conformance).
#[test]
fn a_cel_null_is_no_types_value() {
    for (patch, message) in [
        (
            json!({"spec": {"activeDeadlineSeconds": null}}),
            ".spec.activeDeadlineSeconds: expected numeric (int or float), got structpb.NullValue",
        ),
        (
            json!({"metadata": {"labels": {"remove-me": null}}}),
            ".metadata.labels.remove-me: expected string, got &value.valueUnstructured{Value:0}",
        ),
        (
            json!({"spec": {"hostNetwork": null}}),
            ".spec.hostNetwork: expected boolean, got &{NULL_VALUE}",
        ),
        (
            json!({"spec": {"affinity": null}}),
            ".spec.affinity: expected map, got &{NULL_VALUE}",
        ),
        (
            json!({"spec": {"containers": [{"name": "a"}, null]}}),
            ".spec.containers: element 1: associative list with keys may not have non-map elements",
        ),
    ] {
        let refused = apply(
            &Tree::from(json!({})),
            Live::Unchecked,
            &Tree::from(&patch),
            pod(),
            Nulls::Cel,
        )
        .map(|merged| merged.to_value())
        .expect_err("refused")
        .to_string();
        assert_eq!(refused, format!("{INVALID}{message}"), "{patch}");
        // The same nulls from JSON are every type's value; a keyed list's item is no
        // type's value but a map.
        match run(json!({}), patch.clone()) {
            Ok(_) => {}
            Err(error) => assert_eq!(
                error,
                format!(
                    "{INVALID}.spec.containers: element 1: associative list with keys may not have a null element"
                )
            ),
        }
    }
}
