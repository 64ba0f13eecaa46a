//! The load-time check of a compiled expression: every name it refers to exists.
//!
//! The `cel` crate has no type checker, so a misspelt name (`objekt`, `podOrdnal`,
//! `request.namespce`) would compile and then fail every evaluation. This walks the
//! expression instead, and holds:
//!
//! - every identifier to a variable graft binds (`object`, `oldObject`, `request`,
//!   `params`, `variables`, `namespaceObject`; `element` and `index` under a `foreach`),
//!   a comprehension's own variables, or a type name (`int`, `string`, ...);
//! - every call to a function, method or macro of `catalog`, with one of its
//!   arities;
//! - `request.X` to the fields graft puts in `request`, `params.X` to the keys the
//!   policy declares, `variables.X` to a variable evaluated before the expression.
//!
//! The optional forms (`request.?x`, `params[?'x']`) are not held to the shapes: they
//! say the author expects absence.

use crate::tree::{Map, Tree};
use cel::Env;
use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr, SelectExpr};

use super::catalog::{self, Signature, Style};

/// What a policy declares that an expression may refer to.
#[derive(Debug, Clone, Copy)]
pub struct Declarations<'a> {
    /// `params`, as the policy gives it.
    pub params: &'a Tree<'static>,
    /// The variables evaluated before the expression, so visible to it.
    pub variables: &'a [String],
    /// Every variable of the policy, to explain one used before it is evaluated.
    pub all_variables: &'a [String],
    /// The Kubernetes type of `object`, when the policy matches one kind: its fields'
    /// types are held to the operators applied to them.
    pub object: Option<crate::k8s::schema::TypeRef<'static>>,
}

impl Declarations<'static> {
    /// A policy without params or variables.
    pub const NONE: Declarations<'static> = Declarations {
        params: &Tree::Null,
        variables: &[],
        all_variables: &[],
        object: None,
    };
}

/// A name an expression refers to that does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CheckError {
    pub message: String,
    pub hint: Option<String>,
}

/// The variables every evaluation binds.
pub const ROOTS: [&str; 6] = [
    "object",
    "oldObject",
    "namespaceObject",
    "request",
    "params",
    "variables",
];

/// The variables bound under a mutation's `foreach` only (the policy compiler holds
/// them to it).
pub const FOREACH_ROOTS: [&str; 2] = ["element", "index"];

/// The fields of `request` (`engine::run::request_binding`).
const REQUEST_FIELDS: [&str; 9] = super::request_fields::FIELDS;
/// The fields of `request`'s nested objects.
const KIND_FIELDS: [&str; 3] = ["group", "version", "kind"];
const RESOURCE_FIELDS: [&str; 3] = ["group", "version", "resource"];
const USER_INFO_FIELDS: [&str; 4] = ["username", "uid", "groups", "extra"];

/// Fields of a Kubernetes AdmissionRequest that graft does not put in `request`.
const REQUEST_ABSENT: [(&str, &str); 6] = [
    ("requestKind", "use request.kind"),
    ("requestResource", "use request.resource"),
    ("requestSubResource", "use request.subResource"),
    ("options", "graft does not pass the operation's options"),
    ("object", "use the variable object"),
    ("oldObject", "use the variable oldObject"),
];

/// Checks `root`, failing with the first problem in source order.
pub fn check(
    root: &IdedExpr,
    env: &Env,
    declarations: &Declarations<'_>,
) -> Result<(), CheckError> {
    Checker {
        env,
        declarations,
        locals: Vec::new(),
    }
    .expr(root)
}

struct Checker<'a> {
    env: &'a Env,
    declarations: &'a Declarations<'a>,
    /// Comprehension variables in scope, innermost last.
    locals: Vec<String>,
}

impl Checker<'_> {
    fn expr(&mut self, node: &IdedExpr) -> Result<(), CheckError> {
        match &node.expr {
            Expr::Ident(name) => self.ident(name),
            Expr::Select(select) => self.select(node, select),
            Expr::Call(call) => self.call(call),
            Expr::Comprehension(c) => {
                self.expr(&c.iter_range)?;
                self.expr(&c.accu_init)?;
                let before = self.locals.len();
                self.locals.push(c.iter_var.clone());
                self.locals.extend(c.iter_var2.iter().cloned());
                self.locals.push(c.accu_var.clone());
                let inner = [&c.loop_cond, &c.loop_step, &c.result]
                    .into_iter()
                    .try_for_each(|e| self.expr(e));
                self.locals.truncate(before);
                inner
            }
            Expr::List(list) => list.elements.iter().try_for_each(|e| self.expr(e)),
            Expr::Map(map) => self.entries(&map.entries),
            Expr::Struct(s) => {
                if self.env.types().find_struct(&s.type_name).is_none() {
                    return Err(CheckError {
                        message: format!("unknown message type {}", s.type_name),
                        hint: Some(
                            "graft declares no message types: build a map with {'key': value}"
                                .to_string(),
                        ),
                    });
                }
                self.entries(&s.entries)
            }
            Expr::Literal(_) | Expr::Unspecified => Ok(()),
        }
    }

    fn entries(&mut self, entries: &[cel::common::ast::IdedEntryExpr]) -> Result<(), CheckError> {
        for entry in entries {
            match &entry.expr {
                EntryExpr::MapEntry(e) => {
                    self.expr(&e.key)?;
                    self.expr(&e.value)?;
                }
                EntryExpr::StructField(f) => self.expr(&f.value)?,
            }
        }
        Ok(())
    }

    fn is_local(&self, name: &str) -> bool {
        self.locals.iter().any(|local| local == name)
    }

    /// The names an identifier may be: the variables and the comprehensions' own.
    fn names(&self) -> impl Iterator<Item = &str> + Clone {
        ROOTS.iter().chain(&FOREACH_ROOTS).copied().chain(
            self.locals
                .iter()
                .map(String::as_str)
                .filter(|l| !l.starts_with('@') && !l.starts_with('#')),
        )
    }

    fn ident(&self, name: &str) -> Result<(), CheckError> {
        if self.is_local(name)
            || ROOTS.contains(&name)
            || FOREACH_ROOTS.contains(&name)
            || self.env.types().find_type(name).is_some()
        {
            return Ok(());
        }
        let known = self.names();
        Err(CheckError {
            message: format!("unknown name {name}"),
            hint: Some(suggest(name, known).map_or_else(
                || {
                    format!(
                        "the variables are {} (and {} under a foreach)",
                        ROOTS.join(", "),
                        FOREACH_ROOTS.join(", ")
                    )
                },
                |best| format!("did you mean {best}?"),
            )),
        })
    }

    /// `a.b.c`: a chain of selections on a variable is held to the shape graft knows
    /// for that variable; any other operand is checked as an expression.
    fn select(&mut self, node: &IdedExpr, select: &SelectExpr) -> Result<(), CheckError> {
        let Some((root, fields)) = chain(node) else {
            return self.expr(&select.operand);
        };
        self.ident(root)?;
        if self.is_local(root) {
            return Ok(());
        }
        match root {
            "request" => request_fields(&fields),
            "params" => self.params_fields(&fields),
            "variables" => fields.first().map_or(Ok(()), |name| self.variable(name)),
            _ => Ok(()),
        }
    }

    fn params_fields(&self, fields: &[&str]) -> Result<(), CheckError> {
        let no_params = Map::new();
        let params = self.declarations.params;
        let mut map = match params.as_map() {
            Some(map) => map,
            None if params.is_null() => &no_params,
            // A list or scalar: indexing into it is the evaluation's job.
            None => return Ok(()),
        };
        let mut path = String::from("params");
        for field in fields {
            let Some(next) = map.get(field) else {
                let message = if path == "params" && map.is_empty() {
                    format!("params.{field} is not declared: the policy has no spec.params")
                } else {
                    format!("{path}.{field} is not declared in spec.params")
                };
                return Err(CheckError {
                    message,
                    hint: Some(hint_among(field, map.keys(), &path)),
                });
            };
            let Some(inner) = next.as_map() else {
                return Ok(());
            };
            path.push('.');
            path.push_str(field);
            map = inner;
        }
        Ok(())
    }

    fn variable(&self, name: &str) -> Result<(), CheckError> {
        let declarations = self.declarations;
        if declarations.variables.iter().any(|v| v == name) {
            return Ok(());
        }
        if declarations.all_variables.iter().any(|v| v == name) {
            return Err(CheckError {
                message: format!("variables.{name} is not evaluated yet here"),
                hint: Some(
                    "variables are evaluated in order, after spec.match and spec.exclude: refer \
                     only to those declared above"
                        .to_string(),
                ),
            });
        }
        Err(CheckError {
            message: format!("variables.{name} is not declared in spec.variables"),
            hint: Some(hint_among(
                name,
                declarations.variables.iter().map(String::as_str),
                "variables",
            )),
        })
    }

    fn call(&mut self, call: &CallExpr) -> Result<(), CheckError> {
        let name = call.func_name.as_str();
        if is_operator(name) {
            // `a.?b` and `a[?b]`: the optional forms skip the shape checks of their
            // operand's last step, so only the operand is checked.
            if let Some(target) = &call.target {
                self.expr(target)?;
            }
            return call.args.iter().try_for_each(|arg| self.expr(arg));
        }
        match &call.target {
            Some(target) => {
                // `optional.of(x)`: a namespaced function, written like a method call.
                if let Some((root, fields)) = chain(target)
                    && !self.is_local(root)
                    && !ROOTS.contains(&root)
                    && !FOREACH_ROOTS.contains(&root)
                    && self.env.types().find_type(root).is_none()
                {
                    let qualified = std::iter::once(root)
                        .chain(fields)
                        .chain([name])
                        .collect::<Vec<_>>()
                        .join(".");
                    let namespace = format!("{root}.");
                    let known = catalog::signatures()
                        .iter()
                        .any(|s| s.name == qualified || s.name.starts_with(&namespace));
                    if known {
                        arity(&qualified, Style::Function, call.args.len())?;
                        return call.args.iter().try_for_each(|arg| self.expr(arg));
                    }
                    // `math.abs(x)`: an unknown root that is not close to a variable's
                    // name is read as a function namespace graft does not have.
                    if suggest(root, self.names()).is_none() {
                        return Err(unknown("function", &qualified, Style::Function));
                    }
                }
                arity(name, Style::Method, call.args.len())?;
                self.expr(target)?;
            }
            None => arity(name, Style::Function, call.args.len())?,
        }
        call.args.iter().try_for_each(|arg| self.expr(arg))
    }
}

/// The operators the parser writes as calls (`_+_`, `@in`, `!_`, `_?._`, ...), and
/// graft's internal functions (`@graft_keys`).
pub(super) fn is_operator(name: &str) -> bool {
    name.starts_with('_') || name.starts_with('@') || name.ends_with('_')
}

fn signatures_named(name: &str) -> impl Iterator<Item = &'static Signature> + '_ {
    catalog::signatures().iter().filter(move |s| s.name == name)
}

/// Whether `name` may be called in `style` with `count` arguments.
fn arity(name: &str, style: Style, count: usize) -> Result<(), CheckError> {
    let same_style: Vec<&Signature> = signatures_named(name)
        .filter(|s| s.style == style)
        .collect();
    if same_style.iter().any(|s| s.arity == count) {
        return Ok(());
    }
    if let Some(first) = same_style.first() {
        let arities: Vec<String> = same_style.iter().map(|s| s.arity.to_string()).collect();
        let plural = if same_style.len() == 1 && first.arity == 1 {
            ""
        } else {
            "s"
        };
        return Err(CheckError {
            message: format!(
                "{name} takes {} argument{plural}, not {count}",
                arities.join(" or ")
            ),
            hint: None,
        });
    }
    if signatures_named(name).next().is_some() {
        let hint = match style {
            Style::Function => format!("{name} is a method: write value.{name}(...)"),
            Style::Method => format!("{name} is a function: write {name}(value, ...)"),
        };
        return Err(CheckError {
            message: format!("{name} cannot be called this way"),
            hint: Some(hint),
        });
    }
    let kind = match style {
        Style::Function => "function",
        Style::Method => "method",
    };
    Err(unknown(kind, name, style))
}

fn unknown(kind: &str, name: &str, style: Style) -> CheckError {
    let candidates = catalog::signatures()
        .iter()
        .filter(|s| s.style == style)
        .map(|s| s.name);
    CheckError {
        message: format!("unknown {kind} {name}"),
        hint: suggest(name, candidates).map(|best| format!("did you mean {best}?")),
    }
}

fn request_fields(fields: &[&str]) -> Result<(), CheckError> {
    let Some((first, rest)) = fields.split_first() else {
        return Ok(());
    };
    if let Some((_, hint)) = REQUEST_ABSENT.iter().find(|(field, _)| field == first) {
        return Err(CheckError {
            message: format!("graft's request has no field {first}"),
            hint: Some((*hint).to_string()),
        });
    }
    check_field("request", first, &REQUEST_FIELDS)?;
    let nested: &[&str] = match *first {
        "kind" => &KIND_FIELDS,
        "resource" => &RESOURCE_FIELDS,
        "userInfo" => &USER_INFO_FIELDS,
        _ => return Ok(()),
    };
    match rest.first() {
        Some(second) => check_field(&format!("request.{first}"), second, nested),
        None => Ok(()),
    }
}

fn check_field(parent: &str, field: &str, known: &[&str]) -> Result<(), CheckError> {
    if known.contains(&field) {
        return Ok(());
    }
    Err(CheckError {
        message: format!("{parent} has no field {field}"),
        hint: Some(hint_among(field, known.iter().copied(), parent)),
    })
}

/// "did you mean X?" when a name is close, else the names there are.
fn hint_among<'a>(
    name: &str,
    known: impl Iterator<Item = &'a str> + Clone,
    parent: &str,
) -> String {
    match suggest(name, known.clone()) {
        Some(best) => format!("did you mean {parent}.{best}?"),
        None => {
            let all: Vec<&str> = known.collect();
            if all.is_empty() {
                format!("{parent} has no fields")
            } else {
                format!("{parent} has {}", all.join(", "))
            }
        }
    }
}

/// The known name closest to `name`, when it is close enough to be a typo of it.
fn suggest<'a>(name: &str, known: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    known
        .map(|candidate| {
            let distance = strsim::damerau_levenshtein(
                &name.to_ascii_lowercase(),
                &candidate.to_ascii_lowercase(),
            );
            (distance, candidate)
        })
        .filter(|(distance, candidate)| *distance <= 2.max(candidate.len() / 3))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// `a.b.c` as `("a", ["b", "c"])`, when `node` is only selections (and `has()`
/// tests) on an identifier.
fn chain(node: &IdedExpr) -> Option<(&str, Vec<&str>)> {
    match &node.expr {
        Expr::Ident(name) => Some((name.as_str(), Vec::new())),
        Expr::Select(select) => {
            let (root, mut fields) = chain(&select.operand)?;
            fields.push(select.field.as_str());
            Some((root, fields))
        }
        _ => None,
    }
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
