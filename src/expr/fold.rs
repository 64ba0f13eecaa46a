//! Parts of an expression that read nothing but `params` and literals are evaluated once,
//! when the policy loads. `params.networks.map(n, {'name': n, ...})` builds the same list
//! on every review otherwise: in the Multus example that comprehension was half of what
//! the policy's expression cost.
//!
//! Each such part, as large as it can be, is replaced by a name CEL source cannot spell,
//! which the evaluation's resolver answers with the value ([`Folded::get`]). A part is
//! left as it is when its evaluation fails or its value is of a type this module does
//! not copy (an optional, a view into `params`, a timestamp...): it then runs on every
//! review as before, with the same result or error. A folded part no longer spends the
//! review's cost budget; it spent its own at load.
//!
//! A part that fails at load fails on every review that reaches it, the same way: the
//! outermost such part of an expression is reported ([`Folded::failures`]), and
//! `graft lint` warns about it.
//!
//! A folded part that is the argument a graft function converts to JSON first thing
//! (`multusNetworks`' desired networks) is converted at load too, into a value only that
//! function reads ([`super::convert::JsonArgument`]): the Multus example converted the
//! same ten maps to JSON on every review.

use cel::IdedExpr;
use cel::common::ast::{CallExpr, EntryExpr, Expr, operators};
use cel::common::types::{CelList, CelMap, CelMapKey, CelString, Kind};
use cel::common::value::Val;

use super::walk::{self, Rewrite};

/// The values of an expression's folded parts, in the order their names number them.
#[derive(Debug, Default)]
pub struct Folded {
    values: Vec<Box<dyn Val + 'static>>,
    /// Why each outermost part that failed at load failed.
    failures: Vec<String>,
}

/// Why a part was not folded.
pub enum Unfolded {
    /// Its evaluation failed (or ran over its budget): so will every review's that
    /// reaches it.
    Failed(String),
    /// Its value is not one this module copies.
    Kept,
}

/// Where the names of folded parts start; `@` cannot begin a name in CEL source.
const PREFIX: &str = "@graft_folded_";

impl Folded {
    /// The value a folded part's name stands for; `None` for every other name.
    pub fn get(&self, name: &str) -> Option<&(dyn Val + 'static)> {
        self.values.get(index_of(name)?).map(|value| value.as_ref())
    }

    #[cfg(test)]
    pub fn count(&self) -> usize {
        self.values.len()
    }

    #[cfg(test)]
    pub fn json_arguments(&self) -> usize {
        self.values
            .iter()
            .filter(|value| {
                value
                    .downcast_ref::<super::convert::JsonArgument>()
                    .is_some()
            })
            .count()
    }

    pub fn failures(&self) -> &[String] {
        &self.failures
    }
}

/// The index of a folded part's value, from its name.
fn index_of(name: &str) -> Option<usize> {
    name.strip_prefix(PREFIX)?.parse().ok()
}

/// What runs one part at load (metered as a review's evaluation is): its value, or why
/// it stays in place.
pub type Evaluate<'e> = &'e dyn Fn(&IdedExpr) -> Result<Box<dyn Val + 'static>, Unfolded>;

/// `root` with its parts that read only literals and the variables named in
/// `constants` (`params` for graft's policies, none for a MutatingAdmissionPolicy's,
/// whose params are the review's) replaced by names for their values.
pub fn fold(root: &IdedExpr, constants: &[&str], evaluate: Evaluate<'_>) -> (IdedExpr, Folded) {
    let mut folded = Folded::default();
    let mut node = root.clone();
    let mut folder = Folder {
        evaluate,
        constants,
        folded: &mut folded,
        shadowed: Vec::new(),
        inside_failure: false,
    };
    folder.visit(&mut node);
    (node, folded)
}

struct Folder<'f> {
    evaluate: Evaluate<'f>,
    constants: &'f [&'f str],
    folded: &'f mut Folded,
    /// The names bound by the comprehensions around the node being visited.
    shadowed: Vec<String>,
    /// Whether a part around the node being visited failed: its parts' failures are
    /// the same failure, and not reported again.
    inside_failure: bool,
}

impl Rewrite for Folder<'_> {
    fn visit(&mut self, node: &mut IdedExpr) {
        if worth_folding(&node.expr)
            && !self
                .shadowed
                .iter()
                .any(|name| self.constants.contains(&name.as_str()))
            && reads_only(node, self.constants, &mut Vec::new())
        {
            match (self.evaluate)(node) {
                Ok(value) => {
                    let name = format!("{PREFIX}{}", self.folded.values.len());
                    self.folded.values.push(value);
                    node.expr = Expr::Ident(name);
                    return;
                }
                Err(Unfolded::Failed(reason)) if !self.inside_failure => {
                    self.folded.failures.push(reason);
                    self.inside_failure = true;
                    self.visit_children(node);
                    self.inside_failure = false;
                    return;
                }
                Err(_) => {}
            }
        }
        self.visit_children(node);
    }

    fn shadowed(&mut self) -> &mut Vec<String> {
        &mut self.shadowed
    }
}

impl Folder<'_> {
    fn visit_children(&mut self, node: &mut IdedExpr) {
        let Expr::Call(call) = &mut node.expr else {
            return walk::children(self, node);
        };
        // `accumulator + [item]` is the shape the interpreter appends in place: the list
        // itself must stay a list literal.
        let appends = call.func_name == operators::ADD
            && call.target.is_none()
            && matches!(call.args.first().map(|lhs| &lhs.expr),
                Some(Expr::Ident(name)) if self.shadowed.contains(name));
        if let Some(target) = &mut call.target {
            self.visit(target);
        }
        for (position, arg) in call.args.iter_mut().enumerate() {
            match &mut arg.expr {
                Expr::List(list) if appends && position == 1 => {
                    list.elements.iter_mut().for_each(|item| self.visit(item));
                }
                _ => self.visit(arg),
            }
        }
        self.prepare_json_argument(call);
    }

    /// A folded value a graft function converts to JSON on entry is converted once,
    /// here. Its name appears only as that argument, so nothing else reads it.
    fn prepare_json_argument(&mut self, call: &CallExpr) {
        let Some(position) = super::functions::json_argument(&call.func_name) else {
            return;
        };
        if call.target.is_some() {
            return;
        }
        let Some(Expr::Ident(name)) = call.args.get(position).map(|arg| &arg.expr) else {
            return;
        };
        let Some(value) = index_of(name).and_then(|index| self.folded.values.get_mut(index)) else {
            return;
        };
        if let Some(argument) = super::convert::JsonArgument::of(value.as_ref()) {
            *value = Box::new(argument);
        }
    }
}

/// Parts that compute something. A name, a field of `params`, a scalar literal or an
/// empty list or map (a comprehension's start) is read as cheaply as a folded value.
fn worth_folding(expr: &Expr) -> bool {
    match expr {
        Expr::Call(_) | Expr::Comprehension(_) => true,
        Expr::List(list) => !list.elements.is_empty(),
        Expr::Map(map) => !map.entries.is_empty(),
        _ => false,
    }
}

/// Whether every name `node` refers to is one of `constants` or bound inside `node`
/// (`bound`: the names bound by the comprehensions of `node` around the current one).
fn reads_only(node: &IdedExpr, constants: &[&str], bound: &mut Vec<String>) -> bool {
    match &node.expr {
        Expr::Ident(name) => bound.contains(name) || constants.contains(&name.as_str()),
        Expr::Literal(_) => true,
        Expr::Select(select) => reads_only(&select.operand, constants, bound),
        Expr::Call(call) => {
            call.target
                .as_deref()
                .is_none_or(|target| reads_only(target, constants, bound))
                && call
                    .args
                    .iter()
                    .all(|arg| reads_only(arg, constants, bound))
        }
        Expr::List(list) => list
            .elements
            .iter()
            .all(|item| reads_only(item, constants, bound)),
        Expr::Map(map) => map.entries.iter().all(|entry| match &entry.expr {
            EntryExpr::MapEntry(entry) => {
                reads_only(&entry.key, constants, bound)
                    && reads_only(&entry.value, constants, bound)
            }
            EntryExpr::StructField(_) => false,
        }),
        Expr::Comprehension(comprehension) => {
            if !reads_only(&comprehension.iter_range, constants, bound) {
                return false;
            }
            let depth = bound.len();
            bound.push(comprehension.iter_var.clone());
            bound.extend(comprehension.iter_var2.clone());
            bound.push(comprehension.accu_var.clone());
            let inner = [
                &comprehension.accu_init,
                &comprehension.loop_cond,
                &comprehension.loop_step,
                &comprehension.result,
            ]
            .into_iter()
            .all(|inner| reads_only(inner, constants, bound));
            bound.truncate(depth);
            inner
        }
        Expr::Struct(_) | Expr::Unspecified => false,
    }
}

/// Whether `node`, or a node below it, is one `found` holds of.
pub fn contains(node: &IdedExpr, found: &dyn Fn(&Expr) -> bool) -> bool {
    if found(&node.expr) {
        return true;
    }
    match &node.expr {
        Expr::Comprehension(c) => [
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ]
        .into_iter()
        .any(|n| contains(n, found)),
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(&call.args)
            .any(|n| contains(n, found)),
        Expr::List(list) => list.elements.iter().any(|n| contains(n, found)),
        Expr::Map(map) => map.entries.iter().any(|entry| entry_contains(entry, found)),
        Expr::Struct(s) => s.entries.iter().any(|entry| entry_contains(entry, found)),
        Expr::Select(select) => contains(&select.operand, found),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => false,
    }
}

fn entry_contains(entry: &cel::common::ast::IdedEntryExpr, found: &dyn Fn(&Expr) -> bool) -> bool {
    match &entry.expr {
        EntryExpr::MapEntry(entry) => contains(&entry.key, found) || contains(&entry.value, found),
        EntryExpr::StructField(field) => contains(&field.value, found),
    }
}

/// A copy of `value` that owns everything, of the same CEL type: null, bool, int, uint,
/// double, string, and lists and maps of those. `None` for anything else.
pub fn own(value: &dyn Val) -> Option<Box<dyn Val + 'static>> {
    Some(match value.get_type().kind() {
        // A scalar's owned copy is the one a MAP variable keeps.
        Kind::NullType | Kind::Boolean | Kind::Int | Kind::UInt | Kind::Double | Kind::String => {
            return super::convert::to_static(value);
        }
        Kind::List => Box::new(CelList::from(
            value
                .downcast_ref::<CelList>()?
                .inner()
                .iter()
                .map(|item| own(item.as_ref()))
                .collect::<Option<Vec<_>>>()?,
        )),
        Kind::Map => Box::new(CelMap::from(
            value
                .downcast_ref::<CelMap>()?
                .inner()
                .iter()
                .map(|(key, item)| Some((own_key(key), own(item.as_ref())?)))
                .collect::<Option<std::collections::HashMap<_, _>>>()?,
        )),
        _ => return None,
    })
}

fn own_key(key: &CelMapKey<'_>) -> CelMapKey<'static> {
    match key {
        CelMapKey::Bool(b) => CelMapKey::Bool(*b),
        CelMapKey::Int(i) => CelMapKey::Int(*i),
        CelMapKey::UInt(u) => CelMapKey::UInt(*u),
        CelMapKey::String(s) => CelMapKey::String(CelString::from(s.inner().to_owned())),
    }
}
