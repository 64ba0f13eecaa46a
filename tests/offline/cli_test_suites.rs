//! Which suites `graft test` runs and which it refuses, and what a failing case says,
//! through the real binary on suite directories written for each test: a run that tests
//! nothing, or tests the same suite many times, or cannot tell its cases apart, must not
//! pass as if it tested what it says; a case that fails because a policy failed says why
//! the policy failed.

use crate::support::cli::{graft, graft_locally, stderr, stdout};

/// Adds the `team: a` label to every Pod.
const POLICY: &str = "apiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\nmetadata: {name: team-label}\nspec:\n  match: {resources: [pods]}\n  mutations:\n    - set: {path: $.metadata.labels.team, value: a}\n";

/// A case the policy passes, in block style.
fn labelled_case(name: &str) -> String {
    format!(
        "    - name: {name}\n      object: {{apiVersion: v1, kind: Pod, metadata: {{name: p}}}}\n      expect:\n        applied: [team-label]\n"
    )
}

/// A case the policy fails (it expects no change), in block style.
fn unchanged_case(name: &str) -> String {
    format!(
        "    - name: {name}\n      object: {{apiVersion: v1, kind: Pod, metadata: {{name: p}}}}\n      expect:\n        unchanged: true\n"
    )
}

fn suite(header: &str, cases: &str) -> String {
    format!("{header}metadata: {{name: s}}\nspec:\n  policies: [policy.yaml]\n  cases:\n{cases}")
}

const HEADER: &str = "apiVersion: graft.dev/v1alpha1\nkind: PolicyTest\n";

/// A directory `suites/` with the policy and `suite.yaml`.
fn suites(suite_text: &str) -> tempfile::TempDir {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("suites");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("policy.yaml"), POLICY).unwrap();
    std::fs::write(dir.join("suite.yaml"), suite_text).unwrap();
    scratch
}

#[test]
fn a_directory_is_read_by_each_documents_apiversion_and_kind() {
    let quoted = "apiVersion: \"graft.dev/v1alpha1\"\nkind: 'PolicyTest'\n";
    let scratch = suites(&suite(quoted, &labelled_case("labelled")));
    // A policy whose kind line carries a comment is a policy, not a suite.
    std::fs::write(
        scratch.path().join("suites/policy.yaml"),
        POLICY.replace(
            "kind: MutationPolicy\n",
            "kind: MutationPolicy  # the team label\n",
        ),
    )
    .unwrap();
    let output = graft(scratch.path(), &["test", "suites"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).ends_with("PASS s: labelled\n1 suite in 1 file\n1 passed, 0 failed\n"),
        "{}",
        stdout(&output)
    );

    // A quoted kind that is mistyped is still refused with the reason, not skipped.
    let typo = "apiVersion: graft.dev/v1alpha1\nkind: \"PolicyTests\"  # mistyped\n";
    std::fs::write(
        scratch.path().join("suites/typo.yaml"),
        suite(typo, &labelled_case("labelled")),
    )
    .unwrap();
    let output = graft(scratch.path(), &["test", "suites"]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("typo.yaml: expected apiVersion graft.dev/v1alpha1 and kind PolicyTest, found apiVersion \"graft.dev/v1alpha1\" and kind \"PolicyTests\""),
        "{}",
        stderr(&output)
    );

    // So is a file that is not YAML at all but names graft's apiVersion.
    std::fs::write(
        scratch.path().join("suites/typo.yaml"),
        "apiVersion: graft.dev/v1alpha1\nkind: PolicyTest\nspec: [unclosed\n",
    )
    .unwrap();
    let output = graft(scratch.path(), &["test", "suites"]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("parsing suites/typo.yaml"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_suite_whose_case_names_repeat_is_refused_and_not_rewritten() {
    let text = suite(
        HEADER,
        &format!("{}{}", labelled_case("twice"), unchanged_case("twice")),
    );
    let scratch = suites(&text);
    for args in [
        &["test", "suites"][..],
        &["test", "--update", "suites/suite.yaml"][..],
    ] {
        let output = graft_locally(scratch.path(), args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stdout(&output)
        );
        assert!(
            stderr(&output)
                .contains("suites/suite.yaml: spec.cases: two cases are named \"twice\""),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(!stdout(&output).contains("UPDATED"), "{}", stdout(&output));
        assert_eq!(
            std::fs::read_to_string(scratch.path().join("suites/suite.yaml")).unwrap(),
            text
        );
    }
}

#[test]
fn update_rewrites_a_flow_style_case_in_flow_style() {
    let flow = "    - {name: flow, object: {apiVersion: v1, kind: Pod, metadata: {name: p}}, expect: {unchanged: true}}\n";
    let text = suite(HEADER, &format!("{}{flow}", unchanged_case("block")));
    let scratch = suites(&text);
    let output = graft_locally(scratch.path(), &["test", "--update", "suites"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // Each rewritten case says what was wrong with its old expectation: here, that it
    // expected no change.
    let report = stdout(&output);
    assert!(
        report.contains("UPDATED s: block\n    expected no change, got patch [{\"op\":\"add\",\"path\":\"/metadata/labels\",\"value\":{\"team\":\"a\"}}]\n")
            && report.contains("UPDATED s: flow\n    expected no change, got patch")
            && report.contains("2 cases rewritten"),
        "{report}"
    );
    let updated = std::fs::read_to_string(scratch.path().join("suites/suite.yaml")).unwrap();
    assert_eq!(
        updated,
        text.replace(
            "      expect:\n        unchanged: true\n",
            "      expect:\n        patch:\n          - op: add\n            path: /metadata/labels\n            value:\n              team: a\n",
        )
        .replace(
            "expect: {unchanged: true}}",
            "expect: {patch: [{op: add, path: /metadata/labels, value: {team: a}}]}}"
        )
    );
    let output = graft(scratch.path(), &["test", "suites"]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
}

#[test]
fn a_suite_without_cases_is_refused() {
    let scratch = suites(&suite(HEADER, "").replace("  cases:\n", "  cases: []\n"));
    let output = graft(scratch.path(), &["test", "suites"]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("suites/suite.yaml: spec.cases: the suite has no cases"),
        "{}",
        stderr(&output)
    );
}

#[cfg(unix)]
#[test]
fn each_suite_runs_once_however_many_links_and_paths_lead_to_it() {
    let scratch = suites(&suite(HEADER, &labelled_case("labelled")));
    let dir = scratch.path();
    std::fs::create_dir_all(dir.join("suites/sub")).unwrap();
    // A loop back up the tree, and a second way into the same directory.
    std::os::unix::fs::symlink("..", dir.join("suites/sub/up")).unwrap();
    std::os::unix::fs::symlink("suites", dir.join("again")).unwrap();
    let output = graft(
        dir,
        &["test", "suites", "again", "suites/suite.yaml", "again/sub"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "PASS s: labelled\n1 suite in 1 file\n1 passed, 0 failed\n"
    );
}

#[test]
fn a_policy_set_with_problems_names_the_suite() {
    let scratch = suites(&suite(HEADER, &labelled_case("labelled")));
    std::fs::write(
        scratch.path().join("suites/policy.yaml"),
        POLICY.replace("resources: [pods]", "resources: [pods], colour: red"),
    )
    .unwrap();
    let output = graft(scratch.path(), &["test", "suites"]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
    assert!(
        stderr(&output).contains(
            "error: suites/suite.yaml: spec.policies: the policy set has 1 problem(s); run graft lint"
        ),
        "{}",
        stderr(&output)
    );
}

/// Labels a Pod with twice its `n` annotation; fails on a Pod whose `n` is no number.
fn doubling_policy(failure_policy: &str) -> String {
    format!(
        "apiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\nmetadata: {{name: double}}\nspec:\n  failurePolicy: {failure_policy}\n  match: {{resources: [pods]}}\n  mutations:\n    - set: {{path: $.metadata.labels.double, value: \"{{{{ string(int(object.metadata.annotations['n']) * 2) }}}}\"}}\n"
    )
}

/// The same as a MutatingAdmissionPolicy with its binding.
fn doubling_admission_policy(failure_policy: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicy\nmetadata: {{name: double}}\nspec:\n  failurePolicy: {failure_policy}\n  reinvocationPolicy: Never\n  matchConstraints:\n    resourceRules:\n      - {{apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [pods]}}\n  mutations:\n    - patchType: ApplyConfiguration\n      applyConfiguration:\n        expression: >\n          Object{{metadata: Object.metadata{{labels: {{\"double\": string(int(object.metadata.annotations[\"n\"]) * 2)}}}}}}\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicyBinding\nmetadata: {{name: double-binding}}\nspec: {{policyName: double}}\n"
    )
}

/// A suite whose one case expects the label on a Pod whose `n` is `x`.
const DOUBLING_SUITE: &str = "apiVersion: graft.dev/v1alpha1\nkind: PolicyTest\nmetadata: {name: s}\nspec:\n  policies: [policy.yaml]\n  namespaces: [{apiVersion: v1, kind: Namespace, metadata: {name: default}}]\n  cases:\n    - name: doubled\n      object: {apiVersion: v1, kind: Pod, metadata: {name: p, annotations: {n: x}}}\n      expect:\n        patch:\n          - {op: add, path: /metadata/labels, value: {double: \"2\"}}\n";

/// The report of the doubling suite against `policy`.
fn doubling_report(policy: &str) -> String {
    let scratch = suites(DOUBLING_SUITE);
    std::fs::write(scratch.path().join("suites/policy.yaml"), policy).unwrap();
    let output = graft(scratch.path(), &["test", "suites"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    stdout(&output)
}

#[test]
fn a_case_failing_because_a_policy_was_skipped_says_why_it_was() {
    let report = doubling_report(&doubling_policy("Ignore"));
    // The diff alone shows only that the change is missing.
    assert!(
        report.contains("FAIL s: doubled\n    patch differs (- expected, + actual):\n"),
        "{report}"
    );
    assert!(report.contains("\n    +[]\n"), "{report}");
    assert!(
        report.contains("\n    policy double failed and was skipped (failurePolicy: Ignore): spec.mutations[0].set.value: ")
            && report.contains("(in {{ string(int(object.metadata.annotations['n']) * 2) }})"),
        "{report}"
    );

    let report = doubling_report(&doubling_admission_policy("Ignore"));
    assert!(report.contains("\n    +[]\n"), "{report}");
    let reason = report
        .lines()
        .find(|line| line.contains("policy double (binding double-binding) failed and was skipped (failurePolicy: Ignore): "))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(reason.contains("int"), "{reason}");
}

#[test]
fn a_case_failing_because_a_policy_denied_says_why_once() {
    for policy in [doubling_policy("Fail"), doubling_admission_policy("Fail")] {
        let report = doubling_report(&policy);
        // The denial's message is the reason, in full; it is not said twice.
        assert!(
            report.contains("FAIL s: doubled\n    unexpected denial: "),
            "{report}"
        );
        assert!(!report.contains("failed, denying the request"), "{report}");
        assert_eq!(report.matches("string(int(").count(), 1, "{report}");
    }
}
