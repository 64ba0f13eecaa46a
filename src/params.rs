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
