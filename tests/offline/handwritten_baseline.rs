//! The hand-written webhook `bench/load.sh` compares graft with
//! (`examples/handwritten_webhook.rs`) does the work of `policies/multus-networks.yaml`:
//! on the realistic pod and its variants it answers the JSON Patch graft answers with only
//! that policy, and the patch applies and yields the same networks annotation; graft with
//! `bench/load.sh`'s same-work set (100 policies, only the Multus one matching) answers the
//! realistic pod with that patch too.

#[path = "../../examples/support/handwritten_review.rs"]
mod handwritten_review;
#[path = "../../benches/support/policies.rs"]
mod policies;

use crate::support::repo;
use base64::Engine as _;
use graft::namespaces::{Namespace, NamespaceMap};
use graft::policy::PolicySet;
use handwritten_review::NETWORKS_ANNOTATION;
use serde_json::{Value, json};

fn multus_policy() -> PolicySet {
    match graft::policy::load_path(&repo().join("policies/multus-networks.yaml")) {
        Ok(loaded) => loaded.set,
        Err(findings) => panic!("{findings:?}"),
    }
}

fn realistic_review() -> Value {
    let path = repo().join("benches/fixtures/pod-create-realistic.json");
    serde_json::from_slice(&std::fs::read(path).expect("read the fixture")).expect("JSON")
}

/// The JSON Patch in an AdmissionReview answer, decoded; `None` without one.
fn patch_of(answer: &[u8]) -> Option<Value> {
    let answer: Value = serde_json::from_slice(answer).expect("the answer is JSON");
    let response = &answer["response"];
    assert_eq!(response["allowed"], true, "{answer}");
    let patch = response["patch"].as_str()?;
    assert_eq!(response["patchType"], "JSONPatch", "{answer}");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .expect("base64");
    Some(serde_json::from_slice(&bytes).expect("the patch is JSON"))
}

/// The networks annotation of the review's pod once `patch` is applied.
fn networks_after(review: &Value, patch: &Value) -> Option<String> {
    let mut pod = review["request"]["object"].clone();
    let patch: json_patch::Patch = serde_json::from_value(patch.clone()).expect("a JSON Patch");
    json_patch::patch(&mut pod, &patch).expect("the patch applies");
    pod["metadata"]["annotations"][NETWORKS_ANNOTATION]
        .as_str()
        .map(str::to_string)
}

/// Both webhooks answer `review` with the same patch (or both with none); returns the
/// networks annotation the patch yields.
fn check(review: &Value, what: &str) -> Option<String> {
    let body = serde_json::to_vec(review).expect("serialise");
    let namespaces = NamespaceMap::new(
        [Namespace {
            name: "dynamo-system".to_string(),
            labels: Default::default(),
            annotations: Default::default(),
        }],
        "the test's namespaces",
    );
    let graft = graft::admission::review(
        &body,
        &multus_policy(),
        graft::admission::ClusterSource::namespaces(&namespaces),
    )
    .expect("graft reviews it")
    .to_json()
    .expect("the response serialises");
    let handwritten = handwritten_review::review(&body).expect("the baseline reviews it");
    let handwritten_answer: Value = serde_json::from_slice(&handwritten).expect("JSON");
    assert_eq!(
        handwritten_answer["response"]["uid"], review["request"]["uid"],
        "{what}: the uid is echoed"
    );
    let (graft, handwritten) = (patch_of(&graft), patch_of(&handwritten));
    assert_eq!(handwritten, graft, "{what}: the same JSON Patch");
    let patch = handwritten?;
    let networks = networks_after(review, &patch);
    assert_eq!(
        networks,
        networks_after(review, &graft.expect("same")),
        "{what}"
    );
    networks
}

fn roce(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|name| json!({ "name": name, "namespace": "rdma-networks" }))
        .collect()
}

const ROCE: &[&str] = &[
    "roce5", "roce7", "roce8", "roce9", "roce10", "roce11", "roce12", "roce13", "roce14", "roce15",
];

#[test]
fn the_realistic_pod_gets_the_same_networks() {
    let networks = check(&realistic_review(), "realistic pod").expect("a networks annotation");
    let networks: Value = serde_json::from_str(&networks).expect("a JSON list");
    assert_eq!(networks, Value::Array(roce(ROCE)));
}

#[test]
fn variants_of_the_realistic_pod_are_answered_alike() {
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut review = realistic_review();
        edit(&mut review["request"]["object"]);
        review
    };
    let annotate = |value: &str| {
        let value = value.to_string();
        with(&move |pod| pod["metadata"]["annotations"][NETWORKS_ANNOTATION] = value.clone().into())
    };

    let no_annotations = with(&|pod| {
        pod["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove("annotations");
    });
    assert!(check(&no_annotations, "no annotations").is_some());

    let short =
        check(&annotate("rdma-networks/roce5@net1,macvlan"), "short form").expect("networks added");
    let short: Value = serde_json::from_str(&short).expect("a JSON list");
    let mut expected = vec![
        json!({ "name": "roce5", "namespace": "rdma-networks", "interface": "net1" }),
        json!({ "name": "macvlan" }),
    ];
    expected.extend(roce(&ROCE[1..]));
    assert_eq!(short, Value::Array(expected));

    let all = serde_json::to_string(&roce(ROCE)).expect("serialise");
    assert_eq!(check(&annotate(&all), "all attached already"), None);
    assert!(check(&annotate(r#"[{"name":"roce5"}]"#), "other namespace").is_some());
    assert_eq!(check(&annotate("{not json"), "unreadable value"), None);
    // Odd spellings: each is answered as graft answers it (asserted inside `check`).
    for value in [
        "",
        " ",
        "a/b/c",
        "ns/@net1",
        "roce5,,roce7",
        " rdma-networks/roce7 , macvlan@net2 ",
        "[]",
        "[1]",
        r#"[{"name":"roce5","namespace":""}]"#,
        r#"[{"name":""}]"#,
        r#"[{"name":"roce5","namespace":7}]"#,
        "x@y@z",
    ] {
        check(&annotate(value), value);
    }

    let elsewhere =
        with(&|pod| pod["spec"]["nodeSelector"]["dynamo.nodeAlias"] = "worker99".into());
    assert_eq!(check(&elsewhere, "not an RDMA node"), None);
    let not_worker = with(&|pod| {
        pod["metadata"]["labels"]["nvidia.com/dynamo-component-type"] = "frontend".into()
    });
    assert_eq!(check(&not_worker, "not a worker"), None);
}

#[test]
fn a_body_without_a_review_is_refused() {
    assert!(handwritten_review::review(b"{not json").is_err());
    assert!(handwritten_review::review(br#"{"request":{}}"#).is_err());
}

#[test]
fn the_same_work_set_of_100_policies_answers_the_realistic_pod_with_the_baselines_patch() {
    let (set, patch) = same_work_answer(policies::Matching::Multus);
    assert_eq!(set.len(), 100);
    assert_eq!(patch.as_array().map(Vec::len), Some(1), "{patch}");
}

/// The Multus example written as a MutatingAdmissionPolicy answers the realistic pod with
/// the same patch, so `review_loop 100 N multus-map` measures the same work through the
/// second dialect.
#[test]
fn the_multus_admission_policy_answers_the_realistic_pod_with_the_baselines_patch() {
    let (set, _) = same_work_answer(policies::Matching::MultusAdmissionPolicy);
    assert_eq!(set.admission_policies().len(), 1);
}

/// The answer of a set of 100 policies with only `matching` for the realistic pod: only
/// the Multus policy applies, with the hand-written webhook's patch (returned).
fn same_work_answer(matching: policies::Matching) -> (graft::policy::PolicySet, serde_json::Value) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    policies::write_set_matching(dir.path(), 100, matching).expect("write the set");
    let set = match graft::policy::load_path(dir.path()) {
        Ok(loaded) => loaded.set,
        Err(findings) => panic!("{findings:?}"),
    };
    let body = serde_json::to_vec(&realistic_review()).expect("serialise");
    let graft = graft::admission::review(
        &body,
        &set,
        graft::admission::ClusterSource::namespaces(&policies::namespaces()),
    )
    .expect("graft reviews it");
    assert_eq!(
        graft.evaluation.applied().collect::<Vec<_>>(),
        ["multus-networks"]
    );
    let handwritten = handwritten_review::review(&body).expect("the baseline reviews it");
    let patch = patch_of(&graft.to_json().expect("the response serialises")).expect("a patch");
    assert_eq!(Some(&patch), patch_of(&handwritten).as_ref());
    (set, patch)
}
