//! Chains of field selections and constant indexes below a tree binding, such as
//! `object.metadata.?annotations['k8s.v1.cni.cncf.io/networks']` or
//! `object.spec.containers[0].resources.?limits[params.resource]`, are answered by
//! following the tree's views ([`view::Node`]) instead of by the interpreter.
//!
//! Before cel selects or indexes, it asks the value whether it is an optional, and a
//! view answers that with its converted level (see [`super::view`]): the two chains
//! above converted five map levels and a list to read two strings. A chain of plain
//! field selections needs nothing of this: the interpreter asks for it as a dotted name,
//! which the scope answers in place.
//!
//! At load, each such chain, as long as it can be, becomes
//! `@graft_found_N ? @graft_path_N : chain`. Where the tree has every step of the
//! chain, or an optional step finds nothing, the names give the value the interpreter
//! would have given: the view of the node reached, an optional of it, or
//! `optional.none()`. Anywhere else (a missing field or an index out of range outside
//! an optional chain, a step into a scalar, a binding that is not there) the chain
//! itself runs as before, with the same value or error.

use cel::IdedExpr;
use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedEntryExpr, LiteralValue, operators};
use cel::common::types::{CelBool, CelInt, CelOptional, CelString};
use cel::common::value::CowVal;

use super::fold::Folded;
use super::view::Node;
use super::walk::{self, Rewrite};

/// Where the names of a chain's found flag and value start. `@` cannot begin a name in
/// CEL source.
const FOUND: &str = "@graft_found_";
const PATH: &str = "@graft_path_";

/// The tree bindings, which a chain, or a dotted name, starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    Object,
    OldObject,
    NamespaceObject,
    Request,
    Params,
    Element,
}

impl Root {
    pub fn named(name: &str) -> Option<Root> {
        Some(match name {
            "object" => Root::Object,
            "oldObject" => Root::OldObject,
            "namespaceObject" => Root::NamespaceObject,
            "request" => Root::Request,
            "params" => Root::Params,
            "element" => Root::Element,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Key {
    Field(String),
    Index(i64),
}

#[derive(Debug, Clone, PartialEq)]
struct Step {
    key: Key,
    /// `.?field` or `[?key]`: from here on, the chain's value is an optional.
    optional: bool,
    /// A plain `.field`, which the interpreter asks for as part of a dotted name.
    dotted: bool,
}

#[derive(Debug)]
struct Chain {
    root: Root,
    steps: Vec<Step>,
}

/// The chains of one expression, in the order their names number them.
#[derive(Debug, Default)]
pub struct Paths {
    chains: Vec<Chain>,
}

/// Where following a chain ended.
enum Walked<'n, 'a> {
    /// At `node`, every step there; `optional` if a step was optional.
    Found { node: &'n Node<'a>, optional: bool },
    /// An optional step found nothing: `optional.none()`.
    Absent,
    /// The interpreter decides: a step the tree does not answer as cel would.
    Unknown,
}

impl Paths {
    #[cfg(test)]
    pub fn count(&self) -> usize {
        self.chains.len()
    }

    /// The value of a chain's name, following it from the binding `root` gives (`None`
    /// when the binding is not there); `None` for every other name.
    pub fn answer<'b, 'a: 'b>(
        &self,
        name: &str,
        root: impl FnOnce(Root) -> Option<&'b Node<'a>>,
    ) -> Option<CowVal<'b, 'b>> {
        let (found, index) = if let Some(index) = name.strip_prefix(FOUND) {
            (true, index)
        } else {
            (false, name.strip_prefix(PATH)?)
        };
        let chain = self.chains.get(index.parse::<usize>().ok()?)?;
        let walked = match root(chain.root) {
            Some(node) => walk(node, &chain.steps),
            None => Walked::Unknown,
        };
        if found {
            let found = !matches!(walked, Walked::Unknown);
            return Some(CowVal::owned(CelBool::from(found)));
        }
        Some(match walked {
            Walked::Found {
                node,
                optional: false,
            } => CowVal::Borrowed(node.as_val()),
            Walked::Found {
                node,
                optional: true,
            } => CowVal::owned(CelOptional::of(node.as_val().clone_as_boxed())),
            Walked::Absent => CowVal::owned(CelOptional::none()),
            // Asked only when the found flag said yes.
            Walked::Unknown => return None,
        })
    }
}

fn walk<'n, 'a>(root: &'n Node<'a>, steps: &[Step]) -> Walked<'n, 'a> {
    let mut node = root;
    let mut optional = false;
    for step in steps {
        optional |= step.optional;
        let next = match (node, &step.key) {
            (Node::Map(map), Key::Field(field)) => map.field(field),
            // A negative index is out of range, as it is to cel.
            (Node::List(list), Key::Index(index)) => {
                usize::try_from(*index).ok().and_then(|at| list.item(at))
            }
            _ => return Walked::Unknown,
        };
        match next {
            Some(next) => node = next,
            // A missing key or an index out of range: an optional chain's value is
            // `optional.none()`, anything else the interpreter's error.
            None if optional => return Walked::Absent,
            None => return Walked::Unknown,
        }
    }
    Walked::Found { node, optional }
}

/// `root` with its chains replaced as the module says, and the chains.
pub fn rewrite(root: &IdedExpr, folded: &Folded) -> (IdedExpr, Paths) {
    let mut node = root.clone();
    let mut rewriter = Rewriter {
        folded,
        paths: Paths::default(),
        shadowed: Vec::new(),
        next_id: max_id(root) + 1,
    };
    rewriter.visit(&mut node);
    (node, rewriter.paths)
}

struct Rewriter<'f> {
    folded: &'f Folded,
    paths: Paths,
    /// The names bound by the comprehensions around the node being visited.
    shadowed: Vec<String>,
    next_id: u64,
}

impl Rewrite for Rewriter<'_> {
    fn visit(&mut self, node: &mut IdedExpr) {
        if let Some(chain) = self.chain(node)
            // Plain field selections are answered as a dotted name already.
            && chain.steps.iter().any(|step| !step.dotted)
        {
            self.replace(node, chain);
            return;
        }
        walk::children(self, node);
    }

    fn shadowed(&mut self) -> &mut Vec<String> {
        &mut self.shadowed
    }
}

impl Rewriter<'_> {
    fn replace(&mut self, node: &mut IdedExpr, chain: Chain) {
        let index = self.paths.chains.len();
        self.paths.chains.push(chain);
        let found = self.ident(format!("{FOUND}{index}"));
        let path = self.ident(format!("{PATH}{index}"));
        let id = self.fresh_id();
        let original = std::mem::take(node);
        *node = IdedExpr {
            id,
            expr: Expr::Call(CallExpr {
                func_name: operators::CONDITIONAL.to_string(),
                target: None,
                args: vec![found, path, original],
            }),
        };
    }

    fn ident(&mut self, name: String) -> IdedExpr {
        IdedExpr {
            id: self.fresh_id(),
            expr: Expr::Ident(name),
        }
    }

    fn fresh_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// `node` as a chain below a binding no comprehension shadows, if it is one.
    fn chain(&self, node: &IdedExpr) -> Option<Chain> {
        let (operand, step) = match &node.expr {
            Expr::Ident(name) if !self.shadowed.contains(name) => {
                return Root::named(name).map(|root| Chain {
                    root,
                    steps: Vec::new(),
                });
            }
            Expr::Select(select) if !select.test => (
                &*select.operand,
                Step {
                    key: Key::Field(select.field.clone()),
                    optional: false,
                    dotted: true,
                },
            ),
            Expr::Call(call) if call.target.is_none() && call.args.len() == 2 => {
                let optional = match call.func_name.as_str() {
                    operators::INDEX => false,
                    operators::OPT_INDEX | operators::OPT_SELECT => true,
                    _ => return None,
                };
                let key = self.constant_key(&call.args[1])?;
                let step = Step {
                    key,
                    optional,
                    dotted: false,
                };
                (&call.args[0], step)
            }
            _ => return None,
        };
        let mut chain = self.chain(operand)?;
        chain.steps.push(step);
        Some(chain)
    }

    /// A string or int literal, or a folded part with such a value.
    fn constant_key(&self, node: &IdedExpr) -> Option<Key> {
        match &node.expr {
            Expr::Literal(LiteralValue::String(field)) => Some(Key::Field(field.to_string())),
            Expr::Literal(LiteralValue::Int(index)) => Some(Key::Index(*index.inner())),
            Expr::Ident(name) => {
                let value = self.folded.get(name)?;
                if let Some(field) = value.downcast_ref::<CelString>() {
                    return Some(Key::Field(field.inner().to_owned()));
                }
                value
                    .downcast_ref::<CelInt>()
                    .map(|index| Key::Index(*index.inner()))
            }
            _ => None,
        }
    }
}

/// The largest id in `node`, so that the nodes a rewrite adds have ids of their own.
pub(super) fn max_id(node: &IdedExpr) -> u64 {
    let children: Vec<&IdedExpr> = match &node.expr {
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(&call.args)
            .collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => return node.id.max(entry_ids(&map.entries)),
        Expr::Struct(s) => return node.id.max(entry_ids(&s.entries)),
        Expr::Select(select) => vec![&select.operand],
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => Vec::new(),
    };
    children.into_iter().map(max_id).fold(node.id, u64::max)
}

fn entry_ids(entries: &[IdedEntryExpr]) -> u64 {
    entries
        .iter()
        .map(|entry| match &entry.expr {
            EntryExpr::StructField(field) => entry.id.max(max_id(&field.value)),
            EntryExpr::MapEntry(map_entry) => entry
                .id
                .max(max_id(&map_entry.key))
                .max(max_id(&map_entry.value)),
        })
        .fold(0, u64::max)
}
