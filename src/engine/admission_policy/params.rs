//! A binding's parameters (`paramKind` and `paramRef`), collected as the apiserver's
//! policy dispatcher collects them (`generic/policy_dispatcher.go` `CollectParams`): the
//! objects come from a [`ParamSource`] the caller holds (the objects given offline, or
//! the server's watches), read in memory: collecting does no I/O.

use crate::params::{Param, ParamScope, ParamSource};
use crate::policy::admission_policy::compiled::{Gvk, NotFoundAction, ParamRef, ParamTarget};

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
    use std::sync::Arc;

    use super::*;
    use crate::k8s::labels::Requirement;
    use crate::tree::Tree;

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
