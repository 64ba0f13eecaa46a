//! Property tests: random objects and random policies from a small grammar, and random
//! pods against the four example policies. Every answer must be a well-formed
//! AdmissionReview; every patch must apply to the original and give the engine's
//! mutation; policies that are idempotent by construction must converge in one pass.

use std::path::Path;

use crate::support::policies::{examples, policy_json};
use crate::support::proptest_cases::config;
use base64::Engine as _;
use graft::admission::{self, AdmissionRequest, ResponseReview};
use graft::namespaces::{Namespace, NamespaceMap};
use graft::policy::PolicySet;
use graft::tree::Tree;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

// ---------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------

/// Map keys, including the two characters a JSON Pointer must escape.
const KEYS: &[&str] = &["a", "b", "c", "x/y", "t~n", "a.b", "0"];
const LABEL_KEYS: &[&str] = &["app", "tier", "graft.dev/role", "x~y"];
const LABEL_VALUES: &[&str] = &["web", "db", "yes", ""];

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(KEYS).prop_map(str::to_string)
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1.0e6f64..1.0e6).prop_map(Value::from),
        "[a-z~/ ]{0,6}".prop_map(Value::from),
    ]
}

/// Any JSON value, a few levels deep.
fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// A literal a policy writes: scalars, maps, lists of scalars, and lists of named
/// objects with distinct names (the lists merge merges by name).
fn literal() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        scalar(),
        prop::collection::btree_map(
            prop::sample::select(&["n1", "n2", "n3"][..]),
            scalar(),
            1..3
        )
        .prop_map(|named| {
            Value::Array(
                named
                    .into_iter()
                    .map(|(name, value)| json!({"name": name, "value": value}))
                    .collect(),
            )
        }),
        prop::collection::vec(scalar(), 0..3).prop_map(Value::Array),
    ];
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop::collection::btree_map(key(), inner, 1..3)
            .prop_map(|map| Value::Object(map.into_iter().collect()))
    })
}

fn labels() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(
        prop::sample::select(LABEL_KEYS).prop_map(str::to_string),
        prop::sample::select(LABEL_VALUES).prop_map(Value::from),
        0..3,
    )
    .prop_map(|map| map.into_iter().collect())
}

/// A pod-shaped object with random labels and a random spec.
fn object() -> impl Strategy<Value = Value> {
    (labels(), labels(), prop::option::of(value())).prop_map(|(labels, annotations, spec)| {
        let mut object = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "labels": labels, "annotations": annotations,
                "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:metadata": {"f:labels": {}}}}]},
        });
        if let Some(spec) = spec {
            object["spec"] = spec;
        }
        object
    })
}

/// A pod-shaped object whose spec has containers (named `c0`, `c1`, ...) with random
/// fields, and maybe init containers, for the `foreach` mutations to run over.
fn pod_with_containers() -> impl Strategy<Value = Value> {
    (object(), containers("c"), prop::option::of(containers("i"))).prop_map(
        |(mut object, containers, init)| {
            let mut spec = match object.get("spec") {
                Some(Value::Object(spec)) => spec.clone(),
                _ => Map::new(),
            };
            spec.insert("containers".into(), Value::Array(containers));
            if let Some(init) = init {
                spec.insert("initContainers".into(), Value::Array(init));
            }
            object["spec"] = Value::Object(spec);
            object
        },
    )
}

/// Up to three containers named `PREFIX0`, `PREFIX1`, ..., with random fields.
fn containers(prefix: &'static str) -> impl Strategy<Value = Vec<Value>> {
    (0usize..4).prop_flat_map(move |n| {
        (0..n)
            .map(|i| container(format!("{prefix}{i}")))
            .collect::<Vec<_>>()
    })
}

fn container(name: String) -> impl Strategy<Value = Value> {
    (
        prop::collection::btree_map(key(), value(), 0..3),
        any::<bool>(),
    )
        .prop_map(move |(fields, image)| {
            let mut container: Map<String, Value> = fields.into_iter().collect();
            container.insert("name".into(), name.clone().into());
            if image {
                container.insert("image".into(), "img:1".into());
            }
            Value::Object(container)
        })
}

/// A JSONPath to a location under `spec` or in labels and annotations, in bracket
/// notation so every key is quoted.
fn path() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(key(), 1..4).prop_map(|keys| {
            let mut path = "$['spec']".to_string();
            for key in keys {
                path.push_str(&format!("['{key}']"));
            }
            path
        }),
        prop::sample::select(LABEL_KEYS).prop_map(|k| format!("$.metadata.labels['{k}']")),
        prop::sample::select(LABEL_KEYS).prop_map(|k| format!("$.metadata.annotations['{k}']")),
    ]
}

/// Keys of `list` a policy may write when policies own disjoint keys: every third one,
/// starting at the policy's index.
fn owned(list: &'static [&'static str], owner: usize) -> Vec<&'static str> {
    list.iter().skip(owner % 3).step_by(3).copied().collect()
}

/// A location to write: anywhere (`owner` None), or only under keys the policy owns,
/// so that policies never write each other's locations.
fn write_path(owner: Option<usize>) -> BoxedStrategy<String> {
    let Some(owner) = owner else {
        return path().boxed();
    };
    let first = prop::sample::select(owned(KEYS, owner));
    let spec = (first, prop::collection::vec(key(), 0..3)).prop_map(|(first, rest)| {
        let mut path = format!("$['spec']['{first}']");
        for key in rest {
            path.push_str(&format!("['{key}']"));
        }
        path
    });
    let label = prop::sample::select(owned(LABEL_KEYS, owner));
    prop_oneof![
        spec,
        label
            .clone()
            .prop_map(|k| format!("$.metadata.labels['{k}']")),
        label.prop_map(|k| format!("$.metadata.annotations['{k}']")),
    ]
    .boxed()
}

/// A key directly under `spec`, as `write_path`.
fn spec_key(owner: Option<usize>) -> BoxedStrategy<String> {
    match owner {
        Some(owner) => prop::sample::select(owned(KEYS, owner))
            .prop_map(str::to_string)
            .boxed(),
        None => key().boxed(),
    }
}

#[derive(Debug, Clone)]
enum Edit {
    Set(String, Value),
    Merge(String, Value),
    /// A merge at the root: `{spec: {KEY: VALUE}}`.
    MergeRoot(String, Value),
    Remove(String),
    /// Raw RFC 6902 operations.
    JsonPatch(Vec<Value>),
    /// `set` with `ifAbsent`.
    SetIfAbsent(String, Value),
    /// `merge` with `ifAbsent`.
    MergeIfAbsent(String, Value),
    /// `append` of the items, last or first.
    Append(String, Vec<Value>, bool),
    /// A named ephemeral container merged in, last or first (into a list no `foreach`
    /// selects: a policy that adds an element another policy's `foreach` already ran over
    /// leaves that element to the next review, by design).
    Inject(String, bool),
    /// A `foreach` over the containers, an optional `when`, and the edit under it.
    Foreach(Option<&'static str>, ElementEdit),
}

/// What a `foreach` does to each container, under a key of the container.
#[derive(Debug, Clone)]
enum ElementEdit {
    Set(String, Value, bool),
    Merge(String, Value, bool),
    Append(String, Vec<Value>),
}

impl Edit {
    fn to_json(&self) -> Value {
        match self {
            Edit::Set(path, value) => json!({"set": {"path": path, "value": value}}),
            Edit::Merge(path, value) => json!({"merge": {"path": path, "value": value}}),
            Edit::MergeRoot(key, value) => json!({"merge": {"value": {"spec": {key: value}}}}),
            Edit::Remove(path) => json!({"remove": {"path": path}}),
            Edit::JsonPatch(operations) => json!({"jsonPatch": operations}),
            Edit::SetIfAbsent(path, value) => {
                json!({"set": {"path": path, "value": value, "ifAbsent": true}})
            }
            Edit::MergeIfAbsent(path, value) => {
                json!({"merge": {"path": path, "value": value, "ifAbsent": true}})
            }
            Edit::Append(path, items, first) => {
                json!({"append": {"path": path, "value": items, "position": position(*first)}})
            }
            Edit::Inject(name, first) => json!({"merge": {
                "value": {"spec": {"ephemeralContainers": [{"name": name, "image": "debug"}]}},
                "position": position(*first),
            }}),
            Edit::Foreach(when, edit) => {
                let mut mutation = match edit {
                    ElementEdit::Set(key, value, if_absent) => json!({"set": {
                        "path": format!("@['{key}']"), "value": value, "ifAbsent": if_absent}}),
                    ElementEdit::Merge(key, value, if_absent) => json!({"merge": {
                        "value": {key: value}, "ifAbsent": if_absent}}),
                    ElementEdit::Append(key, items) => json!({"append": {
                        "path": format!("@['{key}']"), "value": items}}),
                };
                mutation["foreach"] = json!("$.spec['containers','initContainers'][*]");
                if let Some(when) = when {
                    mutation["when"] = json!(when);
                }
                mutation
            }
        }
    }
}

fn position(first: bool) -> &'static str {
    if first { "First" } else { "Last" }
}

/// The mutation kinds of `foreach`, `ifAbsent`, `append` and `position`, writing only
/// where the policy owns the keys (and init container names): idempotent by
/// construction. No policy adds or removes containers or init containers, which the
/// `foreach`es select.
fn reach_edit(owner: Option<usize>) -> BoxedStrategy<Edit> {
    let container_key = match owner {
        Some(owner) => prop::sample::select(owned(KEYS, owner))
            .prop_map(str::to_string)
            .boxed(),
        None => key().boxed(),
    };
    let items = || prop::collection::vec(literal(), 0..3);
    let when = prop::option::of(prop::sample::select(
        &["element.name == 'c1'", "index > 0", "!has(element.image)"][..],
    ));
    let element_edit = prop_oneof![
        (container_key.clone(), literal(), any::<bool>())
            .prop_map(|(k, v, a)| ElementEdit::Set(k, v, a)),
        (container_key.clone(), literal(), any::<bool>())
            .prop_map(|(k, v, a)| ElementEdit::Merge(k, v, a)),
        (container_key, items()).prop_map(|(k, i)| ElementEdit::Append(k, i)),
    ];
    let injected = format!("debug-{}", owner.unwrap_or(0));
    prop_oneof![
        2 => literal_edit(owner),
        1 => (write_path(owner), literal()).prop_map(|(p, v)| Edit::SetIfAbsent(p.clone(), typed(&p, v))),
        1 => (write_path(owner), literal()).prop_map(|(p, v)| Edit::MergeIfAbsent(p.clone(), typed(&p, v))),
        1 => (write_path(owner), items(), any::<bool>())
            .prop_filter("labels and annotations are strings, not lists", |(p, _, _)| !is_labelled(p))
            .prop_map(|(p, i, f)| Edit::Append(p, i, f)),
        1 => any::<bool>().prop_map(move |first| Edit::Inject(injected.clone(), first)),
        3 => (when, element_edit).prop_map(|(w, e)| Edit::Foreach(w, e)),
    ]
    .boxed()
}

impl Edit {
    /// Whether the edit writes only where nothing is (`ifAbsent`).
    fn tests_presence(&self) -> bool {
        matches!(
            self,
            Edit::SetIfAbsent(..)
                | Edit::MergeIfAbsent(..)
                | Edit::Foreach(
                    _,
                    ElementEdit::Set(_, _, true) | ElementEdit::Merge(_, _, true)
                )
        )
    }
}

/// Whether a path (a JSONPath or a JSON Pointer) leads into labels or annotations, whose
/// values Kubernetes types as strings.
fn is_labelled(path: &str) -> bool {
    [
        "metadata.labels",
        "metadata.annotations",
        "/metadata/labels/",
        "/metadata/annotations/",
    ]
    .iter()
    .any(|prefix| path.contains(prefix))
}

/// `value` as a policy may write it at `path`: a string (or null) where Kubernetes'
/// types want one, which lint holds literals to (any other value there is refused at
/// load); anything elsewhere, where the spec's random keys are no field of a Pod.
fn typed(path: &str, value: Value) -> Value {
    match value {
        Value::Null | Value::String(_) => value,
        other if is_labelled(path) => Value::String(other.to_string()),
        other => other,
    }
}

/// Set and merge of literals: idempotent by construction.
fn literal_edit(owner: Option<usize>) -> BoxedStrategy<Edit> {
    prop_oneof![
        (write_path(owner), literal()).prop_map(|(p, v)| Edit::Set(p.clone(), typed(&p, v))),
        (write_path(owner), literal()).prop_map(|(p, v)| Edit::Merge(p.clone(), typed(&p, v))),
        (spec_key(owner), literal()).prop_map(|(k, v)| Edit::MergeRoot(k, v)),
    ]
    .boxed()
}

/// Any edit, anywhere: removes, and raw operations that may fail.
fn any_edit(_owner: Option<usize>) -> BoxedStrategy<Edit> {
    prop_oneof![
        3 => literal_edit(None),
        2 => reach_edit(None),
        1 => path().prop_map(Edit::Remove),
        1 => prop::collection::vec(json_patch_operation(), 1..3).prop_map(Edit::JsonPatch),
    ]
    .boxed()
}

/// A raw operation on labels, annotations or a key under `spec`; it may fail to apply
/// (a missing parent or key), which fails the policy.
fn json_patch_operation() -> impl Strategy<Value = Value> {
    let escape = |key: &str| key.replace('~', "~0").replace('/', "~1");
    let label = prop::sample::select(LABEL_KEYS)
        .prop_map(move |k| format!("/metadata/labels/{}", escape(k)));
    let spec_key = key().prop_map(move |k| format!("/spec/{}", escape(&k)));
    let location = prop_oneof![label, spec_key];
    prop_oneof![
        (location.clone(), literal()).prop_map(|(path, value)| {
            let value = typed(&path, value);
            json!({"op": "add", "path": path, "value": value})
        }),
        location
            .clone()
            .prop_map(|path| json!({"op": "remove", "path": path})),
        (location.clone(), location)
            .prop_map(|(from, path)| { json!({"op": "move", "from": from, "path": path}) }),
    ]
}

/// One policy document: match on pods, optional label and field tests, the edits.
fn policy(name: &str, edits: &[Edit], labels: &Map<String, Value>, exists: Option<&str>) -> Value {
    let mut matcher = json!({"resources": ["pods"], "operations": ["CREATE"]});
    if !labels.is_empty() {
        matcher["labels"] = Value::Object(labels.clone());
    }
    if let Some(path) = exists {
        matcher["fields"] = json!([{"path": path, "exists": true}]);
    }
    let spec = json!({
        "failurePolicy": "Ignore",
        "match": matcher,
        "mutations": edits.iter().map(Edit::to_json).collect::<Vec<_>>(),
    });
    policy_json(name, spec)
}

/// A set of one to three policies, as the YAML stream a ConfigMap would hold (JSON is
/// YAML). With `owned`, each policy writes only keys it owns; matchers and field tests
/// still look at any key, so a policy may depend on what another one writes.
fn policy_text(
    edit: fn(Option<usize>) -> BoxedStrategy<Edit>,
    owned: bool,
) -> impl Strategy<Value = String> {
    // Within a policy the `ifAbsent` edits come after the others: one placed before an
    // edit that overwrites its location tests a value that edit then replaces, so the
    // next review finds it present or absent differently. Such a policy changes the
    // object again on every review, by design, as it would under the apiserver's
    // reinvocation.
    let one = |i: usize| {
        (
            prop::collection::vec(edit(owned.then_some(i)), 1..4).prop_map(|mut edits| {
                edits.sort_by_key(Edit::tests_presence);
                edits
            }),
            labels(),
            prop::option::of(path()),
        )
    };
    prop_oneof![
        one(0).prop_map(|p| vec![p]),
        (one(0), one(1)).prop_map(|(a, b)| vec![a, b]),
        (one(0), one(1), one(2)).prop_map(|(a, b, c)| vec![a, b, c]),
    ]
    .prop_map(|policies| {
        policies
            .iter()
            .enumerate()
            .map(|(i, (edits, labels, exists))| {
                policy(&format!("p{i}"), edits, labels, exists.as_deref()).to_string()
            })
            .collect::<Vec<_>>()
            .join("\n---\n")
    })
}

// ---------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------

fn load(text: &str) -> Result<PolicySet, TestCaseError> {
    graft::policy::load_str(Path::new("generated.yaml"), text)
        .map(|loaded| loaded.set)
        .map_err(|findings| TestCaseError::fail(format!("{findings:?}\n{text}")))
}

/// A CREATE of `object` in `namespace`, as the apiserver sends it.
fn review_body_in(object: &Value, version: &str, namespace: &str) -> Vec<u8> {
    json!({
        "apiVersion": version,
        "kind": "AdmissionReview",
        "request": {
            "uid": "7c0e0bb8-0d1c-4c53-9a0e-6a1d8a6c1f00",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "u"},
            "object": object,
        }
    })
    .to_string()
    .into_bytes()
}

/// The response bytes parse back as an AdmissionReview of the same version, echo the
/// uid, and carry a patch only as base64 of a JSON array that applies to `object`.
fn check_response(
    body: &[u8],
    version: &str,
    object: &Value,
) -> Result<Option<Value>, TestCaseError> {
    let parsed: ResponseReview = serde_json::from_slice(body)
        .map_err(|e| TestCaseError::fail(format!("response does not parse: {e}")))?;
    prop_assert_eq!(&parsed.api_version, version);
    prop_assert_eq!(&parsed.kind, "AdmissionReview");
    prop_assert_eq!(&parsed.response.uid, "7c0e0bb8-0d1c-4c53-9a0e-6a1d8a6c1f00");
    let Some(patch) = &parsed.response.patch else {
        prop_assert!(parsed.response.patch_type.is_none());
        return Ok(None);
    };
    prop_assert_eq!(parsed.response.patch_type.as_deref(), Some("JSONPatch"));
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .map_err(|e| TestCaseError::fail(format!("patch is not base64: {e}")))?;
    let array: Value = serde_json::from_slice(&bytes)
        .map_err(|e| TestCaseError::fail(format!("patch is not JSON: {e}")))?;
    prop_assert!(array.is_array(), "patch is not an array: {}", array);
    let patch: json_patch::Patch = serde_json::from_value(array)
        .map_err(|e| TestCaseError::fail(format!("patch is not RFC 6902: {e}")))?;
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &patch)
        .map_err(|e| TestCaseError::fail(format!("patch does not apply: {e}")))?;
    Ok(Some(patched))
}

/// Reviews `object` through the public entry point and checks the answer; returns the
/// patched object.
fn reviewed(
    set: &PolicySet,
    object: &Value,
    version: &str,
) -> Result<Option<Value>, TestCaseError> {
    reviewed_in(set, object, version, "ns")
}

/// As [`reviewed`], for a request in `namespace`.
fn reviewed_in(
    set: &PolicySet,
    object: &Value,
    version: &str,
    namespace: &str,
) -> Result<Option<Value>, TestCaseError> {
    let body = review_body_in(object, version, namespace);
    let reviewed = admission::oracle::review(
        &body,
        set,
        graft::admission::ClusterSource::namespaces(namespaces()),
    )
    .map_err(|e| TestCaseError::fail(format!("review refused: {e}")))?;
    let patched = check_response(
        &reviewed.to_json().expect("the response serialises"),
        version,
        object,
    )?;
    // The patch leads from the request's object, which the review keeps as it came, to
    // the evaluation's.
    let mutated = reviewed.evaluation.mutated();
    prop_assert_eq!(patched.as_ref(), mutated.as_ref());
    let original = reviewed.review.request.object.as_ref().map(Tree::to_value);
    prop_assert_eq!(original.as_ref(), Some(object));
    // The server's parse, which builds only what the policies can see, answers alike.
    let lean = admission::review(
        &body,
        set,
        graft::admission::ClusterSource::namespaces(namespaces()),
    )
    .map_err(|e| TestCaseError::fail(format!("lean review refused: {e}")))?;
    prop_assert_eq!(
        lean.to_json().expect("the response serialises"),
        reviewed.to_json().expect("the response serialises")
    );
    Ok(patched)
}

/// The invariants every evaluation holds (`graft::admission::check`): the patch applies
/// to the original and yields the engine's mutation, a second review of the result is
/// allowed and changes nothing, `graft explain` agrees.
fn converges(request: &AdmissionRequest, set: &PolicySet) -> Result<(), TestCaseError> {
    let source = graft::admission::ClusterSource::namespaces(namespaces());
    let checked = graft::admission::check::check(request, set, source);
    prop_assert!(
        checked.problems.is_empty(),
        "{}\nfirst: {:?}",
        checked.problems.join("\n"),
        checked.evaluation.patch
    );
    Ok(())
}

/// The namespaces the generated requests are in: `default` and `kube-system` labelled
/// for sidecar injection (kube-system is still excluded by the example), `ns` and
/// `dynamo-system` not.
fn namespaces() -> &'static NamespaceMap {
    static MAP: std::sync::OnceLock<NamespaceMap> = std::sync::OnceLock::new();
    MAP.get_or_init(|| {
        let namespace = |name: &str, labelled: bool| Namespace {
            name: name.to_string(),
            labels: if labelled {
                [("sidecar-injection".to_string(), "enabled".to_string())].into()
            } else {
                Default::default()
            },
            annotations: Default::default(),
        };
        NamespaceMap::new(
            [
                namespace("default", true),
                namespace("kube-system", true),
                namespace("ns", false),
                namespace("dynamo-system", false),
            ],
            "the test's namespaces",
        )
    })
}

fn pod_request(object: Value, namespace: &str) -> AdmissionRequest<'static> {
    let options = graft::admission::offline::RequestOptions {
        namespace: Some(namespace.to_string()),
        ..Default::default()
    };
    graft::admission::offline::request_for(object, &options, "uid-1")
}

// ---------------------------------------------------------------------------------------
// Properties over generated policies
// ---------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config(96))]

    /// Set and merge of literals by policies that do not write each other's locations
    /// (one may match on what another writes, or fail until another has written): the
    /// patch applies, and the second pass is empty. Policies that write the same
    /// location differently depend on their order, and no order is a fixpoint for them.
    #[test]
    fn literal_policies_converge_in_one_pass(
        text in policy_text(literal_edit, true),
        object in object(),
    ) {
        let set = load(&text)?;
        reviewed(&set, &object, admission::API_VERSION_V1)?;
        converges(&pod_request(object, "ns"), &set)?;
    }

    /// `foreach`, `ifAbsent`, `append` and `position: First`, with set and merge, by
    /// policies that own disjoint keys: the patch applies to the original and the second
    /// pass is empty. With `failurePolicy: Ignore`, a policy that fails (an append to a
    /// value that is not a list, a set through a scalar element) leaves no trace.
    #[test]
    fn reach_policies_converge_in_one_pass(
        text in policy_text(reach_edit, true),
        object in pod_with_containers(),
    ) {
        let set = load(&text)?;
        reviewed(&set, &object, admission::API_VERSION_V1)?;
        converges(&pod_request(object, "ns"), &set)?;
    }

    /// The same policies with `podControllers`, on a Deployment whose pod template is
    /// such a pod: the patch applies and the second pass is empty.
    #[test]
    fn reach_policies_converge_on_pod_templates(
        text in policy_text(reach_edit, true),
        pod in pod_with_containers(),
    ) {
        // The first `spec` of each document is the policy's; later ones are in fragments.
        let text = text
            .split("\n---\n")
            .map(|document| document.replacen("\"spec\":{", "\"spec\":{\"podControllers\":true,", 1))
            .collect::<Vec<_>>()
            .join("\n---\n");
        let set = load(&text)?;
        let mut template = json!({"spec": pod["spec"]});
        template["metadata"] = json!({
            "labels": pod["metadata"]["labels"],
            "annotations": pod["metadata"]["annotations"],
        });
        let deployment = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"replicas": 2, "template": template},
        });
        converges(&pod_request(deployment, "ns"), &set)?;
    }

    /// With removes too (remove then set of the same path is not idempotent by
    /// construction), the patch still always applies and the response is well formed,
    /// in both AdmissionReview versions.
    #[test]
    fn any_policy_gives_an_applicable_patch(
        text in policy_text(any_edit, false),
        object in object(),
        v1 in any::<bool>(),
    ) {
        let set = load(&text)?;
        let version = if v1 { admission::API_VERSION_V1 } else { admission::API_VERSION_V1BETA1 };
        reviewed(&set, &object, version)?;
    }

    /// The engine diffs only the subtrees policies wrote under; the result is exactly
    /// the full `json_patch::diff` of the original and the mutated object.
    #[test]
    fn the_patch_is_the_full_diff(
        text in policy_text(any_edit, false),
        object in object(),
    ) {
        let set = load(&text)?;
        let request = pod_request(object.clone(), "ns");
        let evaluation = graft::admission::offline::evaluate(&request, &set, graft::admission::ClusterSource::namespaces(namespaces()));
        let mutated = evaluation.mutated().unwrap_or_else(|| object.clone());
        prop_assert_eq!(&evaluation.patch.to_json_patch(), &json_patch::diff(&object, &mutated));
    }
}

/// A namespace selector on the label the test namespaces carry (or not).
fn namespace_selector() -> impl Strategy<Value = Value> {
    let values = prop::collection::vec(
        prop::sample::select(&["enabled", "disabled"][..]).prop_map(str::to_string),
        1..3,
    );
    prop_oneof![
        Just(json!({"matchLabels": {"sidecar-injection": "enabled"}})),
        values
            .clone()
            .prop_map(|v| json!({"matchExpressions": [{"key": "sidecar-injection", "operator": "In", "values": v}]})),
        values.prop_map(|v| json!({"matchExpressions": [{"key": "sidecar-injection", "operator": "NotIn", "values": v}]})),
        Just(json!({"matchExpressions": [{"key": "sidecar-injection", "operator": "Exists"}]})),
        Just(json!({"matchExpressions": [{"key": "sidecar-injection", "operator": "DoesNotExist"}]})),
        Just(json!({})),
    ]
}

/// Adds `selector` to the `match` (or a new `exclude`) of every policy in `text`, and
/// makes every other policy read `namespaceObject` in a `when`.
fn with_namespace_selector(text: &str, selector: &Value, in_exclude: bool) -> String {
    text.split("\n---\n")
        .enumerate()
        .map(|(i, document)| {
            let mut policy: Value = serde_json::from_str(document).unwrap_or_default();
            if in_exclude {
                policy["spec"]["exclude"] = json!({"namespaceSelector": selector});
            } else {
                policy["spec"]["match"]["namespaceSelector"] = selector.clone();
            }
            if i % 2 == 1
                && let Some(mutations) = policy["spec"]["mutations"].as_array_mut()
            {
                for mutation in mutations {
                    mutation["when"] =
                        json!("namespaceObject == null || namespaceObject.metadata.name != ''");
                }
            }
            policy.to_string()
        })
        .collect::<Vec<_>>()
        .join("\n---\n")
}

proptest! {
    #![proptest_config(config(64))]

    /// Policies that select on the namespace (in `match` or `exclude`) or read it, for pods
    /// in a labelled, an unlabelled and an unknown namespace: both parses answer alike,
    /// the patch applies, and the second pass is empty.
    #[test]
    fn namespace_policies_are_answered_alike_and_converge(
        text in policy_text(literal_edit, true),
        object in object(),
        selector in namespace_selector(),
        in_exclude in any::<bool>(),
        namespace in prop::sample::select(&["default", "ns", "ghost"][..]),
    ) {
        let set = load(&with_namespace_selector(&text, &selector, in_exclude))?;
        reviewed_in(&set, &object, admission::API_VERSION_V1, namespace)?;
        converges(&pod_request(object, namespace), &set)?;
    }
}

// ---------------------------------------------------------------------------------------
// Random pods against the four example policies
// ---------------------------------------------------------------------------------------

fn example_policies() -> &'static PolicySet {
    static SET: std::sync::OnceLock<PolicySet> = std::sync::OnceLock::new();
    SET.get_or_init(examples)
}

/// Pods built from the values the example policies look at, so they match often.
fn example_pod() -> impl Strategy<Value = (Value, String)> {
    let annotation = prop_oneof![
        Just(None),
        prop::sample::select(&["yes", "true", "no", "On"][..])
            .prop_map(|v| Some(("sidecar-injector-webhook.morven.me/inject", Value::from(v)))),
        prop::sample::select(&["", "other/net", "a, b@eth1", "[{\"name\":\"roce5\"}]", "{"][..])
            .prop_map(|v| Some(("k8s.v1.cni.cncf.io/networks", Value::from(v)))),
        prop::sample::select(
            &[
                "{\"key\":\"zone\",\"even\":\"a\",\"odd\":\"b\"}",
                "[1]",
                "{\"key\":3}",
                "nope"
            ][..]
        )
        .prop_map(|v| Some(("custom-node-selector", Value::from(v)))),
    ];
    (
        prop::sample::select(&["dynamo-system", "default", "kube-system"][..]),
        prop::sample::select(&["worker06", "worker14", "worker01"][..]),
        any::<bool>(),
        any::<bool>(),
        prop::option::of(0u32..40),
        annotation,
        prop::collection::vec(
            prop::sample::select(&["main", "app", "sidecar-nginx"][..]),
            0..3,
        ),
    )
        .prop_map(
            |(namespace, alias, worker, stateful, ordinal, annotation, containers)| {
                let name = ordinal.map_or("pod-x".to_string(), |n| format!("web-{n}"));
                let mut labels = Map::new();
                if worker {
                    labels.insert("nvidia.com/dynamo-component-type".into(), "worker".into());
                }
                if stateful {
                    labels.insert("ab-build-different".into(), "true".into());
                }
                if let Some(n) = ordinal {
                    labels.insert("apps.kubernetes.io/pod-index".into(), n.to_string().into());
                }
                let mut annotations = Map::new();
                if let Some((key, value)) = annotation {
                    annotations.insert(key.into(), value);
                }
                let containers: Vec<Value> = containers
                    .iter()
                    .map(|name| json!({"name": name, "image": "busybox"}))
                    .collect();
                let mut pod = json!({
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "labels": labels, "annotations": annotations},
                    "spec": {"containers": containers, "nodeSelector": {"dynamo.nodeAlias": alias}},
                });
                if stateful {
                    pod["metadata"]["ownerReferences"] =
                        json!([{"kind": "StatefulSet", "name": "web", "apiVersion": "apps/v1"}]);
                }
                (pod, namespace.to_string())
            },
        )
}

/// Nodes with random capacities and overcommit annotations, for `node-overcommit`.
fn example_node() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(&["4", "3500m", "0", "1.5", "bad"][..]),
        prop::sample::select(&["16Gi", "1000Ki", "1e3", "12345", "x"][..]),
        prop::option::of(prop::sample::select(
            &[
                "{\"cpu\": 2}",
                "{\"memory\": 0.5}",
                "{}",
                "[",
                "{\"cpu\":\"x\"}",
            ][..],
        )),
    )
        .prop_map(|(cpu, memory, ratio)| {
            let mut node = json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "gpu-1", "labels": {"graft.dev/overcommit": "true"}},
                "status": {
                    "capacity": {"cpu": cpu, "memory": memory},
                    "allocatable": {"cpu": cpu, "memory": memory},
                },
            });
            if let Some(ratio) = ratio {
                node["metadata"]["annotations"] = json!({"graft.dev/overcommit-ratio": ratio});
            }
            node
        })
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn example_policies_converge_on_random_pods((pod, namespace) in example_pod()) {
        let set = example_policies();
        converges(&pod_request(pod, &namespace), set)?;
    }

    #[test]
    fn example_policies_converge_on_random_nodes(node in example_node()) {
        let set = example_policies();
        let options = graft::admission::offline::RequestOptions {
            operation: "UPDATE".into(),
            resource: Some("nodes/status".into()),
            old_object: Some(node.clone()),
            ..Default::default()
        };
        converges(&graft::admission::offline::request_for(node, &options, "uid-2"), set)?;
    }
}
