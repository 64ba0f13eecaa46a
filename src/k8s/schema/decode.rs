//! Whether kube-apiserver can decode a value into the Go type of the field it is written
//! to. A mutating webhook's patched object is decoded into the typed object; a value of
//! the wrong JSON type fails that decoding with an `InternalError` that names neither the
//! webhook nor the policy (`json: cannot unmarshal bool into Go struct field
//! PodSpec.spec.nodeSelector of type string`). graft checks what a policy writes against
//! the table first, so lint can name the policy and field, and admission can fail the
//! policy by its own `failurePolicy`.
//!
//! The rules are those of Go's `encoding/json` and the types' own decoders: `null`
//! decodes into anything (the zero value); integers must be integral and in range;
//! `IntOrString` takes an integer or a string; `Quantity` a string or a number that
//! parses as a quantity; `byte` a base64 string. Fields a struct does not declare are
//! dropped by the decoder, not refused: they are reported apart, as undeclared.

use super::{Scalar, Shape, TypeRef};
use crate::k8s::quantity::Quantity;
use crate::tree::Tree;

/// One problem of a value, at `path` below where it is written (`""` for the value
/// itself; `containers[0].image`, `nodeSelector.gpu`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub path: String,
    pub kind: ProblemKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProblemKind {
    /// The apiserver cannot decode the value: `expected` describes the field's type,
    /// `found` the value (`the boolean true`), `found_type` only its JSON type (`a
    /// boolean`), for messages about an object's contents, which never show them.
    Mismatch {
        expected: String,
        found: String,
        found_type: &'static str,
    },
    /// The struct does not declare the field: the apiserver drops it.
    Undeclared { of: String },
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            ProblemKind::Mismatch {
                expected, found, ..
            } => {
                write!(f, "expected {expected}, found {found}")
            }
            ProblemKind::Undeclared { of } => {
                write!(f, "{of} has no field `{}`", last_segment(&self.path))
            }
        }
    }
}

fn last_segment(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

/// How a value is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strings {
    /// Every string is what it says.
    Plain,
    /// A string that is one whole `{{ expr }}` stands for the expression's value, of a
    /// type not known yet: it is not checked (a policy's values before rendering).
    Templated,
}

/// Every problem of `value` as a value of `ty`, in the value's order.
pub fn problems(value: &Tree<'_>, ty: TypeRef<'_>, strings: Strings) -> Vec<Problem> {
    let mut walker = Walker {
        strings,
        path: String::new(),
        found: Vec::new(),
    };
    walker.value(value, ty);
    walker.found
}

/// One step of a path into a value.
#[derive(Clone, Copy, Debug)]
pub enum Step<'a> {
    /// A key of a map or a field of a struct.
    Key(&'a str),
    /// An item of a list (an index, a wildcard or a filter over it), or every value of a
    /// map (a wildcard over it).
    Item,
}

/// Where a path leads in a type.
#[derive(Clone, Copy, Debug)]
pub enum Reached<'s> {
    Type(TypeRef<'s>),
    /// The struct `of` does not declare the field at step `at`.
    Undeclared {
        at: usize,
        of: TypeRef<'s>,
    },
    /// Step `at` goes into a value that has no such step (a key of a list, an item of a
    /// string).
    Mismatch {
        at: usize,
        of: TypeRef<'s>,
    },
}

/// The type at the end of `steps` from `ty`.
pub fn follow<'s>(ty: TypeRef<'s>, steps: &[Step<'_>]) -> Reached<'s> {
    let mut ty = ty;
    for (at, step) in steps.iter().enumerate() {
        let next = match (ty.shape(), step) {
            (Shape::Struct(fields), Step::Key(key)) => match fields.field(key) {
                Some(field) => Some(field),
                None if fields.preserves_unknown() => Some(ty.schema().scalar(Scalar::Any)),
                None => return Reached::Undeclared { at, of: ty },
            },
            (Shape::Map(map), _) => Some(map.element()),
            (Shape::List(list), Step::Item) => Some(list.element()),
            (Shape::Scalar(Scalar::Any | Scalar::AnyAtomic), _) => Some(ty),
            _ => None,
        };
        match next {
            Some(next) => ty = next,
            None => return Reached::Mismatch { at, of: ty },
        }
    }
    Reached::Type(ty)
}

/// What a type is called in a message: `string`, `integer`, `object (core.v1.Container)`.
pub fn describe(ty: TypeRef<'_>) -> String {
    match ty.shape() {
        Shape::Scalar(scalar) => describe_scalar(scalar).to_string(),
        Shape::Struct(s) => format!("an object ({})", s.name()),
        Shape::List(list) => format!("a list of {}", plural_of(list.element())),
        Shape::Map(map) => format!("a map of {}", plural_of(map.element())),
    }
}

fn plural_of(ty: TypeRef<'_>) -> String {
    match ty.shape() {
        Shape::Scalar(Scalar::String) => "strings".to_string(),
        Shape::Struct(s) => format!("objects ({})", s.name()),
        _ => describe(ty),
    }
}

fn describe_scalar(scalar: Scalar) -> &'static str {
    match scalar {
        Scalar::String => "a string",
        Scalar::Byte => "a base64 string",
        Scalar::DateTime => "an RFC 3339 time string",
        Scalar::Integer => "an integer",
        Scalar::Int32 => "a 32-bit integer",
        Scalar::Number => "a number",
        Scalar::Boolean => "a boolean",
        Scalar::IntOrString => "an integer or a string",
        Scalar::Quantity => "a quantity (a string such as 500m or 2Gi, or a number)",
        Scalar::Any | Scalar::AnyAtomic => "any value",
    }
}

/// What a value is called in a message: `the boolean true`, `a list`.
fn found(value: &Tree<'_>) -> String {
    match value.resolved() {
        Tree::Null => "null".to_string(),
        Tree::Bool(b) => format!("the boolean {b}"),
        Tree::Number(n) => format!("the number {n}"),
        Tree::String(s) => {
            let text: String = s.chars().take(40).collect();
            let more = if text.len() < s.len() { "…" } else { "" };
            format!("the string {text:?}{more}")
        }
        Tree::List(_) => "a list".to_string(),
        Tree::Map(_) | Tree::Text(_) => "an object".to_string(),
    }
}

/// What a value is called without showing it: `a boolean`, `a list`.
fn found_type(value: &Tree<'_>) -> &'static str {
    match value.resolved() {
        Tree::Null => "null",
        Tree::Bool(_) => "a boolean",
        Tree::Number(_) => "a number",
        Tree::String(_) => "a string",
        Tree::List(_) => "a list",
        Tree::Map(_) | Tree::Text(_) => "an object",
    }
}

struct Walker {
    strings: Strings,
    path: String,
    found: Vec<Problem>,
}

impl Walker {
    fn push(&mut self, kind: ProblemKind) {
        self.found.push(Problem {
            path: self.path.clone(),
            kind,
        });
    }

    fn mismatch(&mut self, ty: TypeRef<'_>, value: &Tree<'_>) {
        self.push(ProblemKind::Mismatch {
            expected: describe(ty),
            found: found(value),
            found_type: found_type(value),
        });
    }

    fn is_deferred(&self, value: &Tree<'_>) -> bool {
        self.strings == Strings::Templated
            && value.as_str().is_some_and(|text| {
                let text = text.trim();
                text.starts_with("{{") && text.ends_with("}}")
            })
    }

    fn value(&mut self, value: &Tree<'_>, ty: TypeRef<'_>) {
        let value = value.resolved();
        if value.is_null() || self.is_deferred(value) {
            return;
        }
        match ty.shape() {
            Shape::Scalar(scalar) => {
                if !scalar_decodes(value, scalar) {
                    self.mismatch(ty, value);
                }
            }
            Shape::Struct(fields) => {
                let Some(map) = value.as_map() else {
                    return self.mismatch(ty, value);
                };
                for (key, item) in map.iter() {
                    let at = self.enter_key(key);
                    match fields.field(key) {
                        Some(field) => self.value(item, field),
                        None if fields.preserves_unknown() => {}
                        None => self.push(ProblemKind::Undeclared {
                            of: fields.name().to_string(),
                        }),
                    }
                    self.path.truncate(at);
                }
            }
            Shape::Map(values) => {
                let Some(map) = value.as_map() else {
                    return self.mismatch(ty, value);
                };
                for (key, item) in map.iter() {
                    let at = self.enter_key(key);
                    self.value(item, values.element());
                    self.path.truncate(at);
                }
            }
            Shape::List(list) => {
                let Some(items) = value.as_list() else {
                    return self.mismatch(ty, value);
                };
                for (index, item) in items.iter().enumerate() {
                    let at = self.path.len();
                    self.path.push_str(&format!("[{index}]"));
                    self.value(item, list.element());
                    self.path.truncate(at);
                }
            }
        }
    }

    fn enter_key(&mut self, key: &str) -> usize {
        let at = self.path.len();
        if !self.path.is_empty() {
            self.path.push('.');
        }
        self.path.push_str(key);
        at
    }
}

/// Whether Go's decoder takes `value` (not null) for a field of this scalar type.
fn scalar_decodes(value: &Tree<'_>, scalar: Scalar) -> bool {
    match scalar {
        Scalar::String => value.as_str().is_some(),
        Scalar::Byte => value
            .as_str()
            .is_some_and(|text| base64_simd::STANDARD.decode_to_vec(text).is_ok()),
        Scalar::DateTime => value.as_str().is_some(),
        Scalar::Integer => value.as_i64().is_some(),
        Scalar::Int32 => value.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
        Scalar::Number => value.as_number().is_some(),
        Scalar::Boolean => value.as_bool().is_some(),
        Scalar::IntOrString => {
            value.as_str().is_some() || value.as_i64().is_some_and(|n| i32::try_from(n).is_ok())
        }
        Scalar::Quantity => match value {
            Tree::String(text) => Quantity::parse(text).is_ok(),
            Tree::Number(number) => Quantity::parse(&number.to_string()).is_ok(),
            _ => false,
        },
        Scalar::Any | Scalar::AnyAtomic => true,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::builtin;
    use super::*;

    fn pod() -> TypeRef<'static> {
        builtin()
            .expect("the table parses")
            .kind("", "v1", "Pod")
            .expect("Pod")
    }

    fn messages(value: serde_json::Value, ty: TypeRef<'_>) -> Vec<String> {
        problems(&Tree::from(value), ty, Strings::Templated)
            .iter()
            .map(|p| format!("{}: {p}", p.path))
            .collect()
    }

    #[test]
    fn values_the_apiserver_cannot_decode_are_named_by_path() {
        let found = messages(
            json!({
                "spec": {
                    "nodeSelector": {"gpu": true, "zone": "a"},
                    "priority": 1.5,
                    "containers": [{
                        "name": "app",
                        "resources": {"limits": {"cpu": "2 cores", "memory": "1Gi"}},
                        "ports": [{"containerPort": "80"}],
                    }],
                    "hostNetwork": "yes",
                    "nodeSelecter": {},
                },
            }),
            pod(),
        );
        assert_eq!(
            found,
            [
                "spec.nodeSelector.gpu: expected a string, found the boolean true",
                "spec.priority: expected a 32-bit integer, found the number 1.5",
                "spec.containers[0].resources.limits.cpu: expected a quantity (a string such as 500m or 2Gi, or a number), found the string \"2 cores\"",
                "spec.containers[0].ports[0].containerPort: expected a 32-bit integer, found the string \"80\"",
                "spec.hostNetwork: expected a boolean, found the string \"yes\"",
                "spec.nodeSelecter: core.v1.PodSpec has no field `nodeSelecter`",
            ]
        );
    }

    #[test]
    fn what_decodes_is_accepted() {
        let found = messages(
            json!({
                "metadata": {"labels": {"a": "b"}, "annotations": null},
                "spec": {
                    "containers": [{
                        "name": "app",
                        "resources": {"limits": {"cpu": 2, "memory": "1Gi"}},
                        "ports": [{"containerPort": 80}],
                        "livenessProbe": {"httpGet": {"port": "http"}},
                        "image": "{{ params.image }}",
                    }],
                    "terminationGracePeriodSeconds": 30,
                    "nodeSelector": {"gpu": "{{ variables.flag }}"},
                },
            }),
            pod(),
        );
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn rendered_strings_are_checked_as_strings() {
        let value = Tree::from(json!({"spec": {"priority": "{{ 1 }}"}}));
        let found = problems(&value, pod(), Strings::Plain);
        assert_eq!(found.len(), 1);
    }

    #[test]
    fn paths_lead_to_field_types() {
        let pod = pod();
        let reached = follow(
            pod,
            &[
                Step::Key("spec"),
                Step::Key("containers"),
                Step::Item,
                Step::Key("image"),
            ],
        );
        assert!(matches!(reached, Reached::Type(ty) if describe(ty) == "a string"));
        let reached = follow(pod, &[Step::Key("spec"), Step::Key("nodeSelecter")]);
        assert!(matches!(reached, Reached::Undeclared { at: 1, .. }));
        let reached = follow(
            pod,
            &[Step::Key("spec"), Step::Key("hostNetwork"), Step::Item],
        );
        assert!(matches!(reached, Reached::Mismatch { at: 2, .. }));
        let reached = follow(
            pod,
            &[Step::Key("metadata"), Step::Key("labels"), Step::Key("x")],
        );
        assert!(matches!(reached, Reached::Type(ty) if describe(ty) == "a string"));
    }
}
