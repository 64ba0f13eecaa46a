//! The Multus networks annotation, `k8s.v1.cni.cncf.io/networks`.
//!
//! Multus accepts two spellings: a JSON list of objects (`name`, `namespace`,
//! `interface`, `ips`, `mac`, `default-route`, ...) and the comma-separated
//! short form `[ns/]name[@ifname]`. [`merge`] adds networks to either and
//! writes the JSON form, leaving an existing value (JSON, short form or empty)
//! byte-for-byte unchanged when nothing is added, so that a policy applied twice,
//! or to a pod that already lists its networks, produces no patch.
//!
//! Errors name the entry by position and the JSON type found, never a value: the
//! annotation is the object's, and reasons are logged.

use std::borrow::Cow;
use std::sync::Arc;

use super::MAX_STRING_BYTES;
use crate::tree::{Map, Tree};

/// The annotation Multus reads the pod's extra networks from.
pub const NETWORKS_ANNOTATION: &str = "k8s.v1.cni.cncf.io/networks";

/// One network attachment: a JSON object with at least a string `name`, its strings
/// borrowed from the annotation it was read from (`'t`) where they are in it as they are.
pub type Network<'t> = Map<'t>;

/// Why an annotation value or a desired network is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MultusError {
    #[error("annotation {NETWORKS_ANNOTATION} is not valid: {reason}")]
    Annotation { reason: String },
    #[error("desired network #{index} is not valid: {reason}")]
    Desired { index: usize, reason: String },
    #[error("annotation {NETWORKS_ANNOTATION} would exceed {MAX_STRING_BYTES} bytes")]
    TooLarge,
}

/// How an annotation value was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// Absent or blank.
    Empty,
    Json,
    Short,
}

/// The networks of an annotation value, in their order.
#[derive(Debug, Clone, PartialEq)]
pub struct Networks<'t> {
    pub form: Form,
    pub entries: Vec<Network<'t>>,
}

/// Parses an annotation value. JSON entries keep their own keys and key order;
/// short-form entries become `{"name", "namespace", "interface"}` objects with
/// only the parts written.
pub fn parse(value: &str) -> Result<Networks<'_>, MultusError> {
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Ok(Networks {
            form: Form::Empty,
            entries: Vec::new(),
        });
    }
    if trimmed.starts_with('[') {
        return parse_json(trimmed);
    }
    let entries = trimmed
        .split(',')
        .enumerate()
        .map(|(index, item)| parse_short(index, item.trim()))
        .collect::<Result<_, _>>()?;
    Ok(Networks {
        form: Form::Short,
        entries,
    })
}

/// Parses and fills in each entry's namespace (`pod_namespace` when absent or
/// empty), for policies that inspect the networks.
pub fn parse_resolved<'t>(
    value: &'t str,
    pod_namespace: &str,
) -> Result<Vec<Network<'t>>, MultusError> {
    let mut entries = parse(value)?.entries;
    for entry in &mut entries {
        let namespace = namespace_of(entry, pod_namespace).to_string();
        entry.insert("namespace", Tree::from(namespace));
    }
    Ok(entries)
}

/// The annotation value with each `desired` network not already present
/// appended. Present means the same name in the same namespace, a missing
/// namespace meaning `pod_namespace`. Desired entries are written with keys
/// `name`, `namespace`, `interface`, then the rest sorted.
///
/// When nothing is added, `existing` is returned unchanged, whatever its form
/// (an empty value stays empty rather than becoming `[]`).
pub fn merge(
    existing: &str,
    desired: &[Tree<'_>],
    pod_namespace: &str,
) -> Result<String, MultusError> {
    let Networks { entries, .. } = parse(existing)?;
    let normalized = desired
        .iter()
        .enumerate()
        .map(|(index, network)| normalize_desired(index, network))
        .collect::<Result<Vec<Cow<'_, Network<'_>>>, MultusError>>()?;
    // Each entry's (name, namespace) is found once: the presence test compares strings.
    let mut new = vec![false; normalized.len()];
    let mut present: Vec<(&str, &str)> = entries
        .iter()
        .map(|entry| identity(entry, pod_namespace))
        .collect();
    for (network, new) in normalized.iter().zip(&mut new) {
        let key = identity(network, pod_namespace);
        if !present.contains(&key) {
            present.push(key);
            *new = true;
        }
    }
    // Rewriting a value that already lists every network would be a patch (and a
    // policy reported as applied) that changes nothing Multus reads.
    if !new.contains(&true) {
        return Ok(existing.to_string());
    }
    let added = normalized
        .iter()
        .zip(new)
        .filter_map(|(network, new)| new.then_some(network.as_ref()));
    let list: Vec<&Network<'_>> = entries.iter().chain(added).collect();
    let text = serde_json::to_string(&list).map_err(|e| MultusError::Annotation {
        reason: e.to_string(),
    })?;
    if text.len() > MAX_STRING_BYTES {
        return Err(MultusError::TooLarge);
    }
    Ok(text)
}

fn parse_json(text: &str) -> Result<Networks<'_>, MultusError> {
    let invalid = |reason: String| MultusError::Annotation { reason };
    let items = match Tree::parse(text) {
        Ok(Tree::List(items)) => items,
        // The caller sends only text that starts with `[`.
        Ok(_) => return Err(invalid("not a JSON list of networks".to_string())),
        Err(e) => return Err(invalid(format!("not a JSON list of networks: {e}"))),
    };
    // Just parsed, the list and its maps are their own: taken, not copied.
    let entries = Arc::unwrap_or_clone(items)
        .into_iter()
        .enumerate()
        .map(|(index, item)| match item {
            Tree::Map(entry) => {
                check_entry(&entry)
                    .map_err(|reason| invalid(format!("entry #{index}: {reason}")))?;
                Ok(Arc::unwrap_or_clone(entry))
            }
            other => Err(invalid(format!(
                "entry #{index} must be an object with a 'name', got {}",
                other.type_name()
            ))),
        })
        .collect::<Result<_, _>>()?;
    Ok(Networks {
        form: Form::Json,
        entries,
    })
}

/// One short-form item: `[namespace/]name[@interface]`.
fn parse_short(index: usize, item: &str) -> Result<Network<'_>, MultusError> {
    let invalid = |reason: &str| MultusError::Annotation {
        reason: format!("entry #{index} {reason} (expected [namespace/]name[@interface])"),
    };
    if item.is_empty() {
        return Err(invalid("is empty"));
    }
    if item
        .chars()
        .any(|c| c.is_whitespace() || c == '"' || c == '{' || c == '}')
    {
        return Err(invalid("contains a space or a JSON character"));
    }
    let (reference, interface) = match item.split_once('@') {
        Some((reference, interface)) => (reference, Some(interface)),
        None => (item, None),
    };
    let (namespace, name) = match reference.split_once('/') {
        Some((namespace, name)) => (Some(namespace), name),
        None => (None, reference),
    };
    let parts = [Some(name), namespace, interface];
    if parts
        .iter()
        .flatten()
        .any(|p| p.is_empty() || p.contains(['/', '@']))
    {
        return Err(invalid("has an empty or repeated part"));
    }
    let mut entry = Map::new();
    entry.insert("name", Tree::String(Cow::Borrowed(name)));
    if let Some(namespace) = namespace {
        entry.insert("namespace", Tree::String(Cow::Borrowed(namespace)));
    }
    if let Some(interface) = interface {
        entry.insert("interface", Tree::String(Cow::Borrowed(interface)));
    }
    Ok(entry)
}

/// A desired network as it will be written: keys `name`, `namespace`,
/// `interface` first, the rest sorted, so output never depends on how the
/// policy built the map.
fn normalize_desired<'a, 't>(
    index: usize,
    network: &'a Tree<'t>,
) -> Result<Cow<'a, Network<'t>>, MultusError> {
    let invalid = |reason: String| MultusError::Desired { index, reason };
    let Some(fields) = network.as_map() else {
        return Err(invalid(format!(
            "expected a map with a 'name', got {}",
            network.type_name()
        )));
    };
    check_entry(fields).map_err(invalid)?;
    // A map from CEL comes with its keys sorted, which for `name` and `namespace` alone
    // is already the order entries are written in.
    if in_written_order(fields) {
        return Ok(Cow::Borrowed(fields));
    }
    let mut entries: Vec<&(Cow<'t, str>, Tree<'t>)> = fields.entries().iter().collect();
    entries.sort_by(|(a, _), (b, _)| written_order(a, b));
    let mut sorted = Map::with_capacity(entries.len());
    for (key, value) in entries {
        sorted.insert(key.clone(), value.clone());
    }
    Ok(Cow::Owned(sorted))
}

/// The order of keys in a written entry: `name`, `namespace`, `interface`, then the rest
/// by name.
fn written_order(a: &str, b: &str) -> std::cmp::Ordering {
    let rank = |key: &str| match key {
        "name" => 0,
        "namespace" => 1,
        "interface" => 2,
        _ => 3,
    };
    rank(a).cmp(&rank(b)).then_with(|| a.cmp(b))
}

fn in_written_order(fields: &Network<'_>) -> bool {
    fields
        .keys()
        .zip(fields.keys().skip(1))
        .all(|(a, b)| written_order(a, b).is_lt())
}

/// An entry needs a non-empty string name, and a string namespace if any:
/// without them "already present" cannot be decided.
fn check_entry(entry: &Network<'_>) -> Result<(), String> {
    let (name, namespace) = name_and_namespace(entry);
    match name {
        Some(Tree::String(name)) if !name.is_empty() => {}
        Some(Tree::String(_)) => {
            return Err("'name' must be a non-empty string, got an empty string".to_string());
        }
        Some(other) => {
            return Err(format!(
                "'name' must be a non-empty string, got {}",
                other.type_name()
            ));
        }
        None => return Err("missing 'name'".to_string()),
    }
    match namespace {
        None | Some(Tree::String(_)) => Ok(()),
        Some(other) => Err(format!(
            "'namespace' must be a string, got {}",
            other.type_name()
        )),
    }
}

/// What makes two entries the same network: the name, and the namespace Multus
/// resolves.
fn identity<'a>(entry: &'a Network<'_>, pod_namespace: &'a str) -> (&'a str, &'a str) {
    let (name, namespace) = name_and_namespace(entry);
    (
        name.and_then(Tree::as_str).unwrap_or_default(),
        resolved_namespace(namespace, pod_namespace),
    )
}

/// Multus resolves a missing or empty namespace to the pod's own.
fn namespace_of<'a>(entry: &'a Network<'_>, pod_namespace: &'a str) -> &'a str {
    resolved_namespace(name_and_namespace(entry).1, pod_namespace)
}

fn resolved_namespace<'a>(namespace: Option<&'a Tree<'_>>, pod_namespace: &'a str) -> &'a str {
    match namespace.and_then(Tree::as_str) {
        Some(namespace) if !namespace.is_empty() => namespace,
        _ => pod_namespace,
    }
}

/// The entry's `name` and `namespace`, found in one pass over its keys: every entry is
/// asked for both, and has a few keys, which a scan compares faster than two lookups.
fn name_and_namespace<'a, 't>(
    entry: &'a Network<'t>,
) -> (Option<&'a Tree<'t>>, Option<&'a Tree<'t>>) {
    let (mut name, mut namespace) = (None, None);
    for (key, value) in entry.iter() {
        match key {
            "name" => name = Some(value),
            "namespace" => namespace = Some(value),
            _ => {}
        }
    }
    (name, namespace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn merged(existing: &str, desired: Value, ns: &str) -> String {
        let desired = Tree::from(desired);
        let desired = desired.as_list().map(Vec::as_slice).unwrap_or_default();
        merge(existing, desired, ns).unwrap_or_else(|e| panic!("{existing}: {e}"))
    }

    #[test]
    fn adds_to_empty() {
        assert_eq!(
            merged("", json!([{"namespace": "net", "name": "roce-a"}]), "ns"),
            r#"[{"name":"roce-a","namespace":"net"}]"#
        );
    }

    #[test]
    fn nothing_to_add_leaves_an_empty_value_as_it_is() {
        assert_eq!(merged("", json!([]), "ns"), "");
        assert_eq!(merged("  ", json!([]), "ns"), "  ");
    }

    #[test]
    fn desired_keys_are_ordered_name_namespace_interface_then_sorted() {
        let desired =
            json!([{"z": 1, "interface": "net1", "a": true, "namespace": "n", "name": "x"}]);
        assert_eq!(
            merged("", desired, "ns"),
            r#"[{"name":"x","namespace":"n","interface":"net1","a":true,"z":1}]"#
        );
    }

    #[test]
    fn desired_entries_already_in_order_are_written_as_they_are() {
        let desired = json!([
            {"name": "x", "namespace": "n", "interface": "i", "a": 1, "b": 2},
            {"name": "y", "interface": "i", "namespace": "n"},
            {"name": "z", "b": 1, "a": 2},
        ]);
        assert_eq!(
            merged("", desired, "ns"),
            r#"[{"name":"x","namespace":"n","interface":"i","a":1,"b":2},{"name":"y","namespace":"n","interface":"i"},{"name":"z","a":2,"b":1}]"#
        );
    }

    #[test]
    fn keeps_existing_json_entries_and_their_key_order() {
        let existing = r#"[{"namespace":"net","name":"a","ips":["10.0.0.1/24"],"default-route":["10.0.0.254"]}]"#;
        assert_eq!(
            merged(existing, json!([{"name": "b", "namespace": "net"}]), "ns"),
            r#"[{"namespace":"net","name":"a","ips":["10.0.0.1/24"],"default-route":["10.0.0.254"]},{"name":"b","namespace":"net"}]"#
        );
    }

    #[test]
    fn json_value_is_unchanged_byte_for_byte_when_nothing_is_added() {
        let existing = r#"[ {"name": "a", "namespace": "net"} ]"#;
        assert_eq!(
            merged(existing, json!([{"name": "a", "namespace": "net"}]), "ns"),
            existing
        );
    }

    #[test]
    fn merging_twice_changes_nothing() {
        let desired = json!([{"name": "a", "namespace": "net"}, {"name": "b"}]);
        let once = merged("x", desired.clone(), "ns");
        assert_eq!(merged(&once, desired, "ns"), once);
    }

    #[test]
    fn missing_namespace_means_the_pod_namespace() {
        // Present: `a` without a namespace is ns/a.
        assert_eq!(
            merged(
                r#"[{"name":"a"}]"#,
                json!([{"name": "a", "namespace": "ns"}]),
                "ns"
            ),
            r#"[{"name":"a"}]"#
        );
        // Absent: same name in another namespace.
        assert_eq!(
            merged(
                r#"[{"name":"a"}]"#,
                json!([{"name": "a", "namespace": "other"}]),
                "ns"
            ),
            r#"[{"name":"a"},{"name":"a","namespace":"other"}]"#
        );
    }

    #[test]
    fn duplicate_desired_entries_are_added_once() {
        assert_eq!(
            merged(
                "",
                json!([{"name": "a"}, {"name": "a", "namespace": "ns"}]),
                "ns"
            ),
            r#"[{"name":"a"}]"#
        );
    }

    #[test]
    fn short_form_becomes_json() {
        assert_eq!(
            merged(" net/a@eth1 , b,other/c ", json!([{"name": "d"}]), "ns"),
            r#"[{"name":"a","namespace":"net","interface":"eth1"},{"name":"b"},{"name":"c","namespace":"other"},{"name":"d"}]"#
        );
        assert_eq!(
            merged("net/a", json!([{"name": "b", "namespace": "net"}]), "ns"),
            r#"[{"name":"a","namespace":"net"},{"name":"b","namespace":"net"}]"#
        );
    }

    #[test]
    fn short_form_is_unchanged_byte_for_byte_when_nothing_is_added() {
        for (existing, desired) in [
            ("net/a", json!([{"name": "a", "namespace": "net"}])),
            (
                " net/a@eth1 , b,other/c ",
                json!([{"name": "a", "namespace": "net"}, {"name": "b", "namespace": "ns"}, {"name": "c", "namespace": "other"}]),
            ),
            ("a@net1", json!([{"name": "a"}])),
            ("net/a", json!([])),
        ] {
            assert_eq!(merged(existing, desired, "ns"), existing, "{existing}");
        }
    }

    #[test]
    fn parse_resolved_fills_in_namespaces() {
        let entries = parse_resolved("a@net1,x/b", "ns").unwrap();
        assert_eq!(
            Tree::from(entries.into_iter().map(Tree::from).collect::<Vec<_>>()),
            json!([{"name": "a", "interface": "net1", "namespace": "ns"}, {"name": "b", "namespace": "x"}])
        );
        assert!(parse_resolved("", "ns").unwrap().is_empty());
    }

    #[test]
    fn malformed_values_are_errors_naming_the_annotation() {
        for existing in [
            "[",
            "[1]",
            r#"[{"namespace":"n"}]"#,
            r#"[{"name":3}]"#,
            r#"{"name":"a"}"#,
            "a,,b",
            "a/b/c",
            "@eth0",
            "ns/",
            "a@",
            "a b",
            r#"[{"name":"a","namespace":1}]"#,
        ] {
            let err = merge(existing, &[], "ns").expect_err(existing).to_string();
            assert!(err.contains(NETWORKS_ANNOTATION), "{existing}: {err}");
        }
    }

    #[test]
    fn invalid_desired_entries_are_errors() {
        for desired in [
            json!(["a"]),
            json!([{"namespace": "n"}]),
            json!([{"name": ""}]),
        ] {
            let desired = Tree::from(desired);
            let desired = desired.as_list().map(Vec::as_slice).unwrap_or_default();
            let err = merge("", desired, "ns").unwrap_err();
            assert!(
                matches!(err, MultusError::Desired { index: 0, .. }),
                "{err}"
            );
        }
    }

    #[test]
    fn errors_name_the_entry_and_type_never_the_value() {
        let annotation =
            |reason: &str| format!("annotation {NETWORKS_ANNOTATION} is not valid: {reason}");
        let short = |index: usize, reason: &str| {
            annotation(&format!(
                "entry #{index} {reason} (expected [namespace/]name[@interface])"
            ))
        };
        for (existing, expected) in [
            (
                r#"["secret"]"#,
                annotation("entry #0 must be an object with a 'name', got a string"),
            ),
            (
                r#"[{"name":"a"},7]"#,
                annotation("entry #1 must be an object with a 'name', got a number"),
            ),
            (
                r#"[{"name":"secret","namespace":["secret"]}]"#,
                annotation("entry #0: 'namespace' must be a string, got a list"),
            ),
            (
                r#"[{"name":{"secret":1}}]"#,
                annotation("entry #0: 'name' must be a non-empty string, got an object"),
            ),
            (
                r#"[{"name":""}]"#,
                annotation("entry #0: 'name' must be a non-empty string, got an empty string"),
            ),
            (
                r#"[{"namespace":"secret"}]"#,
                annotation("entry #0: missing 'name'"),
            ),
            (
                "a,secret secret",
                short(1, "contains a space or a JSON character"),
            ),
            ("a,,secret", short(1, "is empty")),
            ("secret/a/b", short(0, "has an empty or repeated part")),
        ] {
            let message = merge(existing, &[], "ns").expect_err(existing).to_string();
            assert_eq!(message, expected, "{existing}");
            assert!(!message.contains("secret"), "{message}");
        }
        for (desired, expected) in [
            (
                vec![json!("secret")],
                "desired network #0 is not valid: expected a map with a 'name', got a string",
            ),
            (
                vec![
                    json!({"name": "a"}),
                    json!({"name": "secret", "namespace": 1}),
                ],
                "desired network #1 is not valid: 'namespace' must be a string, got a number",
            ),
        ] {
            let desired: Vec<Tree<'_>> = desired.into_iter().map(Tree::from).collect();
            let message = merge("", &desired, "ns").unwrap_err().to_string();
            assert_eq!(message, expected);
        }
    }
}
