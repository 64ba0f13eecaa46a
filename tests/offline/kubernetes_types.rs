//! What a policy writes, checked against Kubernetes' types through the real binary: lint
//! names the file, line, policy, field and the type a literal should have; a value a
//! template computes is checked at admission and fails the policy by its
//! `failurePolicy`, naming graft, the policy and the field, where the apiserver would
//! answer an `InternalError` naming neither; an operator applied to operand types it has
//! no overload for is a lint error; kinds without a schema get one note each; a policy
//! that fails closed on every pod for want of namespace data gets a warning.

use std::path::Path;

use crate::support::cli::{graft, stderr, stdout};

/// Writes `files` into a fresh directory.
fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("write");
    }
    dir
}

fn policy(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

fn lint(dir: &Path, extra: &[&str]) -> (i32, String) {
    let mut args = vec!["lint"];
    args.extend_from_slice(extra);
    args.push("p.yaml");
    let output = graft(dir, &args);
    (output.status.code().expect("exit code"), stdout(&output))
}

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: default}\nspec:\n  containers: [{name: app, image: app:1}]\n";

#[test]
fn a_literal_of_the_wrong_type_is_a_lint_error_naming_the_field_and_its_type() {
    let text = policy(
        "gpu-pin",
        "  match:\n    resources: [pods]\n  mutations:\n    - set:\n        path: $.spec.nodeSelector.gpu\n        value: true\n    - merge:\n        path: $.spec\n        value:\n          containers:\n            - name: app\n              resources: {limits: {cpu: 2 cores}}\n",
    );
    let dir = dir_with(&[("p.yaml", &text)]);
    let (code, out) = lint(dir.path(), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "p.yaml:11: policy gpu-pin: spec.mutations[0].set.value: Pod field spec.nodeSelector.gpu \
             expects a string, found the boolean true (hint: quote it"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "p.yaml:17: policy gpu-pin: spec.mutations[1].merge.value.containers[0].resources.limits.cpu: \
             Pod field spec.containers[0].resources.limits.cpu expects a quantity"
        ),
        "{out}"
    );
}

#[test]
fn list_items_raw_patches_and_pod_templates_are_checked_too() {
    let text = policy(
        "replicas",
        "  match:\n    resources: [apps/v1/deployments]\n  mutations:\n    - append:\n        path: $.spec.template.spec.tolerations\n        value: [{key: gpu, operator: Exists, tolerationSeconds: \"10\"}]\n    - jsonPatch:\n        - {op: add, path: /spec/replicas, value: \"3\"}\n",
    );
    let dir = dir_with(&[("p.yaml", &text)]);
    let (code, out) = lint(dir.path(), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("Deployment field spec.template.spec.tolerations[0].tolerationSeconds expects an integer, found the string \"10\""),
        "{out}"
    );
    assert!(
        out.contains("spec.mutations[1].jsonPatch[0].value: Deployment field spec.replicas expects a 32-bit integer, found the string \"3\""),
        "{out}"
    );
}

#[test]
fn an_undeclared_field_is_a_warning_with_the_likely_name() {
    let text = policy(
        "typo",
        "  match:\n    resources: [pods]\n  mutations:\n    - set:\n        path: $.spec.nodeSelecter.gpu\n        value: \"true\"\n",
    );
    let dir = dir_with(&[("p.yaml", &text)]);
    let (code, out) = lint(dir.path(), &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(
            "warning: policy typo: spec.mutations[0].set.value: Pod has no field spec.nodeSelecter"
        ) && out.contains("did you mean `nodeSelector`?"),
        "{out}"
    );
    assert_eq!(lint(dir.path(), &["--strict"]).0, 1);
}

#[test]
fn kinds_without_a_schema_are_noted_once_and_never_fail_lint() {
    let widget = |name: &str| {
        policy(
            name,
            "  match:\n    resources: [example.com/v1/widgets]\n  mutations:\n    - set:\n        path: $.spec.size\n        value: true\n",
        )
    };
    let text = format!("{}\n---\n{}", widget("one"), widget("two"));
    let dir = dir_with(&[("p.yaml", &text)]);
    let (code, out) = lint(dir.path(), &["--strict"]);
    assert_eq!(code, 0, "{out}");
    let note = "note: graft has no schema for widgets (example.com): values written to it are not type-checked";
    assert_eq!(out.matches(note).count(), 1, "{out}");
}

#[test]
fn an_operator_on_operand_types_it_cannot_take_is_a_lint_error() {
    let text = policy(
        "networks",
        "  match:\n    resources: [pods]\n  mutations:\n    - set:\n        path: $.metadata.annotations['k8s.v1.cni.cncf.io/networks']\n        value: \"{{ object.metadata.?labels['net'].orValue('') + 1 }}\"\n",
    );
    let dir = dir_with(&[("p.yaml", &text)]);
    let (code, out) = lint(dir.path(), &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("policy networks: spec.mutations[0].set.value: no overload of `+` takes a string and an int"),
        "{out}"
    );
}

#[test]
fn a_computed_value_of_the_wrong_type_fails_the_policy_by_name_at_admission() {
    let spec = |failure: &str| {
        policy(
            "gpu-pin",
            &format!(
                "  failurePolicy: {failure}\n  params: {{gpu: true}}\n  match:\n    resources: [pods]\n  mutations:\n    - set:\n        path: $.spec.nodeSelector.gpu\n        value: \"{{{{ params.gpu }}}}\"\n"
            ),
        )
    };
    let dir = dir_with(&[("p.yaml", &spec("Fail")), ("pod.yaml", POD)]);
    let (code, out) = lint(dir.path(), &["--strict"]);
    assert_eq!(code, 0, "a computed value is for admission to check: {out}");
    let output = graft(dir.path(), &["apply", "--policies", "p.yaml", "pod.yaml"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(
            "denied: graft: policy gpu-pin: spec.mutations[0].set.value: Pod field spec.nodeSelector.gpu expects a string, \
             and the policy wrote a boolean: the apiserver would refuse the object"
        ),
        "{}",
        stderr(&output)
    );

    let dir = dir_with(&[("p.yaml", &spec("Ignore")), ("pod.yaml", POD)]);
    let output = graft(dir.path(), &["apply", "--policies", "p.yaml", "pod.yaml"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        !stdout(&output).contains("nodeSelector"),
        "{}",
        stdout(&output)
    );
    assert!(
        stderr(&output).contains("warning: graft: policy gpu-pin skipped: spec.mutations[0].set.value: Pod field spec.nodeSelector.gpu"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn failing_closed_on_every_pod_for_want_of_namespace_data_is_a_warning() {
    let reads_namespace = policy(
        "team-label",
        "  match:\n    resources: [pods]\n  mutations:\n    - set:\n        path: $.metadata.labels.team\n        value: \"{{ namespaceObject.metadata.?labels['team'].orValue('none') }}\"\n",
    );
    let dir = dir_with(&[("p.yaml", &reads_namespace)]);
    let (code, out) = lint(dir.path(), &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(
            "warning: policy team-label: spec.failurePolicy: the policy matches every pod with failurePolicy Fail and reads namespaceObject"
        ) && out.contains("set failurePolicy: Ignore, or narrow spec.match"),
        "{out}"
    );
    let ignore = reads_namespace.replace("spec:\n", "spec:\n  failurePolicy: Ignore\n");
    let narrowed = reads_namespace.replace(
        "resources: [pods]",
        "resources: [pods]\n    labels: {team-label: enabled}",
    );
    for text in [ignore, narrowed] {
        let dir = dir_with(&[("p.yaml", &text)]);
        let (code, out) = lint(dir.path(), &["--strict"]);
        assert_eq!(code, 0, "{out}");
    }
}

#[test]
fn a_binding_that_denies_every_object_without_its_parameters_is_a_warning() {
    let documents = |selector: &str| {
        format!(
            "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicy\nmetadata:\n  name: defaults\nspec:\n  reinvocationPolicy: Never\n  paramKind: {{apiVersion: v1, kind: ConfigMap}}\n  matchConstraints:\n{selector}    resourceRules:\n      - {{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [pods]}}\n  mutations:\n    - patchType: ApplyConfiguration\n      applyConfiguration:\n        expression: 'Object{{metadata: Object.metadata{{labels: {{\"team\": params.data.team}}}}}}'\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicyBinding\nmetadata:\n  name: defaults-binding\nspec:\n  policyName: defaults\n  paramRef:\n    name: team-defaults\n    namespace: kube-system\n    parameterNotFoundAction: Deny\n"
        )
    };
    let dir = dir_with(&[("p.yaml", &documents(""))]);
    let (code, out) = lint(dir.path(), &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(
            "p.yaml:22: warning: binding defaults-binding: spec.paramRef.parameterNotFoundAction: \
             parameterNotFoundAction Deny, and policy defaults fails closed and matches every object"
        ),
        "{out}"
    );
    let narrowed = documents("    namespaceSelector: {matchLabels: {team-defaults: enabled}}\n");
    let dir = dir_with(&[("p.yaml", &narrowed)]);
    let (code, out) = lint(dir.path(), &["--strict"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn a_pod_templates_computed_values_are_checked_as_a_pods() {
    let text = policy(
        "gpu-pin",
        "  podControllers: true\n  params: {gpu: 1}\n  match:\n    resources: [pods]\n  mutations:\n    - set:\n        path: $.spec.nodeSelector.gpu\n        value: \"{{ params.gpu }}\"\n",
    );
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: app, image: app:1}]\n";
    let dir = dir_with(&[("p.yaml", &text), ("deployment.yaml", deployment)]);
    let output = graft(
        dir.path(),
        &["apply", "--policies", "p.yaml", "deployment.yaml"],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(
            "graft: policy gpu-pin: spec.mutations[0].set.value: Pod field spec.nodeSelector.gpu \
             expects a string, and the policy wrote a number"
        ),
        "{}",
        stderr(&output)
    );
}
