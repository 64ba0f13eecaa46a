//! Regression tests for bugs found by the property tests and the fuzzers (issue #7).
//! Each case: a policy, an object, and the convergence the design promises (the patch
//! applies to the original and a second pass over the result is empty).

use std::path::Path;

use crate::support::policies::{load_str, pod_review_body, policy_json};
use base64::Engine as _;
use graft::admission;
use graft::policy::PolicySet;
use serde_json::{Value, json};

const NO_NAMESPACES: &graft::namespaces::NoNamespaces = &graft::namespaces::NoNamespaces {
    hint: "no namespaces in this test",
};

fn load(mutations: Value) -> PolicySet {
    let spec = json!({
        "failurePolicy": "Fail",
        "match": {"resources": ["pods"], "operations": ["CREATE"]},
        "mutations": mutations,
    });
    load_str(
        "regression.yaml",
        &policy_json("regression", spec).to_string(),
    )
}

fn body(object: &Value) -> Vec<u8> {
    pod_review_body("CREATE", json!({"object": object}))
}

/// Reviews `body` as the apiserver would send it and returns the object the apiserver
/// would store: the response's patch applied to the request's object.
fn admit(set: &PolicySet, body: &[u8]) -> (Value, usize) {
    let reviewed = admission::oracle::review(
        body,
        set,
        graft::admission::ClusterSource::namespaces(NO_NAMESPACES),
    )
    .expect("review");
    let request: Value = serde_json::from_slice(body).expect("json");
    let mut object = request["request"]["object"].clone();
    let response: Value =
        serde_json::from_slice(&reviewed.to_json().expect("the response serialises"))
            .expect("response");
    assert_eq!(response["response"]["allowed"], true, "{response}");
    let Some(patch) = response["response"]["patch"].as_str() else {
        return (object, 0);
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .expect("base64");
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("patch");
    json_patch::patch(&mut object, &patch).expect("patch applies");
    (object, patch.0.len())
}

/// Admits `object` twice, the second time on the stored result: the second patch is empty.
fn check_converges(set: &PolicySet, object: Value) -> Value {
    let (first, ops) = admit(set, &body(&object));
    assert!(ops > 0, "the first pass changed nothing");
    let (second, ops) = admit(set, &body(&first));
    assert_eq!(
        ops, 0,
        "second pass not empty:\nfirst: {first}\nsecond: {second}"
    );
    first
}

/// Found by `literal_policies_converge_in_one_pass`: serde_json's default float parser
/// is off by one ULP for about a third of all doubles, so graft saw an object's
/// `-958518.5692273717` as `...716`, differed from a policy's literal `...717`, and sent
/// a replace on every pass. Fixed by serde_json's `float_roundtrip` feature.
#[test]
fn floats_in_a_review_are_read_exactly() {
    let set = load(json!([{"set": {"path": "$.spec.ratio", "value": -958518.5692273717}}]));
    let text =
        String::from_utf8(body(&json!({"metadata": {"name": "p"}, "spec": {}}))).expect("utf8");
    let text = text.replace(r#""spec":{}"#, r#""spec":{"ratio":-958518.5692273717}"#);
    let (_, ops) = admit(&set, text.as_bytes());
    assert_eq!(ops, 0, "a value equal to the policy's literal was replaced");
    let parsed: Value = serde_json::from_str("-958518.5692273717").expect("json");
    assert_eq!(parsed.as_f64(), Some(-958518.5692273717_f64));
}

/// Found by `literal_policies_converge_in_one_pass`: a merge that created a keyed list
/// (one Kubernetes merges item by item) kept `null` fields in its items; the second merge
/// then treated them as "remove" and patched again.
#[test]
fn a_merge_that_creates_a_named_list_drops_its_null_fields() {
    let set = load(
        json!([{"merge": {"value": {"spec": {"volumes": [{"name": "n1", "secret": null}]}}}}]),
    );
    let stored = check_converges(&set, json!({"metadata": {"name": "p"}}));
    assert_eq!(stored["spec"], json!({"volumes": [{"name": "n1"}]}));
}

/// A list with no Kubernetes merge key is replaced whole, as given, and converges too.
#[test]
fn a_merge_that_creates_an_unkeyed_list_keeps_it_as_given() {
    let set = load(json!([{"merge": {"value": {"spec": {"a": [{"name": "n1", "value": null}]}}}}]));
    let stored = check_converges(&set, json!({"metadata": {"name": "p"}}));
    assert_eq!(
        stored["spec"],
        json!({"a": [{"name": "n1", "value": null}]})
    );
}

/// A merge whose value for a keyed list is empty (a CEL `filter(...).map(...)` that
/// selected nothing) left every container out: `remove /spec/containers/0`. Kubernetes'
/// strategic merge leaves the list alone, and so does graft.
#[test]
fn merging_an_empty_container_list_removes_no_container() {
    let set = load(json!([{"merge": {"value": {"spec": {
        "containers": "{{ object.spec.containers.filter(c, c.name == 'none') }}",
        "initContainers": [],
    }}}}]));
    let pod =
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "a"}]}});
    let (stored, ops) = admit(&set, &body(&pod));
    assert_eq!(ops, 0, "{stored}");
    assert_eq!(stored, pod);
}

/// `set` under a wildcard created nothing where a parent was missing: the docs promise
/// missing parents are created under every location the wildcard selects.
#[test]
fn a_wildcard_set_creates_missing_parents_under_every_match() {
    let set = load(json!([{"set": {
        "path": "$.spec.containers[*].resources.limits.memory",
        "value": "1Gi",
    }}]));
    let stored = check_converges(
        &set,
        json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a"},
            {"name": "b", "resources": {"requests": {"cpu": "1"}}}
        ]}}),
    );
    assert_eq!(
        stored["spec"]["containers"],
        json!([
            {"name": "a", "resources": {"limits": {"memory": "1Gi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}}}
        ])
    );
}

#[test]
fn a_merge_that_appends_a_named_item_drops_its_null_fields() {
    let set = load(json!([{"merge": {"path": "$.spec", "value": {
        "containers": [{"name": "new", "image": null, "env": [{"name": "A", "value": null}]}]
    }}}]));
    let stored = check_converges(
        &set,
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "old", "image": "x"}]}}),
    );
    assert_eq!(
        stored["spec"]["containers"],
        json!([{"name": "old", "image": "x"}, {"name": "new", "env": [{"name": "A"}]}])
    );
}

#[test]
fn a_merge_that_replaces_a_scalar_with_a_map_drops_its_null_fields() {
    let set = load(json!([{"merge": {"path": "$.spec", "value": {"a": {"b": 1, "c": null}}}}]));
    let stored = check_converges(
        &set,
        json!({"metadata": {"name": "p"}, "spec": {"a": "scalar"}}),
    );
    assert_eq!(stored["spec"]["a"], json!({"b": 1}));
}

/// Found by `any_policy_gives_an_applicable_patch`: RFC 6902 allows `"value": null`,
/// but the policy model read an explicit null as an absent value and refused the
/// operation with "missing field `value`".
#[test]
fn a_raw_add_of_null_is_a_valid_operation() {
    let set = load(json!([{"jsonPatch": [{"op": "add", "path": "/spec/x", "value": null}]}]));
    let stored = check_converges(&set, json!({"metadata": {"name": "p"}, "spec": {}}));
    assert_eq!(stored["spec"], json!({"x": null}));
}

/// Found by `literal_policies_converge_in_one_pass`: a policy that failed under
/// `Ignore` because the object was not yet as it needed (here `spec` a string) was not
/// run again after a later policy made it so; the second review then applied it.
#[test]
fn an_ignored_policy_gets_another_look_after_a_later_change() {
    let text = [
        json!({"apiVersion": "graft.dev/v1alpha1", "kind": "MutationPolicy",
            "metadata": {"name": "p0"},
            "spec": {"failurePolicy": "Ignore",
                "match": {"resources": ["pods"], "operations": ["CREATE"]},
                "mutations": [{"set": {"path": "$.spec.a", "value": 1}}]}}),
        json!({"apiVersion": "graft.dev/v1alpha1", "kind": "MutationPolicy",
            "metadata": {"name": "p1"},
            "spec": {"failurePolicy": "Ignore",
                "match": {"resources": ["pods"], "operations": ["CREATE"]},
                "mutations": [{"merge": {"value": {"spec": {"b": 2}}}}]}}),
    ]
    .map(|policy| policy.to_string())
    .join("\n---\n");
    let set = match graft::policy::load_str(Path::new("regression.yaml"), &text) {
        Ok(loaded) => loaded.set,
        Err(findings) => panic!("{findings:?}"),
    };
    let stored = check_converges(&set, json!({"metadata": {"name": "p"}, "spec": "text"}));
    assert_eq!(stored["spec"], json!({"a": 1, "b": 2}));

    let request = graft::admission::offline::request_for(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": "text"}),
        &graft::admission::offline::RequestOptions::default(),
        "u-2",
    );
    let evaluation = graft::engine::evaluate(
        &request,
        set.route(&request),
        &graft::engine::Cluster {
            namespace: graft::namespaces::NamespaceData::NotLookedUp,
            params: &graft::params::NoParams,
        },
        &set,
    );
    let results: Vec<(&str, &str)> = evaluation
        .policies
        .iter()
        .map(|report| (report.policy.as_str(), report.result.label()))
        .collect();
    // In the order the policies changed the object: p0 applied on its second look.
    assert_eq!(results, [("p1", "applied"), ("p0", "applied")]);
    assert!(evaluation.warnings.is_empty(), "{:?}", evaluation.warnings);
}

/// Found by `any_policy_gives_an_applicable_patch`: json-patch panics ("unable to undo
/// applied patches") when a multi-operation patch fails part-way and its own undo fails;
/// here the move fails after removing its source. The policy now fails cleanly.
#[test]
fn a_raw_patch_that_fails_part_way_fails_the_policy_without_a_panic() {
    let set = load(json!([{"jsonPatch": [
        {"op": "add", "path": "/metadata/labels/app", "value": null},
        {"op": "move", "from": "/metadata/labels/app", "path": "/spec/a"},
    ]}]));
    let object = json!({"metadata": {"name": "p", "labels": {}}});
    let body = body(&object);
    let reviewed = admission::oracle::review(
        &body,
        &set,
        graft::admission::ClusterSource::namespaces(NO_NAMESPACES),
    )
    .expect("review");
    let response: Value =
        serde_json::from_slice(&reviewed.to_json().expect("the response serialises"))
            .expect("response");
    assert_eq!(response["response"]["allowed"], false, "{response}");
    let message = response["response"]["status"]["message"]
        .as_str()
        .unwrap_or("");
    assert!(message.contains("JSON Patch failed"), "{message}");
}
