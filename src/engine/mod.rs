//! The pure core: (request, namespace data, policy set) -> evaluation. No I/O, no
//! clock, no globals: the caller resolves the request's namespace beforehand.
//!
//! For each candidate policy, in order: match against the object as the previous
//! policies left it, evaluate the policy's expressions (phase 1, read-only), apply
//! its mutations (phase 2), and keep or roll back the change (`journal`). The patch is
//! `json_patch::diff(original, mutated)` (taken over the subtrees policies wrote, whose
//! original values the journal keeps, so the object is edited in place and never
//! copied whole), never assembled by hand. A Pod policy with `podControllers` runs on a
//! controller's pod template as on a Pod (`pod_template`).

mod diff;
pub mod edit;
pub mod explain;
mod journal;
pub mod matching;
mod pod_template;
mod run;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::expr::RequestFields;
use crate::k8s::admission_request::AdmissionRequest;
use crate::k8s::pod_controllers;
use crate::namespaces::NamespaceData;
use crate::policy::compiled::Operation;
use crate::policy::{CompiledPolicy, PolicySet};

use journal::Journal;
use matching::{Blocker, RequestFacts};
use run::{EditedObject, PolicyRun, SharedBindings, Subject, run_policy};

/// Most passes over the candidates; later passes only look at policies that have not
/// matched yet and have not seen the latest change.
pub const MAX_PASSES: usize = 3;

/// Longest warning text: the apiserver and kubectl show warnings on one line.
pub const MAX_WARNING_CHARS: usize = 120;

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
    /// Audit mode: would have changed the object by this patch; the change was not applied.
    Audited { patch: json_patch::Patch },
    /// Failed with `failurePolicy: Ignore`: skipped, with a warning.
    Ignored { reason: String },
    /// Failed with `failurePolicy: Fail`: the request is denied.
    Failed { reason: String },
}

impl PolicyResult {
    /// A short label for logs and metrics.
    pub fn label(&self) -> &'static str {
        match self {
            PolicyResult::Applied => "applied",
            PolicyResult::Unchanged => "unchanged",
            PolicyResult::Audited { .. } => "audited",
            PolicyResult::Ignored { .. } => "ignored",
            PolicyResult::Failed { .. } => "failed",
        }
    }
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
    /// The object after every applied policy, when a policy changed it.
    pub mutated: Option<Value>,
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

    /// Names of the policies that changed the object.
    pub fn applied(&self) -> impl Iterator<Item = &str> {
        self.policies
            .iter()
            .filter(|report| report.result == PolicyResult::Applied)
            .map(|report| report.policy.as_str())
    }
}

/// Evaluates every candidate policy, in order, against the request. `namespace` is what
/// the caller resolved the request's namespace to
/// ([`crate::admission::resolve_namespace`]). The request is left as it is; `mutated`
/// holds the changed object when there is a patch.
pub fn evaluate(
    request: &AdmissionRequest,
    namespace: &NamespaceData,
    policies: &PolicySet,
) -> Evaluation {
    evaluate_copy(request, namespace, policies, &mut ())
}

/// [`evaluate`], showing each look at a policy to `observer`.
fn evaluate_copy(
    request: &AdmissionRequest,
    namespace: &NamespaceData,
    policies: &PolicySet,
    observer: &mut impl Observer,
) -> Evaluation {
    let mut object = request.object.clone();
    let mut evaluation = evaluate_observed(request, &mut object, namespace, policies, observer);
    if !evaluation.patch.0.is_empty() {
        evaluation.mutated = object;
    }
    evaluation
}

/// Evaluates the request against `object`, the request's object taken out of it, and
/// changes `object` in place (`request.object` is not read): no copy of the object is
/// made. Afterwards `object` is the object as the policies left it, or as it was when
/// the request is denied. `mutated` stays empty.
pub fn evaluate_in_place(
    request: &AdmissionRequest,
    object: &mut Option<Value>,
    namespace: &NamespaceData,
    policies: &PolicySet,
) -> Evaluation {
    evaluate_observed(request, object, namespace, policies, &mut ())
}

/// Sees every look the evaluation takes at a policy, for `graft explain`. The server's
/// evaluation uses `()`, which sees nothing and, being inlined away, costs nothing.
trait Observer {
    /// Before the policy runs, on the object as the earlier policies left it.
    fn before(&mut self, policy: &CompiledPolicy, object: &Value);
    /// After it ran: what it did, and the object as it left it.
    fn after(
        &mut self,
        policy: &CompiledPolicy,
        facts: &RequestFacts<'_>,
        run: &PolicyRun<'_>,
        object: &Value,
    );
    /// The policy starts blocked by its labels and is not looked at unless they change
    /// ([`matching::blocked_by_labels`]); `object` is the object as the request has it.
    fn blocked_up_front(
        &mut self,
        policy: &CompiledPolicy,
        facts: &RequestFacts<'_>,
        object: &Value,
    );
}

impl Observer for () {
    fn before(&mut self, _: &CompiledPolicy, _: &Value) {}
    fn after(&mut self, _: &CompiledPolicy, _: &RequestFacts<'_>, _: &PolicyRun<'_>, _: &Value) {}
    fn blocked_up_front(&mut self, _: &CompiledPolicy, _: &RequestFacts<'_>, _: &Value) {}
}

/// [`evaluate_in_place`], showing each look at a policy to `observer`.
fn evaluate_observed(
    request: &AdmissionRequest,
    object: &mut Option<Value>,
    namespace: &NamespaceData,
    policies: &PolicySet,
    observer: &mut impl Observer,
) -> Evaluation {
    let mut evaluation = Evaluation::allowed_unchanged();
    let Some(operation) = Operation::parse(&request.operation) else {
        return evaluation;
    };
    let facts = RequestFacts::of(request, operation, namespace);
    let listed = policies.candidates(
        facts.resource,
        facts.subresource,
        operation,
        facts.namespace,
    );
    // Sized once: a large set has hundreds of candidates for a pod.
    let mut candidates: Vec<&CompiledPolicy> =
        Vec::with_capacity(listed.size_hint().1.unwrap_or_default());
    candidates.extend(listed);
    if candidates.is_empty() {
        return evaluation;
    }
    let subject = match (object.as_mut(), &request.old_object) {
        (Some(object), _) => Subject::Changeable(object),
        (None, Some(old_object)) => Subject::ReadOnly(old_object),
        (None, None) => return evaluation,
    };
    let request_fields = policies
        .candidate_reads(
            facts.resource,
            facts.subresource,
            operation,
            facts.namespace,
        )
        .map_or(RequestFields::ALL, |reads| reads.request_fields);
    let shared = SharedBindings::new(request_fields);
    let mut working = EditedObject {
        subject,
        journal: Journal::new(),
    };
    let mut audited = BTreeMap::new();

    // A policy that did not match may match what a later policy wrote, and one that
    // failed under `Ignore` (leaving no trace) may succeed on it. Like the apiserver's
    // reinvocation, such policies get another look, so one review reaches the state a
    // second review would: `version` counts changes, `seen[i]` is the version policy i
    // last looked at, and a policy that matched and did not fail is done. A policy kept
    // out by a condition whose inputs nothing wrote (`blocked[i]`) stays out.
    //
    // A policy whose label selector the object fails at the start is blocked up front,
    // as its first look would leave it (`blocked_by_labels`), and looked at only if
    // the labels change; a `podControllers` policy reads the template's labels instead.
    let mut version = 0usize;
    let controller = pod_controllers::controller(facts.group, facts.resource, facts.subresource);
    let on_template = |policy: &CompiledPolicy| policy.pod_controllers && controller.is_some();
    let mut blocked = matching::blocked_by_labels(&candidates, working.subject.view(), on_template);
    let mut seen: Vec<Option<usize>> = blocked.iter().map(|b| b.map(|_| version)).collect();
    for (policy, _) in candidates.iter().zip(&blocked).filter(|(_, b)| b.is_some()) {
        observer.blocked_up_front(policy, &facts, working.subject.view());
    }
    let mut done = vec![false; candidates.len()];
    let mut selector_changes = SelectorChanges::default();
    // One entry per policy that matched, in the order they first matched; a retried
    // policy's later result replaces its earlier one.
    let mut entries: Vec<Entry> = Vec::new();
    for _pass in 0..MAX_PASSES {
        let mut looked = false;
        for (i, policy) in candidates.iter().enumerate() {
            if done[i] || seen[i].is_some_and(|v| v == version) {
                continue;
            }
            if blocked[i].is_some_and(|blocker| {
                !selector_changes.may_have_changed(blocker, &working.journal, version)
            }) {
                seen[i] = Some(version);
                continue;
            }
            looked = true;
            seen[i] = Some(version);
            observer.before(policy, working.subject.view());
            let outcome = match controller.filter(|_| policy.pod_controllers) {
                Some(controller) => pod_template::run_on_template(
                    policy,
                    controller,
                    &facts,
                    request,
                    &shared,
                    &mut working,
                ),
                None => run_policy(policy, &facts, request, &shared, &mut working),
            };
            observer.after(policy, &facts, &outcome, working.subject.view());
            blocked[i] = None;
            let result = match outcome {
                PolicyRun::NotForRequest => {
                    done[i] = true;
                    continue;
                }
                PolicyRun::NotMatched(blocker) => {
                    blocked[i] = Some(blocker);
                    continue;
                }
                PolicyRun::Matched(result) => result,
            };
            let warning = match &result {
                PolicyResult::Applied => {
                    version += 1;
                    None
                }
                PolicyResult::Unchanged => None,
                PolicyResult::Audited { patch } => {
                    audited.insert(policy.name.clone(), patch.clone());
                    Some(format!(
                        "graft: audit: policy {} would apply {} patch operation(s)",
                        policy.name,
                        patch.0.len()
                    ))
                }
                PolicyResult::Ignored { reason } => {
                    Some(format!("graft: policy {} skipped: {reason}", policy.name))
                }
                PolicyResult::Failed { reason } => {
                    evaluation.outcome = Outcome::Denied {
                        message: format!("graft: policy {}: {reason}", policy.name),
                    };
                    record(&mut entries, i, result, None);
                    report(&mut evaluation, &candidates, entries);
                    // Denied: nothing of what the policies did stays.
                    working.rollback_all();
                    return evaluation;
                }
            };
            done[i] = !matches!(result, PolicyResult::Ignored { .. });
            record(&mut entries, i, result, warning);
        }
        if !looked {
            break;
        }
    }
    report(&mut evaluation, &candidates, entries);

    let applied: Vec<&str> = evaluation.applied().collect();
    if !applied.is_empty() {
        let joined = applied.join(",");
        evaluation
            .audit_annotations
            .insert("mutated-by".to_string(), joined);
    }
    if !audited.is_empty()
        && let Ok(json) = serde_json::to_string(&audited)
    {
        evaluation
            .audit_annotations
            .insert("audit-patches".to_string(), json);
    }
    evaluation.patch = working.patch();
    evaluation
}

/// Whether the labels or the annotations were written, asked once per change instead of
/// once per blocked policy: with hundreds of candidates, most are blocked by a selector.
#[derive(Default)]
struct SelectorChanges {
    version: usize,
    labels: Option<bool>,
    annotations: Option<bool>,
}

impl SelectorChanges {
    fn may_have_changed(
        &mut self,
        blocker: Blocker<'_>,
        journal: &Journal,
        version: usize,
    ) -> bool {
        if self.version != version {
            *self = SelectorChanges {
                version,
                ..SelectorChanges::default()
            };
        }
        let slot = match blocker {
            Blocker::Labels => &mut self.labels,
            Blocker::Annotations => &mut self.annotations,
            Blocker::Name
            | Blocker::Field(_)
            | Blocker::MatchCel
            | Blocker::Excluded
            | Blocker::Template => {
                return blocker.may_have_changed(journal);
            }
        };
        *slot.get_or_insert_with(|| blocker.may_have_changed(journal))
    }
}

/// What one matched policy did, and the warning it adds to the response.
struct Entry {
    candidate: usize,
    result: PolicyResult,
    warning: Option<String>,
}

fn record(
    entries: &mut Vec<Entry>,
    candidate: usize,
    result: PolicyResult,
    warning: Option<String>,
) {
    let entry = Entry {
        candidate,
        result,
        warning,
    };
    match entries.iter_mut().find(|e| e.candidate == candidate) {
        Some(earlier) => *earlier = entry,
        None => entries.push(entry),
    }
}

fn report(evaluation: &mut Evaluation, candidates: &[&CompiledPolicy], entries: Vec<Entry>) {
    for entry in entries {
        if let Some(warning) = entry.warning {
            evaluation.warnings.push(truncate(warning));
        }
        evaluation.policies.push(PolicyReport {
            policy: candidates[entry.candidate].name.clone(),
            result: entry.result,
        });
    }
}

/// Cuts a warning to [`MAX_WARNING_CHARS`] characters, marking the cut.
fn truncate(mut text: String) -> String {
    if text.chars().count() > MAX_WARNING_CHARS {
        let cut: String = text.chars().take(MAX_WARNING_CHARS - 1).collect();
        text = cut + "…";
    }
    text
}
