//! The MutatingAdmissionPolicies of a set run on a request, as the apiserver's policy
//! dispatcher runs them (`generic/policy_dispatcher.go`, `mutating/dispatcher.go`).
//!
//! A pass first finds every invocation, a (policy, binding, parameter object), matching
//! each policy's `matchConstraints` and each binding's `matchResources` against the
//! object as the pass found it, and collecting the binding's parameters. Then each
//! invocation, in order, checks its `matchConditions` on the object as the earlier
//! invocations left it and runs its mutations, each on the previous one's result; a
//! failed mutation leaves the object as it was and the next one still runs. Errors are
//! collected: at the end of the pass those of policies whose `failurePolicy` is `Fail`
//! deny the request, with the first one's message; a JSONPatch whose result does not
//! decode fails it at once, whatever the failurePolicy.
//!
//! Reinvocation follows the apiserver's bookkeeping: an `IfNeeded` invocation that ran is
//! kept aside; when the object changes after it ran (and at the end of a pass in which
//! a mutation succeeded) those kept aside are due again, and a second pass runs them.
//! graft runs that pass itself, inside the one review, after graft's own policies: the
//! apiserver's second pass comes after its webhooks, and graft's policies are one.
//!
//! The apiserver orders policies, bindings and parameters by the order of a Go map;
//! graft runs them by policy name, binding name, then parameter namespace and name.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::matching::{self, Matched};
use super::mutate::{self, MutationError};
use super::params::{self, Params};
use crate::engine::matching::RequestFacts;
use crate::engine::versions::EditedObject;
use crate::engine::{Cluster, Failure, PolicyResult};
use crate::expr::{AdmissionActivation, AdmissionBindings, AdmissionError};
use crate::k8s::admission_request::AdmissionRequest;
use crate::namespaces::NamespaceData;
use crate::params::Param;
use crate::policy::PolicySet;
use crate::policy::admission_policy::compiled::{
    CompiledAdmissionPolicy, CompiledBinding, FailurePolicy, Reinvocation,
};
use crate::policy::admission_policy::validate::PatchType;
use crate::tree::Tree;

/// Why an invocation, a binding or a policy did not run, for `graft explain`.
#[derive(Debug, Clone, PartialEq)]
pub enum Skip {
    /// The policy's `matchConstraints` (`binding` `None`) or the binding's
    /// `matchResources` kept the request out.
    NotMatched(matching::Mismatch),
    /// The binding found no parameter objects, and `parameterNotFoundAction` is Allow.
    NoParams,
    /// This match condition was false.
    ConditionFalse(String),
    /// Match conditions failed to evaluate, and the policy's failurePolicy is Ignore.
    ConditionsFailed(String),
    /// The second pass runs only the invocations whose object changed after they ran.
    NotDue,
}

/// Sees what the passes do, for `graft explain`; the server's `()` sees nothing and
/// costs nothing.
pub trait AdmissionObserver {
    /// `policy` (through `binding`, with the parameter object `param`) did not run.
    fn skipped(
        &mut self,
        _policy: &CompiledAdmissionPolicy,
        _binding: Option<&str>,
        _param: Option<&str>,
        _why: Skip,
    ) {
    }

    /// An invocation is about to run its mutations on `object`.
    fn before_invocation(&mut self, _object: &Tree<'_>) {}

    /// The invocation ran; `object` is the object as it left it.
    fn after_invocation(&mut self, _report: &InvocationReport, _object: &Tree<'_>) {}
}

impl AdmissionObserver for () {}

/// A denial: the status the apiserver would answer with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub code: u16,
    pub message: String,
}

/// What one invocation did, for the evaluation's reports.
#[derive(Debug, Clone, PartialEq)]
pub struct InvocationReport {
    pub policy: String,
    /// `None` for a problem of the policy itself (its match constraints).
    pub binding: Option<String>,
    /// `namespace/name` of the parameter object, when there is one.
    pub param: Option<String>,
    pub result: PolicyResult,
}

/// An invocation's identity across the two passes.
type Key = (String, String, String);

/// The state of the MutatingAdmissionPolicies over one review: what the second pass
/// runs again.
#[derive(Debug, Default)]
pub struct AdmissionRun {
    /// `IfNeeded` invocations that ran since the object last changed.
    invoked: BTreeSet<Key>,
    /// Invocations due in the second pass.
    reinvoke: BTreeSet<Key>,
    /// Whether a second pass is due.
    again: bool,
    /// The version of the object the first pass left (kept by it), to tell whether graft's
    /// policies changed it: a comparison of two kept roots, which share every subtree
    /// nothing wrote.
    left: Option<usize>,
}

/// What a pass reads besides the object: the request, its facts and the bindings that
/// do not change between invocations.
pub struct Context<'a, 't> {
    pub request: &'a AdmissionRequest<'t>,
    pub facts: &'a RequestFacts<'a>,
    pub cluster: &'a Cluster<'a>,
    pub policies: &'a PolicySet,
    /// The `request` binding (`super::request::binding`).
    pub request_binding: &'a Tree<'t>,
    /// `namespaceObject`: `None` for a cluster-scoped request and for a Namespace; the
    /// denial the apiserver answers with when the request's namespace does not exist,
    /// which only a pass with an invocation reaches.
    pub namespace_object: &'a Result<Option<Tree<'static>>, Denial>,
}

/// The `namespaceObject` of a request: the namespace's object, `None` for a cluster-scoped
/// request and for a Namespace itself, or the apiserver's 404 when the namespace is
/// not known.
pub fn namespace_object(
    request: &AdmissionRequest<'_>,
    cluster: &Cluster<'_>,
) -> Result<Option<Tree<'static>>, Denial> {
    let kind = &request.kind;
    let namespace = request.namespace.as_deref().unwrap_or("");
    if namespace.is_empty() || (kind.group.is_empty() && kind.kind == "Namespace") {
        return Ok(None);
    }
    match &cluster.namespace {
        NamespaceData::Known(known) => Ok(Some(known.to_object())),
        NamespaceData::NotFound { .. } => Err(Denial {
            code: 404,
            message: format!(
                "namespaces {} not found",
                crate::k8s::go_text::quote(namespace)
            ),
        }),
        // graft was given no namespace data: not the apiserver's answer, graft's.
        other => Err(Denial {
            code: 404,
            message: format!(
                "graft: the MutatingAdmissionPolicies that match this request read its \
                 namespace, and {}",
                other
                    .known(namespace)
                    .err()
                    .unwrap_or_else(|| "it is unknown".to_string())
            ),
        }),
    }
}

/// One (policy, binding, parameter) a pass runs.
struct Invocation<'p> {
    policy: &'p CompiledAdmissionPolicy,
    binding: &'p Arc<CompiledBinding>,
    param: Option<Param>,
}

impl Invocation<'_> {
    fn key(&self) -> Key {
        (
            self.policy.name.clone(),
            self.binding.name.clone(),
            self.param.as_deref().map(param_name).unwrap_or_default(),
        )
    }
}

/// `namespace/name` of a parameter object, or its name when cluster-scoped.
fn param_name(param: &Tree<'_>) -> String {
    let text = |key: &str| {
        param
            .get("metadata")
            .and_then(|metadata| metadata.get(key))
            .and_then(Tree::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (namespace, name) = (text("namespace"), text("name"));
    if namespace.is_empty() {
        name
    } else {
        format!("{namespace}/{name}")
    }
}

/// A problem a pass collected: decided by the policy's failurePolicy at the end.
struct PolicyError<'p> {
    policy: &'p CompiledAdmissionPolicy,
    /// `None` for a problem of the policy itself (its match constraints).
    binding: Option<&'p str>,
    /// The field of the policy or binding the problem is in, for the reports.
    field: &'static str,
    message: String,
}

impl PolicyError<'_> {
    /// The apiserver's words: `policy 'P' with binding 'B' denied request: ...`, or for a
    /// problem of the policy itself `policy "P" denied request: ...`.
    fn denial(&self) -> String {
        match self.binding {
            Some(binding) => format!(
                "policy '{}' with binding '{binding}' denied request: {}",
                self.policy.name, self.message
            ),
            None => format!(
                "policy \"{}\" denied request: {}",
                self.policy.name, self.message
            ),
        }
    }
}

impl AdmissionRun {
    /// The first pass.
    pub fn first_pass(
        &mut self,
        context: &Context<'_, '_>,
        edited: &mut EditedObject<'_, '_>,
        reports: &mut Vec<InvocationReport>,
        observer: &mut impl AdmissionObserver,
    ) -> Result<(), Denial> {
        let result = self.pass(context, edited, reports, false, observer);
        edited.keep_version();
        self.left = Some(edited.version());
        result
    }

    /// The second pass, when one is due: after graft's own policies, the invocations
    /// whose object changed after they ran.
    pub fn second_pass(
        &mut self,
        context: &Context<'_, '_>,
        edited: &mut EditedObject<'_, '_>,
        reports: &mut Vec<InvocationReport>,
        observer: &mut impl AdmissionObserver,
    ) -> Result<(), Denial> {
        // Changed since the first pass left it (by graft's policies): as for a webhook's
        // change, what ran is due again.
        if self
            .left
            .is_some_and(|left| edited.at(left) != edited.subject.view())
        {
            self.move_invoked();
            self.again = true;
        }
        if !self.again || self.reinvoke.is_empty() {
            return Ok(());
        }
        self.pass(context, edited, reports, true, observer)
    }

    /// The invocations that ran are due again.
    fn move_invoked(&mut self) {
        let invoked = std::mem::take(&mut self.invoked);
        self.reinvoke.extend(invoked);
    }

    fn pass(
        &mut self,
        context: &Context<'_, '_>,
        edited: &mut EditedObject<'_, '_>,
        reports: &mut Vec<InvocationReport>,
        reinvocation: bool,
        observer: &mut impl AdmissionObserver,
    ) -> Result<(), Denial> {
        let mut errors = Vec::new();
        let invocations = invocations(context, edited.subject.view(), &mut errors, observer);
        // A policy or binding that could not be matched or configured is reported as
        // failed (or ignored) as a whole: it has no invocation to report.
        reports.extend(errors.iter().map(|error| InvocationReport {
            policy: error.policy.name.clone(),
            binding: error.binding.map(str::to_string),
            param: None,
            result: result_of(error.policy, false, std::slice::from_ref(error)),
        }));
        let namespace_object = match (invocations.is_empty(), context.namespace_object) {
            (true, _) => None,
            (false, Ok(namespace)) => namespace.as_ref(),
            (false, Err(denial)) => return Err(denial.clone()),
        };
        let mut dirty = false;
        for invocation in &invocations {
            let key = invocation.key();
            let param = invocation.param.as_deref().map(param_name);
            let mut skip = |why| {
                observer.skipped(
                    invocation.policy,
                    Some(&invocation.binding.name),
                    param.as_deref(),
                    why,
                )
            };
            match conditions_hold(context, edited.subject.view(), invocation) {
                Ok(Conditions::Hold) => {}
                Ok(Conditions::False(name)) => {
                    skip(Skip::ConditionFalse(name));
                    continue;
                }
                Ok(Conditions::Ignored(errors)) => {
                    skip(Skip::ConditionsFailed(errors));
                    continue;
                }
                Err(message) => {
                    let error = PolicyError {
                        policy: invocation.policy,
                        binding: Some(&invocation.binding.name),
                        field: "spec.matchConditions",
                        message,
                    };
                    reports.push(InvocationReport {
                        policy: invocation.policy.name.clone(),
                        binding: Some(invocation.binding.name.clone()),
                        param,
                        result: result_of(invocation.policy, false, std::slice::from_ref(&error)),
                    });
                    errors.push(error);
                    continue;
                }
            }
            if reinvocation && !self.reinvoke.contains(&key) {
                skip(Skip::NotDue);
                continue;
            }
            observer.before_invocation(edited.subject.view());
            let before = edited.subject.view().clone();
            let failures_before = errors.len();
            for mutation in &invocation.policy.mutations {
                match mutate_once(context, namespace_object, edited, invocation, mutation) {
                    Ok(()) => dirty = true,
                    Err(MutationError::Status { code, message }) => {
                        return Err(Denial { code, message });
                    }
                    Err(MutationError::Policy(message)) => errors.push(PolicyError {
                        policy: invocation.policy,
                        binding: Some(&invocation.binding.name),
                        field: "spec.mutations",
                        message,
                    }),
                }
            }
            let changed = before != *edited.subject.view();
            let report = InvocationReport {
                policy: invocation.policy.name.clone(),
                binding: Some(invocation.binding.name.clone()),
                param,
                result: result_of(invocation.policy, changed, &errors[failures_before..]),
            };
            observer.after_invocation(&report, edited.subject.view());
            reports.push(report);
            if changed {
                self.move_invoked();
                self.again = true;
            }
            if invocation.policy.reinvocation == Reinvocation::IfNeeded {
                self.invoked.insert(key);
            }
        }
        if dirty {
            self.move_invoked();
            self.again = true;
        }
        match errors
            .iter()
            .find(|error| error.policy.failure_policy == FailurePolicy::Fail)
        {
            Some(first) => Err(Denial {
                code: 403,
                message: first.denial(),
            }),
            None => Ok(()),
        }
    }
}

/// What an invocation did, as the evaluation reports it.
fn result_of(
    policy: &CompiledAdmissionPolicy,
    changed: bool,
    errors: &[PolicyError<'_>],
) -> PolicyResult {
    if let Some(error) = errors.first() {
        let failure = Failure {
            field: error.field.to_string(),
            reason: error.message.clone(),
        };
        return match policy.failure_policy {
            FailurePolicy::Fail => PolicyResult::Failed(failure),
            FailurePolicy::Ignore => PolicyResult::Ignored(failure),
        };
    }
    if changed {
        PolicyResult::Applied
    } else {
        PolicyResult::Unchanged
    }
}

/// Every invocation of the pass, matched against `object` as the pass found it; the
/// problems of matching and of collecting parameters go to `errors`.
fn invocations<'p>(
    context: &Context<'p, '_>,
    object: &Tree<'_>,
    errors: &mut Vec<PolicyError<'p>>,
    observer: &mut impl AdmissionObserver,
) -> Vec<Invocation<'p>> {
    let request = context.request;
    let matched = Matched {
        facts: context.facts,
        name: request.name.as_deref().unwrap_or(""),
        object: Some(object),
        old_object: request.old_object.as_ref(),
    };
    let mut invocations = Vec::new();
    for policy in context.policies.admission_policies() {
        if policy.bindings.is_empty() {
            continue;
        }
        match matching::check(&policy.match_constraints, &matched) {
            Ok(None) => {}
            Ok(Some(mismatch)) => {
                observer.skipped(policy, None, None, Skip::NotMatched(mismatch));
                continue;
            }
            Err(error) => {
                errors.push(PolicyError {
                    policy,
                    binding: None,
                    field: "spec.matchConstraints",
                    message: format!("failed to configure policy: {}", error.0),
                });
                continue;
            }
        }
        for binding in &policy.bindings {
            if let Some(resources) = &binding.match_resources {
                match matching::check(resources, &matched) {
                    Ok(None) => {}
                    Ok(Some(mismatch)) => {
                        let why = Skip::NotMatched(mismatch);
                        observer.skipped(policy, Some(&binding.name), None, why);
                        continue;
                    }
                    Err(error) => {
                        errors.push(PolicyError {
                            policy,
                            binding: Some(&binding.name),
                            field: "spec.matchResources",
                            message: format!("failed to configure binding: {}", error.0),
                        });
                        continue;
                    }
                }
            }
            let collected = params::collect(
                policy.param_kind.as_ref(),
                binding.param_ref.as_ref(),
                context.facts.namespace,
                context.cluster.params,
            );
            match collected {
                Ok(Params::None) => invocations.push(Invocation {
                    policy,
                    binding,
                    param: None,
                }),
                Ok(Params::Objects(objects)) if objects.is_empty() => {
                    observer.skipped(policy, Some(&binding.name), None, Skip::NoParams);
                }
                Ok(Params::Objects(objects)) => {
                    invocations.extend(objects.into_iter().map(|param| Invocation {
                        policy,
                        binding,
                        param: Some(param),
                    }));
                }
                Err(message) => errors.push(PolicyError {
                    policy,
                    binding: Some(&binding.name),
                    field: "spec.paramRef",
                    message: format!("failed to configure binding: {message}"),
                }),
            }
        }
    }
    invocations
}

/// What an invocation's match conditions say.
enum Conditions {
    Hold,
    /// This one was false.
    False(String),
    /// They failed to evaluate, and the failurePolicy is Ignore: these errors.
    Ignored(String),
}

/// Whether the invocation's `matchConditions` hold on `object`: the first false one
/// skips it; errors without a false one are the policy's error (`Err`) under `Fail`,
/// and skip it under `Ignore`. `namespaceObject` is null here, as in the apiserver.
fn conditions_hold(
    context: &Context<'_, '_>,
    object: &Tree<'_>,
    invocation: &Invocation<'_>,
) -> Result<Conditions, String> {
    let policy = invocation.policy;
    if policy.match_conditions.is_empty() {
        return Ok(Conditions::Hold);
    }
    let activation = AdmissionActivation::new(AdmissionBindings {
        object: Some(object),
        old_object: context.request.old_object.as_ref(),
        request: context.request_binding,
        params: invocation.param.as_deref(),
        namespace_object: None,
        variables: &policy.variables,
    });
    let mut errors = Vec::new();
    for (name, condition) in &policy.match_conditions {
        match activation.evaluate_bool(condition) {
            Ok(true) => {}
            Ok(false) => return Ok(Conditions::False(name.clone())),
            Err(error) => errors.push(error.to_string()),
        }
    }
    let message = match errors.as_slice() {
        [] => return Ok(Conditions::Hold),
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    match policy.failure_policy {
        FailurePolicy::Ignore => Ok(Conditions::Ignored(message)),
        FailurePolicy::Fail => Err(message),
    }
}

/// Runs mutation `index` of the invocation on the object as it is, and keeps the result.
fn mutate_once(
    context: &Context<'_, '_>,
    namespace_object: Option<&Tree<'static>>,
    edited: &mut EditedObject<'_, '_>,
    invocation: &Invocation<'_>,
    mutation: &crate::policy::admission_policy::compiled::Mutation,
) -> Result<(), MutationError> {
    let kind = &context.request.kind;
    let object = edited.subject.view().clone();
    let activation = AdmissionActivation::new(AdmissionBindings {
        object: Some(&object),
        old_object: context.request.old_object.as_ref(),
        request: context.request_binding,
        params: invocation.param.as_deref(),
        namespace_object,
        variables: &invocation.policy.variables,
    });
    let policy_error = |error: AdmissionError| MutationError::Policy(error.to_string());
    let mutated = match mutation.patch_type {
        PatchType::ApplyConfiguration => {
            let value = activation
                .evaluate_apply_configuration(&mutation.expression)
                .map_err(policy_error)?;
            // The request's own object is the apiserver's decoding; anything since, a
            // mutation's result or graft's policies' edit, is validated as SMD validates.
            let object_is = if object.same(edited.at(0)) {
                crate::k8s::apply_configuration::Live::Decoded
            } else {
                crate::k8s::apply_configuration::Live::Unchecked
            };
            mutate::apply_configuration(&object, object_is, value, kind)?
        }
        PatchType::JsonPatch => {
            let operations = activation
                .evaluate_json_patch(&mutation.expression)
                .map_err(policy_error)?;
            mutate::json_patch(&object, &operations, kind)?
        }
    };
    edited.replace(mutated);
    Ok(())
}
