//! cel-go's two-variable comprehensions (`ext.TwoVarComprehensions`, in Kubernetes since
//! 1.32), as macros the `cel` crate can evaluate:
//!
//! | Call | Result |
//! |---|---|
//! | `e.all(k, v, p)`, `e.exists(k, v, p)`, `e.existsOne(k, v, p)` (`exists_one`) | `bool` |
//! | `e.transformList(k, v, t)`, `e.transformList(k, v, f, t)` | `list`: `t` of each entry (where `f` holds) |
//! | `e.transformMap(k, v, t)`, `e.transformMap(k, v, f, t)` | `map`: `k` to `t` |
//! | `e.transformMapEntry(k, v, m)`, `e.transformMapEntry(k, v, f, m)` | `map`: the entries of every `m` |
//!
//! On a list `k` is the index and `v` the element; on a map, the key and its value.
//!
//! The crate's interpreter binds one iteration variable only. Each macro is therefore
//! lowered onto what it does evaluate: the target bound once (`bind`, the comprehension
//! over nothing that cel-go's `cel.bind` and the crate's `sortBy` are made of), a fold
//! over its keys (`@graft_keys`: the indexes of a list, a map's keys in its order) with
//! `k` as the iteration variable, and `v` bound to `target[k]` around the parts of the
//! step that read it. `transformList` keeps the shape the interpreter appends in place
//! (`@result + [item]`, guarded or not), so building a list stays linear; the maps are
//! built entry by entry, in the order of the iteration, so that iterating the result is
//! the same on every replica (graft's maps walk their keys in order, cel's do not).

use cel::common::ast::{
    CallExpr, ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue, MapExpr, operators,
};
use cel::common::types::{CelInt, CelList, CelMapKey, DYN_TYPE, Kind, MAP_TYPE};
use cel::common::value::{CowVal, Val};
use cel::parser::{Macro, MacroExprHelper};
use cel::{DeclarationError, Env, ExecutionError, ParseError};

use super::convert::OrderedMap;
use super::functions::{Overload, arity, fail};

type CelResult<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

/// The helper functions the macros expand to; `@` keeps them out of CEL source.
const KEYS: &str = "@graft_keys";
const MAP_INSERT: &str = "@graft_map_insert";
const MAP_MERGE: &str = "@graft_map_merge";
/// The variables the expansions bind; CEL source cannot spell them either.
const TARGET: &str = "@graft_target";
const RESULT: &str = "@result";

/// The helpers of the expansions.
pub fn overloads() -> Vec<Overload> {
    vec![
        Overload::function(KEYS, "graft_keys_dyn", vec![DYN_TYPE], keys),
        Overload::function(
            MAP_INSERT,
            "graft_map_insert_map_dyn_dyn",
            vec![MAP_TYPE, DYN_TYPE, DYN_TYPE],
            map_insert,
        ),
        Overload::function(
            MAP_MERGE,
            "graft_map_merge_map_map",
            vec![MAP_TYPE, MAP_TYPE],
            map_merge,
        ),
    ]
}

#[derive(Debug, Clone, Copy)]
enum Kind2 {
    All,
    Exists,
    ExistsOne,
    TransformList,
    TransformMap,
    TransformMapEntry,
}

/// The macros, with the arities cel-go declares.
pub const MACROS: [(&str, usize); 10] = [
    ("all", 3),
    ("exists", 3),
    ("existsOne", 3),
    ("exists_one", 3),
    ("transformList", 3),
    ("transformList", 4),
    ("transformMap", 3),
    ("transformMap", 4),
    ("transformMapEntry", 3),
    ("transformMapEntry", 4),
];

/// Adds the macros to `env`.
pub fn register_macros(env: &mut Env) -> Result<(), DeclarationError> {
    for (name, arity) in MACROS {
        let kind = match name {
            "all" => Kind2::All,
            "exists" => Kind2::Exists,
            "existsOne" | "exists_one" => Kind2::ExistsOne,
            "transformList" => Kind2::TransformList,
            "transformMap" => Kind2::TransformMap,
            _ => Kind2::TransformMapEntry,
        };
        env.add_macro(Macro::receiver(name, arity, move |helper, target, args| {
            expand(kind, helper, target, args).map(Some)
        }))?;
    }
    Ok(())
}

/// `bind(var, init, body)`: `body` with `var` bound to `init`, evaluated once. A
/// comprehension over an empty list whose accumulator is the variable, as cel-go builds
/// `cel.bind`; nothing iterates, so it costs one scope.
pub fn bind(h: &mut MacroExprHelper<'_>, var: &str, init: IdedExpr, body: IdedExpr) -> IdedExpr {
    let range = h.next_expr(Expr::List(ListExpr::new(Vec::new())));
    let cond = literal(h, LiteralValue::Boolean(false.into()));
    let step = ident(h, var);
    h.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: range,
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: var.to_owned(),
        accu_init: init,
        loop_cond: cond,
        loop_step: step,
        result: body,
    })))
}

/// Whether `c` is a [`bind`]: nothing iterates, so its body does not multiply the work.
pub fn is_bind(c: &ComprehensionExpr) -> bool {
    matches!(&c.iter_range.expr, Expr::List(list) if list.elements.is_empty())
        && matches!(&c.loop_cond.expr, Expr::Literal(LiteralValue::Boolean(b)) if !*b.inner())
}

pub fn ident(h: &mut MacroExprHelper<'_>, name: &str) -> IdedExpr {
    h.next_expr(Expr::Ident(name.to_owned()))
}

pub fn literal(h: &mut MacroExprHelper<'_>, value: LiteralValue) -> IdedExpr {
    h.next_expr(Expr::Literal(value))
}

pub fn call(h: &mut MacroExprHelper<'_>, function: &str, args: Vec<IdedExpr>) -> IdedExpr {
    h.next_expr(Expr::Call(CallExpr {
        func_name: function.to_owned(),
        target: None,
        args,
    }))
}

/// The name an iteration variable is written as, or cel-go's error.
pub fn simple_name(h: &MacroExprHelper<'_>, arg: &IdedExpr) -> Result<String, ParseError> {
    match &arg.expr {
        Expr::Ident(name) => Ok(name.clone()),
        _ => Err(h.new_error(arg.id, "argument must be a simple name")),
    }
}

fn expand(
    kind: Kind2,
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<IdedExpr, ParseError> {
    let (Some(first), Some(second)) = (args.first(), args.get(1)) else {
        return Err(h.new_error(0, "expected iteration variables"));
    };
    let key = simple_name(h, first)?;
    let value = simple_name(h, second)?;
    if key == value {
        return Err(h.new_error(second.id, format!("duplicate variable name: {key}")));
    }
    for (name, arg) in [(&key, first), (&value, second)] {
        if name == RESULT || name == "__result__" {
            return Err(h.new_error(arg.id, "iteration variable overwrites accumulator variable"));
        }
    }
    let body = args.pop().unwrap_or_default();
    let filter = (args.len() == 3).then(|| args.pop()).flatten();
    args.clear();
    let range_source = target.take().unwrap_or_default();

    // `v`, bound to `target[k]` around `e`.
    let with_value = |h: &mut MacroExprHelper<'_>, e: IdedExpr| {
        let t = ident(h, TARGET);
        let k = ident(h, &key);
        let element = call(h, operators::INDEX, vec![t, k]);
        bind(h, &value, element, e)
    };
    let accu = |h: &mut MacroExprHelper<'_>| ident(h, RESULT);
    let (init, cond, step, result) = match kind {
        Kind2::All | Kind2::Exists => {
            let all = matches!(kind, Kind2::All);
            let init = literal(h, LiteralValue::Boolean(all.into()));
            let a = accu(h);
            let a = if all {
                a
            } else {
                call(h, operators::LOGICAL_NOT, vec![a])
            };
            let cond = call(h, operators::NOT_STRICTLY_FALSE, vec![a]);
            let a = accu(h);
            let p = with_value(h, body);
            let op = if all {
                operators::LOGICAL_AND
            } else {
                operators::LOGICAL_OR
            };
            let step = call(h, op, vec![a, p]);
            (init, cond, step, accu(h))
        }
        Kind2::ExistsOne => {
            let init = literal(h, LiteralValue::Int(0.into()));
            let cond = literal(h, LiteralValue::Boolean(true.into()));
            let p = with_value(h, body);
            let a = accu(h);
            let one = literal(h, LiteralValue::Int(1.into()));
            let plus = call(h, operators::ADD, vec![a, one]);
            let a = accu(h);
            let step = call(h, operators::CONDITIONAL, vec![p, plus, a]);
            let a = accu(h);
            let one = literal(h, LiteralValue::Int(1.into()));
            (init, cond, step, call(h, operators::EQUALS, vec![a, one]))
        }
        Kind2::TransformList | Kind2::TransformMap | Kind2::TransformMapEntry => {
            let item = with_value(h, body);
            let (init, grown) = match kind {
                Kind2::TransformList => {
                    let init = h.next_expr(Expr::List(ListExpr::new(Vec::new())));
                    let a = accu(h);
                    let items = h.next_expr(Expr::List(ListExpr::new(vec![item])));
                    (init, call(h, operators::ADD, vec![a, items]))
                }
                Kind2::TransformMap => {
                    let init = h.next_expr(Expr::Map(MapExpr::default()));
                    let a = accu(h);
                    let k = ident(h, &key);
                    (init, call(h, MAP_INSERT, vec![a, k, item]))
                }
                _ => {
                    let init = h.next_expr(Expr::Map(MapExpr::default()));
                    let a = accu(h);
                    (init, call(h, MAP_MERGE, vec![a, item]))
                }
            };
            // The guard and the item are bound separately, so the step keeps the shape
            // the interpreter appends in place.
            let step = match filter {
                Some(filter) => {
                    let guard = with_value(h, filter);
                    let a = accu(h);
                    call(h, operators::CONDITIONAL, vec![guard, grown, a])
                }
                None => grown,
            };
            let cond = literal(h, LiteralValue::Boolean(true.into()));
            (init, cond, step, accu(h))
        }
    };
    let t = ident(h, TARGET);
    let range = call(h, KEYS, vec![t]);
    let fold = h.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: range,
        iter_var: key,
        iter_var2: None,
        accu_var: RESULT.to_owned(),
        accu_init: init,
        loop_cond: cond,
        loop_step: step,
        result,
    })));
    Ok(bind(h, TARGET, range_source, fold))
}

/// `@graft_keys(e)`: the indexes of a list, or the keys of a map in the order it walks
/// them.
fn keys<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "@graft_keys";
    let [target] = arity::<1>(NAME, &args)?;
    let iterable = target.as_iterable().ok_or_else(|| {
        ExecutionError::no_such_overload(NAME, vec![target.get_type().name().to_owned()])
    })?;
    let mut items = iterable.iter();
    let mut keys: Vec<Box<dyn Val + 'v>> = Vec::new();
    if target.get_type().kind() == Kind::Map {
        while let Some(key) = items.next() {
            keys.push(key.clone_as_boxed());
        }
    } else {
        let mut index = 0i64;
        while items.next().is_some() {
            keys.push(Box::new(CelInt::from(index)));
            index += 1;
        }
    }
    Ok(CowVal::owned(CelList::from(keys)))
}

/// The entries of `map`, copied in its order.
fn copy<'v>(function: &str, map: &(dyn Val + 'v)) -> Result<OrderedMap<'v>, ExecutionError> {
    let (Some(iterable), Some(indexer)) = (map.as_iterable(), map.as_indexer()) else {
        return Err(fail(function, "expected a map"));
    };
    let mut copied = OrderedMap::default();
    let mut keys = iterable.iter();
    while let Some(key) = keys.next() {
        let value = indexer.get(key)?.into_owned();
        copied.insert(CelMapKey::try_from(key.clone_as_boxed())?, value);
    }
    Ok(copied)
}

/// cel-go's error for a key inserted twice.
fn exists(function: &str, key: &CelMapKey<'_>) -> ExecutionError {
    let key = match key {
        CelMapKey::String(s) => s.inner().to_owned(),
        CelMapKey::Int(i) => i.inner().to_string(),
        CelMapKey::UInt(u) => u.inner().to_string(),
        CelMapKey::Bool(b) => b.inner().to_string(),
    };
    fail(function, format!("insert failed: key {key} already exists"))
}

/// `@graft_map_insert(map, key, value)`: transformMap's step.
fn map_insert<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "transformMap";
    let [map, key, value] = arity::<3>(NAME, &args)?;
    let mut grown = copy(NAME, map)?;
    let key = CelMapKey::try_from(key.clone_as_boxed())?;
    if !grown.insert(key.clone(), value.clone_as_boxed()) {
        return Err(exists(NAME, &key));
    }
    Ok(CowVal::owned(grown))
}

/// `@graft_map_merge(map, entries)`: transformMapEntry's step.
fn map_merge<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "transformMapEntry";
    let [map, entries] = arity::<2>(NAME, &args)?;
    let mut grown = copy(NAME, map)?;
    for (key, value) in copy(NAME, entries)?.into_entries() {
        if !grown.insert(key.clone(), value) {
            return Err(exists(NAME, &key));
        }
    }
    Ok(CowVal::owned(grown))
}
