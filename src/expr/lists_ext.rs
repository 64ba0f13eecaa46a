//! cel-go's lists extension (`ext.Lists`, version 3, in Kubernetes since 1.34), with
//! cel-go's results and error messages:
//!
//! | Call | Result |
//! |---|---|
//! | `list.flatten()`, `list.flatten(depth)` | the elements of nested lists spliced in, one or `depth` levels deep |
//! | `list.distinct()` | the first of each set of equal elements, in order |
//! | `list.reverse()` | the elements in reverse order |
//! | `list.sort()` | the elements in ascending order; all of one comparable type |
//! | `list.sortBy(e, key)` | the elements in the ascending order of `key` (a macro; stable) |
//! | `lists.range(n)` | `[0, 1, ..., n - 1]` |
//!
//! `slice` is graft's own (`super::lists`), older than this library and kept as it was.
//! The `cel` crate has the same library, but registering it would declare `slice` a
//! second time, which the environment refuses: these are its functions, registered one
//! by one.

use std::cmp::Ordering;

use cel::common::ast::{CallExpr, ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue};
use cel::common::types::{CelInt, CelList, INT_TYPE, Kind, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::parser::{Macro, MacroExprHelper};
use cel::{DeclarationError, Env, ExecutionError, ParseError};

use super::comprehensions::{bind, ident, literal, simple_name};
use super::functions::{Overload, arity, fail};
use super::lists::elements;

type CelResult<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

/// The most elements `lists.range` makes: a list that long costs more than an
/// evaluation's budget to walk anyway.
const MAX_RANGE: i64 = 1_000_000;

/// The function `sortBy` expands to; `@` keeps it out of CEL source.
const SORT_BY_KEYS: &str = "@sortByAssociatedKeys";
/// The variable `sortBy` binds its target to, so it is evaluated once.
const SORT_BY_INPUT: &str = "@__sortBy_input__";

/// The overloads of this module.
pub fn overloads() -> Vec<Overload> {
    vec![
        Overload::method("flatten", "list_flatten", LIST_TYPE, vec![], flatten),
        Overload::method(
            "flatten",
            "list_flatten_int",
            LIST_TYPE,
            vec![INT_TYPE],
            flatten,
        ),
        Overload::method("distinct", "list_distinct", LIST_TYPE, vec![], distinct),
        Overload::method("reverse", "list_reverse", LIST_TYPE, vec![], reverse),
        Overload::method("sort", "list_sort", LIST_TYPE, vec![], sort),
        Overload::method(
            SORT_BY_KEYS,
            "list_sortByAssociatedKeys_list",
            LIST_TYPE,
            vec![LIST_TYPE],
            sort_by_keys,
        ),
        Overload::function("lists.range", "lists_range_int", vec![INT_TYPE], range),
    ]
}

/// Adds the `sortBy` macro to `env`.
pub fn register_macros(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_macro(Macro::receiver("sortBy", 2, |helper, target, args| {
        sort_by(helper, target, args).map(Some)
    }))
}

/// `list.sortBy(e, key)`, as cel-go expands it:
/// `bind(@input, list, @input.@sortByAssociatedKeys(@input.map(e, key)))`.
fn sort_by(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<IdedExpr, ParseError> {
    if let Some(list) = target.as_ref()
        && matches!(list.expr, Expr::Literal(_) | Expr::Map(_) | Expr::Struct(_))
    {
        return Err(h.new_error(
            list.id,
            "sortBy can only be applied to a list, identifier, comprehension, call or select \
             expression",
        ));
    }
    let var = match args.first() {
        Some(arg) => simple_name(h, arg)?,
        None => return Err(h.new_error(0, "sortBy takes two arguments")),
    };
    let key = args.pop().unwrap_or_default();
    args.clear();
    let list = target.take().unwrap_or_default();
    // `@input.map(var, key)`, as the map macro builds it.
    let range = ident(h, SORT_BY_INPUT);
    let init = h.next_expr(Expr::List(ListExpr::new(Vec::new())));
    let cond = literal(h, LiteralValue::Boolean(true.into()));
    let accu = ident(h, "@result");
    let item = h.next_expr(Expr::List(ListExpr::new(vec![key])));
    let step = h.next_expr(Expr::Call(CallExpr {
        func_name: cel::common::ast::operators::ADD.to_owned(),
        target: None,
        args: vec![accu, item],
    }));
    let result = ident(h, "@result");
    let keys = h.next_expr(Expr::Comprehension(Box::new(ComprehensionExpr {
        iter_range: range,
        iter_var: var,
        iter_var2: None,
        accu_var: "@result".to_owned(),
        accu_init: init,
        loop_cond: cond,
        loop_step: step,
        result,
    })));
    let input = ident(h, SORT_BY_INPUT);
    let sorted = h.next_expr(Expr::Call(CallExpr {
        func_name: SORT_BY_KEYS.to_owned(),
        target: Some(Box::new(input)),
        args: vec![keys],
    }));
    Ok(bind(h, SORT_BY_INPUT, list, sorted))
}

fn owned<'b, 'v>(items: Vec<Box<dyn Val + 'v>>) -> CelResult<'b, 'v> {
    Ok(CowVal::owned(CelList::from(items)))
}

/// `list.flatten()` and `list.flatten(depth)`.
fn flatten<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "flatten";
    let depth = match args.get(1) {
        Some(depth) => *depth
            .downcast_ref::<CelInt>()
            .ok_or_else(|| fail(NAME, "the depth must be an int"))?
            .inner(),
        None => 1,
    };
    let depth = u64::try_from(depth).map_err(|_| fail(NAME, "level must be non-negative"))?;
    let list = args.first().ok_or_else(|| fail(NAME, "expected a list"))?;
    let mut flat = Vec::new();
    flatten_into(NAME, list.as_ref(), depth, &mut flat)?;
    owned(flat)
}

fn flatten_into<'v>(
    name: &str,
    list: &(dyn Val + 'v),
    depth: u64,
    flat: &mut Vec<Box<dyn Val + 'v>>,
) -> Result<(), ExecutionError> {
    for element in elements(name, list)? {
        // Only lists are flattened: a map is iterable too, but kept whole.
        if depth > 0 && element.get_type().kind() == Kind::List {
            flatten_into(name, element, depth - 1, flat)?;
        } else {
            flat.push(element.clone_as_boxed());
        }
    }
    Ok(())
}

/// `list.distinct()`: equality is CEL's, so `1`, `1u` and `1.0` are one element.
fn distinct<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [list] = arity::<1>("distinct", &args)?;
    let mut unique: Vec<&dyn Val> = Vec::new();
    for item in elements("distinct", list)? {
        if !unique.iter().any(|seen| item.equals(*seen)) {
            unique.push(item);
        }
    }
    owned(
        unique
            .into_iter()
            .map(|item| item.clone_as_boxed())
            .collect(),
    )
}

fn reverse<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [list] = arity::<1>("reverse", &args)?;
    let items = elements("reverse", list)?;
    owned(
        items
            .into_iter()
            .rev()
            .map(|item| item.clone_as_boxed())
            .collect(),
    )
}

fn sort<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [list] = arity::<1>("sort", &args)?;
    let mut items = elements("sort", list)?;
    sort_by_key(&mut items, |item| *item, "sort")?;
    owned(
        items
            .into_iter()
            .map(|item| item.clone_as_boxed())
            .collect(),
    )
}

/// `list.@sortByAssociatedKeys(keys)`: the elements in the order of their keys, the key
/// of each at its index; equal keys keep their elements' order.
fn sort_by_keys<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "sortBy";
    let [list, keys] = arity::<2>(NAME, &args)?;
    let items = elements(NAME, list)?;
    let keys = elements(NAME, keys)?;
    if keys.len() != items.len() {
        return Err(fail(
            NAME,
            format!(
                "{SORT_BY_KEYS}() expected a list of the same size as the associated keys list, \
                 but got {} and {} elements respectively",
                items.len(),
                keys.len()
            ),
        ));
    }
    let mut keyed: Vec<_> = keys.into_iter().zip(items).collect();
    sort_by_key(&mut keyed, |(key, _)| *key, NAME)?;
    owned(
        keyed
            .into_iter()
            .map(|(_, item)| item.clone_as_boxed())
            .collect(),
    )
}

/// Sorts `items` by their keys, which must all be of one comparable type.
fn sort_by_key<T>(
    items: &mut [T],
    key: impl Fn(&T) -> &dyn Val,
    function: &str,
) -> Result<(), ExecutionError> {
    // A sort may panic on comparisons that are no total order: every key is compared to
    // the first up front, which rules out mixed types, and a NaN, which compares to
    // nothing.
    if let Some(first) = items.first().map(&key) {
        for item in items.iter() {
            if key(item).get_type() != first.get_type() {
                return Err(fail(function, "list elements must have the same type"));
            }
            compare(first, key(item), function)?;
        }
    }
    let mut error = None;
    items.sort_by(|a, b| {
        compare(key(a), key(b), function).unwrap_or_else(|e| {
            error.get_or_insert(e);
            Ordering::Equal
        })
    });
    error.map_or(Ok(()), Err)
}

fn compare(a: &dyn Val, b: &dyn Val, function: &str) -> Result<Ordering, ExecutionError> {
    a.as_comparer()
        .ok_or_else(|| fail(function, "list elements must be comparable"))?
        .compare(b)
}

/// `lists.range(n)`.
fn range<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "lists.range";
    let [n] = arity::<1>(NAME, &args)?;
    let n = *n
        .downcast_ref::<CelInt>()
        .ok_or_else(|| fail(NAME, "expected an int"))?
        .inner();
    if n < 0 {
        return Err(fail(NAME, format!("size must be non-negative, got {n}")));
    }
    if n > MAX_RANGE {
        return Err(fail(
            NAME,
            format!("size {n} exceeds maximum allowed ({MAX_RANGE})"),
        ));
    }
    owned(
        (0..n)
            .map(|i| Box::new(CelInt::from(i)) as Box<dyn Val>)
            .collect(),
    )
}
