//! The declarative part of `match` and `exclude`: resources, operations, namespaces,
//! namespace, label and annotation selectors, and field tests. CEL conditions are
//! evaluated by the caller, which owns the CEL scope.

use crate::jsonpath::{JsonPath, PathError};
use crate::k8s::admission_request::AdmissionRequest;
use crate::namespaces::NamespaceData;
use crate::policy::CompiledPolicy;
use crate::policy::compiled::{Conditions, FieldCheck, FieldTest, Operation, Requirement};
use crate::tree::{Map, Tree};

/// The facts about a request that matching reads, computed once per review.
#[derive(Debug, Clone, Copy)]
pub struct RequestFacts<'a> {
    pub operation: Operation,
    pub group: &'a str,
    pub version: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    /// `request.namespace`: reliable, unlike `object.metadata.namespace` at CREATE.
    pub namespace: &'a str,
    /// What the caller resolved `namespace` to.
    pub namespace_data: &'a NamespaceData,
}

impl<'a> RequestFacts<'a> {
    pub fn of(
        request: &'a AdmissionRequest<'_>,
        operation: Operation,
        namespace_data: &'a NamespaceData,
    ) -> RequestFacts<'a> {
        RequestFacts {
            namespace_data,
            operation,
            group: &request.resource.group,
            version: &request.resource.version,
            resource: &request.resource.resource,
            subresource: request.sub_resource.as_deref().unwrap_or(""),
            namespace: request.namespace.as_deref().unwrap_or(""),
        }
    }
}

/// A field test whose path cannot be evaluated on the object: the policy fails, since
/// neither "holds" nor "does not hold" would be true.
#[derive(Debug)]
pub struct FieldTestError<'c> {
    /// Where the path is written, e.g. `spec.match.fields[0].path`.
    pub field: &'c str,
    pub error: PathError,
}

impl RequestFacts<'_> {
    /// The same request, as if it were about a Pod: what a `podControllers` policy sees
    /// of a controller's request while it runs on the controller's pod template.
    pub fn as_pod(&self) -> Self {
        RequestFacts {
            group: "",
            version: "v1",
            resource: "pods",
            subresource: "",
            ..*self
        }
    }

    /// Whether the request is about a Namespace itself (any subresource).
    pub fn is_namespace(&self) -> bool {
        self.group.is_empty() && self.resource == "namespaces"
    }
}

/// Which block a condition is in: a `namespaceSelector` on a cluster-scoped object
/// holds in `match` and does not hold in `exclude`, so it never skips the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    Match,
    Exclude,
}

/// Why the conditions of a block could not be decided.
#[derive(Debug)]
pub enum ConditionError<'c> {
    /// A field test's path cannot be evaluated on the object.
    FieldTest(FieldTestError<'c>),
    /// The namespace selector needs the namespace's data, which is missing: the reason.
    Namespace(String),
}

/// Whether every declarative condition of an `exclude` block holds (the CEL condition
/// is not looked at). The namespace selector is looked at last, so its data is needed
/// only when the answer depends on it.
pub fn exclude_holds<'c>(
    conditions: &'c Conditions,
    facts: &RequestFacts<'_>,
    object: &Tree<'_>,
) -> Result<bool, ConditionError<'c>> {
    let declared = object_matches(conditions, object).map_err(ConditionError::FieldTest)?;
    if !(request_matches(conditions, facts) && declared) {
        return Ok(false);
    }
    namespace_selector_holds(conditions, facts, object, Block::Exclude)
        .map_err(ConditionError::Namespace)
}

/// Whether the `namespaceSelector` holds, with a webhook's semantics: a Namespace is
/// matched on its own labels (in `object`, which is the old object at DELETE); another
/// cluster-scoped object is never skipped because of it; any other request is matched
/// on the labels of its namespace, which the caller resolved. `Err` says why the
/// namespace's data is missing when it is needed.
pub fn namespace_selector_holds(
    conditions: &Conditions,
    facts: &RequestFacts<'_>,
    object: &Tree<'_>,
    block: Block,
) -> Result<bool, String> {
    let Some(requirements) = &conditions.namespace_selector else {
        return Ok(true);
    };
    if facts.is_namespace() {
        return Ok(selector_matches(
            requirements,
            metadata_map(object, "labels"),
        ));
    }
    if facts.namespace.is_empty() {
        return Ok(block == Block::Match);
    }
    // An empty selector selects every namespace without looking at one.
    if requirements.is_empty() {
        return Ok(true);
    }
    let namespace = facts.namespace_data.known(facts.namespace)?;
    Ok(requirements_hold(requirements, |key| {
        namespace.labels.get(key).map(String::as_str)
    }))
}

/// The conditions on the request itself (resource, operation, namespace), which no
/// policy's change to the object can alter.
pub fn request_matches(conditions: &Conditions, facts: &RequestFacts<'_>) -> bool {
    request_blocker(conditions, facts).is_none()
}

/// A request condition that does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestBlocker {
    Resource,
    Operation,
    Namespace,
}

/// The first request condition that does not hold, in the order they are checked.
pub fn request_blocker(
    conditions: &Conditions,
    facts: &RequestFacts<'_>,
) -> Option<RequestBlocker> {
    let resource_holds = conditions.resources.is_empty()
        || conditions.resources.iter().any(|rule| {
            rule.matches(
                facts.group,
                facts.version,
                facts.resource,
                facts.subresource,
            )
        });
    if !resource_holds {
        return Some(RequestBlocker::Resource);
    }
    if !(conditions.operations.is_empty() || conditions.operations.contains(facts.operation)) {
        return Some(RequestBlocker::Operation);
    }
    let namespace_holds = conditions.namespaces.is_empty()
        || conditions
            .namespaces
            .iter()
            .any(|pattern| pattern.matches(facts.namespace));
    (!namespace_holds).then_some(RequestBlocker::Namespace)
}

/// The conditions on the object: selectors and field tests.
pub fn object_matches<'c>(
    conditions: &'c Conditions,
    object: &Tree<'_>,
) -> Result<bool, FieldTestError<'c>> {
    Ok(object_blocker(conditions, object)?.is_none())
}

/// The first object condition that does not hold. While nothing it reads changes, the
/// conditions as a whole cannot hold either.
pub fn object_blocker<'c>(
    conditions: &'c Conditions,
    object: &Tree<'_>,
) -> Result<Option<Blocker<'c>>, FieldTestError<'c>> {
    if !conditions.names.is_empty() && !name_matches(conditions, object) {
        return Ok(Some(Blocker::Name));
    }
    // The maps are looked up only when a selector needs them: with hundreds of
    // candidate policies, most of them have no annotation selector.
    if !conditions.labels.is_empty()
        && !selector_matches(&conditions.labels, metadata_map(object, "labels"))
    {
        return Ok(Some(Blocker::Labels));
    }
    if !conditions.annotations.is_empty()
        && !selector_matches(&conditions.annotations, metadata_map(object, "annotations"))
    {
        return Ok(Some(Blocker::Annotations));
    }
    for test in &conditions.fields {
        let holds = field_matches(test, object).map_err(|error| FieldTestError {
            field: &test.field,
            error,
        })?;
        if !holds {
            return Ok(Some(Blocker::Field(&test.path)));
        }
    }
    Ok(None)
}

/// The label gate over one object: whether a policy's `match.labels` requires a label
/// value the object does not carry, which is the state its first look would leave it in,
/// found without the look. In a large set most pod policies select the pods of other
/// applications, and this answers each with one comparison against the object's labels
/// (read once per key) instead of a run of its conditions. Only a policy's first `In`
/// requirement is tested (`CompiledPolicy::label_gate`), so "not blocked" says nothing:
/// the look decides.
pub struct LabelCheck<'o> {
    labels: Option<&'o Map<'o>>,
    /// Most gated policies test the same key (`app.kubernetes.io/name`, `app`): the last
    /// key's number and the object's value for it.
    last: Option<(u32, Option<&'o str>)>,
}

impl<'o> LabelCheck<'o> {
    pub fn new(object: &'o Tree<'o>) -> Self {
        LabelCheck {
            labels: metadata_map(object, "labels"),
            last: None,
        }
    }

    /// `Some(Blocker::Labels)` when the gate keeps `policy` out.
    pub fn blocks<'c>(&mut self, policy: &'c CompiledPolicy) -> Option<Blocker<'c>> {
        let gate = policy.label_gate?;
        let Some(Requirement::In(key, values)) = policy.matcher.labels.get(gate.requirement) else {
            return None;
        };
        let value = match self.last {
            Some((last_key, value)) if last_key == gate.key => value,
            _ => {
                let value = self.labels.and_then(|m| m.get(key)).and_then(Tree::as_str);
                self.last = Some((gate.key, value));
                value
            }
        };
        let held = value.is_some_and(|value| values.iter().any(|v| v == value));
        (!held).then_some(Blocker::Labels)
    }
}

/// Whether a `names` pattern matches the object's name or, for an object created
/// with only `generateName`, its generateName.
fn name_matches(conditions: &Conditions, object: &Tree<'_>) -> bool {
    let metadata = object.get("metadata");
    let text = |key: &str| {
        metadata
            .and_then(|m| m.get(key))
            .and_then(Tree::as_str)
            .filter(|s| !s.is_empty())
    };
    let Some(name) = text("name").or_else(|| text("generateName")) else {
        return false;
    };
    conditions.names.iter().any(|pattern| pattern.matches(name))
}

/// What kept a policy from matching the object.
#[derive(Debug, Clone, Copy)]
pub enum Blocker<'c> {
    /// `names`: only a change of `generateName` can lift it (policies cannot change names).
    Name,
    Labels,
    Annotations,
    /// A field test on this path.
    Field(&'c JsonPath),
    /// `match.cel` did not hold: it may read anything.
    MatchCel,
    /// The `exclude` block held (its CEL condition too, if it has one).
    Excluded,
    /// A `podControllers` policy did not match the controller's pod template; what kept
    /// it out lives under the template, so any change may lift it.
    Template,
}

impl Blocker<'_> {
    /// Whether what the blocker reads differs between the object as it was when the
    /// blocker kept the policy out (`then`) and as it is `now`. A subtree no policy wrote
    /// since is shared by the two, and found the same by one comparison of pointers.
    pub fn may_have_changed(&self, then: &Tree<'_>, now: &Tree<'_>) -> bool {
        let differs = |keys: &mut dyn Iterator<Item = &str>| differs_at(then, now, keys);
        match self {
            Blocker::Name => differs(&mut ["metadata", "generateName"].into_iter()),
            Blocker::Labels => differs(&mut ["metadata", "labels"].into_iter()),
            Blocker::Annotations => differs(&mut ["metadata", "annotations"].into_iter()),
            Blocker::Field(path) => differs(&mut path.leading_keys()),
            Blocker::MatchCel | Blocker::Excluded | Blocker::Template => {
                differs(&mut std::iter::empty())
            }
        }
    }
}

/// Whether the values at `keys` differ between two versions of an object.
fn differs_at(
    mut left: &Tree<'_>,
    mut right: &Tree<'_>,
    keys: &mut dyn Iterator<Item = &str>,
) -> bool {
    for key in keys {
        if left.same(right) {
            return false;
        }
        match (left.get(key), right.get(key)) {
            (Some(l), Some(r)) => (left, right) = (l, r),
            (None, None) => return false,
            _ => return true,
        }
    }
    left != right
}

fn metadata_map<'v, 't>(object: &'v Tree<'t>, name: &str) -> Option<&'v Map<'t>> {
    object.get("metadata")?.get(name)?.as_map()
}

/// Kubernetes LabelSelector semantics over an object's map; a missing map is an empty
/// map.
pub fn selector_matches(requirements: &[Requirement], map: Option<&Map<'_>>) -> bool {
    requirements_hold(requirements, |key| {
        map.and_then(|m| m.get(key)).and_then(Tree::as_str)
    })
}

/// Kubernetes LabelSelector semantics over any map, read through `get`.
pub fn requirements_hold<'m>(
    requirements: &[Requirement],
    get: impl Fn(&str) -> Option<&'m str>,
) -> bool {
    first_unmet(requirements, get).is_none()
}

/// The first of `requirements` that does not hold over the map read through `get`.
pub fn first_unmet<'r, 'm>(
    requirements: &'r [Requirement],
    get: impl Fn(&str) -> Option<&'m str>,
) -> Option<&'r Requirement> {
    requirements
        .iter()
        .find(|requirement| !requirement.holds(get(requirement.key())))
}

fn field_matches(test: &FieldTest, object: &Tree<'_>) -> Result<bool, PathError> {
    let selected = test.path.select(object)?;
    Ok(match &test.check {
        FieldCheck::Equals(expected) => selected.iter().any(|v| same(v, expected)),
        FieldCheck::In(list) => selected.iter().any(|v| list.iter().any(|x| same(v, x))),
        FieldCheck::NotIn(list) => selected.iter().all(|v| list.iter().all(|x| !same(v, x))),
        FieldCheck::Exists => !selected.is_empty(),
        FieldCheck::NotExists => selected.is_empty(),
        FieldCheck::Regex(regex) => selected
            .iter()
            .any(|v| v.as_str().is_some_and(|s| regex.is_match(s))),
    })
}

/// JSON equality where 1 and 1.0 are the same number, as a YAML author expects.
fn same(a: &Tree<'_>, b: &Tree<'_>) -> bool {
    match (a, b) {
        (Tree::Number(x), Tree::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn labels(value: serde_json::Value) -> Map<'static> {
        Tree::from(value).as_map().cloned().unwrap()
    }

    #[test]
    fn label_selector_semantics() {
        let map = labels(json!({"app": "web", "tier": "front"}));
        let check = |reqs: Vec<Requirement>| selector_matches(&reqs, Some(&map));
        assert!(check(vec![Requirement::In(
            "app".into(),
            vec!["web".into(), "api".into()]
        )]));
        assert!(!check(vec![Requirement::In(
            "app".into(),
            vec!["api".into()]
        )]));
        assert!(check(vec![Requirement::NotIn(
            "missing".into(),
            vec!["x".into()]
        )]));
        assert!(!check(vec![Requirement::NotIn(
            "app".into(),
            vec!["web".into()]
        )]));
        assert!(check(vec![Requirement::Exists("tier".into())]));
        assert!(check(vec![Requirement::DoesNotExist("other".into())]));
        assert!(!selector_matches(&[Requirement::Exists("a".into())], None));
        assert!(selector_matches(
            &[Requirement::DoesNotExist("a".into())],
            None
        ));
        assert!(selector_matches(&[], None));
    }

    #[test]
    fn numbers_compare_by_value() {
        let tree = |value| Tree::from(value);
        assert!(same(&tree(json!(1)), &tree(json!(1.0))));
        assert!(!same(&tree(json!("1")), &tree(json!(1))));
    }
}
