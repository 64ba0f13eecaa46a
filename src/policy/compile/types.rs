//! The values a policy writes, checked against the types of the kinds it matches
//! (`k8s::schema`, the table the MutatingAdmissionPolicy work reads): a literal the
//! apiserver cannot decode into its field (`true` under `spec.nodeSelector`) is an
//! error naming the field and the type it expects; a path or a key the kind does not
//! declare, which the apiserver would drop, a warning. Values a template computes are
//! checked at admission (`engine::typed_writes`), and kinds the table does not know
//! (custom resources) are left unchecked, with one note per kind.

use serde_json::Value;

use super::Compiler;
use crate::jsonpath::{JsonPath, TypeSegment};
use crate::k8s::schema::{self, ProblemKind, Reached, ResourceKind, Step, Strings, TypeRef};
use crate::policy::compiled::ResourceRule;
use crate::policy::findings::Finding;
use crate::policy::model::JsonPatchOperation;
use crate::tree::Tree;

/// Most branches a path's unions expand to before the check gives up on it.
const MAX_BRANCHES: usize = 16;

/// How a value is written at its path.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Written {
    /// The value is the field's (`set`, `merge`, a JSON Patch `add`).
    Whole,
    /// The value is a list of items added to the list at the path (`append`).
    Items,
}

/// The kinds a policy's resources stand for, and a note for each resource the table does
/// not know.
pub(super) fn matched_kinds(
    rules: &[ResourceRule],
    file: &std::path::Path,
    findings: &mut Vec<Finding>,
) -> Vec<ResourceKind<'static>> {
    let table = match schema::builtin() {
        Ok(table) => table,
        Err(error) => {
            findings.push(Finding::error(
                file,
                format!(
                    "graft's table of Kubernetes types does not load (a bug in graft): {error}"
                ),
            ));
            return Vec::new();
        }
    };
    let mut kinds: Vec<ResourceKind<'static>> = Vec::new();
    for rule in rules {
        if rule.resource == "*" {
            continue;
        }
        let found = table.resource_kinds(
            rule.group.as_deref(),
            rule.version.as_deref(),
            &rule.resource,
            rule.subresource.as_deref().filter(|sub| *sub != "*"),
        );
        let misspelt_built_in = !crate::k8s::resources::BUILT_IN_RESOURCES
            .contains(&rule.resource.as_str())
            && crate::k8s::resources::BUILT_IN_RESOURCES
                .contains(&crate::k8s::resources::plural(&rule.resource).as_str());
        if found.is_empty() && rule.subresource.is_none() && !misspelt_built_in {
            let group = rule.group.as_deref().unwrap_or("any group");
            let message = format!(
                "graft has no schema for {} ({group}): values written to it are not type-checked",
                rule.resource
            );
            // Once per kind across the set: the note is about the kind, not the policy.
            if !findings.iter().any(|f| f.message == message) {
                findings.push(Finding::note(file, message));
            }
        }
        for kind in found {
            if !kinds.iter().any(|k| k.ty == kind.ty) {
                kinds.push(kind);
            }
        }
    }
    kinds
}

/// The steps of each branch of a path (its unions expanded), or `None` when its type
/// cannot be followed.
fn branches(segments: &[TypeSegment<'_>]) -> Option<Vec<Vec<String>>> {
    let mut branches: Vec<Vec<String>> = vec![Vec::new()];
    for segment in segments {
        branches = match segment {
            TypeSegment::Item => branches
                .into_iter()
                .map(|mut b| {
                    b.push(String::new());
                    b
                })
                .collect(),
            TypeSegment::Names(names) => branches
                .iter()
                .flat_map(|b| {
                    names.iter().map(move |name| {
                        let mut b = b.clone();
                        b.push((*name).to_string());
                        b
                    })
                })
                .collect(),
        };
        if branches.len() > MAX_BRANCHES {
            return None;
        }
    }
    Some(branches)
}

/// A branch's steps: an empty string stands for an item.
fn steps(branch: &[String]) -> Vec<Step<'_>> {
    branch
        .iter()
        .map(|s| {
            if s.is_empty() {
                Step::Item
            } else {
                Step::Key(s)
            }
        })
        .collect()
}

/// A branch as people write a field: `spec.containers[*].image`.
fn display(branch: &[String]) -> String {
    let mut text = String::new();
    for step in branch {
        if step.is_empty() {
            text.push_str("[*]");
        } else {
            if !text.is_empty() {
                text.push('.');
            }
            text.push_str(step);
        }
    }
    text
}

/// The names of a struct's fields closest to `wanted`, for a hint.
fn closest_field(of: TypeRef<'_>, wanted: &str) -> Option<String> {
    let schema::Shape::Struct(fields) = of.shape() else {
        return None;
    };
    fields
        .fields()
        .map(|(name, _)| (strsim::jaro_winkler(name, wanted), name))
        .filter(|(score, _)| *score > 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| format!("did you mean `{name}`?"))
}

impl Compiler<'_> {
    /// Checks a literal `value` written at `path` (below `foreach`'s elements, when the
    /// mutation has one) against every kind the policy matches.
    pub(super) fn check_written(
        &mut self,
        field: &str,
        foreach: Option<&JsonPath>,
        path: Option<&JsonPath>,
        value: &Value,
        written: Written,
    ) {
        let mut segments = Vec::new();
        for path in [foreach, path].into_iter().flatten() {
            match path.type_segments() {
                Some(more) => segments.extend(more),
                None => return,
            }
        }
        let Some(branches) = branches(&segments) else {
            return;
        };
        let value = Tree::from(value);
        for kind in self.kinds.clone() {
            for branch in &branches {
                self.check_branch(field, kind, branch, &value, written, Strings::Templated);
            }
        }
    }

    /// Checks the values of raw JSON Patch operations against every kind the policy
    /// matches (their values are never templates).
    pub(super) fn check_json_patch_values(
        &mut self,
        field: &str,
        operations: &[JsonPatchOperation],
    ) {
        for (i, operation) in operations.iter().enumerate() {
            let (Some(value), "add" | "replace") = (&operation.value, operation.op.as_str()) else {
                continue;
            };
            let branch: Vec<String> = operation
                .path
                .split('/')
                .skip(1)
                .map(|token| {
                    if token == "-" || token.parse::<usize>().is_ok() {
                        String::new()
                    } else {
                        token.replace("~1", "/").replace("~0", "~")
                    }
                })
                .collect();
            let value = Tree::from(value);
            for kind in self.kinds.clone() {
                self.check_branch(
                    &format!("{field}[{i}].value"),
                    kind,
                    &branch,
                    &value,
                    Written::Whole,
                    Strings::Plain,
                );
            }
        }
    }

    fn check_branch(
        &mut self,
        field: &str,
        kind: ResourceKind<'static>,
        branch: &[String],
        value: &Tree<'_>,
        written: Written,
        strings: Strings,
    ) {
        let ty = match schema::follow(kind.ty, &steps(branch)) {
            Reached::Type(ty) => ty,
            Reached::Undeclared { at, of } => {
                let unknown = &branch[at];
                let declared_by = match (at, of.shape()) {
                    (1.., schema::Shape::Struct(s)) => {
                        format!(" ({} declares no `{unknown}`)", s.name())
                    }
                    _ => String::new(),
                };
                let message = format!(
                    "{} has no field {}{declared_by}: the apiserver drops what is written there",
                    kind.kind,
                    display(&branch[..=at]),
                );
                match closest_field(of, unknown) {
                    Some(hint) => self.warning_with_hint(field, unknown, &message, &hint),
                    None => self.warning(field, unknown, message),
                }
                return;
            }
            Reached::Mismatch { at, of } => {
                // Below labels and annotations, lint says so in its own words already.
                let in_string_map = branch.first().is_some_and(|s| s == "metadata")
                    && branch
                        .get(1)
                        .is_some_and(|s| s == "labels" || s == "annotations");
                if !in_string_map {
                    self.warning(
                        field,
                        "path",
                        format!(
                            "{} field {} is {}: the path cannot go below it, so the policy \
                             fails where it is set and writes what the apiserver refuses where not",
                            kind.kind,
                            display(&branch[..at]),
                            schema::describe(of)
                        ),
                    );
                }
                return;
            }
        };
        let location = display(branch);
        let (ty, values): (TypeRef<'_>, Vec<&Tree<'_>>) = match written {
            Written::Whole => (ty, vec![value]),
            Written::Items => match (ty.shape(), value.as_list()) {
                (schema::Shape::List(list), Some(items)) => {
                    (list.element(), items.iter().collect())
                }
                (schema::Shape::List(_), None) => return,
                (schema::Shape::Scalar(schema::Scalar::Any | schema::Scalar::AnyAtomic), _) => {
                    return;
                }
                _ => {
                    self.error(
                        field,
                        "path",
                        format!(
                            "{} field {location} is {}, and append adds items to a list",
                            kind.kind,
                            schema::describe(ty)
                        ),
                        Some("use set or merge"),
                    );
                    return;
                }
            },
        };
        for (index, value) in values.into_iter().enumerate() {
            for problem in schema::problems(value, ty, strings) {
                let mut inner = String::new();
                if written == Written::Items {
                    inner.push_str(&format!("[{index}]"));
                }
                if !problem.path.is_empty() {
                    if !inner.is_empty() && !problem.path.starts_with('[') {
                        inner.push('.');
                    }
                    inner.push_str(&problem.path);
                }
                let at_field = match (inner.is_empty(), inner.starts_with('[')) {
                    (true, _) => field.to_string(),
                    (false, true) => format!("{field}{inner}"),
                    (false, false) => format!("{field}.{inner}"),
                };
                let target = match (location.is_empty(), inner.is_empty()) {
                    (true, true) => "(the object)".to_string(),
                    (false, true) => location.clone(),
                    (true, false) => inner.clone(),
                    (false, false) if inner.starts_with('[') => format!("{location}{inner}"),
                    (false, false) => format!("{location}.{inner}"),
                };
                let needle = problem
                    .path
                    .rsplit('.')
                    .next()
                    .unwrap_or("value")
                    .to_string();
                match &problem.kind {
                    ProblemKind::Mismatch {
                        expected, found, ..
                    } => {
                        let hint = (expected == "a string"
                            && (found.starts_with("the boolean") || found.starts_with("the number")))
                        .then_some("quote it: YAML reads true, 1 and 1.5 unquoted as a boolean or a number");
                        self.error(
                            &at_field,
                            &needle,
                            format!(
                                "{} field {target} expects {expected}, found {found}",
                                kind.kind
                            ),
                            hint,
                        );
                    }
                    ProblemKind::Undeclared { of } => {
                        self.warning(
                            &at_field,
                            &needle,
                            format!(
                                "{} has no field {target} ({of} declares no `{needle}`): the apiserver drops it",
                                kind.kind
                            ),
                        );
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unions_expand_into_branches() {
        let path =
            JsonPath::compile("$.spec['containers','initContainers'][*].image").expect("compiles");
        let segments = path.type_segments().expect("typed");
        let branches = branches(&segments).expect("few");
        let shown: Vec<String> = branches.iter().map(|b| display(b)).collect();
        assert_eq!(
            shown,
            ["spec.containers[*].image", "spec.initContainers[*].image"]
        );
    }
}
