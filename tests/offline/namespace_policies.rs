//! Namespace-aware policies through the public entry points (`policy::load_str`,
//! `admission::review` and `review_lean`): `namespaceSelector` in `match` and `exclude`
//! with a webhook's semantics (a Namespace on its own labels, other cluster-scoped
//! objects never skipped), `namespaceObject` in CEL, missing namespace data as a policy
//! failure under `Fail` and `Ignore`, and no lookup for policies that need none.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::policies::{load, policy_json, review_body};
use graft::admission::{self, Reviewed};
use graft::engine::{Outcome, PolicyResult};
use graft::namespaces::{Namespace, NamespaceData, NamespaceMap, NamespaceSource, NoNamespaces};
use graft::policy::PolicySet;
use serde_json::{Value, json};

/// A policy named `p` with the given `failurePolicy`, `match` (resources default to
/// pods), optional `exclude` and mutations.
fn policy(
    failure_policy: &str,
    matcher: Value,
    exclude: Option<Value>,
    mutations: Value,
) -> String {
    let mut matcher = matcher;
    if matcher.get("resources").is_none() {
        matcher["resources"] = json!(["pods"]);
    }
    let mut spec = json!({
        "failurePolicy": failure_policy,
        "match": matcher,
        "mutations": mutations,
    });
    if let Some(exclude) = exclude {
        spec["exclude"] = exclude;
    }
    policy_json("p", spec).to_string()
}

/// Sets label `marked: "yes"` on whatever matches.
fn mark() -> Value {
    json!([{"set": {"path": "$.metadata.labels.marked", "value": "yes"}}])
}

fn selector(labels: Value) -> Value {
    json!({"matchLabels": labels})
}

/// The namespaces of these tests: `labelled` (team: a), `plain` (no labels).
fn namespaces() -> NamespaceMap {
    NamespaceMap::new(
        [
            Namespace {
                name: "labelled".into(),
                labels: [("team".to_string(), "a".to_string())].into(),
                annotations: [("owner".to_string(), "alice".to_string())].into(),
            },
            Namespace {
                name: "plain".into(),
                ..Namespace::default()
            },
        ],
        "the test's namespaces",
    )
}

/// Counts lookups, answering from [`namespaces`].
#[derive(Debug, Default)]
struct Counting {
    lookups: AtomicUsize,
}

impl NamespaceSource for Counting {
    fn namespace_data(&self, name: &str) -> NamespaceData {
        self.lookups.fetch_add(1, Ordering::SeqCst);
        namespaces().namespace_data(name)
    }
}

/// An AdmissionReview body.
fn body(
    operation: &str,
    resource: &str,
    namespace: Option<&str>,
    object: Option<Value>,
    old_object: Option<Value>,
) -> Vec<u8> {
    let mut request = json!({
        "uid": "u-1",
        "kind": {"group": "", "version": "v1", "kind": "X"},
        "resource": {"group": "", "version": "v1", "resource": resource},
        "operation": operation,
        "userInfo": {"username": "test"},
    });
    if let Some(namespace) = namespace {
        request["namespace"] = json!(namespace);
    }
    if let Some(object) = object {
        request["object"] = object;
    }
    if let Some(old_object) = old_object {
        request["oldObject"] = old_object;
    }
    review_body(request)
}

fn pod_in(namespace: &str) -> Vec<u8> {
    body(
        "CREATE",
        "pods",
        Some(namespace),
        Some(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}})),
        None,
    )
}

fn namespace_object(labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "labels": labels}})
}

/// Reviews `body` with both parses (which must answer alike) and returns the full one.
fn review<'b>(set: &PolicySet, body: &'b [u8], source: &dyn NamespaceSource) -> Reviewed<'b> {
    let full = admission::oracle::review(
        body,
        set,
        graft::admission::ClusterSource::namespaces(source),
    )
    .expect("review");
    let lean = admission::review(
        body,
        set,
        graft::admission::ClusterSource::namespaces(source),
    )
    .expect("lean review");
    assert_eq!(
        String::from_utf8_lossy(&full.to_json().expect("the response serialises")),
        String::from_utf8_lossy(&lean.to_json().expect("the response serialises"))
    );
    full
}

/// The review's object as the policies left it.
fn object_after(reviewed: &Reviewed<'_>) -> Value {
    let object = reviewed.evaluation.object.as_ref();
    object.map(graft::tree::Tree::to_value).expect("an object")
}

/// What happened to policy `p`: its result label, or `"skipped"` when it did not match.
fn result(reviewed: &Reviewed<'_>) -> &'static str {
    reviewed
        .evaluation
        .policies
        .iter()
        .find(|report| report.policy == "p")
        .map_or("skipped", |report| report.result.label())
}

fn denial(reviewed: &Reviewed) -> String {
    match &reviewed.evaluation.outcome {
        Outcome::Denied { message, .. } => message.clone(),
        Outcome::Allowed => panic!("allowed: {:?}", reviewed.evaluation.policies),
    }
}

#[test]
fn a_pod_matches_on_the_labels_of_its_namespace() {
    let set = load(&policy(
        "Fail",
        json!({"namespaceSelector": selector(json!({"team": "a"}))}),
        None,
        mark(),
    ));
    let source = namespaces();
    assert_eq!(
        result(&review(&set, &pod_in("labelled"), &source)),
        "applied"
    );
    assert_eq!(result(&review(&set, &pod_in("plain"), &source)), "skipped");
    let expressions = load(&policy(
        "Fail",
        json!({"namespaceSelector": {"matchExpressions": [
            {"key": "team", "operator": "NotIn", "values": ["b"]},
            {"key": "tier", "operator": "DoesNotExist"},
        ]}}),
        None,
        mark(),
    ));
    assert_eq!(
        result(&review(&expressions, &pod_in("plain"), &source)),
        "applied"
    );
    assert_eq!(
        result(&review(&expressions, &pod_in("labelled"), &source)),
        "applied"
    );
    let exists = load(&policy(
        "Fail",
        json!({"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "Exists"}]}}),
        None,
        mark(),
    ));
    assert_eq!(
        result(&review(&exists, &pod_in("plain"), &source)),
        "skipped"
    );
    assert_eq!(
        result(&review(&exists, &pod_in("labelled"), &source)),
        "applied"
    );
}

#[test]
fn a_namespace_matches_on_its_own_labels_at_create_update_and_delete() {
    let set = load(&policy(
        "Fail",
        json!({"resources": ["namespaces"], "namespaceSelector": selector(json!({"team": "a"}))}),
        None,
        mark(),
    ));
    // No source at all: a Namespace's own labels need none.
    let none = NoNamespaces {
        hint: "no namespaces here",
    };
    let labelled = namespace_object(json!({"team": "a"}));
    let plain = namespace_object(json!({}));
    let create = body("CREATE", "namespaces", None, Some(labelled.clone()), None);
    assert_eq!(result(&review(&set, &create, &none)), "applied");
    let create_plain = body("CREATE", "namespaces", None, Some(plain.clone()), None);
    assert_eq!(result(&review(&set, &create_plain, &none)), "skipped");
    // UPDATE: the new labels count, not the old ones.
    let update = body(
        "UPDATE",
        "namespaces",
        Some("n"),
        Some(labelled.clone()),
        Some(plain.clone()),
    );
    assert_eq!(result(&review(&set, &update, &none)), "applied");
    let update_away = body(
        "UPDATE",
        "namespaces",
        Some("n"),
        Some(plain.clone()),
        Some(labelled.clone()),
    );
    assert_eq!(result(&review(&set, &update_away, &none)), "skipped");
    // DELETE: the old object's labels (a DELETE is matched, never changed).
    let delete = body("DELETE", "namespaces", Some("n"), None, Some(labelled));
    assert_eq!(result(&review(&set, &delete, &none)), "unchanged");
    let delete_plain = body("DELETE", "namespaces", Some("n"), None, Some(plain));
    assert_eq!(result(&review(&set, &delete_plain, &none)), "skipped");
}

#[test]
fn a_namespace_matches_on_labels_an_earlier_policy_set() {
    // `first` labels the namespace; `p` (later by order) selects on that label.
    let first = json!({
        "apiVersion": "graft.dev/v1alpha1",
        "kind": "MutationPolicy",
        "metadata": {"name": "first"},
        "spec": {
            "order": -1,
            "match": {"resources": ["namespaces"]},
            "mutations": [{"set": {"path": "$.metadata.labels.team", "value": "a"}}],
        },
    });
    let text = format!(
        "{first}\n---\n{}",
        policy(
            "Fail",
            json!({"resources": ["namespaces"], "namespaceSelector": selector(json!({"team": "a"}))}),
            None,
            mark(),
        )
    );
    let set = load(&text);
    let create = body(
        "CREATE",
        "namespaces",
        None,
        Some(namespace_object(json!({}))),
        None,
    );
    let reviewed = review(&set, &create, &NoNamespaces { hint: "none" });
    assert_eq!(result(&reviewed), "applied");
    let mutated = reviewed.evaluation.object.as_ref().expect("mutated");
    let labels = mutated.get("metadata").and_then(|m| m.get("labels"));
    assert_eq!(
        labels.map(graft::tree::Tree::to_value),
        Some(json!({"team": "a", "marked": "yes"}))
    );
}

#[test]
fn other_cluster_scoped_objects_are_never_skipped_by_a_namespace_selector() {
    let node = || {
        body(
            "CREATE",
            "nodes",
            None,
            Some(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})),
            None,
        )
    };
    let none = NoNamespaces { hint: "none" };
    // In match it holds.
    let matching = load(&policy(
        "Fail",
        json!({"resources": ["nodes"], "namespaceSelector": selector(json!({"team": "a"}))}),
        None,
        mark(),
    ));
    assert_eq!(result(&review(&matching, &node(), &none)), "applied");
    // In exclude it does not hold, so the block excludes nothing cluster-scoped...
    let excluding = load(&policy(
        "Fail",
        json!({"resources": ["nodes"]}),
        Some(json!({"namespaceSelector": selector(json!({"team": "a"}))})),
        mark(),
    ));
    assert_eq!(result(&review(&excluding, &node(), &none)), "applied");
    // ...even when the selector would select every namespace.
    let everything = load(&policy(
        "Fail",
        json!({"resources": ["nodes"]}),
        Some(json!({"namespaceSelector": {}})),
        mark(),
    ));
    assert_eq!(result(&review(&everything, &node(), &none)), "applied");
}

#[test]
fn exclude_namespace_selector_skips_pods_in_selected_namespaces() {
    let set = load(&policy(
        "Fail",
        json!({}),
        Some(json!({"namespaceSelector": selector(json!({"team": "a"}))})),
        mark(),
    ));
    let source = namespaces();
    assert_eq!(
        result(&review(&set, &pod_in("labelled"), &source)),
        "skipped"
    );
    assert_eq!(result(&review(&set, &pod_in("plain"), &source)), "applied");
    // With another condition in the block, the namespace is looked at only when that
    // condition holds: an unknown namespace then costs nothing.
    let narrowed = load(&policy(
        "Fail",
        json!({}),
        Some(json!({
            "labels": {"skip": "me"},
            "namespaceSelector": selector(json!({"team": "a"})),
        })),
        mark(),
    ));
    assert_eq!(
        result(&review(&narrowed, &pod_in("ghost"), &source)),
        "applied"
    );
}

#[test]
fn an_unknown_namespace_fails_the_policy_under_fail_and_skips_it_under_ignore() {
    let matcher = json!({"namespaceSelector": selector(json!({"team": "a"}))});
    let source = namespaces();
    let fail = load(&policy("Fail", matcher.clone(), None, mark()));
    let pod_body = pod_in("ghost");
    let reviewed = review(&fail, &pod_body, &source);
    assert_eq!(
        denial(&reviewed),
        "graft: policy p: spec.match.namespaceSelector: namespace \"ghost\" is not in the test's namespaces"
    );
    let ignore = load(&policy("Ignore", matcher, None, mark()));
    let pod_body = pod_in("ghost");
    let reviewed = review(&ignore, &pod_body, &source);
    assert_eq!(reviewed.evaluation.outcome, Outcome::Allowed);
    assert!(reviewed.evaluation.patch.0.is_empty());
    assert!(matches!(
        reviewed.evaluation.policies[0].result,
        PolicyResult::Ignored(_)
    ));
    assert!(
        reviewed.evaluation.warnings[0].starts_with(
            "graft: policy p skipped: spec.match.namespaceSelector: namespace \"ghost\""
        ),
        "{:?}",
        reviewed.evaluation.warnings
    );
    // In exclude, the same.
    let exclude = load(&policy(
        "Fail",
        json!({}),
        Some(json!({"namespaceSelector": selector(json!({"team": "a"}))})),
        mark(),
    ));
    let message = denial(&review(&exclude, &pod_in("ghost"), &source));
    assert!(
        message.contains("spec.exclude.namespaceSelector: namespace \"ghost\" is not in"),
        "{message}"
    );
}

#[test]
fn a_policy_the_exclude_block_skips_anyway_needs_no_namespace_data() {
    // As the sidecar example: kube-system is excluded by name, so a pod there is skipped
    // without looking at the namespace's labels.
    let set = load(&policy(
        "Fail",
        json!({"namespaceSelector": selector(json!({"team": "a"}))}),
        Some(json!({"namespaces": ["kube-system"]})),
        mark(),
    ));
    let none = NoNamespaces { hint: "none" };
    assert_eq!(
        result(&review(&set, &pod_in("kube-system"), &none)),
        "skipped"
    );
    assert!(denial(&review(&set, &pod_in("default"), &none)).contains("no data for namespace"));
}

#[test]
fn unavailable_namespace_data_fails_the_policy_with_the_hint() {
    let none = NoNamespaces {
        hint: "pass the Namespace objects with --namespaces FILE",
    };
    let fail = load(&policy(
        "Fail",
        json!({"namespaceSelector": selector(json!({"team": "a"}))}),
        None,
        mark(),
    ));
    assert_eq!(
        denial(&review(&fail, &pod_in("labelled"), &none)),
        "graft: policy p: spec.match.namespaceSelector: no data for namespace \"labelled\": pass the Namespace objects with --namespaces FILE"
    );
    let ignore = load(&policy(
        "Ignore",
        json!({"namespaceSelector": selector(json!({"team": "a"}))}),
        None,
        mark(),
    ));
    let pod_body = pod_in("labelled");
    let reviewed = review(&ignore, &pod_body, &none);
    assert_eq!(reviewed.evaluation.outcome, Outcome::Allowed);
    assert_eq!(result(&reviewed), "ignored");
}

#[test]
fn namespace_object_in_cel_is_the_namespace_or_null() {
    let set = load(&policy(
        "Fail",
        json!({"resources": ["pods", "nodes"]}),
        None,
        json!([{"set": {
            "path": "$.metadata.annotations.owner",
            "value": "{{ namespaceObject == null ? 'cluster' : namespaceObject.metadata.annotations.owner + '/' + namespaceObject.metadata.name + '/' + namespaceObject.kind }}",
        }}]),
    ));
    let source = namespaces();
    let pod_body = pod_in("labelled");
    let reviewed = review(&set, &pod_body, &source);
    let mutated = object_after(&reviewed);
    assert_eq!(
        mutated["metadata"]["annotations"]["owner"],
        "alice/labelled/Namespace"
    );
    let node = body(
        "CREATE",
        "nodes",
        None,
        Some(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})),
        None,
    );
    let reviewed = review(&set, &node, &NoNamespaces { hint: "none" });
    let mutated = object_after(&reviewed);
    assert_eq!(mutated["metadata"]["annotations"]["owner"], "cluster");
    // A namespace without labels or annotations has empty maps, not missing ones.
    let labels = load(&policy(
        "Fail",
        json!({"cel": "size(namespaceObject.metadata.labels) == 0"}),
        None,
        mark(),
    ));
    assert_eq!(
        result(&review(&labels, &pod_in("plain"), &source)),
        "applied"
    );
    // Reading it for an unknown namespace fails the policy, naming the variable.
    let message = denial(&review(&set, &pod_in("ghost"), &source));
    assert_eq!(
        message,
        "graft: policy p: namespaceObject: namespace \"ghost\" is not in the test's namespaces"
    );
}

#[test]
fn the_namespace_is_looked_up_only_when_a_candidate_policy_needs_it() {
    let plain = load(&policy("Fail", json!({}), None, mark()));
    assert!(!plain.needs_namespaces());
    let selecting = load(&policy(
        "Fail",
        json!({"namespaceSelector": selector(json!({"team": "a"}))}),
        None,
        mark(),
    ));
    assert!(selecting.needs_namespaces());
    let excluding = load(&policy(
        "Fail",
        json!({}),
        Some(json!({"namespaceSelector": selector(json!({"team": "a"}))})),
        mark(),
    ));
    assert!(excluding.needs_namespaces());
    let reading = load(&policy(
        "Fail",
        json!({}),
        None,
        json!([{"set": {"path": "$.metadata.labels.ns", "value": "{{ namespaceObject.metadata.name }}"}}]),
    ));
    assert!(reading.needs_namespaces());
    let empty = load(&policy(
        "Fail",
        json!({"namespaceSelector": {}}),
        None,
        mark(),
    ));
    assert!(!empty.needs_namespaces());

    let lookups = |set: &PolicySet, body: &[u8]| {
        let counting = Counting::default();
        admission::oracle::review(
            body,
            set,
            graft::admission::ClusterSource::namespaces(&counting),
        )
        .expect("review");
        admission::review(
            body,
            set,
            graft::admission::ClusterSource::namespaces(&counting),
        )
        .expect("lean review");
        counting.lookups.load(Ordering::SeqCst)
    };
    assert_eq!(lookups(&plain, &pod_in("labelled")), 0);
    assert_eq!(lookups(&empty, &pod_in("labelled")), 0);
    assert_eq!(lookups(&selecting, &pod_in("labelled")), 2);
    assert_eq!(lookups(&reading, &pod_in("labelled")), 2);
    // No candidate for the resource: no lookup, even when other policies need one.
    let config_map = body(
        "CREATE",
        "configmaps",
        Some("labelled"),
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})),
        None,
    );
    assert_eq!(lookups(&selecting, &config_map), 0);
    // Cluster-scoped: nothing to look up.
    let node = body(
        "CREATE",
        "nodes",
        None,
        Some(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}})),
        None,
    );
    let nodes = load(&policy(
        "Fail",
        json!({"resources": ["nodes"], "namespaceSelector": selector(json!({"team": "a"}))}),
        None,
        mark(),
    ));
    assert_eq!(lookups(&nodes, &node), 0);
}
