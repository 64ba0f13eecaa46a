//! The label values a review is counted under, from closed sets.
//!
//! Every distinct label value is a new time series kept for the life of the process, and
//! the request's strings come from whoever can reach the port. So `operation` is one of
//! the four Kubernetes operations, and `resource` a built-in Kubernetes resource or one
//! the policy set names exactly (what the generated webhook rules send), optionally with
//! a built-in subresource; anything else is counted as [`OTHER`].

use std::borrow::Cow;

use crate::k8s::resources::{is_built_in, is_built_in_subresource};
use crate::policy::{Operation, PolicySet};

/// The label value for anything outside the known set.
pub const OTHER: &str = "other";

/// `CREATE`, `UPDATE`, `DELETE`, `CONNECT`, or [`OTHER`].
pub fn operation(operation: &str) -> &'static str {
    Operation::parse(operation).map_or(OTHER, Operation::as_str)
}

/// `resource` or `resource/subresource` when both are known (built in, or named by a
/// policy of `set` without a wildcard), or [`OTHER`].
pub fn resource<'a>(set: &PolicySet, resource: &'a str, subresource: &'a str) -> Cow<'a, str> {
    let named = |resource: &str, subresource: Option<&str>| {
        set.policies()
            .flat_map(|policy| &policy.matcher.resources)
            .any(|rule| {
                !rule.is_wildcard()
                    && rule.resource == resource
                    && subresource.is_none_or(|sub| rule.subresource.as_deref() == Some(sub))
            })
    };
    let known_resource = is_built_in(resource) || named(resource, None);
    if !known_resource {
        return Cow::Borrowed(OTHER);
    }
    if subresource.is_empty() {
        return Cow::Borrowed(resource);
    }
    if is_built_in_subresource(subresource) || named(resource, Some(subresource)) {
        Cow::Owned(format!("{resource}/{subresource}"))
    } else {
        Cow::Borrowed(OTHER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations() {
        assert_eq!(operation("CREATE"), "CREATE");
        assert_eq!(operation("CONNECT"), "CONNECT");
        assert_eq!(operation("create"), OTHER);
        assert_eq!(operation("EXPLODE"), OTHER);
        assert_eq!(operation(""), OTHER);
    }

    #[test]
    fn resources_come_from_the_policy_set() {
        let text = r#"
apiVersion: graft.dev/v1alpha1
kind: MutationPolicy
metadata: {name: p}
spec:
  match: {resources: [widgets, widgets/resize-x, nodes/status, "*/scale", "gadgets/*"]}
  mutations: [{set: {path: "$.metadata.labels.a", value: "b"}}]
"#;
        let set = match crate::policy::load_str(std::path::Path::new("p.yaml"), text) {
            Ok(loaded) => loaded.set,
            Err(findings) => panic!("{findings:?}"),
        };
        let check = |res: &str, sub: &str, expect: &str| {
            assert_eq!(resource(&set, res, sub), expect, "{res}/{sub}");
        };
        // Built in.
        check("pods", "", "pods");
        check("pods", "status", "pods/status");
        check("deployments", "scale", "deployments/scale");
        check("pods", "status-x9f2", OTHER);
        // Named by the policy set.
        check("widgets", "", "widgets");
        check("widgets", "resize-x", "widgets/resize-x");
        check("widgets", "status", "widgets/status");
        check("widgets", "other-x", OTHER);
        // Only behind a wildcard, or unknown.
        check("gadgets", "", OTHER);
        check("gadgets", "status", OTHER);
        check("*", "", OTHER);
        check("*", "scale", OTHER);
        check("pods\n", "", OTHER);
        check("widgets-x9f2", "", OTHER);
    }
}
