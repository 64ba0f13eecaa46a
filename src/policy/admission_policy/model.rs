//! Kubernetes' MutatingAdmissionPolicy and MutatingAdmissionPolicyBinding documents
//! (`admissionregistration.k8s.io` `v1`, `v1beta1` and `v1alpha1`, which share one
//! shape) as plain serde types: what a user writes, before the apiserver's defaults and
//! validation (`validate.rs`) and compilation (`compile.rs`).
//!
//! Enumerations (`failurePolicy`, `patchType`, operations, ...) are kept as the strings
//! written, so that validation can refuse a value with the apiserver's own words
//! (`Unsupported value: "X": supported values: ...`) rather than serde's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The API group of both kinds.
pub const GROUP: &str = "admissionregistration.k8s.io";
/// The versions graft reads, each the same way (the apiserver converts all three to one
/// internal type and validates that).
pub const VERSIONS: [&str; 3] = ["v1", "v1beta1", "v1alpha1"];
pub const POLICY_KIND: &str = "MutatingAdmissionPolicy";
pub const BINDING_KIND: &str = "MutatingAdmissionPolicyBinding";

/// The object metadata graft reads; the rest of `ObjectMeta` is accepted and ignored, as
/// a `kubectl apply` of the same document would keep it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// A `MutatingAdmissionPolicy` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AdmissionPolicyDocument {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: AdmissionPolicySpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AdmissionPolicySpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param_kind: Option<ParamKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_constraints: Option<MatchResources>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<NamedExpression>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mutations: Vec<Mutation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_conditions: Vec<NamedExpression>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reinvocation_policy: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ParamKind {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
}

/// `matchConstraints` of a policy, `matchResources` of a binding.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MatchResources {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_rules: Vec<NamedRule>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_resource_rules: Vec<NamedRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_policy: Option<String>,
}

/// A `NamedRuleWithOperations`: a rule, with the object names it is limited to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NamedRule {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operations: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_versions: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// A Kubernetes LabelSelector, operators kept as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<SelectorRequirement>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SelectorRequirement {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// A variable or a match condition: a name and a CEL expression.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NamedExpression {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub expression: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Mutation {
    #[serde(default)]
    pub patch_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply_configuration: Option<Expression>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_patch: Option<Expression>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expression {
    #[serde(default)]
    pub expression: String,
}

/// A `MutatingAdmissionPolicyBinding` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BindingDocument {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: BindingSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BindingSpec {
    #[serde(default)]
    pub policy_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param_ref: Option<ParamRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_resources: Option<MatchResources>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ParamRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameter_not_found_action: Option<String>,
}

/// The apiserver's defaults, applied when it decodes either kind
/// (`pkg/apis/admissionregistration/v1/defaults.go`): `failurePolicy: Fail`, and in a
/// `matchConstraints`/`matchResources` that is given, `matchPolicy: Equivalent`, empty
/// selectors and every rule's `scope: "*"`; `v1alpha1` also defaults
/// `paramRef.parameterNotFoundAction` to `Deny`. `reinvocationPolicy` has no default.
pub fn default_policy(document: &mut AdmissionPolicyDocument) {
    let spec = &mut document.spec;
    spec.failure_policy
        .get_or_insert_with(|| "Fail".to_string());
    if let Some(constraints) = &mut spec.match_constraints {
        default_match_resources(constraints);
    }
}

/// See [`default_policy`].
pub fn default_binding(document: &mut BindingDocument) {
    let alpha = document.api_version.ends_with("/v1alpha1");
    if let Some(resources) = &mut document.spec.match_resources {
        default_match_resources(resources);
    }
    if alpha && let Some(param_ref) = &mut document.spec.param_ref {
        param_ref
            .parameter_not_found_action
            .get_or_insert_with(|| "Deny".to_string());
    }
}

fn default_match_resources(resources: &mut MatchResources) {
    resources
        .match_policy
        .get_or_insert_with(|| "Equivalent".to_string());
    resources
        .namespace_selector
        .get_or_insert_with(LabelSelector::default);
    resources
        .object_selector
        .get_or_insert_with(LabelSelector::default);
    for rule in resources
        .resource_rules
        .iter_mut()
        .chain(resources.exclude_resource_rules.iter_mut())
    {
        rule.scope.get_or_insert_with(|| "*".to_string());
    }
}
