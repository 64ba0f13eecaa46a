//! The cases of kube-apiserver's `patch/smd_test.go` (`TestApplyConfiguration`), with
//! their CEL expressions evaluated: each patch is the `Object{…}` the expression returns,
//! with the Deployment's `apiVersion` and `kind`, and each object is the unstructured
//! form of the test's typed Deployment (`creationTimestamp: null`, `selector: null`,
//! `strategy: {}`, `containers: null`, `resources: {}`, `status: {}`, as
//! `runtime.DefaultUnstructuredConverter` writes a zero Deployment), which is what the
//! Go test compares.
//!
//! Three cases fail before any merge, in CEL, and are not reproduced here: "apply
//! configuration with invalid type name" (`type mismatch: unexpected type name
//! "Object.specx"…`, a check of the initializers' names) and "… with invalid return
//! type" and "… with invalid initializer return type" (compile-time return type checks).

use serde_json::{Value, json};

use super::*;
use crate::k8s::schema;

/// The unstructured form of a Deployment with `spec`'s fields set over a zero spec, and
/// `pod_spec` as its pod template's spec.
fn deployment(spec: Value, pod_spec: Value) -> Value {
    let mut full = json!({
        "selector": null,
        "strategy": {},
        "template": {"metadata": {"creationTimestamp": null}, "spec": pod_spec},
    });
    for (key, value) in spec.as_object().expect("spec fields").clone() {
        full[key] = value;
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"creationTimestamp": null},
        "spec": full,
        "status": {},
    })
}

fn no_containers() -> Value {
    json!({"containers": null})
}

/// The Object a policy's expression returns, as the apiserver gives it the
/// Deployment's apiVersion and kind.
fn patch(fields: Value) -> Value {
    let mut patch = json!({"apiVersion": "apps/v1", "kind": "Deployment"});
    for (key, value) in fields.as_object().expect("fields").clone() {
        patch[key] = value;
    }
    patch
}

fn run(live: &Value, patch: &Value) -> Result<Value, String> {
    let root = schema::builtin()
        .expect("schema")
        .kind("apps", "v1", "Deployment")
        .expect("Deployment");
    apply(
        &Tree::from(live),
        Live::Unchecked,
        &Tree::from(patch),
        root,
        Nulls::Json,
    )
    .map(|merged| merged.to_value())
    .map_err(|error| error.to_string())
}

#[test]
fn apply_configuration_add_to_list_type_map() {
    let live = deployment(
        json!({}),
        json!({"containers": null, "volumes": [{"name": "x"}]}),
    );
    let patch = patch(json!({"spec": {"template": {"spec": {"volumes": [{"name": "y"}]}}}}));
    let expected = deployment(
        json!({}),
        json!({"containers": null, "volumes": [{"name": "x"}, {"name": "y"}]}),
    );
    assert_eq!(run(&live, &patch), Ok(expected));
}

#[test]
fn apply_configuration_update_list_type_map_entry() {
    let live = deployment(
        json!({}),
        json!({"containers": null, "volumes": [{"name": "x"}, {"name": "y"}]}),
    );
    let patch = patch(json!({"spec": {"template": {"spec": {
        "volumes": [{"name": "y", "hostPath": {"path": "a"}}],
    }}}}));
    let expected = deployment(
        json!({}),
        json!({"containers": null, "volumes": [
            {"name": "x"},
            {"name": "y", "hostPath": {"path": "a"}},
        ]}),
    );
    assert_eq!(run(&live, &patch), Ok(expected));
}

#[test]
fn apply_configuration_with_conditionals() {
    // object.spec.replicas % 2 == 0 ? object.spec.replicas + 1 : object.spec.replicas
    let live = deployment(json!({"replicas": 2}), no_containers());
    let patch = patch(json!({"spec": {"replicas": 3}}));
    assert_eq!(
        run(&live, &patch),
        Ok(deployment(json!({"replicas": 3}), no_containers()))
    );
}

#[test]
fn apply_configuration_with_old_object() {
    // The same expression on oldObject, whose replicas are 2.
    let live = deployment(json!({"replicas": 1}), no_containers());
    let patch = patch(json!({"spec": {"replicas": 3}}));
    assert_eq!(
        run(&live, &patch),
        Ok(deployment(json!({"replicas": 3}), no_containers()))
    );
}

#[test]
fn complex_apply_configuration_initialization() {
    let live = deployment(json!({}), no_containers());
    let patch = patch(json!({"spec": {
        "replicas": 1,
        "template": {
            "metadata": {"labels": {"app": "nginx"}},
            "spec": {"containers": [{
                "name": "nginx",
                "image": "nginx:1.14.2",
                "ports": [{"containerPort": 80}],
                "resources": {"limits": {"cpu": "128M"}},
            }]},
        },
    }}));
    let mut expected = deployment(
        json!({"replicas": 1}),
        json!({"containers": [{
            "name": "nginx",
            "image": "nginx:1.14.2",
            "ports": [{"containerPort": 80}],
            "resources": {"limits": {"cpu": "128M"}},
        }]}),
    );
    expected["spec"]["template"]["metadata"]["labels"] = json!({"app": "nginx"});
    assert_eq!(run(&live, &patch), Ok(expected));
}

#[test]
fn apply_configuration_with_change_to_atomic() {
    let live = deployment(json!({"replicas": 1}), no_containers());
    let patch = patch(json!({"spec": {"selector": {"matchLabels": {"l": "v"}}}}));
    assert_eq!(
        run(&live, &patch),
        Err(
            "error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, \
             maps or structs: .spec.selector"
                .to_string()
        )
    );
}

#[test]
fn apply_configuration_with_invalid_field_name() {
    let live = deployment(json!({"replicas": 1}), no_containers());
    let patch = patch(json!({"spec": {"replicasx": 1}}));
    assert_eq!(
        run(&live, &patch),
        Err(
            "error applying patch: failed to convert patch object to typed object: \
             .spec.replicasx: field not declared in schema"
                .to_string()
        )
    );
}

fn nginx_with_env(env: Value) -> Value {
    json!({"containers": [{"name": "nginx", "resources": {}, "env": env}]})
}

#[test]
fn apply_configuration_with_duplicate_env_vars_in_original_object() {
    let env = json!([{"name": "test", "value": "a"}, {"name": "test", "value": "b"}]);
    let live = deployment(json!({"replicas": 1}), nginx_with_env(env.clone()));
    let patch = patch(json!({"spec": {"replicas": 3}}));
    assert_eq!(
        run(&live, &patch),
        Ok(deployment(json!({"replicas": 3}), nginx_with_env(env)))
    );
}

#[test]
fn apply_configuration_modify_existing_env_variable() {
    let live = deployment(
        json!({"replicas": 1}),
        nginx_with_env(json!([
            {"name": "test", "value": "a"},
            {"name": "test", "value": "b"},
            {"name": "foo", "value": "bar"},
        ])),
    );
    let patch = patch(json!({"spec": {"template": {"spec": {"containers": [{
        "name": "nginx",
        "env": [{"name": "test", "value": "c"}],
    }]}}}}));
    assert_eq!(
        run(&live, &patch),
        Ok(deployment(
            json!({"replicas": 1}),
            nginx_with_env(json!([
                {"name": "test", "value": "c"},
                {"name": "foo", "value": "bar"},
            ])),
        ))
    );
}
