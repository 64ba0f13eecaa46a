//! From validated documents to their compiled form: selectors become requirements,
//! rules are split for matching. Only documents that validated are compiled, so what is
//! read here is known to be well formed.

use super::compiled::{
    Gvk, MatchPolicy, MatchResources, NotFoundAction, ParamRef, ParamTarget, Rule, Scope,
};
use super::model;
use crate::policy::compiled::{Operation, Requirement};

/// A validated LabelSelector as requirements: `matchLabels` entries are `In` with one
/// value, then the expressions in order.
pub fn selector(selector: Option<&model::LabelSelector>) -> Vec<Requirement> {
    let Some(selector) = selector else {
        return Vec::new();
    };
    let labels = selector
        .match_labels
        .iter()
        .map(|(key, value)| Requirement::In(key.clone(), vec![value.clone()]));
    let expressions = selector.match_expressions.iter().filter_map(|expression| {
        let key = expression.key.clone();
        let values = expression.values.clone();
        match expression.operator.as_str() {
            "In" => Some(Requirement::In(key, values)),
            "NotIn" => Some(Requirement::NotIn(key, values)),
            "Exists" => Some(Requirement::Exists(key)),
            "DoesNotExist" => Some(Requirement::DoesNotExist(key)),
            // Validation refused any other operator.
            _ => None,
        }
    });
    labels.chain(expressions).collect()
}

/// A validated `matchConstraints`/`matchResources`, defaults applied.
pub fn match_resources(resources: &model::MatchResources) -> MatchResources {
    MatchResources {
        namespace_selector: selector(resources.namespace_selector.as_ref()),
        object_selector: selector(resources.object_selector.as_ref()),
        resource_rules: resources.resource_rules.iter().map(rule).collect(),
        exclude_resource_rules: resources.exclude_resource_rules.iter().map(rule).collect(),
        match_policy: match resources.match_policy.as_deref() {
            Some("Exact") => MatchPolicy::Exact,
            _ => MatchPolicy::Equivalent,
        },
    }
}

fn wildcard_or(values: &[String]) -> Option<Vec<String>> {
    (!values.iter().any(|value| value == "*")).then(|| values.to_vec())
}

fn rule(rule: &model::NamedRule) -> Rule {
    let operations = (!rule.operations.iter().any(|op| op == "*")).then(|| {
        rule.operations
            .iter()
            .filter_map(|op| Operation::parse(op))
            .collect()
    });
    Rule {
        resource_names: rule.resource_names.clone(),
        operations,
        api_groups: wildcard_or(&rule.api_groups),
        api_versions: wildcard_or(&rule.api_versions),
        resources: rule
            .resources
            .iter()
            .map(|resource| match resource.split_once('/') {
                Some((name, sub)) => (name.to_string(), sub.to_string()),
                None => (resource.clone(), String::new()),
            })
            .collect(),
        scope: match rule.scope.as_deref() {
            Some("Cluster") => Scope::Cluster,
            Some("Namespaced") => Scope::Namespaced,
            _ => Scope::Any,
        },
    }
}

/// A validated `paramRef`.
pub fn param_ref(param_ref: &model::ParamRef) -> ParamRef {
    let target = match (&param_ref.name, &param_ref.selector) {
        (Some(name), _) if !name.is_empty() => ParamTarget::Name(name.clone()),
        (_, selector) => ParamTarget::Selector(self::selector(selector.as_ref())),
    };
    ParamRef {
        target,
        namespace: param_ref
            .namespace
            .clone()
            .filter(|namespace| !namespace.is_empty()),
        not_found: match param_ref.parameter_not_found_action.as_deref() {
            Some("Allow") => NotFoundAction::Allow,
            _ => NotFoundAction::Deny,
        },
    }
}

/// A validated `paramKind`.
pub fn param_kind(kind: &model::ParamKind) -> Gvk {
    Gvk::parse(&kind.api_version, &kind.kind)
}
