//! The blast radius of a policy that fails closed: one that matches every object of its
//! kinds with `failurePolicy: Fail` and reads data that can be missing at admission
//! (the request's namespace, through `namespaceObject` or a namespace selector) denies
//! every such object while that data is unavailable: every pod of the cluster while
//! graft's namespace cache has not synced, say. Lint warns, and says what happens.

use super::Compiler;
use crate::policy::compiled::{Conditions, ResourceRule};
use crate::policy::model::{FailurePolicy, Match};

/// Whether a match holds for every object of its resources: nothing narrows it but the
/// resources and the operations.
pub(super) fn matches_every_object(m: &Match) -> bool {
    m.namespaces.is_empty()
        && m.names.is_empty()
        && m.namespace_selector.is_none()
        && m.labels.is_empty()
        && m.label_selector.is_none()
        && m.annotations.is_empty()
        && m.annotation_selector.is_none()
        && m.fields.is_empty()
        && m.cel.is_none()
}

/// `every pod`, `every deployment and statefulset`, `every object`.
fn every(resources: &[ResourceRule]) -> String {
    if resources.iter().any(|rule| rule.resource == "*") {
        return "every object".to_string();
    }
    let names: Vec<String> = resources
        .iter()
        .map(|rule| {
            let resource = rule.resource.strip_suffix('s').unwrap_or(&rule.resource);
            match rule.subresource.as_deref() {
                Some(sub) => format!("{resource} {sub}"),
                None => resource.to_string(),
            }
        })
        .collect();
    match names.as_slice() {
        [one] => format!("every {one}"),
        [init @ .., last] => format!("every {} and {last}", init.join(", ")),
        [] => "every object".to_string(),
    }
}

impl Compiler<'_> {
    /// Warns when the policy fails closed on every object it matches for want of its
    /// namespace's data.
    pub(super) fn check_blast_radius(
        &mut self,
        matcher: &Conditions,
        exclude: Option<&Conditions>,
    ) {
        let spec = &self.parsed.document.spec;
        if spec.failure_policy != FailurePolicy::Fail || !matches_every_object(&spec.match_) {
            return;
        }
        let reads = if self.needs.namespace_object {
            "reads namespaceObject"
        } else if exclude.is_some_and(|e| e.namespace_selector.is_some()) {
            "tests its namespace's labels"
        } else {
            return;
        };
        let message = format!(
            "the policy matches {} with failurePolicy Fail and {reads}: while graft cannot \
             read the request's namespace (its namespace cache not yet synced or cut off \
             from the apiserver, the namespace just created), every such request is denied",
            every(&matcher.resources)
        );
        self.warning_with_hint(
            "spec.failurePolicy",
            "failurePolicy",
            &message,
            "set failurePolicy: Ignore, or narrow spec.match (namespaces, labels, a namespaceSelector) to the objects that need the policy",
        );
    }
}
