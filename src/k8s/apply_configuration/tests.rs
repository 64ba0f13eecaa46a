use serde_json::{Value, json};

use super::*;
use crate::k8s::schema;

fn kind(group: &str, version: &str, kind: &str) -> TypeRef<'static> {
    schema::builtin()
        .expect("schema")
        .kind(group, version, kind)
        .unwrap_or_else(|| panic!("{group}/{version}/{kind}"))
}

fn pod() -> TypeRef<'static> {
    kind("", "v1", "Pod")
}

fn run_as(root: TypeRef<'static>, live: Value, patch: Value) -> Result<Value, String> {
    apply(
        &Tree::from(&live),
        Live::Unchecked,
        &Tree::from(&patch),
        root,
        Nulls::Json,
    )
    .map(|merged| merged.to_value())
    .map_err(|error| error.to_string())
}

fn run(live: Value, patch: Value) -> Result<Value, String> {
    run_as(pod(), live, patch)
}

fn patch_error(patch: Value) -> String {
    run(json!({}), patch).expect_err("refused")
}

const INVALID: &str = "error applying patch: failed to convert patch object to typed object: ";
const ATOMIC: &str = "error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: ";

/// SMD's validation: its messages and paths.
#[path = "validation_tests.rs"]
mod validation;

#[test]
fn atomic_values_are_refused_even_empty_or_unchanged() {
    for (patch, paths) in [
        (
            json!({"spec": {"containers": [{"name": "a", "args": []}]}}),
            ".spec.containers[0].args",
        ),
        (json!({"spec": {"nodeSelector": {}}}), ".spec.nodeSelector"),
        (
            json!({"spec": {"tolerations": [{"key": "k"}]}}),
            ".spec.tolerations",
        ),
        (
            json!({"spec": {"imagePullSecrets": [{"name": "s"}]}}),
            ".spec.imagePullSecrets[0]",
        ),
        (
            json!({"metadata": {"ownerReferences": [{"uid": "u", "name": "n"}]}}),
            ".metadata.ownerReferences[0]",
        ),
        (
            json!({"spec": {"containers": [{"name": "a", "env": [{"name": "e",
                "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}}),
            ".spec.containers[0].env[0].valueFrom.secretKeyRef",
        ),
        (
            json!({"spec": {"initContainers": [{"name": "i", "command": ["sh"], "args": ["-c"]}],
                "readinessGates": []}}),
            ".spec.initContainers[0].command, .spec.initContainers[0].args, .spec.readinessGates",
        ),
        (
            json!({"spec": {"affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}}}}),
            ".spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution, \
             .spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms, \
             .spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]",
        ),
    ] {
        let live = json!({"spec": {"containers": [{"name": "a", "args": []}], "nodeSelector": {}}});
        assert_eq!(
            run(live, patch.clone()),
            Err(format!("{ATOMIC}{paths}")),
            "{patch}"
        );
    }
    assert_eq!(
        run_as(
            kind("apps", "v1", "Deployment"),
            json!({}),
            json!({"spec": {"selector": {}}})
        ),
        Err(format!("{ATOMIC}.spec.selector"))
    );
}

#[test]
fn what_the_atomic_check_does_not_look_into() {
    // A null is no map or list; the values of a granular map are not looked into, and
    // an atomic value there is replaced whole.
    let csr = kind("certificates.k8s.io", "v1", "CertificateSigningRequest");
    assert_eq!(
        run_as(
            csr,
            json!({"spec": {"extra": {"a": ["x", "y"], "b": ["z"]}}}),
            json!({"spec": {"extra": {"a": ["w"]}}})
        ),
        Ok(json!({"spec": {"extra": {"a": ["w"], "b": ["z"]}}}))
    );
    assert_eq!(
        run(
            json!({"spec": {"tolerations": [{"key": "k"}]}}),
            json!({"spec": {"tolerations": null}})
        ),
        Ok(json!({"spec": {"tolerations": null}}))
    );
    // Fields a struct does not declare, under preserveUnknown, are not looked into
    // either: their lists are atomic and replaced.
    let storage_version = kind("internal.apiserver.k8s.io", "v1alpha1", "StorageVersion");
    assert_eq!(
        run_as(
            storage_version,
            json!({"spec": {"l": [1, 2], "m": {"a": 1}, "s": "x"}}),
            json!({"spec": {"l": [3], "m": {"b": 2}, "s": {"now": "a map"}}})
        ),
        Ok(json!({"spec": {"l": [3], "m": {"a": 1, "b": 2}, "s": {"now": "a map"}}}))
    );
}

#[test]
fn untyped_fields_take_any_value_and_their_lists_are_atomic() {
    let deployment = kind("apps", "v1", "Deployment");
    let surge =
        |value: Value| json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": value}}}});
    // int-or-string is any JSON value to SMD: a map passes, a list is atomic.
    assert_eq!(
        run_as(deployment, surge(json!(1)), surge(json!({"a": 1}))),
        Ok(surge(json!({"a": 1})))
    );
    assert_eq!(
        run_as(deployment, surge(json!({"a": 1})), surge(json!("25%"))),
        Ok(surge(json!("25%")))
    );
    assert_eq!(
        run_as(deployment, surge(json!(1)), surge(json!([1]))),
        Err(format!("{ATOMIC}.spec.strategy.rollingUpdate.maxSurge"))
    );
    // any-atomic (RawExtension): a map or list is refused, and so are the maps in a list.
    let revision = kind("apps", "v1", "ControllerRevision");
    assert_eq!(
        run_as(revision, json!({}), json!({"data": {"a": 1}})),
        Err(format!("{ATOMIC}.data"))
    );
    assert_eq!(
        run_as(revision, json!({}), json!({"data": [{"a": 1}, 2]})),
        Err(format!("{ATOMIC}.data, .data[0]"))
    );
    assert_eq!(
        run_as(revision, json!({"data": {"a": 1}}), json!({"data": 7})),
        Ok(json!({"data": 7}))
    );
}

#[test]
fn maps_and_structs_merge_key_by_key_and_never_lose_a_key() {
    let live = json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "2"}},
        "spec": {"hostname": "h", "containers": [{"name": "c", "image": "i"}]}});
    assert_eq!(
        run(
            live.clone(),
            json!({"metadata": {"labels": {"b": "3", "c": "4"}}, "spec": {"subdomain": "s"}})
        ),
        Ok(
            json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "3", "c": "4"}},
            "spec": {"hostname": "h", "containers": [{"name": "c", "image": "i"}],
                "subdomain": "s"}})
        )
    );
    // An empty or null granular map over a non-empty one changes nothing.
    for labels in [json!({}), json!(null)] {
        assert_eq!(
            run(live.clone(), json!({"metadata": {"labels": labels}})),
            Ok(live.clone())
        );
    }
    // Empty or null on both sides: the patch's value, keeping the difference.
    assert_eq!(
        run(
            json!({"metadata": {"labels": null}}),
            json!({"metadata": {"labels": {}}})
        ),
        Ok(json!({"metadata": {"labels": {}}}))
    );
    assert_eq!(
        run(
            json!({"metadata": {"labels": {}}}),
            json!({"metadata": {"labels": null}})
        ),
        Ok(json!({"metadata": {"labels": null}}))
    );
    assert_eq!(
        run(
            json!({"spec": {"containers": []}}),
            json!({"spec": {"containers": null}})
        ),
        Ok(json!({"spec": {"containers": null}}))
    );
}

/// The env list of a pod with one container named `c`: `names` its items, each
/// `{name}` or `{name, value: "patch"}`.
fn env(names: &[&str], value: Option<&str>) -> Value {
    let items: Vec<Value> = names
        .iter()
        .map(|name| match value {
            Some(value) => json!({"name": name, "value": value}),
            None => json!({"name": name}),
        })
        .collect();
    json!({"spec": {"containers": [{"name": "c", "env": items}]}})
}

#[test]
fn keyed_list_items_come_out_in_smds_order() {
    // schema-table.md §4 and map-semantics.md §5.2; `*` merged, `+` new.
    for (live, patch, expected) in [
        (&["a", "b", "c"][..], &["d"][..], &["a", "b", "c", "d+"][..]),
        (&["a", "b", "c"], &["d", "b"], &["a", "d+", "b*", "c"]),
        (&["a", "b"], &["b", "x"], &["a", "b*", "x+"]),
        (
            &["a", "b", "c"],
            &["x", "c", "y"],
            &["a", "b", "x+", "c*", "y+"],
        ),
        (&["a", "b", "c"], &["c", "a"], &["b", "c*", "a*"]),
        (&["a", "b", "c"], &["b", "d"], &["a", "b*", "c", "d+"]),
        (&[], &["x", "y"], &["x+", "y+"]),
        (
            &["a", "b", "c", "d"],
            &["d", "x", "a"],
            &["b", "c", "d*", "x+", "a*"],
        ),
    ] {
        let merged = run(env(live, None), env(patch, Some("patch"))).expect("merged");
        let items: Vec<String> = merged["spec"]["containers"][0]["env"]
            .as_array()
            .expect("env")
            .iter()
            .map(|item| {
                let name = item["name"].as_str().expect("name");
                match (item.get("value"), live.contains(&name)) {
                    (Some(_), true) => format!("{name}*"),
                    (Some(_), false) => format!("{name}+"),
                    (None, _) => name.to_string(),
                }
            })
            .collect();
        assert_eq!(items, expected, "{live:?} + {patch:?}");
    }
}

#[test]
fn sets_merge_by_value() {
    let finalizers = |items: Value| json!({"metadata": {"finalizers": items}});
    assert_eq!(
        run(
            finalizers(json!(["a", "b", "c"])),
            finalizers(json!(["d", "b"]))
        ),
        Ok(finalizers(json!(["a", "d", "b", "c"])))
    );
}

#[test]
fn key_defaults_and_numbers_identify_items() {
    let ports = |items: Value| json!({"spec": {"containers": [{"name": "c", "ports": items}]}});
    // A port without protocol is keyed as TCP; 80 and 80.0 are one number.
    assert_eq!(
        run(
            ports(
                json!([{"containerPort": 80, "protocol": "TCP", "name": "web"},
                {"containerPort": 80, "protocol": "UDP"}])
            ),
            ports(json!([{"containerPort": 80.0, "hostPort": 8080}]))
        ),
        Ok(ports(json!([
            {"containerPort": 80.0, "protocol": "TCP", "name": "web", "hostPort": 8080},
            {"containerPort": 80, "protocol": "UDP"},
        ])))
    );
    // A container without a name is keyed by the default, "".
    assert_eq!(
        run(
            json!({"spec": {"containers": [{"image": "a"}]}}),
            json!({"spec": {"containers": [{"name": "", "tty": true}]}})
        ),
        Ok(json!({"spec": {"containers": [{"image": "a", "name": "", "tty": true}]}}))
    );
}

#[test]
fn live_duplicates_the_patch_names_collapse_into_its_item() {
    let live = env(&["x", "x", "y"], None);
    let mut live_with_values = live.clone();
    live_with_values["spec"]["containers"][0]["env"][0]["value"] = json!("first");
    assert_eq!(
        run(live_with_values, env(&["x"], Some("patch"))),
        Ok(json!({"spec": {"containers": [{"name": "c", "env": [
            {"name": "x", "value": "patch"}, {"name": "y"},
        ]}]}}))
    );
    // Untouched duplicates stay.
    assert_eq!(
        run(live.clone(), env(&["z"], Some("p")))
            .map(|v| { v["spec"]["containers"][0]["env"].as_array().map(Vec::len) }),
        Ok(Some(4))
    );
}

#[test]
fn the_result_shares_what_the_patch_does_not_change() {
    let live = Tree::from(
        json!({"metadata": {"labels": {"a": "1"}, "annotations": {"n": "v"}},
        "spec": {"containers": [{"name": "c", "image": "i", "env": [{"name": "e"}]}],
            "volumes": [{"name": "v"}]}}),
    );
    let patch = Tree::from(json!({"metadata": {"labels": {"a": "1", "b": "2"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}));
    let merged = apply(&live, Live::Unchecked, &patch, pod(), Nulls::Json).expect("merged");
    let at = |tree: &Tree<'static>, pointer: &str| tree.pointer(pointer).expect(pointer).clone();
    for unchanged in ["/metadata/annotations", "/spec", "/spec/volumes"] {
        assert!(
            at(&merged, unchanged).same(&at(&live, unchanged)),
            "{unchanged}"
        );
    }
    assert!(!at(&merged, "/metadata").same(&at(&live, "/metadata")));
    // Keys keep the live order, new ones after it.
    let keys: Vec<&str> = merged
        .pointer("/metadata/labels")
        .and_then(Tree::as_map)
        .expect("labels")
        .keys()
        .collect();
    assert_eq!(keys, ["a", "b"]);
    // A patch equal to the object changes nothing at all.
    let same = apply(&live, Live::Unchecked, &live.clone(), pod(), Nulls::Json);
    assert!(same.is_ok_and(|merged| merged.same(&live)));
}

#[test]
fn a_text_node_of_the_live_object_is_neither_validated_nor_built() {
    let text = r#"{"metadata": {"name": "p", "managedFields": [{"manager": "m", "bogus": 1}]}}"#;
    let live = Tree::parse_keeping(text, &["managedFields"]).expect("parsed");
    let merged = apply(
        &live,
        Live::Unchecked,
        &Tree::from(json!({"metadata": {"labels": {"a": "b"}}})),
        pod(),
        Nulls::Json,
    )
    .expect("merged");
    let Some(Tree::Text(kept)) = merged.pointer("/metadata/managedFields") else {
        panic!("managedFields stays text");
    };
    assert!(!kept.is_built());
}
