//! The built-in controllers that make Pods from a template, and where the template is.

/// A resource whose objects hold a Pod template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodController {
    pub group: &'static str,
    /// The plural resource name.
    pub resource: &'static str,
    /// The object keys leading to the `PodTemplateSpec` (`metadata` and `spec`).
    pub template: &'static [&'static str],
}

const SPEC_TEMPLATE: &[&str] = &["spec", "template"];

/// Deployments, ReplicaSets, StatefulSets, DaemonSets and Jobs hold the template at
/// `spec.template`; CronJobs one level deeper, in the Job template.
pub const POD_CONTROLLERS: [PodController; 6] = [
    PodController {
        group: "apps",
        resource: "deployments",
        template: SPEC_TEMPLATE,
    },
    PodController {
        group: "apps",
        resource: "replicasets",
        template: SPEC_TEMPLATE,
    },
    PodController {
        group: "apps",
        resource: "statefulsets",
        template: SPEC_TEMPLATE,
    },
    PodController {
        group: "apps",
        resource: "daemonsets",
        template: SPEC_TEMPLATE,
    },
    PodController {
        group: "batch",
        resource: "jobs",
        template: SPEC_TEMPLATE,
    },
    PodController {
        group: "batch",
        resource: "cronjobs",
        template: &["spec", "jobTemplate", "spec", "template"],
    },
];

/// The controller a request's resource is, if any (subresources are not: `scale` and
/// `status` hold no template).
pub fn controller(
    group: &str,
    resource: &str,
    subresource: &str,
) -> Option<&'static PodController> {
    if !subresource.is_empty() {
        return None;
    }
    POD_CONTROLLERS
        .iter()
        .find(|c| c.group == group && c.resource == resource)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controllers_are_found_by_group_and_resource() {
        assert_eq!(
            controller("batch", "cronjobs", "").map(|c| c.template.len()),
            Some(4)
        );
        assert!(controller("apps", "deployments", "").is_some());
        assert!(controller("apps", "deployments", "scale").is_none());
        assert!(controller("", "deployments", "").is_none());
        assert!(controller("", "pods", "").is_none());
    }
}
