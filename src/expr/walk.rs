//! The walk the load-time rewrites of an expression share ([`super::fold`],
//! [`super::paths`]): each child of a node, with the names bound by the comprehensions
//! around it, which hide a binding of the same name.

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr, IdedEntryExpr};

/// A rewrite of an expression, node by node.
pub trait Rewrite {
    /// Rewrites `node`, or walks on into its children ([`children`]).
    fn visit(&mut self, node: &mut IdedExpr);

    /// The names bound by the comprehensions around the node being visited.
    fn shadowed(&mut self) -> &mut Vec<String>;
}

/// Visits each child of `node`.
pub fn children(rewrite: &mut impl Rewrite, node: &mut IdedExpr) {
    match &mut node.expr {
        Expr::Call(call) => {
            if let Some(target) = &mut call.target {
                rewrite.visit(target);
            }
            call.args.iter_mut().for_each(|arg| rewrite.visit(arg));
        }
        Expr::Comprehension(comprehension) => {
            rewrite.visit(&mut comprehension.iter_range);
            let bound = [
                Some(comprehension.iter_var.clone()),
                comprehension.iter_var2.clone(),
                Some(comprehension.accu_var.clone()),
            ];
            let depth = rewrite.shadowed().len();
            rewrite.shadowed().extend(bound.into_iter().flatten());
            for inner in [
                &mut comprehension.accu_init,
                &mut comprehension.loop_cond,
                &mut comprehension.loop_step,
                &mut comprehension.result,
            ] {
                rewrite.visit(inner);
            }
            rewrite.shadowed().truncate(depth);
        }
        Expr::List(list) => list
            .elements
            .iter_mut()
            .for_each(|item| rewrite.visit(item)),
        Expr::Map(map) => entries(rewrite, &mut map.entries),
        Expr::Struct(s) => entries(rewrite, &mut s.entries),
        Expr::Select(select) => rewrite.visit(&mut select.operand),
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
    }
}

fn entries(rewrite: &mut impl Rewrite, entries: &mut [IdedEntryExpr]) {
    for entry in entries {
        match &mut entry.expr {
            EntryExpr::StructField(field) => rewrite.visit(&mut field.value),
            EntryExpr::MapEntry(entry) => {
                rewrite.visit(&mut entry.key);
                rewrite.visit(&mut entry.value);
            }
        }
    }
}
