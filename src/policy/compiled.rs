//! The compiled form of a policy: every JSONPath, regex, CEL expression and template
//! parsed once at load time, so evaluation does no parsing.

use std::path::PathBuf;

use crate::tree::Tree;
use regex::Regex;

use super::model::{FailurePolicy, Mode, Position};
use crate::expr::template::Template;
use crate::expr::{Expression, Needs};
use crate::jsonpath::JsonPath;

/// An admission operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub const ALL: [Operation; 4] = [
        Operation::Create,
        Operation::Update,
        Operation::Delete,
        Operation::Connect,
    ];

    pub fn parse(text: &str) -> Option<Operation> {
        match text {
            "CREATE" => Some(Operation::Create),
            "UPDATE" => Some(Operation::Update),
            "DELETE" => Some(Operation::Delete),
            "CONNECT" => Some(Operation::Connect),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }

    fn bit(self) -> u8 {
        match self {
            Operation::Create => 1,
            Operation::Update => 2,
            Operation::Delete => 4,
            Operation::Connect => 8,
        }
    }
}

/// A set of operations; empty in a policy means all of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Operations(u8);

impl Operations {
    pub const ALL: Operations = Operations(15);

    pub fn insert(&mut self, operation: Operation) {
        self.0 |= operation.bit();
    }

    pub fn contains(self, operation: Operation) -> bool {
        self.0 & operation.bit() != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn iter(self) -> impl Iterator<Item = Operation> {
        Operation::ALL
            .into_iter()
            .filter(move |op| self.contains(*op))
    }
}

/// A resource a policy applies to. `None` group or version means any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRule {
    pub group: Option<String>,
    pub version: Option<String>,
    /// Plural name, or `*`.
    pub resource: String,
    /// `None` for the main resource; `*` for any subresource.
    pub subresource: Option<String>,
}

impl ResourceRule {
    /// Parses `pods`, `nodes/status`, `apps/v1/statefulsets`, `apps/v1/deployments/scale`.
    /// The core group is written `core` or empty; `*` is a wildcard in any position.
    pub fn parse(text: &str) -> Result<ResourceRule, String> {
        let parts: Vec<&str> = text.split('/').collect();
        if parts
            .iter()
            .any(|part| part.trim().is_empty() && parts.len() == 1)
        {
            return Err("empty resource".to_string());
        }
        let any = |s: &str| (s != "*").then(|| s.to_string());
        let group = |s: &str| match s {
            "*" => None,
            "core" => Some(String::new()),
            other => Some(other.to_string()),
        };
        let rule = match parts.as_slice() {
            [resource] => ResourceRule {
                group: None,
                version: None,
                resource: resource.to_string(),
                subresource: None,
            },
            [resource, sub] => ResourceRule {
                group: None,
                version: None,
                resource: resource.to_string(),
                subresource: Some(sub.to_string()),
            },
            [g, v, resource] => ResourceRule {
                group: group(g),
                version: any(v),
                resource: resource.to_string(),
                subresource: None,
            },
            [g, v, resource, sub] => ResourceRule {
                group: group(g),
                version: any(v),
                resource: resource.to_string(),
                subresource: Some(sub.to_string()),
            },
            _ => {
                return Err(
                    "expected RESOURCE, RESOURCE/SUBRESOURCE, GROUP/VERSION/RESOURCE or GROUP/VERSION/RESOURCE/SUBRESOURCE"
                        .to_string(),
                );
            }
        };
        let valid = |s: &str| {
            s == "*"
                || (!s.is_empty()
                    && s.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.'
                    }))
        };
        if !valid(&rule.resource) || !rule.subresource.as_deref().is_none_or(valid) {
            return Err(
                "resource names are lowercase plural names such as pods or nodes/status"
                    .to_string(),
            );
        }
        Ok(rule)
    }

    pub fn matches(&self, group: &str, version: &str, resource: &str, subresource: &str) -> bool {
        self.group.as_deref().is_none_or(|g| g == group)
            && self.version.as_deref().is_none_or(|v| v == version)
            && (self.resource == "*" || self.resource == resource)
            && match self.subresource.as_deref() {
                None => subresource.is_empty(),
                Some("*") => true,
                Some(sub) => sub == subresource,
            }
    }

    /// True when the rule can match more than one (resource, subresource) pair.
    pub fn is_wildcard(&self) -> bool {
        self.resource == "*" || self.subresource.as_deref() == Some("*")
    }
}

/// As a policy writes it: `pods`, `nodes/status`, `apps/v1/statefulsets`.
impl std::fmt::Display for ResourceRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_some() || self.version.is_some() {
            let group = match self.group.as_deref() {
                None => "*",
                Some("") => "core",
                Some(group) => group,
            };
            write!(f, "{group}/{}/", self.version.as_deref().unwrap_or("*"))?;
        }
        f.write_str(&self.resource)?;
        match &self.subresource {
            Some(subresource) => write!(f, "/{subresource}"),
            None => Ok(()),
        }
    }
}

/// A namespace or object name, or a `*` glob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamePattern(pub String);

impl NamePattern {
    pub fn matches(&self, name: &str) -> bool {
        glob_match(&self.0, name)
    }
}

/// `*` matches any run of characters; everything else matches itself.
fn glob_match(pattern: &str, text: &str) -> bool {
    // Most namespace patterns are plain names: compare without splitting or allocating.
    if !pattern.contains('*') {
        return pattern == text;
    }
    let mut parts = pattern.split('*');
    let Some(first) = parts.next() else {
        return text.is_empty();
    };
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

pub use crate::k8s::labels::Requirement;

#[derive(Debug)]
pub enum FieldCheck {
    Equals(Tree<'static>),
    In(Vec<Tree<'static>>),
    NotIn(Vec<Tree<'static>>),
    Exists,
    NotExists,
    Regex(Regex),
}

#[derive(Debug)]
pub struct FieldTest {
    /// Where the path is written (`spec.match.fields[0].path`), for failure messages.
    pub field: String,
    pub path: JsonPath,
    pub check: FieldCheck,
}

/// The compiled `match` or `exclude` block.
#[derive(Debug, Default)]
pub struct Conditions {
    /// Empty means any resource (only possible in `exclude`).
    pub resources: Vec<ResourceRule>,
    /// Empty means any operation.
    pub operations: Operations,
    pub namespaces: Vec<NamePattern>,
    /// Object names (`metadata.name`, else `metadata.generateName`); empty means any.
    pub names: Vec<NamePattern>,
    /// Requirements on the labels of the request's namespace; `None` when not given.
    pub namespace_selector: Option<Vec<Requirement>>,
    pub labels: Vec<Requirement>,
    pub annotations: Vec<Requirement>,
    pub fields: Vec<FieldTest>,
    pub cel: Option<Expression>,
}

/// A mutation's value: a plain value, or one with `{{ }}` templates to render (boxed:
/// a compiled template is ten times a literal's size).
#[derive(Debug)]
pub enum ValueSource {
    Literal(Tree<'static>),
    Template(Box<Template>),
}

#[derive(Debug)]
pub enum MutationKind {
    Set {
        path: JsonPath,
        value: ValueSource,
        if_absent: bool,
    },
    Merge {
        path: Option<JsonPath>,
        value: ValueSource,
        if_absent: bool,
        position: Position,
    },
    Append {
        path: JsonPath,
        value: ValueSource,
        position: Position,
    },
    Remove {
        path: JsonPath,
    },
    JsonPatch(json_patch::Patch),
}

#[derive(Debug)]
pub struct CompiledMutation {
    /// Where the mutation is written, for messages: `spec.mutations[0].set`.
    pub field: String,
    /// The elements the mutation runs once for; its paths are then relative to each.
    pub foreach: Option<Foreach>,
    pub when: Option<Expression>,
    pub kind: MutationKind,
}

/// A mutation's `foreach`: where it is written and the elements it selects.
#[derive(Debug)]
pub struct Foreach {
    /// `spec.mutations[0].foreach`, for messages.
    pub field: String,
    pub path: JsonPath,
}

#[derive(Debug)]
pub struct CompiledVariable {
    pub name: String,
    pub expression: Expression,
}

#[derive(Debug)]
pub struct CompiledValidation {
    pub expression: Expression,
    pub message: String,
}

impl CompiledPolicy {
    /// Whether the policy can need the data of the request's namespace: a non-empty
    /// `namespaceSelector` (in `match` or `exclude`), or an expression reading
    /// `namespaceObject`.
    pub fn needs_namespace(&self) -> bool {
        let selects = |conditions: &Conditions| {
            conditions
                .namespace_selector
                .as_ref()
                .is_some_and(|requirements| !requirements.is_empty())
        };
        self.needs.namespace_object
            || selects(&self.matcher)
            || self.exclude.as_ref().is_some_and(selects)
    }
}

/// One policy, ready to evaluate.
#[derive(Debug)]
pub struct CompiledPolicy {
    pub name: String,
    pub order: i32,
    pub failure_policy: FailurePolicy,
    pub mode: Mode,
    /// Also applies to the pod templates of the built-in controllers.
    pub pod_controllers: bool,
    pub file: PathBuf,
    pub matcher: Conditions,
    pub exclude: Option<Conditions>,
    pub params: Tree<'static>,
    pub variables: Vec<CompiledVariable>,
    pub validations: Vec<CompiledValidation>,
    pub mutations: Vec<CompiledMutation>,
    /// What the policy's expressions refer to, so a CEL scope converts only that.
    pub needs: Needs,
    /// True when the policy has any CEL expression or template.
    pub uses_cel: bool,
    /// True when what the policy writes is checked against the object's kind after it
    /// applies (`engine::typed_writes`): its values come from templates, or it matches
    /// resources whose kind lint could not know.
    pub checks_written_types: bool,
    /// What the label gate tests (`engine::matching::LabelCheck`); given by the
    /// policy set, which numbers the keys.
    pub label_gate: Option<LabelGate>,
}

/// The first `In` requirement of a policy's `match.labels` (`matchLabels` entries are
/// `In` with one value): a label the object must carry with one of these values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelGate {
    /// The label's key as a number, the same for every policy of the set that tests it:
    /// with hundreds of candidates gated on a few keys, telling whether a policy tests
    /// the key the previous one did is one comparison.
    pub key: u32,
    /// Where the requirement is in `match.labels`.
    pub requirement: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_rules_print_as_written() {
        for (text, printed) in [
            ("pods", "pods"),
            ("nodes/status", "nodes/status"),
            ("apps/v1/statefulsets", "apps/v1/statefulsets"),
            ("/v1/pods", "core/v1/pods"),
            ("*/*/deployments/scale", "deployments/scale"),
            ("apps/*/*", "apps/*/*"),
        ] {
            let rule = ResourceRule::parse(text).unwrap();
            assert_eq!(rule.to_string(), printed);
            assert_eq!(ResourceRule::parse(printed).unwrap(), rule);
        }
    }

    #[test]
    fn globs() {
        for (pattern, text, expected) in [
            ("*", "anything", true),
            ("dynamo-*", "dynamo-system", true),
            ("dynamo-*", "other", false),
            ("*-system", "kube-system", true),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXcYYb", false),
            ("exact", "exact", true),
            ("exact", "exactly", false),
            ("a*a", "a", false),
        ] {
            assert_eq!(glob_match(pattern, text), expected, "{pattern} vs {text}");
        }
    }

    #[test]
    fn resource_rules() {
        let pods = ResourceRule::parse("pods").unwrap();
        assert!(pods.matches("", "v1", "pods", ""));
        assert!(!pods.matches("", "v1", "pods", "status"));
        let status = ResourceRule::parse("nodes/status").unwrap();
        assert!(status.matches("", "v1", "nodes", "status"));
        assert!(!status.matches("", "v1", "nodes", ""));
        let sts = ResourceRule::parse("apps/v1/statefulsets").unwrap();
        assert!(sts.matches("apps", "v1", "statefulsets", ""));
        assert!(!sts.matches("", "v1", "statefulsets", ""));
        let core = ResourceRule::parse("core/*/pods").unwrap();
        assert!(core.matches("", "v1", "pods", ""));
        assert!(ResourceRule::parse("a/b/c/d/e").is_err());
        assert!(ResourceRule::parse("Pods").is_err());
    }
}
