//! `graft lint` through the real binary: each kind of broken policy gets its own
//! precise finding (file, line, policy, field), and the exit codes are 0 / 1 / 2.

use crate::support::policies::policy_yaml;
use crate::support::repo;
use std::path::Path;
use std::process::Command;

const HEADER: &str = "apiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\n";

/// Writes `files` into a fresh directory, runs `graft lint DIR`, and returns
/// (exit code, stdout with the directory prefix removed).
fn lint(files: &[(&str, &str)]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let output = Command::new(env!("CARGO_BIN_EXE_graft"))
        .arg("lint")
        .arg(dir.path())
        .output()
        .unwrap();
    let prefix = format!("{}/", dir.path().display());
    let stdout = String::from_utf8(output.stdout)
        .unwrap()
        .replace(&prefix, "");
    (output.status.code().unwrap(), stdout)
}

const MATCH_PODS: &str = "  match:\n    resources: [pods]\n";
const SET_LABEL: &str =
    "  mutations:\n    - set:\n        path: $.metadata.labels.team\n        value: infra\n";

fn check(files: &[(&str, &str)], expected: &str) {
    let (code, stdout) = lint(files);
    assert_eq!(stdout.trim_end(), expected, "stdout");
    assert_eq!(code, 1, "exit code");
}

#[test]
fn a_clean_policy_set_exits_zero() {
    let (code, stdout) = lint(&[(
        "ok.yaml",
        &policy_yaml("ok", &format!("{MATCH_PODS}{SET_LABEL}")),
    )]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(stdout, "");
}

#[test]
fn the_example_policies_are_clean() {
    let policies = repo().join("policies");
    let output = Command::new(env!("CARGO_BIN_EXE_graft"))
        .args(["lint", "--strict"])
        .arg(&policies)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

#[test]
fn yaml_syntax_errors_carry_the_line() {
    let text = format!("{HEADER}metadata:\n  name: broken\nspec:\n  match: [unclosed\n");
    check(
        &[("a.yaml", &text)],
        "a.yaml:7: invalid YAML: did not find expected ',' or ']'",
    );
}

#[test]
fn unknown_fields_name_the_field_and_line() {
    let text = policy_yaml(
        "typo",
        &format!(
            "{MATCH_PODS}  mutations:\n    - set:\n        pth: $.metadata.labels.a\n        value: b\n"
        ),
    );
    check(
        &[("a.yaml", &text)],
        "a.yaml:10: policy typo: spec.mutations[0].set.pth: unknown field `pth`, expected one of `path`, `value`, `ifAbsent` (hint: check the spelling against schema/mutationpolicy.schema.json)",
    );
}

#[test]
fn unknown_api_version_and_kind() {
    let wrong_version =
        "apiVersion: graft.dev/v2\nkind: MutationPolicy\nmetadata:\n  name: a\nspec: {}\n";
    check(
        &[("a.yaml", wrong_version)],
        "a.yaml:1: policy a: apiVersion: unsupported apiVersion \"graft.dev/v2\": expected apiVersion graft.dev/v1alpha1 and kind MutationPolicy, or apiVersion admissionregistration.k8s.io/v1 and kind MutatingAdmissionPolicy or MutatingAdmissionPolicyBinding",
    );
    let wrong_kind = "apiVersion: graft.dev/v1alpha1\nkind: ConfigMap\nmetadata:\n  name: a\n";
    check(
        &[("a.yaml", wrong_kind)],
        "a.yaml:2: policy a: kind: unsupported kind \"ConfigMap\": expected apiVersion graft.dev/v1alpha1 and kind MutationPolicy, or apiVersion admissionregistration.k8s.io/v1 and kind MutatingAdmissionPolicy or MutatingAdmissionPolicyBinding",
    );
}

#[test]
fn a_missing_name() {
    let text = format!("{HEADER}metadata: {{}}\nspec: {{}}\n");
    check(
        &[("a.yaml", &text)],
        "a.yaml:3: metadata.name: missing metadata.name (hint: every policy needs a unique name; it appears in logs, metrics and warnings)",
    );
}

#[test]
fn duplicate_names_across_files() {
    let text = policy_yaml("same", &format!("{MATCH_PODS}{SET_LABEL}"));
    check(
        &[("a.yaml", &text), ("b.yaml", &format!("---\n{text}"))],
        &format!(
            "b.yaml:2: policy same: metadata.name: duplicate policy name: also defined at {}:1 (hint: policy names must be unique across all files)",
            "a.yaml"
        ),
    );
}

#[test]
fn invalid_jsonpath() {
    let text = policy_yaml(
        "bad-path",
        &format!(
            "{MATCH_PODS}  mutations:\n    - set:\n        path: $.metadata.labels[\n        value: b\n"
        ),
    );
    let (code, stdout) = lint(&[("a.yaml", &text)]);
    assert_eq!(code, 1);
    assert!(
        stdout.starts_with("a.yaml:10: policy bad-path: spec.mutations[0].set.path: invalid JSONPath \"$.metadata.labels[\""),
        "{stdout}"
    );
}

#[test]
fn invalid_regex() {
    let text = policy_yaml(
        "bad-regex",
        &format!(
            "  match:\n    resources: [pods]\n    fields:\n      - path: $.metadata.name\n        regex: '(unclosed'\n{SET_LABEL}"
        ),
    );
    let (code, stdout) = lint(&[("a.yaml", &text)]);
    assert_eq!(code, 1);
    assert!(
        stdout.starts_with("a.yaml:10: policy bad-regex: spec.match.fields[0].regex: invalid regex: regex parse error"),
        "{stdout}"
    );
}

#[test]
fn invalid_cel() {
    let text = policy_yaml(
        "bad-cel",
        &format!(
            "  match:\n    resources: [pods]\n    cel: 'object.metadata.name =='\n{SET_LABEL}"
        ),
    );
    let (code, stdout) = lint(&[("a.yaml", &text)]);
    assert_eq!(code, 1);
    assert!(
        stdout.starts_with("a.yaml:8: policy bad-cel: spec.match.cel: invalid CEL expression"),
        "{stdout}"
    );
}

#[test]
fn a_mutation_with_two_kinds() {
    let text = policy_yaml(
        "two",
        &format!(
            "{MATCH_PODS}  mutations:\n    - set: {{path: $.a, value: 1}}\n      remove: {{path: $.b}}\n"
        ),
    );
    check(
        &[("a.yaml", &text)],
        "a.yaml:9: policy two: spec.mutations[0]: a mutation needs exactly one of set, merge, append, remove, jsonPatch (hint: split it into one list item per change)",
    );
}

/// Misused `foreach`, `@` paths, `element`, `append` and `names` are each named with
/// the field and a hint.
#[test]
fn misused_mutation_kinds() {
    let text = policy_yaml(
        "misused",
        concat!(
            "  match:\n    resources: [pods]\n    names: [web]\n",
            "  mutations:\n",
            "    - foreach: \"$.spec.containers[*]\"\n      set: {path: $.spec.x, value: 1}\n",
            "    - set: {path: \"@.x\", value: 1}\n",
            "    - set: {path: $.x, value: \"{{ element.name }}\"}\n",
            "    - foreach: \"$.spec.containers[*]\"\n      jsonPatch: [{op: add, path: /x, value: 1}]\n",
            "    - append: {path: $.spec.tolerations, value: {key: a}}\n",
            "    - foreach: \"$.spec.containers[*]\"\n      remove: {path: \"@\"}\n",
            "    - when: \"index > 0\"\n      set: {path: $.a, value: 1}\n",
            "    - merge: {ifAbsent: true, value: {spec: {hostNetwork: null}}}\n",
        ),
    );
    check(
        &[("a.yaml", &text)],
        "a.yaml:8: warning: policy misused: spec.match.names[0]: \"web\" has no `*`: a Pod made from a template has only metadata.generateName at CREATE, which is what names compares then, so this never matches such a Pod (hint: write web-* to match generated names too, or match on labels)\n\
         a.yaml:11: policy misused: spec.mutations[0].set.path: under foreach, paths start at the element with @ (hint: write @.spec.x)\n\
         a.yaml:12: policy misused: spec.mutations[1].set.path: a path starting with @ is relative to a foreach element, and this mutation has no foreach (hint: write $.x, or add foreach)\n\
         a.yaml:13: policy misused: spec.mutations[2].set.value: `element` and `index` are bound only in a mutation with foreach (hint: add foreach: <JSONPath> to the mutation, or read the value from object)\n\
         a.yaml:15: policy misused: spec.mutations[3].jsonPatch: jsonPatch cannot run under foreach: its pointers are not relative to an element (hint: use set, merge, append or remove, whose paths start at the element with @)\n\
         a.yaml:16: policy misused: spec.mutations[4].append.value: append takes a list of the items to add (hint: wrap the item in a list: value: [{key: example, operator: Exists}])\n\
         a.yaml:18: policy misused: spec.mutations[5].remove.path: a foreach mutation cannot remove its element (hint: remove with a filter instead: remove: {path: \"$.spec.containers[?@.name == 'debug']\"})\n\
         a.yaml:20: warning: policy misused: spec.mutations[6].set.value: Pod has no field a: the apiserver drops what is written there\n\
         a.yaml:19: policy misused: spec.mutations[6].when: `element` and `index` are bound only in a mutation with foreach (hint: add foreach: <JSONPath> to the mutation, or read the value from object)\n\
         a.yaml:21: warning: policy misused: spec.mutations[7].merge.value: with ifAbsent a null removes nothing: the key is left as it is (hint: drop the null, or remove the key in a merge without ifAbsent)",
    );
}

#[test]
fn protected_metadata_fields() {
    let text = policy_yaml(
        "rename",
        &format!("{MATCH_PODS}  mutations:\n    - set: {{path: $.metadata.name, value: other}}\n"),
    );
    check(
        &[("a.yaml", &text)],
        "a.yaml:9: policy rename: spec.mutations[0].set.path: policies may not change metadata.name",
    );
}

#[test]
fn unknown_operation_and_invalid_resource() {
    let text = policy_yaml(
        "ops",
        &format!("  match:\n    resources: [Pods]\n    operations: [CREAT]\n{SET_LABEL}"),
    );
    check(
        &[("a.yaml", &text)],
        "a.yaml:7: policy ops: spec.match.resources[0]: invalid resource \"Pods\": resource names are lowercase plural names such as pods or nodes/status\n\
         a.yaml:8: policy ops: spec.match.operations[0]: unknown operation \"CREAT\" (hint: use CREATE, UPDATE, DELETE, CONNECT or *)",
    );
}

#[test]
fn a_field_test_with_two_checks() {
    let text = policy_yaml(
        "two-checks",
        &format!(
            "  match:\n    resources: [pods]\n    fields:\n      - path: $.metadata.name\n        equals: a\n        exists: true\n{SET_LABEL}"
        ),
    );
    check(
        &[("a.yaml", &text)],
        "a.yaml:9: policy two-checks: spec.match.fields[0]: a field test needs exactly one of equals, in, notIn, exists, notExists, regex; found 2",
    );
}

#[test]
fn an_empty_exclude_block() {
    let text = policy_yaml(
        "empty-exclude",
        &format!("{MATCH_PODS}  exclude: {{}}\n{SET_LABEL}"),
    );
    check(
        &[("a.yaml", &text)],
        "a.yaml:8: policy empty-exclude: spec.exclude: an empty exclude block excludes every request (hint: remove it, or give at least one condition)",
    );
}

#[test]
fn warnings_for_unescaped_keys_and_adds_under_missing_parents() {
    let text = policy_yaml(
        "risky",
        &format!(
            "{MATCH_PODS}  mutations:\n    - set:\n        path: $.metadata.annotations.prometheus.io.scrape\n        value: a\n    - jsonPatch:\n        - {{op: add, path: /metadata/labels/team, value: a}}\n"
        ),
    );
    let (code, stdout) = lint(&[("a.yaml", &text)]);
    assert_eq!(
        code, 0,
        "warnings alone do not fail without --strict: {stdout}"
    );
    assert_eq!(
        stdout.trim_end(),
        "a.yaml:10: warning: policy risky: spec.mutations[0].set.path: annotations values are strings, but this path goes 3 levels below annotations (hint: quote the key: ['prometheus.io.scrape'])\n\
         a.yaml:13: warning: policy risky: spec.mutations[1].jsonPatch[0].path: add /metadata/labels/team fails when /metadata/labels does not exist (hint: use a set mutation, which creates missing parents)"
    );
}

#[test]
fn missing_paths_are_usage_errors_and_json_output_is_structured() {
    let output = Command::new(env!("CARGO_BIN_EXE_graft"))
        .args(["lint", "/nonexistent/graft-policies"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.yaml"),
        policy_yaml(
            "ops",
            "  match:\n    resources: [pods]\n    operations: [NOPE]\n  mutations: []\n",
        ),
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_graft"))
        .args(["lint", "--format", "json"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["errors"], 1);
    assert_eq!(report["warnings"], 1);
    assert_eq!(report["findings"][0]["field"], "spec.match.operations[0]");
    assert_eq!(report["findings"][0]["line"], 8);
    assert_eq!(report["findings"][0]["policy"], "ops");
}

#[test]
fn configmap_dot_entries_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("..2026_11_22_00_00_00.000000001");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(
        data.join("p.yaml"),
        policy_yaml("p", &format!("{MATCH_PODS}{SET_LABEL}")),
    )
    .unwrap();
    std::os::unix::fs::symlink("..2026_11_22_00_00_00.000000001", dir.path().join("..data"))
        .unwrap();
    std::os::unix::fs::symlink("..data/p.yaml", dir.path().join("p.yaml")).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_graft"))
        .arg("lint")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        "1 policy OK, 0 warnings"
    );
}

#[test]
fn webhook_config_coverage_warns_about_requests_never_sent() {
    let root = repo();
    let run = |config: &Path| {
        Command::new(env!("CARGO_BIN_EXE_graft"))
            .current_dir(&root)
            .args(["lint", "policies", "--webhook-config"])
            .arg(config)
            .output()
            .unwrap()
    };
    let committed = run(&root.join("deploy/examples/webhook.yaml"));
    assert_eq!(committed.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&committed.stdout),
        "",
        "the committed configuration covers every policy"
    );

    let dir = tempfile::tempdir().unwrap();
    let pods_only = dir.path().join("pods-only.yaml");
    std::fs::write(
        &pods_only,
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata: {name: graft}\nwebhooks:\n  - name: pods.graft.dev\n    rules:\n      - {apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [pods]}\n",
    )
    .unwrap();
    let output = run(&pods_only);
    assert_eq!(output.status.code(), Some(0), "warnings alone do not fail");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        stdout.trim_end(),
        format!(
            "policies/node-overcommit.yaml: warning: policy node-overcommit: spec.match.resources[0]: {} never sends UPDATE of nodes/status to graft, so this policy cannot apply to it (hint: regenerate it with graft webhook-config)",
            pods_only.display()
        )
    );
}

#[test]
fn has_over_a_parent_that_may_be_absent_is_warned_with_the_optional_form() {
    let spec = format!(
        "{MATCH_PODS}  mutations:\n    - set:\n        path: $.metadata.labels.team\n        value: \"{{{{ string(has(object.spec.securityContext.runAsUser)) }}}}\"\n      when: has(object.metadata.labels.team)\n"
    );
    let (code, stdout) = lint(&[("p.yaml", &policy_yaml("p", &spec))]);
    assert_eq!(code, 0, "a warning alone does not fail lint: {stdout}");
    let expected = "p.yaml:11: warning: policy p: spec.mutations[0].set.value: \
        has(object.spec.securityContext.runAsUser) fails with \"no such key\" when \
        object.spec.securityContext is absent (has() tests only its last field); under \
        failurePolicy Fail that denies the request (hint: write \
        object.spec.?securityContext.?runAsUser.hasValue(), which is false when any part is absent)\n\
        p.yaml:12: warning: policy p: spec.mutations[0].when: has(object.metadata.labels.team) \
        fails with \"no such key\" when object.metadata.labels is absent (has() tests only its \
        last field); under failurePolicy Fail that denies the request (hint: write \
        object.metadata.?labels.?team.hasValue(), which is false when any part is absent)";
    assert_eq!(
        stdout.lines().take(2).collect::<Vec<_>>().join("\n"),
        expected
    );
}

#[test]
fn namespace_selectors_are_checked_like_label_selectors() {
    let text = policy_yaml(
        "namespaces",
        &format!(
            "  match:\n    resources: [pods]\n    namespaceSelector:\n      matchExpressions:\n        - key: team\n          operator: Exists\n          values: [a]\n        - key: tier\n          operator: In\n        - key: Bad/Key\n          operator: NotIn\n          values: [ok]\n  exclude:\n    namespaceSelector: {{}}\n{SET_LABEL}"
        ),
    );
    let operator = policy_yaml(
        "operator",
        &format!(
            "  match:\n    resources: [pods]\n    namespaceSelector:\n      matchExpressions:\n        - {{key: team, operator: Equals, values: [a]}}\n{SET_LABEL}"
        ),
    );
    check(
        &[("a.yaml", &text), ("b.yaml", &operator)],
        "b.yaml:10: policy operator: spec.match.namespaceSelector.matchExpressions[0].operator: unknown variant `Equals`, expected one of `In`, `NotIn`, `Exists`, `DoesNotExist`\n\
         a.yaml:10: policy namespaces: spec.match.namespaceSelector.matchExpressions[0]: Exists and DoesNotExist take no values\n\
         a.yaml:13: policy namespaces: spec.match.namespaceSelector.matchExpressions[1]: In and NotIn need at least one value\n\
         a.yaml:15: warning: policy namespaces: spec.match.namespaceSelector.matchExpressions[2]: \"Bad/Key\" is not a valid label key: the prefix \"Bad\" is not a lowercase DNS subdomain (hint: label keys are [prefix/]name: a DNS subdomain prefix, a name of up to 63 letters, digits, '-', '_' or '.')\n\
         a.yaml:19: warning: policy namespaces: spec.exclude.namespaceSelector: an empty namespaceSelector selects every namespace: the exclude block skips every namespaced request and every Namespace",
    );
}

#[test]
fn the_summary_counts_in_words_and_json_says_when_nothing_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let good = policy_yaml("p", &format!("{MATCH_PODS}{SET_LABEL}"));
    let bad = policy_yaml("q", "  match:\n    resources: [pods]\n    bogus: 1\n");
    std::fs::write(dir.path().join("a.yaml"), &good).unwrap();
    let run = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_graft"))
            .arg("lint")
            .args(args)
            .arg(dir.path())
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).trim().to_string(),
        )
    };
    assert_eq!(run(&[]).1, "1 policy OK, 0 warnings");
    let json: serde_json::Value = serde_json::from_str(&run(&["--format", "json"]).0).unwrap();
    assert_eq!(json["policies"], 1, "{json}");
    std::fs::write(dir.path().join("b.yaml"), &bad).unwrap();
    assert_eq!(run(&[]).1, "1 error, 0 warnings");
    let json: serde_json::Value = serde_json::from_str(&run(&["--format", "json"]).0).unwrap();
    assert_eq!(json["errors"], 1, "{json}");
    assert!(
        json["policies"].is_null(),
        "a set with errors does not load: {json}"
    );
}

/// A policy file copied into the shipped directory but not added to its kustomization's
/// generator would be missing from the ConfigMap: lint fails and names it.
#[test]
fn a_policy_file_the_configmap_generator_leaves_out_fails_lint() {
    let root = repo().join("policies");
    let dir = tempfile::tempdir().unwrap();
    // The files graft loads and the kustomization; not policies/map/, which graft does
    // not load from here (the directory is read non-recursively).
    for entry in std::fs::read_dir(&root).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
        }
    }
    let lint = || {
        let output = Command::new(env!("CARGO_BIN_EXE_graft"))
            .arg("lint")
            .arg(dir.path())
            .output()
            .unwrap();
        let prefix = format!("{}/", dir.path().display());
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).replace(&prefix, ""),
        )
    };
    assert_eq!(lint().0, Some(0), "the shipped directory is complete");
    std::fs::write(
        dir.path().join("team-label.yaml"),
        policy_yaml("team-label", &format!("{MATCH_PODS}{SET_LABEL}")),
    )
    .unwrap();
    let (code, stdout) = lint();
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains(
            "Kustomization:8: policy file team-label.yaml is not listed in configMapGenerator[0] (graft-policies) files"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("hint: add `- team-label.yaml` under its files"),
        "{stdout}"
    );
}

#[test]
fn a_singular_built_in_resource_is_warned_with_the_plural() {
    let spec = format!(
        "  match:\n    resources: [pod, apps/v1/statefulset, nodes/status, example.com/v1/widget, virtualservices, apps/statefulsets, pods/status]\n{SET_LABEL}"
    );
    let (code, stdout) = lint(&[("p.yaml", &policy_yaml("p", &spec))]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(
        stdout.trim_end(),
        "p.yaml:7: warning: policy p: spec.match.resources[0]: \"pod\" is not a resource name, so this rule never matches: the apiserver names resources in the plural, in lower case (hint: write pods)\n\
         p.yaml:7: warning: policy p: spec.match.resources[1]: \"statefulset\" is not a resource name, so this rule never matches: the apiserver names resources in the plural, in lower case (hint: write apps/v1/statefulsets)\n\
         p.yaml:7: warning: policy p: spec.match.resources[5]: \"apps/statefulsets\" reads as resource \"apps\" with subresource \"statefulsets\", so this rule never matches: a group needs a version (or `*`) before the resource (hint: write apps/*/statefulsets)\n\
         p.yaml: note: graft has no schema for widget (example.com): values written to it are not type-checked\n\
         p.yaml: note: graft has no schema for virtualservices (any group): values written to it are not type-checked"
    );
}

/// `v1/pods` reads as resource `v1` with subresource `pods`: the core group must be named.
#[test]
fn a_version_without_its_group_is_warned() {
    let spec = format!(
        "  match:\n    resources: [v1/pods, core/v1/pods, v2beta1/horizontalpodautoscalers]\n{SET_LABEL}"
    );
    let (code, stdout) = lint(&[("p.yaml", &policy_yaml("p", &spec))]);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(
        stdout.trim_end(),
        "p.yaml:7: warning: policy p: spec.match.resources[0]: \"v1/pods\" reads as resource \"v1\" with subresource \"pods\", so this rule never matches: a version needs its group before it (`core` for the core group) (hint: write core/v1/pods, or GROUP/v1/pods)\n\
         p.yaml:7: warning: policy p: spec.match.resources[2]: \"v2beta1/horizontalpodautoscalers\" reads as resource \"v2beta1\" with subresource \"horizontalpodautoscalers\", so this rule never matches: a version needs its group before it (`core` for the core group) (hint: write core/v2beta1/horizontalpodautoscalers, or GROUP/v2beta1/horizontalpodautoscalers)"
    );
}

/// Every unknown field of a document in one run, each with its line.
#[test]
fn every_unknown_field_of_a_document_is_reported_at_once() {
    let text = policy_yaml(
        "typos",
        "  match:\n    resources: [pods]\n    operation: [CREATE]\n  mutations:\n    - set:\n        pth: $.metadata.labels.a\n        value: b\n      whne: \"true\"\n    - remove: {paths: $.a}\n",
    );
    check(
        &[("a.yaml", &text)],
        "a.yaml:8: policy typos: spec.match.operation: unknown field `operation`, expected one of `resources`, `operations`, `namespaces`, `names`, `namespaceSelector`, `labels`, `labelSelector`, `annotations`, `annotationSelector`, `fields`, `cel` (hint: check the spelling against schema/mutationpolicy.schema.json)\n\
         a.yaml:11: policy typos: spec.mutations[0].set.pth: unknown field `pth`, expected one of `path`, `value`, `ifAbsent` (hint: check the spelling against schema/mutationpolicy.schema.json)\n\
         a.yaml:13: policy typos: spec.mutations[0].whne: unknown field `whne`, expected one of `foreach`, `set`, `merge`, `append`, `remove`, `jsonPatch`, `when` (hint: check the spelling against schema/mutationpolicy.schema.json)\n\
         a.yaml:14: policy typos: spec.mutations[1].remove.paths: unknown field `paths`, expected `path` (hint: check the spelling against schema/mutationpolicy.schema.json)",
    );
}

#[test]
fn misspelt_cel_names_are_errors_with_the_name_meant() {
    let spec = "  params:\n    registry: example.com\n  match:\n    resources: [pods]\n    \
        cel: objekt.metadata.name != ''\n  variables:\n    - name: early\n      \
        expression: variables.late\n    - name: late\n      expression: params.registy\n  \
        mutations:\n    - set:\n        path: $.metadata.labels.ordinal\n        \
        value: \"{{ string(podOrdnal(object)) }}\"\n    \
        - set:\n        path: $.metadata.labels.user\n        \
        value: \"{{ request.userInfo.username.lowerAsci() }}\"\n    \
        - set:\n        path: $.metadata.labels.web\n        value: 'yes'\n      \
        when: request.namespce == 'web'\n";
    let expected = "p.yaml:10: policy typos: spec.match.cel: unknown name objekt (hint: did you mean object?)\n\
        p.yaml:13: policy typos: spec.variables[0].expression: variables.late is not evaluated yet here \
        (hint: variables are evaluated in order, after spec.match and spec.exclude: refer only to those declared above)\n\
        p.yaml:15: policy typos: spec.variables[1].expression: params.registy is not declared in spec.params \
        (hint: did you mean params.registry?)\n\
        p.yaml:19: policy typos: spec.mutations[0].set.value: unknown function podOrdnal (hint: did you mean podOrdinal?)\n\
        p.yaml:22: policy typos: spec.mutations[1].set.value: unknown method lowerAsci (hint: did you mean lowerAscii?)\n\
        p.yaml:26: policy typos: spec.mutations[2].when: request has no field namespce (hint: did you mean request.namespace?)";
    check(&[("p.yaml", &policy_yaml("typos", spec))], expected);
}

#[test]
fn a_part_reading_only_params_that_fails_at_load_is_warned() {
    let spec = format!(
        "  params:\n    quantity: 12 cores\n{MATCH_PODS}  mutations:\n    - set:\n        path: $.metadata.labels.cpu\n        value: \"{{{{ string(quantityValue(params.quantity)) + object.metadata.name }}}}\"\n"
    );
    let (code, stdout) = lint(&[("p.yaml", &policy_yaml("p", &spec))]);
    assert_eq!(code, 0, "a warning alone does not fail lint: {stdout}");
    let first = stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(
            "p.yaml:13: warning: policy p: spec.mutations[0].set.value: a part of this \
             expression that reads only params and literals fails: "
        ) && first.contains("quantityValue")
            && first.ends_with(
                "every review that reaches it fails the same way (hint: check the params it \
                 reads and the values it computes from them)"
            ),
        "{stdout}"
    );
    assert_eq!(stdout.matches("warning:").count(), 1, "{stdout}");
}

/// A literal merge fragment whose item of a keyed list lacks its key would fail every
/// review it runs in: lint refuses it, at the item's line and field, in the words the
/// merge uses at admission.
#[test]
fn a_merged_item_without_its_merge_key_is_an_error() {
    let spec = format!(
        "{MATCH_PODS}  mutations:\n    - merge:\n        path: $.spec\n        value:\n          containers:\n            - name: sidecar\n              volumeMounts:\n                - name: conf\n          volumes:\n            - configMap: {{name: conf}}\n"
    );
    check(
        &[("p.yaml", &policy_yaml("p", &spec))],
        "p.yaml:15: policy p: spec.mutations[0].merge.value.containers[0].volumeMounts[0]: \
         cannot merge into $.spec.containers[0].volumeMounts: Kubernetes merges this list by \
         \"mountPath\", and item 0 of the value has no \"mountPath\", so the merge fails wherever \
         it runs (hint: give every item of $.spec.containers[0].volumeMounts its mountPath)",
    );
}

/// A merge without a path merges into the object: a literal value that is not an object
/// would change nothing, and is an error.
#[test]
fn a_merge_into_the_object_of_a_value_that_is_not_an_object_is_an_error() {
    let spec = format!(
        "{MATCH_PODS}  mutations:\n    - merge:\n        value: [{{metadata: {{labels: {{team: a}}}}}}]\n"
    );
    check(
        &[("p.yaml", &policy_yaml("p", &spec))],
        "p.yaml:10: policy p: spec.mutations[0].merge.value: a merge without a path merges into \
         the object, and takes an object (hint: write the fields to merge from the top (value: \
         {metadata: {labels: {team: a}}}), or give a path)",
    );
}

/// Where the fragment's items or its location are known only at admission (a template, a
/// `foreach`, a path to several places), where the merge may succeed (`ifAbsent`), or the
/// list is not merged by key, lint says nothing.
#[test]
fn merge_keys_are_checked_only_where_they_are_known() {
    for mutation in [
        // A list Kubernetes replaces whole.
        "    - merge:\n        path: $.spec\n        value:\n          tolerations:\n            - operator: Exists\n",
        // A null entry removes the key: nothing of it is merged.
        "    - merge:\n        value:\n          spec:\n            containers: null\n",
        // The item is rendered at admission.
        "    - merge:\n        path: $.spec\n        value:\n          containers:\n            - \"{{ {'image': 'nginx'} }}\"\n",
        // Under foreach, relative to each element.
        "    - foreach: $.spec.containers[*]\n      merge:\n        path: \"@\"\n        value:\n          env:\n            - value: x\n",
        // With ifAbsent an existing `app` container is not looked into: only pods
        // without it fail.
        "    - merge:\n        ifAbsent: true\n        value:\n          spec:\n            containers:\n              - name: app\n                env:\n                  - value: x\n",
        // A path to several places.
        "    - merge:\n        path: $.spec.containers[*]\n        value:\n          env:\n            - value: x\n",
    ] {
        let spec = format!("{MATCH_PODS}  mutations:\n{mutation}");
        let (code, stdout) = lint(&[("p.yaml", &policy_yaml("p", &spec))]);
        assert_eq!(code, 0, "{mutation}\n{stdout}");
        assert!(!stdout.contains("cannot merge into"), "{stdout}");
    }
}
