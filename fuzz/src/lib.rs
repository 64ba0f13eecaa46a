//! Shared helpers for the fuzz targets: the example policies, the fixtures, and the
//! invariants every answer must satisfy. A violated invariant panics, which libFuzzer
//! reports as a crash with the input that caused it.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use base64::Engine as _;
use graft::admission::{AdmissionRequest, ResponseReview};
use graft::engine::Outcome;
use graft::namespaces::{Namespace, NamespaceMap};
use graft::policy::PolicySet;
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The four example policies from `policies/`, loaded once.
pub fn example_policies() -> &'static PolicySet {
    static SET: OnceLock<PolicySet> = OnceLock::new();
    SET.get_or_init(|| match graft::policy::load(&[repo().join("policies")]) {
        Ok(loaded) => loaded.set,
        Err(findings) => panic!("example policies do not load: {findings:?}"),
    })
}

/// The namespaces the fuzzed requests are in: `dynamo-system` and `default` labelled
/// for sidecar injection (the example's `namespaceSelector`), with an annotation.
pub fn namespaces() -> &'static NamespaceMap {
    static MAP: OnceLock<NamespaceMap> = OnceLock::new();
    MAP.get_or_init(|| {
        let namespace = |name: &str| Namespace {
            name: name.to_string(),
            labels: [("sidecar-injection".to_string(), "enabled".to_string())].into(),
            annotations: [("owner".to_string(), "fuzz".to_string())].into(),
        };
        NamespaceMap::new(
            [namespace("dynamo-system"), namespace("default")],
            "the fuzzer's namespaces",
        )
    })
}

/// The captured AdmissionReviews from `tests/fixtures/`, parsed once.
pub fn fixtures() -> &'static [Value] {
    static FIXTURES: OnceLock<Vec<Value>> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        [
            "pod-create-multus-worker.json",
            "pod-create-statefulset-web-3.json",
            "node-status-update.json",
        ]
        .iter()
        .map(|name| {
            let path = repo().join("tests/fixtures").join(name);
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{path:?}: {e}"))
        })
        .collect()
    })
}

/// Checks a response body: a well-formed AdmissionReview answering `uid`, whose patch
/// (if any) is base64 of a JSON array that applies to `object`. Returns the patched object.
pub fn check_response(body: &[u8], uid: &str, object: Option<&Value>) -> Option<Value> {
    let response: ResponseReview =
        serde_json::from_slice(body).unwrap_or_else(|e| panic!("response does not parse: {e}"));
    assert_eq!(response.kind, "AdmissionReview");
    assert_eq!(response.response.uid, uid, "uid not echoed");
    let patch = response.response.patch.as_ref()?;
    assert!(
        response.response.allowed,
        "a denied response carries a patch"
    );
    assert_eq!(response.response.patch_type.as_deref(), Some("JSONPatch"));
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .unwrap_or_else(|e| panic!("patch is not base64: {e}"));
    let parsed: Value = serde_json::from_slice(&bytes).expect("patch is not JSON");
    assert!(parsed.is_array(), "patch is not a JSON array");
    let patch: json_patch::Patch = serde_json::from_value(parsed).expect("patch is not RFC 6902");
    let mut patched = object
        .expect("a patch for a request without an object")
        .clone();
    json_patch::patch(&mut patched, &patch)
        .unwrap_or_else(|e| panic!("patch does not apply to the original: {e}"));
    Some(patched)
}

/// Evaluates `request` twice: the patch must apply to the original and give the
/// engine's mutated object, and a second pass over the result must change nothing.
pub fn check_round_trip(request: &AdmissionRequest<'_>, set: &PolicySet) {
    let source = graft::admission::ClusterSource::namespaces(namespaces());
    let first = graft::admission::offline::evaluate(request, set, source);
    if first.patch.0.is_empty() || first.outcome != Outcome::Allowed {
        return;
    }
    let original = request.object.as_ref().expect("a patch without an object");
    let mut patched = original.to_value();
    json_patch::patch(&mut patched, &first.patch.to_json_patch())
        .unwrap_or_else(|e| panic!("patch does not apply: {e}\npatch: {:?}", first.patch));
    let mutated = first.mutated();
    assert_eq!(Some(&patched), mutated.as_ref(), "patch != mutation");
    let mut again = request.clone();
    again.object = Some(graft::tree::Tree::from(patched));
    let second = graft::admission::offline::evaluate(&again, set, source);
    if second.outcome == Outcome::Allowed {
        assert!(
            second.patch.0.is_empty(),
            "second pass not empty: {:?}\nfirst: {:?}",
            second.patch,
            first.patch
        );
    }
}
