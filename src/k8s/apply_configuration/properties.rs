//! Properties of the merge on Pods made of granular parts (labels, annotations,
//! finalizers, containers with env, ports and resource limits), so that every patch
//! passes the atomic check: a patch that is part of the object changes nothing and
//! shares it whole; a merge keeps every key and item the object had, shares what the
//! patch leaves alone, gives an object that validates, and does nothing more when
//! repeated.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::k8s::schema;

fn pod_type() -> TypeRef<'static> {
    schema::builtin()
        .expect("schema")
        .kind("", "v1", "Pod")
        .expect("Pod")
}

fn short() -> impl Strategy<Value = String> {
    "[a-d]{1,2}"
}

/// Items with distinct keys, in any order.
fn unique<T: Clone + std::fmt::Debug + 'static>(
    items: impl Strategy<Value = std::collections::BTreeMap<String, T>>,
    build: fn(String, T) -> Value,
) -> impl Strategy<Value = Value> {
    items
        .prop_map(move |items| {
            items
                .into_iter()
                .map(|(k, v)| build(k, v))
                .collect::<Vec<_>>()
        })
        .prop_flat_map(|items| Just(items).prop_shuffle())
        .prop_map(Value::Array)
}

fn string_map() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(short(), "[a-z]{0,2}", 0..4).prop_map(|map| json!(map))
}

fn container() -> impl Strategy<Value = Value> {
    let env = unique(
        prop::collection::btree_map(short(), prop::option::of("[a-z]{0,2}"), 0..4),
        |name, value| match value {
            Some(value) => json!({"name": name, "value": value}),
            None => json!({"name": name}),
        },
    );
    let ports = unique(
        prop::collection::btree_map(
            (1..6u16).prop_map(|port| port.to_string()),
            (
                prop::option::of(prop_oneof![Just("TCP"), Just("UDP")]),
                prop::option::of(short()),
            ),
            0..3,
        ),
        |port, (protocol, name)| {
            let mut item = json!({"containerPort": port.parse::<u16>().unwrap_or(1)});
            if let Some(protocol) = protocol {
                item["protocol"] = json!(protocol);
            }
            if let Some(name) = name {
                item["name"] = json!(name);
            }
            item
        },
    );
    (
        prop::option::of("[a-z]{1,3}"),
        prop::option::of(env),
        prop::option::of(ports),
        prop::option::of(prop::collection::btree_map(
            prop_oneof![Just("cpu".to_string()), Just("memory".to_string())],
            "[1-9]{1,2}",
            0..3,
        )),
    )
        .prop_map(|(image, env, ports, limits)| {
            let mut container = json!({});
            if let Some(image) = image {
                container["image"] = json!(image);
            }
            if let Some(env) = env {
                container["env"] = env;
            }
            if let Some(ports) = ports {
                container["ports"] = ports;
            }
            if let Some(limits) = limits {
                container["resources"] = json!({"limits": limits});
            }
            container
        })
}

/// A Pod whose every part merges granularly.
fn pod() -> impl Strategy<Value = Value> {
    let containers = unique(
        prop::collection::btree_map(short(), container(), 0..3),
        |name, mut c| {
            c["name"] = json!(name);
            c
        },
    );
    let finalizers = prop::collection::btree_set(short(), 0..3)
        .prop_flat_map(|set| Just(set.into_iter().collect::<Vec<_>>()).prop_shuffle());
    (
        prop::option::of(short()),
        prop::option::of(string_map()),
        prop::option::of(string_map()),
        prop::option::of(finalizers),
        prop::option::of(containers),
        prop::option::of(short()),
        prop::option::of(0..3i64),
    )
        .prop_map(
            |(name, labels, annotations, finalizers, containers, hostname, priority)| {
                let fields = |entries: Vec<(&str, Option<Value>)>| -> Value {
                    Value::Object(
                        entries
                            .into_iter()
                            .filter_map(|(key, value)| Some((key.to_string(), value?)))
                            .collect(),
                    )
                };
                let metadata = fields(vec![
                    ("name", name.map(Value::from)),
                    ("labels", labels),
                    ("annotations", annotations),
                    ("finalizers", finalizers.map(|f| json!(f))),
                ]);
                let spec = fields(vec![
                    ("containers", containers),
                    ("hostname", hostname.map(Value::from)),
                    ("priority", priority.map(Value::from)),
                ]);
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
            },
        )
}

/// A part of `value`: each map key kept or dropped by the next bit of `bits` (an item's
/// key fields always kept, so that it stays the same item), each list item likewise.
fn part(value: &Value, bits: &mut impl Iterator<Item = bool>, in_list: bool) -> Value {
    match value {
        Value::Object(map) => {
            let mut kept = serde_json::Map::new();
            for (key, item) in map {
                let always = (in_list
                    && matches!(key.as_str(), "name" | "containerPort" | "protocol"))
                    || matches!(key.as_str(), "apiVersion" | "kind");
                if always || bits.next().unwrap_or(true) {
                    kept.insert(key.clone(), part(item, bits, false));
                }
            }
            Value::Object(kept)
        }
        Value::Array(items) => {
            let mut kept = Vec::new();
            for item in items {
                if bits.next().unwrap_or(true) {
                    kept.push(part(item, bits, true));
                }
            }
            Value::Array(kept)
        }
        scalar => scalar.clone(),
    }
}

/// The identity of a list item: its key fields, or the value of a set item.
fn identity(item: &Tree<'_>) -> String {
    match item.as_map() {
        Some(map) => match map.get("containerPort") {
            Some(port) => format!(
                "{}/{}",
                port.to_value(),
                map.get("protocol").map_or(json!("TCP"), Tree::to_value)
            ),
            None => map
                .get("name")
                .map(Tree::to_value)
                .unwrap_or_default()
                .to_string(),
        },
        None => item.to_value().to_string(),
    }
}

/// Checks that `merged` keeps every key and item of `live`, and that what `patch` does
/// not reach is `live`'s own node.
fn keeps(merged: &Tree<'_>, live: &Tree<'_>, patch: Option<&Tree<'_>>, path: &str) {
    let Some(patch) = patch else {
        assert!(
            merged.same(live)
                || (merged == live && live.as_map().is_none() && live.as_list().is_none()),
            "{path}: untouched, yet not shared"
        );
        return;
    };
    if let (Some(merged), Some(live)) = (merged.as_map(), live.as_map()) {
        for (key, value) in live.iter() {
            let result = merged
                .get(key)
                .unwrap_or_else(|| panic!("{path}.{key} lost"));
            keeps(result, value, patch.get(key), &format!("{path}.{key}"));
        }
        return;
    }
    if let (Some(merged), Some(live)) = (merged.as_list(), live.as_list()) {
        for item in live {
            let id = identity(item);
            let found = merged.iter().find(|m| identity(m) == id);
            let found = found.unwrap_or_else(|| panic!("{path}[{id}] lost"));
            let in_patch = patch
                .as_list()
                .and_then(|p| p.iter().find(|p| identity(p) == id));
            if item.as_map().is_some() {
                keeps(found, item, in_patch, &format!("{path}[{id}]"));
            }
        }
    }
}

proptest! {
    #[test]
    fn a_part_of_the_object_changes_nothing(live in pod(), bits in prop::collection::vec(any::<bool>(), 64)) {
        let patch = Tree::from(part(&live, &mut bits.into_iter(), false));
        let live = Tree::from(&live);
        let merged = apply(&live, Live::Unchecked, &patch, pod_type(), Nulls::Json).expect("merged");
        prop_assert!(merged.same(&live), "{:?}", merged.to_value());
    }

    #[test]
    fn a_merge_keeps_what_the_object_had(live in pod(), patch in pod()) {
        let (live, patch) = (Tree::from(&live), Tree::from(&patch));
        let merged = apply(&live, Live::Unchecked, &patch, pod_type(), Nulls::Json).expect("merged");
        keeps(&merged, &live, Some(&patch), "");
        let errors = validate::validate(&merged, pod_type(), Duplicates::Refused, Nulls::Json);
        prop_assert!(errors.is_empty(), "{errors:?}");
        let again = apply(&merged, Live::Unchecked, &patch, pod_type(), Nulls::Json).expect("merged again");
        prop_assert_eq!(again.to_value(), merged.to_value());
    }
}
