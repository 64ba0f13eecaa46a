//! The operator type errors of graft's own expressions that can be known at load: an
//! operator applied to operands whose types are known and have no overload for it
//! (`object.metadata.?labels['x'].orValue('') + 1`, a string and an int), which the
//! interpreter would refuse on every request. Types come from literals, the fields of
//! `object` and `oldObject` when the policy matches one kind (the Kubernetes schema
//! table), conversions, operators and the library functions over them
//! ([`super::admission_types`]); anything `dyn` or unknown is not held to anything.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, operators};

use super::admission_types::{Scope, Ty};
use crate::k8s::schema::TypeRef;

/// An operator applied to operands of types it has no overload for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeError {
    pub message: String,
    pub hint: String,
}

/// The first operator type error in `root`, where `object` is of type `object` (or
/// `dyn` when `None`).
pub fn first(root: &IdedExpr, object: Option<TypeRef<'static>>) -> Option<TypeError> {
    let mut found = None;
    walk(root, object, &mut found);
    found
}

fn scope(object: Option<TypeRef<'static>>) -> Scope {
    object.map_or_else(Scope::default, Scope::with_object)
}

fn walk(node: &IdedExpr, object: Option<TypeRef<'static>>, found: &mut Option<TypeError>) {
    if found.is_some() {
        return;
    }
    match &node.expr {
        Expr::Call(call) => {
            if let (Some(symbol), [left, right]) = (symbol(&call.func_name), call.args.as_slice())
                && let (Some(a), Some(b)) = (scope(object).infer(left), scope(object).infer(right))
                && !has_overload(&call.func_name, &a, &b)
            {
                *found = Some(TypeError {
                    message: format!(
                        "no overload of `{symbol}` takes {} and {}: the expression fails on every request",
                        article(&a),
                        article(&b)
                    ),
                    hint: "convert one side (string(x), int(x), double(x)) so both are of one type"
                        .to_string(),
                });
                return;
            }
            if let Some(target) = &call.target {
                walk(target, object, found);
            }
            for arg in &call.args {
                walk(arg, object, found);
            }
        }
        Expr::Select(select) => walk(&select.operand, object, found),
        Expr::List(list) => {
            for item in &list.elements {
                walk(item, object, found);
            }
        }
        Expr::Map(map) => {
            for entry in &map.entries {
                if let EntryExpr::MapEntry(entry) = &entry.expr {
                    walk(&entry.key, object, found);
                    walk(&entry.value, object, found);
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &s.entries {
                if let EntryExpr::StructField(field) = &entry.expr {
                    walk(&field.value, object, found);
                }
            }
        }
        // A comprehension's variables are unknown to a fresh scope, so only its range
        // and its initial value, which do not see them, are looked into.
        Expr::Comprehension(c) => {
            walk(&c.iter_range, object, found);
            walk(&c.accu_init, object, found);
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// The operator's symbol, for the binary operators checked.
fn symbol(function: &str) -> Option<&'static str> {
    Some(match function {
        operators::ADD => "+",
        operators::SUBSTRACT => "-",
        operators::MULTIPLY => "*",
        operators::DIVIDE => "/",
        operators::MODULO => "%",
        operators::LESS => "<",
        operators::LESS_EQUALS => "<=",
        operators::GREATER => ">",
        operators::GREATER_EQUALS => ">=",
        _ => return None,
    })
}

/// Whether the types are definite enough to hold the operator to them: anything `dyn`,
/// free or of a Kubernetes struct type might be anything at run time.
fn is_concrete(ty: &Ty) -> bool {
    matches!(
        ty,
        Ty::Int
            | Ty::Uint
            | Ty::Double
            | Ty::Bool
            | Ty::String
            | Ty::Bytes
            | Ty::Null
            | Ty::Timestamp
            | Ty::Duration
            | Ty::List(_)
            | Ty::Map(..)
    )
}

fn is_number(ty: &Ty) -> bool {
    matches!(ty, Ty::Int | Ty::Uint | Ty::Double)
}

/// Whether the interpreter has an overload of `function` for operands of types `a` and
/// `b`; `true` when either type is not concrete.
fn has_overload(function: &str, a: &Ty, b: &Ty) -> bool {
    if !is_concrete(a) || !is_concrete(b) {
        return true;
    }
    let same_number = is_number(a) && a == b;
    match function {
        operators::ADD => {
            same_number
                || matches!(
                    (a, b),
                    (Ty::String, Ty::String)
                        | (Ty::Bytes, Ty::Bytes)
                        | (Ty::List(_), Ty::List(_))
                        | (Ty::Timestamp, Ty::Duration)
                        | (Ty::Duration, Ty::Timestamp)
                        | (Ty::Duration, Ty::Duration)
                )
        }
        operators::SUBSTRACT => {
            same_number
                || matches!(
                    (a, b),
                    (Ty::Timestamp, Ty::Timestamp)
                        | (Ty::Timestamp, Ty::Duration)
                        | (Ty::Duration, Ty::Duration)
                )
        }
        operators::MULTIPLY | operators::DIVIDE => same_number,
        operators::MODULO => matches!((a, b), (Ty::Int, Ty::Int) | (Ty::Uint, Ty::Uint)),
        // Numbers compare across their types; everything else within its own.
        _ => {
            (is_number(a) && is_number(b))
                || (a == b
                    && matches!(
                        a,
                        Ty::String | Ty::Bytes | Ty::Bool | Ty::Timestamp | Ty::Duration
                    ))
        }
    }
}

/// `a string`, `an int`, `a list(string)`.
fn article(ty: &Ty) -> String {
    let name = ty.to_string();
    let vowel = name.starts_with(['a', 'e', 'i', 'o', 'u']);
    format!("{} {name}", if vowel { "an" } else { "a" })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::schema;

    fn pod() -> TypeRef<'static> {
        schema::builtin()
            .expect("the table parses")
            .kind("", "v1", "Pod")
            .expect("Pod")
    }

    fn error(source: &str, object: Option<TypeRef<'static>>) -> Option<String> {
        let program = crate::expr::environment()
            .expect("the environment builds")
            .compile(source)
            .expect("parses");
        first(program.expression(), object).map(|e| e.message)
    }

    #[test]
    fn operators_on_known_types_without_an_overload_are_errors() {
        let pod = Some(pod());
        assert_eq!(
            error("object.metadata.?labels['x'].orValue('') + 1", pod).as_deref(),
            Some(
                "no overload of `+` takes a string and an int: the expression fails on every request"
            )
        );
        assert!(error("'a' + 1", None).is_some());
        assert!(error("object.spec.containers.size() + 'x'", pod).is_some());
        assert!(error("object.spec.hostNetwork < 1", pod).is_some());
        assert!(error("1 + 1.5", None).is_some());
        assert!(error("[1].map(x, x + 'a') == []", None).is_none());
    }

    #[test]
    fn what_may_have_an_overload_is_accepted() {
        let pod = Some(pod());
        for source in [
            "object.metadata.?labels['x'].orValue('') + 'y'",
            "object.spec.containers.size() + 1",
            "object.spec.priority + 1",
            "object.metadata.name + '-' + string(object.spec.priority)",
            "object.metadata.labels['a'] + 'b'",
            "object.spec.overhead['cpu'] + 1",
            "1 < 1.5",
            "params.x + 1",
            "object.anything + 1",
            "timestamp('2024-01-01T00:00:00Z') + duration('1h') > timestamp('2024-01-01T00:00:00Z')",
        ] {
            assert_eq!(error(source, pod), None, "{source}");
        }
        assert_eq!(error("object.metadata.labels['a'] + 1", None), None);
    }
}
