//! The cost budget of one CEL evaluation: comprehensions are metered, so no expression
//! can spin or build a huge value from the object's lists.
//!
//! The `cel` crate has no cost model and its evaluation cannot be interrupted from
//! outside, but graft owns the compiled program. [`meter`] rewrites every comprehension
//! (`map`, `filter`, `all`, `exists`, `exists_one`) so that each iteration first calls
//! [`TICK`], a function graft registers: it charges one unit per iteration plus the size
//! of what the iteration produces (one unit per 64 bytes of a string, one per element of
//! a list or map), and fails once the evaluation has spent [`MAX_COST`]. The failure
//! ends the comprehension at once: `all` and `exists` check their loop condition before
//! each step, and `map` and `filter` evaluate their guard and item without deferring
//! errors, so the tick goes where the interpreter does not swallow its error.
//!
//! Everything else an expression does is bounded by its size and the size of the
//! request (graft's functions cap their arguments and results separately).

use std::cell::Cell;

use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, ListExpr, operators};
use cel::common::types::{CelString, DYN_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError, IdedExpr};

/// Units one evaluation may spend: a hundred thousand iterations (two nested
/// comprehensions over 300 items each), or 6.4 MB of strings built in comprehensions.
/// At the slowest iterations measured (~0.5 µs each, release build) that is ~50 ms.
pub const MAX_COST: u64 = 100_000;

/// The metering function. Its name cannot be written in CEL source.
pub const TICK: &str = "@graft_tick";

/// Bytes of a string that cost one unit.
const BYTES_PER_UNIT: u64 = 64;

thread_local! {
    /// Units left in the evaluation running on this thread.
    static REMAINING: Cell<u64> = const { Cell::new(MAX_COST) };
}

/// Declares [`TICK`] on `env`.
pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(TICK, "graft_tick_dyn", vec![DYN_TYPE], tick)
}

/// Runs one evaluation with a fresh budget. Returns its result and whether it ran out
/// of budget (its error is then the budget's, whatever the interpreter made of it).
pub fn with_budget<T>(evaluate: impl FnOnce() -> T) -> (T, bool) {
    with_budget_of(MAX_COST, evaluate)
}

/// [`with_budget`] with a budget of `units`.
pub fn with_budget_of<T>(units: u64, evaluate: impl FnOnce() -> T) -> (T, bool) {
    REMAINING.with(|remaining| remaining.set(units));
    let result = evaluate();
    let exhausted = REMAINING.with(|remaining| remaining.get() == 0);
    (result, exhausted)
}

/// The error an evaluation that ran out of budget reports.
pub fn exhausted_message() -> String {
    format!(
        "the expression exceeded its cost budget of {MAX_COST} units (one per comprehension \
         iteration, plus the size of what it builds): iterate over fewer items, or compute \
         the inner part once in a variable"
    )
}

/// `@graft_tick(value) -> value`: charges for one iteration that produced `value`.
fn tick<'b, 'v>(mut args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let value = args
        .pop()
        .ok_or_else(|| ExecutionError::invalid_argument_count(1, 0))?;
    let cost = 1 + size_units(value.as_ref());
    let left = REMAINING.with(|remaining| {
        let left = remaining.get().saturating_sub(cost);
        remaining.set(left);
        left
    });
    if left == 0 {
        return Err(ExecutionError::function_error(
            "cost budget",
            exhausted_message(),
        ));
    }
    Ok(value)
}

fn size_units(value: &dyn Val) -> u64 {
    if let Some(string) = value.downcast_ref::<CelString>() {
        return string.inner().len() as u64 / BYTES_PER_UNIT;
    }
    value
        .as_sizer()
        .map_or(0, |sizer| u64::try_from(*sizer.size().inner()).unwrap_or(0))
}

/// `root` with every comprehension metered. New nodes get ids counted down from the
/// largest, far from the parser's, which count up from one.
pub fn meter(root: &IdedExpr) -> IdedExpr {
    let mut next_id = u64::MAX;
    let mut metered = root.clone();
    meter_node(&mut metered, &mut next_id);
    metered
}

fn meter_node(node: &mut IdedExpr, next_id: &mut u64) {
    match &mut node.expr {
        Expr::Comprehension(comprehension) => {
            for inner in [
                &mut comprehension.iter_range,
                &mut comprehension.accu_init,
                &mut comprehension.loop_cond,
                &mut comprehension.loop_step,
                &mut comprehension.result,
            ] {
                meter_node(inner, next_id);
            }
            meter_comprehension(comprehension, next_id);
        }
        Expr::Call(call) => {
            if let Some(target) = &mut call.target {
                meter_node(target, next_id);
            }
            for arg in &mut call.args {
                meter_node(arg, next_id);
            }
        }
        Expr::List(list) => {
            for element in &mut list.elements {
                meter_node(element, next_id);
            }
        }
        Expr::Map(map) => meter_entries(&mut map.entries, next_id),
        Expr::Struct(s) => meter_entries(&mut s.entries, next_id),
        Expr::Select(select) => meter_node(&mut select.operand, next_id),
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
    }
}

fn meter_entries(entries: &mut [cel::common::ast::IdedEntryExpr], next_id: &mut u64) {
    for entry in entries {
        match &mut entry.expr {
            EntryExpr::StructField(field) => meter_node(&mut field.value, next_id),
            EntryExpr::MapEntry(entry) => {
                meter_node(&mut entry.key, next_id);
                meter_node(&mut entry.value, next_id);
            }
        }
    }
}

/// Puts the tick where each iteration evaluates it first and fails at once.
fn meter_comprehension(comprehension: &mut ComprehensionExpr, next_id: &mut u64) {
    // `all`, `exists`: the condition runs before every step, and its error is not deferred.
    if !matches!(comprehension.loop_cond.expr, Expr::Literal(_)) {
        wrap(&mut comprehension.loop_cond, next_id);
        return;
    }
    // `map`, `filter`: `@result + [item]`, or `guard ? @result + [item] : @result`.
    // The interpreter builds these in place; the shape must stay as it is.
    if is_append_step(&comprehension.loop_step, &comprehension.accu_var) {
        if let Some(items) = appended_list(&mut comprehension.loop_step) {
            for item in &mut items.elements {
                wrap(item, next_id);
            }
        }
        if let Expr::Call(call) = &mut comprehension.loop_step.expr
            && call.func_name == operators::CONDITIONAL
            && let Some(guard) = call.args.first_mut()
        {
            wrap(guard, next_id);
        }
        return;
    }
    // `exists_one` and any other shape: the whole step.
    wrap(&mut comprehension.loop_step, next_id);
}

/// Whether `step` is `accu + [items]` or `guard ? accu + [items] : accu`.
fn is_append_step(step: &IdedExpr, accu: &str) -> bool {
    let Expr::Call(call) = &step.expr else {
        return false;
    };
    if call.target.is_some() {
        return false;
    }
    match (call.func_name.as_str(), call.args.as_slice()) {
        (operators::ADD, [lhs, rhs]) => is_ident(lhs, accu) && matches!(rhs.expr, Expr::List(_)),
        (operators::CONDITIONAL, [_, then, otherwise]) => {
            is_ident(otherwise, accu) && is_append_step(then, accu)
        }
        _ => false,
    }
}

/// The appended list of a step [`is_append_step`] accepts.
fn appended_list(step: &mut IdedExpr) -> Option<&mut ListExpr> {
    let Expr::Call(call) = &mut step.expr else {
        return None;
    };
    if call.func_name == operators::ADD {
        match &mut call.args.get_mut(1)?.expr {
            Expr::List(list) => Some(list),
            _ => None,
        }
    } else {
        appended_list(call.args.get_mut(1)?)
    }
}

fn is_ident(node: &IdedExpr, name: &str) -> bool {
    matches!(&node.expr, Expr::Ident(ident) if ident == name)
}

fn wrap(node: &mut IdedExpr, next_id: &mut u64) {
    let inner = std::mem::take(node);
    let id = *next_id;
    *next_id = next_id.saturating_sub(1);
    *node = IdedExpr {
        id,
        expr: Expr::Call(CallExpr {
            func_name: TICK.to_string(),
            target: None,
            args: vec![inner],
        }),
    };
}
