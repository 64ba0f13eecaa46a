//! Running a Pod policy with `podControllers` on the pod template of a Deployment,
//! ReplicaSet, StatefulSet, DaemonSet, Job or CronJob.
//!
//! The template is taken out of the object and run as a Pod (`apiVersion: v1`,
//! `kind: Pod`, the template's `metadata` and `spec`), so every path, field test,
//! selector and CEL expression of the policy means what it means for a Pod, with no
//! rewriting. A Pod a controller makes has only a generateName when it is created;
//! the stand-in gets `<controller name>-`, so `names: ["web-*"]` matches the pods of
//! the Deployment `web`. What was added is taken off before the template goes back.

use json_patch::jsonptr::PointerBuf;

use super::PolicyResult;
use super::bindings::SharedBindings;
use super::matching::{Blocker, RequestFacts};
use super::run::{PolicyRun, run_policy};
use super::versions::{EditedObject, Subject};
use crate::jsonpath::{self, Token};
use crate::k8s::admission_request::AdmissionRequest;
use crate::k8s::pod_controllers::PodController;
use crate::policy::CompiledPolicy;
use crate::tree::{self, Map, Tree};

/// Runs `policy` on the template of `controller` in the edited object. A controller
/// object without a template is not the policy's.
pub fn run_on_template<'p>(
    policy: &'p CompiledPolicy,
    controller: &PodController,
    facts: &RequestFacts<'_>,
    request: &AdmissionRequest<'_>,
    shared: &SharedBindings,
    edited: &mut EditedObject<'_, '_>,
) -> PolicyRun<'p> {
    let pod_facts = facts.as_pod();
    let outcome = match &mut edited.subject {
        Subject::ReadOnly(object) => {
            let Some((pod, _)) = stand_in_of(controller, object) else {
                return PolicyRun::NotForRequest;
            };
            let mut inner = EditedObject::new(Subject::ReadOnly(&pod));
            run_policy(policy, &pod_facts, request, shared, &mut inner)
        }
        Subject::Changeable(object) => {
            let Some((mut pod, added)) = stand_in_of(controller, object) else {
                return PolicyRun::NotForRequest;
            };
            let mut inner = EditedObject::new(Subject::Changeable(&mut pod));
            let outcome = run_policy(policy, &pod_facts, request, shared, &mut inner);
            // Only an applied policy leaves a change: the template stays as it is
            // otherwise.
            if matches!(outcome, PolicyRun::Matched(PolicyResult::Applied)) {
                let tokens: Vec<Token> = controller
                    .template
                    .iter()
                    .map(|key| Token::Key((*key).to_string()))
                    .collect();
                if let Some(slot) = jsonpath::get_mut(object, &tokens) {
                    *slot = added.remove(pod);
                }
            }
            outcome
        }
    };
    match outcome {
        PolicyRun::NotForRequest => PolicyRun::NotForRequest,
        // What blocked the stand-in lives under the template, not where the blocker
        // would look in the controller object.
        PolicyRun::NotMatched(_) => PolicyRun::NotMatched(Blocker::Template),
        PolicyRun::Matched(PolicyResult::Audited { patch }) => {
            PolicyRun::Matched(PolicyResult::Audited {
                patch: prefixed(patch, controller.template),
            })
        }
        other => other,
    }
}

/// The Pod a `podControllers` policy sees for `object`, a `controller` object: what
/// [`run_on_template`] runs the policy on. `None` when it has no template.
pub fn stand_in_pod<'t>(controller: &PodController, object: &Tree<'t>) -> Option<Tree<'t>> {
    stand_in_of(controller, object).map(|(pod, _)| pod)
}

/// The stand-in Pod for the template of `object`, and what was added to make it one.
fn stand_in_of<'t>(controller: &PodController, object: &Tree<'t>) -> Option<(Tree<'t>, Added)> {
    let mut template = object;
    for key in controller.template {
        template = template.get(key)?;
    }
    let template = template.as_map()?;
    Some(stand_in(template, controller_generate_name(object)))
}

/// `<name>-` of the controller object, or its own generateName.
fn controller_generate_name(object: &Tree<'_>) -> Option<String> {
    let metadata = object.get("metadata")?;
    let text = |key: &str| {
        metadata
            .get(key)
            .and_then(Tree::as_str)
            .filter(|s| !s.is_empty())
    };
    text("name")
        .map(|name| format!("{name}-"))
        .or_else(|| text("generateName").map(str::to_string))
}

/// What [`stand_in`] added to the template, to take off again.
#[derive(Debug, Clone, Copy)]
struct Added {
    metadata: bool,
    generate_name: bool,
}

impl Added {
    /// The template again: the Pod's `apiVersion` and `kind` and what else was added
    /// are taken off (a `metadata` that was added stays when the policy wrote into it).
    fn remove(self, mut pod: Tree<'_>) -> Tree<'_> {
        let Some(map) = pod.map_mut() else {
            return pod;
        };
        map.remove("apiVersion");
        map.remove("kind");
        let mut metadata_empty = false;
        if let Some(metadata) = map.get_mut("metadata").and_then(Tree::map_mut) {
            if self.generate_name {
                metadata.remove("generateName");
            }
            metadata_empty = metadata.is_empty();
        }
        if self.metadata && metadata_empty {
            map.remove("metadata");
        }
        pod
    }
}

/// The template as a Pod, and what was added to make it one.
fn stand_in<'t>(template: &Map<'t>, generate_name: Option<String>) -> (Tree<'t>, Added) {
    let mut pod = Map::with_capacity(template.len() + 2);
    pod.insert("apiVersion", Tree::from("v1"));
    pod.insert("kind", Tree::from("Pod"));
    let mut added = Added {
        metadata: !template.contains_key("metadata"),
        generate_name: false,
    };
    for (key, value) in template.entries() {
        pod.insert(key.clone(), value.clone());
    }
    if let Some(generate_name) = generate_name {
        let metadata = template.get("metadata").and_then(Tree::as_map);
        let named =
            metadata.is_some_and(|m| m.contains_key("name") || m.contains_key("generateName"));
        let is_map = added.metadata || metadata.is_some();
        if !named && is_map {
            let mut metadata = metadata.cloned().unwrap_or_default();
            metadata.insert("generateName", Tree::from(generate_name));
            pod.insert("metadata", Tree::from(metadata));
            added.generate_name = true;
        }
    }
    if !added.generate_name {
        // Nothing to say in it: the Pod's metadata stays absent, as the template's was.
        added.metadata = false;
    }
    (Tree::from(pod), added)
}

/// The stand-in's patch, as operations on the controller object.
fn prefixed(mut patch: tree::Patch<'static>, template: &[&str]) -> tree::Patch<'static> {
    let prefix = PointerBuf::from_tokens(template.iter().copied());
    for operation in &mut patch.0 {
        let path = operation.path_mut();
        *path = prefix.concat(path);
    }
    patch
}
