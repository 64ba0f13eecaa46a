//! Engine semantics on small inline policies: order, failure policies, audit mode,
//! provenance, and the properties of the computed patch.

use crate::support::policies::{
    checked, load_in_dir, patch_of, pod_policy_yaml, pod_policy_yaml_matching, request_in_ns,
};
use graft::admission::offline::RequestOptions;
use graft::engine::{self, Evaluation, Outcome, PolicyResult};
use serde_json::{Value, json};

/// Loads `policies` (YAML documents) and evaluates a CREATE of `object` in namespace `ns`.
fn evaluate(policies: &str, object: Value) -> Evaluation<'static> {
    evaluate_request(policies, |options| options, object)
}

fn evaluate_request(
    policies: &str,
    configure: impl FnOnce(RequestOptions) -> RequestOptions,
    object: Value,
) -> Evaluation<'static> {
    let set = load_in_dir(policies);
    let request = request_in_ns(object, configure);
    // The invariants every evaluation holds: the patch applies and gives the mutated
    // object, a second review changes nothing, `graft explain` agrees.
    let evaluation = checked(&set, request.clone());
    // The request keeps its own root. The evaluation's is that root itself when no
    // policy's change stayed, and a root of its own when the patch changes something.
    let (original, object) = match (&request.object, &evaluation.object) {
        (Some(original), Some(object)) => (original, object),
        (None, None) => return evaluation,
        _ => panic!("the evaluation has an object exactly when the request has one"),
    };
    let kept = evaluation.applied().next().is_none()
        || matches!(evaluation.outcome, Outcome::Denied { .. });
    if kept {
        assert!(
            object.same(original),
            "no change stayed: the request's root"
        );
    }
    if !evaluation.patch.0.is_empty() {
        assert!(!object.same(original), "a patch leads to a root of its own");
    }
    evaluation
}

fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "web"}},
           "spec": {"containers": [{"name": "app", "image": "a"}, {"name": "side", "image": "s"}]}})
}

#[test]
fn policies_run_by_order_then_name_and_each_sees_the_previous_output() {
    let set_label =
        |value: &str| format!("    - set: {{path: \"$.metadata.labels.tier\", value: {value}}}\n");
    let policies = [
        pod_policy_yaml("b-second", "  order: 1\n", &set_label("from-b")),
        pod_policy_yaml("a-third", "  order: 2\n", &set_label("from-a")),
        pod_policy_yaml("z-first", "  order: -1\n", &set_label("from-z")),
        // Reads what the others wrote: runs last by name among order 2.
        pod_policy_yaml(
            "b-copies",
            "  order: 2\n",
            "    - set: {path: \"$.metadata.labels.copied\", value: \"{{ object.metadata.labels.tier }}\"}\n",
        ),
    ]
    .concat();
    let evaluation = evaluate(&policies, pod());
    let order: Vec<&str> = evaluation
        .policies
        .iter()
        .map(|r| r.policy.as_str())
        .collect();
    assert_eq!(order, ["z-first", "b-second", "a-third", "b-copies"]);
    let mutated = evaluation.mutated().unwrap();
    assert_eq!(mutated["metadata"]["labels"]["tier"], "from-a");
    assert_eq!(mutated["metadata"]["labels"]["copied"], "from-a");
    assert_eq!(
        evaluation.audit_annotations["mutated-by"],
        "z-first,b-second,a-third,b-copies"
    );
}

#[test]
fn fail_denies_with_policy_field_and_reason() {
    let policies = pod_policy_yaml(
        "strict",
        "",
        "    - set: {path: \"$.metadata.labels.x\", value: \"{{ object.spec.missing.field }}\"}\n",
    );
    let evaluation = evaluate(&policies, pod());
    let Outcome::Denied { message, .. } = &evaluation.outcome else {
        panic!("expected a denial: {evaluation:?}");
    };
    assert!(
        message.starts_with("graft: policy strict: spec.mutations[0].set.value: "),
        "{message}"
    );
    assert!(message.contains("missing"), "{message}");
    assert!(evaluation.patch.0.is_empty());
}

#[test]
fn ignore_skips_the_whole_policy_with_a_short_warning() {
    // The first mutation succeeds, the second fails: nothing of the policy stays.
    let policies = pod_policy_yaml(
        "lenient",
        "  failurePolicy: Ignore\n",
        "    - set: {path: \"$.metadata.labels.first\", value: \"1\"}\n    - set: {path: \"$.metadata.labels.app.deeper\", value: \"2\"}\n",
    ) + &pod_policy_yaml(
        "after",
        "",
        "    - set: {path: \"$.metadata.labels.after\", value: \"3\"}\n",
    );
    let evaluation = evaluate(&policies, pod());
    assert_eq!(evaluation.outcome, Outcome::Allowed);
    let mutated = evaluation.mutated().unwrap();
    assert!(mutated["metadata"]["labels"].get("first").is_none());
    assert_eq!(mutated["metadata"]["labels"]["after"], "3");
    assert_eq!(evaluation.warnings.len(), 1);
    let warning = &evaluation.warnings[0];
    assert!(
        warning
            .starts_with("graft: policy lenient skipped: spec.mutations[1].set.path: cannot set"),
        "{warning}"
    );
    assert!(warning.chars().count() <= engine::MAX_WARNING_CHARS);
    let lenient = evaluation
        .policies
        .iter()
        .find(|r| r.policy == "lenient")
        .unwrap();
    assert!(matches!(lenient.result, PolicyResult::Ignored(_)));
}

/// A warning is all an `Ignore` policy's failure leaves: it says why before it quotes a
/// long template, which the 120-character cut would otherwise keep instead.
#[test]
fn a_failed_templates_warning_says_why_before_the_template() {
    let policies = pod_policy_yaml(
        "long-template",
        "  failurePolicy: Ignore\n",
        "    - set:\n        path: $.metadata.labels.x\n        value: >-\n          {{ string(int(object.metadata.name)\n             + 1) + '-' + object.metadata.name + '-' + object.metadata.name }}\n",
    );
    let evaluation = evaluate(&policies, pod());
    let [warning] = evaluation.warnings.as_slice() else {
        panic!("{:?}", evaluation.warnings);
    };
    assert!(
        warning.starts_with(
            "graft: policy long-template skipped: spec.mutations[0].set.value: Error executing"
        ),
        "{warning}"
    );
    let explained = evaluation
        .policies
        .iter()
        .find_map(|report| match &report.result {
            PolicyResult::Ignored(failure) => Some(failure.to_string()),
            _ => None,
        })
        .unwrap();
    assert!(
        explained.ends_with(
            "(in {{ string(int(object.metadata.name) + 1) + '-' + object.metadata.name + '-' + object.metadata.name }})"
        ),
        "{explained}"
    );
}

#[test]
fn audit_mode_reports_the_patch_without_applying_it() {
    let policies = pod_policy_yaml(
        "trial",
        "  mode: Audit\n  failurePolicy: Ignore\n",
        "    - set: {path: \"$.metadata.labels.trial\", value: \"yes\"}\n",
    );
    let evaluation = evaluate(&policies, pod());
    assert!(evaluation.patch.0.is_empty());
    assert!(evaluation.mutated().is_none());
    assert!(!evaluation.audit_annotations.contains_key("mutated-by"));
    let audit: Value =
        serde_json::from_str(&evaluation.audit_annotations["audit-patches"]).unwrap();
    assert_eq!(
        audit,
        json!({"trial": [{"op": "add", "path": "/metadata/labels/trial", "value": "yes"}]})
    );
    assert!(evaluation.warnings[0].contains("audit: policy trial would apply 1 patch operation"));
}

#[test]
fn keys_are_escaped_and_one_key_is_added_without_replacing_its_map() {
    let policies = pod_policy_yaml(
        "escape",
        "",
        "    - set: {path: \"$.metadata.labels['example.com/a~b']\", value: v}\n",
    );
    let evaluation = evaluate(&policies, pod());
    assert_eq!(
        patch_of(&evaluation),
        json!([{"op": "add", "path": "/metadata/labels/example.com~1a~0b", "value": "v"}])
    );
}

#[test]
fn a_filter_sets_every_match_and_remove_removes_every_match() {
    let policies = pod_policy_yaml(
        "filters",
        "",
        "    - set: {path: \"$.spec.containers[?@.name != 'none'].imagePullPolicy\", value: Always}\n    - remove: {path: \"$.spec.containers[?@.name == 'side']\"}\n",
    );
    let evaluation = evaluate(&policies, pod());
    assert_eq!(
        evaluation.mutated().unwrap()["spec"]["containers"],
        json!([{"name": "app", "image": "a", "imagePullPolicy": "Always"}])
    );
}

#[test]
fn nothing_changes_means_an_empty_patch_and_a_second_pass_is_empty() {
    let policies = pod_policy_yaml(
        "same",
        "",
        "    - set: {path: \"$.metadata.labels.app\", value: web}\n",
    );
    let evaluation = evaluate(&policies, pod());
    assert!(evaluation.patch.0.is_empty());
    assert_eq!(evaluation.policies[0].result, PolicyResult::Unchanged);
    assert!(!evaluation.audit_annotations.contains_key("mutated-by"));
}

#[test]
fn a_template_cannot_rename_the_object() {
    let policies = pod_policy_yaml(
        "rename",
        "",
        "    - merge:\n        value: \"{{ {'metadata': {'name': 'other'}} }}\"\n",
    );
    let evaluation = evaluate(&policies, pod());
    let Outcome::Denied { message, .. } = evaluation.outcome else {
        panic!("expected a denial");
    };
    assert!(
        message.contains("may not change metadata.name"),
        "{message}"
    );
}

#[test]
fn delete_requests_match_on_the_old_object_and_never_patch() {
    let policies = pod_policy_yaml(
        "on-delete",
        "",
        "    - set: {path: \"$.metadata.labels.x\", value: y}\n",
    );
    let evaluation = evaluate_request(
        &policies,
        |options| RequestOptions {
            operation: "DELETE".into(),
            old_object: Some(pod()),
            ..options
        },
        pod(),
    );
    assert_eq!(evaluation.policies[0].result, PolicyResult::Unchanged);
    assert!(evaluation.patch.0.is_empty());
}

#[test]
fn exclude_with_cel_and_match_cel() {
    let policies = "apiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\nmetadata: {name: cel}\nspec:\n  match:\n    resources: [pods]\n    cel: \"size(object.spec.containers) > 1\"\n  exclude:\n    labels: {app: web}\n    cel: \"request.namespace == 'skip'\"\n  mutations:\n    - set: {path: \"$.metadata.labels.many\", value: \"true\"}\n";
    let applied = evaluate(policies, pod());
    assert_eq!(
        applied.mutated().unwrap()["metadata"]["labels"]["many"],
        "true"
    );
    let excluded = evaluate_request(
        policies,
        |options| RequestOptions {
            namespace: Some("skip".into()),
            ..options
        },
        pod(),
    );
    assert!(excluded.policies.is_empty());
    let mut one = pod();
    one["spec"]["containers"] = json!([{"name": "app"}]);
    assert!(evaluate(policies, one).policies.is_empty());
}

#[test]
fn a_policy_that_matches_what_a_later_policy_wrote_gets_another_look() {
    // `a-reads` runs first and matches only once `b-writes` has added the label.
    let policies = pod_policy_yaml_matching(
        "a-reads",
        "",
        "    labels: {tier: gpu}\n",
        "    - set: {path: \"$.metadata.labels.seen\", value: \"yes\"}\n",
    ) + &pod_policy_yaml(
        "b-writes",
        "",
        "    - set: {path: \"$.metadata.labels.tier\", value: gpu}\n",
    );
    let evaluation = evaluate(&policies, pod());
    let mutated = evaluation.mutated().unwrap();
    assert_eq!(mutated["metadata"]["labels"]["seen"], "yes");
    assert_eq!(
        evaluation.audit_annotations["mutated-by"],
        "b-writes,a-reads"
    );
    // And so a second review of the output changes nothing.
    let again = evaluate(&policies, mutated);
    assert!(again.patch.0.is_empty(), "{:?}", again.patch);
}

/// A policy that matched but changed nothing (its mutation's `when` was false) gets
/// another look once a later policy changes what the `when` reads.
#[test]
fn a_policy_whose_when_was_false_gets_another_look_after_a_later_change() {
    let policies = pod_policy_yaml(
        "a-toleration",
        "",
        "    - when: \"object.metadata.?labels.tier.orValue('') == 'gpu'\"\n      append: {path: $.spec.tolerations, value: [{key: nvidia.com/gpu, operator: Exists}]}\n",
    ) + &pod_policy_yaml(
        "b-tier",
        "  order: 10\n",
        "    - set: {path: \"$.metadata.labels.tier\", value: gpu}\n",
    );
    let evaluation = evaluate(&policies, pod());
    let mutated = evaluation.mutated().unwrap();
    assert_eq!(
        mutated["spec"]["tolerations"],
        json!([{"key": "nvidia.com/gpu", "operator": "Exists"}])
    );
    assert_eq!(
        evaluation.audit_annotations["mutated-by"],
        "b-tier,a-toleration"
    );
    let again = evaluate(&policies, mutated);
    assert!(again.patch.0.is_empty(), "{:?}", again.patch);
}

/// The report says what each policy made of the object as it ends: a policy that found
/// nothing to change, and no longer matches once a later policy changed the object, is
/// not reported as having matched.
#[test]
fn a_policy_that_no_longer_matches_after_a_later_change_is_not_reported() {
    let policies = pod_policy_yaml_matching(
        "a-web",
        "",
        "    labels: {app: web}\n",
        "    - set: {path: \"$.metadata.labels.app\", value: web}\n",
    ) + &pod_policy_yaml(
        "b-relabel",
        "  order: 10\n",
        "    - set: {path: \"$.metadata.labels.app\", value: api}\n",
    );
    let evaluation = evaluate(&policies, pod());
    let reported: Vec<(&str, &str)> = evaluation
        .policies
        .iter()
        .map(|report| (report.policy.as_str(), report.result.label()))
        .collect();
    assert_eq!(reported, [("b-relabel", "applied")]);
}

#[test]
fn a_policy_kept_out_by_its_labels_matches_what_an_earlier_policy_wrote() {
    // `reads` requires a label the pod does not carry, so it starts out blocked without
    // a look; `writes` runs first and adds the label, and `reads` gets its look in the
    // same pass. `never` requires a value nobody writes and stays out.
    let reader = |name: &str, value: &str| {
        pod_policy_yaml_matching(
            name,
            "",
            &format!("    labels: {{tier: {value}}}\n"),
            &format!("    - set: {{path: \"$.metadata.labels.{name}\", value: \"yes\"}}\n"),
        )
    };
    let policies = pod_policy_yaml(
        "writes",
        "  order: -1\n",
        "    - set: {path: \"$.metadata.labels.tier\", value: gpu}\n",
    ) + &reader("reads", "gpu")
        + &reader("never", "cpu");
    let evaluation = evaluate(&policies, pod());
    let mutated = evaluation.mutated().unwrap();
    assert_eq!(mutated["metadata"]["labels"]["reads"], "yes");
    assert!(mutated["metadata"]["labels"].get("never").is_none());
    assert_eq!(evaluation.audit_annotations["mutated-by"], "writes,reads");
    let again = evaluate(&policies, mutated);
    assert!(again.patch.0.is_empty(), "{:?}", again.patch);
}

#[test]
fn a_field_test_sees_what_a_later_policy_wrote() {
    // `a-reads` tests a field under spec that `b-writes` sets; `c-never` tests a label
    // nobody writes and stays out, whatever else changed.
    let policies = pod_policy_yaml_matching(
        "a-reads",
        "",
        "    fields:\n      - {path: \"$.spec.priorityClassName\", equals: gpu}\n",
        "    - set: {path: \"$.metadata.annotations.seen\", value: \"yes\"}\n",
    ) + &pod_policy_yaml(
        "b-writes",
        "",
        "    - set: {path: \"$.spec.priorityClassName\", value: gpu}\n",
    ) + &pod_policy_yaml_matching(
        "c-never",
        "",
        "    labels: {absent: label}\n",
        "    - set: {path: \"$.metadata.annotations.never\", value: \"yes\"}\n",
    );
    let evaluation = evaluate(&policies, pod());
    let mutated = evaluation.mutated().unwrap();
    assert_eq!(mutated["metadata"]["annotations"]["seen"], "yes");
    assert!(mutated["metadata"]["annotations"].get("never").is_none());
    assert_eq!(
        evaluation.audit_annotations["mutated-by"],
        "b-writes,a-reads"
    );
    let again = evaluate(&policies, mutated);
    assert!(again.patch.0.is_empty(), "{:?}", again.patch);
}

/// A policy kept out by the labels one policy wrote gets another look when a later
/// policy writes them back as the request had them: what it is compared against is the
/// object it was kept out of, not the request's.
#[test]
fn a_policy_blocked_by_a_change_is_looked_at_again_when_the_change_is_undone() {
    let policies = pod_policy_yaml(
        "a",
        "  order: -1\n",
        "    - set: {path: \"$.metadata.labels.app\", value: gpu}\n",
    ) + &pod_policy_yaml_matching(
        "p",
        "",
        "    labels: {app: web}\n",
        "    - set: {path: \"$.metadata.labels.p\", value: \"yes\"}\n",
    ) + &pod_policy_yaml(
        "b",
        "  order: 1\n",
        "    - set: {path: \"$.metadata.labels.app\", value: web}\n",
    );
    let evaluation = evaluate(&policies, pod());
    let mutated = evaluation.mutated().expect("p applied");
    assert_eq!(mutated["metadata"]["labels"]["p"], "yes");
    assert_eq!(mutated["metadata"]["labels"]["app"], "web");
    // In the order the policies first matched: p on its second look.
    assert_eq!(evaluation.audit_annotations["mutated-by"], "a,b,p");
}

/// A policy blocked up front by its labels gets its look in the pass in which an earlier
/// policy writes the labels it wants, before the policies after it: what they write
/// last stays.
#[test]
fn a_policy_unblocked_by_an_earlier_write_runs_in_its_place_in_the_same_pass() {
    let policies = pod_policy_yaml(
        "a-writes",
        "  order: -1\n",
        "    - set: {path: \"$.metadata.labels.tier\", value: gpu}\n",
    ) + &pod_policy_yaml_matching(
        "b-reads",
        "",
        "    labels: {tier: gpu}\n",
        "    - set: {path: \"$.metadata.labels.x\", value: b}\n",
    ) + &pod_policy_yaml(
        "c-last",
        "  order: 1\n",
        "    - set: {path: \"$.metadata.labels.x\", value: c}\n",
    );
    let evaluation = evaluate(&policies, pod());
    let mutated = evaluation.mutated().expect("changed");
    assert_eq!(mutated["metadata"]["labels"]["x"], "c");
    assert_eq!(
        evaluation.audit_annotations["mutated-by"],
        "a-writes,b-reads,c-last"
    );
}
