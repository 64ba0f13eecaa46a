//! Warnings about CEL that compiles but fails at admission: found in the compiled
//! program at load, reported by `graft lint` with the policy's field.
//!
//! - `has(a.b.c)` tests only its last field: when `a.b` is absent, CEL fails with "no
//!   such key" instead of answering false, and under `failurePolicy: Fail` that denies
//!   the request. The optional form (`a.?b.?c.hasValue()`) answers false.
//! - A part that reads only `params` and literals and fails when the policy loads fails
//!   on every review that reaches it ([`fails_at_load`]).

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr};

/// A CEL construct that is likely to fail at admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprWarning {
    pub message: String,
    pub hint: String,
}

/// The warnings of one compiled expression, in source order.
pub fn check(root: &IdedExpr) -> Vec<ExprWarning> {
    let mut warnings = Vec::new();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if let Expr::Select(select) = &node.expr
            && select.test
            && let Some(chain) = select_chain(&select.operand)
            && !always_present(&chain)
        {
            warnings.push(has_warning(&chain, &select.field));
        }
        push_children(&mut stack, node);
    }
    warnings
}

/// `a.b.c` as `["a", "b", "c"]`, when the expression is only field selections on a
/// variable.
fn select_chain(expr: &IdedExpr) -> Option<Vec<&str>> {
    match &expr.expr {
        Expr::Ident(name) => Some(vec![name.as_str()]),
        Expr::Select(select) if !select.test => {
            let mut chain = select_chain(&select.operand)?;
            chain.push(select.field.as_str());
            Some(chain)
        }
        _ => None,
    }
}

/// Whether the value `has()` looks into is always there: a variable itself, the
/// `metadata` of an object, or a field of a variable whose shape graft knows
/// (`request`, `params`, `variables`).
fn always_present(chain: &[&str]) -> bool {
    matches!(
        chain,
        [_] | ["object" | "oldObject" | "namespaceObject", "metadata"]
            | ["request" | "params" | "variables", _]
    )
}

fn has_warning(chain: &[&str], field: &str) -> ExprWarning {
    let written = format!("has({}.{field})", chain.join("."));
    let parent = chain.join(".");
    // The first field stays plain: `object.spec`, a comprehension's `c.securityContext`.
    let (plain, optional) = chain.split_at(chain.len().min(2));
    let mut suggestion = plain.join(".");
    for part in optional.iter().chain(std::iter::once(&field)) {
        suggestion.push_str(".?");
        suggestion.push_str(part);
    }
    suggestion.push_str(".hasValue()");
    ExprWarning {
        message: format!(
            "{written} fails with \"no such key\" when {parent} is absent (has() tests only its \
             last field); under failurePolicy Fail that denies the request"
        ),
        hint: format!("write {suggestion}, which is false when any part is absent"),
    }
}

/// A part of the expression that reads only `params` and literals failed when the
/// policy loaded ([`super::fold`]): every review that reaches it fails the same way.
pub fn fails_at_load(reason: &str) -> ExprWarning {
    ExprWarning {
        message: format!(
            "a part of this expression that reads only params and literals fails: {reason}; \
             every review that reaches it fails the same way"
        ),
        hint: "check the params it reads and the values it computes from them".to_string(),
    }
}

/// Pushes the children of `node` so that they are popped in source order.
fn push_children<'a>(stack: &mut Vec<&'a IdedExpr>, node: &'a IdedExpr) {
    match &node.expr {
        Expr::Call(call) => {
            stack.extend(call.args.iter().rev());
            if let Some(target) = &call.target {
                stack.push(target);
            }
        }
        Expr::Comprehension(c) => {
            stack.extend([
                &c.result,
                &c.loop_step,
                &c.loop_cond,
                &c.accu_init,
                &c.iter_range,
            ]);
        }
        Expr::List(list) => stack.extend(list.elements.iter().rev()),
        Expr::Map(map) => push_entries(stack, &map.entries),
        Expr::Struct(s) => push_entries(stack, &s.entries),
        Expr::Select(select) => stack.push(&select.operand),
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
    }
}

fn push_entries<'a>(stack: &mut Vec<&'a IdedExpr>, entries: &'a [cel::common::ast::IdedEntryExpr]) {
    for entry in entries.iter().rev() {
        match &entry.expr {
            EntryExpr::MapEntry(e) => stack.extend([&e.value, &e.key]),
            EntryExpr::StructField(f) => stack.push(&f.value),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warnings(source: &str) -> Vec<ExprWarning> {
        let program = cel::Env::stdlib().compile(source).expect(source);
        check(program.expression())
    }

    #[test]
    fn has_over_an_optional_parent_is_warned_with_the_optional_form() {
        let found = warnings("has(object.spec.securityContext.runAsUser)");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0]
                .message
                .starts_with("has(object.spec.securityContext.runAsUser) fails"),
            "{}",
            found[0].message
        );
        assert_eq!(
            found[0].hint,
            "write object.spec.?securityContext.?runAsUser.hasValue(), which is false when any part is absent"
        );
        let found = warnings("object.spec.containers.all(c, has(c.securityContext.runAsNonRoot))");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0]
                .hint
                .contains("c.securityContext.?runAsNonRoot.hasValue()")
        );
    }

    #[test]
    fn has_where_the_parent_is_always_there_is_fine() {
        for source in [
            "has(object.spec)",
            "has(object.metadata.labels)",
            "has(oldObject.metadata.annotations)",
            "has(request.userInfo.username)",
            "has(params.registry)",
            "object.spec.containers.all(c, has(c.image))",
            "object.spec.?securityContext.?runAsUser.hasValue()",
            "has(object.spec.containers[0].image)",
        ] {
            assert_eq!(warnings(source), Vec::new(), "{source}");
        }
    }

    #[test]
    fn every_has_is_checked() {
        let found = warnings(
            "has(object.status.capacity.cpu) && [has(object.spec.a.b)].exists(x, x) || {'k': has(object.x.y.z)}.k",
        );
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(
            found[0]
                .message
                .starts_with("has(object.status.capacity.cpu)")
        );
        assert!(found[2].message.starts_with("has(object.x.y.z)"));
    }
}
