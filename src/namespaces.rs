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

/// The metadata of a Namespace that policies can see.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Namespace {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
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
}

/// Where namespace data comes from.
pub trait NamespaceSource: Send + Sync {
    /// The data of the namespace called `name`.
    fn namespace_data(&self, name: &str) -> NamespaceData;
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
    use super::*;

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
