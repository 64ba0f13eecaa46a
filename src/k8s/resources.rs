//! The resource names of Kubernetes' built-in API groups: what the server counts in its
//! metrics by name, and what lint holds a policy's `resources` to (`pod` is a kind's
//! name in the singular; the apiserver sends `pods`).

/// The resources of Kubernetes' built-in API groups that admission webhooks commonly see
/// (sorted, for the binary search).
pub const BUILT_IN_RESOURCES: &[&str] = &[
    "bindings",
    "certificatesigningrequests",
    "clusterrolebindings",
    "clusterroles",
    "configmaps",
    "cronjobs",
    "csidrivers",
    "csinodes",
    "customresourcedefinitions",
    "daemonsets",
    "deployments",
    "endpoints",
    "endpointslices",
    "events",
    "horizontalpodautoscalers",
    "ingressclasses",
    "ingresses",
    "jobs",
    "leases",
    "limitranges",
    "mutatingwebhookconfigurations",
    "namespaces",
    "networkpolicies",
    "nodes",
    "persistentvolumeclaims",
    "persistentvolumes",
    "poddisruptionbudgets",
    "pods",
    "podtemplates",
    "priorityclasses",
    "replicasets",
    "replicationcontrollers",
    "resourcequotas",
    "rolebindings",
    "roles",
    "runtimeclasses",
    "secrets",
    "serviceaccounts",
    "services",
    "statefulsets",
    "storageclasses",
    "validatingwebhookconfigurations",
    "volumeattachments",
];

/// The subresources of the built-in resources that admission webhooks can see (sorted).
pub const BUILT_IN_SUBRESOURCES: &[&str] = &[
    "approval",
    "attach",
    "binding",
    "ephemeralcontainers",
    "eviction",
    "exec",
    "portforward",
    "proxy",
    "resize",
    "scale",
    "status",
    "token",
];

/// Whether `group` is one of Kubernetes' built-in API groups (the core group is `""`).
pub fn is_built_in_group(group: &str) -> bool {
    matches!(
        group,
        "" | "apps"
            | "batch"
            | "autoscaling"
            | "policy"
            | "networking.k8s.io"
            | "rbac.authorization.k8s.io"
            | "storage.k8s.io"
            | "coordination.k8s.io"
            | "discovery.k8s.io"
            | "scheduling.k8s.io"
            | "admissionregistration.k8s.io"
            | "apiextensions.k8s.io"
            | "certificates.k8s.io"
    )
}

/// Whether `resource` is a built-in resource's plural name.
pub fn is_built_in(resource: &str) -> bool {
    BUILT_IN_RESOURCES.binary_search(&resource).is_ok()
}

/// Whether `subresource` is a built-in subresource.
pub fn is_built_in_subresource(subresource: &str) -> bool {
    BUILT_IN_SUBRESOURCES.binary_search(&subresource).is_ok()
}

/// The built-in resource a name that is not one most likely means: its plural
/// (`pod` -> `pods`, `NetworkPolicy` -> `networkpolicies`), or the same name in lower
/// case (`Pods` -> `pods`).
pub fn meant(name: &str) -> Option<&'static str> {
    if is_built_in(name) {
        return None;
    }
    let lower = name.to_ascii_lowercase();
    let plural = plural(name);
    [lower.as_str(), plural.as_str()]
        .into_iter()
        .find_map(|candidate| {
            BUILT_IN_RESOURCES
                .binary_search(&candidate)
                .ok()
                .map(|at| BUILT_IN_RESOURCES[at])
        })
}

/// The plural resource name of a kind, as Kubernetes derives it.
pub fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with("ss") {
        return format!("{lower}es");
    }
    if lower.is_empty() || lower.ends_with('s') {
        return lower;
    }
    if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        return format!("{stem}ies");
    }
    if lower.ends_with('x') || lower.ends_with("ch") || lower.ends_with("sh") {
        return format!("{lower}es");
    }
    format!("{lower}s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_lists_are_sorted() {
        assert!(BUILT_IN_RESOURCES.is_sorted());
        assert!(BUILT_IN_SUBRESOURCES.is_sorted());
    }

    #[test]
    fn singular_and_capitalised_names_mean_the_plural() {
        for (name, expected) in [
            ("pod", Some("pods")),
            ("Pods", Some("pods")),
            ("Deployment", Some("deployments")),
            ("networkpolicy", Some("networkpolicies")),
            ("ingress", Some("ingresses")),
            ("pods", None),
            ("virtualservices", None),
            ("virtualservice", None),
        ] {
            assert_eq!(meant(name), expected, "{name}");
        }
    }
}
