//! The invariants every evaluation holds, checked the one way `graft test` checks each
//! case and the Rust tests check theirs:
//!
//! - the patch applies to the request's object and gives the object the evaluation
//!   ends at;
//! - a second review, of that object, is allowed and changes nothing: graft's own
//!   policies converge.
//!   A MutatingAdmissionPolicy need not (the apiserver does not require it): a second
//!   review that only such policies change is reported, not counted as a problem;
//! - `graft explain` sees the same evaluation.

use super::{ClusterSource, offline, resolve};
use crate::engine::{Dialect, Evaluation, PolicyResult, explain};
use crate::k8s::admission_request::AdmissionRequest;
use crate::policy::PolicySet;
use crate::tree;

/// An evaluation and the invariants it broke.
#[derive(Debug)]
pub struct Checked<'t> {
    pub evaluation: Evaluation<'t>,
    /// Each broken invariant, worded for a person.
    pub problems: Vec<String>,
    /// A second review's patch, when only MutatingAdmissionPolicies changed the object
    /// again: worth saying, not a broken invariant.
    pub second_review: Option<tree::Patch<'static>>,
}

/// Evaluates `request` as a review of it would be, and checks the invariants.
pub fn check<'t>(
    request: &AdmissionRequest<'t>,
    policies: &PolicySet,
    source: ClusterSource<'_>,
) -> Checked<'t> {
    let evaluation = offline::evaluate(request, policies, source);
    let mut problems = Vec::new();
    patch_applies(request, &evaluation, &mut problems);
    let second_review = converges(request, &evaluation, policies, source, &mut problems);
    let route = policies.route(request);
    let cluster = resolve(request, route, source);
    if explain::explain(request, route, &cluster, policies).evaluation != evaluation {
        problems.push("graft explain's evaluation differs from the review's".to_string());
    }
    Checked {
        evaluation,
        problems,
        second_review,
    }
}

/// The patch applies to the original and gives exactly the object the evaluation ends
/// at.
fn patch_applies(
    request: &AdmissionRequest<'_>,
    evaluation: &Evaluation<'_>,
    problems: &mut Vec<String>,
) {
    let (Some(original), Some(mutated)) = (&request.object, evaluation.mutated()) else {
        return;
    };
    let mut patched = original.to_value();
    match json_patch::patch(&mut patched, &evaluation.patch.to_json_patch()) {
        Ok(()) if patched == mutated => {}
        Ok(()) => problems
            .push("the patch applied to the original does not give the mutated object".to_string()),
        Err(error) => problems.push(format!("the patch does not apply to the original: {error}")),
    }
}

/// A second review of the object the evaluation ends at changes nothing; when only
/// MutatingAdmissionPolicies change it, its patch is returned instead.
fn converges(
    request: &AdmissionRequest<'_>,
    evaluation: &Evaluation<'_>,
    policies: &PolicySet,
    source: ClusterSource<'_>,
    problems: &mut Vec<String>,
) -> Option<tree::Patch<'static>> {
    if evaluation.patch.0.is_empty() {
        return None;
    }
    let mut again = request.clone();
    again.object = evaluation.object.clone();
    let second = offline::evaluate(&again, policies, source);
    if let crate::engine::Outcome::Denied { message, .. } = &second.outcome {
        problems.push(format!(
            "a second review, of the object the first one ends at, is denied: {message}"
        ));
        return None;
    }
    if second.patch.0.is_empty() {
        return None;
    }
    let graft_changed = second.policies.iter().any(|report| {
        report.dialect == Dialect::MutationPolicy && report.result == PolicyResult::Applied
    });
    if graft_changed {
        problems.push(format!(
            "not convergent: a second pass gives patch {}",
            serde_json::to_string(&second.patch).unwrap_or_else(|error| error.to_string())
        ));
        return None;
    }
    Some(second.patch.into_static())
}
