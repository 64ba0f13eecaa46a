//! Running one policy against the current state of the object.

use super::apply::{apply, protected_values};
use super::bindings::SharedBindings;
use super::edit::Editor;
use super::matching::{
    Block, Blocker, ConditionError, RequestFacts, exclude_holds, namespace_selector_holds,
    object_blocker, request_matches,
};
use super::plan::plan_policy;
use super::versions::{EditedObject, Subject};
use crate::expr::{Bindings, Scope};
use crate::k8s::admission_request::AdmissionRequest;
use crate::policy::compiled::CompiledPolicy;
use crate::policy::model::{FailurePolicy, Mode};
use crate::tree;

use super::{Failure, PolicyResult};

/// What one look at a policy found: that it is not for the request, that the object
/// does not match it, or, when it matched, its result (the one type the evaluation
/// reports).
#[derive(Debug)]
pub enum PolicyRun<'p> {
    /// The request itself (resource, operation, namespace) is not the policy's: no
    /// change to the object can make it match.
    NotForRequest,
    /// The object does not match, as it is now, because of this condition.
    NotMatched(Blocker<'p>),
    Matched(PolicyResult),
}

pub(super) fn failure(field: impl Into<String>, reason: impl ToString) -> Failure {
    Failure {
        field: field.into(),
        reason: reason.to_string(),
    }
}

/// Matches, evaluates and applies one policy. The edited object is left as it was when
/// the policy fails or only audits; otherwise the object keeps its new root.
/// A failure is `Failed` or `Ignored` by the policy's `failurePolicy`.
pub fn run_policy<'p>(
    policy: &'p CompiledPolicy,
    facts: &RequestFacts<'_>,
    request: &AdmissionRequest<'_>,
    shared: &SharedBindings,
    edited: &mut EditedObject<'_, '_>,
) -> PolicyRun<'p> {
    match look(policy, facts, request, shared, edited) {
        Ok(run) => run,
        Err(failure) => PolicyRun::Matched(match policy.failure_policy {
            FailurePolicy::Fail => PolicyResult::Failed(failure),
            FailurePolicy::Ignore => PolicyResult::Ignored(failure),
        }),
    }
}

/// [`run_policy`], with a failure as the error.
fn look<'p>(
    policy: &'p CompiledPolicy,
    facts: &RequestFacts<'_>,
    request: &AdmissionRequest<'_>,
    shared: &SharedBindings,
    edited: &mut EditedObject<'_, '_>,
) -> Result<PolicyRun<'p>, Failure> {
    let subject = &mut edited.subject;
    let view = subject.view();
    if !request_matches(&policy.matcher, facts) {
        return Ok(PolicyRun::NotForRequest);
    }
    match object_blocker(&policy.matcher, view) {
        Ok(None) => {}
        Ok(Some(blocker)) => return Ok(PolicyRun::NotMatched(blocker)),
        Err(error) => return Err(failure(error.field, error.error)),
    }
    // Last of the declarative conditions, so a namespace's data is needed only when the
    // answer depends on it. A namespaced request's namespace does not change; a
    // Namespace's own labels may, as the label selector's do. Missing data fails the
    // policy unless the exclude block's declarative part skips it: the CEL conditions
    // come later, as they may read `namespaceObject`.
    let missing_namespace =
        match namespace_selector_holds(&policy.matcher, facts, view, Block::Match) {
            Ok(true) => None,
            Ok(false) if facts.is_namespace() => {
                return Ok(PolicyRun::NotMatched(Blocker::Labels));
            }
            Ok(false) => return Ok(PolicyRun::NotForRequest),
            Err(reason) => Some(failure("spec.match.namespaceSelector", reason)),
        };
    // An exclude block holds when all its conditions do; its CEL part, if any, is
    // evaluated in phase 1 and only when the declarative part already holds.
    let excluded_declaratively = match &policy.exclude {
        None => false,
        Some(exclude) => match exclude_holds(exclude, facts, view) {
            Ok(holds) => holds,
            Err(ConditionError::FieldTest(error)) => {
                return Err(failure(error.field, error.error));
            }
            Err(ConditionError::Namespace(reason)) => {
                return Err(missing_namespace
                    .unwrap_or_else(|| failure("spec.exclude.namespaceSelector", reason)));
            }
        },
    };
    if excluded_declaratively && policy.exclude.as_ref().is_some_and(|e| e.cel.is_none()) {
        return Ok(PolicyRun::NotMatched(Blocker::Excluded));
    }
    if let Some(missing) = missing_namespace {
        return Err(missing);
    }
    let namespace_object = if policy.needs.namespace_object {
        match shared.namespace_object(facts) {
            Ok(namespace_object) => namespace_object,
            Err(reason) => return Err(failure("namespaceObject", reason)),
        }
    } else {
        None
    };

    // Phase 1: read-only evaluation of every expression against the object as it is now.
    let plan = {
        let mut scope = policy.uses_cel.then(|| {
            let bindings = Bindings {
                object: view,
                old_object: request.old_object.as_ref(),
                namespace_object,
                request: shared.request(request),
                params: &policy.params,
            };
            Scope::new(bindings)
        });
        match plan_policy(policy, view, excluded_declaratively, scope.as_mut()) {
            Ok(Ok(plan)) => plan,
            Ok(Err(blocker)) => return Ok(PolicyRun::NotMatched(blocker)),
            Err(error) => return Err(error),
        }
    };
    let Subject::Changeable(object) = subject else {
        return Ok(PolicyRun::Matched(PolicyResult::Unchanged));
    };

    // Phase 2: apply. Keeping the root the policy started from is what undoes its
    // writes when it fails or only audits.
    let before = object.clone();
    let types = if policy.checks_written_types {
        shared.write_types(facts, request)
    } else {
        None
    };
    let applied = apply(&mut Editor::new(object), plan, &before, types);
    if let Err(error) = applied {
        **object = before;
        return Err(error);
    }
    if protected_values(&before) != protected_values(object) {
        **object = before;
        return Err(failure(
            "spec.mutations",
            "policies may not change metadata.name, metadata.namespace or metadata.uid",
        ));
    }
    if policy.mode == Mode::Audit {
        let patch = tree::diff(&before, object).into_static();
        **object = before;
        return Ok(PolicyRun::Matched(if patch.0.is_empty() {
            PolicyResult::Unchanged
        } else {
            PolicyResult::Audited { patch }
        }));
    }
    Ok(PolicyRun::Matched(if before == **object {
        PolicyResult::Unchanged
    } else {
        PolicyResult::Applied
    }))
}
