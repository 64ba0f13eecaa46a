//! The offline commands on a MutatingAdmissionPolicy whose binding reads a parameter
//! object: `--params FILE` for `apply`, `review` and `explain`, a suite's `spec.params`
//! for `graft test`; `explain` names the binding and the parameter object, and a binding
//! that finds none is reported as the policy that denied.

use crate::support::cli::{graft, graft_piped, stderr, stdout, success_stdout};

/// The policy and its binding: the team label from the ConfigMap `team-defaults` in the
/// request's namespace, denied where there is none.
fn policy() -> String {
    crate::support::read("tests/fixtures/map-team-label.yaml")
}

const PARAMS: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: team-defaults, namespace: ns}\ndata: {team: gpu-infra}\n";
const NAMESPACES: &str = "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n";
const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec: {containers: [{name: app, image: app:1}]}\n";

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, text: &str| {
        std::fs::write(dir.path().join(name), text).expect("write");
    };
    write("map.yaml", &policy());
    write("params.yaml", PARAMS);
    write("ns.yaml", NAMESPACES);
    write("pod.yaml", POD);
    dir
}

fn args<'a>(command: &'a str, rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![command, "--policies", "map.yaml", "--namespaces", "ns.yaml"];
    args.extend_from_slice(rest);
    args
}

#[test]
fn apply_and_explain_read_the_parameter_object() {
    let dir = workspace();
    let patch = success_stdout(graft(
        dir.path(),
        &args(
            "apply",
            &["--params", "params.yaml", "-o", "patch", "pod.yaml"],
        ),
    ));
    assert_eq!(
        patch.trim(),
        r#"[{"op":"add","path":"/metadata/labels","value":{"team":"gpu-infra"}}]"#
    );
    let explained = success_stdout(graft(
        dir.path(),
        &args("explain", &["--params", "params.yaml", "pod.yaml"]),
    ));
    assert_eq!(
        explained,
        "Pod ns/p (CREATE core/v1/pods): allowed, 1 patch operation\n  \
         team-label (binding team-label-binding, param ns/team-defaults): applied\n      \
         add /metadata/labels = {\"team\":\"gpu-infra\"}\n"
    );
}

#[test]
fn without_the_parameter_object_the_binding_denies_and_explain_says_which() {
    let dir = workspace();
    let explained = success_stdout(graft(dir.path(), &args("explain", &["pod.yaml"])));
    let denial = "policy 'team-label' with binding 'team-label-binding' denied request: \
         failed to configure binding: no params found for policy binding with `Deny` \
         parameterNotFoundAction";
    assert_eq!(
        explained,
        format!(
            "Pod ns/p (CREATE core/v1/pods): denied: {denial}\n  \
             team-label (binding team-label-binding): failed: spec.paramRef: failed to configure \
             binding: no params found for policy binding with `Deny` parameterNotFoundAction\n"
        )
    );
    let applied = graft(dir.path(), &args("apply", &["pod.yaml"]));
    assert!(!applied.status.success());
    assert!(stderr(&applied).contains(denial), "{}", stderr(&applied));
}

#[test]
fn suites_give_parameter_objects_inline_or_from_a_file() {
    let dir = workspace();
    let suite = |params: &str| {
        format!(
            "apiVersion: graft.dev/v1alpha1\nkind: PolicyTest\nmetadata: {{name: team-label}}\nspec:\n  \
             policies: [map.yaml]\n  namespaces:\n    - {{apiVersion: v1, kind: Namespace, metadata: {{name: ns}}}}\n\
             {params}  cases:\n    - name: the team comes from the parameter object\n      objectFile: pod.yaml\n      \
             expect:\n        patch:\n          - {{op: add, path: /metadata/labels, value: {{team: gpu-infra}}}}\n"
        )
    };
    std::fs::write(dir.path().join("inline.yaml"), suite(
        "  params:\n    - {apiVersion: v1, kind: ConfigMap, metadata: {name: team-defaults, namespace: ns}, data: {team: gpu-infra}}\n",
    ))
    .expect("write");
    std::fs::write(
        dir.path().join("file.yaml"),
        suite("  paramsFile: params.yaml\n"),
    )
    .expect("write");
    std::fs::write(dir.path().join("none.yaml"), suite("")).expect("write");
    for file in ["inline.yaml", "file.yaml"] {
        let out = success_stdout(graft(dir.path(), &["test", file]));
        assert!(out.contains("1 passed"), "{file}: {out}");
    }
    // Without them the case fails, and `--params` gives them to the suites that list none.
    let failing = graft(dir.path(), &["test", "none.yaml"]);
    assert!(!failing.status.success(), "{}", stdout(&failing));
    let shared = success_stdout(graft(
        dir.path(),
        &["test", "--params", "params.yaml", "none.yaml"],
    ));
    assert!(shared.contains("1 passed"), "{shared}");
}

#[test]
fn params_and_the_input_cannot_both_be_standard_input() {
    let dir = workspace();
    let out = graft_piped(dir.path(), &args("apply", &["--params", "-", "-"]));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--params and the input cannot both be standard input"),
        "{}",
        stderr(&out)
    );
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: ns}\n",
    )
    .expect("write");
    let out = graft(
        dir.path(),
        &args("apply", &["--params", "bad.yaml", "pod.yaml"]),
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("bad.yaml") && stderr(&out).contains("metadata.name is missing"),
        "{}",
        stderr(&out)
    );
}

/// A MutatingAdmissionPolicy that changes the object on every run (a counter): a review
/// runs it twice (`IfNeeded`), and a second review would change the object again, which
/// `graft test` says in a note without failing the case, and `explain` shows both runs'
/// operations under the policy, and notes that the apiserver would have defaulted the
/// object between the runs.
#[test]
fn a_counter_that_never_converges_is_noted_not_failed() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("counter.yaml"),
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: counter}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  reinvocationPolicy: IfNeeded
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: >
          Object{data: {"count": string(int(object.?data.count.orValue("0")) + 1)}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: counter-binding}
spec: {policyName: counter}
"#,
    )
    .expect("write");
    std::fs::write(dir.path().join("ns.yaml"), NAMESPACES).expect("write");
    std::fs::write(
        dir.path().join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: ns}\n",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("suite.yaml"),
        "apiVersion: graft.dev/v1alpha1\nkind: PolicyTest\nmetadata: {name: counter}\nspec:\n  \
         policies: [counter.yaml]\n  namespacesFile: ns.yaml\n  cases:\n    - name: runs twice\n      \
         objectFile: cm.yaml\n      expect:\n        object:\n          apiVersion: v1\n          \
         kind: ConfigMap\n          metadata: {name: c, namespace: ns}\n          data: {count: \"2\"}\n",
    )
    .expect("write");
    let out = success_stdout(graft(dir.path(), &["test", "suite.yaml"]));
    assert!(
        out.contains(
            "NOTE counter: runs twice: a second review would change the object again (1 patch operation)"
        ),
        "{out}"
    );
    assert!(out.ends_with("1 passed, 0 failed\n"), "{out}");
    let explained = success_stdout(graft(
        dir.path(),
        &[
            "explain",
            "--policies",
            "counter.yaml",
            "--namespaces",
            "ns.yaml",
            "cm.yaml",
        ],
    ));
    assert_eq!(
        explained,
        "ConfigMap ns/c (CREATE core/v1/configmaps): allowed, 1 patch operation\n  \
         counter (binding counter-binding): applied\n      \
         add /data = {\"count\":\"1\"}\n      \
         replace /data/count = \"2\"\n  \
         note: counter changed the object and mutations ran after it: the apiserver fills in \
         the object's defaults after each MutatingAdmissionPolicy mutation and graft does \
         not, so a later mutation may not see a default it would see there \
         (docs/mutating-admission-policy.md, Limits)\n"
    );
}
