//! A binding's parameters (`paramKind` and `paramRef`), collected as the apiserver's
//! policy dispatcher collects them (`generic/policy_dispatcher.go` `CollectParams`): the
//! objects come from a [`ParamSource`] the caller holds (the objects given offline, or
//! the server's watches), read in memory: collecting does no I/O.

use std::sync::Arc;

use crate::policy::admission_policy::compiled::{Gvk, NotFoundAction, ParamRef, ParamTarget};
use crate::policy::compiled::Requirement;
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
                crate::engine::matching::requirements_hold(selector, |key| {
                    labels
                        .and_then(|labels| labels.get(key))
                        .and_then(Tree::as_str)
                })
            })
            .cloned()
            .collect())
    }
}

/// What a binding runs with: one run per parameter object, or one with `params` null.
#[derive(Debug, Clone)]
pub enum Params {
    /// The policy has no `paramKind`, or the binding no `paramRef`: one run, `params`
    /// null.
    None,
    /// One run per object (none at all: the binding is skipped, `Allow`).
    Objects(Vec<Param>),
}

/// The parameters of a binding for a request in `namespace` ("" for a cluster-scoped
/// request). `Err` is the apiserver's message, which becomes `failed to configure
/// binding: <message>` under the policy's failurePolicy.
pub fn collect(
    param_kind: Option<&Gvk>,
    param_ref: Option<&ParamRef>,
    namespace: &str,
    source: &dyn ParamSource,
) -> Result<Params, String> {
    let (Some(kind), Some(param_ref)) = (param_kind, param_ref) else {
        return Ok(Params::None);
    };
    let Some(scope) = source.scope(kind) else {
        return Err(format!(
            "paramKind kind `{}` not known",
            go_param_kind(kind)
        ));
    };
    let search = match scope {
        ParamScope::Namespaced => match param_ref.namespace.as_deref() {
            Some(namespace) => namespace,
            None if namespace.is_empty() => {
                return Err(
                    "cannot use namespaced paramRef in policy binding that matches \
                            cluster-scoped resources"
                        .to_string(),
                );
            }
            None => namespace,
        },
        ParamScope::Cluster => {
            if param_ref.namespace.is_some() {
                return Err(format!(
                    "paramRef.namespace must not be provided for a cluster-scoped `paramKind` `{}`",
                    go_param_kind(kind)
                ));
            }
            ""
        }
    };
    let found = match &param_ref.target {
        ParamTarget::Name(name) => source.get(kind, search, name)?.into_iter().collect(),
        ParamTarget::Selector(selector) => source.list(kind, search, selector)?,
    };
    if found.is_empty() && param_ref.not_found == NotFoundAction::Deny {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".to_string(),
        );
    }
    Ok(Params::Objects(found))
}

/// A ParamKind as Go's generated `String()` writes it:
/// `&ParamKind{APIVersion:v1,Kind:ConfigMap,}`.
fn go_param_kind(kind: &Gvk) -> String {
    let api_version = if kind.group.is_empty() {
        kind.version.clone()
    } else {
        format!("{}/{}", kind.group, kind.version)
    };
    format!("&ParamKind{{APIVersion:{api_version},Kind:{},}}", kind.kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ConfigMaps: `team-a/settings` and two labelled `tier: gpu` in `team-a`.
    #[derive(Debug)]
    struct ConfigMaps;

    fn config_map(namespace: &str, name: &str) -> Param {
        Arc::new(Tree::from(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": namespace, "name": name}
        })))
    }

    impl ParamSource for ConfigMaps {
        fn scope(&self, kind: &Gvk) -> Option<ParamScope> {
            (kind.kind == "ConfigMap").then_some(ParamScope::Namespaced)
        }
        fn get(&self, _: &Gvk, namespace: &str, name: &str) -> Result<Option<Param>, String> {
            Ok((namespace == "team-a" && name == "settings").then(|| config_map(namespace, name)))
        }
        fn list(&self, _: &Gvk, namespace: &str, _: &[Requirement]) -> Result<Vec<Param>, String> {
            Ok(if namespace == "team-a" {
                vec![config_map(namespace, "a"), config_map(namespace, "b")]
            } else {
                Vec::new()
            })
        }
    }

    fn config_map_kind() -> Gvk {
        Gvk::parse("v1", "ConfigMap")
    }

    fn by_name(name: &str, namespace: Option<&str>, not_found: NotFoundAction) -> ParamRef {
        ParamRef {
            target: ParamTarget::Name(name.to_string()),
            namespace: namespace.map(str::to_string),
            not_found,
        }
    }

    fn count(result: Result<Params, String>) -> Result<Option<usize>, String> {
        result.map(|params| match params {
            Params::None => None,
            Params::Objects(objects) => Some(objects.len()),
        })
    }

    #[test]
    fn params_are_collected_as_the_apiserver_collects_them() {
        let kind = config_map_kind();
        let deny = NotFoundAction::Deny;
        let allow = NotFoundAction::Allow;
        // Without paramKind or paramRef: one run, params null.
        assert_eq!(
            count(collect(
                None,
                Some(&by_name("x", None, deny)),
                "team-a",
                &ConfigMaps
            )),
            Ok(None)
        );
        assert_eq!(
            count(collect(Some(&kind), None, "team-a", &ConfigMaps)),
            Ok(None)
        );
        // By name, in the request's namespace or the one given.
        assert_eq!(
            count(collect(
                Some(&kind),
                Some(&by_name("settings", None, deny)),
                "team-a",
                &ConfigMaps
            )),
            Ok(Some(1))
        );
        assert_eq!(
            count(collect(
                Some(&kind),
                Some(&by_name("settings", Some("team-a"), deny)),
                "other",
                &ConfigMaps
            )),
            Ok(Some(1))
        );
        // Not found: Deny is an error, Allow no run at all.
        assert_eq!(
            count(collect(
                Some(&kind),
                Some(&by_name("settings", None, deny)),
                "other",
                &ConfigMaps
            )),
            Err(
                "no params found for policy binding with `Deny` parameterNotFoundAction"
                    .to_string()
            )
        );
        assert_eq!(
            count(collect(
                Some(&kind),
                Some(&by_name("settings", None, allow)),
                "other",
                &ConfigMaps
            )),
            Ok(Some(0))
        );
        // A namespaced kind for a cluster-scoped request needs a namespace.
        assert_eq!(
            count(collect(Some(&kind), Some(&by_name("settings", None, deny)), "", &ConfigMaps)),
            Err("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".to_string())
        );
        // By selector: every object, one run each.
        let selector = ParamRef {
            target: ParamTarget::Selector(Vec::new()),
            namespace: None,
            not_found: deny,
        };
        assert_eq!(
            count(collect(Some(&kind), Some(&selector), "team-a", &ConfigMaps)),
            Ok(Some(2))
        );
        // A kind the source does not know.
        let unknown = Gvk::parse("example.com/v1", "Setting");
        assert_eq!(
            count(collect(
                Some(&unknown),
                Some(&selector),
                "team-a",
                &ConfigMaps
            )),
            Err(
                "paramKind kind `&ParamKind{APIVersion:example.com/v1,Kind:Setting,}` not known"
                    .to_string()
            )
        );
    }
}
