//! What kube-apiserver's compiler refuses in a MutatingAdmissionPolicy's expression, as
//! far as graft can tell without a type checker, in its words:
//!
//! - a name that is not declared: `params` without `paramKind`, `variables` in a match
//!   condition, a variable not declared before (`undefined field 'y'`), a function or
//!   method the environment does not have (`cel.bind`, `math.*`, graft's own), a field
//!   `request` or `namespaceObject` does not have;
//! - `Object`, `Object.*` and `JSONPatch` literals and `jsonpatch.escapeKey` outside a
//!   mutation, a `JSONPatch` field `op`, `path` or `from` given a literal that is no
//!   string;
//! - list and map literals whose elements are not all of one type
//!   (`HomogeneousAggregateLiterals`), where the types are evident
//!   ([`super::admission_types`]), and literal `format` calls whose arguments do not fit
//!   their clauses (`super::admission_literals`);
//! - a result of the wrong type: `must evaluate to bool`, `Object`, `list(JSONPatch)`.
//!
//! Each problem is the apiserver's issue text at the node it is about
//! ([`Issue::render`]).

use cel::common::ast::SourceInfo;
use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr, LiteralValue, SelectExpr};

use super::admission::{AdmissionDeclarations, AdmissionKind};
use super::admission_types::{Scope, Ty};
use super::catalog::{self, Style};
use super::structs;

/// One problem, at the node of `id`.
#[derive(Debug, Clone, PartialEq)]
pub struct Issue {
    pub id: u64,
    pub message: String,
}

impl Issue {
    pub(super) fn new(id: u64, message: impl Into<String>) -> Issue {
        Issue {
            id,
            message: message.into(),
        }
    }

    /// As cel-go prints an issue: `ERROR: <input>:L:C: message`, then the source line and
    /// a caret under the column.
    pub fn render(&self, source: &str, info: &SourceInfo) -> String {
        let offset = info
            .offset_for(self.id)
            .map_or(0, |(start, _)| start as usize);
        render(source, offset, &self.message)
    }
}

/// `message` at the byte `offset` of `source` (where the parser places nodes), as
/// cel-go prints it: the column counted in characters.
pub fn render(source: &str, offset: usize, message: &str) -> String {
    let (mut line, mut column, mut line_start) = (1, 1, 0);
    for (byte, c) in source.char_indices() {
        if byte >= offset {
            break;
        }
        if c == '\n' {
            line += 1;
            column = 1;
            line_start = byte + 1;
        } else {
            column += 1;
        }
    }
    let text = source[line_start..].lines().next().unwrap_or("");
    format!(
        "ERROR: <input>:{line}:{column}: {message}\n | {text}\n | {}^",
        ".".repeat(column - 1)
    )
}

/// Why an expression is refused.
#[derive(Debug, Clone, PartialEq)]
pub enum Rejection {
    /// A compilation issue.
    Issue(Issue),
    /// The result is not of the type the expression's place needs.
    ResultType { expected: &'static str, got: String },
}

/// The variables every MAP expression has (`authorizer.requestResource` is one, a dotted
/// name), and the types an identifier may name.
const ROOTS: [&str; 5] = [
    "object",
    "oldObject",
    "request",
    "namespaceObject",
    "authorizer",
];
const TYPE_NAMES: [&str; 12] = [
    "bool",
    "bytes",
    "double",
    "dyn",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "type",
    "uint",
    "optional_type",
];

/// The fields of `request`, and of its nested objects.
const REQUEST_FIELDS: [&str; 12] = [
    "kind",
    "resource",
    "subResource",
    "requestKind",
    "requestResource",
    "requestSubResource",
    "name",
    "namespace",
    "operation",
    "userInfo",
    "dryRun",
    "options",
];
const KIND_FIELDS: [&str; 3] = ["group", "version", "kind"];
const RESOURCE_FIELDS: [&str; 3] = ["group", "version", "resource"];
const USER_INFO_FIELDS: [&str; 4] = ["username", "uid", "groups", "extra"];
/// `namespaceObject`'s declared fields (`BuildNamespaceType`).
const NAMESPACE_FIELDS: [&str; 3] = ["metadata", "spec", "status"];
const NAMESPACE_METADATA_FIELDS: [&str; 12] = [
    "name",
    "generateName",
    "namespace",
    "labels",
    "annotations",
    "UID",
    "creationTimestamp",
    "deletionGracePeriodSeconds",
    "deletionTimestamp",
    "generation",
    "resourceVersion",
    "finalizers",
];
const NAMESPACE_SPEC_FIELDS: [&str; 1] = ["finalizers"];
const NAMESPACE_STATUS_FIELDS: [&str; 2] = ["conditions", "phase"];

/// Checks `root`, the expression as parsed (macros expanded, nothing rewritten).
pub fn check(root: &IdedExpr, declarations: &AdmissionDeclarations<'_>) -> Result<(), Rejection> {
    let mut names = Names {
        declarations,
        locals: Vec::new(),
    };
    names.expr(root).map_err(Rejection::Issue)?;
    super::admission_literals::homogeneous(root).map_err(Rejection::Issue)?;
    super::admission_literals::formats(root).map_err(Rejection::Issue)?;
    result_type(root, declarations.kind)
}

fn undeclared(id: u64, name: &str) -> Issue {
    Issue::new(
        id,
        format!("undeclared reference to '{name}' (in container '')"),
    )
}

fn undefined_field(id: u64, field: &str) -> Issue {
    Issue::new(id, format!("undefined field '{field}'"))
}

struct Names<'d> {
    declarations: &'d AdmissionDeclarations<'d>,
    locals: Vec<String>,
}

impl Names<'_> {
    fn is_mutation(&self) -> bool {
        matches!(
            self.declarations.kind,
            AdmissionKind::ApplyConfiguration | AdmissionKind::JsonPatch
        )
    }

    fn expr(&mut self, node: &IdedExpr) -> Result<(), Issue> {
        match &node.expr {
            Expr::Ident(name) => self.ident(node.id, name),
            Expr::Select(select) => self.select(node, select),
            Expr::Call(call) => self.call(node.id, call),
            Expr::Comprehension(c) => {
                self.expr(&c.iter_range)?;
                self.expr(&c.accu_init)?;
                let depth = self.locals.len();
                self.locals.push(c.iter_var.clone());
                self.locals.extend(c.iter_var2.iter().cloned());
                self.locals.push(c.accu_var.clone());
                let inner = [&c.loop_cond, &c.loop_step, &c.result]
                    .into_iter()
                    .try_for_each(|e| self.expr(e));
                self.locals.truncate(depth);
                inner
            }
            Expr::List(list) => list.elements.iter().try_for_each(|e| self.expr(e)),
            Expr::Map(map) => map.entries.iter().try_for_each(|entry| match &entry.expr {
                EntryExpr::MapEntry(e) => {
                    self.expr(&e.key)?;
                    self.expr(&e.value)
                }
                EntryExpr::StructField(f) => self.expr(&f.value),
            }),
            Expr::Struct(s) => {
                let name = structs::patch_type(&s.type_name)
                    .filter(|_| self.is_mutation())
                    .ok_or_else(|| undeclared(node.id, &s.type_name))?;
                for entry in &s.entries {
                    let EntryExpr::StructField(field) = &entry.expr else {
                        continue;
                    };
                    if name == structs::JSON_PATCH
                        && ["op", "path", "from"].contains(&field.field.as_str())
                        && let Expr::Literal(literal) = &field.value.expr
                        && !matches!(literal, LiteralValue::String(_))
                    {
                        let provided = Scope::default()
                            .infer(&field.value)
                            .map_or_else(|| "dyn".to_owned(), |t| t.to_string());
                        return Err(Issue::new(
                            entry.id,
                            format!(
                                "expected type of field '{}' is 'string' but provided type is \
                                 '{provided}'",
                                field.field
                            ),
                        ));
                    }
                    self.expr(&field.value)?;
                }
                Ok(())
            }
            Expr::Literal(_) | Expr::Unspecified => Ok(()),
        }
    }

    fn is_local(&self, name: &str) -> bool {
        self.locals.iter().any(|local| local == name)
    }

    fn ident(&self, id: u64, name: &str) -> Result<(), Issue> {
        let declared = self.is_local(name)
            || ROOTS.contains(&name)
            || TYPE_NAMES.contains(&name)
            || (name == "params" && self.declarations.params)
            || (name == "variables" && self.declarations.kind != AdmissionKind::MatchCondition)
            || (self.is_mutation() && (name == structs::OBJECT || name == structs::JSON_PATCH));
        if declared {
            Ok(())
        } else {
            Err(undeclared(id, name))
        }
    }

    /// A chain of selections on a variable is held to what the variable declares.
    fn select(&mut self, node: &IdedExpr, select: &SelectExpr) -> Result<(), Issue> {
        let Some(chain) = chain(node) else {
            return self.expr(&select.operand);
        };
        let (root, fields) = (chain[0].1, &chain[1..]);
        if self.is_local(root) {
            return Ok(());
        }
        let dotted: Vec<&str> = chain.iter().map(|(_, name)| *name).collect();
        if dotted.starts_with(&["google", "protobuf"])
            && matches!(dotted.get(2), Some(&("Timestamp" | "Duration")))
            || dotted.starts_with(&["authorizer", "requestResource"])
        {
            return Ok(());
        }
        self.ident(chain[0].0, root)?;
        match root {
            "variables" => match fields.first() {
                Some((id, name)) if !self.declarations.variables.iter().any(|v| v == name) => {
                    Err(undefined_field(*id, name))
                }
                _ => Ok(()),
            },
            "request" => typed_fields(fields, request_shape),
            "namespaceObject" => typed_fields(fields, namespace_shape),
            _ => Ok(()),
        }
    }

    fn call(&mut self, id: u64, call: &CallExpr) -> Result<(), Issue> {
        let name = call.func_name.as_str();
        if super::check::is_operator(name) {
            if let Some(target) = &call.target {
                self.expr(target)?;
            }
            return call.args.iter().try_for_each(|arg| self.expr(arg));
        }
        let (style, qualified) = match &call.target {
            Some(target) => match chain(target) {
                // `optional.of(x)`: a namespaced function, written like a method call.
                Some(chain) if !self.names_a_value(chain[0].1) => {
                    let mut qualified: Vec<&str> = chain.iter().map(|(_, n)| *n).collect();
                    qualified.push(name);
                    (Style::Function, Some(qualified.join(".")))
                }
                _ => (Style::Method, None),
            },
            None => (Style::Function, None),
        };
        let called = qualified.as_deref().unwrap_or(name);
        let mutation_only = called == "jsonpatch.escapeKey" && !self.is_mutation();
        if mutation_only || !catalog::map_has(called, style, call.args.len()) {
            return Err(if catalog::map_has_name(called, style) && !mutation_only {
                Issue::new(id, format!("found no matching overload for '{called}'"))
            } else {
                undeclared(id, called)
            });
        }
        if qualified.is_none()
            && let Some(target) = &call.target
        {
            self.expr(target)?;
        }
        call.args.iter().try_for_each(|arg| self.expr(arg))
    }

    /// Whether an identifier names a value rather than a function namespace.
    fn names_a_value(&self, name: &str) -> bool {
        self.is_local(name)
            || ROOTS.contains(&name)
            || ["params", "variables"].contains(&name)
            || TYPE_NAMES.contains(&name)
    }
}

/// The fields a typed variable declares below `path` (`None`: anything, not checked).
type Shape = fn(&[&str]) -> Option<&'static [&'static str]>;

fn request_shape(path: &[&str]) -> Option<&'static [&'static str]> {
    match path {
        [] => Some(&REQUEST_FIELDS),
        ["kind" | "requestKind"] => Some(&KIND_FIELDS),
        ["resource" | "requestResource"] => Some(&RESOURCE_FIELDS),
        ["userInfo"] => Some(&USER_INFO_FIELDS),
        _ => None,
    }
}

fn namespace_shape(path: &[&str]) -> Option<&'static [&'static str]> {
    match path {
        [] => Some(&NAMESPACE_FIELDS),
        ["metadata"] => Some(&NAMESPACE_METADATA_FIELDS),
        ["spec"] => Some(&NAMESPACE_SPEC_FIELDS),
        ["status"] => Some(&NAMESPACE_STATUS_FIELDS),
        _ => None,
    }
}

fn typed_fields(fields: &[(u64, &str)], shape: Shape) -> Result<(), Issue> {
    let mut path: Vec<&str> = Vec::new();
    for (id, field) in fields {
        let Some(known) = shape(&path) else {
            return Ok(());
        };
        if !known.contains(field) {
            return Err(undefined_field(*id, field));
        }
        path.push(field);
    }
    Ok(())
}

/// `a.b.c` as `[(id, "a"), (id, "b"), (id, "c")]`, each with the node that names it
/// (the selection's, where cel-go reports a field), when `node` is only plain field
/// selections on an identifier.
fn chain(node: &IdedExpr) -> Option<Vec<(u64, &str)>> {
    match &node.expr {
        Expr::Ident(name) => Some(vec![(node.id, name.as_str())]),
        Expr::Select(select) if !select.test => {
            let mut chain = chain(&select.operand)?;
            chain.push((node.id, select.field.as_str()));
            Some(chain)
        }
        _ => None,
    }
}

/// The result type the expression's place needs: `bool` for a match condition,
/// `Object` for an ApplyConfiguration, `list(JSONPatch)` for a JSONPatch. A match
/// condition of a type that is not evident is let through; a mutation's must be
/// evidently right, as cel-go's result of an expression it cannot type exactly is
/// `dyn`, which the apiserver refuses there.
fn result_type(root: &IdedExpr, kind: AdmissionKind) -> Result<(), Rejection> {
    let ty = Scope::default().infer(root);
    let (expected, wanted) = match kind {
        AdmissionKind::Variable => return Ok(()),
        AdmissionKind::MatchCondition => {
            if ty.is_none() {
                return Ok(());
            }
            ("bool", Ty::Bool)
        }
        AdmissionKind::ApplyConfiguration => ("Object", Ty::Struct(structs::OBJECT.to_owned())),
        AdmissionKind::JsonPatch => (
            "list(JSONPatch)",
            Ty::List(Box::new(Ty::Struct(structs::JSON_PATCH.to_owned()))),
        ),
    };
    match ty {
        Some(ty) if ty == wanted => Ok(()),
        other => Err(Rejection::ResultType {
            expected,
            got: other.map_or_else(|| "dyn".to_owned(), |ty| ty.to_string()),
        }),
    }
}
