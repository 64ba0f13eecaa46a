//! What cel-go's optional library (version 2, in Kubernetes since 1.28) has beyond the
//! `cel` crate's:
//!
//! | Call | Result |
//! |---|---|
//! | `o.or(p)`, `o.orValue(v)` | as the crate has them, but `p` and `v` are evaluated only when `o` has no value |
//! | `list.first()`, `list.last()` | `optional`: the first or last element, `optional.none()` for an empty list |
//! | `optional.unwrap(list)`, `list.unwrapOpt()` | the values of a list of optionals, those without one left out |
//!
//! cel-go evaluates the argument of `or` and `orValue` only when it needs it, so
//! `object.?spec.x.orValue(object.spec.y.z)` gives `x` even where `y` is absent; the
//! crate's overloads take evaluated arguments. A call whose argument can fail or costs
//! something is therefore rewritten when it is parsed, into
//! `bind(@o, o, @graft_has_value(@o) ? @o : p)` (`@graft_opt_value(@o)` for `orValue`);
//! a literal or a name is left to the crate's overload, which gives the same.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, operators};
use cel::common::types::{CelBool, CelList, CelOptional, DYN_TYPE, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::parser::{Macro, MacroExprHelper};
use cel::{DeclarationError, Env, ExecutionError, ParseError};

use super::comprehensions::{bind, call, ident};
use super::functions::{Overload, arity, fail};

type CelResult<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

const HAS_VALUE: &str = "@graft_has_value";
const OPT_VALUE: &str = "@graft_opt_value";
/// The variable the rewritten call binds its receiver to.
const RECEIVER: &str = "@graft_optional";

/// The overloads of this module.
pub fn overloads() -> Vec<Overload> {
    vec![
        Overload::function(HAS_VALUE, "graft_has_value_dyn", vec![DYN_TYPE], has_value),
        Overload::function(OPT_VALUE, "graft_opt_value_dyn", vec![DYN_TYPE], opt_value),
        Overload::method("first", "list_first", LIST_TYPE, vec![], first),
        Overload::method("last", "list_last", LIST_TYPE, vec![], last),
        Overload::function(
            "optional.unwrap",
            "optional_unwrap_list",
            vec![LIST_TYPE],
            unwrap,
        ),
        Overload::method("unwrapOpt", "list_unwrapOpt", LIST_TYPE, vec![], unwrap),
    ]
}

/// Adds the `or` and `orValue` macros to `env`.
pub fn register_macros(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_macro(Macro::receiver("or", 1, |helper, target, args| {
        short_circuit(helper, target, args, false)
    }))?;
    env.add_macro(Macro::receiver("orValue", 1, |helper, target, args| {
        short_circuit(helper, target, args, true)
    }))
}

/// Whether evaluating `e` cannot fail and costs next to nothing: then evaluating it
/// first changes nothing.
fn is_plain(e: &IdedExpr) -> bool {
    match &e.expr {
        Expr::Literal(_) | Expr::Ident(_) => true,
        Expr::List(list) => list.elements.iter().all(is_plain),
        Expr::Map(map) => map.entries.iter().all(|entry| match &entry.expr {
            EntryExpr::MapEntry(entry) => is_plain(&entry.key) && is_plain(&entry.value),
            EntryExpr::StructField(_) => false,
        }),
        _ => false,
    }
}

fn short_circuit(
    h: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
    or_value: bool,
) -> Result<Option<IdedExpr>, ParseError> {
    if args.first().is_none_or(is_plain) || target.is_none() {
        return Ok(None);
    }
    let alternative = args.pop().unwrap_or_default();
    let receiver = target.take().unwrap_or_default();
    let bound = ident(h, RECEIVER);
    let test = call(h, HAS_VALUE, vec![bound]);
    let bound = ident(h, RECEIVER);
    let value = if or_value {
        call(h, OPT_VALUE, vec![bound])
    } else {
        bound
    };
    let choice = call(h, operators::CONDITIONAL, vec![test, value, alternative]);
    Ok(Some(bind(h, RECEIVER, receiver, choice)))
}

/// `@graft_has_value(o)`: whether an optional has a value; any other value is one, as
/// cel-go's `or` and `orValue` take it.
fn has_value<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [value] = arity::<1>(HAS_VALUE, &args)?;
    let present = value
        .downcast_ref::<CelOptional>()
        .is_none_or(|optional| optional.option().is_some());
    Ok(CowVal::owned(CelBool::from(present)))
}

/// `@graft_opt_value(o)`: the value of an optional that has one, or the value itself.
fn opt_value<'b, 'v>(mut args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let value = args
        .pop()
        .ok_or_else(|| ExecutionError::invalid_argument_count(1, 0))?;
    let none = || fail("orValue", "optional.none() dereference");
    match value {
        CowVal::Borrowed(value) => match value.downcast_ref::<CelOptional>() {
            Some(optional) => optional.option().map(CowVal::Borrowed).ok_or_else(none),
            None => Ok(CowVal::Borrowed(value)),
        },
        CowVal::Owned(value) => match value.downcast_ref::<CelOptional>() {
            Some(optional) => optional
                .option()
                .map(|inner| CowVal::Owned(inner.clone_as_boxed()))
                .ok_or_else(none),
            None => Ok(CowVal::Owned(value)),
        },
    }
}

/// The element at `index` of a list, as an optional.
fn element<'b, 'v>(
    name: &str,
    args: &[CowVal<'b, 'v>],
    pick: impl FnOnce(usize) -> Option<usize>,
) -> CelResult<'b, 'v> {
    let [list] = arity::<1>(name, args)?;
    let size = list.as_sizer().map_or(0, |sizer| {
        usize::try_from(*sizer.size().inner()).unwrap_or(0)
    });
    let iterable = list
        .as_iterable()
        .ok_or_else(|| fail(name, "expected a list"))?;
    let Some(index) = pick(size) else {
        return Ok(CowVal::owned(CelOptional::none()));
    };
    let mut items = iterable.iter();
    let mut at = 0;
    while let Some(item) = items.next() {
        if at == index {
            return Ok(CowVal::owned(CelOptional::of(item.clone_as_boxed())));
        }
        at += 1;
    }
    Ok(CowVal::owned(CelOptional::none()))
}

/// `list.first()`
fn first<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    element("first", &args, |size| (size > 0).then_some(0))
}

/// `list.last()`
fn last<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    element("last", &args, |size| size.checked_sub(1))
}

/// `optional.unwrap(list)` and `list.unwrapOpt()`.
fn unwrap<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "optional.unwrap";
    let [list] = arity::<1>(NAME, &args)?;
    let iterable = list
        .as_iterable()
        .ok_or_else(|| fail(NAME, "expected a list"))?;
    let mut items = iterable.iter();
    let mut values: Vec<Box<dyn Val + 'v>> = Vec::new();
    while let Some(item) = items.next() {
        let optional = item.downcast_ref::<CelOptional>().ok_or_else(|| {
            fail(
                NAME,
                format!("value of type {} is not optional", item.get_type().name()),
            )
        })?;
        if let Some(value) = optional.option() {
            values.push(value.clone_as_boxed());
        }
    }
    Ok(CowVal::owned(CelList::from(values)))
}
