//! What a review knows of its namespace.
//!
//! An AdmissionReview carries only the namespace's name; policies that match on the
//! namespace's labels (`namespaceSelector`) or read `namespaceObject` need its metadata
//! from elsewhere: the server's read-only namespace cache, or the Namespace objects given
//! to the offline commands (`--namespaces FILE`, a PolicyTest's `namespaces`). The caller
//! resolves the request's namespace through a [`NamespaceSource`] before evaluation, so
//! the engine stays a plain function of (request, namespace data, policy set).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::tree::{Map, Tree};

/// The metadata of a Namespace that policies can see.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Namespace {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

impl Namespace {
    /// The `namespaceObject` CEL variable: the Namespace as a Kubernetes object, with
    /// the metadata graft knows (name, labels, annotations).
    pub fn to_object(&self) -> Tree<'static> {
        let mut metadata = Map::with_capacity(3);
        metadata.insert("name", Tree::from(self.name.as_str()));
        metadata.insert("labels", strings(&self.labels));
        metadata.insert("annotations", strings(&self.annotations));
        let mut object = Map::with_capacity(3);
        object.insert("apiVersion", Tree::from("v1"));
        object.insert("kind", Tree::from("Namespace"));
        object.insert("metadata", Tree::from(metadata));
        Tree::from(object)
    }
}

/// Labels or annotations as a map of strings, in their keys' order.
fn strings(map: &BTreeMap<String, String>) -> Tree<'static> {
    let mut strings = Map::with_capacity(map.len());
    for (key, value) in map {
        strings.insert(key.clone(), Tree::from(value.as_str()));
    }
    Tree::from(strings)
}

/// The request namespace's data, as the caller resolved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceData {
    /// No namespace data is available here; `hint` says how to provide it (for the
    /// failure message of a policy that needs it).
    Unavailable { hint: &'static str },
    /// The request's namespace.
    Known(Arc<Namespace>),
    /// The source was asked and does not know the namespace; `source` names it.
    NotFound { name: String, source: &'static str },
    /// The caller did not ask: the request is cluster-scoped, or no candidate policy
    /// needs namespace data, so nothing will read it.
    NotLookedUp,
}

impl NamespaceData {
    /// The namespace, or why a policy that needs it cannot have it.
    pub fn known(&self, name: &str) -> Result<&Namespace, String> {
        match self {
            NamespaceData::Known(namespace) => Ok(namespace),
            NamespaceData::NotFound { name, source } => {
                Err(format!("namespace {name:?} is not in {source}"))
            }
            NamespaceData::Unavailable { hint } => {
                Err(format!("no data for namespace {name:?}: {hint}"))
            }
            NamespaceData::NotLookedUp => Err(format!(
                "namespace {name:?} was not looked up (a policy set and its candidates disagree)"
            )),
        }
    }
}

/// Where namespace data comes from.
pub trait NamespaceSource: Send + Sync + std::fmt::Debug {
    /// The data of the namespace called `name`.
    fn namespace_data(&self, name: &str) -> NamespaceData;
}

/// Why a list of Namespace objects cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum NamespacesError {
    #[error(transparent)]
    Documents(#[from] crate::k8s::objects::ObjectsError),
    #[error("object {index}{name}: {reason}")]
    Object {
        index: usize,
        /// ` (namespace NAME)` when the name is known.
        name: String,
        reason: String,
    },
}

/// Reads Namespace objects from YAML or JSON text: several documents, and `kind: List`
/// items. Every object must be a `v1` Namespace with a name; names are unique.
pub fn read_namespaces(text: &str) -> Result<Vec<Namespace>, NamespacesError> {
    let objects = crate::k8s::objects::read_objects(text)?;
    let mut namespaces: Vec<Namespace> = Vec::with_capacity(objects.len());
    for (index, object) in objects.iter().enumerate() {
        let index = index + 1;
        let object = Tree::from(object);
        let name = object
            .pointer("/metadata/name")
            .and_then(Tree::as_str)
            .map(|name| format!(" (namespace {name})"))
            .unwrap_or_default();
        let namespace =
            Namespace::from_object(&object).map_err(|reason| NamespacesError::Object {
                index,
                name: name.clone(),
                reason,
            })?;
        if namespaces.iter().any(|known| known.name == namespace.name) {
            return Err(NamespacesError::Object {
                index,
                name,
                reason: "the namespace is given twice".to_string(),
            });
        }
        namespaces.push(namespace);
    }
    Ok(namespaces)
}

impl Namespace {
    /// The Namespace a Kubernetes object describes: `apiVersion: v1`, `kind: Namespace`,
    /// a name, and labels and annotations whose values are strings.
    pub fn from_object(object: &Tree<'_>) -> Result<Namespace, String> {
        let text = |key: &str| object.get(key).and_then(Tree::as_str).unwrap_or_default();
        if text("kind") != "Namespace" {
            return Err(format!("kind must be Namespace, got {:?}", text("kind")));
        }
        if text("apiVersion") != "v1" {
            return Err(format!(
                "apiVersion must be v1, got {:?}",
                text("apiVersion")
            ));
        }
        let metadata = object.get("metadata");
        let name = metadata
            .and_then(|m| m.get("name"))
            .and_then(Tree::as_str)
            .filter(|name| !name.is_empty())
            .ok_or("metadata.name must be a non-empty string")?;
        let map = |key: &str| -> Result<BTreeMap<String, String>, String> {
            let Some(value) = metadata.and_then(|m| m.get(key)) else {
                return Ok(BTreeMap::new());
            };
            if value.is_null() {
                return Ok(BTreeMap::new());
            }
            let map = value
                .as_map()
                .ok_or_else(|| format!("metadata.{key}: expected a map, got {value}"))?;
            map.iter()
                .map(|(k, v)| match v.as_str() {
                    Some(v) => Ok((k.to_string(), v.to_string())),
                    None => Err(format!(
                        "metadata.{key}.{k}: expected a string, got {v} (quote it)"
                    )),
                })
                .collect()
        };
        Ok(Namespace {
            name: name.to_string(),
            labels: map("labels")?,
            annotations: map("annotations")?,
        })
    }
}

/// No namespace data: what offline commands use without `--namespaces`.
#[derive(Debug, Clone, Copy)]
pub struct NoNamespaces {
    pub hint: &'static str,
}

impl NamespaceSource for NoNamespaces {
    fn namespace_data(&self, _name: &str) -> NamespaceData {
        NamespaceData::Unavailable { hint: self.hint }
    }
}

/// A fixed set of namespaces (offline commands, tests).
#[derive(Debug, Clone, Default)]
pub struct NamespaceMap {
    namespaces: HashMap<String, Arc<Namespace>>,
    source: &'static str,
}

impl NamespaceMap {
    /// `source` names where the namespaces came from, for "not found" messages.
    pub fn new(namespaces: impl IntoIterator<Item = Namespace>, source: &'static str) -> Self {
        NamespaceMap {
            namespaces: namespaces
                .into_iter()
                .map(|namespace| (namespace.name.clone(), Arc::new(namespace)))
                .collect(),
            source,
        }
    }
}

impl NamespaceSource for NamespaceMap {
    fn namespace_data(&self, name: &str) -> NamespaceData {
        match self.namespaces.get(name) {
            Some(namespace) => NamespaceData::Known(Arc::clone(namespace)),
            None => NamespaceData::NotFound {
                name: name.to_string(),
                source: self.source,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn namespace_files_are_read_from_documents_and_lists() {
        let text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: a, labels: {team: x}}\n---\n{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"b\", \"annotations\": {\"o\": \"p\"}}}\n";
        let namespaces = read_namespaces(text).unwrap();
        assert_eq!(namespaces.len(), 2);
        assert_eq!(namespaces[0].labels["team"], "x");
        assert_eq!(namespaces[1].annotations["o"], "p");
        assert!(read_namespaces("").unwrap().is_empty());
    }

    #[test]
    fn malformed_namespace_files_say_which_object_and_why() {
        let error = |text: &str| read_namespaces(text).unwrap_err().to_string();
        assert_eq!(
            error("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n"),
            "object 1 (namespace a): kind must be Namespace, got \"Pod\""
        );
        assert_eq!(
            error("apiVersion: v2\nkind: Namespace\nmetadata: {name: a}\n"),
            "object 1 (namespace a): apiVersion must be v1, got \"v2\""
        );
        assert_eq!(
            error("apiVersion: v1\nkind: Namespace\nmetadata: {}\n"),
            "object 1: metadata.name must be a non-empty string"
        );
        assert_eq!(
            error("apiVersion: v1\nkind: Namespace\nmetadata: {name: a, labels: {n: 3}}\n"),
            "object 1 (namespace a): metadata.labels.n: expected a string, got 3 (quote it)"
        );
        assert_eq!(
            error("apiVersion: v1\nkind: Namespace\nmetadata: {name: a, annotations: [x]}\n"),
            "object 1 (namespace a): metadata.annotations: expected a map, got [\"x\"]"
        );
        let twice = "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n";
        assert_eq!(
            error(twice),
            "object 2 (namespace a): the namespace is given twice"
        );
        assert!(
            error("a: [\n").starts_with("document 1: "),
            "{}",
            error("a: [\n")
        );
        assert_eq!(
            error("- a\n"),
            "document 1: not an object (a Kubernetes object is a map with apiVersion and kind)"
        );
    }

    #[test]
    fn the_namespace_object_has_the_metadata_policies_see() {
        let namespace = Namespace {
            name: "apps".into(),
            labels: BTreeMap::from([("team".into(), "a".into())]),
            annotations: BTreeMap::new(),
        };
        assert_eq!(
            namespace.to_object(),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": "apps", "labels": {"team": "a"}, "annotations": {}}})
        );
        assert_eq!(
            Namespace::from_object(&namespace.to_object()),
            Ok(namespace)
        );
    }

    #[test]
    fn a_map_knows_its_namespaces_and_names_itself_otherwise() {
        let map = NamespaceMap::new(
            [Namespace {
                name: "apps".into(),
                labels: BTreeMap::from([("team".into(), "a".into())]),
                annotations: BTreeMap::new(),
            }],
            "--namespaces",
        );
        let NamespaceData::Known(apps) = map.namespace_data("apps") else {
            panic!("apps is known");
        };
        assert_eq!(apps.labels["team"], "a");
        assert_eq!(
            map.namespace_data("other"),
            NamespaceData::NotFound {
                name: "other".into(),
                source: "--namespaces"
            }
        );
    }
}
