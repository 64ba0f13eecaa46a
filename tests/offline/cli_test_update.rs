//! `graft test --update` through the real binary, on real files: the new-user path (copy
//! the examples, change a policy the way docs/policies.md says, see the golden cases
//! fail, refresh them, see every suite pass again), and what a reviewer of the change
//! relies on: only what differs is rewritten (one changed word is one changed line), and
//! comments, flow style, sibling items and line ends stay byte for byte. And it never
//! runs in CI unless forced.

use std::process::Command;

use crate::support::cli::{graft, graft_locally, stderr, stdout};
use crate::support::fs::copy_tree;
use crate::support::repo;

/// The lines that differ between two texts, `-` for removed and `+` for added.
fn changed_lines(before: &str, after: &str) -> Vec<String> {
    similar::TextDiff::from_lines(before, after)
        .iter_all_changes()
        .filter(|change| change.tag() != similar::ChangeTag::Equal)
        .map(|change| format!("{}{}", change.tag(), change.value()))
        .collect()
}

/// A scratch copy of the example policies and their golden suites.
fn examples() -> tempfile::TempDir {
    let scratch = tempfile::tempdir().unwrap();
    for tree in ["policies", "tests/policies", "tests/fixtures"] {
        copy_tree(&repo().join(tree), &scratch.path().join(tree));
    }
    scratch
}

#[test]
fn a_changed_example_policy_is_refreshed_by_test_update() {
    let scratch = examples();
    let dir = scratch.path();
    let policy = dir.join("policies/multus-networks.yaml");
    let text = std::fs::read_to_string(&policy).unwrap();
    std::fs::write(&policy, text.replace("roce15]", "roce15, roce16]")).unwrap();
    let suite = dir.join("tests/policies/multus-networks.yaml");
    let before = std::fs::read_to_string(&suite).unwrap();

    let lint = graft(dir, &["lint", "--strict", "policies"]);
    assert_eq!(lint.status.code(), Some(0), "{}", stdout(&lint));

    let failing = graft(dir, &["test", "tests/policies"]);
    assert_eq!(failing.status.code(), Some(1));
    let report = stdout(&failing);
    let failed: Vec<&str> = report.lines().filter(|l| l.starts_with("FAIL ")).collect();
    assert!(!failed.is_empty(), "{report}");
    assert!(
        report.contains("roce16"),
        "the diff names the new network: {report}"
    );

    let updating = graft_locally(dir, &["test", "--update", "tests/policies"]);
    assert_eq!(updating.status.code(), Some(0), "{}", stdout(&updating));
    let report = stdout(&updating);
    let updated: Vec<String> = report
        .lines()
        .filter_map(|l| l.strip_prefix("UPDATED "))
        .map(|l| format!("FAIL {l}"))
        .collect();
    assert_eq!(updated, failed, "{report}");
    assert!(
        report.contains(&format!("{} cases rewritten", failed.len()))
            || report.contains("1 case rewritten"),
        "{report}"
    );

    let passing = graft(dir, &["test", "tests/policies"]);
    assert_eq!(passing.status.code(), Some(0), "{}", stdout(&passing));
    assert!(stdout(&passing).ends_with(" passed, 0 failed\n"));

    // Only expect blocks changed: the suite's header and every case's inputs stay.
    let after = std::fs::read_to_string(&suite).unwrap();
    assert_ne!(after, before);
    for line in before.lines().filter(|l| {
        let t = l.trim_start();
        t.starts_with("- name:") || t.starts_with("reviewFile:") || t.starts_with('#')
    }) {
        assert!(after.contains(line), "lost {line:?}:\n{after}");
    }
    // And within them only what differs: each line removed is a list of networks that
    // lacked roce16, or the `unchanged` of the case that now gets roce16 added.
    for line in changed_lines(&before, &after) {
        if let Some(removed) = line.strip_prefix('-') {
            assert!(
                removed.contains("roce15") || removed.trim() == "expect: {unchanged: true}",
                "{line:?} was rewritten"
            );
        }
    }
}

#[test]
fn a_one_word_change_in_an_expected_patch_is_a_one_line_diff() {
    let scratch = examples();
    let dir = scratch.path();
    let suite = dir.join("tests/policies/multus-networks.yaml");
    let original = std::fs::read_to_string(&suite).unwrap();
    // An expectation that is out of date by one word, in the first of three identical
    // patches.
    let stale = original.replacen(r#"{"name":"roce12""#, r#"{"name":"roce99""#, 1);
    assert_ne!(stale, original);
    std::fs::write(&suite, &stale).unwrap();

    let output = graft_locally(
        dir,
        &["test", "--update", "tests/policies/multus-networks.yaml"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report = stdout(&output);
    assert!(report.contains("1 case rewritten"), "{report}");
    assert!(
        report.contains(r#"- …orks"},{"name":"roce99","namespace":"rdma-networks"},{"name"…"#),
        "the report says what changed: {report}"
    );
    let updated = std::fs::read_to_string(&suite).unwrap();
    let diff = changed_lines(&stale, &updated);
    assert_eq!(diff.len(), 2, "{diff:#?}");
    assert!(diff[0].starts_with("-            value: '[{") && diff[0].contains("roce99"));
    assert!(diff[1].starts_with("+            value: '[{") && diff[1].contains("roce12"));
    // The one line is back as it was: the whole file is byte for byte the original.
    assert_eq!(updated, original);
}

/// A policy that labels pods `a`, `b` and `c` from its params, and a suite that expects
/// those labels, written the way people write suites: comments, flow and block style,
/// two-space sequence indentation.
const LABELS_POLICY: &str = "\
apiVersion: graft.dev/v1alpha1
kind: MutationPolicy
metadata: {name: labels}
spec:
  match: {resources: [pods]}
  mutations:
    - set: {path: $.metadata.labels.a, value: one}
    - set: {path: $.metadata.labels.b, value: two}
    - set: {path: $.metadata.labels.c, value: three}
";

const LABELS_SUITE: &str = "\
# The labels every pod gets.
apiVersion: graft.dev/v1alpha1
kind: PolicyTest
metadata: {name: labels}
spec:
  policies: [policy.yaml]
  cases:
    # Three labels, in policy order.
    - name: block patch
      object: {apiVersion: v1, kind: Pod, metadata: {name: p, labels: {x: y}}}
      expect:
        applied: [labels]   # the one policy
        patch:
          # a
          - op: add
            path: /metadata/labels/a
            value: one
          # b, in the middle
          - op: add
            path: /metadata/labels/b
            value: two
          - {op: add, path: /metadata/labels/c, value: three}   # c, in flow style
    - name: flow patch
      object: {apiVersion: v1, kind: Pod, metadata: {name: q, labels: {x: y}}}
      expect: {patch: [{op: add, path: /metadata/labels/a, value: one}, {op: add, path: /metadata/labels/b, value: two}, {op: add, path: /metadata/labels/c, value: three}]}
    - name: unrelated
      object: {apiVersion: v1, kind: ConfigMap, metadata: {name: r}}
      expect: {unchanged: true}  # not a pod
";

/// A directory with the labels policy (`b` set to `b_value`) and `suite` as suite.yaml.
fn labels(b_value: &str, suite: &str) -> tempfile::TempDir {
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(
        scratch.path().join("policy.yaml"),
        LABELS_POLICY.replace("value: two}", &format!("value: {b_value}}}")),
    )
    .unwrap();
    std::fs::write(scratch.path().join("suite.yaml"), suite).unwrap();
    scratch
}

#[test]
fn a_changed_item_in_the_middle_of_a_list_leaves_comments_flow_style_and_siblings_as_they_were() {
    let scratch = labels("deux", LABELS_SUITE);
    let dir = scratch.path();
    let failing = graft(dir, &["test", "suite.yaml"]);
    assert_eq!(failing.status.code(), Some(1), "{}", stdout(&failing));

    let output = graft_locally(dir, &["test", "--update", "suite.yaml"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("2 cases rewritten"),
        "{}",
        stdout(&output)
    );
    let updated = std::fs::read_to_string(dir.join("suite.yaml")).unwrap();
    // Exactly the word, in each of the two cases that expect it; the flow-style case
    // stays one flow-style line.
    assert_eq!(
        changed_lines(LABELS_SUITE, &updated),
        [
            "-            value: two\n".to_string(),
            "+            value: deux\n".to_string(),
            "-      expect: {patch: [{op: add, path: /metadata/labels/a, value: one}, {op: add, path: /metadata/labels/b, value: two}, {op: add, path: /metadata/labels/c, value: three}]}\n".to_string(),
            "+      expect: {patch: [{op: add, path: /metadata/labels/a, value: one}, {op: add, path: /metadata/labels/b, value: deux}, {op: add, path: /metadata/labels/c, value: three}]}\n".to_string(),
        ]
    );
    let passing = graft(dir, &["test", "suite.yaml"]);
    assert_eq!(passing.status.code(), Some(0), "{}", stdout(&passing));
}

#[test]
fn an_added_patch_operation_is_lines_added_and_a_removed_one_lines_removed() {
    // A fourth label: one item added after the flow-style one, in the list's own layout.
    let scratch = labels(
        "two}\n    - set: {path: $.metadata.labels.d, value: four",
        LABELS_SUITE,
    );
    let dir = scratch.path();
    let output = graft_locally(dir, &["test", "--update", "suite.yaml"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let updated = std::fs::read_to_string(dir.join("suite.yaml")).unwrap();
    let block_case: Vec<String> = changed_lines(LABELS_SUITE, &updated)
        .into_iter()
        .filter(|line| !line.contains("expect: {patch: [{op: add, path: /metadata/labels/a"))
        .collect();
    assert_eq!(
        block_case,
        [
            "+          - op: add\n",
            "+            path: /metadata/labels/d\n",
            "+            value: four\n",
        ]
    );
    assert_eq!(graft(dir, &["test", "suite.yaml"]).status.code(), Some(0));

    // Back to three labels: the lines go again, and the file is as it was at first.
    std::fs::write(dir.join("policy.yaml"), LABELS_POLICY).unwrap();
    let output = graft_locally(dir, &["test", "--update", "suite.yaml"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let reverted = std::fs::read_to_string(dir.join("suite.yaml")).unwrap();
    assert_eq!(reverted, LABELS_SUITE);
}

#[test]
fn a_case_without_an_expectation_fails_and_update_gives_it_one() {
    let suite = LABELS_SUITE.replace("      expect: {unchanged: true}  # not a pod\n", "")
        + "    - name: new\n      object: {apiVersion: v1, kind: Pod, metadata: {name: s}}\n";
    let scratch = labels("two", &suite);
    let dir = scratch.path();
    let failing = graft(dir, &["test", "suite.yaml"]);
    assert_eq!(failing.status.code(), Some(1), "{}", stderr(&failing));
    let report = stdout(&failing);
    assert!(
        report.contains("FAIL labels: unrelated\n    the case has no expect block, so it cannot pass; the policies give no change.")
            && report.contains("FAIL labels: new\n    the case has no expect block, so it cannot pass; the policies give the patch [{\"op\":\"add\""),
        "{report}"
    );

    let output = graft_locally(dir, &["test", "--update", "suite.yaml"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let updated = std::fs::read_to_string(dir.join("suite.yaml")).unwrap();
    assert_eq!(
        changed_lines(&suite, &updated),
        [
            "+      expect:\n",
            "+        unchanged: true\n",
            "+      expect:\n",
            "+        patch:\n",
            "+          - op: add\n",
            "+            path: /metadata/labels\n",
            "+            value:\n",
            "+              a: one\n",
            "+              b: two\n",
            "+              c: three\n",
        ]
    );
    assert_eq!(graft(dir, &["test", "suite.yaml"]).status.code(), Some(0));
}

#[test]
fn a_crlf_suite_keeps_its_line_ends() {
    let suite = LABELS_SUITE.replace('\n', "\r\n");
    let scratch = labels("deux", &suite);
    let dir = scratch.path();
    let output = graft_locally(dir, &["test", "--update", "suite.yaml"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let updated = std::fs::read_to_string(dir.join("suite.yaml")).unwrap();
    assert_eq!(
        updated,
        suite.replace("value: two\r\n", "value: deux\r\n").replace(
            "/metadata/labels/b, value: two}",
            "/metadata/labels/b, value: deux}"
        )
    );
    // New lines get the file's line ends too.
    std::fs::write(
        dir.join("policy.yaml"),
        LABELS_POLICY.replace(
            "value: two}",
            "value: two}\n    - set: {path: $.metadata.labels.d, value: four}",
        ),
    )
    .unwrap();
    let output = graft_locally(dir, &["test", "--update", "suite.yaml"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let updated = std::fs::read_to_string(dir.join("suite.yaml")).unwrap();
    assert!(
        updated.contains("\r\n          - op: add\r\n            path: /metadata/labels/d\r\n            value: four\r\n"),
        "{updated:?}"
    );
    assert_eq!(
        updated.matches('\n').count(),
        updated.matches("\r\n").count()
    );
    assert_eq!(graft(dir, &["test", "suite.yaml"]).status.code(), Some(0));
}

#[test]
fn update_is_refused_where_ci_is_set_unless_forced() {
    let scratch = labels("deux", LABELS_SUITE);
    let dir = scratch.path();
    let with_ci = |value: &str, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_graft"))
            .current_dir(dir)
            .args(args)
            .env("CI", value)
            .output()
            .unwrap()
    };
    for value in ["true", "1"] {
        let output = with_ci(value, &["test", "--update", "suite.yaml"]);
        assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
        let message = stderr(&output);
        assert!(
            message.contains(&format!(
                "--update is refused because the environment variable CI is set (CI={value})"
            )) && message.contains("Run `graft test` in CI")
                && message.contains("add --force"),
            "{message}"
        );
        assert_eq!(stdout(&output), "");
        assert_eq!(
            std::fs::read_to_string(dir.join("suite.yaml")).unwrap(),
            LABELS_SUITE
        );
    }
    // `graft test` alone runs in CI, and fails as it should.
    assert_eq!(
        with_ci("true", &["test", "suite.yaml"]).status.code(),
        Some(1)
    );
    // An empty CI is not CI.
    let output = with_ci("", &["test", "--update", "suite.yaml"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    std::fs::write(dir.join("suite.yaml"), LABELS_SUITE).unwrap();
    let output = with_ci("true", &["test", "--update", "--force", "suite.yaml"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_ne!(
        std::fs::read_to_string(dir.join("suite.yaml")).unwrap(),
        LABELS_SUITE
    );
    // --force means nothing without --update.
    let output = with_ci("true", &["test", "--force", "suite.yaml"]);
    assert_eq!(output.status.code(), Some(2), "{}", stdout(&output));
}

#[test]
fn a_case_whose_policy_does_not_converge_is_not_rewritten() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    std::fs::write(
        dir.join("p.yaml"),
        "apiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\nmetadata: {name: grow}\nspec:\n  match: {resources: [pods]}\n  mutations:\n    - set:\n        path: $.metadata.labels.n\n        value: \"{{ string(int(object.metadata.?labels.n.orValue('0')) + 1) }}\"\n",
    )
    .unwrap();
    let suite = "apiVersion: graft.dev/v1alpha1\nkind: PolicyTest\nmetadata: {name: s}\nspec:\n  policies: [p.yaml]\n  cases:\n    - name: grows\n      object: {apiVersion: v1, kind: Pod, metadata: {name: p}}\n      expect: {unchanged: true}\n";
    std::fs::write(dir.join("suite.yaml"), suite).unwrap();
    let output = graft_locally(dir, &["test", "--update", "suite.yaml"]);
    assert_eq!(output.status.code(), Some(1));
    let report = stdout(&output);
    assert!(report.contains("FAIL s: grows"), "{report}");
    assert!(report.contains("not convergent"), "{report}");
    assert!(report.contains("0 cases rewritten"), "{report}");
    assert_eq!(
        std::fs::read_to_string(dir.join("suite.yaml")).unwrap(),
        suite
    );
}

#[test]
fn only_update_writes_an_expected_object_file_and_it_edits_it_in_place() {
    let scratch = labels("deux", LABELS_SUITE);
    let dir = scratch.path();
    let suite = "apiVersion: graft.dev/v1alpha1\nkind: PolicyTest\nmetadata: {name: s}\nspec:\n  policies: [policy.yaml]\n  cases:\n    - name: whole object\n      object: {apiVersion: v1, kind: Pod, metadata: {name: p}}\n      expect:\n        objectFile: expected.yaml\n";
    std::fs::write(dir.join("suite.yaml"), suite).unwrap();
    let expected = "# The pod as the policy leaves it.\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {a: one, b: two, c: three}\n";
    std::fs::write(dir.join("expected.yaml"), expected).unwrap();

    // A failing run, in CI or not, leaves the expectation as it is: the next run fails
    // too.
    for _ in 0..2 {
        let output = graft(dir, &["test", "suite.yaml"]);
        assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
        assert_eq!(
            std::fs::read_to_string(dir.join("expected.yaml")).unwrap(),
            expected
        );
    }

    let output = graft_locally(dir, &["test", "--update", "suite.yaml"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        std::fs::read_to_string(dir.join("expected.yaml")).unwrap(),
        expected.replace("b: two", "b: deux")
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("suite.yaml")).unwrap(),
        suite
    );
    assert_eq!(graft(dir, &["test", "suite.yaml"]).status.code(), Some(0));
}
