//! `engine::explain`: every policy of the set gets a verdict, and a policy that did not
//! apply names the first condition that did not hold, with what it wanted and what the
//! request or object has. The policies are this file's own.

use crate::support::policies::{load_str, policy_json};
use graft::admission::offline::{RequestOptions, request_for};
use graft::engine::explain::{Explanation, Verdict, explain};
use graft::engine::{Outcome, PolicyResult};
use graft::namespaces::{Namespace, NamespaceData};
use graft::policy::PolicySet;
use serde_json::{Value, json};

fn load(policies: &[Value]) -> PolicySet {
    let text = policies
        .iter()
        .map(|p| serde_json::to_string(p).expect("json"))
        .collect::<Vec<_>>()
        .join("\n---\n");
    load_str("explain.yaml", &text)
}

fn pod(labels: Value, annotations: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "apps", "labels": labels, "annotations": annotations},
        "spec": {"containers": [{"name": "app", "image": "app:1"}], "priority": 5},
    })
}

fn run(
    set: &PolicySet,
    object: Value,
    operation: &str,
    namespace: &NamespaceData,
) -> Explanation<'static> {
    let options = RequestOptions {
        operation: operation.to_string(),
        namespace: None,
        resource: None,
        old_object: None,
    };
    let request = request_for(object, &options, "explain-test");
    let route = set.route(&request);
    let cluster = graft::engine::Cluster {
        namespace: namespace.clone(),
        params: &graft::params::NoParams,
    };
    explain(&request, route, &cluster, set)
}

fn verdict<'e>(explanation: &'e Explanation, name: &str) -> &'e Verdict {
    &explanation
        .policies
        .iter()
        .find(|p| p.policy == name)
        .unwrap_or_else(|| panic!("no verdict for {name}: {explanation:?}"))
        .verdict
}

fn condition(explanation: &Explanation, name: &str) -> String {
    match verdict(explanation, name) {
        Verdict::NotMatched { condition } => condition.clone(),
        other => panic!("{name}: expected not matched, got {other:?}"),
    }
}

fn set_label(value: &str) -> Value {
    json!([{"set": {"path": "$.metadata.labels.touched", "value": value}}])
}

#[test]
fn each_kind_of_condition_is_named_with_want_and_got() {
    let set = load(&[
        policy_json(
            "nodes-only",
            json!({"match": {"resources": ["nodes/status"]}, "mutations": set_label("a")}),
        ),
        policy_json(
            "updates-only",
            json!({"match": {"resources": ["pods"], "operations": ["UPDATE", "DELETE"]}, "mutations": set_label("a")}),
        ),
        policy_json(
            "other-namespaces",
            json!({"match": {"resources": ["pods"], "namespaces": ["team-*", "prod"]}, "mutations": set_label("a")}),
        ),
        policy_json(
            "workers",
            json!({"match": {"resources": ["pods"], "labels": {"role": "worker"}}, "mutations": set_label("a")}),
        ),
        policy_json(
            "not-frontends",
            json!({"match": {"resources": ["pods"], "labelSelector": {"matchExpressions": [
                {"key": "role", "operator": "NotIn", "values": ["frontend"]}]}},
                "mutations": set_label("a")}),
        ),
        policy_json(
            "gpu-annotated",
            json!({"match": {"resources": ["pods"], "annotationSelector": {"matchExpressions": [
                {"key": "gpu", "operator": "Exists"}]}}, "mutations": set_label("a")}),
        ),
        policy_json(
            "image-test",
            json!({"match": {"resources": ["pods"], "fields": [
                {"path": "$.spec.containers[*].image", "equals": "nginx:1"}]},
                "mutations": set_label("a")}),
        ),
        policy_json(
            "typed-test",
            json!({"match": {"resources": ["pods"], "fields": [
                {"path": "$.spec.priority", "equals": "5"}]},
                "mutations": set_label("a")}),
        ),
        policy_json(
            "cel-false",
            json!({"match": {"resources": ["pods"], "cel": "object.metadata.name == 'other'"},
                "mutations": set_label("a")}),
        ),
    ]);
    let explanation = run(
        &set,
        pod(json!({"role": "frontend"}), json!({})),
        "CREATE",
        &NamespaceData::NotLookedUp,
    );
    assert_eq!(explanation.evaluation.outcome, Outcome::Allowed);
    assert!(explanation.evaluation.patch.0.is_empty());
    assert_eq!(explanation.policies.len(), 9, "one verdict per policy");
    assert_eq!(
        condition(&explanation, "nodes-only"),
        "match.resources: want nodes/status, got core/v1/pods"
    );
    assert_eq!(
        condition(&explanation, "updates-only"),
        "match.operations: want one of UPDATE, DELETE, got CREATE"
    );
    assert_eq!(
        condition(&explanation, "other-namespaces"),
        "match.namespaces: want one of team-*, prod, got apps"
    );
    assert_eq!(
        condition(&explanation, "workers"),
        "match.labels role: want worker, got frontend"
    );
    assert_eq!(
        condition(&explanation, "not-frontends"),
        "match.labels role: want anything but frontend, got frontend"
    );
    assert_eq!(
        condition(&explanation, "gpu-annotated"),
        "match.annotations gpu: want it set, got nothing"
    );
    assert_eq!(
        condition(&explanation, "image-test"),
        "match.fields[0] $.spec.containers[*].image: want nginx:1, got app:1"
    );
    // A string that reads as a number is quoted, so that it is not taken for one.
    assert_eq!(
        condition(&explanation, "typed-test"),
        "match.fields[0] $.spec.priority: want \"5\", got 5"
    );
    assert_eq!(
        condition(&explanation, "cel-false"),
        "match.cel is false: object.metadata.name == 'other'"
    );
}

#[test]
fn applied_policies_show_their_own_patch_and_exclusions_say_what_held() {
    let set = load(&[
        policy_json(
            "first",
            json!({"order": 1, "match": {"resources": ["pods"]}, "mutations": set_label("first")}),
        ),
        policy_json(
            "second",
            json!({"order": 2, "match": {"resources": ["pods"]},
                "mutations": [{"set": {"path": "$.metadata.annotations.second", "value": "yes"}}]}),
        ),
        policy_json(
            "already",
            json!({"order": 3, "match": {"resources": ["pods"]},
                "mutations": [{"set": {"path": "$.metadata.labels.role", "value": "worker"}}]}),
        ),
        policy_json(
            "excluded",
            json!({"match": {"resources": ["pods"]},
                "exclude": {"labels": {"role": "worker"}},
                "mutations": set_label("excluded")}),
        ),
        policy_json(
            "excluded-by-cel",
            json!({"match": {"resources": ["pods"]},
                "exclude": {"cel": "object.metadata.name.startsWith('web')"},
                "mutations": set_label("excluded")}),
        ),
        policy_json(
            "excluded-by-name",
            json!({"match": {"resources": ["pods"]},
                "exclude": {"names": ["web*"]},
                "mutations": set_label("excluded")}),
        ),
    ]);
    let explanation = run(
        &set,
        pod(json!({"role": "worker"}), json!({})),
        "CREATE",
        &NamespaceData::NotLookedUp,
    );
    let Verdict::Applied { patch } = verdict(&explanation, "first") else {
        panic!("{explanation:?}");
    };
    assert_eq!(
        serde_json::to_value(patch).expect("json"),
        json!([{"op": "add", "path": "/metadata/labels/touched", "value": "first"}])
    );
    let Verdict::Applied { patch } = verdict(&explanation, "second") else {
        panic!("{explanation:?}");
    };
    // Only what `second` did, not what `first` did before it.
    assert_eq!(
        serde_json::to_value(patch).expect("json"),
        json!([{"op": "add", "path": "/metadata/annotations/second", "value": "yes"}])
    );
    assert_eq!(
        verdict(&explanation, "already"),
        &Verdict::Matched(PolicyResult::Unchanged)
    );
    assert_eq!(
        condition(&explanation, "excluded"),
        "excluded: every condition of exclude holds (labels hold)"
    );
    assert_eq!(
        condition(&explanation, "excluded-by-cel"),
        "excluded: every condition of exclude holds (cel is true: object.metadata.name.startsWith('web'))"
    );
    assert_eq!(
        condition(&explanation, "excluded-by-name"),
        "excluded: every condition of exclude holds (names match)"
    );
    assert_eq!(explanation.evaluation.patch.0.len(), 2);
}

#[test]
fn failures_and_the_policies_a_denial_cut_short() {
    let set = load(&[
        policy_json(
            "skipped",
            json!({"order": 1, "failurePolicy": "Ignore", "match": {"resources": ["pods"]},
                "mutations": [{"set": {"path": "$.metadata.labels.x", "value": "{{ object.missing.field }}"}}]}),
        ),
        policy_json(
            "denies",
            json!({"order": 2, "failurePolicy": "Fail", "match": {"resources": ["pods"]},
                "validations": [{"expression": "false", "message": "never"}],
                "mutations": set_label("x")}),
        ),
        policy_json(
            "after",
            json!({"order": 3, "match": {"resources": ["pods"]}, "mutations": set_label("after")}),
        ),
    ]);
    let explanation = run(
        &set,
        pod(json!({}), json!({})),
        "CREATE",
        &NamespaceData::NotLookedUp,
    );
    assert!(matches!(
        explanation.evaluation.outcome,
        Outcome::Denied { .. }
    ));
    let Verdict::Matched(PolicyResult::Ignored(failure)) = verdict(&explanation, "skipped") else {
        panic!("{explanation:?}");
    };
    assert!(failure.field.starts_with("spec.mutations[0]"), "{failure}");
    let Verdict::Matched(PolicyResult::Failed(failure)) = verdict(&explanation, "denies") else {
        panic!("{explanation:?}");
    };
    assert!(failure.to_string().contains("never"), "{failure}");
    assert_eq!(
        condition(&explanation, "after"),
        "not evaluated: an earlier policy failed and denied the request"
    );
}

#[test]
fn the_namespace_selector_names_the_namespace_and_its_missing_label() {
    let set = load(&[policy_json(
        "injected",
        json!({"match": {"resources": ["pods"], "namespaceSelector": {"matchLabels": {"inject": "enabled"}}},
            "mutations": set_label("a")}),
    )]);
    let namespace = NamespaceData::Known(std::sync::Arc::new(Namespace {
        name: "apps".to_string(),
        labels: [("inject".to_string(), "disabled".to_string())]
            .into_iter()
            .collect(),
        annotations: Default::default(),
    }));
    let explanation = run(&set, pod(json!({}), json!({})), "CREATE", &namespace);
    assert_eq!(
        condition(&explanation, "injected"),
        "match.namespaceSelector inject: want enabled, got disabled (labels of namespace apps)"
    );
}

#[test]
fn explaining_evaluates_exactly_as_the_server_does() {
    let set = load(&[
        policy_json(
            "a",
            json!({"order": 1, "match": {"resources": ["pods"]}, "mutations": set_label("a")}),
        ),
        policy_json(
            "b",
            json!({"order": 2, "match": {"resources": ["pods"], "labels": {"touched": "a"}},
                "mutations": [{"set": {"path": "$.metadata.annotations.b", "value": "seen a"}}]}),
        ),
    ]);
    let object = pod(json!({}), json!({}));
    let options = RequestOptions {
        operation: "CREATE".to_string(),
        namespace: None,
        resource: None,
        old_object: None,
    };
    let request = request_for(object, &options, "explain-test");
    let cluster = graft::engine::Cluster {
        namespace: NamespaceData::NotLookedUp,
        params: &graft::params::NoParams,
    };
    let explained = explain(&request, set.route(&request), &cluster, &set);
    let evaluated = graft::engine::evaluate(
        &request,
        set.route(&request),
        &graft::engine::Cluster {
            namespace: NamespaceData::NotLookedUp,
            params: &graft::params::NoParams,
        },
        &set,
    );
    assert_eq!(explained.evaluation, evaluated);
    assert!(matches!(verdict(&explained, "b"), Verdict::Applied { .. }));
}

#[test]
fn names_are_reported_with_the_name_or_the_generate_name() {
    let set = load(&[policy_json(
        "api-pods",
        json!({"match": {"resources": ["pods"], "names": ["api-*"]}, "mutations": set_label("a")}),
    )]);
    let explanation = run(
        &set,
        pod(json!({}), json!({})),
        "CREATE",
        &NamespaceData::NotLookedUp,
    );
    assert_eq!(
        condition(&explanation, "api-pods"),
        "match.names: want api-*, got web-0"
    );
    let mut generated = pod(json!({}), json!({}));
    generated["metadata"] = json!({"generateName": "web-7d9f8-", "namespace": "apps"});
    let explanation = run(&set, generated, "CREATE", &NamespaceData::NotLookedUp);
    assert_eq!(
        condition(&explanation, "api-pods"),
        "match.names: want api-*, got generateName web-7d9f8-"
    );
}

/// A `podControllers` policy kept out of a Deployment names the condition on the Pod its
/// template stands for; one that applies shows the patch into the template.
#[test]
fn pod_template_conditions_are_named_on_the_pod_the_template_stands_for() {
    let set = load(&[policy_json(
        "web-pull-always",
        json!({"podControllers": true,
            "match": {"resources": ["pods"], "labels": {"app": "web"}},
            "mutations": [{"foreach": "$.spec.containers[*]",
                "set": {"path": "@.imagePullPolicy", "value": "Always"}}]}),
    )]);
    let deployment = |labels: Value| {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "apps"},
            "spec": {"template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": "app:1"}]},
            }},
        })
    };
    let explanation = run(
        &set,
        deployment(json!({"app": "api"})),
        "CREATE",
        &NamespaceData::NotLookedUp,
    );
    assert_eq!(
        condition(&explanation, "web-pull-always"),
        "pod template: match.labels app: want web, got api"
    );
    let explanation = run(
        &set,
        deployment(json!({"app": "web"})),
        "CREATE",
        &NamespaceData::NotLookedUp,
    );
    let Verdict::Applied { patch } = verdict(&explanation, "web-pull-always") else {
        panic!("{explanation:?}");
    };
    assert_eq!(
        serde_json::to_value(patch).expect("json"),
        json!([{"op": "add", "path": "/spec/template/spec/containers/0/imagePullPolicy", "value": "Always"}])
    );
}
