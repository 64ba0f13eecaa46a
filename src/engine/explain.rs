//! `graft explain`: the evaluation the server would make, and for every policy in the
//! set why it did or did not change the object.
//!
//! The explanation rides on the real evaluation (through its `Observer`) rather than
//! re-deciding anything: what it reports as applied, skipped or failed is what the
//! server does. Only the wording of a condition that did not hold (which requirement,
//! what was wanted, what the object has) is worked out here, on the object as the
//! policy last saw it.

use std::collections::HashMap;

use crate::tree::{self, Tree};

use super::admission_policy::dispatch::{AdmissionObserver, InvocationReport, Skip};
use super::admission_policy::matching::Mismatch;
use super::matching::{
    Blocker, RequestBlocker, RequestFacts, object_blocker, request_blocker, request_matches,
};
use super::run::PolicyRun;
use super::{Cluster, Dialect, Evaluation, Observer, PolicyResult, evaluate_observed};
use crate::k8s::admission_request::AdmissionRequest;
use crate::namespaces::NamespaceData;
use crate::policy::admission_policy::compiled::{CompiledAdmissionPolicy, MatchResources};
use crate::policy::compiled::{Conditions, FieldCheck, FieldTest, Operation, Requirement};
use crate::policy::{CompiledPolicy, PolicySet, Route};

/// The evaluation, and one verdict per policy of the set, in the set's order.
#[derive(Debug)]
pub struct Explanation<'t> {
    pub evaluation: Evaluation<'t>,
    pub policies: Vec<PolicyExplanation>,
    /// Where the apiserver would not do exactly what graft did, for this request.
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PolicyExplanation {
    pub policy: String,
    /// The file the policy was loaded from.
    pub file: String,
    pub dialect: Dialect,
    /// A MutatingAdmissionPolicy is explained per binding, and per parameter object.
    pub binding: Option<String>,
    pub param: Option<String>,
    pub verdict: Verdict,
}

/// What became of one policy.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// It did not apply: the first of its conditions that did not hold, e.g.
    /// `match.labels app: want web, got api`.
    NotMatched { condition: String },
    /// It matched and changed the object ([`PolicyResult::Applied`]), by this patch
    /// (against the object as it found it), which only an explanation computes.
    Applied { patch: tree::Patch<'static> },
    /// It matched, with any other result, as the evaluation reports it.
    Matched(PolicyResult),
}

impl Verdict {
    /// One word for the verdict, as `graft explain` prints it.
    pub fn label(&self) -> &'static str {
        match self {
            Verdict::NotMatched { .. } => "not matched",
            Verdict::Matched(result) => result.label(),
            Verdict::Applied { .. } => PolicyResult::Applied.label(),
        }
    }
}

/// Evaluates `request` as [`super::evaluate`] does and explains every policy of the set.
pub fn explain<'t>(
    request: &AdmissionRequest<'t>,
    route: Option<Route<'_>>,
    cluster: &Cluster<'_>,
    policies: &PolicySet,
) -> Explanation<'t> {
    let mut explainer = Explainer::default();
    let evaluation = evaluate_observed(request, route, cluster, policies, &mut explainer);
    let namespace = &cluster.namespace;
    let operation = Operation::parse(&request.operation);
    let explained = policies
        .policies()
        .map(|policy| {
            let report = evaluation
                .policies
                .iter()
                .find(|report| report.policy == policy.name);
            let looked = explainer.looks.remove(policy.name.as_str());
            let verdict = match (report, looked) {
                (Some(report), looked) => verdict_of(&report.result, looked),
                (None, Some(Look::NotMatched(condition))) => Verdict::NotMatched { condition },
                (None, _) => Verdict::NotMatched {
                    condition: never_looked_at(policy, request, operation, namespace),
                },
            };
            PolicyExplanation {
                policy: policy.name.clone(),
                file: policy.file.display().to_string(),
                dialect: Dialect::MutationPolicy,
                binding: None,
                param: None,
                verdict,
            }
        })
        .collect::<Vec<_>>();
    let mut admission = admission_explanations(request, &evaluation, policies, &mut explainer);
    admission.extend(explained);
    let notes = defaulting_note(&evaluation, policies).into_iter().collect();
    Explanation {
        evaluation,
        policies: admission,
        notes,
    }
}

/// The apiserver decodes the object after each mutation of a MutatingAdmissionPolicy,
/// which fills in its kind's defaults (a container's `imagePullPolicy`, a Service port's
/// `targetPort`); graft cannot: when a MAP changed the object and a mutation ran after
/// it, what that mutation read may differ from what it reads in the apiserver.
fn defaulting_note(evaluation: &Evaluation<'_>, policies: &PolicySet) -> Option<String> {
    let (index, report) = evaluation.policies.iter().enumerate().find(|(_, report)| {
        report.dialect == Dialect::MutatingAdmissionPolicy && report.result == PolicyResult::Applied
    })?;
    let mutations = policies
        .admission_policies()
        .iter()
        .find(|policy| policy.name == report.policy)
        .map_or(0, |policy| policy.mutations.len());
    if mutations < 2 && index + 1 == evaluation.policies.len() {
        return None;
    }
    Some(format!(
        "{} changed the object and mutations ran after it: the apiserver fills in the \
         object's defaults after each MutatingAdmissionPolicy mutation and graft does not, \
         so a later mutation may not see a default it would see there \
         (docs/mutating-admission-policy.md, Limits)",
        report.policy
    ))
}

/// The MutatingAdmissionPolicies, explained per binding and parameter object, before
/// graft's own policies (they run first): what each invocation did, or what kept a
/// policy, a binding or an invocation out.
fn admission_explanations(
    request: &AdmissionRequest<'_>,
    evaluation: &Evaluation<'_>,
    policies: &PolicySet,
    explainer: &mut Explainer,
) -> Vec<PolicyExplanation> {
    let mut explained = Vec::new();
    for policy in policies.admission_policies() {
        let explanation = |binding: Option<&str>, param: Option<&str>, verdict| PolicyExplanation {
            policy: policy.name.clone(),
            file: policy.file.display().to_string(),
            dialect: Dialect::MutatingAdmissionPolicy,
            binding: binding.map(str::to_string),
            param: param.map(str::to_string),
            verdict,
        };
        let not_matched = |condition: String| Verdict::NotMatched { condition };
        if policy.bindings.is_empty() {
            let why = "no MutatingAdmissionPolicyBinding names it: it does nothing".to_string();
            explained.push(explanation(None, None, not_matched(why)));
            continue;
        }
        let reports: Vec<&super::PolicyReport> = evaluation
            .policies
            .iter()
            .filter(|report| {
                report.dialect == Dialect::MutatingAdmissionPolicy && report.policy == policy.name
            })
            .collect();
        // What ran is told first: a pass that skipped what another pass ran (the object
        // changed in between) does not hide it.
        if reports.is_empty()
            && let Some(why) = explainer.policy_skips.remove(&policy.name)
        {
            explained.push(explanation(None, None, not_matched(why)));
            continue;
        }
        // A policy whose match constraints could not be evaluated failed as a whole.
        if let Some(report) = reports.iter().rfind(|report| report.binding.is_none()) {
            let verdict = Verdict::Matched(report.result.clone());
            explained.push(explanation(None, None, verdict));
            continue;
        }
        let mut any = false;
        for binding in &policy.bindings {
            let bound: Vec<&&super::PolicyReport> = reports
                .iter()
                .filter(|report| report.binding.as_deref() == Some(binding.name.as_str()))
                .collect();
            let binding_key = (policy.name.clone(), binding.name.clone());
            if bound.is_empty()
                && let Some(why) = explainer.binding_skips.remove(&binding_key)
            {
                explained.push(explanation(Some(&binding.name), None, not_matched(why)));
                any = true;
                continue;
            }
            // Each invocation of the binding: over both passes, what the request saw (a
            // failure over a change, a change over none), with the operations of every
            // run that changed the object; or why it did not run.
            let mut invocations: Vec<(Option<String>, PolicyResult)> = Vec::new();
            for report in bound {
                match invocations
                    .iter_mut()
                    .find(|(param, _)| *param == report.param)
                {
                    Some((_, result)) if weight(&report.result) >= weight(result) => {
                        *result = report.result.clone();
                    }
                    Some(_) => {}
                    None => invocations.push((report.param.clone(), report.result.clone())),
                }
            }
            let mut verdicts: Vec<(Option<String>, Verdict)> = invocations
                .into_iter()
                .map(|(param, result)| {
                    let key = (policy.name.clone(), binding.name.clone(), param.clone());
                    let patch = explainer.invocation_patches.remove(&key);
                    let verdict = match (result, patch) {
                        (PolicyResult::Applied, Some(patch)) => Verdict::Applied { patch },
                        (result, _) => Verdict::Matched(result),
                    };
                    (param, verdict)
                })
                .collect();
            let skipped: Vec<_> = explainer
                .invocation_skips
                .keys()
                .filter(|(name, bound, _)| *name == policy.name && *bound == binding.name)
                .cloned()
                .collect();
            for key in skipped {
                if let Some(why) = explainer.invocation_skips.remove(&key)
                    && !verdicts.iter().any(|(param, _)| *param == key.2)
                {
                    verdicts.push((key.2.clone(), not_matched(why)));
                }
            }
            for (param, verdict) in verdicts {
                explained.push(explanation(Some(&binding.name), param.as_deref(), verdict));
                any = true;
            }
        }
        if !any {
            let why = never_invoked(request, evaluation);
            explained.push(explanation(None, None, not_matched(why)));
        }
    }
    explained
}

/// How much a result of one run says about an invocation that ran twice: a failure
/// decided the request, a change shows in the object, and no change says least.
fn weight(result: &PolicyResult) -> u8 {
    match result {
        PolicyResult::Unchanged => 0,
        PolicyResult::Applied | PolicyResult::Audited { .. } => 1,
        PolicyResult::Ignored(_) => 2,
        PolicyResult::Failed(_) => 3,
    }
}

/// Why no binding of a bound MutatingAdmissionPolicy was looked at.
fn never_invoked(request: &AdmissionRequest<'_>, evaluation: &Evaluation<'_>) -> String {
    if request.operation == "DELETE" {
        return "a MutatingAdmissionPolicy never runs at DELETE".to_string();
    }
    if matches!(evaluation.outcome, super::Outcome::Denied { .. }) {
        return "not evaluated: the request was denied before it".to_string();
    }
    format!(
        "matchConstraints.resourceRules: no rule names {} {}",
        requested_resource_of(request),
        request.operation
    )
}

/// `group/version/resource[/subresource]` of a request, the core group written `core`.
fn requested_resource_of(request: &AdmissionRequest<'_>) -> String {
    let resource = &request.resource;
    let group = if resource.group.is_empty() {
        "core"
    } else {
        &resource.group
    };
    let mut text = format!("{group}/{}/{}", resource.version, resource.resource);
    if let Some(sub) = request
        .sub_resource
        .as_deref()
        .filter(|sub| !sub.is_empty())
    {
        text.push('/');
        text.push_str(sub);
    }
    text
}

/// What the observer saw at a policy's last look.
#[derive(Debug)]
enum Look {
    NotMatched(String),
    Changed(tree::Patch<'static>),
    Other,
}

#[derive(Default)]
struct Explainer {
    /// The object before the policy now running, to diff against after it.
    before: Option<Tree<'static>>,
    looks: HashMap<String, Look>,
    /// Why a MutatingAdmissionPolicy's match constraints kept the request out, by policy
    /// (the first pass's reason: each pass asks again).
    policy_skips: HashMap<String, String>,
    /// Why a binding did not run (its match resources, no parameter objects), by
    /// (policy, binding).
    binding_skips: HashMap<(String, String), String>,
    /// Why an invocation did not run (its match conditions, a second pass it was not
    /// due in), by (policy, binding, parameter).
    invocation_skips: HashMap<InvocationKey, String>,
    /// What each invocation changed, over both passes, by (policy, binding, parameter).
    invocation_patches: HashMap<InvocationKey, tree::Patch<'static>>,
}

/// Where a skip was decided: for a whole binding, or for one invocation.
enum Level {
    Binding,
    Invocation,
}

/// (policy, binding, parameter object).
type InvocationKey = (String, String, Option<String>);

impl AdmissionObserver for Explainer {
    fn skipped(
        &mut self,
        policy: &CompiledAdmissionPolicy,
        binding: Option<&str>,
        param: Option<&str>,
        why: Skip,
    ) {
        let field = match binding {
            None => "matchConstraints".to_string(),
            Some(binding) => format!("binding {binding} matchResources"),
        };
        let resources = match binding {
            None => Some(&policy.match_constraints),
            Some(binding) => policy
                .bindings
                .iter()
                .find(|bound| bound.name == binding)
                .and_then(|bound| bound.match_resources.as_ref()),
        };
        let why_level = match why {
            Skip::NotMatched(_) | Skip::NoParams => Level::Binding,
            Skip::ConditionFalse(_) | Skip::ConditionsFailed(_) | Skip::NotDue => Level::Invocation,
        };
        let text = match why {
            Skip::NotMatched(mismatch) => mismatch_text(&field, resources, mismatch),
            Skip::NoParams => {
                "no parameter objects found, and parameterNotFoundAction is Allow".to_string()
            }
            Skip::ConditionFalse(name) => format!("matchConditions {name}: false"),
            Skip::ConditionsFailed(errors) => {
                format!("matchConditions failed, and failurePolicy is Ignore: {errors}")
            }
            Skip::NotDue => "the second pass runs only what the object changed after".to_string(),
        };
        // The first reason is kept: the second pass's "not due" says less than why the
        // first pass skipped.
        match (binding, &why_level) {
            (None, _) => {
                self.policy_skips.entry(policy.name.clone()).or_insert(text);
            }
            (Some(binding), Level::Binding) => {
                self.binding_skips
                    .entry((policy.name.clone(), binding.to_string()))
                    .or_insert(text);
            }
            (Some(binding), Level::Invocation) => {
                self.invocation_skips
                    .entry((
                        policy.name.clone(),
                        binding.to_string(),
                        param.map(str::to_string),
                    ))
                    .or_insert(text);
            }
        }
    }

    fn before_invocation(&mut self, object: &Tree<'_>) {
        self.before = Some(object.clone().into_static());
    }

    fn after_invocation(&mut self, report: &InvocationReport, object: &Tree<'_>) {
        let patch = self
            .before
            .as_ref()
            .map(|before| tree::diff(before, object).into_static())
            .unwrap_or_default();
        let Some(binding) = &report.binding else {
            return;
        };
        let key = (report.policy.clone(), binding.clone(), report.param.clone());
        // A second run's operations follow the first's: together they take the object
        // from before the first run to after the second.
        self.invocation_patches
            .entry(key)
            .or_default()
            .0
            .extend(patch.0);
    }
}

/// What of a `matchConstraints` or `matchResources` kept the request out, worded.
fn mismatch_text(field: &str, resources: Option<&MatchResources>, mismatch: Mismatch) -> String {
    match mismatch {
        Mismatch::NamespaceSelector => format!(
            "{field}.namespaceSelector: the namespace's labels do not meet {}",
            resources.map_or_else(String::new, |r| requirements_text(&r.namespace_selector))
        ),
        Mismatch::ObjectSelector => format!(
            "{field}.objectSelector: neither the object's nor the old object's labels meet {}",
            resources.map_or_else(String::new, |r| requirements_text(&r.object_selector))
        ),
        Mismatch::Excluded(index) => format!("{field}.excludeResourceRules[{index}] matches"),
        Mismatch::NoRule => format!("{field}.resourceRules: no rule matches"),
    }
}

/// Requirements as a selector reads: `app in (web), tier`.
fn requirements_text(requirements: &[Requirement]) -> String {
    requirements
        .iter()
        .map(|requirement| match requirement {
            Requirement::In(key, values) => format!("{key} in ({})", values.join(", ")),
            Requirement::NotIn(key, values) => format!("{key} notin ({})", values.join(", ")),
            Requirement::Exists(key) => key.clone(),
            Requirement::DoesNotExist(key) => format!("!{key}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

impl Observer for Explainer {
    fn before(&mut self, _policy: &CompiledPolicy, object: &Tree<'_>) {
        self.before = Some(object.clone().into_static());
    }

    fn after(
        &mut self,
        policy: &CompiledPolicy,
        facts: &RequestFacts<'_>,
        run: &PolicyRun<'_>,
        object: &Tree<'_>,
    ) {
        let look = match run {
            PolicyRun::NotForRequest => Look::NotMatched(request_condition(policy, facts)),
            PolicyRun::NotMatched(blocker) => {
                Look::NotMatched(object_condition(policy, facts, *blocker, object))
            }
            PolicyRun::Matched(PolicyResult::Applied) => Look::Changed(
                self.before
                    .as_ref()
                    .map(|before| tree::diff(before, object).into_static())
                    .unwrap_or_default(),
            ),
            PolicyRun::Matched(_) => Look::Other,
        };
        self.looks.insert(policy.name.clone(), look);
    }

    fn blocked_up_front(
        &mut self,
        policy: &CompiledPolicy,
        facts: &RequestFacts<'_>,
        object: &Tree<'_>,
    ) {
        // What its first look would have said, in the order a look checks: the request's
        // conditions, then the object's.
        let condition = if request_matches(&policy.matcher, facts) {
            match object_blocker(&policy.matcher, object) {
                Ok(Some(blocker)) => object_condition(policy, facts, blocker, object),
                _ => "match.labels".to_string(),
            }
        } else {
            request_condition(policy, facts)
        };
        self.looks
            .insert(policy.name.clone(), Look::NotMatched(condition));
    }
}

fn verdict_of(result: &PolicyResult, looked: Option<Look>) -> Verdict {
    match result {
        PolicyResult::Applied => Verdict::Applied {
            patch: match looked {
                Some(Look::Changed(patch)) => patch,
                _ => tree::Patch::default(),
            },
        },
        result => Verdict::Matched(result.clone()),
    }
}

/// Why the evaluation never ran a policy: it is not a candidate for the request, or the
/// request ended the evaluation before it (no object, an unknown operation, a denial).
fn never_looked_at(
    policy: &CompiledPolicy,
    request: &AdmissionRequest<'_>,
    operation: Option<Operation>,
    namespace: &NamespaceData,
) -> String {
    let Some(operation) = operation else {
        return format!(
            "the request's operation {:?} is none of CREATE, UPDATE, DELETE, CONNECT",
            request.operation
        );
    };
    let facts = RequestFacts::of(request, operation, namespace);
    if !request_matches(&policy.matcher, &facts) {
        return request_condition(policy, &facts);
    }
    if request.subject().is_none() {
        return "the request carries neither object nor oldObject".to_string();
    }
    "not evaluated: an earlier policy failed and denied the request".to_string()
}

/// The first request condition (resources, operations, namespaces, namespace selector)
/// that does not hold.
fn request_condition(policy: &CompiledPolicy, facts: &RequestFacts<'_>) -> String {
    let conditions = &policy.matcher;
    match request_blocker(conditions, facts) {
        Some(RequestBlocker::Resource) => {
            let want: Vec<String> = conditions
                .resources
                .iter()
                .map(ToString::to_string)
                .collect();
            format!(
                "match.resources: want {}, got {}",
                either(&want),
                requested_resource(facts)
            )
        }
        Some(RequestBlocker::Operation) => {
            let want: Vec<String> = conditions
                .operations
                .iter()
                .map(|operation| operation.as_str().to_string())
                .collect();
            format!(
                "match.operations: want {}, got {}",
                either(&want),
                facts.operation.as_str()
            )
        }
        Some(RequestBlocker::Namespace) => {
            let want: Vec<String> = conditions.namespaces.iter().map(|p| p.0.clone()).collect();
            let got = if facts.namespace.is_empty() {
                "no namespace (a cluster-scoped object)".to_string()
            } else {
                facts.namespace.to_string()
            };
            format!("match.namespaces: want {}, got {got}", either(&want))
        }
        None => namespace_selector_condition(conditions, facts)
            .unwrap_or_else(|| "the request is not the policy's".to_string()),
    }
}

/// What the request's namespace lacks for `match.namespaceSelector`.
fn namespace_selector_condition(
    conditions: &Conditions,
    facts: &RequestFacts<'_>,
) -> Option<String> {
    let requirements = conditions.namespace_selector.as_ref()?;
    let namespace = facts.namespace_data.known(facts.namespace).ok()?;
    let unmet = first_unmet(requirements, |key| {
        namespace.labels.get(key).map(String::as_str)
    })?;
    Some(format!(
        "match.namespaceSelector {unmet} (labels of namespace {})",
        facts.namespace
    ))
}

/// The condition on the object that kept the policy out.
fn object_condition(
    policy: &CompiledPolicy,
    facts: &RequestFacts<'_>,
    blocker: Blocker<'_>,
    object: &Tree<'_>,
) -> String {
    let conditions = &policy.matcher;
    match blocker {
        Blocker::Labels => {
            if let Some(unmet) = first_unmet(&conditions.labels, |key| {
                metadata_string(object, "labels", key)
            }) {
                return format!("match.labels {unmet}");
            }
            // A Namespace is matched on its own labels by the namespace selector.
            let unmet = conditions.namespace_selector.as_ref().and_then(|selector| {
                first_unmet(selector, |key| metadata_string(object, "labels", key))
            });
            match unmet {
                Some(unmet) => {
                    format!("match.namespaceSelector {unmet} (the Namespace's own labels)")
                }
                None => "match.labels".to_string(),
            }
        }
        Blocker::Annotations => first_unmet(&conditions.annotations, |key| {
            metadata_string(object, "annotations", key)
        })
        .map_or_else(
            || "match.annotations".to_string(),
            |unmet| format!("match.annotations {unmet}"),
        ),
        Blocker::Field(path) => conditions
            .fields
            .iter()
            .find(|test| std::ptr::eq(&test.path, path))
            .map_or_else(
                || format!("match.fields {}", path.source()),
                |test| field_condition(test, object),
            ),
        Blocker::MatchCel => match &conditions.cel {
            Some(cel) => format!("match.cel is false: {}", cel.source()),
            None => "match.cel".to_string(),
        },
        Blocker::Excluded => excluded_condition(policy, facts),
        Blocker::Name => {
            let want: Vec<String> = conditions.names.iter().map(|p| p.0.clone()).collect();
            let metadata = |key: &str| {
                object
                    .get("metadata")?
                    .get(key)?
                    .as_str()
                    .filter(|text| !text.is_empty())
            };
            let got = match (metadata("name"), metadata("generateName")) {
                (Some(name), _) => name.to_string(),
                (None, Some(prefix)) => format!("generateName {prefix}"),
                (None, None) => "no name".to_string(),
            };
            format!("match.names: want {}, got {got}", either(&want))
        }
        Blocker::Template => template_condition(policy, facts, object),
    }
}

/// Why a `podControllers` policy did not match the controller's pod template: the
/// condition on the Pod the template stands for.
fn template_condition(
    policy: &CompiledPolicy,
    facts: &RequestFacts<'_>,
    object: &Tree<'_>,
) -> String {
    let pod =
        crate::k8s::pod_controllers::controller(facts.group, facts.resource, facts.subresource)
            .and_then(|controller| super::pod_template::stand_in_pod(controller, object));
    let pod_facts = facts.as_pod();
    let inner = pod.as_ref().and_then(|pod| {
        // When the declarative conditions hold, `match.cel` or `exclude` kept it out,
        // which only one of them can have if the policy has not both.
        let blocker = match (object_blocker(&policy.matcher, pod), &policy.matcher.cel) {
            (Ok(Some(blocker)), _) => blocker,
            (_, Some(_)) if policy.exclude.is_some() => return None,
            (_, Some(_)) => Blocker::MatchCel,
            (_, None) => Blocker::Excluded,
        };
        Some(object_condition(policy, &pod_facts, blocker, pod))
    });
    match inner {
        Some(condition) => format!("pod template: {condition}"),
        None => "pod template: match.cel or exclude kept it out".to_string(),
    }
}

fn excluded_condition(policy: &CompiledPolicy, facts: &RequestFacts<'_>) -> String {
    let Some(exclude) = &policy.exclude else {
        return "exclude".to_string();
    };
    let mut held = Vec::new();
    if !exclude.resources.is_empty() {
        held.push(format!("resources is {}", requested_resource(facts)));
    }
    if !exclude.operations.is_empty() {
        held.push(format!("operation is {}", facts.operation.as_str()));
    }
    if !exclude.namespaces.is_empty() {
        held.push(format!("namespace is {}", facts.namespace));
    }
    if !exclude.names.is_empty() {
        held.push("names match".to_string());
    }
    if exclude.namespace_selector.is_some() {
        held.push("namespaceSelector holds".to_string());
    }
    if !exclude.labels.is_empty() {
        held.push("labels hold".to_string());
    }
    if !exclude.annotations.is_empty() {
        held.push("annotations hold".to_string());
    }
    for test in &exclude.fields {
        held.push(format!("{} holds", test.path.source()));
    }
    if let Some(cel) = &exclude.cel {
        held.push(format!("cel is true: {}", cel.source()));
    }
    format!(
        "excluded: every condition of exclude holds ({})",
        held.join("; ")
    )
}

/// The first requirement of a label selector that `get` does not meet, worded as
/// `KEY: want ..., got ...`.
/// The first requirement that does not hold, worded: what it wants and what is there.
fn first_unmet<'m>(
    requirements: &[Requirement],
    get: impl Fn(&str) -> Option<&'m str>,
) -> Option<String> {
    let requirement = super::matching::first_unmet(requirements, &get)?;
    let want = match requirement {
        Requirement::In(_, values) => either(values),
        Requirement::NotIn(_, values) => format!("anything but {}", either(values)),
        Requirement::Exists(_) => "it set".to_string(),
        Requirement::DoesNotExist(_) => "it unset".to_string(),
    };
    let key = requirement.key();
    Some(format!("{key}: want {want}, got {}", got(get(key))))
}

fn field_condition(test: &FieldTest, object: &Tree<'_>) -> String {
    let field = test.field.strip_prefix("spec.").unwrap_or(&test.field);
    let field = field.strip_suffix(".path").unwrap_or(field);
    let want = match &test.check {
        FieldCheck::Equals(value) => compact(value),
        FieldCheck::In(values) => either(&values.iter().map(compact).collect::<Vec<_>>()),
        FieldCheck::NotIn(values) => format!(
            "anything but {}",
            either(&values.iter().map(compact).collect::<Vec<_>>())
        ),
        FieldCheck::Exists => "it set".to_string(),
        FieldCheck::NotExists => "it unset".to_string(),
        FieldCheck::Regex(regex) => format!("a match of /{}/", regex.as_str()),
    };
    let selected = test.path.select(object).unwrap_or_default();
    let got = match selected.as_slice() {
        [] => "nothing".to_string(),
        [one] => compact(one),
        many => many
            .iter()
            .map(|v| compact(v))
            .collect::<Vec<_>>()
            .join(", "),
    };
    format!("{field} {}: want {want}, got {got}", test.path.source())
}

fn metadata_string<'v>(object: &'v Tree<'_>, map: &str, key: &str) -> Option<&'v str> {
    object.get("metadata")?.get(map)?.get(key)?.as_str()
}

/// `group/version/resource[/subresource]`, the core group written `core`.
fn requested_resource(facts: &RequestFacts<'_>) -> String {
    let group = if facts.group.is_empty() {
        "core"
    } else {
        facts.group
    };
    let mut text = format!("{group}/{}/{}", facts.version, facts.resource);
    if !facts.subresource.is_empty() {
        text.push('/');
        text.push_str(facts.subresource);
    }
    text
}

fn either(values: &[String]) -> String {
    match values {
        [] => "nothing".to_string(),
        [one] => one.clone(),
        many => format!("one of {}", many.join(", ")),
    }
}

fn got(value: Option<&str>) -> String {
    value.map_or_else(|| "nothing".to_string(), str::to_string)
}

/// A value as a condition shows it: a string bare, unless it reads as another JSON value
/// (`"5"` is shown quoted, so that it is not taken for the number 5).
fn compact(value: &Tree<'_>) -> String {
    match value {
        Tree::String(text) if Tree::parse(text).is_err_and(|_| !text.is_empty()) => {
            text.to_string()
        }
        other => other.to_string(),
    }
}
