//! Whether a MutatingAdmissionPolicy's `matchConstraints`, or a binding's
//! `matchResources`, match a request: the apiserver's order and semantics
//! (`admission/plugin/policy/matching/matching.go` and the webhook predicates).
//!
//! 1. `namespaceSelector`, as for webhooks: a cluster-scoped object other than a
//!    Namespace always matches; a Namespace created or updated is matched on its own
//!    labels; any other request on its namespace's labels.
//! 2. `objectSelector`: the object's labels or the old object's.
//! 3. A selector that does not hold decides (an error of the other is dropped); an error
//!    is reported only when the rules match.
//! 4. `excludeResourceRules` first, then `resourceRules`: `resourceNames` against the
//!    request's name (which is "" for a CREATE by `generateName`), `scope`, operations,
//!    groups, versions, `resource/subresource`.

use crate::engine::matching::RequestFacts;
use crate::policy::admission_policy::compiled::{MatchResources, Rule, Scope};
use crate::policy::compiled::{Operation, Requirement};
use crate::tree::Tree;

/// Why matching could not decide: the apiserver's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchError(pub String);

/// What matching reads of a request besides [`RequestFacts`].
#[derive(Debug, Clone, Copy)]
pub struct Matched<'a> {
    pub facts: &'a RequestFacts<'a>,
    /// `request.name`: "" for a CREATE by `generateName`.
    pub name: &'a str,
    pub object: Option<&'a Tree<'a>>,
    pub old_object: Option<&'a Tree<'a>>,
}

/// What of `resources` kept a request out, in the order the apiserver checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mismatch {
    NamespaceSelector,
    ObjectSelector,
    /// `excludeResourceRules[i]` matched.
    Excluded(usize),
    /// No rule of `resourceRules` matched.
    NoRule,
}

/// Whether `resources` match the request.
pub fn matches(resources: &MatchResources, request: &Matched<'_>) -> Result<bool, MatchError> {
    check(resources, request).map(|mismatch| mismatch.is_none())
}

/// What of `resources` kept the request out (`None`: they match).
pub fn check(
    resources: &MatchResources,
    request: &Matched<'_>,
) -> Result<Option<Mismatch>, MatchError> {
    let namespace = namespace_selector(&resources.namespace_selector, request);
    let object = object_selector(&resources.object_selector, request);
    // A selector that did not match without error decides; its sibling's error is not
    // reported.
    if matches!(namespace, Ok(false)) {
        return Ok(Some(Mismatch::NamespaceSelector));
    }
    if !object {
        return Ok(Some(Mismatch::ObjectSelector));
    }
    if let Some(excluded) = resources
        .exclude_resource_rules
        .iter()
        .position(|rule| rule_matches(rule, request))
    {
        return Ok(Some(Mismatch::Excluded(excluded)));
    }
    let rules = resources.resource_rules.is_empty()
        || resources
            .resource_rules
            .iter()
            .any(|rule| rule_matches(rule, request));
    if !rules {
        return Ok(Some(Mismatch::NoRule));
    }
    namespace.map(|_| None)
}

/// Whether the requirements hold for a map of labels (`None`: no labels).
fn labels_hold(requirements: &[Requirement], labels: Option<&Tree<'_>>) -> bool {
    crate::engine::matching::requirements_hold(requirements, |key| {
        labels
            .and_then(|labels| labels.get(key))
            .and_then(Tree::as_str)
    })
}

fn labels_of<'t>(object: &'t Tree<'_>) -> Option<&'t Tree<'t>> {
    object
        .get("metadata")
        .and_then(|metadata| metadata.get("labels"))
}

fn namespace_selector(
    requirements: &[Requirement],
    request: &Matched<'_>,
) -> Result<bool, MatchError> {
    let facts = request.facts;
    let is_namespace = facts.group.is_empty() && facts.resource == "namespaces";
    if facts.namespace.is_empty() && !is_namespace {
        return Ok(true);
    }
    if requirements.is_empty() {
        return Ok(true);
    }
    if is_namespace
        && facts.subresource.is_empty()
        && matches!(facts.operation, Operation::Create | Operation::Update)
    {
        return Ok(labels_hold(
            requirements,
            request.object.and_then(labels_of),
        ));
    }
    let namespace = facts
        .namespace_data
        .known(facts.namespace)
        .map_err(|_| MatchError(format!("namespaces {:?} not found", facts.namespace)))?;
    Ok(crate::engine::matching::requirements_hold(
        requirements,
        |key| namespace.labels.get(key).map(String::as_str),
    ))
}

fn object_selector(requirements: &[Requirement], request: &Matched<'_>) -> bool {
    if requirements.is_empty() {
        return true;
    }
    // An object without metadata (CONNECT's options) never matches.
    let holds = |object: Option<&Tree<'_>>| {
        object
            .filter(|object| object.get("metadata").is_some())
            .is_some_and(|object| labels_hold(requirements, labels_of(object)))
    };
    holds(request.object) || holds(request.old_object)
}

/// One rule, with its `resourceNames`.
fn rule_matches(rule: &Rule, request: &Matched<'_>) -> bool {
    let facts = request.facts;
    let listed = |values: &Option<Vec<String>>, value: &str| {
        values
            .as_ref()
            .is_none_or(|values| values.iter().any(|v| v == value))
    };
    let is_namespace =
        facts.group.is_empty() && facts.version == "v1" && facts.resource == "namespaces";
    let scope = match rule.scope {
        Scope::Any => true,
        Scope::Namespaced => !is_namespace && !facts.namespace.is_empty(),
        Scope::Cluster => is_namespace || facts.namespace.is_empty(),
    };
    let operation = rule
        .operations
        .as_ref()
        .is_none_or(|operations| operations.contains(&facts.operation));
    let resource = rule.resources.iter().any(|(resource, subresource)| {
        (resource == "*" || resource == facts.resource)
            && (subresource == "*" || subresource == facts.subresource)
    });
    let name = rule.resource_names.is_empty()
        || rule.resource_names.iter().any(|name| name == request.name);
    scope
        && operation
        && listed(&rule.api_groups, facts.group)
        && listed(&rule.api_versions, facts.version)
        && resource
        && name
}
