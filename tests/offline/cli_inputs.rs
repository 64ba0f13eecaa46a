//! What the offline commands read, through the real binary on real files: YAML as the spec
//! and kubectl read it (a document on its `---` line, a byte-order mark, directives), every
//! policy file of a directory or an error, errors that name the file and line, and input
//! that holds nothing to evaluate refused.

use crate::support::cli::{graft_piped, graft_with_stdin, stderr, stdout};
use std::path::Path;

const POLICY: &str = "apiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\nmetadata:\n  name: team\nspec:\n  match:\n    resources: [pods]\n  mutations:\n    - set:\n        path: $.metadata.labels.team\n        value: infra\n";

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers: [{name: app, image: app:1}]\n";

/// A policy written in flow style on its `---` line, labelling pods `NAME: "yes"`.
fn flow_policy(name: &str) -> String {
    format!(
        "--- {{apiVersion: graft.dev/v1alpha1, kind: MutationPolicy, metadata: {{name: {name}}}, spec: {{match: {{resources: [pods]}}, mutations: [{{set: {{path: $.metadata.labels.{name}, value: \"yes\"}}}}]}}}}\n"
    )
}

/// Writes `files` into a fresh directory.
fn files(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

/// `graft apply -o json` of `object` with `policies`: the mutated object's labels.
fn applied_labels(dir: &Path, policies: &str, object: &str) -> serde_json::Value {
    let output = graft_piped(
        dir,
        &["apply", "--policies", policies, "-o", "json", object],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let object: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    object["metadata"]["labels"].clone()
}

#[test]
fn a_document_that_starts_on_its_separator_line_is_read() {
    let two = format!("# two policies\n{}{}", flow_policy("a"), flow_policy("b"));
    let unknown_field = format!(
        "# a typo\n{}",
        flow_policy("c").replace("mutations:", "mutatons:")
    );
    let dir = files(&[
        ("two.yaml", &two),
        ("typo.yaml", &unknown_field),
        ("pod.yaml", POD),
        (
            "flow-pods.yaml",
            "--- {apiVersion: v1, kind: Pod, metadata: {name: a}}\n--- {apiVersion: v1, kind: Pod, metadata: {name: b}}\n",
        ),
    ]);
    let output = graft_piped(dir.path(), &["lint", "two.yaml"]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert!(
        stderr(&output).contains("2 policies OK"),
        "{}",
        stderr(&output)
    );
    // The server loads what lint loads; apply runs that loader.
    assert_eq!(
        applied_labels(dir.path(), "two.yaml", "pod.yaml"),
        serde_json::json!({"a": "yes", "b": "yes"})
    );

    // A finding in such a document points at the file's line.
    let output = graft_piped(dir.path(), &["lint", "typo.yaml"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).starts_with("typo.yaml:2: policy c: spec.mutatons: "),
        "{}",
        stdout(&output)
    );

    let output = graft_piped(
        dir.path(),
        &["apply", "--policies", "two.yaml", "flow-pods.yaml"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output).matches("kind: Pod").count(), 2);
}

#[test]
fn a_byte_order_mark_and_yaml_directives_are_not_content() {
    let bom = format!("\u{feff}---\n{POLICY}");
    let directive = format!("%YAML 1.2\n---\n{POLICY}");
    let directive_typo = format!(
        "# c\n%YAML 1.2\n---\n{}",
        POLICY.replace("mutations:", "mutatons:")
    );
    let bom_pod = format!("\u{feff}{POD}");
    let bom_list = format!(
        "\u{feff}---\napiVersion: v1\nkind: List\nitems:\n- {}\n",
        "{apiVersion: v1, kind: Pod, metadata: {name: p}}"
    );
    let dir = files(&[
        ("bom.yaml", &bom),
        ("directive.yaml", &directive),
        ("directive-typo.yaml", &directive_typo),
        ("bom-pod.yaml", &bom_pod),
        ("bom-list.yaml", &bom_list),
    ]);
    for file in ["bom.yaml", "directive.yaml"] {
        let output = graft_piped(dir.path(), &["lint", file]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{file}: {}{}",
            stdout(&output),
            stderr(&output)
        );
        assert!(stderr(&output).contains("1 policy OK"), "{file}");
    }
    let output = graft_piped(dir.path(), &["lint", "directive-typo.yaml"]);
    assert!(
        stdout(&output).starts_with("directive-typo.yaml:11: policy team: spec.mutatons: "),
        "{}",
        stdout(&output)
    );
    for object in ["bom-pod.yaml", "bom-list.yaml"] {
        assert_eq!(
            applied_labels(dir.path(), "bom.yaml", object),
            serde_json::json!({"team": "infra"}),
            "{object}"
        );
    }
}

#[test]
fn a_broken_symlink_in_a_policy_directory_is_an_error() {
    let dir = files(&[("policies/team.yaml", POLICY), ("pod.yaml", POD)]);
    std::os::unix::fs::symlink("moved.yaml", dir.path().join("policies/gone.yaml")).unwrap();
    let output = graft_piped(dir.path(), &["lint", "policies"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "policies/gone.yaml: broken symlink: its target moved.yaml does not exist\n"
    );
    let output = graft_piped(dir.path(), &["apply", "--policies", "policies", "pod.yaml"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("policies/gone.yaml: broken symlink"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn parse_errors_name_the_file_and_line() {
    let broken = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\na:\n  - [\n  b: }\n";
    let dir = files(&[
        ("team.yaml", POLICY),
        ("broken.yaml", broken),
        ("review.json", "{\n"),
    ]);
    let expected = "error: broken.yaml:7: document 2: did not find expected node content";
    for command in ["apply", "explain"] {
        let output = graft_piped(
            dir.path(),
            &[command, "--policies", "team.yaml", "broken.yaml"],
        );
        assert_eq!(output.status.code(), Some(2), "{command}");
        assert!(
            stderr(&output).starts_with(expected),
            "{command}: {}",
            stderr(&output)
        );
    }
    let output = graft_with_stdin(
        dir.path(),
        &["apply", "--policies", "team.yaml", "-"],
        broken.as_bytes(),
    );
    assert!(
        stderr(&output).starts_with("error: <stdin>:7: document 2: "),
        "{}",
        stderr(&output)
    );
    let output = graft_piped(
        dir.path(),
        &["lint", "--webhook-config", "broken.yaml", "team.yaml"],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).starts_with(expected), "{}", stderr(&output));

    let output = graft_piped(
        dir.path(),
        &["review", "--policies", "team.yaml", "review.json"],
    );
    assert_eq!(output.status.code(), Some(2));
    // The place once, leading, as for the YAML files.
    let message = stderr(&output);
    assert!(
        message.starts_with("error: review.json:2:") && !message.contains(" at line "),
        "{message}"
    );
    assert!(
        message.contains(": body is not valid AdmissionReview JSON: "),
        "{message}"
    );
}

#[test]
fn input_with_nothing_to_evaluate_is_refused() {
    let dir = files(&[
        ("team.yaml", POLICY),
        (
            "numbers.yaml",
            "apiVersion: v1\nkind: List\nitems: [42, \"s\"]\n",
        ),
        ("empty.yaml", ""),
        ("comments.yaml", "# nothing yet\n---\n"),
        ("empty-list.yaml", "apiVersion: v1\nkind: List\nitems: []\n"),
    ]);
    for command in ["apply", "explain"] {
        let output = graft_piped(
            dir.path(),
            &[command, "--policies", "team.yaml", "numbers.yaml"],
        );
        assert_eq!(output.status.code(), Some(2), "{command}");
        assert_eq!(stdout(&output), "", "{command}");
        assert!(
            stderr(&output).starts_with("error: numbers.yaml: document 1: items[0]: not an object"),
            "{command}: {}",
            stderr(&output)
        );
        for file in ["empty.yaml", "comments.yaml", "empty-list.yaml"] {
            let output = graft_piped(dir.path(), &[command, "--policies", "team.yaml", file]);
            assert_eq!(output.status.code(), Some(2), "{command} {file}");
            assert!(
                stderr(&output).starts_with(&format!("error: {file}: holds no object")),
                "{command} {file}: {}",
                stderr(&output)
            );
        }
    }
}

#[test]
fn the_operation_is_one_an_admission_request_can_have() {
    let dir = files(&[("team.yaml", POLICY), ("pod.yaml", POD)]);
    for command in ["apply", "explain"] {
        let output = graft_piped(
            dir.path(),
            &[
                command,
                "--policies",
                "team.yaml",
                "--operation",
                "FOO",
                "pod.yaml",
            ],
        );
        assert_eq!(output.status.code(), Some(2), "{command}");
        let stderr = stderr(&output);
        assert!(
            stderr.contains("invalid value 'FOO' for '--operation <OPERATION>'")
                && stderr.contains("[possible values: CREATE, UPDATE, DELETE, CONNECT]"),
            "{command}: {stderr}"
        );
    }
    // Any case, as before.
    let output = graft_piped(
        dir.path(),
        &[
            "explain",
            "--policies",
            "team.yaml",
            "--operation",
            "update",
            "pod.yaml",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with("Pod default/web (UPDATE core/v1/pods)"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn apply_at_delete_prints_the_object_unchanged_and_says_why() {
    let dir = files(&[("team.yaml", POLICY), ("pod.yaml", POD)]);
    let apply = |output: &str| {
        graft_piped(
            dir.path(),
            &[
                "apply",
                "--policies",
                "team.yaml",
                "--operation",
                "DELETE",
                "-o",
                output,
                "pod.yaml",
            ],
        )
    };
    let output = apply("json");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let object: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let pod: serde_json::Value = serde_yaml::from_str(POD).unwrap();
    assert_eq!(object, pod);
    assert_eq!(
        stderr(&output),
        "note: graft does not mutate at DELETE: the request carries only the old object, printed unchanged\n"
    );
    let output = apply("yaml");
    assert!(stdout(&output).contains("name: web"), "{}", stdout(&output));
    assert!(!stdout(&output).contains("null"), "{}", stdout(&output));
    assert_eq!(stdout(&apply("patch")), "[]\n");
}

#[test]
fn cluster_scoped_kinds_get_no_namespace() {
    let dir = files(&[
        ("team.yaml", POLICY),
        (
            "cluster.yaml",
            "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: nginx}\n---\napiVersion: storage.k8s.io/v1\nkind: CSIDriver\nmetadata: {name: ebs.csi.aws.com}\n---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web}\n",
        ),
    ]);
    let output = graft_piped(
        dir.path(),
        &["explain", "--policies", "team.yaml", "cluster.yaml"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let heads: Vec<String> = stdout(&output)
        .lines()
        .filter(|line| !line.starts_with(' '))
        .map(str::to_string)
        .collect();
    assert_eq!(
        heads,
        [
            "IngressClass nginx (CREATE networking.k8s.io/v1/ingressclasses): allowed, unchanged",
            "CSIDriver ebs.csi.aws.com (CREATE storage.k8s.io/v1/csidrivers): allowed, unchanged",
            "Ingress default/web (CREATE networking.k8s.io/v1/ingresses): allowed, unchanged",
        ]
    );
}

/// What `command` is fed in [`inputs_are_files_or_standard_input`]: a pod for the
/// commands that evaluate objects, an AdmissionReview for `review`.
fn input_of(command: &str) -> &'static str {
    if command == "review" {
        "review.json"
    } else {
        "pod.yaml"
    }
}

/// A directory with the team policy, a pod and an AdmissionReview of a pod.
fn inputs_dir() -> tempfile::TempDir {
    let review =
        String::from_utf8(crate::support::fixture("pod-create-multus-worker.json").unwrap())
            .unwrap();
    files(&[
        ("team.yaml", POLICY),
        ("pod.yaml", POD),
        ("review.json", &review),
    ])
}

#[test]
fn inputs_are_files_or_standard_input() {
    let dir = inputs_dir();
    for command in ["apply", "explain", "review"] {
        let input = input_of(command);
        let content = std::fs::read(dir.path().join(input)).unwrap();
        let base = [command, "--policies", "team.yaml"];
        let from_file = graft_piped(dir.path(), &[&base[..], &[input]].concat());
        let from_dash = graft_with_stdin(dir.path(), &[&base[..], &["-"]].concat(), &content);
        let from_nothing = graft_with_stdin(dir.path(), &base, &content);
        for (how, output) in [
            ("a file", &from_file),
            ("-", &from_dash),
            ("no file", &from_nothing),
        ] {
            assert_eq!(
                output.status.code(),
                Some(0),
                "{command}, {how}: {}",
                stderr(output)
            );
        }
        let answer = stdout(&from_file);
        // Each command's sign that the policy ran: the label, or its patch.
        let ran = match command {
            "apply" => answer.contains("team: infra"),
            "explain" => answer.contains("team: applied"),
            _ => answer.contains("\"patch\":"),
        };
        assert!(ran, "{command}: {answer}");
        assert_eq!(
            stdout(&from_dash),
            answer,
            "{command}: - reads standard input"
        );
        assert_eq!(
            stdout(&from_nothing),
            answer,
            "{command}: no file reads standard input"
        );
    }
}

#[test]
fn several_inputs_are_read_in_order_and_standard_input_once() {
    let dir = inputs_dir();
    for command in ["apply", "explain", "review"] {
        let input = input_of(command);
        let content = std::fs::read(dir.path().join(input)).unwrap();
        let base = [command, "--policies", "team.yaml"];
        let one = stdout(&graft_piped(dir.path(), &[&base[..], &[input]].concat()));
        let output = graft_with_stdin(dir.path(), &[&base[..], &[input, "-"]].concat(), &content);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{command}: {}",
            stderr(&output)
        );
        assert_eq!(
            stdout(&output),
            one.repeat(2),
            "{command}: a file, then standard input"
        );

        let output = graft_with_stdin(dir.path(), &[&base[..], &["-", "-"]].concat(), &content);
        assert_eq!(output.status.code(), Some(2), "{command}");
        assert_eq!(
            stderr(&output),
            "error: standard input (-) is given more than once: it can be read only once\n",
            "{command}"
        );
        // Without a file the input is standard input, which --namespaces cannot share.
        let output = graft_with_stdin(
            dir.path(),
            &[&base[..], &["--namespaces", "-"]].concat(),
            &content,
        );
        assert_eq!(output.status.code(), Some(2), "{command}");
        assert!(
            stderr(&output).starts_with(
                "error: --namespaces and the input cannot both be standard input (-, or no input file)"
            ),
            "{command}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn help_says_how_the_input_is_read() {
    let dir = tempfile::tempdir().unwrap();
    for command in ["apply", "explain", "review"] {
        let output = graft_piped(dir.path(), &[command, "--help"]);
        assert_eq!(output.status.code(), Some(0), "{command}");
        let help = stdout(&output)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(help.contains("[FILE]..."), "{command}: {help}");
        assert!(
            help.contains("`-` for standard input, which is also read when no file is given"),
            "{command}: {help}"
        );
    }
}
