use serde_json::json;

use super::*;
use crate::admission;
use crate::namespaces::NoNamespaces;
use crate::policy::PolicySet;

const LABEL_POLICY: &str = r#"
apiVersion: graft.dev/v1alpha1
kind: MutationPolicy
metadata: {name: label-pods}
spec:
  match: {resources: [pods]}
  mutations:
    - set: {path: "$.metadata.labels.seen", value: "yes"}
    - set: {path: "$.metadata.labels.team", value: "a"}
"#;

const DENY_POLICY: &str = r#"
apiVersion: graft.dev/v1alpha1
kind: MutationPolicy
metadata: {name: needs-ordinal}
spec:
  failurePolicy: Fail
  match: {resources: [pods]}
  mutations:
    - set: {path: "$.metadata.labels.n", value: "{{ object.spec.missing.field }}"}
"#;

fn set(yaml: &str) -> PolicySet {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("p.yaml"), yaml).expect("write policy");
    crate::policy::load(&[dir.path().to_path_buf()])
        .map(|loaded| loaded.set)
        .unwrap_or_else(|findings| panic!("invalid test policy: {findings:?}"))
}

fn review(set: &PolicySet, request: serde_json::Value) -> Option<Notice> {
    let body = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request,
    });
    let namespaces = NoNamespaces { hint: "none" };
    let body = body.to_string();
    let source = admission::ClusterSource::namespaces(&namespaces);
    let reviewed = admission::review(body.as_bytes(), set, source).expect("a valid review");
    notice(&reviewed)
}

fn pod_request(metadata: serde_json::Value) -> serde_json::Value {
    json!({
        "uid": "0b4e3b0a-1111-2222-3333-444455556666",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "team-a",
        "operation": "CREATE",
        "userInfo": {"username": "test"},
        "object": {
            "apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"containers": [{"name": "app", "image": "app:1"}]},
        },
    })
}

#[test]
fn a_mutated_pod_at_create_is_named_without_a_uid() {
    let mut request = pod_request(json!({"name": "web-0"}));
    request["name"] = json!("web-0");
    let got = review(&set(LABEL_POLICY), request).expect("an Event");
    assert_eq!(got.reason, Reason::Mutated);
    assert_eq!(got.note, "mutated by label-pods: 1 patch operation");
    assert_eq!(
        got.regarding,
        Regarding {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: Some("team-a".into()),
            name: "web-0".into(),
            uid: None,
        }
    );
}

#[test]
fn a_pod_with_only_generate_name_is_regarded_by_its_prefix() {
    let request = pod_request(json!({"generateName": "web-7d9f8-"}));
    let got = review(&set(LABEL_POLICY), request).expect("an Event");
    assert_eq!(got.regarding.name, "web-7d9f8-");
    assert_eq!(got.regarding.uid, None);
}

#[test]
fn an_update_carries_the_uid() {
    let mut request = pod_request(json!({"name": "web-0", "uid": "d2f1c7a0-aaaa"}));
    request["operation"] = json!("UPDATE");
    request["name"] = json!("web-0");
    request["oldObject"] = request["object"].clone();
    let got = review(&set(LABEL_POLICY), request).expect("an Event");
    assert_eq!(got.regarding.uid.as_deref(), Some("d2f1c7a0-aaaa"));
}

/// A PUT may leave `metadata.uid` out of its object (`kubectl replace` with a plain
/// manifest): the apiserver fills it in from the stored object only after admission, so
/// the reference takes it from the old object.
#[test]
fn an_update_without_a_uid_in_its_object_takes_the_old_objects() {
    let mut request = pod_request(json!({"name": "web-0"}));
    request["operation"] = json!("UPDATE");
    request["name"] = json!("web-0");
    request["oldObject"] = request["object"].clone();
    request["oldObject"]["metadata"]["uid"] = json!("d2f1c7a0-bbbb");
    let got = review(&set(LABEL_POLICY), request).expect("an Event");
    assert_eq!(got.regarding.uid.as_deref(), Some("d2f1c7a0-bbbb"));
    assert_eq!(got.regarding.name, "web-0");
}

#[test]
fn a_denial_carries_its_message() {
    let request = pod_request(json!({"name": "web-0"}));
    let got = review(&set(DENY_POLICY), request).expect("an Event");
    assert_eq!(got.reason, Reason::Denied);
    assert!(got.note.contains("needs-ordinal"), "{}", got.note);
    assert_eq!(got.reason.event_type(), "Warning");
}

#[test]
fn nothing_for_an_unchanged_object_or_a_dry_run() {
    let policies = set(LABEL_POLICY);
    let mut unchanged = pod_request(json!({"name": "x", "labels": {"seen": "yes", "team": "a"}}));
    unchanged["name"] = json!("x");
    assert_eq!(review(&policies, unchanged), None);
    let mut dry = pod_request(json!({"name": "x"}));
    dry["dryRun"] = json!(true);
    assert_eq!(review(&policies, dry), None);
}

#[test]
fn event_names_are_dns_subdomains() {
    let check = |name: &str, expect: &str| {
        let regarding = Regarding {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: None,
            name: name.into(),
            uid: None,
        };
        assert_eq!(event_name(&regarding, 0x1f), expect, "{name}");
    };
    check("web-0", "web-0.1f");
    check("web-7d9f8-", "web-7d9f8.1f");
    check("system:controller:Foo", "system-controller-foo.1f");
    check("a..b.-c-", "a.b.c.1f");
    check("-", "graft.1f");
    let long = "a".repeat(300);
    let regarding = Regarding {
        api_version: "v1".into(),
        kind: "Pod".into(),
        namespace: None,
        name: long,
        uid: None,
    };
    assert_eq!(event_name(&regarding, 0x1f).len(), 253);
}

#[test]
fn long_notes_are_cut_on_a_character_boundary() {
    let cut = truncate("é".repeat(600), NOTE_LIMIT);
    assert!(cut.len() <= NOTE_LIMIT, "{}", cut.len());
    assert!(cut.ends_with('…'));
    assert_eq!(truncate("short".into(), NOTE_LIMIT), "short");
}
