//! The apiserver's compile-time checks of literals (cel-go's AST validators), as far as
//! the types [`super::admission_types`] infers show them: list and map literals hold
//! elements of one type (`HomogeneousAggregateLiterals`; `format`'s arguments are
//! exempt), and a `format` call on a literal string with a literal list gives each
//! clause an argument of a type it takes, and uses them all.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::admission_check::Issue;
use super::admission_types::{Scope, Ty};

/// Every list and map literal outside a `format` call holds elements of one type, where
/// their types are evident.
pub fn homogeneous(root: &IdedExpr) -> Result<(), Issue> {
    within(root, &mut Scope::default(), false)
}

fn within(node: &IdedExpr, scope: &mut Scope, in_format: bool) -> Result<(), Issue> {
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
    children(node, |child| within(child, scope, in_format))
}

/// A `format` call on a literal string with a literal list holds each argument to its
/// clause and uses them all, as cel-go's compile-time check of `format` has it.
pub fn formats(node: &IdedExpr) -> Result<(), Issue> {
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
