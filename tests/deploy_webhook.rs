//! `graft webhook-config`: the committed deploy/base/webhook.yaml is exactly what the
//! policies in policies/ need, and the flags do what docs/operations.md says.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn graft(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_graft"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run graft")
}

fn stdout(output: Output) -> String {
    assert!(
        output.status.success(),
        "graft failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

fn yaml(text: &str) -> serde_json::Value {
    serde_yaml::from_str(text).expect("valid YAML")
}

#[test]
fn committed_webhook_config_matches_the_policies() {
    let rendered = stdout(graft(
        &repo(),
        &["webhook-config", "--policies", "policies/"],
    ));
    let committed = std::fs::read_to_string(repo().join("deploy/base/webhook.yaml"))
        .expect("deploy/base/webhook.yaml");
    assert!(
        rendered == committed,
        "deploy/base/webhook.yaml is stale; regenerate it with\n  \
         graft webhook-config --policies policies/ --out deploy/base/webhook.yaml"
    );
}

#[test]
fn fail_switches_only_the_main_webhook() {
    let config = yaml(&stdout(graft(
        &repo(),
        &[
            "webhook-config",
            "--policies",
            "policies/",
            "--failure-policy",
            "Fail",
        ],
    )));
    for webhook in config["webhooks"].as_array().expect("webhooks") {
        let expected = if webhook["name"] == "pods.graft.dev" {
            "Fail"
        } else {
            "Ignore"
        };
        assert_eq!(webhook["failurePolicy"], expected, "{}", webhook["name"]);
    }
}

#[test]
fn ca_bundle_file_and_out_file() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let ca = scratch.path().join("ca.crt");
    std::fs::write(
        &ca,
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .expect("write ca");
    let out = scratch.path().join("webhook.yaml");
    let policies = repo().join("policies");
    let args = [
        "webhook-config",
        "--policies",
        policies.to_str().expect("UTF-8 path"),
        "--service",
        "hooks",
        "--namespace",
        "platform",
        "--ca-bundle-file",
        ca.to_str().expect("UTF-8 path"),
        "--out",
        out.to_str().expect("UTF-8 path"),
    ];
    stdout(graft(scratch.path(), &args));
    let config = yaml(&std::fs::read_to_string(&out).expect("--out file"));
    let bundle = BASE64.encode(std::fs::read(&ca).expect("ca"));
    for webhook in config["webhooks"].as_array().expect("webhooks") {
        assert_eq!(webhook["clientConfig"]["caBundle"], bundle.as_str());
        assert_eq!(webhook["clientConfig"]["service"]["name"], "hooks");
        assert_eq!(webhook["clientConfig"]["service"]["namespace"], "platform");
        let excluded = &webhook["namespaceSelector"]["matchExpressions"][0]["values"];
        assert!(
            excluded
                .as_array()
                .expect("values")
                .contains(&"platform".into())
        );
    }
}

#[test]
fn rules_follow_the_policies() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let policy = |name: &str, resources: &str, operations: &str| {
        format!(
            "apiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\nmetadata:\n  name: {name}\n\
             spec:\n  match:\n    resources: {resources}\n    operations: {operations}\n\
             \x20 mutations: []\n"
        )
    };
    let text = [
        policy("a", "[pods]", "[CREATE]"),
        policy("b", "[pods, apps/v1/statefulsets]", "[UPDATE]"),
        policy("c", "[apps/v1/statefulsets]", "[UPDATE]"),
    ]
    .join("---\n");
    std::fs::write(scratch.path().join("set.yaml"), format!("{text}---\n")).expect("write");
    // Not a policy file: ignored.
    std::fs::write(
        scratch.path().join("Kustomization"),
        "kind: Kustomization\n",
    )
    .expect("write");

    let config = yaml(&stdout(graft(
        scratch.path(),
        &["webhook-config", "--policies", "."],
    )));
    let webhooks = config["webhooks"].as_array().expect("webhooks");
    assert_eq!(webhooks.len(), 1, "no status rules, no status webhook");
    let rules: Vec<(String, String, String, String)> = webhooks[0]["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|rule| {
            let join = |key: &str| {
                rule[key]
                    .as_array()
                    .expect(key)
                    .iter()
                    .map(|v| v.as_str().expect("string"))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            (
                join("apiGroups"),
                join("apiVersions"),
                join("resources"),
                join("operations"),
            )
        })
        .collect();
    let row = |g: &str, v: &str, r: &str, o: &str| (g.into(), v.into(), r.into(), o.into());
    assert_eq!(
        rules,
        vec![
            row("*", "*", "pods", "CREATE,UPDATE"),
            row("apps", "v1", "statefulsets", "UPDATE"),
        ]
    );
}

#[test]
fn unknown_resource_form_names_the_policy() {
    let scratch = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        scratch.path().join("bad.yaml"),
        "apiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\nmetadata:\n  name: broken\n\
         spec:\n  match:\n    resources: [a/b/c/d/e]\n  mutations: []\n",
    )
    .expect("write");
    let output = graft(scratch.path(), &["webhook-config", "--policies", "."]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("policy broken") && stderr.contains("a/b/c/d/e"),
        "{stderr}"
    );
}
