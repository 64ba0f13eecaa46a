//! Policies written by the tests themselves, the sets they load into, and the engine run
//! on them as `graft apply` runs it.

use std::path::Path;

use graft::admission::AdmissionRequest;
use graft::admission::offline::{RequestOptions, request_for};
use graft::engine::Evaluation;
use graft::policy::PolicySet;
use serde_json::{Value, json};

/// A MutationPolicy named `name` with `spec`, as JSON.
pub fn policy_json(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "graft.dev/v1alpha1",
        "kind": "MutationPolicy",
        "metadata": {"name": name},
        "spec": spec,
    })
}

/// `base` (an object) with the fields of `extra` (an object) added, or replacing its own.
pub fn with_fields(mut base: Value, extra: Value) -> Value {
    if let (Some(base), Value::Object(extra)) = (base.as_object_mut(), extra) {
        base.extend(extra);
    }
    base
}

/// A MutationPolicy named `name` as YAML text, `spec` its lines under `spec:` (indented
/// two spaces), so that a finding's line number is its line in `spec` plus five.
pub fn policy_yaml(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

/// A YAML document (starting with `---`) of a policy on pods: `extra_spec` lines before
/// its `match`, then its `mutations` lines.
pub fn pod_policy_yaml(name: &str, extra_spec: &str, mutations: &str) -> String {
    pod_policy_yaml_matching(name, extra_spec, "", mutations)
}

/// [`pod_policy_yaml`], its `match` also holding `conditions` (lines under `match:`).
pub fn pod_policy_yaml_matching(
    name: &str,
    extra_spec: &str,
    conditions: &str,
    mutations: &str,
) -> String {
    let spec = format!(
        "{extra_spec}  match:\n    resources: [pods]\n{conditions}  mutations:\n{mutations}"
    );
    format!("---\n{}", policy_yaml(name, &spec))
}

/// Loads `text` as the policy file `file`; panics with the findings if it does not load.
pub fn load_str(file: &str, text: &str) -> PolicySet {
    match graft::policy::load_str(Path::new(file), text) {
        Ok(loaded) => loaded.set,
        Err(findings) => panic!("policy does not load: {findings}\n{text}"),
    }
}

/// Loads `text` as the policy file `p.yaml`.
pub fn load(text: &str) -> PolicySet {
    load_str("p.yaml", text)
}

/// Writes `text` to `p.yaml` in a fresh directory and loads the directory, as the
/// commands load `--policies DIR`.
pub fn load_in_dir(text: &str) -> PolicySet {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("p.yaml"), text).expect("write p.yaml");
    match graft::policy::load(&[dir.path().to_path_buf()]) {
        Ok(loaded) => loaded.set,
        Err(findings) => panic!("{findings}"),
    }
}

/// The example policies, `policies/`.
pub fn examples() -> PolicySet {
    match graft::policy::load(&[super::repo().join("policies")]) {
        Ok(loaded) => loaded.set,
        Err(findings) => panic!("example policies do not load: {findings:?}"),
    }
}

/// The AdmissionRequest of a CREATE of `object` in namespace `ns` (uid `uid-1`), as
/// `graft apply` builds it, its options first changed by `configure`.
pub fn request_in_ns(
    object: Value,
    configure: impl FnOnce(RequestOptions) -> RequestOptions,
) -> AdmissionRequest<'static> {
    let options = configure(RequestOptions {
        namespace: Some("ns".into()),
        ..RequestOptions::default()
    });
    request_for(object, &options, "uid-1")
}

/// Evaluates a CREATE of `object` in namespace `ns` (its resource from its kind), with no
/// namespace data, and holds it to the invariants every evaluation holds
/// (`graft::admission::check`): the patch applies to the original and gives the mutated
/// object, a second review of that changes nothing, `graft explain` agrees.
pub fn evaluate_converging(set: &PolicySet, object: Value) -> Evaluation<'static> {
    checked(set, request_in_ns(object, |options| options))
}

/// [`evaluate_converging`] of a request.
pub fn checked(set: &PolicySet, request: AdmissionRequest<'static>) -> Evaluation<'static> {
    let namespaces = graft::namespaces::NoNamespaces {
        hint: "the test gives no namespaces",
    };
    let source = graft::admission::ClusterSource::namespaces(&namespaces);
    let checked = graft::admission::check::check(&request, set, source);
    assert!(
        checked.problems.is_empty(),
        "{}\npatch: {:?}",
        checked.problems.join("\n"),
        checked.evaluation.patch
    );
    checked.evaluation
}

/// An AdmissionReview v1 body asking about `request`.
pub fn review_body(request: Value) -> Vec<u8> {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
        .to_string()
        .into_bytes()
}

/// The body of request `u-1`, `operation` on a Pod in namespace `ns`, with `rest`'s
/// fields (`userInfo`, `object`, `oldObject`) after those.
pub fn pod_review_body(operation: &str, rest: Value) -> Vec<u8> {
    let request = json!({
        "uid": "u-1",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "ns",
        "operation": operation,
    });
    review_body(with_fields(request, rest))
}

/// The evaluation's JSON Patch, as JSON.
pub fn patch_of(evaluation: &Evaluation<'_>) -> Value {
    serde_json::to_value(&evaluation.patch).unwrap()
}
