//! `graft webhook-config`: the committed deploy/examples/webhook.yaml is exactly what the
//! policies in policies/ need, and the flags do what docs/operations.md says.

use std::path::{Path, PathBuf};

use crate::support::cli::{graft, graft_certs, success_stdout};
use crate::support::repo;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

fn yaml(text: &str) -> serde_json::Value {
    serde_yaml::from_str(text).expect("valid YAML")
}

/// A real CA (and serving pair) from `graft certs`, in `dir/certs`.
fn issue_certs(dir: &Path) -> PathBuf {
    let certs = dir.join("certs");
    let output = graft_certs(&certs, &[]);
    assert!(
        output.status.success(),
        "graft certs failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    certs
}

#[test]
fn committed_webhook_config_matches_the_policies() {
    let rendered = success_stdout(graft(
        &repo(),
        &["webhook-config", "--policies", "policies/"],
    ));
    let committed = std::fs::read_to_string(repo().join("deploy/examples/webhook.yaml"))
        .expect("deploy/examples/webhook.yaml");
    assert!(
        rendered == committed,
        "deploy/examples/webhook.yaml is stale; regenerate it with\n  \
         graft webhook-config --policies policies/ --out deploy/examples/webhook.yaml"
    );
}

#[test]
fn fail_switches_only_the_main_webhook() {
    let config = yaml(&success_stdout(graft(
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
    let ca = issue_certs(scratch.path()).join("ca.crt");
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
    success_stdout(graft(scratch.path(), &args));
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

    let config = yaml(&success_stdout(graft(
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

/// The Service and namespace go into the webhook's `clientConfig`: names the apiserver
/// would refuse are refused here, as `graft certs` refuses them.
#[test]
fn service_and_namespace_must_be_kubernetes_names() {
    let root = repo();
    for (flag, value) in [
        ("--service", "Bad_Name!"),
        ("--namespace", ""),
        ("--service", "1st"),
    ] {
        let output = graft(
            &root,
            &["webhook-config", "--policies", "policies", flag, value],
        );
        assert_eq!(output.status.code(), Some(2), "{flag} {value:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.starts_with(&format!("error: {flag} {value:?} is not a valid ")),
            "{stderr}"
        );
        assert!(output.stdout.is_empty());
    }
}

#[test]
fn ca_bundle_file_must_hold_certificates_and_no_private_key() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let certs = issue_certs(scratch.path());
    let read = |name: &str| std::fs::read_to_string(certs.join(name)).expect(name);
    let (ca, key) = (read("ca.crt"), read("tls.key"));
    let encrypted_key =
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n";
    let refused = [
        ("empty.crt", String::new(), "no PEM CERTIFICATE block"),
        (
            "notpem.txt",
            "not a certificate\n".to_string(),
            "no PEM CERTIFICATE block",
        ),
        ("tls.key", key.clone(), "private key"),
        ("ca-and-key.pem", format!("{ca}{key}"), "private key"),
        (
            "ca-and-encrypted-key.pem",
            format!("{ca}{encrypted_key}"),
            "private key",
        ),
        (
            "garbage.crt",
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_string(),
            "not an X.509 certificate",
        ),
        (
            "unterminated.crt",
            ca.replace("-----END CERTIFICATE-----", ""),
            "PEM",
        ),
    ];
    let policies = repo().join("policies");
    for (name, contents, reason) in refused {
        let file = scratch.path().join(name);
        std::fs::write(&file, contents).expect("write");
        let out = scratch.path().join("webhook.yaml");
        let output = graft(
            scratch.path(),
            &[
                "webhook-config",
                "--policies",
                policies.to_str().expect("UTF-8 path"),
                "--ca-bundle-file",
                file.to_str().expect("UTF-8 path"),
                "--out",
                out.to_str().expect("UTF-8 path"),
            ],
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.contains(file.to_str().expect("UTF-8 path")) && stderr.contains(reason),
            "{name}: expected the file and {reason:?} in: {stderr}"
        );
        assert!(!out.exists(), "{name}: nothing written");
    }

    // Two CAs during a rotation (docs/operations.md), with text around them, are a bundle.
    let both = scratch.path().join("ca-both.crt");
    let other = std::fs::read_to_string(issue_certs(&scratch.path().join("second")).join("ca.crt"))
        .expect("second ca.crt");
    std::fs::write(&both, format!("first CA\n{ca}second CA\n{other}")).expect("write");
    let config = yaml(&success_stdout(graft(
        scratch.path(),
        &[
            "webhook-config",
            "--policies",
            policies.to_str().expect("UTF-8 path"),
            "--ca-bundle-file",
            both.to_str().expect("UTF-8 path"),
        ],
    )));
    let bundle = BASE64.encode(std::fs::read(&both).expect("ca-both"));
    for webhook in config["webhooks"].as_array().expect("webhooks") {
        assert_eq!(webhook["clientConfig"]["caBundle"], bundle.as_str());
    }
}

#[test]
fn header_names_the_command_that_was_run() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let policies = scratch.path().join("my policies");
    copy_policies(&policies);
    let first_line = |args: &[&str]| {
        let text = success_stdout(graft(scratch.path(), args));
        text.lines().next().expect("a header").to_string()
    };
    assert_eq!(
        first_line(&["webhook-config", "--policies", "my policies"]),
        "# Generated by `graft webhook-config --policies 'my policies'`; do not edit."
    );
    issue_certs(scratch.path());
    assert_eq!(
        first_line(&[
            "webhook-config",
            "--policies=my policies/",
            "--service",
            "hooks",
            "--namespace",
            "platform",
            "--failure-policy",
            "fail",
            "--ca-bundle-file",
            "certs/ca.crt",
        ]),
        "# Generated by `graft webhook-config --policies 'my policies/' --service hooks \
         --namespace platform --failure-policy Fail --ca-bundle-file certs/ca.crt`; do not edit."
    );
}

fn copy_policies(to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(repo().join("policies")).expect("policies") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("file type").is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
        }
    }
}

/// A bound MutatingAdmissionPolicy's `matchConstraints` become rules (a `*` of
/// operations is those MAP runs on: CREATE, UPDATE and CONNECT, never DELETE); an unbound
/// one adds nothing, since it does nothing.
#[test]
fn rules_follow_bound_mutating_admission_policies() {
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = |name: &str, rules: &str| {
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicy\n\
             metadata: {{name: {name}}}\nspec:\n  matchConstraints:\n    resourceRules:\n{rules}\
             \n  reinvocationPolicy: Never\n  mutations:\n    - patchType: JSONPatch\n      \
             jsonPatch: {{expression: '[JSONPatch{{op: \"add\", path: \"/metadata/labels\", value: {{}}}}]'}}\n"
        )
    };
    let text = [
        policy(
            "bound",
            "      - {apiGroups: [apps], apiVersions: [v1], operations: ['*'], resources: [deployments, deployments/scale]}\n      - {apiGroups: [''], apiVersions: [v1], operations: [UPDATE], resources: [configmaps]}",
        ),
        "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicyBinding\nmetadata: {name: bound-binding}\nspec: {policyName: bound}\n".to_string(),
        policy(
            "unbound",
            "      - {apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [secrets]}",
        ),
    ]
    .join("---\n");
    std::fs::write(dir.path().join("maps.yaml"), text).expect("write");
    let rendered = yaml(&success_stdout(graft(
        dir.path(),
        &["webhook-config", "--policies", "."],
    )));
    let rules = &rendered["webhooks"][0]["rules"];
    let rule = |resource: &str| {
        rules
            .as_array()
            .expect("rules")
            .iter()
            .find(|rule| {
                rule["resources"]
                    .as_array()
                    .expect("resources")
                    .iter()
                    .any(|r| r == resource)
            })
            .cloned()
            .unwrap_or_else(|| panic!("no rule for {resource} in {rules}"))
    };
    assert_eq!(
        rule("deployments")["operations"],
        serde_json::json!(["CONNECT", "CREATE", "UPDATE"])
    );
    assert_eq!(
        rule("deployments/scale")["apiGroups"],
        serde_json::json!(["apps"])
    );
    assert_eq!(
        rule("configmaps")["operations"],
        serde_json::json!(["UPDATE"])
    );
    assert!(
        !rules.to_string().contains("secrets"),
        "an unbound policy added a rule: {rules}"
    );
    assert_eq!(rendered["webhooks"][0]["reinvocationPolicy"], "IfNeeded");
}
