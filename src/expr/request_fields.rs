//! Which fields of `request` an expression reads, found once at compile time: a review
//! builds only the fields its candidate policies can read (`engine`'s
//! `request_binding`), where it built all nine, `userInfo` with its groups and extras
//! included, for the one `request.namespace` the Multus example reads.
//!
//! `request.F`, `request.?F`, `request['F']`, `request[?'F']` and `has(request.F)` read
//! `F`. Anything else, such as `request` handed to a function, compared, iterated or
//! indexed with a computed key, counts as reading every field.

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr, LiteralValue, operators};

/// The fields of `request`, in the order the binding lists them.
pub const FIELDS: [&str; 9] = [
    "uid",
    "kind",
    "resource",
    "subResource",
    "name",
    "namespace",
    "operation",
    "userInfo",
    "dryRun",
];

/// A set of [`FIELDS`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestFields(u16);

impl RequestFields {
    pub const ALL: RequestFields = RequestFields((1 << FIELDS.len()) - 1);

    pub fn union(self, other: RequestFields) -> RequestFields {
        RequestFields(self.0 | other.0)
    }

    /// Whether `field` is in the set.
    pub fn includes(self, field: &str) -> bool {
        FIELDS
            .iter()
            .position(|f| *f == field)
            .is_some_and(|i| self.0 & (1 << i) != 0)
    }

    /// The set of `field` alone; every field for a name `request` does not have (the
    /// load-time check refuses those, and an unchecked one reads whatever it reads).
    pub(crate) fn of(field: &str) -> RequestFields {
        match FIELDS.iter().position(|f| *f == field) {
            Some(i) => RequestFields(1 << i),
            None => RequestFields::ALL,
        }
    }
}

/// The fields of `request` the expression reads. Walks with an explicit stack.
pub fn analyse(root: &IdedExpr) -> RequestFields {
    let mut fields = RequestFields::default();
    let mut stack: Vec<&IdedExpr> = vec![root];
    while let Some(node) = stack.pop() {
        if let Some((operand, field, rest)) = field_access(node)
            && is_request(operand)
        {
            fields = fields.union(RequestFields::of(field));
            stack.extend(rest);
            continue;
        }
        if is_request(node) {
            return RequestFields::ALL;
        }
        push_children(&mut stack, node);
    }
    fields
}

fn is_request(node: &IdedExpr) -> bool {
    matches!(&node.expr, Expr::Ident(name) if name == "request")
}

/// `operand.field`, `operand.?field`, `operand['field']` or `operand[?'field']`, with the
/// sub-expressions that still need a look (none here: the field is a literal).
fn field_access(node: &IdedExpr) -> Option<(&IdedExpr, &str, Vec<&IdedExpr>)> {
    match &node.expr {
        Expr::Select(select) => Some((&select.operand, select.field.as_str(), Vec::new())),
        Expr::Call(call)
            if call.target.is_none()
                && call.args.len() == 2
                && [
                    operators::OPT_SELECT,
                    operators::INDEX,
                    operators::OPT_INDEX,
                ]
                .contains(&call.func_name.as_str()) =>
        {
            match &call.args[1].expr {
                Expr::Literal(LiteralValue::String(field)) => {
                    Some((&call.args[0], field.inner(), Vec::new()))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

fn push_children<'a>(stack: &mut Vec<&'a IdedExpr>, node: &'a IdedExpr) {
    match &node.expr {
        Expr::Comprehension(c) => {
            stack.extend([
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ]);
        }
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                stack.push(target);
            }
            stack.extend(call.args.iter());
        }
        Expr::List(list) => stack.extend(list.elements.iter()),
        Expr::Map(map) => push_entries(stack, &map.entries),
        Expr::Struct(s) => push_entries(stack, &s.entries),
        Expr::Select(select) => stack.push(&select.operand),
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
    }
}

fn push_entries<'a>(stack: &mut Vec<&'a IdedExpr>, entries: &'a [cel::common::ast::IdedEntryExpr]) {
    for entry in entries {
        match &entry.expr {
            EntryExpr::MapEntry(e) => {
                stack.push(&e.key);
                stack.push(&e.value);
            }
            EntryExpr::StructField(f) => stack.push(&f.value),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(source: &str) -> RequestFields {
        let program = cel::Env::stdlib().compile(source).expect(source);
        analyse(program.expression())
    }

    fn only(names: &[&str]) -> RequestFields {
        names.iter().fold(RequestFields::default(), |set, name| {
            set.union(RequestFields::of(name))
        })
    }

    #[test]
    fn follows_field_reads() {
        assert_eq!(fields("request.namespace == 'a'"), only(&["namespace"]));
        assert_eq!(
            fields(
                "request.userInfo.username.startsWith('system:') && request.?name.orValue('') != ''"
            ),
            only(&["userInfo", "name"])
        );
        assert_eq!(
            fields("has(request.dryRun) && request['uid'] != ''"),
            only(&["dryRun", "uid"])
        );
        assert_eq!(
            fields("request.kind.kind + request[?'operation'].orValue('')"),
            only(&["kind", "operation"])
        );
        assert_eq!(fields("object.metadata.name"), RequestFields::default());
        assert!(only(&["name"]).includes("name") && !only(&["name"]).includes("uid"));
    }

    #[test]
    fn anything_else_reads_every_field() {
        for source in [
            "string(request) != ''",
            "'name' in request",
            "request.all(k, k != '')",
            "size(request) > 0",
            "request[params.key] == 'x'",
            "request.requestKind == 'x'",
            "[request][0].name == 'x'",
        ] {
            assert_eq!(fields(source), RequestFields::ALL, "{source}");
        }
        assert!(
            FIELDS
                .iter()
                .all(|field| RequestFields::ALL.includes(field))
        );
    }
}
