//! The pure core: (request, namespace data, policy set) -> evaluation. No I/O, no
//! clock, no globals: the caller resolves the request's namespace beforehand.
//!
//! For each candidate policy, in order: match against the object as the previous
//! policies left it, evaluate the policy's expressions (phase 1, read-only), apply
//! its mutations (phase 2), and keep the new root or go back to the one the policy
//! started from. The object is a [`Tree`]: an edit copies only the path to what it
//! changes, so keeping a root is keeping a version of the object, and the patch is the
//! diff of the request's root and the last one (`tree::diff`, the patch
//! `json_patch::diff` gives, skipping every subtree the two share), never assembled by
//! hand. A Pod policy with `podControllers` runs on a controller's pod template as on
//! a Pod (`pod_template`).

pub mod admission_policy;
mod apply;
mod bindings;
pub mod edit;
pub mod explain;
pub mod matching;
mod plan;
mod pod_template;
mod run;
mod schedule;
mod typed_writes;
mod versions;

use std::collections::BTreeMap;

use crate::k8s::admission_request::AdmissionRequest;
use crate::k8s::pod_controllers;
use crate::namespaces::NamespaceData;
use crate::params::{NoParams, ParamSource};
use crate::policy::{CompiledPolicy, PolicySet, Route};
use crate::tree::{self, Tree};

use admission_policy::dispatch::{
    AdmissionObserver, AdmissionRun, Context, Denial, InvocationReport,
};
use bindings::SharedBindings;
use matching::{Blocker, RequestFacts};
use run::{PolicyRun, run_policy};
use schedule::{Look, Schedule};
use versions::{EditedObject, Subject};

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
        /// The HTTP status of the answer: 403, or what the apiserver answers for a
        /// MutatingAdmissionPolicy failure that is not a policy's decision (a JSONPatch
        /// whose result does not decode: 500; a missing namespace: 404).
        code: u16,
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
    Audited { patch: tree::Patch<'static> },
    /// Failed with `failurePolicy: Ignore`: skipped, with a warning.
    Ignored(Failure),
    /// Failed with `failurePolicy: Fail`: the request is denied.
    Failed(Failure),
}

/// Why a policy failed: the field of the policy it failed at (a path such as
/// `spec.mutations[0].value`) and the reason. Shown as `FIELD: REASON`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub field: String,
    pub reason: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

impl PolicyResult {
    /// A short label for logs and metrics.
    pub fn label(&self) -> &'static str {
        match self {
            PolicyResult::Applied => "applied",
            PolicyResult::Unchanged => "unchanged",
            PolicyResult::Audited { .. } => "audited",
            PolicyResult::Ignored(_) => "ignored",
            PolicyResult::Failed(_) => "failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PolicyReport {
    pub policy: String,
    pub dialect: Dialect,
    /// A MutatingAdmissionPolicy's invocation: its binding, and its parameter object
    /// (`namespace/name`) when it has one.
    pub binding: Option<String>,
    pub param: Option<String>,
    pub result: PolicyResult,
}

/// Which of graft's two policy languages a policy is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// graft's own `MutationPolicy`.
    MutationPolicy,
    /// Kubernetes' `MutatingAdmissionPolicy`, run through a binding.
    MutatingAdmissionPolicy,
}

impl Dialect {
    /// Its kind, as metrics and logs name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::MutationPolicy => "MutationPolicy",
            Dialect::MutatingAdmissionPolicy => "MutatingAdmissionPolicy",
        }
    }
}

/// The result of evaluating one request against a policy set.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation<'t> {
    pub outcome: Outcome,
    /// RFC 6902 operations turning the request's object into `object`; empty when nothing
    /// changed. Their values are `object`'s own nodes.
    pub patch: tree::Patch<'t>,
    /// The object as the policies left it. Beside the request's own root, which the
    /// evaluation never changes, this is the second root: the one the patch leads to.
    /// It is the request's root itself when no policy changed the object or the request
    /// is denied, and `None` when the request has no object (DELETE).
    pub object: Option<Tree<'t>>,
    pub warnings: Vec<String>,
    pub audit_annotations: BTreeMap<String, String>,
    /// One report per matching policy, in evaluation order.
    pub policies: Vec<PolicyReport>,
}

impl<'t> Evaluation<'t> {
    /// Allowed, with the object as it is.
    fn unchanged(object: Option<Tree<'t>>) -> Evaluation<'t> {
        Evaluation {
            outcome: Outcome::Allowed,
            patch: tree::Patch::default(),
            object,
            warnings: Vec::new(),
            audit_annotations: BTreeMap::new(),
            policies: Vec::new(),
        }
    }

    /// The changed object as JSON, when a policy changed it.
    pub fn mutated(&self) -> Option<serde_json::Value> {
        if self.patch.0.is_empty() {
            return None;
        }
        self.object.as_ref().map(Tree::to_value)
    }

    /// Names of the policies that changed the object.
    pub fn applied(&self) -> impl Iterator<Item = &str> {
        self.policies
            .iter()
            .filter(|report| report.result == PolicyResult::Applied)
            .map(|report| report.policy.as_str())
    }
}

/// What an evaluation knows of the cluster, resolved before it starts: the request
/// namespace's data (looked up, when a candidate needs it, by
/// `admission::resolve`), and where the parameter objects of MutatingAdmissionPolicy
/// bindings are found (in memory: reading one does no I/O).
#[derive(Debug, Clone)]
pub struct Cluster<'c> {
    pub namespace: NamespaceData,
    pub params: &'c dyn ParamSource,
}

impl Cluster<'static> {
    /// Nothing known of the cluster: for a request no policy needs cluster data for.
    pub fn unknown() -> Cluster<'static> {
        Cluster {
            namespace: NamespaceData::NotLookedUp,
            params: &NoParams,
        }
    }
}

/// Evaluates every policy `route` says the request is for, in order. The request is left
/// as it is: the evaluation works on its own handle of the request's root (an edit
/// copies the path to what it changes, never the request's nodes) and returns the root
/// it ends at. No route: no policy is for the request, and nothing changes.
pub fn evaluate<'t>(
    request: &AdmissionRequest<'t>,
    route: Option<Route<'_>>,
    cluster: &Cluster<'_>,
    policies: &PolicySet,
) -> Evaluation<'t> {
    evaluate_observed(request, route, cluster, policies, &mut ())
}

/// Sees every look the evaluation takes at a policy, for `graft explain`. The server's
/// evaluation uses `()`, which sees nothing and, being inlined away, costs nothing.
trait Observer {
    /// Before the policy runs, on the object as the earlier policies left it.
    fn before(&mut self, policy: &CompiledPolicy, object: &Tree<'_>);
    /// After it ran: what it did, and the object as it left it.
    fn after(
        &mut self,
        policy: &CompiledPolicy,
        facts: &RequestFacts<'_>,
        run: &PolicyRun<'_>,
        object: &Tree<'_>,
    );
    /// The policy starts blocked by its labels and is not looked at unless they change
    /// ([`matching::LabelCheck`]); `object` is the object as the request has it.
    fn blocked_up_front(
        &mut self,
        policy: &CompiledPolicy,
        facts: &RequestFacts<'_>,
        object: &Tree<'_>,
    );
}

impl Observer for () {
    fn before(&mut self, _: &CompiledPolicy, _: &Tree<'_>) {}
    fn after(&mut self, _: &CompiledPolicy, _: &RequestFacts<'_>, _: &PolicyRun<'_>, _: &Tree<'_>) {
    }
    fn blocked_up_front(&mut self, _: &CompiledPolicy, _: &RequestFacts<'_>, _: &Tree<'_>) {}
}

/// [`evaluate`], showing each look at a policy to `observer`.
///
/// The MutatingAdmissionPolicies run first, as the apiserver runs its in-tree admission
/// policies before its webhooks; then graft's own policies; then, when one is due, the
/// MutatingAdmissionPolicies' second pass (`admission_policy::dispatch`), as the
/// apiserver reinvokes them after its webhooks.
fn evaluate_observed<'t>(
    request: &AdmissionRequest<'t>,
    route: Option<Route<'_>>,
    cluster: &Cluster<'_>,
    policies: &PolicySet,
    observer: &mut (impl Observer + AdmissionObserver),
) -> Evaluation<'t> {
    let mut object = request.object.clone();
    let Some(route) = route else {
        return Evaluation::unchanged(object);
    };
    let facts = RequestFacts::of(request, route.operation, &cluster.namespace);
    let mut evaluation = Evaluation::unchanged(None);
    let Some(subject) = Subject::of(object.as_mut(), request) else {
        return evaluation;
    };
    let mut edited = EditedObject::new(subject);
    let admission = route.admission.then(|| Admission::new(request, cluster));
    let mut invocations = Vec::new();
    let mut run = AdmissionRun::default();
    let mut native = Native::default();
    let mut stages = || -> Result<(), Denial> {
        if let Some(admission) = &admission {
            let context = admission.context(request, &facts, cluster, policies);
            run.first_pass(&context, &mut edited, &mut invocations, observer)?;
        }
        if route.has_candidates() {
            run_native(
                route,
                &facts,
                request,
                policies,
                &mut edited,
                observer,
                &mut native,
            )?;
        }
        if let Some(admission) = &admission {
            let context = admission.context(request, &facts, cluster, policies);
            run.second_pass(&context, &mut edited, &mut invocations, observer)?;
        }
        Ok(())
    };
    let stages = stages();
    report_invocations(&mut evaluation, invocations);
    evaluation.warnings.extend(native.warnings);
    evaluation.policies.extend(native.reports);
    if let Err(denial) = stages {
        evaluation.outcome = Outcome::Denied {
            message: denial.message,
            code: denial.code,
        };
        // Denied: nothing of what the policies did stays.
        edited.rollback_all();
        drop(edited);
        evaluation.object = object;
        return evaluation;
    }

    let applied: Vec<&str> = evaluation.applied().collect();
    if !applied.is_empty() {
        let joined = applied.join(",");
        evaluation
            .audit_annotations
            .insert("mutated-by".to_string(), joined);
    }
    if !native.audited.is_empty() {
        // A map of names to patches of trees, whose numbers are finite: it serialises.
        let json = serde_json::to_string(&native.audited).unwrap_or_else(|error| {
            format!("graft: the audit patches could not be serialised: {error}")
        });
        evaluation
            .audit_annotations
            .insert("audit-patches".to_string(), json);
    }
    evaluation.patch = edited.patch();
    drop(edited);
    evaluation.object = object;
    evaluation
}

/// What a MutatingAdmissionPolicy pass reads that the review computes once: the
/// `request` its expressions see and the `namespaceObject`.
struct Admission<'t> {
    request_binding: Tree<'t>,
    namespace_object: Result<Option<Tree<'static>>, Denial>,
}

impl<'t> Admission<'t> {
    fn new(request: &AdmissionRequest<'t>, cluster: &Cluster<'_>) -> Admission<'t> {
        Admission {
            request_binding: admission_policy::request::binding(request),
            namespace_object: admission_policy::dispatch::namespace_object(request, cluster),
        }
    }

    fn context<'a>(
        &'a self,
        request: &'a AdmissionRequest<'t>,
        facts: &'a RequestFacts<'a>,
        cluster: &'a Cluster<'a>,
        policies: &'a PolicySet,
    ) -> Context<'a, 't> {
        Context {
            request,
            facts,
            cluster,
            policies,
            request_binding: &self.request_binding,
            namespace_object: &self.namespace_object,
        }
    }
}

/// The reports of the MutatingAdmissionPolicies' invocations, in the order they ran.
fn report_invocations(evaluation: &mut Evaluation<'_>, invocations: Vec<InvocationReport>) {
    evaluation
        .policies
        .extend(invocations.into_iter().map(|invocation| PolicyReport {
            policy: invocation.policy,
            dialect: Dialect::MutatingAdmissionPolicy,
            binding: invocation.binding,
            param: invocation.param,
            result: invocation.result,
        }));
}

/// What graft's own policies did: their reports and warnings, and the patches of the
/// audited ones.
#[derive(Default)]
struct Native {
    reports: Vec<PolicyReport>,
    warnings: Vec<String>,
    audited: BTreeMap<String, tree::Patch<'static>>,
}

/// Runs graft's own candidate policies, looking at each again after a later change
/// ([`schedule`]), into `native`. A failure under `Fail` denies the request: `Err`, the
/// denial (the failed policy reported last).
fn run_native<'c>(
    route: Route<'c>,
    facts: &RequestFacts<'_>,
    request: &AdmissionRequest<'_>,
    policies: &'c PolicySet,
    edited: &mut EditedObject<'_, '_>,
    observer: &mut impl Observer,
    native: &mut Native,
) -> Result<(), Denial> {
    let shared = SharedBindings::new(route.reads.request_fields);
    let mut version = edited.version();
    let controller = pod_controllers::controller(facts.group, facts.resource, facts.subresource);
    let on_template = |policy: &CompiledPolicy| policy.pod_controllers && controller.is_some();
    let mut schedule = Schedule::new(
        route.candidates(policies),
        matching::LabelCheck::new(edited.subject.view()),
        |policy| !on_template(policy),
        version,
    );
    for policy in schedule.blocked_up_front() {
        observer.blocked_up_front(policy, facts, edited.subject.view());
    }
    // The version the request's own labels are at: what the label gate read.
    let start = version;
    // One entry per policy that matched, in the order of their latest results: a retried
    // policy's later result replaces its earlier one.
    let mut entries: Vec<Entry> = Vec::new();
    while let Some(look) = schedule.next(version, edited) {
        let Look {
            candidate: i,
            policy,
            since,
        } = look;
        observer.before(policy, edited.subject.view());
        let outcome = match controller.filter(|_| policy.pod_controllers) {
            Some(controller) => {
                pod_template::run_on_template(policy, controller, facts, request, &shared, edited)
            }
            None => run_policy(policy, facts, request, &shared, edited),
        };
        observer.after(policy, facts, &outcome, edited.subject.view());
        let result = match outcome {
            PolicyRun::NotForRequest => {
                schedule.not_for_request(i);
                continue;
            }
            PolicyRun::NotMatched(blocker) => {
                schedule.not_matched(i, blocker);
                // What an earlier look found (changed nothing, or failed under
                // Ignore) is not what the policy makes of the object now. Only a
                // policy looked at before can have an entry.
                if since.is_some() {
                    entries.retain(|entry| entry.candidate != i);
                }
                continue;
            }
            PolicyRun::Matched(result) => result,
        };
        let warning = match &result {
            PolicyResult::Applied => {
                edited.keep_version();
                version = edited.version();
                if Blocker::Labels.may_have_changed(edited.at(start), edited.subject.view()) {
                    schedule.labels_changed(i);
                }
                None
            }
            PolicyResult::Unchanged => None,
            PolicyResult::Audited { patch } => {
                native.audited.insert(policy.name.clone(), patch.clone());
                Some(format!(
                    "graft: audit: policy {} would apply {} patch operation(s)",
                    policy.name,
                    patch.0.len()
                ))
            }
            PolicyResult::Ignored(failure) => {
                Some(format!("graft: policy {} skipped: {failure}", policy.name))
            }
            PolicyResult::Failed(failure) => {
                let denial = Denial {
                    code: 403,
                    message: format!("graft: policy {}: {failure}", policy.name),
                };
                record(&mut entries, i, result, None);
                report_native(native, &schedule, entries);
                return Err(denial);
            }
        };
        // A policy that matched and changed nothing (a `when` that was false, a
        // template that gave what is there) reads the object like one that did not
        // match: a later change gets it another look.
        schedule.matched(
            i,
            matches!(result, PolicyResult::Applied | PolicyResult::Audited { .. }),
        );
        record(&mut entries, i, result, warning);
    }
    report_native(native, &schedule, entries);
    Ok(())
}

/// The reports and warnings of graft's policies, in the order of their latest results.
fn report_native(native: &mut Native, schedule: &Schedule<'_>, entries: Vec<Entry>) {
    for entry in entries {
        if let Some(warning) = entry.warning {
            native.warnings.push(truncate(warning));
        }
        if let Some(policy) = schedule.policy(entry.candidate) {
            native.reports.push(PolicyReport {
                policy: policy.name.clone(),
                dialect: Dialect::MutationPolicy,
                binding: None,
                param: None,
                result: entry.result,
            });
        }
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
    // A retried policy's entry moves to where its latest result came: the entries, and
    // so `mutated-by`, are in the order the policies changed the object.
    entries.retain(|earlier| earlier.candidate != candidate);
    entries.push(entry);
}

/// Cuts a warning to [`MAX_WARNING_CHARS`] characters, marking the cut.
fn truncate(mut text: String) -> String {
    if text.chars().count() > MAX_WARNING_CHARS {
        let cut: String = text.chars().take(MAX_WARNING_CHARS - 1).collect();
        text = cut + "…";
    }
    text
}
