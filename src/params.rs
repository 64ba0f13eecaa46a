//! The parameter objects of MutatingAdmissionPolicy bindings (`paramKind`, `paramRef`):
//! where a review finds them. The caller gives the evaluation a [`ParamSource`] that
//! answers from memory (the objects given offline, or the server's watches); looking a
//! parameter up does no I/O.

use std::sync::Arc;

use crate::k8s::admission_request::GroupVersionKind as Gvk;
use crate::k8s::labels::Requirement;
use crate::tree::Tree;

/// A parameter object.
pub type Param = Arc<Tree<'static>>;

/// Whether a kind's objects live in namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamScope {
    Namespaced,
    Cluster,
}

/// Where parameter objects come from.
pub trait ParamSource: Send + Sync + std::fmt::Debug {
    /// The scope of `kind`, `None` when the source does not know the kind.
    fn scope(&self, kind: &Gvk) -> Option<ParamScope>;
    /// The object of `kind` named `name` in `namespace` ("" for a cluster-scoped kind).
    fn get(&self, kind: &Gvk, namespace: &str, name: &str) -> Result<Option<Param>, String>;
    /// The objects of `kind` in `namespace` whose labels meet `selector`, in the order
    /// the source keeps them (namespace, then name).
    fn list(
        &self,
        kind: &Gvk,
        namespace: &str,
        selector: &[Requirement],
    ) -> Result<Vec<Param>, String>;
}

/// A source that has no objects and knows no kind: what a review sees where no
/// parameters were given.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoParams;

impl ParamSource for NoParams {
    fn scope(&self, _: &Gvk) -> Option<ParamScope> {
        None
    }

    fn get(&self, _: &Gvk, _: &str, _: &str) -> Result<Option<Param>, String> {
        Ok(None)
    }

    fn list(&self, _: &Gvk, _: &str, _: &[Requirement]) -> Result<Vec<Param>, String> {
        Ok(Vec::new())
    }
}

/// Why parameter objects cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ParamsError {
    #[error(transparent)]
    Documents(#[from] crate::k8s::objects::ObjectsError),
    #[error("object {index}: {reason}")]
    Object { index: usize, reason: String },
}

/// Reads parameter objects from YAML or JSON text (several documents, `kind: List`
/// items): any kind, each with an `apiVersion`, a `kind` and a `metadata.name`, and no
/// object given twice.
pub fn read_params(text: &str) -> Result<ParamObjects, ParamsError> {
    let objects = crate::k8s::objects::read_objects(text)?;
    let mut seen = std::collections::HashSet::with_capacity(objects.len());
    let mut trees = Vec::with_capacity(objects.len());
    for (index, object) in objects.iter().enumerate() {
        let index = index + 1;
        let object = Tree::from(object);
        let field = |path: &str| object.pointer(path).and_then(Tree::as_str).unwrap_or("");
        let identity = (
            field("/apiVersion").to_string(),
            field("/kind").to_string(),
            field("/metadata/namespace").to_string(),
            field("/metadata/name").to_string(),
        );
        for (value, name) in [
            (&identity.0, "apiVersion"),
            (&identity.1, "kind"),
            (&identity.3, "metadata.name"),
        ] {
            if value.is_empty() {
                return Err(ParamsError::Object {
                    index,
                    reason: format!(
                        "{name} is missing: a parameter object needs apiVersion, kind and metadata.name"
                    ),
                });
            }
        }
        // The apiserver serves every version of a kind from one store: one object.
        let group = identity.0.rsplit_once('/').map_or("", |(group, _)| group);
        let key = (
            group.to_string(),
            identity.1.clone(),
            identity.2.clone(),
            identity.3.clone(),
        );
        if !seen.insert(key) {
            let (_, kind, namespace, name) = identity;
            let at = if namespace.is_empty() {
                name
            } else {
                format!("{namespace}/{name}")
            };
            return Err(ParamsError::Object {
                index,
                reason: format!("{kind} {at} is given twice"),
            });
        }
        trees.push(object);
    }
    Ok(ParamObjects::new(trees))
}

/// Parameter objects held in memory: the objects of `--params FILE` or a suite's
/// `params`, in namespace and name order.
#[derive(Debug, Default)]
pub struct ParamObjects {
    objects: Vec<Param>,
}

impl ParamObjects {
    pub fn new(objects: impl IntoIterator<Item = Tree<'static>>) -> ParamObjects {
        let mut objects: Vec<Param> = objects.into_iter().map(Arc::new).collect();
        fn key(object: &Param) -> (&str, &str) {
            (
                metadata_str(object, "namespace"),
                metadata_str(object, "name"),
            )
        }
        objects.sort_by(|a, b| key(a).cmp(&key(b)));
        ParamObjects { objects }
    }

    /// How many objects there are.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The objects of `kind` (its group and kind: the apiserver serves every version of a
    /// resource from one store).
    fn of_kind<'s>(&'s self, kind: &'s Gvk) -> impl Iterator<Item = &'s Param> + 's {
        self.objects.iter().filter(move |object| {
            let api_version = object
                .get("apiVersion")
                .and_then(Tree::as_str)
                .unwrap_or("");
            let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
            group == kind.group && object.get("kind").and_then(Tree::as_str) == Some(&kind.kind)
        })
    }
}

fn metadata_str<'a>(object: &'a Tree<'_>, key: &str) -> &'a str {
    object
        .get("metadata")
        .and_then(|metadata| metadata.get(key))
        .and_then(Tree::as_str)
        .unwrap_or("")
}

impl ParamSource for ParamObjects {
    /// A built-in kind's scope is known; another kind's is that of its objects
    /// (namespaced when they have namespaces), and namespaced when none is given.
    fn scope(&self, kind: &Gvk) -> Option<ParamScope> {
        if crate::k8s::objects::is_cluster_scoped(&kind.kind) {
            return Some(ParamScope::Cluster);
        }
        let mut objects = self.of_kind(kind).peekable();
        if objects.peek().is_none() {
            return Some(ParamScope::Namespaced);
        }
        Some(
            if objects.any(|object| !metadata_str(object, "namespace").is_empty()) {
                ParamScope::Namespaced
            } else {
                ParamScope::Cluster
            },
        )
    }

    fn get(&self, kind: &Gvk, namespace: &str, name: &str) -> Result<Option<Param>, String> {
        Ok(self
            .of_kind(kind)
            .find(|object| {
                metadata_str(object, "namespace") == namespace
                    && metadata_str(object, "name") == name
            })
            .cloned())
    }

    fn list(
        &self,
        kind: &Gvk,
        namespace: &str,
        selector: &[Requirement],
    ) -> Result<Vec<Param>, String> {
        Ok(self
            .of_kind(kind)
            .filter(|object| metadata_str(object, "namespace") == namespace)
            .filter(|object| {
                let labels = object
                    .get("metadata")
                    .and_then(|metadata| metadata.get("labels"));
                selector.iter().all(|requirement| {
                    let value = labels
                        .and_then(|labels| labels.get(requirement.key()))
                        .and_then(Tree::as_str);
                    requirement.holds(value)
                })
            })
            .cloned()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(group: &str, kind: &str) -> Gvk {
        Gvk {
            group: group.to_string(),
            version: "v1".to_string(),
            kind: kind.to_string(),
        }
    }

    #[test]
    fn read_params_finds_objects_by_group_kind_namespace_and_name() {
        let params = read_params(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: team-a, labels: {tier: web}}\ndata: {x: '1'}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: team-a}\n---\n\
             apiVersion: example.com/v2\nkind: Setting\nmetadata: {name: global}\n",
        )
        .expect("valid params");
        let config_map = kind("", "ConfigMap");
        let found = params.get(&config_map, "team-a", "b").expect("get");
        assert_eq!(
            found.and_then(|o| o
                .pointer("/data/x")
                .and_then(Tree::as_str)
                .map(str::to_string)),
            Some("1".to_string())
        );
        assert!(
            params
                .get(&config_map, "team-b", "b")
                .expect("get")
                .is_none()
        );
        let names: Vec<String> = params
            .list(&config_map, "team-a", &[])
            .expect("list")
            .iter()
            .map(|o| metadata_str(o, "name").to_string())
            .collect();
        assert_eq!(names, ["a", "b"]);
        let setting = kind("example.com", "Setting");
        assert_eq!(params.scope(&setting), Some(ParamScope::Cluster));
        assert_eq!(params.scope(&config_map), Some(ParamScope::Namespaced));
        assert!(params.get(&setting, "", "global").expect("get").is_some());
    }

    #[test]
    fn read_params_refuses_nameless_and_repeated_objects() {
        let nameless = read_params("apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: a}\n")
            .expect_err("no name");
        assert_eq!(
            nameless.to_string(),
            "object 1: metadata.name is missing: a parameter object needs apiVersion, kind and metadata.name"
        );
        let twice = read_params(
            "apiVersion: example.com/v1\nkind: S\nmetadata: {name: a}\n---\napiVersion: example.com/v2\nkind: S\nmetadata: {name: a}\n",
        )
        .expect_err("twice");
        assert_eq!(twice.to_string(), "object 2: S a is given twice");
    }
}
