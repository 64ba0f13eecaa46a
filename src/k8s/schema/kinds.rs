//! Which kind of the table a policy's resource names: `pods` is core `v1/Pod`,
//! `apps/*/deployments` is `apps/v1/Deployment`. The table is keyed by kind, the policies
//! by plural resource name; a kind's resource is its plural ([`plural`]), as the
//! apiserver names the built-in resources.

use super::{Schema, TypeRef};
use crate::k8s::resources::plural;

/// A kind of the table a resource stands for.
#[derive(Clone, Copy, Debug)]
pub struct ResourceKind<'s> {
    pub group: &'s str,
    pub version: &'s str,
    pub kind: &'s str,
    pub ty: TypeRef<'s>,
}

/// The subresources whose requests carry the resource's own object (`nodes/status` sends
/// the Node); any other (`deployments/scale`, `pods/binding`) carries another kind.
const SAME_OBJECT_SUBRESOURCES: [&str; 3] = ["status", "ephemeralcontainers", "resize"];

impl Schema {
    /// The kinds the table holds, as `(group, version, kind)`; the core group is `""`.
    fn kind_entries(&self) -> impl Iterator<Item = ((&str, &str, &str), TypeRef<'_>)> {
        self.kinds
            .iter()
            .map(|entry| (entry.key(), self.at(entry.ty)))
    }

    /// The kinds a resource rule stands for: `group` `None` for any group (then the core
    /// group's kind alone when it has one, as `pods` means core Pods), `version` `None`
    /// for the group's preferred version (the most stable, then newest). Empty when the
    /// table does not know the resource: a custom resource, a wildcard, or a subresource
    /// carrying another kind.
    pub fn resource_kinds(
        &self,
        group: Option<&str>,
        version: Option<&str>,
        resource: &str,
        subresource: Option<&str>,
    ) -> Vec<ResourceKind<'_>> {
        if resource == "*"
            || subresource.is_some_and(|sub| !SAME_OBJECT_SUBRESOURCES.contains(&sub))
        {
            return Vec::new();
        }
        let mut found: Vec<ResourceKind<'_>> = Vec::new();
        for ((g, v, k), ty) in self.kind_entries() {
            if group.is_some_and(|want| want != g)
                || version.is_some_and(|want| want != v)
                || plural(k) != resource
            {
                continue;
            }
            let candidate = ResourceKind {
                group: g,
                version: v,
                kind: k,
                ty,
            };
            match found.iter_mut().find(|kind| kind.group == g) {
                Some(kept) if version_rank(v) > version_rank(kept.version) => *kept = candidate,
                Some(_) => {}
                None => found.push(candidate),
            }
        }
        if group.is_none() && found.iter().any(|kind| kind.group.is_empty()) {
            found.retain(|kind| kind.group.is_empty());
        }
        found.sort_by(|a, b| a.group.cmp(b.group));
        found
    }
}

/// How preferred an API version is, as Kubernetes orders them: GA over beta over
/// alpha, a higher number first within each (`v2` > `v1` > `v1beta2` > `v1beta1`).
fn version_rank(version: &str) -> (u8, u32, u32) {
    let Some(rest) = version.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let major = rest[..digits].parse().unwrap_or(0);
    let tail = &rest[digits..];
    let (stability, minor) = if tail.is_empty() {
        (3, 0)
    } else if let Some(n) = tail.strip_prefix("beta") {
        (2, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    (stability, major, minor)
}

#[cfg(test)]
mod tests {
    use super::super::builtin;
    use super::*;

    fn names(kinds: &[ResourceKind<'_>]) -> Vec<String> {
        kinds
            .iter()
            .map(|k| format!("{}/{}/{}", k.group, k.version, k.kind))
            .collect()
    }

    #[test]
    fn resources_name_their_kinds_at_the_preferred_version() {
        let schema = builtin().expect("the table parses");
        let kinds = |g, v, r, s| names(&schema.resource_kinds(g, v, r, s));
        assert_eq!(kinds(None, None, "pods", None), ["/v1/Pod"]);
        assert_eq!(kinds(None, None, "nodes", Some("status")), ["/v1/Node"]);
        assert_eq!(
            kinds(Some("apps"), None, "deployments", None),
            ["apps/v1/Deployment"]
        );
        assert_eq!(
            kinds(None, None, "statefulsets", None),
            ["apps/v1/StatefulSet"]
        );
        assert_eq!(
            kinds(Some("batch"), Some("v1"), "cronjobs", None),
            ["batch/v1/CronJob"]
        );
        assert_eq!(
            kinds(None, None, "ingresses", None),
            ["networking.k8s.io/v1/Ingress"]
        );
        assert!(kinds(None, None, "widgets", None).is_empty());
        assert!(kinds(None, None, "*", None).is_empty());
        assert!(kinds(None, None, "deployments", Some("scale")).is_empty());
    }

    #[test]
    fn versions_rank_as_kubernetes_prefers_them() {
        let mut versions = ["v1alpha1", "v1beta1", "v2", "v1", "v1beta2", "v2beta1"];
        versions.sort_by_key(|v| std::cmp::Reverse(version_rank(v)));
        assert_eq!(
            versions,
            ["v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1"]
        );
    }
}
