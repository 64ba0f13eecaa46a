//! The apiserver's validation of MutatingAdmissionPolicy and its binding
//! (`pkg/apis/admissionregistration/validation/validation.go`), in its order and with its
//! words, on documents its defaults were applied to ([`super::model::default_policy`]).
//!
//! The CEL expressions are compiled where the apiserver compiles them, through
//! [`Expressions`], so that their errors come in the apiserver's order too.

use super::field_errors::{
    self as fe, Bad, FieldErrors, dns1035_label, dns1123_subdomain, label_value, named,
    path_segment, qualified_name,
};
use super::model::{
    AdmissionPolicyDocument, BindingDocument, LabelSelector, MatchResources, NamedRule, ObjectMeta,
    ParamKind, ParamRef,
};

/// Most match conditions a policy may have.
pub const MAX_MATCH_CONDITIONS: usize = 64;

/// The patch types a mutation may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    ApplyConfiguration,
    JsonPatch,
}

/// Compiles a policy's CEL expressions as validation reaches them. Each returns the
/// errors of the expression at `field` (the expression's own field path).
pub trait Expressions {
    fn match_condition(&mut self, field: &str, expression: &str) -> FieldErrors;
    fn variable(&mut self, field: &str, name: &str, expression: &str) -> FieldErrors;
    fn mutation(&mut self, field: &str, patch_type: PatchType, expression: &str) -> FieldErrors;
}

/// `ValidateMutatingAdmissionPolicy`.
pub fn policy(
    document: &AdmissionPolicyDocument,
    expressions: &mut dyn Expressions,
) -> FieldErrors {
    let mut errors = FieldErrors::default();
    object_meta(&document.metadata, &mut errors);
    let spec = &document.spec;
    match spec.failure_policy.as_deref() {
        None => errors.required("spec.failurePolicy", ""),
        Some("Fail" | "Ignore") => {}
        Some(other) => {
            errors.not_supported("spec.failurePolicy", named(other), &["Fail", "Ignore"])
        }
    }
    if let Some(kind) = &spec.param_kind {
        param_kind(kind, &mut errors);
    }
    match &spec.match_constraints {
        None => errors.required("spec.matchConstraints", ""),
        Some(constraints) => {
            match_resources("spec.matchConstraints", constraints, &mut errors);
            if constraints.resource_rules.is_empty() {
                errors.required("spec.matchConstraints.resourceRules", "");
            }
            admission_policy_operations("spec.matchConstraints", constraints, &mut errors);
        }
    }
    match_conditions(&spec.match_conditions, expressions, &mut errors);
    for (i, variable) in spec.variables.iter().enumerate() {
        let field = format!("spec.variables[{i}]");
        if variable.name.trim().is_empty() {
            errors.required(format!("{field}.name"), "name is not specified");
        } else if !fe::is_cel_identifier(&variable.name) {
            errors.invalid(
                format!("{field}.name"),
                Bad::Str(&variable.name),
                "must be a valid CEL identifier",
            );
        }
        if variable.expression.trim().is_empty() {
            errors.required(format!("{field}.expression"), "expression is not specified");
        } else {
            errors.0.extend(
                expressions
                    .variable(
                        &format!("{field}.expression"),
                        &variable.name,
                        &variable.expression,
                    )
                    .0,
            );
        }
    }
    if spec.mutations.is_empty() {
        errors.required("spec.mutations", "mutations must contain at least one item");
    }
    for (i, mutation) in spec.mutations.iter().enumerate() {
        let field = format!("spec.mutations[{i}]");
        let (patch_type, expression) = match mutation.patch_type.as_str() {
            "" => {
                errors.required(format!("{field}.patchType"), "");
                continue;
            }
            "JSONPatch" => {
                if mutation.apply_configuration.is_some() {
                    errors.invalid(
                        format!("{field}.applyConfiguration"),
                        Bad::Str("{applyConfiguration}"),
                        "must not be specified when patchType is JSONPatch",
                    );
                }
                match &mutation.json_patch {
                    None => {
                        errors.required(
                            format!("{field}.jsonPatch"),
                            "must be specified when patchType is JSONPatch",
                        );
                        continue;
                    }
                    Some(patch) => ((PatchType::JsonPatch, "jsonPatch"), patch),
                }
            }
            "ApplyConfiguration" => {
                if mutation.json_patch.is_some() {
                    errors.invalid(
                        format!("{field}.jsonPatch"),
                        Bad::Str("{jsonPatch}"),
                        "must not be specified when patchType is ApplyConfiguration",
                    );
                }
                match &mutation.apply_configuration {
                    None => {
                        errors.required(
                            format!("{field}.applyConfiguration"),
                            "must be specified when patchType is ApplyConfiguration",
                        );
                        continue;
                    }
                    Some(apply) => ((PatchType::ApplyConfiguration, "applyConfiguration"), apply),
                }
            }
            other => {
                errors.not_supported(
                    format!("{field}.patchType"),
                    named(other),
                    &["ApplyConfiguration", "JSONPatch"],
                );
                continue;
            }
        };
        let ((patch_type, member), expression) = (patch_type, expression);
        let at = format!("{field}.{member}.expression");
        let trimmed = expression.expression.trim();
        if trimmed.is_empty() {
            errors.required(at, "");
        } else {
            errors
                .0
                .extend(expressions.mutation(&at, patch_type, trimmed).0);
        }
    }
    match spec.reinvocation_policy.as_deref() {
        None | Some("") => errors.required("spec.reinvocationPolicy", ""),
        Some("IfNeeded" | "Never") => {}
        Some(other) => errors.not_supported(
            "spec.reinvocationPolicy",
            named(other),
            &["IfNeeded", "Never"],
        ),
    }
    errors
}

/// `ValidateMutatingAdmissionPolicyBinding`.
pub fn binding(document: &BindingDocument) -> FieldErrors {
    let mut errors = FieldErrors::default();
    object_meta(&document.metadata, &mut errors);
    let spec = &document.spec;
    if spec.policy_name.is_empty() {
        errors.required("spec.policyName", "");
    } else {
        for message in dns1123_subdomain(&spec.policy_name) {
            errors.invalid("spec.policyName", Bad::Str(&spec.policy_name), &message);
        }
    }
    if let Some(param_ref) = &spec.param_ref {
        self::param_ref(param_ref, &mut errors);
    }
    if let Some(resources) = &spec.match_resources {
        match_resources("spec.matchResources", resources, &mut errors);
        admission_policy_operations("spec.matchResources", resources, &mut errors);
    }
    errors
}

/// `ValidateObjectMeta` of a cluster-scoped object named as a DNS subdomain.
fn object_meta(metadata: &ObjectMeta, errors: &mut FieldErrors) {
    if metadata.name.is_empty() && metadata.generate_name.as_deref().unwrap_or("").is_empty() {
        errors.required("metadata.name", "name or generateName is required");
    } else if !metadata.name.is_empty() {
        for message in dns1123_subdomain(&metadata.name) {
            errors.invalid("metadata.name", Bad::Str(&metadata.name), &message);
        }
    }
    if metadata
        .namespace
        .as_deref()
        .is_some_and(|namespace| !namespace.is_empty())
    {
        errors.forbidden("metadata.namespace", "not allowed on this type");
    }
    for (key, value) in &metadata.labels {
        for message in qualified_name(key) {
            errors.invalid("metadata.labels", Bad::Str(key), &message);
        }
        for message in label_value(value) {
            errors.invalid("metadata.labels", Bad::Str(value), &message);
        }
    }
}

/// `validateParamKind`.
fn param_kind(kind: &ParamKind, errors: &mut FieldErrors) {
    const API_VERSION: &str = "spec.paramKind.apiVersion";
    if kind.api_version.is_empty() {
        errors.required(API_VERSION, "");
    } else {
        let parts: Vec<&str> = kind.api_version.split('/').collect();
        match parts.as_slice() {
            [version] => version_of(API_VERSION, version, &kind.api_version, errors),
            [group, version] => {
                let messages = if group.is_empty() {
                    Vec::new()
                } else {
                    dns1123_subdomain(group)
                };
                if !messages.is_empty() {
                    errors.invalid(API_VERSION, Bad::Str(group), &messages.join(","));
                }
                version_of(API_VERSION, version, &kind.api_version, errors);
            }
            _ => errors.invalid(
                API_VERSION,
                Bad::Str(&kind.api_version),
                &format!("unexpected GroupVersion string: {}", kind.api_version),
            ),
        }
    }
    if kind.kind.is_empty() {
        errors.required("spec.paramKind.kind", "");
    } else {
        let messages = dns1035_label(&kind.kind.to_lowercase());
        if !messages.is_empty() {
            errors.invalid(
                "spec.paramKind.kind",
                Bad::Str(&kind.kind),
                &format!(
                    "may have mixed case, but should otherwise match: {}",
                    messages.join(",")
                ),
            );
        }
    }
}

fn version_of(field: &str, version: &str, api_version: &str, errors: &mut FieldErrors) {
    if version.is_empty() {
        errors.invalid(field, Bad::Str(api_version), "version must be specified");
        return;
    }
    let messages = dns1035_label(version);
    if !messages.is_empty() {
        errors.invalid(field, Bad::Str(version), &messages.join(","));
    }
}

/// `validateMatchResources`.
fn match_resources(prefix: &str, resources: &MatchResources, errors: &mut FieldErrors) {
    match resources.match_policy.as_deref() {
        None => errors.required(format!("{prefix}.matchPolicy"), ""),
        Some("Equivalent" | "Exact") => {}
        Some(other) => errors.not_supported(
            format!("{prefix}.matchPolicy"),
            named(other),
            &["Equivalent", "Exact"],
        ),
    }
    match &resources.namespace_selector {
        None => errors.required(format!("{prefix}.namespaceSelector"), ""),
        Some(selector) => label_selector(&format!("{prefix}.namespaceSelector"), selector, errors),
    }
    match &resources.object_selector {
        None => errors.required(format!("{prefix}.objectSelector"), ""),
        Some(selector) => label_selector(&format!("{prefix}.objectSelector"), selector, errors),
    }
    for (i, rule) in resources.resource_rules.iter().enumerate() {
        named_rule(&format!("{prefix}.resourceRules[{i}]"), rule, errors);
    }
    for (i, rule) in resources.exclude_resource_rules.iter().enumerate() {
        named_rule(&format!("{prefix}.excludeResourceRules[{i}]"), rule, errors);
    }
}

/// MutatingAdmissionPolicy's own restriction: its rules match CREATE, UPDATE and CONNECT
/// only (the path has no index, as the apiserver writes it).
fn admission_policy_operations(prefix: &str, resources: &MatchResources, errors: &mut FieldErrors) {
    for rule in &resources.resource_rules {
        for operation in &rule.operations {
            if !matches!(operation.as_str(), "*" | "CREATE" | "UPDATE" | "CONNECT") {
                errors.not_supported(
                    format!("{prefix}.resourceRules.operations"),
                    named(operation),
                    &["*", "CONNECT", "CREATE", "UPDATE"],
                );
            }
        }
    }
}

/// `ValidateLabelSelector`, strict.
fn label_selector(prefix: &str, selector: &LabelSelector, errors: &mut FieldErrors) {
    for (key, value) in &selector.match_labels {
        let at = format!("{prefix}.matchLabels");
        for message in qualified_name(key) {
            errors.invalid(&at, Bad::Str(key), &message);
        }
        for message in label_value(value) {
            errors.invalid(&at, Bad::Str(value), &message);
        }
    }
    for (i, requirement) in selector.match_expressions.iter().enumerate() {
        let at = format!("{prefix}.matchExpressions[{i}]");
        match requirement.operator.as_str() {
            "In" | "NotIn" if requirement.values.is_empty() => errors.required(
                format!("{at}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            ),
            "Exists" | "DoesNotExist" if !requirement.values.is_empty() => errors.forbidden(
                format!("{at}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            ),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errors.invalid(
                format!("{at}.operator"),
                named(other),
                "not a valid selector operator",
            ),
        }
        for message in qualified_name(&requirement.key) {
            errors.invalid(format!("{at}.key"), Bad::Str(&requirement.key), &message);
        }
        for (j, value) in requirement.values.iter().enumerate() {
            for message in label_value(value) {
                errors.invalid(format!("{at}.values[{j}]"), Bad::Str(value), &message);
            }
        }
    }
}

/// `validateNamedRuleWithOperations`.
fn named_rule(prefix: &str, rule: &NamedRule, errors: &mut FieldErrors) {
    let mut seen = std::collections::HashSet::new();
    for (j, name) in rule.resource_names.iter().enumerate() {
        let at = format!("{prefix}.resourceNames[{j}]");
        for message in path_segment(name) {
            errors.invalid(&at, Bad::Str(name), &message);
        }
        if !seen.insert(name) {
            errors.duplicate(&at, Bad::Str(name));
        }
    }
    if rule.operations.is_empty() {
        errors.required(format!("{prefix}.operations"), "");
    } else if rule.operations.len() > 1 && rule.operations.iter().any(|op| op == "*") {
        errors.invalid(
            format!("{prefix}.operations"),
            Bad::Json(serde_json::Value::from(rule.operations.clone())),
            "if '*' is present, must not specify other operations",
        );
    }
    for (k, operation) in rule.operations.iter().enumerate() {
        if !matches!(
            operation.as_str(),
            "*" | "CREATE" | "UPDATE" | "DELETE" | "CONNECT"
        ) {
            errors.not_supported(
                format!("{prefix}.operations[{k}]"),
                named(operation),
                &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"],
            );
        }
    }
    rule_fields(prefix, rule, errors);
}

/// `validateRule`, subresources allowed.
fn rule_fields(prefix: &str, rule: &NamedRule, errors: &mut FieldErrors) {
    if rule.api_groups.is_empty() {
        errors.required(format!("{prefix}.apiGroups"), "");
    }
    if rule.api_groups.len() > 1 && rule.api_groups.iter().any(|group| group == "*") {
        errors.invalid(
            format!("{prefix}.apiGroups"),
            fe::list(&rule.api_groups),
            "if '*' is present, must not specify other API groups",
        );
    }
    if rule.api_versions.is_empty() {
        errors.required(format!("{prefix}.apiVersions"), "");
    }
    if rule.api_versions.len() > 1 && rule.api_versions.iter().any(|version| version == "*") {
        errors.invalid(
            format!("{prefix}.apiVersions"),
            fe::list(&rule.api_versions),
            "if '*' is present, must not specify other API versions",
        );
    }
    for (k, version) in rule.api_versions.iter().enumerate() {
        if version.is_empty() {
            errors.required(format!("{prefix}.apiVersions[{k}]"), "");
        }
    }
    resources(prefix, &rule.resources, errors);
    if let Some(scope) = &rule.scope
        && !matches!(scope.as_str(), "*" | "Cluster" | "Namespaced")
    {
        errors.not_supported(
            format!("{prefix}.scope"),
            named(scope),
            &["*", "Cluster", "Namespaced"],
        );
    }
}

/// `validateResources`: `res`, `res/sub`, `*`, `res/*`, `*/sub`, `*/*`.
fn resources(prefix: &str, resources: &[String], errors: &mut FieldErrors) {
    if resources.is_empty() {
        errors.required(format!("{prefix}.resources"), "");
    }
    let mut with_all_subresources = std::collections::HashSet::new();
    let mut all_with_subresource = std::collections::HashSet::new();
    let mut has_double_wildcard = false;
    let mut has_single_wildcard = false;
    let mut has_without_subresource = false;
    for (k, resource) in resources.iter().enumerate() {
        let at = format!("{prefix}.resources[{k}]");
        if resource.is_empty() {
            errors.required(&at, "");
            continue;
        }
        match resource.as_str() {
            "*/*" => has_double_wildcard = true,
            "*" => has_single_wildcard = true,
            _ => {}
        }
        // As the apiserver does: the last resource without a subresource decides.
        let Some((name, sub)) = resource.split_once('/') else {
            has_without_subresource = resource != "*";
            continue;
        };
        {
            if with_all_subresources.contains(name) {
                errors.invalid(
                    &at,
                    Bad::Str(resource),
                    &format!("if '{name}/*' is present, must not specify {resource}"),
                );
            }
            if all_with_subresource.contains(sub) {
                errors.invalid(
                    &at,
                    Bad::Str(resource),
                    &format!("if '*/{sub}' is present, must not specify {resource}"),
                );
            }
            if sub == "*" {
                with_all_subresources.insert(name.to_string());
            }
            if name == "*" {
                all_with_subresource.insert(sub.to_string());
            }
        }
    }
    if has_double_wildcard && resources.len() > 1 {
        errors.invalid(
            format!("{prefix}.resources"),
            fe::list(resources),
            "if '*/*' is present, must not specify other resources",
        );
    }
    if has_single_wildcard && has_without_subresource {
        errors.invalid(
            format!("{prefix}.resources"),
            fe::list(resources),
            "if '*' is present, must not specify other resources without subresources",
        );
    }
}

/// `validateMatchConditions`.
fn match_conditions(
    conditions: &[super::model::NamedExpression],
    expressions: &mut dyn Expressions,
    errors: &mut FieldErrors,
) {
    if conditions.len() > MAX_MATCH_CONDITIONS {
        errors.too_many(
            "spec.matchConditions",
            conditions.len(),
            MAX_MATCH_CONDITIONS,
        );
    }
    let mut seen = std::collections::HashSet::new();
    for (i, condition) in conditions.iter().enumerate() {
        let field = format!("spec.matchConditions[{i}]");
        let trimmed = condition.expression.trim();
        if trimmed.is_empty() {
            errors.required(format!("{field}.expression"), "");
        }
        if condition.name.is_empty() {
            errors.required(format!("{field}.name"), "");
        } else {
            for message in qualified_name(&condition.name) {
                errors.invalid(format!("{field}.name"), Bad::Str(&condition.name), &message);
            }
            if !seen.insert(&condition.name) {
                errors.duplicate(format!("{field}.name"), Bad::Str(&condition.name));
            }
        }
        if !trimmed.is_empty() {
            errors.0.extend(
                expressions
                    .match_condition(&format!("{field}.expression"), trimmed)
                    .0,
            );
        }
    }
}

/// `validateParamRef`.
fn param_ref(param_ref: &ParamRef, errors: &mut FieldErrors) {
    const FIELD: &str = "spec.paramRef";
    const EXCLUSIVE: &str = "name and selector are mutually exclusive";
    let name = param_ref.name.as_deref().filter(|name| !name.is_empty());
    if let Some(name) = name {
        for message in path_segment(name) {
            errors.invalid(format!("{FIELD}.name"), Bad::Str(name), &message);
        }
        if param_ref.selector.is_some() {
            errors.forbidden(format!("{FIELD}.name"), EXCLUSIVE);
        }
    }
    if let Some(selector) = &param_ref.selector {
        label_selector(&format!("{FIELD}.selector"), selector, errors);
        if name.is_some() {
            errors.forbidden(format!("{FIELD}.selector"), EXCLUSIVE);
        }
    }
    if name.is_none() && param_ref.selector.is_none() {
        errors.required(FIELD, "one of name or selector must be specified");
    }
    match param_ref.parameter_not_found_action.as_deref() {
        None | Some("") => errors.required(format!("{FIELD}.parameterNotFoundAction"), ""),
        Some("Deny" | "Allow") => {}
        Some(other) => errors.not_supported(
            format!("{FIELD}.parameterNotFoundAction"),
            named(other),
            &["Deny", "Allow"],
        ),
    }
}
