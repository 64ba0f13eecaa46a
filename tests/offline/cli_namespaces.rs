//! `--namespaces FILE` of `graft apply`, `graft review` and `graft test`, through the real
//! binary with the example policies: the sidecar example injects only in namespaces
//! labelled `sidecar-injection: enabled`, so what it does depends on the file.

use std::path::Path;
use std::process::Output;

use crate::support::cli::graft_in_repo;
use crate::support::repo;
use serde_json::{Value, json};

const NAMESPACES: &str = "tests/policies/objects/namespaces.yaml";
const POD: &str = "tests/policies/objects/pod-inject-on.yaml";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `graft apply -o patch` of the annotated pod in `namespace`, with `extra` flags.
fn apply_patch(namespace: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "apply",
        "--policies",
        "policies/",
        "--namespace",
        namespace,
        "-o",
        "patch",
    ];
    args.extend_from_slice(extra);
    args.push(POD);
    graft_in_repo(&args, None)
}

fn write(dir: &Path, name: &str, contents: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path.display().to_string()
}

#[test]
fn apply_injects_only_in_labelled_namespaces_of_the_file() {
    // `default` is labelled (an item of the file's List), `plain` is not (a document of
    // its own), `kube-system` is labelled but excluded.
    let output = apply_patch("default", &["--namespaces", NAMESPACES]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let patch: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        patch.to_string().contains("sidecar-nginx"),
        "no sidecar in {patch}"
    );
    for namespace in ["plain", "kube-system"] {
        let output = apply_patch(namespace, &["--namespaces", NAMESPACES]);
        assert!(output.status.success(), "{}", text(&output.stderr));
        assert_eq!(text(&output.stdout).trim(), "[]", "{namespace}");
    }
}

#[test]
fn without_the_data_a_policy_that_needs_it_denies_and_says_how_to_give_it() {
    let output = apply_patch("default", &[]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        text(&output.stderr).trim(),
        "denied: graft: policy sidecar-injection: spec.match.namespaceSelector: no data for namespace \"default\": pass the Namespace objects with --namespaces FILE"
    );
    let output = apply_patch("elsewhere", &["--namespaces", NAMESPACES]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("namespace \"elsewhere\" is not in the --namespaces file"),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn malformed_namespace_files_are_usage_errors_naming_the_file_and_object() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "pod.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n",
            "object 1 (namespace web): kind must be Namespace, got \"Pod\"",
        ),
        (
            "list.yaml",
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: a}\n- apiVersion: v1\n  kind: Namespace\n  metadata: {labels: {x: y}}\n",
            "object 2: metadata.name must be a non-empty string",
        ),
        (
            "number.yaml",
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: a, labels: {replicas: 3}}\n",
            "metadata.labels.replicas: expected a string, got 3 (quote it)",
        ),
        ("broken.yaml", "apiVersion: v1\nkind: [\n", "document 1: "),
    ];
    for (name, contents, expected) in cases {
        let path = write(dir.path(), name, contents);
        let output = apply_patch("default", &["--namespaces", &path]);
        assert_eq!(output.status.code(), Some(2), "{name}");
        let stderr = text(&output.stderr);
        assert!(
            stderr.starts_with(&format!("error: reading namespaces from {path}: ")),
            "{name}: {stderr}"
        );
        assert!(stderr.contains(expected), "{name}: {stderr}");
    }
    let output = graft_in_repo(
        &[
            "review",
            "--policies",
            "policies/",
            "--namespaces",
            "-",
            "-",
        ],
        Some(b"{}"),
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("--namespaces and the input cannot both be standard input"),
        "{}",
        text(&output.stderr)
    );
    let missing = dir.path().join("missing.yaml").display().to_string();
    let output = apply_patch("default", &["--namespaces", &missing]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains(&format!("reading {missing}")),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn review_takes_the_namespaces_too() {
    let mut request: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("tests/fixtures/pod-create-multus-worker.json"))
            .unwrap(),
    )
    .unwrap();
    request["request"]["namespace"] = json!("plain");
    request["request"]["object"]["metadata"]["annotations"] =
        json!({"sidecar-injector-webhook.morven.me/inject": "yes"});
    let body = serde_json::to_vec(&request).unwrap();
    let answer = |args: &[&str]| -> Value {
        let output = graft_in_repo(args, Some(&body));
        assert!(output.status.success(), "{}", text(&output.stderr));
        serde_json::from_slice(&output.stdout).unwrap()
    };
    // `plain` is not labelled: allowed, nothing injected.
    let response = answer(&[
        "review",
        "--policies",
        "policies/",
        "--namespaces",
        NAMESPACES,
    ]);
    assert_eq!(response["response"]["allowed"], true);
    assert!(response["response"].get("patch").is_none(), "{response}");
    // Without the file the policy fails, and the answer says why.
    let response = answer(&["review", "--policies", "policies/"]);
    assert_eq!(response["response"]["allowed"], false);
    assert!(
        response["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains(
                "no data for namespace \"plain\": pass the Namespace objects with --namespaces FILE"
            ),
        "{response}"
    );
}

#[test]
fn test_uses_the_file_for_suites_without_namespaces_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let policy = repo().join("policies/sidecar-injection.yaml");
    let pod = repo().join(POD);
    let suite = format!(
        "apiVersion: graft.dev/v1alpha1\nkind: PolicyTest\nmetadata:\n  name: shared\nspec:\n  policies: [{}]\n  cases:\n    - name: injected in default\n      namespace: default\n      objectFile: {}\n      expect:\n        applied: [sidecar-injection]\n",
        policy.display(),
        pod.display()
    );
    let suite = write(dir.path(), "suite.yaml", &suite);
    let output = graft_in_repo(&["test", "--namespaces", NAMESPACES, &suite], None);
    assert!(
        output.status.success(),
        "{}{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    assert!(text(&output.stdout).contains("1 passed, 0 failed"));
    // Without it, the case fails and the failure says where namespaces go.
    let output = graft_in_repo(&["test", &suite], None);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stdout).contains(
            "no data for namespace \"default\": list the Namespace objects under the suite's spec.namespaces, or pass --namespaces FILE"
        ),
        "{}",
        text(&output.stdout)
    );
}

#[test]
fn a_suite_with_a_malformed_namespace_is_an_error_naming_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    let suite = "apiVersion: graft.dev/v1alpha1\nkind: PolicyTest\nmetadata:\n  name: bad\nspec:\n  policies: []\n  namespaces:\n    - {apiVersion: v1, kind: Namespace, metadata: {name: a}}\n    - {apiVersion: v1, kind: Namespace, metadata: {name: a}}\n  cases: []\n";
    let suite = write(dir.path(), "suite.yaml", suite);
    let output = graft_in_repo(&["test", &suite], None);
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&format!("{suite}: spec.namespaces"))
            && stderr.contains("object 2 (namespace a): the namespace is given twice"),
        "{stderr}"
    );
}

#[test]
fn a_suite_reads_namespaces_inline_and_from_its_namespaces_file() {
    let dir = tempfile::tempdir().unwrap();
    let policy = repo().join("policies/sidecar-injection.yaml");
    let pod = repo().join(POD);
    std::fs::copy(repo().join(NAMESPACES), dir.path().join("namespaces.yaml")).unwrap();
    let suite = |inline: &str| {
        format!(
            "apiVersion: graft.dev/v1alpha1\nkind: PolicyTest\nmetadata:\n  name: file\nspec:\n  policies: [{}]\n  namespacesFile: namespaces.yaml\n  namespaces:\n    - {{apiVersion: v1, kind: Namespace, metadata: {{name: {inline}, labels: {{sidecar-injection: enabled}}}}}}\n  cases:\n    - name: injected in default (from the file)\n      namespace: default\n      objectFile: {}\n      expect:\n        applied: [sidecar-injection]\n    - name: injected in extra (inline)\n      namespace: extra\n      objectFile: {}\n      expect:\n        applied: [sidecar-injection]\n    - name: not in plain (from the file, unlabelled)\n      namespace: plain\n      objectFile: {}\n      expect: {{unchanged: true}}\n",
            policy.display(),
            pod.display(),
            pod.display(),
            pod.display()
        )
    };
    let good = write(dir.path(), "good.yaml", &suite("extra"));
    let output = graft_in_repo(&["test", &good], None);
    assert!(
        output.status.success(),
        "{}{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    assert!(text(&output.stdout).contains("3 passed, 0 failed"));
    // A namespace both inline and in the file is given twice.
    let twice = write(dir.path(), "twice.yaml", &suite("default"));
    let output = graft_in_repo(&["test", &twice], None);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("(namespace default): the namespace is given twice"),
        "{}",
        text(&output.stderr)
    );
}
