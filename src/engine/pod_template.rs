//! Running a Pod policy with `podControllers` on the pod template of a Deployment,
//! ReplicaSet, StatefulSet, DaemonSet, Job or CronJob.
//!
//! The template is taken out of the object and run as a Pod (`apiVersion: v1`,
//! `kind: Pod`, the template's `metadata` and `spec`), so every path, field test,
//! selector and CEL expression of the policy means what it means for a Pod, with no
//! rewriting. A Pod a controller makes has only a generateName when it is created;
//! the stand-in gets `<controller name>-`, so `names: ["web-*"]` matches the pods of
//! the Deployment `web`. What was added is taken off before the template goes back.

use serde_json::{Map, Value};

use super::PolicyResult;
use super::journal::Journal;
use super::matching::{Blocker, RequestFacts};
use super::run::{EditedObject, PolicyRun, SharedBindings, Subject, run_policy};
use crate::jsonpath::lookup::child;
use crate::jsonpath::{self, Token};
use crate::k8s::admission_request::AdmissionRequest;
use crate::k8s::pod_controllers::PodController;
use crate::policy::CompiledPolicy;

/// Runs `policy` on the template of `controller` in the edited object. A controller
/// object without a template is not the policy's.
pub fn run_on_template<'p>(
    policy: &'p CompiledPolicy,
    controller: &PodController,
    facts: &RequestFacts<'_>,
    request: &AdmissionRequest,
    shared: &SharedBindings,
    working: &mut EditedObject<'_>,
) -> PolicyRun<'p> {
    let tokens: Vec<Token> = controller
        .template
        .iter()
        .map(|key| Token::Key((*key).to_string()))
        .collect();
    let pod_facts = facts.as_pod();
    let outcome = match &mut working.subject {
        Subject::ReadOnly(object) => {
            let Some(pod) = stand_in_pod(controller, object) else {
                return PolicyRun::NotForRequest;
            };
            let mut inner = EditedObject {
                subject: Subject::ReadOnly(&pod),
                journal: Journal::new(),
            };
            run_policy(policy, &pod_facts, request, shared, &mut inner)
        }
        Subject::Changeable(object) => {
            let generate_name = controller_generate_name(object);
            let Some(Value::Object(template)) = jsonpath::get_mut(object, &tokens) else {
                return PolicyRun::NotForRequest;
            };
            let (mut pod, added) = stand_in(std::mem::take(template), generate_name);
            let mut inner = EditedObject {
                subject: Subject::Changeable(&mut pod),
                journal: Journal::new(),
            };
            let outcome = run_policy(policy, &pod_facts, request, shared, &mut inner);
            // Only an applied policy leaves a change: any other outcome has rolled its
            // writes back, and the template goes back as it was.
            if matches!(outcome, PolicyRun::Matched(PolicyResult::Applied)) {
                let original = added.remove(inner.journal.original(&pod));
                put_back(object, &tokens, original);
                // The template's write, recorded while the original is in place, as
                // every write must be, and kept like the policy's own.
                working.journal.record(object, &tokens);
                put_back(object, &tokens, added.remove(pod));
                working.journal.commit();
            } else {
                put_back(object, &tokens, added.remove(pod));
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
pub fn stand_in_pod(controller: &PodController, object: &Value) -> Option<Value> {
    let mut template = object;
    for key in controller.template {
        template = child(template, key)?;
    }
    let Value::Object(template) = template else {
        return None;
    };
    Some(stand_in(template.clone(), controller_generate_name(object)).0)
}

/// `<name>-` of the controller object, or its own generateName.
fn controller_generate_name(object: &Value) -> Option<String> {
    let metadata = child(object, "metadata")?;
    let text = |key: &str| {
        child(metadata, key)
            .and_then(Value::as_str)
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
    fn remove(self, pod: Value) -> Value {
        let Value::Object(mut map) = pod else {
            return pod;
        };
        map.shift_remove("apiVersion");
        map.shift_remove("kind");
        if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
            if self.generate_name {
                metadata.shift_remove("generateName");
            }
            if self.metadata && metadata.is_empty() {
                map.shift_remove("metadata");
            }
        }
        Value::Object(map)
    }
}

/// The template as a Pod, and what was added to make it one.
fn stand_in(template: Map<String, Value>, generate_name: Option<String>) -> (Value, Added) {
    let mut pod = Map::new();
    pod.insert("apiVersion".into(), "v1".into());
    pod.insert("kind".into(), "Pod".into());
    let mut added = Added {
        metadata: !template.contains_key("metadata"),
        generate_name: false,
    };
    pod.extend(template);
    let metadata = pod
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let (Value::Object(metadata), Some(generate_name)) = (metadata, generate_name)
        && !metadata.contains_key("name")
        && !metadata.contains_key("generateName")
    {
        metadata.insert("generateName".into(), generate_name.into());
        added.generate_name = true;
    }
    if !added.generate_name && added.metadata {
        // Nothing to say in it: the Pod's metadata stays absent, as the template's was.
        pod.shift_remove("metadata");
        added.metadata = false;
    }
    (Value::Object(pod), added)
}

fn put_back(object: &mut Value, tokens: &[Token], template: Value) {
    if let Some(slot) = jsonpath::get_mut(object, tokens) {
        *slot = template;
    }
}

/// The stand-in's patch, as operations on the controller object.
fn prefixed(patch: json_patch::Patch, template: &[&str]) -> json_patch::Patch {
    let prefix: String = template.iter().map(|key| format!("/{key}")).collect();
    let Ok(mut operations) = serde_json::to_value(&patch) else {
        return patch;
    };
    if let Value::Array(operations) = &mut operations {
        for operation in operations {
            for key in ["path", "from"] {
                if let Some(Value::String(pointer)) = operation.get_mut(key) {
                    *pointer = format!("{prefix}{pointer}");
                }
            }
        }
    }
    serde_json::from_value(operations).unwrap_or(patch)
}
