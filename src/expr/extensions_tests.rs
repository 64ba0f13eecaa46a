//! cel-go's libraries Kubernetes enables and the `cel` crate lacks, through compiled
//! expressions of graft's own dialect: two-variable comprehensions, the lists extension,
//! optional values' version 2 and lazy `or`/`orValue`.

use serde_json::{Value, json};

use super::evaluate_unbound as eval;
use super::{Declarations, Expression};

fn check(cases: &[(&str, Value)]) {
    for (source, expected) in cases {
        assert_eq!(eval(source), Ok(expected.clone()), "{source}");
    }
}

fn error(source: &str) -> String {
    match eval(source) {
        Err(error) => error.to_string(),
        Ok(value) => panic!("{source}: expected an error, got {value}"),
    }
}

#[test]
fn two_variable_comprehensions() {
    check(&[
        ("[1, 2].all(i, v, i < v)", json!(true)),
        ("[1, 2].all(i, v, i > v)", json!(false)),
        (
            "{'a': 1, 'b': 2}.exists(k, v, k == 'b' && v == 2)",
            json!(true),
        ),
        ("[10, 20].exists(i, v, i == 1 && v == 20)", json!(true)),
        ("[1, 2, 1].existsOne(i, v, v == 2)", json!(true)),
        ("[1, 2].exists_one(i, v, v == 2)", json!(true)),
        ("[1, 2, 2].exists_one(i, v, v == 2)", json!(false)),
        ("[1, 2, 3].transformList(i, v, i * v)", json!([0, 2, 6])),
        (
            "[1, 2, 3].transformList(i, v, i % 2 == 0, v)",
            json!([1, 3]),
        ),
        ("{'a': 1}.transformList(k, v, k + string(v))", json!(["a1"])),
        (
            "[1, 2].transformMap(i, v, v * 10)",
            json!({"0": 10, "1": 20}),
        ),
        (
            "{'a': 1, 'b': 2}.transformMap(k, v, v > 1, v * 10)",
            json!({"b": 20}),
        ),
        (
            "{'a': 'x'}.transformMapEntry(k, v, {v: k})",
            json!({"x": "a"}),
        ),
        (
            "{'a': 'x', 'b': 'y'}.transformMapEntry(k, v, k == 'a', {v: k})",
            json!({"x": "a"}),
        ),
        // Nested, and reading the outer variables.
        (
            "[[1, 2], [3]].transformList(i, l, l.transformList(j, v, i * 10 + j + v))",
            json!([[1, 3], [13]]),
        ),
        // An error one element absorbs, as `all` and `exists` absorb it.
        ("[0, 1].exists(i, v, 1 / v > 0)", json!(true)),
    ]);
    assert!(
        error("{'a': 'x', 'b': 'x'}.transformMapEntry(k, v, {v: k})")
            .ends_with("insert failed: key x already exists")
    );
    assert!(error("[0, 1].all(i, v, 1 / v > 0)").contains("Division by zero"));
}

#[test]
fn two_variable_comprehensions_keep_the_order_of_maps() {
    // A map built by a comprehension walks its keys in the order it was built, as a
    // map of the object's (here decoded JSON) does.
    let source =
        r#"jsonDecode('{"z": 1, "a": 2, "m": 3}').transformMap(k, v, v).transformList(k, v, k)"#;
    for _ in 0..20 {
        assert_eq!(eval(source), Ok(json!(["z", "a", "m"])), "{source}");
    }
}

#[test]
fn two_variable_comprehension_errors_are_cel_go_s() {
    for (source, message) in [
        ("[1].all(i, i, true)", "duplicate variable name: i"),
        ("[1].all(i.j, v, true)", "argument must be a simple name"),
        (
            "[1].transformList(i, 1, v)",
            "argument must be a simple name",
        ),
    ] {
        let error = Expression::compile(source, &Declarations::NONE)
            .expect_err(source)
            .to_string();
        assert!(error.contains(message), "{source}: {error}");
    }
}

#[test]
fn the_lists_extension() {
    check(&[
        ("[1, [2, [3]]].flatten()", json!([1, 2, [3]])),
        ("[1, [2, [3]]].flatten(2)", json!([1, 2, 3])),
        ("[[1], [2]].flatten()", json!([1, 2])),
        ("[1, 2, 2, 1.0].distinct()", json!([1, 2])),
        ("[1, 2, 3].reverse()", json!([3, 2, 1])),
        ("'ab'.reverse()", json!("ba")),
        ("[3, 1, 2].sort()", json!([1, 2, 3])),
        ("['b', 'a'].sort()", json!(["a", "b"])),
        (
            "[{'n': 'b', 'p': 2}, {'n': 'a', 'p': 1}].sortBy(e, e.p).map(e, e.n)",
            json!(["a", "b"]),
        ),
        ("[3, 1, 2, 4, 5].sortBy(e, e % 2)", json!([2, 4, 3, 1, 5])),
        ("lists.range(4)", json!([0, 1, 2, 3])),
        ("lists.range(0)", json!([])),
        ("{'b': 1, 'a': 2}.map(k, k).sort()", json!(["a", "b"])),
        // graft's own slice, as it was.
        ("[1, 2, 3].slice(1, 2)", json!([2])),
    ]);
    for (source, message) in [
        ("[1, 'b'].sort()", "list elements must have the same type"),
        ("[[1], [2]].sort()", "list elements must be comparable"),
        ("lists.range(-1)", "size must be non-negative, got -1"),
        ("[1].flatten(-1)", "level must be non-negative"),
    ] {
        let error = error(source);
        assert!(error.ends_with(message), "{source}: {error}");
    }
}

#[test]
fn optional_values_version_two() {
    check(&[
        ("[1, 2, 3].first().value()", json!(1)),
        ("[1, 2, 3].last().value()", json!(3)),
        (
            "[].first().hasValue() || [].last().hasValue()",
            json!(false),
        ),
        (
            "optional.unwrap([optional.of(1), optional.none()])",
            json!([1]),
        ),
        (
            "[optional.of('a'), optional.none()].unwrapOpt()",
            json!(["a"]),
        ),
    ]);
}

#[test]
fn or_and_or_value_evaluate_their_argument_only_when_needed() {
    check(&[
        ("optional.of(1).orValue(1 / 0)", json!(1)),
        ("optional.of(1).or(optional.of(1 / 0)).value()", json!(1)),
        ("optional.none().orValue(2 * 3)", json!(6)),
        ("optional.none().or(optional.of(2 * 3)).value()", json!(6)),
        ("{'a': 1}.?a.orValue({'b': 2}.b)", json!(1)),
        ("{'a': 1}.?x.orValue([5].map(x, x)[0])", json!(5)),
        // Nested: each call binds its own receiver.
        (
            "optional.none().orValue(optional.none().orValue(optional.of(7).orValue(1 / 0)))",
            json!(7),
        ),
    ]);
    assert!(error("optional.none().orValue(1 / 0)").contains("Division by zero"));
}

#[test]
fn sign_is_a_function_as_kubernetes_declares_it() {
    check(&[("sign(quantity('-5')) + quantity('5').sign()", json!(0))]);
}

#[test]
fn binds_do_not_count_as_nested_comprehensions() {
    // Each is one comprehension over the list, wrapped in binds: within graft's limit of
    // two nested ones.
    for source in [
        "[[1]].all(i, l, l.all(j, v, v > 0))",
        "[[1]].all(l, l.transformList(j, v, v).sortBy(e, e).size() == 1)",
        "[1].all(x, {'a': 1}.?a.orValue(x + 1) == 1)",
    ] {
        assert_eq!(eval(source), Ok(json!(true)), "{source}");
    }
    let three = "[1].all(a, [1].all(b, [1].all(i, v, true)))";
    assert!(
        Expression::compile(three, &Declarations::NONE).is_err(),
        "{three}"
    );
}
