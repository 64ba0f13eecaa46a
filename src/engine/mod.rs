//! The pure core: (request, policy set) -> evaluation. No I/O, no clock, no globals.

use std::collections::BTreeMap;

use crate::admission::AdmissionRequest;
use crate::policy::PolicySet;

/// The decision for one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Allowed,
    /// A `failurePolicy: Fail` policy failed; the message names the policy, the field and the reason.
    Denied {
        message: String,
    },
}

/// What one matching policy did.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicyResult {
    /// Changed the object.
    Applied,
    /// Matched but the object was already as the policy wants it.
    Unchanged,
    /// Audit mode: would have changed the object; the change was not applied.
    Audited,
    /// Failed with `failurePolicy: Ignore`: skipped, with a warning.
    Ignored { reason: String },
    /// Failed with `failurePolicy: Fail`: the request is denied.
    Failed { reason: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct PolicyReport {
    pub policy: String,
    pub result: PolicyResult,
}

/// The result of evaluating one request against a policy set.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub outcome: Outcome,
    /// RFC 6902 operations turning the request's object into `mutated`; empty when nothing changed.
    pub patch: json_patch::Patch,
    /// The object after every applied policy, when the request has an object and a policy changed it.
    pub mutated: Option<serde_json::Value>,
    pub warnings: Vec<String>,
    pub audit_annotations: BTreeMap<String, String>,
    /// One report per matching policy, in evaluation order.
    pub policies: Vec<PolicyReport>,
}

impl Evaluation {
    pub fn allowed_unchanged() -> Evaluation {
        Evaluation {
            outcome: Outcome::Allowed,
            patch: json_patch::Patch(Vec::new()),
            mutated: None,
            warnings: Vec::new(),
            audit_annotations: BTreeMap::new(),
            policies: Vec::new(),
        }
    }
}

/// Evaluates every candidate policy, in order, against the request.
pub fn evaluate(request: &AdmissionRequest, policies: &PolicySet) -> Evaluation {
    let _ = (request, policies);
    Evaluation::allowed_unchanged()
}
