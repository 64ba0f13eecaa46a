//! The compiled form of a MutatingAdmissionPolicy and its bindings: defaults applied,
//! selectors as requirements, rules split for matching, CEL compiled once at load.

use std::path::PathBuf;
use std::sync::Arc;

use super::validate::PatchType;
use crate::expr::AdmissionExpression;
use crate::policy::compiled::{Operation, Requirement};

/// How a failure of the policy decides the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    Fail,
    Ignore,
}

/// Whether a policy that ran is run again after a later change of the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reinvocation {
    Never,
    IfNeeded,
}

/// What a binding does when its parameter objects are not found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotFoundAction {
    Allow,
    Deny,
}

pub use crate::k8s::admission_request::GroupVersionKind as Gvk;

/// One rule of `resourceRules` or `excludeResourceRules`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Empty: any name.
    pub resource_names: Vec<String>,
    /// The operations, `None` for `*`.
    pub operations: Option<Vec<Operation>>,
    /// `None` for `*`.
    pub api_groups: Option<Vec<String>>,
    pub api_versions: Option<Vec<String>>,
    /// `(resource, subresource)`, each `*` or a name; the subresource "" for none.
    pub resources: Vec<(String, String)>,
    pub scope: Scope,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Any,
    Cluster,
    Namespaced,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchPolicy {
    Equivalent,
    Exact,
}

/// A compiled `matchConstraints` or `matchResources`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchResources {
    /// Requirements on the namespace's labels; empty matches every namespace.
    pub namespace_selector: Vec<Requirement>,
    /// Requirements on the object's (or the old object's) labels; empty matches all.
    pub object_selector: Vec<Requirement>,
    pub resource_rules: Vec<Rule>,
    pub exclude_resource_rules: Vec<Rule>,
    pub match_policy: MatchPolicy,
}

impl MatchResources {
    /// Whether a rule of `resourceRules` names the request's group, version, resource,
    /// subresource and operation: what routing asks before the evaluation matches
    /// selectors, names and exclusions.
    pub fn may_match(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        subresource: &str,
        operation: Operation,
    ) -> bool {
        self.resource_rules.iter().any(|rule| {
            rule.names_request(group, version, resource, subresource)
                && rule
                    .operations
                    .as_ref()
                    .is_none_or(|operations| operations.contains(&operation))
        })
    }
}

impl Rule {
    /// Whether the rule's groups, versions and `resource/subresource` entries name these.
    pub fn names_request(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        subresource: &str,
    ) -> bool {
        let listed = |values: &Option<Vec<String>>, value: &str| {
            values
                .as_ref()
                .is_none_or(|values| values.iter().any(|v| v == value))
        };
        listed(&self.api_groups, group)
            && listed(&self.api_versions, version)
            && self.resources.iter().any(|(name, sub)| {
                (name == "*" || name == resource) && (sub == "*" || sub == subresource)
            })
    }
}

/// A binding's `paramRef`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamRef {
    pub target: ParamTarget,
    /// The namespace to look in; `None`: the request's.
    pub namespace: Option<String>,
    pub not_found: NotFoundAction,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamTarget {
    Name(String),
    /// Every object whose labels meet these requirements (`{}`: every object).
    Selector(Vec<Requirement>),
}

/// A compiled MutatingAdmissionPolicyBinding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledBinding {
    pub name: String,
    pub file: PathBuf,
    pub policy_name: String,
    pub param_ref: Option<ParamRef>,
    /// `None`: the binding does not narrow the policy's match.
    pub match_resources: Option<MatchResources>,
}

/// One mutation.
#[derive(Debug)]
pub struct Mutation {
    pub patch_type: PatchType,
    pub expression: AdmissionExpression,
}

/// A compiled MutatingAdmissionPolicy, with the bindings that make it act (a policy
/// without a binding does nothing, as in the apiserver).
#[derive(Debug)]
pub struct CompiledAdmissionPolicy {
    pub name: String,
    pub file: PathBuf,
    pub first_line: usize,
    pub param_kind: Option<Gvk>,
    pub match_constraints: MatchResources,
    /// By name, in order.
    pub match_conditions: Vec<(String, AdmissionExpression)>,
    /// By name, in order: an expression sees those before it.
    pub variables: Vec<(String, AdmissionExpression)>,
    pub mutations: Vec<Mutation>,
    pub failure_policy: FailurePolicy,
    pub reinvocation: Reinvocation,
    /// In name order.
    pub bindings: Vec<Arc<CompiledBinding>>,
}
