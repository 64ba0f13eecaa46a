//! The policy document as users write it: plain serde types, no behaviour.
//!
//! Every struct denies unknown fields, so a typo is a lint finding rather than a
//! silently ignored setting. Compilation (JSONPath, CEL, regex) happens in
//! [`crate::policy::compile`]; these types only describe the YAML.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The only `apiVersion` graft understands.
pub const API_VERSION: &str = "graft.dev/v1alpha1";
/// The only `kind` graft understands.
pub const KIND: &str = "MutationPolicy";

/// One `MutationPolicy` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(title = "MutationPolicy")]
pub struct PolicyDocument {
    /// Must be `graft.dev/v1alpha1`.
    pub api_version: String,
    /// Must be `MutationPolicy`.
    pub kind: String,
    pub metadata: Metadata,
    pub spec: PolicySpec,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Metadata {
    /// Unique across the whole policy set; used in logs, metrics, warnings and auditAnnotations.
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicySpec {
    /// Policies run in ascending `order`, then by name. Each sees the output of the previous ones.
    #[serde(default)]
    pub order: i32,
    /// What a failure of this policy (a CEL error, a failed validation) does to the request.
    #[serde(default)]
    pub failure_policy: FailurePolicy,
    /// `Enforce` applies the change; `Audit` computes and reports it without applying it.
    #[serde(default)]
    pub mode: Mode,
    /// Free data, available to expressions as `params`.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub params: Value,
    /// Also apply this Pod policy to the pod templates of Deployments, ReplicaSets,
    /// StatefulSets, DaemonSets, Jobs (`spec.template`) and CronJobs
    /// (`spec.jobTemplate.spec.template`): the template is matched and mutated as a Pod.
    #[serde(default, skip_serializing_if = "is_false")]
    pub pod_controllers: bool,
    /// Which requests the policy applies to.
    #[serde(rename = "match")]
    pub match_: Match,
    /// Requests that satisfy every condition given here are skipped, even when `match` holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclude: Option<Match>,
    /// Named CEL expressions, evaluated in order after matching; available as `variables.NAME`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<Variable>,
    /// CEL checks evaluated after the variables; a false one is a policy failure with its message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validations: Vec<Validation>,
    /// Applied in order to a copy of the object.
    pub mutations: Vec<Mutation>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum FailurePolicy {
    /// Deny the request, naming the policy, the field and the reason.
    #[default]
    Fail,
    /// Skip this policy and add a warning to the response.
    Ignore,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Mode {
    #[default]
    Enforce,
    Audit,
}

/// Conditions on the request and the object; all given ones must hold.
///
/// `spec.match` and `spec.exclude` share this shape. In `match`, `resources` is required;
/// in `exclude`, an empty list means any resource.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Match {
    /// Plural resource names: `pods`, `nodes/status`, `apps/v1/statefulsets`, `apps/*/statefulsets`, `*`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT` or `*`. Empty means every operation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operations: Vec<String>,
    /// Namespace names or `*` globs, compared with `request.namespace`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// Object names or `*` globs, compared with `metadata.name`; an object created with
    /// only `metadata.generateName` is compared by its generateName (`web-*` matches the
    /// generateName `web-`; `web` does not).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// A label selector over the labels of the request's namespace, as a webhook's
    /// `namespaceSelector`: a Namespace object is matched on its own labels, and other
    /// cluster-scoped objects are never skipped because of it (it holds in `match` and
    /// does not hold in `exclude`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Shorthand for `labelSelector.matchLabels`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Shorthand for `annotationSelector.matchLabels`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotation_selector: Option<LabelSelector>,
    /// Tests on JSONPath selections of the object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldTest>,
    /// A CEL expression that must evaluate to `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<String>,
}

/// Kubernetes LabelSelector semantics.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<SelectorRequirement>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SelectorRequirement {
    pub key: String,
    pub operator: SelectorOperator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SelectorOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// A test on the values an RFC 9535 JSONPath selects from the object.
///
/// Exactly one test is given. `equals`, `in` and `regex` hold when any selected value
/// passes; `notIn` holds when no selected value is in the list (and so when nothing is
/// selected); `exists: true` holds when something is selected.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FieldTest {
    /// For example `$.spec.nodeSelector['dynamo.nodeAlias']`.
    pub path: String,
    /// Holds when a selected value is this value, of the same JSON type (`equals: null`
    /// holds for a field that is there and `null`).
    #[serde(
        default,
        deserialize_with = "present_value",
        skip_serializing_if = "Option::is_none"
    )]
    pub equals: Option<Value>,
    #[serde(default, rename = "in", skip_serializing_if = "Option::is_none")]
    pub in_: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_in: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exists: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_exists: Option<bool>,
    /// A regular expression (Rust `regex` syntax, linear time) matched against string values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Variable {
    pub name: String,
    pub expression: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Validation {
    /// A CEL expression that must evaluate to `true`.
    pub expression: String,
    /// Reported when the expression is false.
    pub message: String,
}

/// One change to the object: exactly one of `set`, `merge`, `append`, `remove`, `jsonPatch`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Mutation {
    /// Run the mutation once per value this JSONPath selects (every container, say:
    /// `$.spec['containers','initContainers'][*]`). Its paths then start at the element,
    /// with `@` (`@.imagePullPolicy`), and its `when` and templates see the element as
    /// `element` and its position in its list as `index`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreach: Option<String>,
    /// Set the value at a JSONPath location, creating missing parents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<SetMutation>,
    /// Merge a fragment: maps recursively, the lists Kubernetes merges by key (containers by
    /// `name`, volumeMounts by `mountPath`, ...) item by item; other values replace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeMutation>,
    /// Add items to a list unless an equal item is already there (tolerations, args).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<AppendMutation>,
    /// Remove every location the JSONPath selects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove: Option<RemoveMutation>,
    /// Raw RFC 6902 operations, applied to the object as mutated so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_patch: Option<Vec<JsonPatchOperation>>,
    /// Optional CEL condition; the mutation is skipped when it is false. Under `foreach`
    /// it is evaluated per element.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SetMutation {
    pub path: String,
    /// Any YAML value; strings may hold `{{ cel }}` templates.
    pub value: Value,
    /// Write only where nothing is set yet (the location is absent or null): a default.
    #[serde(default, skip_serializing_if = "is_false")]
    pub if_absent: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MergeMutation {
    /// Where the fragment is merged; the object root (or, under `foreach`, the element)
    /// when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The fragment; strings may hold `{{ cel }}` templates.
    pub value: Value,
    /// Add only what is absent: keys not there yet and named list items not there yet,
    /// at any depth; nothing already set is replaced, and `null` removes nothing.
    #[serde(default, skip_serializing_if = "is_false")]
    pub if_absent: bool,
    /// Where new items of the lists merged by key go: `Last` (the default) or `First`
    /// (an init container or a sidecar that must start first).
    #[serde(default, skip_serializing_if = "Position::is_last")]
    pub position: Position,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AppendMutation {
    /// The list; created when absent.
    pub path: String,
    /// The items to add, as a list; each is added unless an equal item is in the list.
    /// Strings may hold `{{ cel }}` templates.
    pub value: Value,
    /// `Last` (the default) or `First`.
    #[serde(default, skip_serializing_if = "Position::is_last")]
    pub position: Position,
}

/// Where new list items go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Position {
    /// After the items already there.
    #[default]
    Last,
    /// Before the items already there, in the order given.
    First,
}

impl Position {
    fn is_last(&self) -> bool {
        *self == Position::Last
    }
}

fn is_false(value: &bool) -> bool {
    !*value
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RemoveMutation {
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JsonPatchOperation {
    /// `add`, `remove`, `replace`, `move`, `copy` or `test`.
    pub op: String,
    /// A JSON Pointer (RFC 6901).
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// `Some(Null)` for an explicit `value: null`, which RFC 6902 allows; `None` when absent.
    #[serde(
        default,
        deserialize_with = "present_value",
        skip_serializing_if = "Option::is_none"
    )]
    pub value: Option<Value>,
}

/// Keeps an explicit null as `Some(Null)`: a plain `Option<Value>` reads it as absent.
fn present_value<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Value>, D::Error> {
    <Value as serde::Deserialize>::deserialize(deserializer).map(Some)
}
