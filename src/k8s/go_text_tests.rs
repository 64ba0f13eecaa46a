use serde_json::json;

use super::*;

#[test]
fn quote_writes_what_strconv_quote_writes() {
    for (input, quoted) in [
        ("abc", r#""abc""#),
        (r#"a"b\c"#, r#""a\"b\\c""#),
        ("\u{7}\u{8}\u{c}\n\r\t\u{b}", r#""\a\b\f\n\r\t\v""#),
        ("\u{1}\u{1f}\u{7f}", r#""\x01\x1f\x7f""#),
        ("héllo 世界", "\"héllo 世界\""),
        (
            "\u{a0}\u{ad}\u{200b}\u{2028}\u{feff}",
            r#""\u00a0\u00ad\u200b\u2028\ufeff""#,
        ),
        ("\u{e000}", r#""\ue000""#),
        ("\u{f0000}\u{e0001}", r#""\U000f0000\U000e0001""#),
        ("😀", "\"😀\""),
        ("", r#""""#),
    ] {
        assert_eq!(quote(input), quoted, "{input:?}");
    }
}

#[test]
fn floats_as_percent_v() {
    for (float, text) in [
        (1.0, "1"),
        (1.5, "1.5"),
        (-2.25, "-2.25"),
        (100000.0, "100000"),
        (1000000.0, "1e+06"),
        (1234567.0, "1.234567e+06"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (1.5e-10, "1.5e-10"),
        (1e21, "1e+21"),
        (1e100, "1e+100"),
        (0.0, "0"),
        (-0.0, "-0"),
    ] {
        assert_eq!(float_v(float), text, "{float}");
    }
}

#[test]
fn floats_as_encoding_json_writes_them() {
    for (float, text) in [
        (1.0, "1"),
        (1.5, "1.5"),
        (1000000.0, "1000000"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1.5e21, "1.5e+21"),
        (0.000001, "0.000001"),
        (1e-7, "1e-7"),
        (1.25e-7, "1.25e-7"),
        (1e-10, "1e-10"),
        (-1e-7, "-1e-7"),
        (0.0, "0"),
    ] {
        assert_eq!(float_json(float), text, "{float}");
    }
}

#[test]
fn numbers_are_int64_when_integers_that_fit() {
    let number = |v: serde_json::Value| match v {
        serde_json::Value::Number(n) => GoNumber::of(&n),
        _ => unreachable!(),
    };
    assert_eq!(number(json!(3)), GoNumber::Int(3));
    assert_eq!(number(json!(-3)), GoNumber::Int(-3));
    assert_eq!(number(json!(3.0)), GoNumber::Float(3.0));
    assert_eq!(number(json!(u64::MAX)), GoNumber::Float(u64::MAX as f64));
    assert_eq!(GoNumber::Float(3.0).to_json(), "3");
    assert_eq!(GoNumber::Int(-7).to_go_v(), "-7");
}

#[test]
fn unstructured_values_as_fmt_prints_them() {
    let value = Tree::from(json!({"b": [1, "x", null, true], "a": {"c": 1.5}}));
    assert_eq!(value_v(&value), "&{map[a:map[c:1.5] b:[1 x <nil> true]]}");
    assert_eq!(
        value_sharp_v(&value),
        r#"&value.valueUnstructured{Value:map[string]interface {}{"a":map[string]interface {}{"c":1.5}, "b":[]interface {}{1, "x", interface {}(nil), true}}}"#
    );
    assert_eq!(value_v(&Tree::from(json!("s"))), "&{s}");
    assert_eq!(
        value_sharp_v(&Tree::from(json!(2))),
        "&value.valueUnstructured{Value:2}"
    );
    assert_eq!(
        value_sharp_v(&Tree::from(json!("s"))),
        r#"&value.valueUnstructured{Value:"s"}"#
    );
    for (value, name) in [
        (json!("s"), "string"),
        (json!(1), "int64"),
        (json!(1.5), "float64"),
        (json!(true), "bool"),
        (json!({}), "map[string]interface {}"),
        (json!([]), "[]interface {}"),
        (json!(null), "<nil>"),
    ] {
        assert_eq!(type_name(&Tree::from(&value)), name, "{value}");
    }
}

#[test]
fn json_string_lengths_count_go_escapes() {
    for (s, len) in [
        ("", 2),
        ("abc", 5),
        ("a\"b", 6),
        ("\n\t", 6),
        ("\u{1}", 8),
        ("<&>", 20),
        ("é", 4),
        ("\u{2028}", 8),
    ] {
        assert_eq!(json_string_len(s), len, "{s:?}");
    }
}
