//! Kubernetes' CEL quantity library (`k8s.io/apiserver/pkg/cel/library`,
//! `quantity.go`), exact to the billionth as `resource.Quantity` is:
//!
//! | Call | Result |
//! |---|---|
//! | `quantity(s)`, `isQuantity(s)` | a quantity; whether `s` is one |
//! | `q.isGreaterThan(q)`, `q.isLessThan(q)`, `q.compareTo(q)` | `bool`, `bool`, `int` (-1, 0, 1) |
//! | `q.add(q or int)`, `q.sub(q or int)` | a quantity |
//! | `sign(q)` (and `q.sign()`) | `int`: -1, 0 or 1 |
//! | `q.isInteger()`, `q.asInteger()` | whether it is a whole number that fits an `int`; that `int`, an error otherwise |
//! | `q.asApproximateFloat()` | `double` |
//!
//! Two quantities are equal when their values are (`quantity('1') == quantity('1000m')`).

use std::any::Any;
use std::cmp::Ordering;

use cel::ExecutionError;
use cel::common::types::{CelBool, CelDouble, CelInt, INT_TYPE, STRING_TYPE, Type};
use cel::common::value::{CowVal, StaticVal, Val};

use super::functions::{Overload, arity, fail, string_arg};
use crate::k8s::quantity::Quantity as Parsed;

type CelResult<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

static QUANTITY_TYPE: Type = Type::new_unspecified_type("kubernetes.Quantity");

const NANOS_PER_UNIT: i128 = 1_000_000_000;

/// A quantity, in billionths of its base unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Quantity(i128);

impl Val for Quantity {
    fn get_type(&self) -> &Type {
        &QUANTITY_TYPE
    }
    fn cel_type() -> &'static Type {
        &QUANTITY_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        other.downcast_ref::<Quantity>().is_some_and(|o| o == self)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(*self)
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for Quantity {}

/// The overloads of this module.
pub fn overloads() -> Vec<Overload> {
    let q = || QUANTITY_TYPE.to_owned();
    vec![
        Overload::function("quantity", "string_to_quantity", vec![STRING_TYPE], make),
        Overload::function(
            "isQuantity",
            "is_quantity_string",
            vec![STRING_TYPE],
            is_quantity,
        ),
        Overload::method("sign", "quantity_sign", q(), vec![], sign),
        // Kubernetes declares `sign` as a function (`sign(q)`); graft's method stays.
        Overload::function("sign", "quantity_sign_function", vec![q()], sign),
        Overload::method("isInteger", "quantity_is_integer", q(), vec![], is_integer),
        Overload::method("asInteger", "quantity_as_integer", q(), vec![], as_integer),
        Overload::method(
            "asApproximateFloat",
            "quantity_as_approximate_float",
            q(),
            vec![],
            as_float,
        ),
        Overload::method("add", "quantity_add_quantity", q(), vec![q()], add),
        Overload::method("add", "quantity_add_int", q(), vec![INT_TYPE], add),
        Overload::method("sub", "quantity_sub_quantity", q(), vec![q()], sub),
        Overload::method("sub", "quantity_sub_int", q(), vec![INT_TYPE], sub),
        Overload::method(
            "isGreaterThan",
            "quantity_is_greater_than",
            q(),
            vec![q()],
            is_greater_than,
        ),
        Overload::method(
            "isLessThan",
            "quantity_is_less_than",
            q(),
            vec![q()],
            is_less_than,
        ),
        Overload::method(
            "compareTo",
            "quantity_compare_to",
            q(),
            vec![q()],
            compare_to,
        ),
    ]
}

fn parse(function: &str, text: &str) -> Result<Quantity, ExecutionError> {
    Parsed::parse(text)
        .and_then(|parsed| parsed.to_nanos())
        .map(Quantity)
        .map_err(|e| fail(function, e))
}

/// A quantity argument, or an `int` of base units where the overload takes one.
fn operand(function: &str, value: &dyn Val) -> Result<Quantity, ExecutionError> {
    if let Some(quantity) = value.downcast_ref::<Quantity>() {
        return Ok(*quantity);
    }
    let int = value.downcast_ref::<CelInt>().ok_or_else(|| {
        fail(
            function,
            format!("expected a quantity, got {}", value.get_type().name()),
        )
    })?;
    Ok(Quantity(i128::from(*int.inner()) * NANOS_PER_UNIT))
}

fn unary<'b, 'v, T: Val + 'static>(
    name: &str,
    args: &[CowVal<'b, 'v>],
    f: impl FnOnce(Quantity) -> Result<T, ExecutionError>,
) -> CelResult<'b, 'v> {
    let [value] = arity::<1>(name, args)?;
    Ok(CowVal::owned(f(operand(name, value)?)?))
}

fn binary<'b, 'v, T: Val + 'static>(
    name: &str,
    args: &[CowVal<'b, 'v>],
    f: impl FnOnce(Quantity, Quantity) -> Result<T, ExecutionError>,
) -> CelResult<'b, 'v> {
    let [a, b] = arity::<2>(name, args)?;
    Ok(CowVal::owned(f(operand(name, a)?, operand(name, b)?)?))
}

fn make<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [text] = arity::<1>("quantity", &args)?;
    Ok(CowVal::owned(parse(
        "quantity",
        string_arg("quantity", text)?,
    )?))
}

fn is_quantity<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [text] = arity::<1>("isQuantity", &args)?;
    let valid = parse("isQuantity", string_arg("isQuantity", text)?).is_ok();
    Ok(CowVal::owned(CelBool::from(valid)))
}

fn sign<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    unary("sign", &args, |q| Ok(CelInt::from(q.0.signum() as i64)))
}

/// The value as an `int`, when it is whole and fits.
fn whole(q: Quantity) -> Option<i64> {
    (q.0 % NANOS_PER_UNIT == 0)
        .then(|| i64::try_from(q.0 / NANOS_PER_UNIT).ok())
        .flatten()
}

fn is_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    unary("isInteger", &args, |q| {
        Ok(CelBool::from(whole(q).is_some()))
    })
}

fn as_integer<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    unary("asInteger", &args, |q| {
        whole(q).map(CelInt::from).ok_or_else(|| {
            fail(
                "asInteger",
                "the quantity is not a whole number that fits an int (check isInteger() first)",
            )
        })
    })
}

fn as_float<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    unary("asApproximateFloat", &args, |q| {
        Ok(CelDouble::from(q.0 as f64 / NANOS_PER_UNIT as f64))
    })
}

fn add<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    binary("add", &args, |a, b| {
        a.0.checked_add(b.0)
            .map(Quantity)
            .ok_or_else(|| fail("add", "the sum is out of range"))
    })
}

fn sub<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    binary("sub", &args, |a, b| {
        a.0.checked_sub(b.0)
            .map(Quantity)
            .ok_or_else(|| fail("sub", "the difference is out of range"))
    })
}

fn is_greater_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    binary("isGreaterThan", &args, |a, b| Ok(CelBool::from(a > b)))
}

fn is_less_than<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    binary("isLessThan", &args, |a, b| Ok(CelBool::from(a < b)))
}

fn compare_to<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    binary("compareTo", &args, |a, b| {
        let order = match a.cmp(&b) {
            Ordering::Less => -1,
            Ordering::Equal => 0,
            Ordering::Greater => 1,
        };
        Ok(CelInt::from(order))
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::evaluate_unbound as eval;

    #[test]
    fn quantities_compare_and_add_exactly() {
        for source in [
            "isQuantity('500m') && !isQuantity('5 GB') && !isQuantity('')",
            "quantity('1') == quantity('1000m') && quantity('1Ki') == quantity('1024')",
            "quantity('1Gi').isGreaterThan(quantity('1G')) && quantity('1G').isLessThan(quantity('1Gi'))",
            "quantity('1').compareTo(quantity('2')) == -1 && quantity('2').compareTo(quantity('2000m')) == 0",
            "quantity('0.1').add(quantity('0.2')) == quantity('300m')",
            "quantity('1').add(2) == quantity('3') && quantity('1').sub(2).sign() == -1",
            "quantity('1.5').sub(quantity('500m')).asInteger() == 1",
            "quantity('0').sign() == 0 && quantity('5Mi').sign() == 1",
            "sign(quantity('-1')) == -1 && sign(quantity('0')) == 0",
            "quantity('1.5').isInteger() == false && quantity('2k').isInteger()",
            "quantity('1.5').asApproximateFloat() == 1.5",
            "quantity('2k').asInteger() == 2000",
        ] {
            assert_eq!(eval(source), Ok(json!(true)), "{source}");
        }
    }

    #[test]
    fn invalid_quantities_are_errors_not_panics() {
        for (source, needle) in [
            ("quantity('5 GB')", "is not a Kubernetes quantity"),
            ("quantity('1.5').asInteger()", "not a whole number"),
            ("quantity('100Ei').asInteger()", "not a whole number"),
            ("quantity('1e30')", "out of range"),
            ("quantity('1').isGreaterThan(1)", "no matching overload"),
            ("quantity('1')", "no JSON form"),
        ] {
            match eval(source) {
                Err(error) => assert!(error.to_string().contains(needle), "{source}: {error}"),
                Ok(value) => panic!("{source}: {value}"),
            }
        }
    }

    #[test]
    fn errors_never_quote_the_value() {
        for (source, expected) in [
            (
                "quantity('12345 secret')",
                "Error executing function 'quantity': the value is not a Kubernetes quantity \
                 (expected a number with an optional suffix such as 500m, 1.5, 32Gi, 129e6)",
            ),
            (
                "quantity('12345e30')",
                "Error executing function 'quantity': the quantity is out of range (an exact \
                 quantity holds up to about 1.7e29 base units)",
            ),
        ] {
            match eval(source) {
                Err(error) => assert_eq!(error.to_string(), expected, "{source}"),
                Ok(value) => panic!("{source}: {value}"),
            }
        }
        assert_eq!(eval("isQuantity('12345 secret')"), Ok(json!(false)));
    }
}
