//! `podControllers`: a Pod policy applied to the pod templates of the built-in
//! controllers, as a Pod, with its patch under the template.

use std::path::Path;

use crate::support::policies::{evaluate_converging, load, patch_of, review_body};
use graft::admission::offline::{RequestOptions, request_for};
use graft::engine::{self, Outcome, PolicyResult};
use graft::namespaces::NamespaceData;
use serde_json::{Value, json};

fn policy(extra_spec: &str, mutations: &str) -> String {
    format!(
        "apiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\nmetadata: {{name: pods}}\nspec:\n{extra_spec}  match:\n    resources: [pods]\n    labels: {{app: web}}\n  mutations:\n{mutations}"
    )
}

const PULL_ALWAYS: &str = "    - foreach: \"$.spec.containers[*]\"\n      set: {path: \"@.imagePullPolicy\", value: Always}\n";

fn template() -> Value {
    json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app", "image": "app:1"}]}})
}

fn deployment(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
           "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template()}})
}

#[test]
fn a_deployment_template_is_mutated_as_a_pod() {
    let set = load(&policy("  podControllers: true\n", PULL_ALWAYS));
    let evaluation = evaluate_converging(&set, deployment("web"));
    assert_eq!(
        patch_of(&evaluation),
        json!([{"op": "add", "path": "/spec/template/spec/containers/0/imagePullPolicy", "value": "Always"}])
    );
}

#[test]
fn every_controller_kind_is_covered() {
    let set = load(&policy("  podControllers: true\n", PULL_ALWAYS));
    let wrapped = |api: &str, kind: &str, spec: Value| json!({"apiVersion": api, "kind": kind, "metadata": {"name": "web"}, "spec": spec});
    for (object, pointer) in [
        (
            wrapped("apps/v1", "ReplicaSet", json!({"template": template()})),
            "/spec/template/spec/containers/0/imagePullPolicy",
        ),
        (
            wrapped("apps/v1", "StatefulSet", json!({"template": template()})),
            "/spec/template/spec/containers/0/imagePullPolicy",
        ),
        (
            wrapped("apps/v1", "DaemonSet", json!({"template": template()})),
            "/spec/template/spec/containers/0/imagePullPolicy",
        ),
        (
            wrapped("batch/v1", "Job", json!({"template": template()})),
            "/spec/template/spec/containers/0/imagePullPolicy",
        ),
        (
            wrapped(
                "batch/v1",
                "CronJob",
                json!({"schedule": "@daily", "jobTemplate": {"spec": {"template": template()}}}),
            ),
            "/spec/jobTemplate/spec/template/spec/containers/0/imagePullPolicy",
        ),
    ] {
        let evaluation = evaluate_converging(&set, object);
        assert_eq!(
            patch_of(&evaluation),
            json!([{"op": "add", "path": pointer, "value": "Always"}])
        );
    }
}

#[test]
fn without_pod_controllers_a_deployment_is_not_touched() {
    let set = load(&policy("", PULL_ALWAYS));
    let evaluation = evaluate_converging(&set, deployment("web"));
    assert!(evaluation.policies.is_empty());
    assert!(evaluation.patch.0.is_empty());
}

/// The stand-in Pod has the template's labels, and the generateName
/// `<controller name>-`, which is taken off again; the controller's own labels are not
/// the Pod's.
#[test]
fn the_template_is_matched_on_its_labels_and_the_controller_name() {
    let text = policy(
        "  podControllers: true\n",
        "    - set: {path: \"$.metadata.labels.seen\", value: \"{{ object.metadata.generateName }}\"}\n",
    )
    .replace("labels: {app: web}", "labels: {app: web}\n    names: [\"web-*\"]");
    let set = load(&text);
    let evaluation = evaluate_converging(&set, deployment("web"));
    assert_eq!(
        patch_of(&evaluation),
        json!([{"op": "add", "path": "/spec/template/metadata/labels/seen", "value": "web-"}])
    );
    assert!(
        evaluate_converging(&set, deployment("api"))
            .patch
            .0
            .is_empty()
    );
    let mut other = deployment("web");
    other["metadata"]["labels"] = json!({"app": "web"});
    other["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    assert!(evaluate_converging(&set, other).patch.0.is_empty());
}

#[test]
fn a_template_without_metadata_gets_none_unless_the_policy_writes_one() {
    let set = load(
        &policy("  podControllers: true\n", PULL_ALWAYS).replace("    labels: {app: web}\n", ""),
    );
    let mut object = deployment("web");
    object["spec"]["template"] = json!({"spec": {"containers": [{"name": "app", "image": "a"}]}});
    let evaluation = evaluate_converging(&set, object);
    assert_eq!(
        evaluation.mutated().unwrap()["spec"]["template"],
        json!({"spec": {"containers": [{"name": "app", "image": "a", "imagePullPolicy": "Always"}]}})
    );
}

#[test]
fn a_failing_policy_leaves_the_controller_as_it_was() {
    let failing = "    - foreach: \"$.spec.containers[*]\"\n      set: {path: \"@.imagePullPolicy\", value: Always}\n    - set: {path: \"$.spec.containers[0].image.x\", value: 1}\n";
    let set = load(&policy(
        "  podControllers: true\n  failurePolicy: Ignore\n",
        failing,
    ));
    let evaluation = evaluate_converging(&set, deployment("web"));
    assert!(matches!(
        evaluation.policies[0].result,
        PolicyResult::Ignored(_)
    ));
    assert!(evaluation.patch.0.is_empty());

    let set = load(&policy("  podControllers: true\n", failing));
    let request = request_for(deployment("web"), &RequestOptions::default(), "uid-2");
    let evaluation = engine::evaluate(
        &request,
        set.route(&request),
        &graft::engine::Cluster {
            namespace: NamespaceData::NotLookedUp,
            params: &graft::params::NoParams,
        },
        &set,
    );
    let Outcome::Denied { message, .. } = &evaluation.outcome else {
        panic!("{:?}", evaluation.outcome);
    };
    assert!(
        message.starts_with("graft: policy pods: spec.mutations[1].set.path: "),
        "{message}"
    );
    assert_eq!(
        evaluation.object.as_ref(),
        request.object.as_ref(),
        "denied: the object is as it was"
    );
}

#[test]
fn an_audit_patch_points_into_the_controller() {
    let set = load(&policy(
        "  podControllers: true\n  mode: Audit\n  failurePolicy: Ignore\n",
        PULL_ALWAYS,
    ));
    let evaluation = evaluate_converging(&set, deployment("web"));
    let PolicyResult::Audited { patch } = &evaluation.policies[0].result else {
        panic!("{:?}", evaluation.policies);
    };
    assert_eq!(
        serde_json::to_value(patch).unwrap(),
        json!([{"op": "add", "path": "/spec/template/spec/containers/0/imagePullPolicy", "value": "Always"}])
    );
    assert!(evaluation.patch.0.is_empty());
}

#[test]
fn the_webhook_rules_cover_the_controllers() {
    let set = load(&policy("  podControllers: true\n", PULL_ALWAYS));
    let rules: Vec<(String, String)> = graft::policy::webhook_rules(&set)
        .into_iter()
        .map(|rule| (rule.group, rule.resource))
        .collect();
    for (group, resource) in [
        ("*", "pods"),
        ("apps", "deployments"),
        ("apps", "replicasets"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("batch", "jobs"),
        ("batch", "cronjobs"),
    ] {
        assert!(
            rules.contains(&(group.to_string(), resource.to_string())),
            "{group}/{resource} in {rules:?}"
        );
    }
}

#[test]
fn pod_controllers_need_a_pod_policy() {
    let text = policy("  podControllers: true\n", PULL_ALWAYS).replace("[pods]", "[services]");
    let Err(findings) = graft::policy::load_str(Path::new("p.yaml"), &text) else {
        panic!("loaded");
    };
    let text = findings.to_string();
    assert!(
        text.contains("spec.podControllers: podControllers applies a Pod policy to pod templates, and match.resources does not list pods"),
        "{text}"
    );
}

/// The server's lean parse of a Deployment review (the object without managedFields)
/// answers as the full parse does, with the patch under the template.
#[test]
fn the_lean_review_of_a_deployment_answers_alike() {
    let set = load(&policy("  podControllers: true\n", PULL_ALWAYS));
    let mut object = deployment("web");
    object["metadata"]["managedFields"] = json!([{"manager": "kubectl", "operation": "Update"}]);
    let body = review_body(json!({
        "uid": "7c0e0bb8-0d1c-4c53-9a0e-6a1d8a6c1f00",
        "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "namespace": "ns",
        "operation": "CREATE",
        "userInfo": {"username": "u"},
        "object": object,
    }));
    let namespaces = graft::namespaces::NamespaceMap::new([], "none");
    let full = graft::admission::oracle::review(
        &body,
        &set,
        graft::admission::ClusterSource::namespaces(&namespaces),
    )
    .unwrap();
    let lean = graft::admission::review(
        &body,
        &set,
        graft::admission::ClusterSource::namespaces(&namespaces),
    )
    .unwrap();
    assert_eq!(
        lean.to_json().expect("the response serialises"),
        full.to_json().expect("the response serialises")
    );
    assert_eq!(
        serde_json::to_value(&full.evaluation.patch).unwrap(),
        json!([{"op": "add", "path": "/spec/template/spec/containers/0/imagePullPolicy", "value": "Always"}])
    );
}
