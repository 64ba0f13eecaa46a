//! `graft review`, `graft apply`, `graft explain` and `graft test` through the real binary, on the
//! captured AdmissionReviews and this suite's own policies (tests/fixtures/policies), so an
//! edit to the shipped examples changes only their golden suites.

use std::path::Path;

use crate::support::cli::graft_in_repo;
use crate::support::repo;
use base64::Engine as _;
use serde_json::{Value, json};

/// The policies these tests run: small ones written for them, not the examples.
const POLICIES: &str = "tests/fixtures/policies/";
/// A policy that reads namespace labels, for the tests that give `--namespaces`.
const NAMESPACE_POLICIES: &str = "tests/fixtures/namespace-policies/";

fn fixture(name: &str) -> Value {
    let text = std::fs::read_to_string(repo().join("tests/fixtures").join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Runs `graft review` on a fixture and returns (request, response review).
fn review(name: &str) -> (Value, Value) {
    let path = format!("tests/fixtures/{name}");
    let output = graft_in_repo(&["review", "--policies", POLICIES, &path], None);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    (
        fixture(name),
        serde_json::from_slice(&output.stdout).unwrap(),
    )
}

/// Decodes the response's base64 patch and applies it with an RFC 6902 implementation.
fn patched(request: &Value, response: &Value) -> Value {
    assert_eq!(response["response"]["patchType"], "JSONPatch");
    let encoded = response["response"]["patch"].as_str().unwrap();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
    let mut object = request["request"]["object"].clone();
    json_patch::patch(&mut object, &patch).unwrap();
    object
}

fn check_envelope(request: &Value, response: &Value) {
    assert_eq!(response["apiVersion"], request["apiVersion"]);
    assert_eq!(response["kind"], "AdmissionReview");
    assert_eq!(response["response"]["uid"], request["request"]["uid"]);
    assert_eq!(response["response"]["allowed"], true);
}

#[test]
fn review_answers_a_captured_pod_with_its_patch_and_audit_annotations() {
    let (request, response) = review("pod-create-multus-worker.json");
    check_envelope(&request, &response);
    let mut expected = request["request"]["object"].clone();
    expected["metadata"]["labels"]["graft.test/namespace"] = json!("dynamo-system");
    assert_eq!(patched(&request, &response), expected);
    assert_eq!(expected["metadata"]["annotations"]["team"], "infra");
    let audit = &response["response"]["auditAnnotations"];
    assert_eq!(audit["mutated-by"], "label-namespace");
    assert!(audit["revision"].as_str().unwrap().starts_with("sha256:"));
}

#[test]
fn review_of_a_statefulset_pod_reads_its_ordinal() {
    let (request, response) = review("pod-create-statefulset-web-3.json");
    check_envelope(&request, &response);
    let mut expected = request["request"]["object"].clone();
    expected["spec"]["nodeSelector"] = json!({"zone": "odd"});
    expected["metadata"]["labels"]["graft.test/namespace"] = json!("dynamo-system");
    assert_eq!(patched(&request, &response), expected);
}

#[test]
fn review_of_a_node_status_update() {
    let (request, response) = review("node-status-update.json");
    check_envelope(&request, &response);
    let mut expected = request["request"]["object"].clone();
    expected["status"]["allocatable"]["pods"] = json!("250");
    assert_eq!(patched(&request, &response), expected);
}

#[test]
fn review_of_a_sidecar_pod_and_v1beta1_answer_in_kind() {
    let mut request = fixture("pod-create-multus-worker.json");
    request["apiVersion"] = json!("admission.k8s.io/v1beta1");
    request["request"]["namespace"] = json!("default");
    let body = serde_json::to_vec(&request).unwrap();
    let output = graft_in_repo(
        &[
            "review",
            "--policies",
            POLICIES,
            "--policies",
            NAMESPACE_POLICIES,
            "--namespaces",
            "tests/policies/objects/namespaces.yaml",
            "-",
        ],
        Some(&body),
    );
    assert!(output.status.success());
    let response: Value = serde_json::from_slice(&output.stdout).unwrap();
    check_envelope(&request, &response);
    let object = patched(&request, &response);
    let containers = object["spec"]["containers"].as_array().unwrap();
    assert_eq!(containers.last().unwrap()["name"], "sidecar");
    assert_eq!(
        object["metadata"]["labels"]["graft.test/namespace"],
        "default"
    );
}

#[test]
fn review_of_an_unmatched_request_carries_no_patch() {
    let mut request = fixture("pod-create-multus-worker.json");
    request["request"]["namespace"] = json!("elsewhere");
    let body = serde_json::to_vec(&request).unwrap();
    let output = graft_in_repo(&["review", "--policies", POLICIES], Some(&body));
    let response: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(response["response"]["allowed"], true);
    assert!(response["response"].get("patch").is_none());
    assert!(response["response"].get("patchType").is_none());
}

#[test]
fn review_rejects_a_body_that_is_not_a_review() {
    let output = graft_in_repo(
        &["review", "--policies", POLICIES],
        Some(b"{\"kind\": \"Pod\"}"),
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("kind must be AdmissionReview"));
}

#[test]
fn apply_prints_mutated_objects_and_patches() {
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-2\n  labels: {ab-build-different: \"true\"}\n  ownerReferences: [{kind: StatefulSet, name: web, apiVersion: apps/v1, uid: u}]\nspec:\n  containers: [{name: app, image: app:1}]\n";
    let output = graft_in_repo(
        &["apply", "--policies", POLICIES, "-o", "json", "-"],
        Some(pod.as_bytes()),
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let object: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(object["spec"]["nodeSelector"], json!({"zone": "even"}));

    let output = graft_in_repo(
        &["apply", "--policies", POLICIES, "-o", "patch", "-"],
        Some(pod.as_bytes()),
    );
    let patch: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        patch,
        json!([
            {"op": "add", "path": "/metadata/labels/graft.test~1namespace", "value": "default"},
            {"op": "add", "path": "/spec/nodeSelector", "value": {"zone": "even"}},
        ])
    );
}

#[test]
fn apply_reads_lists_and_reports_denials_on_stderr() {
    let list = json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": []}},
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "web-1", "labels": {"ab-build-different": "true"},
                          "annotations": {"deny-me": "please"},
                          "ownerReferences": [{"kind": "StatefulSet", "name": "web", "apiVersion": "apps/v1", "uid": "u"}]},
             "spec": {"containers": []}}
        ]
    });
    let body = serde_json::to_vec(&list).unwrap();
    let output = graft_in_repo(&["apply", "--policies", POLICIES, "-"], Some(&body));
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("denied: graft: policy ordinal-zone:")
            && stderr.contains("annotation deny-me is set"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(stdout.matches("kind: Pod").count(), 1, "{stdout}");
}

#[test]
fn graft_test_passes_every_golden_suite() {
    let output = graft_in_repo(&["test", "tests/policies"], None);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
    for policy in std::fs::read_dir(repo().join("policies")).unwrap() {
        let name = policy.unwrap().file_name().to_string_lossy().into_owned();
        if let Some(stem) = name.strip_suffix(".yaml") {
            assert!(
                stdout.contains(&format!("PASS {stem}: ")),
                "no suite for policies/{name}"
            );
        }
    }
}

#[test]
fn graft_test_reports_a_wrong_expectation_with_a_diff() {
    let dir = tempfile::tempdir().unwrap();
    let suite = format!(
        "apiVersion: graft.dev/v1alpha1\nkind: PolicyTest\nmetadata: {{name: wrong}}\nspec:\n  policies: [{}]\n  cases:\n    - name: expects the wrong node\n      object:\n        apiVersion: v1\n        kind: Pod\n        metadata:\n          name: web-2\n          labels: {{ab-build-different: \"true\"}}\n          ownerReferences: [{{kind: StatefulSet, name: web, apiVersion: apps/v1, uid: u}}]\n        spec: {{containers: []}}\n      expect:\n        object:\n          apiVersion: v1\n          kind: Pod\n          metadata:\n            name: web-2\n            labels: {{ab-build-different: \"true\"}}\n            ownerReferences: [{{kind: StatefulSet, name: web, apiVersion: apps/v1, uid: u}}]\n          spec: {{containers: [], nodeSelector: {{zone: odd}}}}\n",
        repo().join(POLICIES).join("ordinal-zone.yaml").display()
    );
    let file = dir.path().join("suite.yaml");
    std::fs::write(&file, suite).unwrap();
    let output = graft_in_repo(&["test", file.to_str().unwrap()], None);
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("FAIL wrong: expects the wrong node"),
        "{stdout}"
    );
    assert!(
        stdout.contains("-    zone: odd") && stdout.contains("+    zone: even"),
        "{stdout}"
    );
    assert!(stdout.contains("0 passed, 1 failed"), "{stdout}");
}

#[test]
fn graft_test_fails_a_policy_that_does_not_converge() {
    let dir = tempfile::tempdir().unwrap();
    // Appending to a list on every pass never converges.
    let policy = "apiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\nmetadata: {name: grows}\nspec:\n  match: {resources: [pods]}\n  mutations:\n    - jsonPatch:\n        - {op: add, path: /spec/containers/-, value: {name: x}}\n";
    std::fs::write(dir.path().join("grows.yaml"), policy).unwrap();
    let suite = "apiVersion: graft.dev/v1alpha1\nkind: PolicyTest\nmetadata: {name: grows}\nspec:\n  policies: [grows.yaml]\n  cases:\n    - name: appends\n      object: {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: []}}\n      expect:\n        applied: [grows]\n";
    let file = dir.path().join("suite.yaml");
    std::fs::write(&file, suite).unwrap();
    let output = graft_in_repo(&["test", file.to_str().unwrap()], None);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("not convergent: a second pass gives patch"),
        "{stdout}"
    );
}

#[test]
fn every_example_policy_has_a_suite() {
    // (policy directory, suite directory, prefix of the suite's file name): the examples
    // and the library, in graft's dialect and as MutatingAdmissionPolicies.
    let layout = [
        ("policies", "tests/policies", ""),
        ("policies/map", "tests/policies", "map-"),
        ("policies/library", "tests/policies/library", ""),
        ("policies/library/map", "tests/policies/library", "map-"),
    ];
    for (policies, suites, prefix) in layout {
        let mut count = 0;
        for policy in std::fs::read_dir(repo().join(policies)).unwrap() {
            let policy = policy.unwrap().path();
            let Some(name) = policy.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if !name.ends_with(".yaml") {
                continue;
            }
            count += 1;
            let suite = repo().join(suites).join(format!("{prefix}{name}"));
            let cases = suite_cases_of(&suite, &policy);
            if policies.starts_with("policies/library") {
                // A library suite shows both sides: objects the policy changes, and
                // objects it leaves alone.
                let changed = |case: &serde_yaml::Value| {
                    case["expect"].get("patch").is_some() || case["expect"].get("object").is_some()
                };
                let unchanged = |case: &serde_yaml::Value| case["expect"]["unchanged"] == true;
                assert!(
                    cases.iter().any(changed) && cases.iter().any(unchanged),
                    "{}: a library suite needs a case the policy changes and one it leaves unchanged",
                    suite.display()
                );
            }
        }
        // The library is a promise of docs/library.md; an empty or moved directory would
        // pass the loop above.
        if policies.starts_with("policies/library") {
            assert!(count >= 25, "{policies} holds {count} policies");
        }
    }
}

/// The cases of `suite`, which must exist and name `policy` among its `spec.policies`
/// (paths relative to the suite).
fn suite_cases_of(suite: &Path, policy: &Path) -> Vec<serde_yaml::Value> {
    let text = std::fs::read_to_string(suite)
        .unwrap_or_else(|e| panic!("no suite {} for {}: {e}", suite.display(), policy.display()));
    let document: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let dir = suite.parent().unwrap();
    let wanted = policy.canonicalize().unwrap();
    let names_it = document["spec"]["policies"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(serde_yaml::Value::as_str)
        .any(|path| dir.join(path).canonicalize().ok().as_deref() == Some(wanted.as_path()));
    assert!(
        names_it,
        "{} does not list {} in spec.policies",
        suite.display(),
        policy.display()
    );
    document["spec"]["cases"]
        .as_sequence()
        .cloned()
        .unwrap_or_default()
}

/// A suite whose kind is mistyped, in a directory of suites, fails the run with the
/// reason instead of being skipped (which passed a run that tested less than it said).
#[test]
fn graft_test_refuses_a_suite_with_a_mistyped_kind_or_field() {
    let dir = tempfile::tempdir().unwrap();
    let policy = repo().join(POLICIES).join("ordinal-zone.yaml");
    let suite = |kind: &str, field: &str| {
        format!(
            "apiVersion: graft.dev/v1alpha1\nkind: {kind}\nmetadata: {{name: s}}\nspec:\n  policies: [{}]\n  cases:\n    - name: a pod\n      object: {{apiVersion: v1, kind: Pod, metadata: {{name: p}}, spec: {{containers: []}}}}\n      {field}: {{unchanged: true}}\n",
            policy.display()
        )
    };
    std::fs::write(dir.path().join("good.yaml"), suite("PolicyTest", "expect")).unwrap();
    let run = || graft_in_repo(&["test", dir.path().to_str().unwrap()], None);
    let output = run();
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.ends_with("1 suite in 1 file\n1 passed, 0 failed\n"),
        "{stdout}"
    );

    std::fs::write(dir.path().join("typo.yaml"), suite("PolicyTests", "expect")).unwrap();
    let output = run();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("typo.yaml: expected apiVersion graft.dev/v1alpha1 and kind PolicyTest, found apiVersion \"graft.dev/v1alpha1\" and kind \"PolicyTests\""),
        "{stderr}"
    );

    std::fs::write(
        dir.path().join("typo.yaml"),
        suite("PolicyTest", "expected"),
    )
    .unwrap();
    let output = run();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("typo.yaml") && stderr.contains("expected"),
        "{stderr}"
    );
}

#[test]
fn explain_reports_what_review_does_for_a_captured_review() {
    for name in [
        "pod-create-multus-worker.json",
        "pod-create-statefulset-web-3.json",
        "node-status-update.json",
    ] {
        let (request, response) = review(name);
        let path = format!("tests/fixtures/{name}");
        let output = graft_in_repo(
            &["explain", "--policies", POLICIES, "--format", "json", &path],
            None,
        );
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let explained: Value = serde_json::from_slice(&output.stdout).unwrap();
        // The same decision and the same patch as the server's answer.
        assert_eq!(explained["decision"], "allowed", "{name}: {explained}");
        let mut object = request["request"]["object"].clone();
        let patch: json_patch::Patch = serde_json::from_value(explained["patch"].clone()).unwrap();
        json_patch::patch(&mut object, &patch).unwrap();
        assert_eq!(object, patched(&request, &response), "{name}");
        // Every policy of the set has a verdict, and the applied ones add up to the patch.
        let policies = explained["policies"].as_array().unwrap();
        assert_eq!(policies.len(), 3, "{name}: {explained}");
        let mut by_policies = request["request"]["object"].clone();
        for policy in policies {
            match policy["result"].as_str().unwrap() {
                "applied" => {
                    let own: json_patch::Patch =
                        serde_json::from_value(policy["patch"].clone()).unwrap();
                    json_patch::patch(&mut by_policies, &own).unwrap();
                }
                "not matched" => assert!(
                    policy["condition"]
                        .as_str()
                        .is_some_and(|c| c.contains(": want ")),
                    "{name}: {policy}"
                ),
                other => panic!("{name}: unexpected {other}: {policy}"),
            }
        }
        assert_eq!(by_policies, object, "{name}");
    }
}

/// `graft explain` of `object` (standard input) with both fixture policy directories and
/// the suites' Namespace objects, and `extra` flags; its text output.
fn explain_text(extra: &[&str], object: &[u8]) -> String {
    let mut args = vec![
        "explain",
        "--policies",
        POLICIES,
        "--policies",
        NAMESPACE_POLICIES,
        "--namespaces",
        "tests/policies/objects/namespaces.yaml",
    ];
    args.extend_from_slice(extra);
    args.push("-");
    let output = graft_in_repo(&args, Some(object));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn explain_text_names_the_condition_and_the_patch() {
    let text = explain_text(
        &[],
        b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: plain\nspec:\n  containers: [{name: app, image: app:1}]\n",
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "Pod plain/web (CREATE core/v1/pods): allowed, unchanged"
    );
    assert!(
        lines.contains(
            &"  label-namespace: not matched: match.namespaces: want one of dynamo-system, default, got plain"
        ),
        "{text}"
    );
    assert!(
        lines.contains(&"  namespace-sidecar: not matched: match.namespaceSelector sidecar-injection: want enabled, got nothing (labels of namespace plain)"),
        "{text}"
    );

    let text = explain_text(
        &["--namespace", "default"],
        b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers: [{name: app, image: app:1}]\n",
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "Pod default/web (CREATE core/v1/pods): allowed, 2 patch operations"
    );
    assert!(lines.contains(&"  namespace-sidecar: applied"), "{text}");
    assert!(
        lines.contains(
            &"      add /spec/containers/1 = {\"image\":\"sidecar:1\",\"name\":\"sidecar\"}"
        ) || lines.contains(
            &"      add /spec/containers/1 = {\"name\":\"sidecar\",\"image\":\"sidecar:1\"}"
        ),
        "{text}"
    );
    assert!(
        lines.contains(&"      add /metadata/labels = {\"graft.test/namespace\":\"default\"}"),
        "{text}"
    );
}

#[test]
fn apply_takes_an_admission_review_as_its_request() {
    let (request, response) = review("pod-create-multus-worker.json");
    let output = graft_in_repo(
        &[
            "apply",
            "--policies",
            POLICIES,
            "-o",
            "json",
            "tests/fixtures/pod-create-multus-worker.json",
        ],
        None,
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let applied: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(applied, patched(&request, &response));
}
