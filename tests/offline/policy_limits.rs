//! Policy-side limits, through the public entry points (`policy::load_str` and
//! `admission::review`): protected metadata refused at runtime when lint cannot see it,
//! JSONPath and regex size limits, and bounded CEL results.

use std::path::Path;

use crate::support::fixture;
use crate::support::policies::{load_str, policy_json, with_fields};
use graft::admission;
use graft::engine::{Outcome, PolicyResult};
use graft::policy::PolicySet;
use serde_json::{Value, json};

const NO_NAMESPACES: &graft::namespaces::NoNamespaces = &graft::namespaces::NoNamespaces {
    hint: "no namespaces in this test",
};

/// The captured review the tests here send.
fn pod_review() -> Vec<u8> {
    fixture("pod-create-multus-worker.json").expect("fixture")
}

/// A policy on pods with the given failure policy, spec fields and mutations.
fn policy(failure_policy: &str, extra: Value, mutations: Value) -> String {
    let spec = json!({
        "failurePolicy": failure_policy,
        "match": {"resources": ["pods"], "operations": ["CREATE"]},
        "mutations": mutations,
    });
    policy_json("limits", with_fields(spec, extra)).to_string()
}

fn load(text: &str) -> PolicySet {
    load_str("limits.yaml", text)
}

fn load_errors(text: &str) -> String {
    match graft::policy::load_str(Path::new("limits.yaml"), text) {
        Ok(_) => panic!("policy loads but should not:\n{text}"),
        Err(findings) => format!("{findings:?}"),
    }
}

/// Runs the fixture through `policy` with `failurePolicy: Fail` (must deny, naming
/// `reason`) and `Ignore` (must allow unchanged, with a warning).
fn check_refused(extra: Value, mutations: Value, reason: &str) {
    let set = load(&policy("Fail", extra.clone(), mutations.clone()));
    let body = pod_review();
    let reviewed = admission::oracle::review(
        &body,
        &set,
        graft::admission::ClusterSource::namespaces(NO_NAMESPACES),
    )
    .expect("review");
    match &reviewed.evaluation.outcome {
        Outcome::Denied { message, .. } => {
            assert!(message.contains(reason), "{message}");
            assert!(
                message.contains("limits"),
                "the message names the policy: {message}"
            );
        }
        other => panic!(
            "not denied: {other:?}; patch {:?}",
            reviewed.evaluation.patch
        ),
    }
    assert!(reviewed.response.response.patch.is_none());
    assert!(!reviewed.response.response.allowed);

    let set = load(&policy("Ignore", extra, mutations));
    let reviewed = admission::oracle::review(
        &body,
        &set,
        graft::admission::ClusterSource::namespaces(NO_NAMESPACES),
    )
    .expect("review");
    assert_eq!(reviewed.evaluation.outcome, Outcome::Allowed);
    assert!(
        reviewed.evaluation.patch.0.is_empty(),
        "{:?}",
        reviewed.evaluation.patch
    );
    assert!(
        matches!(&reviewed.evaluation.policies[..], [report] if matches!(report.result, PolicyResult::Ignored(_))),
        "{:?}",
        reviewed.evaluation.policies
    );
    assert_eq!(reviewed.response.response.warnings.len(), 1);
}

const PROTECTED: &str = "may not change metadata.name, metadata.namespace or metadata.uid";

#[test]
fn a_template_at_the_root_cannot_rename_the_object() {
    check_refused(
        json!({}),
        json!([{"merge": {"value": "{{ {'metadata': {'name': 'x'}} }}"}}]),
        PROTECTED,
    );
}

#[test]
fn a_template_for_metadata_cannot_change_the_namespace_or_uid() {
    check_refused(
        json!({}),
        json!([{"merge": {"value": {"metadata": "{{ {'namespace': 'kube-system'} }}"}}}]),
        PROTECTED,
    );
    check_refused(
        json!({}),
        json!([{"merge": {"value": "{{ {'metadata': {'uid': 'u', 'name': object.metadata.name}} }}"}}]),
        PROTECTED,
    );
}

#[test]
fn a_computed_key_cannot_reach_protected_metadata() {
    check_refused(
        json!({"params": {"key": "name"}}),
        json!([{"merge": {"value": {"metadata": "{{ {params.key: 'renamed'} }}"}}}]),
        PROTECTED,
    );
}

/// Where lint can see the location, a template aimed at `metadata` is refused at load.
#[test]
fn templates_written_at_metadata_are_refused_by_lint() {
    for mutation in [
        json!({"set": {"path": "$.metadata", "value": "{{ {'labels': {}} }}"}}),
        json!({"merge": {"path": "$.metadata", "value": "{{ {'labels': {}} }}"}}),
        json!({"set": {"path": "$.metadata.name", "value": "{{ object.metadata.name + 'x' }}"}}),
    ] {
        let errors = load_errors(&policy("Ignore", json!({}), json!([mutation])));
        assert!(errors.contains("may not change metadata"), "{errors}");
    }
}

#[test]
fn json_patch_cannot_replace_or_remove_metadata_wholesale() {
    // A raw patch's paths are literal: lint refuses each of these at load (the run-time
    // guard, which every policy passes, is tested through templates above).
    for (operation, field) in [
        (
            json!({"op": "add", "path": "/metadata", "value": {"name": "x"}}),
            "path",
        ),
        (json!({"op": "remove", "path": "/metadata"}), "path"),
        (
            json!({"op": "copy", "from": "/metadata/labels", "path": "/metadata"}),
            "path",
        ),
        (
            json!({"op": "replace", "path": "", "value": {"metadata": {"name": "x"}}}),
            "path",
        ),
        (
            json!({"op": "move", "from": "/metadata/name", "path": "/spec/name"}),
            "from",
        ),
    ] {
        let errors = load_errors(&policy(
            "Ignore",
            json!({}),
            json!([{"jsonPatch": [operation]}]),
        ));
        assert!(
            errors.contains("policies may not change metadata."),
            "{operation}: {errors}"
        );
        assert!(
            errors.contains(&format!("spec.mutations[0].jsonPatch[0].{field}")),
            "{operation}: {errors}"
        );
    }
    // Reading them is allowed.
    load(&policy(
        "Fail",
        json!({}),
        json!([{"jsonPatch": [
            {"op": "test", "path": "/metadata/name", "value": "web-0"},
            {"op": "copy", "from": "/metadata/name", "path": "/metadata/labels/name"},
        ]}]),
    ));
}

#[test]
fn jsonpath_length_and_segments_are_limited_at_load() {
    let deep = format!("${}", ".a".repeat(33));
    let long = format!("$.metadata.annotations['{}']", "k".repeat(1100));
    for path in [deep, long] {
        let errors = load_errors(&policy(
            "Fail",
            json!({}),
            json!([{"set": {"path": path, "value": 1}}]),
        ));
        assert!(errors.contains("longer than"), "{errors}");
    }
    // 32 segments is still fine.
    let ok = format!("$.spec{}", ".a".repeat(31));
    load(&policy(
        "Fail",
        json!({}),
        json!([{"set": {"path": ok, "value": 1}}]),
    ));
}

#[test]
fn regexes_are_size_limited_at_load() {
    let fields = |regex: String| json!({"match": {"resources": ["pods"], "fields": [{"path": "$.metadata.name", "regex": regex}]}});
    for regex in ["a{1000}{1000}".to_string(), "a".repeat(5000)] {
        let errors = load_errors(&policy(
            "Fail",
            fields(regex),
            json!([{"set": {"path": "$.spec.x", "value": 1}}]),
        ));
        assert!(errors.contains("regex"), "{errors}");
    }
}

#[test]
fn cel_results_are_capped_at_one_mebibyte() {
    let params =
        json!({"params": {"items": (0..2048).collect::<Vec<_>>(), "chunk": "x".repeat(1024)}});
    check_refused(
        params,
        json!([{"set": {"path": "$.metadata.annotations.big", "value": "{{ params.items.map(i, params.chunk).join('') }}"}}]),
        "larger than",
    );
}

#[test]
fn cel_lists_are_capped_too() {
    // 300 lists of 300 strings: 1.7 MB of JSON, within the cost budget (90,300 units).
    let items: Vec<String> = (0..300).map(|i| format!("item-{i:011}")).collect();
    let params = json!({"params": {"items": items}});
    check_refused(
        params,
        json!([{"set": {"path": "$.spec.big", "value": "{{ params.items.map(i, params.items) }}"}}]),
        "larger than",
    );
}

/// Nested comprehensions over a list from the object multiply its size: three levels
/// over 100 elements took 24 s in a debug build. More than two levels are refused at load.
#[test]
fn comprehensions_nest_at_most_two_deep() {
    let expression = |nesting: usize| {
        let mut body = "a0".to_string();
        for level in (0..nesting).rev() {
            body = format!("object.spec.items.map(a{level}, {body})");
        }
        format!("{{{{ string({body}.size()) }}}}")
    };
    let errors = load_errors(&policy(
        "Ignore",
        json!({}),
        json!([{"set": {"path": "$.metadata.annotations.n", "value": expression(3)}}]),
    ));
    assert!(errors.contains("comprehensions"), "{errors}");
    assert!(errors.contains("nest 3 deep"), "{errors}");
    let validation = json!({"validations": [{
        "expression": "[1].all(x, [2].all(y, [3].all(z, x + y + z > 0)))",
        "message": "m",
    }]});
    let errors = load_errors(&policy(
        "Ignore",
        validation,
        json!([{"set": {"path": "$.spec.x", "value": 1}}]),
    ));
    assert!(errors.contains("nest 3 deep"), "{errors}");

    // Two levels load and run.
    let set = load(&policy(
        "Fail",
        json!({}),
        json!([{"set": {"path": "$.metadata.annotations.n", "value": expression(2)}}]),
    ));
    let mut body: Value = serde_json::from_slice(&pod_review()).expect("fixture");
    body["request"]["object"]["spec"]["items"] = json!((0..100).collect::<Vec<_>>());
    let body = serde_json::to_vec(&body).expect("json");
    // Bounded work, whatever the machine: an evaluation over the cost budget fails the
    // policy (see `cel_evaluation_cost_is_bounded`), so an allowed, patched answer means
    // two nested levels over 100 items stayed within it.
    let reviewed = admission::oracle::review(
        &body,
        &set,
        graft::admission::ClusterSource::namespaces(NO_NAMESPACES),
    )
    .expect("review");
    assert_eq!(reviewed.evaluation.outcome, Outcome::Allowed);
    assert!(!reviewed.evaluation.patch.0.is_empty());
}

/// A chain of operators parses in a loop into a tree as deep as it is long, which the
/// interpreter (and the parse, for a long enough one) recurses on: a long chain in a
/// ConfigMap edit must be a finding, never a stack overflow of the reloading server.
#[test]
fn long_operator_chains_are_refused_at_load() {
    let chain = |terms: usize| format!("{{{{ 1{} }}}}", " + 1".repeat(terms - 1));
    let set_to =
        |value: String| json!([{"set": {"path": "$.spec.activeDeadlineSeconds", "value": value}}]);
    for (terms, reason) in [
        (97, "nests 97 levels deep"),
        (1_000, "nests 1000 levels deep"),
        (1_000_000, "has 999999 operator characters"),
    ] {
        let errors = load_errors(&policy("Ignore", json!({}), set_to(chain(terms))));
        assert!(errors.contains(reason), "{terms}: {errors}");
    }
    // 96 levels, constant, are evaluated at load, and the result is set. A debug build's
    // frames are many times a release build's (which evaluates this in about 220 KiB of
    // stack): the test gives the evaluation the stack the debug build needs.
    let at_the_limit = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            let set = load(&policy("Fail", json!({}), set_to(chain(96))));
            let body = pod_review();
            let reviewed = admission::oracle::review(
                &body,
                &set,
                graft::admission::ClusterSource::namespaces(NO_NAMESPACES),
            )
            .expect("review");
            assert_eq!(reviewed.evaluation.outcome, Outcome::Allowed);
            let mutated = reviewed.evaluation.mutated().expect("changed");
            assert_eq!(mutated["spec"]["activeDeadlineSeconds"], json!(96));
        })
        .expect("a thread");
    at_the_limit.join().expect("evaluated at the limit");
}

/// Two nested comprehensions over a list from the object are quadratic in a size the
/// requester controls: the cost budget ends the evaluation, and the policy fails per its
/// failurePolicy, naming the budget.
#[test]
fn cel_evaluation_cost_is_bounded() {
    let mutations = json!([{"set": {
        "path": "$.metadata.annotations.n",
        "value": "{{ string(object.spec.items.filter(a, object.spec.items.exists(b, a + b < 0)).size()) }}",
    }}]);
    let mut body: Value = serde_json::from_slice(&pod_review()).expect("fixture");
    body["request"]["object"]["spec"]["items"] = json!((0..5000).collect::<Vec<_>>());
    let body = serde_json::to_vec(&body).expect("json");
    for failure_policy in ["Fail", "Ignore"] {
        let set = load(&policy(failure_policy, json!({}), mutations.clone()));
        let reviewed = admission::oracle::review(
            &body,
            &set,
            graft::admission::ClusterSource::namespaces(NO_NAMESPACES),
        )
        .expect("review");
        let reason = match (
            &reviewed.evaluation.outcome,
            &reviewed.evaluation.policies[..],
        ) {
            (Outcome::Denied { message, .. }, _) => message.clone(),
            (Outcome::Allowed, [report]) => match &report.result {
                PolicyResult::Ignored(failure) => failure.to_string(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        };
        assert!(reason.contains("cost budget"), "{reason}");
        assert!(reviewed.evaluation.patch.0.is_empty());
    }
}
