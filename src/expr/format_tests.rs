//! `format` as cel-go's first formatter reads its clauses, through compiled expressions.

use serde_json::json;

use super::super::evaluate_unbound as eval;

#[test]
fn clauses_read_as_cel_go_reads_them() {
    for (source, expected) in [
        ("'%s-%d'.format(['web', 42])", "web-42"),
        ("'%.2f'.format([3.14159])", "3.14"),
        ("'%f'.format([1234567.891])", "1,234,567.891000"),
        ("'%x|%o|%b'.format([255, 8, 5])", "ff|10|101"),
        ("'%X'.format(['hi'])", "6869"),
        ("'%x'.format([-255])", "-ff"),
        ("'%b'.format([true])", "1"),
        ("'%e'.format([1200.0])", "1.200000×10⁰³"),
        ("'%e'.format([-0.00012])", "-1.200000×10⁻⁰⁴"),
        ("'%.20e'.format([1.0])", "       1.000000×10⁰⁰"),
        (
            "'%s'.format([[1, 'a', 2.5, b'b', null]])",
            "[1, \"a\", 2.500000, b\"b\", null]",
        ),
        (
            "'%s'.format([{'k': 'v', 'a': [true]}])",
            "{\"a\":[true], \"k\":\"v\"}",
        ),
        ("'%s'.format([123456789.0])", "1.23456789e+08"),
        ("'%s'.format([1.5])", "1.5"),
        ("'%s'.format([duration('90s')])", "90s"),
        ("'%s'.format([[duration('1.5s')]])", "[duration(\"1.5s\")]"),
        (
            "'%s'.format([timestamp('2024-01-02T03:04:05.120+02:00')])",
            "2024-01-02T03:04:05.12+02:00",
        ),
        ("'%s %s'.format([type(1), null])", "int null"),
        ("'%d%%'.format([5])", "5%"),
        ("'%.3s'.format(['abcdef'])", "abcdef"),
        ("'%f'.format(['NaN'])", "NaN"),
    ] {
        assert_eq!(eval(source), Ok(json!(expected)), "{source}");
    }
}

#[test]
fn mismatches_are_cel_go_errors() {
    for (source, expected) in [
        (
            "'%d'.format([1.0])",
            "error during formatting: decimal clause can only be used on integers, was \
             given double",
        ),
        (
            "'%f'.format([1])",
            "error during formatting: fixed-point clause can only be used on doubles, was \
             given int",
        ),
        ("'%s %s'.format(['a'])", "index 1 out of range"),
        (
            "'%q'.format(['a'])",
            "could not parse formatting clause: unrecognized formatting clause \"q\"",
        ),
        ("'%'.format(['a'])", "unexpected end of string"),
        (
            "'%s'.format([optional.of(1)])",
            "error during formatting: string clause can only be used on strings, bools, \
             bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given \
             optional_type",
        ),
        (
            "'%s'.format([[optional.of(1)]])",
            "error during formatting: no formatting function for optional_type",
        ),
    ] {
        let error = eval(source).expect_err(source).to_string();
        assert_eq!(
            error,
            format!("Error executing function 'format': {expected}"),
            "{source}"
        );
    }
}
