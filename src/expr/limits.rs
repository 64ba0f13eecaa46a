//! Static bounds on CEL programs, checked when an expression is compiled.
//!
//! The `cel` crate has no cost model and evaluation cannot be interrupted: graft meters
//! comprehensions at run time (`cost.rs`) and, before that, refuses shapes no policy
//! needs. A comprehension (`map`, `filter`, `all`,
//! `exists`, `exists_one`) costs the size of its range; nested comprehensions multiply
//! those sizes, and the ranges usually come from the object, which the requester
//! controls. Three nested `map`s over a 100-element list take seconds; two are the most
//! a policy needs (e.g. `containers.all(c, c.env.all(e, ...))`).

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr};

/// Deepest nesting of comprehensions in one expression.
pub const MAX_COMPREHENSION_NESTING: usize = 2;

/// Refuses a program whose comprehensions nest deeper than [`MAX_COMPREHENSION_NESTING`].
pub fn check(root: &IdedExpr) -> Result<(), String> {
    let nesting = comprehension_nesting(root);
    if nesting > MAX_COMPREHENSION_NESTING {
        return Err(format!(
            "comprehensions (map, filter, all, exists, exists_one) nest {nesting} deep; at most \
             {MAX_COMPREHENSION_NESTING} are allowed, since each level multiplies the work by \
             the size of its list: compute the inner part in a variable instead"
        ));
    }
    Ok(())
}

/// How deeply comprehensions nest. A comprehension's range is evaluated once, outside
/// its loop, so a comprehension in a range does not nest (`a.map(x, x).filter(y, y)`
/// is 1); one in the loop body does (`a.map(x, b.map(y, y))` is 2). Walks with an
/// explicit stack, so no expression can make it recurse.
fn comprehension_nesting(root: &IdedExpr) -> usize {
    let mut deepest = 0;
    let mut stack: Vec<(&IdedExpr, usize)> = vec![(root, 0)];
    while let Some((node, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        match &node.expr {
            Expr::Comprehension(c) => {
                stack.push((&c.iter_range, depth));
                stack.push((&c.accu_init, depth));
                for inner in [&c.loop_cond, &c.loop_step, &c.result] {
                    stack.push((inner, depth + 1));
                }
                // The body of a comprehension is itself one level.
                deepest = deepest.max(depth + 1);
            }
            Expr::Call(call) => {
                if let Some(target) = &call.target {
                    stack.push((target, depth));
                }
                stack.extend(call.args.iter().map(|arg| (arg, depth)));
            }
            Expr::List(list) => stack.extend(list.elements.iter().map(|e| (e, depth))),
            Expr::Map(map) => push_entries(&mut stack, &map.entries, depth),
            Expr::Struct(s) => push_entries(&mut stack, &s.entries, depth),
            Expr::Select(select) => stack.push((&select.operand, depth)),
            Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
        }
    }
    deepest
}

fn push_entries<'a>(
    stack: &mut Vec<(&'a IdedExpr, usize)>,
    entries: &'a [cel::common::ast::IdedEntryExpr],
    depth: usize,
) {
    for entry in entries {
        match &entry.expr {
            EntryExpr::MapEntry(e) => {
                stack.push((&e.key, depth));
                stack.push((&e.value, depth));
            }
            EntryExpr::StructField(f) => stack.push((&f.value, depth)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting() {
        let check = |source: &str, expect: usize| {
            let program = cel::Env::stdlib().compile(source).expect(source);
            assert_eq!(
                comprehension_nesting(program.expression()),
                expect,
                "{source}"
            );
        };
        check("1 + 2", 0);
        check("[1, 2].map(x, x * 2)", 1);
        check("[1, 2].map(x, x).filter(y, y > 1).all(z, z > 0)", 1);
        check("{'a': [1].map(x, x), 'b': [2].exists(y, y == 2)}", 1);
        check("[1].map(x, [2].map(y, x + y))", 2);
        check("[1].map(x, [2].map(y, [3].map(z, x + y + z)))", 3);
        check("[1].all(x, [2].exists(y, [3].exists_one(z, z == x)))", 3);
        check("[[1].map(x, [2].map(y, y))].map(z, z)", 2);
    }
}
