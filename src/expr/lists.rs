//! Kubernetes' CEL list, set and regex libraries (`k8s.io/apiserver/pkg/cel/library`),
//! with the same names and results, so an expression written for a
//! ValidatingAdmissionPolicy or MutatingAdmissionPolicy runs unchanged:
//!
//! | Call | Result |
//! |---|---|
//! | `list.isSorted()` | `bool`: each element is at most the next |
//! | `list.sum()` | the sum of the elements; `0` for an empty list |
//! | `list.min()`, `list.max()` | the least or greatest element; an error for an empty list |
//! | `list.indexOf(x)`, `list.lastIndexOf(x)` | `int`: the first or last index of `x`, `-1` when absent |
//! | `list.slice(start, end)` | the elements from `start` up to, not including, `end` |
//! | `sets.contains(a, b)` | `bool`: every element of `b` is in `a` |
//! | `sets.intersects(a, b)` | `bool`: some element of `b` is in `a` |
//! | `sets.equivalent(a, b)` | `bool`: `a` and `b` hold the same elements |
//! | `s.find(regex)` | `string`: the first match, `""` when none |
//! | `s.findAll(regex)`, `s.findAll(regex, n)` | `list(string)`: every match, or the first `n` (all when `n < 0`) |
//!
//! graft adds `s.regexReplace(regex, replacement)`: every match replaced, `$1` or
//! `${name}` in the replacement standing for a group.

use std::cmp::Ordering;

use cel::ExecutionError;
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelString, CelUInt, DYN_TYPE, INT_TYPE, LIST_TYPE,
    STRING_TYPE,
};
use cel::common::value::{CowVal, Val};

use super::functions::{Overload, arity, fail, string_arg};

type CelResult<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

/// Longest regex source accepted, as for the regexes of `match.fields`.
const MAX_REGEX_CHARS: usize = 4096;

/// The overloads of this module.
pub fn overloads() -> Vec<Overload> {
    let list = || LIST_TYPE;
    vec![
        Overload::method("isSorted", "list_isSorted", list(), vec![], is_sorted),
        Overload::method("sum", "list_sum", list(), vec![], sum),
        Overload::method("min", "list_min", list(), vec![], min),
        Overload::method("max", "list_max", list(), vec![], max),
        Overload::method("indexOf", "list_indexOf", list(), vec![DYN_TYPE], index_of),
        Overload::method(
            "lastIndexOf",
            "list_lastIndexOf",
            list(),
            vec![DYN_TYPE],
            last_index_of,
        ),
        Overload::method(
            "slice",
            "list_slice_int_int",
            list(),
            vec![INT_TYPE, INT_TYPE],
            slice,
        ),
        Overload::function(
            "sets.contains",
            "sets_contains_list_list",
            vec![list(), list()],
            sets_contains,
        ),
        Overload::function(
            "sets.intersects",
            "sets_intersects_list_list",
            vec![list(), list()],
            sets_intersects,
        ),
        Overload::function(
            "sets.equivalent",
            "sets_equivalent_list_list",
            vec![list(), list()],
            sets_equivalent,
        ),
        Overload::method(
            "find",
            "string_find_string",
            STRING_TYPE,
            vec![STRING_TYPE],
            find,
        ),
        Overload::method(
            "findAll",
            "string_findAll_string",
            STRING_TYPE,
            vec![STRING_TYPE],
            find_all,
        ),
        Overload::method(
            "findAll",
            "string_findAll_string_int",
            STRING_TYPE,
            vec![STRING_TYPE, INT_TYPE],
            find_all,
        ),
        Overload::method(
            "regexReplace",
            "string_regexReplace_string_string",
            STRING_TYPE,
            vec![STRING_TYPE, STRING_TYPE],
            regex_replace,
        ),
    ]
}

/// The elements of a list, borrowed.
pub(super) type Elements<'a, 'v> = Vec<&'a (dyn Val + 'v)>;

/// The elements of a list argument (here and for the lists extension).
pub(super) fn elements<'a, 'v>(
    function: &str,
    list: &'a (dyn Val + 'v),
) -> Result<Elements<'a, 'v>, ExecutionError> {
    let iterable = list.as_iterable().ok_or_else(|| {
        fail(
            function,
            format!("expected a list, got {}", list.get_type().name()),
        )
    })?;
    let mut items = iterable.iter();
    let mut found = Vec::new();
    while let Some(item) = items.next() {
        found.push(item);
    }
    Ok(found)
}

fn compare(function: &str, a: &dyn Val, b: &dyn Val) -> Result<Ordering, ExecutionError> {
    let comparer = a.as_comparer().ok_or_else(|| {
        fail(
            function,
            format!("{} values cannot be ordered", a.get_type().name()),
        )
    })?;
    comparer.compare(b).map_err(|_| {
        fail(
            function,
            format!(
                "cannot compare {} with {}",
                a.get_type().name(),
                b.get_type().name()
            ),
        )
    })
}

/// `list.isSorted() -> bool`
fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "isSorted";
    let [list] = arity::<1>(NAME, &args)?;
    let items = elements(NAME, list)?;
    for pair in items.windows(2) {
        if compare(NAME, pair[0], pair[1])? == Ordering::Greater {
            return Ok(CowVal::owned(CelBool::from(false)));
        }
    }
    Ok(CowVal::owned(CelBool::from(true)))
}

/// `list.sum()`: `0` for an empty list, as Kubernetes' dynamically typed lists give.
fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "sum";
    let [list] = arity::<1>(NAME, &args)?;
    let items = elements(NAME, list)?;
    if let Some(item) = items.iter().find(|item| !is_number(**item)) {
        return Err(fail(
            NAME,
            format!("sum() adds numbers, got {}", item.get_type().name()),
        ));
    }
    let Some((first, rest)) = items.split_first() else {
        return Ok(CowVal::owned(CelInt::from(0)));
    };
    let mut total: Box<dyn Val + 'v> = first.clone_as_boxed();
    for item in rest {
        let adder = total.as_adder().ok_or_else(|| {
            fail(
                NAME,
                format!("{} values cannot be added", total.get_type().name()),
            )
        })?;
        let next = adder.add(*item).map_err(|e| fail(NAME, e))?.into_owned();
        total = next;
    }
    Ok(CowVal::Owned(total))
}

fn is_number(value: &dyn Val) -> bool {
    value.downcast_ref::<CelInt>().is_some()
        || value.downcast_ref::<CelUInt>().is_some()
        || value.downcast_ref::<CelDouble>().is_some()
}

/// The least (`Ordering::Less`) or greatest (`Ordering::Greater`) element.
fn extreme<'b, 'v>(name: &str, args: &[CowVal<'b, 'v>], wanted: Ordering) -> CelResult<'b, 'v> {
    let [list] = arity::<1>(name, args)?;
    let items = elements(name, list)?;
    let Some((first, rest)) = items.split_first() else {
        return Err(fail(name, format!("{name}() called on an empty list")));
    };
    let mut best = *first;
    for item in rest {
        if compare(name, *item, best)? == wanted {
            best = *item;
        }
    }
    Ok(CowVal::Owned(best.clone_as_boxed()))
}

/// `list.min()`
fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    extreme("min", &args, Ordering::Less)
}

/// `list.max()`
fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    extreme("max", &args, Ordering::Greater)
}

/// `list.indexOf(x) -> int`
fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "indexOf";
    let [list, wanted] = arity::<2>(NAME, &args)?;
    let position = elements(NAME, list)?
        .iter()
        .position(|item| item.equals(wanted));
    Ok(CowVal::owned(CelInt::from(index(position))))
}

/// `list.lastIndexOf(x) -> int`
fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "lastIndexOf";
    let [list, wanted] = arity::<2>(NAME, &args)?;
    let position = elements(NAME, list)?
        .iter()
        .rposition(|item| item.equals(wanted));
    Ok(CowVal::owned(CelInt::from(index(position))))
}

/// `list.slice(start, end)`: an error unless `0 <= start <= end <= size`.
fn slice<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "slice";
    let [list, start, end] = arity::<3>(NAME, &args)?;
    let int = |value: &dyn Val| {
        value
            .downcast_ref::<CelInt>()
            .map(|i| *i.inner())
            .ok_or_else(|| {
                fail(
                    NAME,
                    format!("expected an int, got {}", value.get_type().name()),
                )
            })
    };
    let (start, end) = (int(start)?, int(end)?);
    let items = elements(NAME, list)?;
    let bounds = usize::try_from(start)
        .ok()
        .zip(usize::try_from(end).ok())
        .filter(|(start, end)| start <= end && *end <= items.len());
    let Some((from, to)) = bounds else {
        return Err(fail(
            NAME,
            format!(
                "cannot slice({start}, {end}) a list of {}: 0 <= start <= end <= size is required",
                items.len()
            ),
        ));
    };
    let sliced: Vec<Box<dyn Val + 'v>> = items[from..to]
        .iter()
        .map(|item| item.clone_as_boxed())
        .collect();
    Ok(CowVal::owned(CelList::from(sliced)))
}

fn index(position: Option<usize>) -> i64 {
    position.and_then(|p| i64::try_from(p).ok()).unwrap_or(-1)
}

/// Whether `list` holds an element equal to `value`.
fn holds(list: &[&dyn Val], value: &dyn Val) -> bool {
    list.iter().any(|item| item.equals(value))
}

/// The two lists of a `sets.*` call.
fn two_sets<'a, 'v>(
    name: &str,
    args: &'a [CowVal<'_, 'v>],
) -> Result<(Elements<'a, 'v>, Elements<'a, 'v>), ExecutionError> {
    let [a, b] = arity::<2>(name, args)?;
    Ok((elements(name, a)?, elements(name, b)?))
}

/// `sets.contains(a, b) -> bool`
fn sets_contains<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let (a, b) = two_sets("sets.contains", &args)?;
    let answer = b.iter().all(|item| holds(&a, *item));
    Ok(CowVal::owned(CelBool::from(answer)))
}

/// `sets.intersects(a, b) -> bool`
fn sets_intersects<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let (a, b) = two_sets("sets.intersects", &args)?;
    let answer = b.iter().any(|item| holds(&a, *item));
    Ok(CowVal::owned(CelBool::from(answer)))
}

/// `sets.equivalent(a, b) -> bool`
fn sets_equivalent<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let (a, b) = two_sets("sets.equivalent", &args)?;
    let answer = b.iter().all(|item| holds(&a, *item)) && a.iter().all(|item| holds(&b, *item));
    Ok(CowVal::owned(CelBool::from(answer)))
}

/// A regex argument, compiled with the size bound the rest of graft uses.
fn regex_arg(function: &str, pattern: &str) -> Result<regex::Regex, ExecutionError> {
    if pattern.chars().count() > MAX_REGEX_CHARS {
        return Err(fail(
            function,
            format!("the regex is longer than {MAX_REGEX_CHARS} characters"),
        ));
    }
    regex::Regex::new(pattern).map_err(|e| fail(function, format!("invalid regex: {e}")))
}

/// `s.find(regex) -> string`
fn find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "find";
    let [text, pattern] = arity::<2>(NAME, &args)?;
    let regex = regex_arg(NAME, string_arg(NAME, pattern)?)?;
    let found = regex
        .find(string_arg(NAME, text)?)
        .map(|m| m.as_str().to_owned())
        .unwrap_or_default();
    Ok(CowVal::owned(CelString::from(found)))
}

/// `s.findAll(regex) -> list(string)` and `s.findAll(regex, n)`.
fn find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "findAll";
    let limit = match args.get(2) {
        Some(n) => {
            let n = *n
                .downcast_ref::<CelInt>()
                .ok_or_else(|| fail(NAME, "the limit must be an int"))?
                .inner();
            usize::try_from(n).ok()
        }
        None => None,
    };
    let (text, pattern) = match args.as_slice() {
        [text, pattern] | [text, pattern, _] => (text.as_ref(), pattern.as_ref()),
        _ => {
            return Err(fail(
                NAME,
                format!("expected 2 or 3 arguments, got {}", args.len()),
            ));
        }
    };
    let regex = regex_arg(NAME, string_arg(NAME, pattern)?)?;
    let matches = regex
        .find_iter(string_arg(NAME, text)?)
        .take(limit.unwrap_or(usize::MAX))
        .map(|m| Box::new(CelString::from(m.as_str().to_owned())) as Box<dyn Val>)
        .collect::<Vec<_>>();
    Ok(CowVal::owned(CelList::from(matches)))
}

/// `s.regexReplace(regex, replacement) -> string`
fn regex_replace<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "regexReplace";
    let [text, pattern, replacement] = arity::<3>(NAME, &args)?;
    let regex = regex_arg(NAME, string_arg(NAME, pattern)?)?;
    let replaced = regex
        .replace_all(string_arg(NAME, text)?, string_arg(NAME, replacement)?)
        .into_owned();
    Ok(CowVal::owned(CelString::from(replaced)))
}

#[cfg(test)]
#[path = "lists_tests.rs"]
mod tests;
