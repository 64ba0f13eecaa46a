//! The MutatingAdmissionPolicies and bindings of a policy set: each document defaulted
//! and validated as the apiserver would on `kubectl apply`, every problem a finding in
//! graft's format with the apiserver's words, then compiled; each binding attached to
//! the policy it names.

use std::collections::HashMap;
use std::sync::Arc;

use super::compile;
use super::compiled::{
    CompiledAdmissionPolicy, CompiledBinding, FailurePolicy, Mutation, NotFoundAction, Reinvocation,
};
use super::field_errors::{Bad, FieldErrors};
use super::model::{self, AdmissionPolicyDocument, BindingDocument};
use super::validate::{self, Expressions, PatchType};
use crate::expr::{AdmissionDeclarations, AdmissionError, AdmissionExpression, AdmissionKind};
use crate::policy::findings::Finding;
use crate::policy::load::{Located, locate_field};

/// Compiles every policy and binding; problems go to `findings`. The policies come out
/// sorted by name, each with its bindings sorted by name: the order graft runs them in
/// (the apiserver's order is unspecified).
pub fn compile_all(
    policies: &[Located<AdmissionPolicyDocument>],
    bindings: &[Located<BindingDocument>],
    findings: &mut Vec<Finding>,
) -> Vec<CompiledAdmissionPolicy> {
    let mut compiled: Vec<CompiledAdmissionPolicy> = Vec::new();
    let mut first_seen: HashMap<String, &Located<AdmissionPolicyDocument>> = HashMap::new();
    for located in policies {
        let mut document = located.document.clone();
        model::default_policy(&mut document);
        let name = document.metadata.name.clone();
        let mut expressions = Compiler::new(document.spec.param_kind.is_some());
        let errors = validate::policy(&document, &mut expressions);
        if !report(located, &name, "policy", errors, findings) {
            continue;
        }
        if let Some(first) = first_seen.get(&name) {
            findings.push(duplicate(located, first, &name, "MutatingAdmissionPolicy"));
            continue;
        }
        first_seen.insert(name.clone(), located);
        compiled.push(policy(&document, located, expressions));
    }
    let mut seen_bindings: HashMap<String, &Located<BindingDocument>> = HashMap::new();
    let mut bound: Vec<CompiledBinding> = Vec::new();
    // Where each binding's paramRef is written, for the findings about it.
    let mut param_ref_lines: HashMap<String, Option<usize>> = HashMap::new();
    for located in bindings {
        let mut document = located.document.clone();
        model::default_binding(&mut document);
        let name = document.metadata.name.clone();
        if !report(
            located,
            &name,
            "binding",
            validate::binding(&document),
            findings,
        ) {
            continue;
        }
        if let Some(first) = seen_bindings.get(&name) {
            findings.push(duplicate(
                located,
                first,
                &name,
                "MutatingAdmissionPolicyBinding",
            ));
            continue;
        }
        seen_bindings.insert(name.clone(), located);
        if !compiled
            .iter()
            .any(|policy| policy.name == document.spec.policy_name)
        {
            findings.push(
                Finding::warning(
                    &located.file,
                    format!(
                        "binding {name} names policy {:?}, which is not in the policy set: it does \
                         nothing",
                        document.spec.policy_name
                    ),
                )
                .at_line(locate_field(
                    &located.text,
                    located.first_line,
                    "spec.policyName",
                ))
                .in_binding(name.clone())
                .at_field("spec.policyName"),
            );
        }
        param_ref_lines.insert(
            name.clone(),
            locate_field(&located.text, located.first_line, "spec.paramRef")
                .or(Some(located.first_line)),
        );
        bound.push(binding(&document, located));
    }
    bound.sort_by(|a, b| a.name.cmp(&b.name));
    for binding in bound {
        let binding = Arc::new(binding);
        if let Some(policy) = compiled
            .iter_mut()
            .find(|policy| policy.name == binding.policy_name)
        {
            policy.bindings.push(binding);
        }
    }
    for policy in &compiled {
        if policy.bindings.is_empty() {
            findings.push(
                Finding::warning(
                    &policy.file,
                    "no MutatingAdmissionPolicyBinding names this policy: it does nothing, as in \
                     the apiserver",
                )
                .at_line(Some(policy.first_line))
                .in_policy(policy.name.clone())
                .with_hint("add a binding with spec.policyName set to this policy's name"),
            );
        }
    }
    for policy in &compiled {
        for binding in &policy.bindings {
            if let Some(finding) = fails_closed_without_params(policy, binding) {
                let line = param_ref_lines.get(&binding.name).copied().flatten();
                findings.push(finding.at_line(line));
            }
        }
    }
    compiled.sort_by(|a, b| a.name.cmp(&b.name));
    compiled
}

/// A binding whose missing parameter object denies every object its policy matches:
/// `parameterNotFoundAction: Deny` under `failurePolicy: Fail`, with no selector or match
/// condition narrowing what it matches. Until the object exists (and while graft cannot
/// read it), every such request is denied.
fn fails_closed_without_params(
    policy: &CompiledAdmissionPolicy,
    binding: &CompiledBinding,
) -> Option<Finding> {
    let param_ref = binding.param_ref.as_ref()?;
    let narrowed = |m: &super::compiled::MatchResources| {
        !m.namespace_selector.is_empty() || !m.object_selector.is_empty()
    };
    if param_ref.not_found != NotFoundAction::Deny
        || policy.failure_policy != FailurePolicy::Fail
        || !policy.match_conditions.is_empty()
        || narrowed(&policy.match_constraints)
        || binding.match_resources.as_ref().is_some_and(narrowed)
    {
        return None;
    }
    Some(
        Finding::warning(
            &binding.file,
            format!(
                "parameterNotFoundAction Deny, and policy {} fails closed and matches every \
                 object of its resources: while the parameter object is missing (not created \
                 yet, or unreadable), every such request is denied",
                policy.name
            ),
        )
        .in_binding(binding.name.clone())
        .at_field("spec.paramRef.parameterNotFoundAction")
        .with_hint(
            "use parameterNotFoundAction: Allow, failurePolicy: Ignore, or narrow the match \
             with a namespaceSelector, an objectSelector or a match condition",
        ),
    )
}

/// Adds the field errors of a document to `findings`; whether there were none.
fn report<T>(
    located: &Located<T>,
    name: &str,
    what: &str,
    errors: FieldErrors,
    findings: &mut Vec<Finding>,
) -> bool {
    let clean = errors.is_empty();
    for error in errors.0 {
        let line = locate_field(&located.text, located.first_line, &error.field)
            .or(Some(located.first_line));
        let finding = Finding::error(&located.file, error.message)
            .at_line(line)
            .at_field(error.field);
        findings.push(if what == "binding" {
            finding.in_binding(name.to_string())
        } else {
            finding.in_policy(name.to_string())
        });
    }
    clean
}

fn duplicate<T>(located: &Located<T>, first: &Located<T>, name: &str, kind: &str) -> Finding {
    Finding::error(
        &located.file,
        format!(
            "duplicate {kind} name: also defined at {}:{}",
            first.file.display(),
            first.first_line
        ),
    )
    .at_line(Some(located.first_line))
    .in_policy(name.to_string())
    .at_field("metadata.name")
    .with_hint(format!("{kind} names must be unique across all files"))
}

/// The expressions of a policy, compiled as validation reaches them (the apiserver
/// compiles them there too, so their errors come in its order).
struct Compiler {
    params: bool,
    /// The variables' names so far: what a later variable may read.
    variable_names: Vec<String>,
    match_conditions: Vec<AdmissionExpression>,
    variables: Vec<AdmissionExpression>,
    mutations: Vec<Mutation>,
    /// Whether an expression failed to compile (validation reports it).
    failed: bool,
}

impl Compiler {
    fn new(params: bool) -> Compiler {
        Compiler {
            params,
            variable_names: Vec::new(),
            match_conditions: Vec::new(),
            variables: Vec::new(),
            mutations: Vec::new(),
            failed: false,
        }
    }

    fn compile(
        &mut self,
        field: &str,
        source: &str,
        kind: AdmissionKind,
        variables: usize,
    ) -> Result<AdmissionExpression, FieldErrors> {
        let declarations = AdmissionDeclarations {
            params: self.params,
            variables: &self.variable_names[..variables.min(self.variable_names.len())],
            kind,
        };
        AdmissionExpression::compile(source, &declarations).map_err(|error| {
            self.failed = true;
            let mut errors = FieldErrors::default();
            match error {
                // cel-go's errors when it builds the program are the apiserver's
                // internal errors.
                AdmissionError::Instantiation(_) => errors.internal(field, &error.to_string()),
                error => errors.invalid(field, Bad::Str(source), &error.to_string()),
            }
            errors
        })
    }
}

impl Expressions for Compiler {
    fn match_condition(&mut self, field: &str, expression: &str) -> FieldErrors {
        match self.compile(field, expression, AdmissionKind::MatchCondition, usize::MAX) {
            Ok(compiled) => {
                self.match_conditions.push(compiled);
                FieldErrors::default()
            }
            Err(errors) => errors,
        }
    }

    fn variable(&mut self, field: &str, name: &str, expression: &str) -> FieldErrors {
        let earlier = self.variable_names.len();
        let result = self.compile(field, expression, AdmissionKind::Variable, earlier);
        // Visible to the expressions after it even when it failed, which is reported.
        self.variable_names.push(name.to_string());
        match result {
            Ok(compiled) => {
                self.variables.push(compiled);
                FieldErrors::default()
            }
            Err(errors) => errors,
        }
    }

    fn mutation(&mut self, field: &str, patch_type: PatchType, expression: &str) -> FieldErrors {
        let kind = match patch_type {
            PatchType::ApplyConfiguration => AdmissionKind::ApplyConfiguration,
            PatchType::JsonPatch => AdmissionKind::JsonPatch,
        };
        match self.compile(field, expression, kind, usize::MAX) {
            Ok(expression) => {
                self.mutations.push(Mutation {
                    patch_type,
                    expression,
                });
                FieldErrors::default()
            }
            Err(errors) => errors,
        }
    }
}

/// A validated, defaulted policy.
fn policy(
    document: &AdmissionPolicyDocument,
    located: &Located<AdmissionPolicyDocument>,
    expressions: Compiler,
) -> CompiledAdmissionPolicy {
    let spec = &document.spec;
    let named = |items: &[model::NamedExpression], compiled: Vec<AdmissionExpression>| {
        items
            .iter()
            .map(|item| item.name.clone())
            .zip(compiled)
            .collect()
    };
    CompiledAdmissionPolicy {
        name: document.metadata.name.clone(),
        file: located.file.clone(),
        first_line: located.first_line,
        param_kind: spec.param_kind.as_ref().map(compile::param_kind),
        match_constraints: spec
            .match_constraints
            .as_ref()
            .map(compile::match_resources)
            .unwrap_or_else(|| compile::match_resources(&model::MatchResources::default())),
        match_conditions: named(&spec.match_conditions, expressions.match_conditions),
        variables: named(&spec.variables, expressions.variables),
        mutations: expressions.mutations,
        failure_policy: match spec.failure_policy.as_deref() {
            Some("Ignore") => FailurePolicy::Ignore,
            _ => FailurePolicy::Fail,
        },
        reinvocation: match spec.reinvocation_policy.as_deref() {
            Some("IfNeeded") => Reinvocation::IfNeeded,
            _ => Reinvocation::Never,
        },
        bindings: Vec::new(),
    }
}

fn binding(document: &BindingDocument, located: &Located<BindingDocument>) -> CompiledBinding {
    CompiledBinding {
        name: document.metadata.name.clone(),
        file: located.file.clone(),
        policy_name: document.spec.policy_name.clone(),
        param_ref: document.spec.param_ref.as_ref().map(compile::param_ref),
        match_resources: document
            .spec
            .match_resources
            .as_ref()
            .map(compile::match_resources),
    }
}
