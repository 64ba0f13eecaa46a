//! `admission::review_lean` (the server's and `graft review`'s parse, which leaves the
//! object of a request no policy is a candidate for as text) answers exactly as
//! `admission::review` (which builds it): on every captured review, every bad input, and
//! policies that reach `metadata.managedFields` or `oldObject`, which both parses keep
//! as text until something reads them.

use std::path::{Path, PathBuf};

use crate::support::policies::{examples, load_str, pod_review_body, policy_json, with_fields};
use crate::support::repo;
use graft::admission;
use graft::namespaces::{Namespace, NamespaceMap};
use graft::policy::PolicySet;
use graft::tree::Tree;
use serde_json::{Value, json};

/// The namespaces the reviews are in: `dynamo-system` labelled for sidecar injection.
fn namespaces() -> &'static NamespaceMap {
    static MAP: std::sync::OnceLock<NamespaceMap> = std::sync::OnceLock::new();
    MAP.get_or_init(|| {
        NamespaceMap::new(
            [Namespace {
                name: "dynamo-system".to_string(),
                labels: [("sidecar-injection".to_string(), "enabled".to_string())].into(),
                annotations: [("owner".to_string(), "dynamo".to_string())].into(),
            }],
            "the test's namespaces",
        )
    })
}

/// Both parses answer `body` alike: the same response bytes, or both refuse it.
fn check_same(set: &PolicySet, body: &[u8], what: &str) -> Option<Vec<u8>> {
    match (
        admission::oracle::review(
            body,
            set,
            graft::admission::ClusterSource::namespaces(namespaces()),
        ),
        admission::review(
            body,
            set,
            graft::admission::ClusterSource::namespaces(namespaces()),
        ),
    ) {
        (Ok(full), Ok(lean)) => {
            assert_eq!(
                String::from_utf8_lossy(&full.to_json().expect("the response serialises")),
                String::from_utf8_lossy(&lean.to_json().expect("the response serialises")),
                "{what}"
            );
            assert_eq!(full.evaluation.patch, lean.evaluation.patch, "{what}");
            Some(full.to_json().expect("the response serialises"))
        }
        (Err(_), Err(_)) => None,
        (full, lean) => panic!(
            "{what}: full {:?}, lean {:?}",
            full.map(|r| r.to_json().expect("the response serialises").len()),
            lean.map(|r| r.to_json().expect("the response serialises").len())
        ),
    }
}

fn json_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("directory")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

/// The captured reviews, the golden suites' reviews and the realistic pod's.
fn valid_reviews() -> Vec<PathBuf> {
    let mut files = json_files(&repo().join("tests/fixtures"));
    files.extend(json_files(&repo().join("tests/policies/reviews")));
    files.push(repo().join("benches/fixtures/pod-create-realistic.json"));
    files
}

#[test]
fn captured_reviews_and_bad_inputs_are_answered_alike() {
    let set = examples();
    let mut files = valid_reviews();
    files.extend(json_files(&repo().join("tests/bad_inputs")));
    let mut answered = 0;
    for file in &files {
        let body = std::fs::read(file).expect("read");
        let name = file.display().to_string();
        let answer = check_same(&set, &body, &name);
        // The corpus names the status each case must get.
        let stem = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if stem.starts_with("400-") {
            assert!(answer.is_none(), "{name} must be refused");
        } else {
            assert!(answer.is_some(), "{name} must be answered");
            answered += 1;
        }
    }
    assert!(answered >= 10, "{answered}");
}

/// `body` with the fields of its review and of its request in reverse order: the
/// routing fields after the objects, `oldObject` before `object`.
fn reversed(body: &[u8]) -> Option<Vec<u8>> {
    fn reverse(map: &mut serde_json::Map<String, Value>) {
        let fields: Vec<(String, Value)> = std::mem::take(map).into_iter().rev().collect();
        map.extend(fields);
    }
    let mut review: Value = serde_json::from_slice(body).ok()?;
    let request = review.get_mut("request")?.as_object_mut()?;
    reverse(request);
    reverse(review.as_object_mut()?);
    serde_json::to_vec(&review).ok()
}

#[test]
fn a_body_in_another_order_than_the_apiservers_is_answered_the_same() {
    let set = examples();
    let mut compared = 0;
    for file in &valid_reviews() {
        let body = std::fs::read(file).expect("read");
        let name = file.display().to_string();
        let other = reversed(&body).expect("a review with a request");
        let in_order = check_same(&set, &body, &name).expect("answered");
        let reordered = check_same(&set, &other, &format!("{name}, reversed"))
            .expect("answered in another order");
        assert_eq!(
            String::from_utf8_lossy(&in_order),
            String::from_utf8_lossy(&reordered),
            "{name}"
        );
        compared += 1;
    }
    assert!(compared >= 6, "{compared}");
}

fn policy(spec: Value) -> PolicySet {
    let defaults = json!({
        "failurePolicy": "Fail",
        "match": {"resources": ["pods"], "operations": ["CREATE", "UPDATE", "DELETE"]},
    });
    let text = policy_json("reader", with_fields(defaults, spec)).to_string();
    load_str("reader.yaml", &text)
}

fn pod(manager: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "labels": {"app": "web"},
            "managedFields": [{"manager": manager, "operation": "Update", "fieldsV1": {"f:metadata": {}}}],
        },
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    })
}

fn body(operation: &str, object: Option<Value>, old_object: Option<Value>) -> Vec<u8> {
    pod_review_body(
        operation,
        json!({"userInfo": {"username": "u"}, "object": object, "oldObject": old_object}),
    )
}

/// Policies that read or write `metadata.managedFields`, each in its own way: every one
/// changes the object because of what managedFields holds, so a parse that left it out
/// would answer differently.
#[test]
fn policies_that_reach_managed_fields_see_them() {
    let set_label =
        |value: &str| json!([{"set": {"path": "$.metadata.labels.seen", "value": value}}]);
    let cases = [
        // CEL reading it, directly and through the whole metadata.
        json!({"mutations": [{"set": {"path": "$.metadata.labels.seen",
            "value": "{{ object.metadata.managedFields[0].manager }}"}}]}),
        json!({"mutations": [{"set": {"path": "$.metadata.labels.seen",
            "value": "{{ string(size(object.metadata)) }}"}}]}),
        json!({"mutations": [{"set": {"path": "$.metadata.labels.seen",
            "value": "{{ jsonEncode(object).size() > 200 ? 'big' : 'small' }}"}}]}),
        // Field tests whose paths reach it.
        json!({"match": {"resources": ["pods"], "fields": [{"path": "$.metadata.managedFields[0].manager", "equals": "kubectl"}]},
               "mutations": set_label("kubectl")}),
        json!({"match": {"resources": ["pods"], "fields": [{"path": "$..manager", "equals": "kubectl"}]},
               "mutations": set_label("descendant")}),
        json!({"match": {"resources": ["pods"], "fields": [{"path": "$.metadata.*[0].manager", "equals": "kubectl"}]},
               "mutations": set_label("wildcard")}),
        // Writes to it, at it and above it.
        json!({"mutations": [{"remove": {"path": "$.metadata.managedFields"}}]}),
        json!({"mutations": [{"set": {"path": "$.metadata.managedFields[0].manager", "value": "graft"}}]}),
        json!({"mutations": [{"merge": {"value": {"metadata": {"managedFields": null}}}}]}),
        json!({"mutations": [{"merge": {"path": "$.metadata.managedFields[0]", "value": {"manager": "graft"}}}]}),
        json!({"mutations": [{"jsonPatch": [{"op": "remove", "path": "/metadata/managedFields/0"}]}]}),
        json!({"mutations": [{"jsonPatch": [{"op": "copy", "from": "/metadata/managedFields/0/manager", "path": "/metadata/labels/seen"}]}]}),
    ];
    for spec in cases {
        let set = policy(spec.clone());
        let body = body("CREATE", Some(pod("kubectl")), None);
        let answer = check_same(&set, &body, &spec.to_string()).expect("answered");
        let response: Value = serde_json::from_slice(&answer).expect("json");
        assert!(
            response["response"]["patch"].is_string(),
            "{spec}: the policy must change the pod: {response}"
        );
    }
}

/// Policies that stay away from managedFields: the lean parse leaves it out, and the
/// answer is the same.
#[test]
fn policies_that_stay_away_are_answered_alike() {
    let cases = [
        json!({"mutations": [{"set": {"path": "$.metadata.labels.x", "value": "{{ object.metadata.name }}"}}]}),
        json!({"mutations": [{"merge": {"value": {"metadata": {"annotations": {"a": "b"}}, "spec": {"x": 1}}}}]}),
        json!({"mutations": [{"merge": {"path": "$.metadata.labels", "value": {"l": "v"}}}]}),
        json!({"mutations": [{"remove": {"path": "$.metadata.labels.app"}}]}),
        json!({"mutations": [{"set": {"path": "$.spec.containers[*].image", "value": "j"}}]}),
        json!({"mutations": [{"jsonPatch": [{"op": "add", "path": "/metadata/labels/k", "value": "v"}]}]}),
    ];
    for spec in cases {
        let set = policy(spec.clone());
        let body = body("CREATE", Some(pod("kubectl")), None);
        check_same(&set, &body, &spec.to_string()).expect("answered");
    }
}

#[test]
fn old_object_is_built_when_read_or_when_it_is_the_document() {
    let reads_old = json!({"mutations": [{"set": {"path": "$.metadata.labels.was",
        "value": "{{ oldObject.metadata.labels.app }}"}}]});
    let mut old = pod("kubectl");
    old["metadata"]["labels"]["app"] = json!("old");
    let update = body("UPDATE", Some(pod("kubectl")), Some(old.clone()));
    let answer = check_same(&policy(reads_old), &update, "oldObject read").expect("answered");
    assert!(String::from_utf8_lossy(&answer).contains("patch"));

    // DELETE: no object; policies match on the old one and never patch.
    let on_labels = json!({"match": {"resources": ["pods"], "labels": {"app": "old"}},
        "mutations": [{"set": {"path": "$.metadata.labels.x", "value": "y"}}]});
    let delete = body("DELETE", None, Some(old.clone()));
    check_same(&policy(on_labels), &delete, "delete").expect("answered");

    // DELETE with an expression reading the old object's managedFields: it is built whole.
    let validates_old = json!({"validations": [{
        "expression": "oldObject.metadata.managedFields[0].manager == 'kubectl'",
        "message": "the old object was last managed by kubectl",
    }], "mutations": [{"set": {"path": "$.metadata.labels.x", "value": "y"}}]});
    let answer =
        check_same(&policy(validates_old), &delete, "delete, oldObject read").expect("answered");
    let response: Value = serde_json::from_slice(&answer).expect("json");
    assert_eq!(response["response"]["allowed"], true, "{response}");
}

/// Policies that need the namespace's data, in a namespace the source knows and in one
/// it does not (a denial): the two parses resolve it alike.
#[test]
fn policies_that_need_the_namespace_are_answered_alike() {
    let cases = [
        json!({"match": {"resources": ["pods"], "namespaceSelector": {"matchLabels": {"sidecar-injection": "enabled"}}},
               "mutations": [{"set": {"path": "$.metadata.labels.x", "value": "y"}}]}),
        json!({"exclude": {"namespaceSelector": {"matchExpressions": [{"key": "sidecar-injection", "operator": "DoesNotExist"}]}},
               "mutations": [{"set": {"path": "$.metadata.labels.x", "value": "y"}}]}),
        json!({"mutations": [{"set": {"path": "$.metadata.labels.owner",
            "value": "{{ namespaceObject.metadata.annotations.owner }}"}}]}),
    ];
    for spec in cases {
        for (namespace, patched) in [("dynamo-system", true), ("ns", false)] {
            let mut review: Value =
                serde_json::from_slice(&body("CREATE", Some(pod("kubectl")), None)).expect("json");
            review["request"]["namespace"] = json!(namespace);
            let body = serde_json::to_vec(&review).expect("json");
            let what = format!("{spec} in {namespace}");
            let answer = check_same(&policy(spec.clone()), &body, &what).expect("answered");
            let response: Value = serde_json::from_slice(&answer).expect("json");
            assert_eq!(
                response["response"]["allowed"], patched,
                "{what}: {response}"
            );
            assert_eq!(response["response"]["patch"].is_string(), patched, "{what}");
        }
    }
}

#[test]
fn requests_no_policy_is_for_are_answered_alike() {
    let set = examples();
    let mut configmap = body(
        "CREATE",
        Some(json!({"kind": "ConfigMap", "data": {"a": "b"}})),
        None,
    );
    check_same(&set, &configmap, "no candidate").expect("answered");
    // Invalid JSON text is refused by both, even where no policy would look.
    configmap = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","resource":{"resource":"configmaps"},"object":{"a":[1,}}}"#.to_vec();
    assert!(check_same(&set, &configmap, "invalid").is_none());
}

/// `metadata.managedFields` of `object`.
fn managed<'a, 't>(object: Option<&'a Tree<'t>>) -> Option<&'a Tree<'t>> {
    object
        .and_then(|object| object.get("metadata"))
        .and_then(|metadata| metadata.get("managedFields"))
}

/// The example policies never read managedFields or oldObject: answering the captured
/// reviews with them leaves both as their text, never built.
#[test]
fn example_policies_leave_managed_fields_and_old_objects_unbuilt() {
    let set = examples();
    let mut kept = 0;
    for path in valid_reviews() {
        let body = std::fs::read(&path).expect("readable");
        let Ok(reviewed) = admission::review(
            &body,
            &set,
            graft::admission::ClusterSource::namespaces(namespaces()),
        ) else {
            continue;
        };
        let request = &reviewed.review.request;
        // The request's object as it came, the object as the policies left it, and the
        // old object.
        let texts = [
            managed(request.object.as_ref()),
            managed(reviewed.evaluation.object.as_ref()),
            request.old_object.as_ref(),
        ];
        for text in texts.into_iter().flatten() {
            if let Tree::Text(text) = text {
                assert!(!text.is_built(), "{}", path.display());
                kept += 1;
            }
        }
    }
    assert!(
        kept > 0,
        "no captured review has managedFields or an oldObject"
    );
}
