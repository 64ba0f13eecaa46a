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
//!   ([`super::admission_types`]);
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
    fn new(id: u64, message: impl Into<String>) -> Issue {
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
    homogeneous(root, &mut Scope::default(), false).map_err(Rejection::Issue)?;
    formats(root).map_err(Rejection::Issue)?;
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

/// Every list and map literal outside a `format` call holds elements of one type, where
/// their types are evident.
fn homogeneous(node: &IdedExpr, scope: &mut Scope, in_format: bool) -> Result<(), Issue> {
    match &node.expr {
        Expr::List(list) if !in_format => {
            let mut first: Option<Ty> = None;
            for (i, element) in list.elements.iter().enumerate() {
                let ty = scope.infer(element).and_then(|ty| {
                    if list.optional_indices.contains(&i) {
                        match ty {
                            Ty::Optional(inner) => Some(*inner),
                            _ => None,
                        }
                    } else {
                        Some(ty)
                    }
                });
                compare(&mut first, ty, element.id)?;
            }
        }
        Expr::Map(map) if !in_format => {
            let (mut keys, mut values) = (None, None);
            for entry in &map.entries {
                let EntryExpr::MapEntry(entry) = &entry.expr else {
                    continue;
                };
                compare(&mut keys, scope.infer(&entry.key), entry.key.id)?;
                let value = scope
                    .infer(&entry.value)
                    .and_then(|ty| match (entry.optional, ty) {
                        (true, Ty::Optional(inner)) => Some(*inner),
                        (true, _) => None,
                        (false, ty) => Some(ty),
                    });
                compare(&mut values, value, entry.value.id)?;
            }
        }
        _ => {}
    }
    let in_format = in_format
        || matches!(&node.expr, Expr::Call(call) if call.func_name == "format" && call.target.is_some());
    children(node, |child| homogeneous(child, scope, in_format))
}

/// A `format` call on a literal string with a literal list holds each argument to its
/// clause and uses them all, as cel-go's compile-time check of `format` has it.
fn formats(node: &IdedExpr) -> Result<(), Issue> {
    if let Expr::Call(call) = &node.expr
        && call.func_name == "format"
        && let (Some(target), [list]) = (&call.target, call.args.as_slice())
        && let Expr::Literal(LiteralValue::String(template)) = &target.expr
        && let Expr::List(list) = &list.expr
    {
        let (verbs, end) = super::format::verbs(template.inner());
        let args = &list.elements;
        for (index, verb) in verbs.iter().enumerate() {
            let arg = args
                .get(index)
                .ok_or_else(|| Issue::new(node.id, format!("index {index} out of range")))?;
            format_arg(*verb, arg)?;
        }
        if let Some(end) = end {
            let message = if verbs.len() >= args.len() {
                format!("index {} out of range", verbs.len())
            } else {
                end
            };
            return Err(Issue::new(node.id, message));
        }
        if args.len() > verbs.len() {
            return Err(Issue::new(
                node.id,
                format!(
                    "too many arguments supplied to string.format (expected {}, got {})",
                    verbs.len(),
                    args.len()
                ),
            ));
        }
    }
    children(node, formats)
}

/// Holds `arg` to the types the clause `verb` takes, where its type is evident.
fn format_arg(verb: char, arg: &IdedExpr) -> Result<(), Issue> {
    let Some(ty) = Scope::default().infer(arg) else {
        return Ok(());
    };
    let numbers = matches!(ty, Ty::Int | Ty::Uint);
    let (valid, message) = match verb {
        'd' => (numbers, "decimal clause can only be used on integers"),
        'f' => (
            matches!(ty, Ty::Double | Ty::String),
            "fixed-point clause can only be used on doubles",
        ),
        'e' => (
            matches!(ty, Ty::Double | Ty::String),
            "scientific clause can only be used on doubles",
        ),
        'b' => (
            numbers || ty == Ty::Bool,
            "only integers and bools can be formatted as binary",
        ),
        'x' | 'X' => (
            numbers || matches!(ty, Ty::String | Ty::Bytes),
            "only integers, byte buffers, and strings can be formatted as hex",
        ),
        'o' => (numbers, "octal clause can only be used on integers"),
        _ => return format_string_arg(arg),
    };
    if valid || ty == Ty::Dyn {
        return Ok(());
    }
    Err(Issue::new(
        arg.id,
        format!(
            "error during formatting: {message}, was given {}",
            ty.type_name()
        ),
    ))
}

/// `%s`'s argument: a value it prints, lists and maps of such.
fn format_string_arg(arg: &IdedExpr) -> Result<(), Issue> {
    let printable = match Scope::default().infer(arg) {
        None | Some(Ty::Dyn | Ty::Free) => true,
        Some(Ty::Optional(_) | Ty::Struct(_)) => false,
        Some(_) => true,
    };
    if !printable {
        let ty = Scope::default()
            .infer(arg)
            .map_or_else(String::new, |t| t.type_name());
        return Err(Issue::new(
            arg.id,
            format!(
                "error during formatting: string clause can only be used on strings, bools, \
                 bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given \
                 {ty}"
            ),
        ));
    }
    match &arg.expr {
        Expr::List(list) => list.elements.iter().try_for_each(format_string_arg),
        Expr::Map(map) => map.entries.iter().try_for_each(|entry| match &entry.expr {
            EntryExpr::MapEntry(e) => {
                format_string_arg(&e.key)?;
                format_string_arg(&e.value)
            }
            EntryExpr::StructField(_) => Ok(()),
        }),
        _ => Ok(()),
    }
}

/// Holds the next element's type to the first's, when both are evident.
fn compare(first: &mut Option<Ty>, next: Option<Ty>, id: u64) -> Result<(), Issue> {
    let Some(next) = next.filter(Ty::is_definite) else {
        return Ok(());
    };
    match first {
        None => {
            *first = Some(next);
            Ok(())
        }
        Some(expected) if *expected == next => Ok(()),
        Some(expected) => Err(Issue::new(
            id,
            format!("expected type '{expected}' but found '{next}'"),
        )),
    }
}

/// Calls `f` with each child of `node`. Comprehensions' variables are not typed here:
/// the literals inside their bodies are checked as far as their types do not depend on
/// them.
fn children(
    node: &IdedExpr,
    mut f: impl FnMut(&IdedExpr) -> Result<(), Issue>,
) -> Result<(), Issue> {
    match &node.expr {
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                f(target)?;
            }
            call.args.iter().try_for_each(f)
        }
        Expr::Comprehension(c) => [
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ]
        .into_iter()
        .try_for_each(f),
        Expr::List(list) => list.elements.iter().try_for_each(f),
        Expr::Map(map) => map.entries.iter().try_for_each(|entry| match &entry.expr {
            EntryExpr::MapEntry(e) => {
                f(&e.key)?;
                f(&e.value)
            }
            EntryExpr::StructField(field) => f(&field.value),
        }),
        Expr::Struct(s) => s.entries.iter().try_for_each(|entry| match &entry.expr {
            EntryExpr::MapEntry(e) => {
                f(&e.key)?;
                f(&e.value)
            }
            EntryExpr::StructField(field) => f(&field.value),
        }),
        Expr::Select(select) => f(&select.operand),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Ok(()),
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
