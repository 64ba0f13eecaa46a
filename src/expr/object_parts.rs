//! Which parts of `object` an expression reads, found once at compile time.
//!
//! Most expressions read a few fields: `object.metadata.annotations[...]`,
//! `podOrdinal(object)`. The server uses the answer to skip parsing what no policy reads
//! ([`crate::policy`]'s `reads`): `managedFields` is a large part of every object and
//! rarely read. Anything the analysis cannot follow, such as `object` passed to an
//! unknown function, counts as reading the whole object.

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr, LiteralValue, operators};

/// Top-level fields tracked one by one; any other field read means the whole object.
const TOP: [&str; 6] = ["apiVersion", "kind", "metadata", "spec", "status", "data"];
/// `metadata` fields tracked one by one; any other means all of `metadata`.
const METADATA: [&str; 9] = [
    "name",
    "generateName",
    "namespace",
    "labels",
    "annotations",
    "ownerReferences",
    "uid",
    "finalizers",
    "creationTimestamp",
];
const METADATA_BIT: u32 = 1 << 2;
const ALL_BIT: u32 = 1 << 31;

/// A set of parts of `object`: bits for the [`TOP`] fields, for the [`METADATA`] fields
/// (from bit 8), and one for "everything".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ObjectParts(u32);

impl ObjectParts {
    pub const ALL: ObjectParts = ObjectParts(ALL_BIT);

    pub fn union(self, other: ObjectParts) -> ObjectParts {
        ObjectParts(self.0 | other.0)
    }

    pub fn is_all(self) -> bool {
        self.0 & ALL_BIT != 0
    }

    /// Whether everything `other` reads is in `self`.
    pub fn covers(self, other: ObjectParts) -> bool {
        if self.is_all() {
            return true;
        }
        let mut missing = other.0 & !self.0;
        if self.0 & METADATA_BIT != 0 {
            missing &= !metadata_field_bits();
        }
        missing == 0
    }

    pub(crate) fn top(field: &str) -> ObjectParts {
        match TOP.iter().position(|f| *f == field) {
            Some(i) => ObjectParts(1 << i),
            None => ObjectParts::ALL,
        }
    }

    pub(crate) fn metadata(field: &str) -> ObjectParts {
        match METADATA.iter().position(|f| *f == field) {
            Some(i) => ObjectParts(1 << (8 + i)),
            None => ObjectParts(METADATA_BIT),
        }
    }

    /// Whether the top-level field `key` is converted whole.
    pub fn includes_whole(self, key: &str) -> bool {
        self.is_all()
            || TOP
                .iter()
                .position(|f| *f == key)
                .is_some_and(|i| self.0 & (1 << i) != 0)
    }

    /// Whether `metadata.key` is converted (when `metadata` itself is not whole).
    pub fn includes_metadata_field(self, key: &str) -> bool {
        METADATA
            .iter()
            .position(|f| *f == key)
            .is_some_and(|i| self.0 & (1 << (8 + i)) != 0)
    }

    /// Whether some `metadata` fields, but not all of `metadata`, are read.
    pub fn has_metadata_fields(self) -> bool {
        self.0 & metadata_field_bits() != 0
    }
}

fn metadata_field_bits() -> u32 {
    ((1 << METADATA.len()) - 1) << 8
}

/// Functions of graft's that read only these `metadata` fields of their first argument.
fn function_reads(name: &str) -> Option<&'static [&'static str]> {
    match name {
        "podOrdinal" => Some(&["name", "generateName", "labels"]),
        "annotationJSON" => Some(&["annotations"]),
        _ => None,
    }
}

/// The parts of `object` the expression reads. Walks with an explicit stack.
pub fn analyse(root: &IdedExpr) -> ObjectParts {
    let mut parts = ObjectParts::default();
    let mut stack: Vec<&IdedExpr> = vec![root];
    while let Some(node) = stack.pop() {
        // `object.metadata.F`, `object.F`, graft functions on `object`, bare `object`.
        if let Some((operand, field, rest)) = field_access(node) {
            if let Some((inner, "metadata", inner_rest)) = field_access(operand)
                && is_object(inner)
            {
                parts = parts.union(ObjectParts::metadata(field));
                stack.extend(rest);
                stack.extend(inner_rest);
                continue;
            }
            if is_object(operand) {
                parts = parts.union(ObjectParts::top(field));
                stack.extend(rest);
                continue;
            }
        }
        if let Expr::Call(call) = &node.expr
            && call.target.is_none()
            && let Some(fields) = function_reads(&call.func_name)
            && call.args.first().is_some_and(is_object)
        {
            for field in fields {
                parts = parts.union(ObjectParts::metadata(field));
            }
            stack.extend(call.args.iter().skip(1));
            continue;
        }
        if is_object(node) {
            return ObjectParts::ALL;
        }
        push_children(&mut stack, node);
    }
    parts
}

fn is_object(node: &IdedExpr) -> bool {
    matches!(&node.expr, Expr::Ident(name) if name == "object")
}

/// `operand.field`, `operand.?field`, `operand['field']` or `operand[?'field']`, with the
/// sub-expressions that still need a look (none here: the field is a literal).
pub(super) fn field_access(node: &IdedExpr) -> Option<(&IdedExpr, &str, Vec<&IdedExpr>)> {
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

pub(super) fn push_children<'a>(stack: &mut Vec<&'a IdedExpr>, node: &'a IdedExpr) {
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

    fn parts(source: &str) -> ObjectParts {
        let program = cel::Env::stdlib().compile(source).expect(source);
        analyse(program.expression())
    }

    #[test]
    fn follows_field_reads() {
        let only_annotations = parts("object.metadata.?annotations['a'].orValue('') != ''");
        assert!(only_annotations.includes_metadata_field("annotations"));
        assert!(!only_annotations.includes_metadata_field("managedFields"));
        assert!(!only_annotations.includes_whole("metadata"));
        assert!(!only_annotations.includes_whole("spec"));

        let status = parts("has(object.status.capacity.cpu) && object['kind'] == 'Node'");
        assert!(status.includes_whole("status") && status.includes_whole("kind"));
        assert!(!status.includes_whole("spec"));

        let ordinal = parts("podOrdinal(object) % 2 == 0");
        assert!(
            ordinal.includes_metadata_field("labels") && ordinal.includes_metadata_field("name")
        );
        assert!(!ordinal.is_all());

        assert!(parts("object.metadata.managedFields.size() > 0").includes_whole("metadata"));
        assert_eq!(parts("1 + 2"), ObjectParts::default());
    }

    #[test]
    fn anything_else_reads_everything() {
        assert!(parts("jsonEncode(object) != ''").is_all());
        assert!(parts("object.somethingElse == 1").is_all());
        assert!(parts("[object].size() == 1").is_all());
        assert!(parts("object.spec.containers.all(c, c.name != '')").includes_whole("spec"));
    }

    #[test]
    fn coverage() {
        let metadata = parts("object.metadata");
        assert!(metadata.covers(parts("object.metadata.labels")));
        assert!(!parts("object.metadata.labels").covers(metadata));
        assert!(ObjectParts::ALL.covers(parts("object.spec")));
        assert!(!parts("object.spec").covers(parts("object.status")));
    }
}
