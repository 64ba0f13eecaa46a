//! The new-user path through the real binary: copy the examples, change a policy the way
//! docs/policies.md says (the Multus network list), see the golden cases fail, refresh
//! them with `graft test --update`, and see every suite pass again, with the rest of the
//! suite files as they were.

use crate::support::cli::{graft, stdout};
use crate::support::fs::copy_tree;
use crate::support::repo;

#[test]
fn a_changed_example_policy_is_refreshed_by_test_update() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    for tree in ["policies", "tests/policies", "tests/fixtures"] {
        copy_tree(&repo().join(tree), &dir.join(tree));
    }
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

    let updating = graft(dir, &["test", "--update", "tests/policies"]);
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
    let output = graft(dir, &["test", "--update", "suite.yaml"]);
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
