//! The Kubernetes list, set and regex libraries and the image helpers, through
//! compiled expressions: results as Kubernetes gives them, and errors (never panics)
//! for wrong input.

use serde_json::{Value, json};

use super::super::ExprError;

use super::super::evaluate_unbound as eval;

fn check(cases: &[(&str, Value)]) {
    for (source, expected) in cases {
        assert_eq!(eval(source), Ok(expected.clone()), "{source}");
    }
}

/// Each source fails to evaluate with an error holding the text.
fn check_err(cases: &[(&str, &str)]) {
    for (source, needle) in cases {
        match eval(source) {
            Err(ExprError::Evaluate(message)) => {
                assert!(message.contains(needle), "{source}: {message}")
            }
            other => panic!("{source}: {other:?}"),
        }
    }
}

#[test]
fn lists() {
    check(&[
        ("[1, 2, 2, 3].isSorted()", json!(true)),
        ("[3, 1].isSorted()", json!(false)),
        ("['a', 'b'].isSorted() && [].isSorted()", json!(true)),
        ("[1, 2, 3].sum()", json!(6)),
        ("[1.5, 2.5].sum()", json!(4.0)),
        ("[].sum()", json!(0)),
        ("[3, 1, 2].min()", json!(1)),
        ("[3, 1, 2].max()", json!(3)),
        ("['b', 'a'].min()", json!("a")),
        ("[1, 2, 1].indexOf(1)", json!(0)),
        ("[1, 2, 1].lastIndexOf(1)", json!(2)),
        ("[1, 2].indexOf(5) + [1, 2].lastIndexOf(5)", json!(-2)),
        ("[{'a': 1}].indexOf({'a': 1})", json!(0)),
        ("'abc'.indexOf('c')", json!(2)),
        ("[1, 2, 3, 4].slice(1, 3)", json!([2, 3])),
        ("[1, 2].slice(2, 2)", json!([])),
    ]);
    check_err(&[
        ("[1, 'a'].isSorted()", "cannot compare int with string"),
        ("[].min()", "min() called on an empty list"),
        ("[].max()", "max() called on an empty list"),
        ("['a', 'b'].sum()", "sum() adds numbers, got string"),
        ("[1, 2].slice(2, 1)", "cannot slice(2, 1) a list of 2"),
        ("[1, 2].slice(0, 3)", "cannot slice(0, 3)"),
        ("[1, 2].slice(-1, 1)", "cannot slice(-1, 1)"),
    ]);
}

#[test]
fn sets() {
    check(&[
        ("sets.contains([1, 2, 3], [1, 2])", json!(true)),
        ("sets.contains([1], [2])", json!(false)),
        ("sets.contains([], [])", json!(true)),
        ("sets.intersects([1, 2], [2, 3])", json!(true)),
        ("sets.intersects([1], [])", json!(false)),
        ("sets.equivalent([1, 2, 1], [2, 1])", json!(true)),
        ("sets.equivalent([1], [1, 2])", json!(false)),
    ]);
    check_err(&[("sets.contains('a', [1])", "no matching overload")]);
}

#[test]
fn regexes() {
    check(&[
        ("'abc 123'.find('[0-9]+')", json!("123")),
        ("'abc'.find('x')", json!("")),
        ("'a1b22c333'.findAll('[0-9]+')", json!(["1", "22", "333"])),
        ("'a1b22c333'.findAll('[0-9]+', 2)", json!(["1", "22"])),
        ("'a1b22c333'.findAll('[0-9]+', 0)", json!([])),
        (
            "'a1b22c333'.findAll('[0-9]+', -1)",
            json!(["1", "22", "333"]),
        ),
        (
            "'registry.io/app:v1'.regexReplace('^[^/]+/', 'mirror.io/')",
            json!("mirror.io/app:v1"),
        ),
        (
            r"'app:v1.2'.regexReplace(':v(\\d+)', ':version-${1}')",
            json!("app:version-1.2"),
        ),
    ]);
    check_err(&[
        ("'a'.find('(')", "invalid regex"),
        ("'a'.findAll('[')", "invalid regex"),
        ("'a'.regexReplace('(', '')", "invalid regex"),
        ("'a'.find(1)", "no matching overload"),
    ]);
}

#[test]
fn image_references() {
    check(&[
        (
            "parseImageReference('nginx')",
            json!({"registry": "docker.io", "repository": "library/nginx", "tag": "", "digest": ""}),
        ),
        ("parseImageReference('quay.io/org/app:v1').tag", json!("v1")),
        (
            "formatImageReference(parseImageReference('quay.io/org/app:v1'))",
            json!("quay.io/org/app:v1"),
        ),
        (
            "formatImageReference({'registry': 'r.io', 'repository': 'a'})",
            json!("r.io/a"),
        ),
        (
            "imageWithRegistry('nginx:1.25', 'mirror.io')",
            json!("mirror.io/library/nginx:1.25"),
        ),
        (
            "imageWithRegistry('nginx', 'mirror.io/' + parseImageReference('nginx').registry)",
            json!("mirror.io/docker.io/library/nginx"),
        ),
    ]);
    check_err(&[
        (
            "parseImageReference('Bad')",
            "invalid image reference: the repository is not",
        ),
        (
            "formatImageReference({'registry': 'r.io'})",
            "the map has no repository",
        ),
        (
            "formatImageReference({'registry': 'r.io', 'repository': 'a', 'tag': 1})",
            "tag must be a string",
        ),
        (
            "imageWithRegistry('nginx', 'bad host')",
            "invalid image reference",
        ),
    ]);
}

/// Every example in the CEL libraries table of docs/policies.md is true.
#[test]
fn the_documented_library_examples_hold() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/policies.md");
    let docs = std::fs::read_to_string(path).expect("docs/policies.md");
    let section = docs
        .split("### The CEL libraries")
        .nth(1)
        .expect("the CEL libraries section");
    let mut examples = 0;
    for row in section.lines().skip_while(|l| !l.starts_with("| strings")) {
        let Some(functions) = row.strip_prefix('|').and_then(|r| r.split('|').nth(1)) else {
            break;
        };
        for example in functions.split('`').skip(1).step_by(2) {
            examples += 1;
            assert_eq!(eval(example), Ok(json!(true)), "{example}");
        }
    }
    assert!(examples > 30, "only {examples} examples found");
}
