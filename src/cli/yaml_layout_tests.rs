use super::*;

/// The text of each node at `path` (keys, or indices as numbers).
fn at<'n>(node: &'n Node, path: &[&str]) -> &'n Node {
    let mut node = node;
    for step in path {
        node = match &node.kind {
            Kind::BlockMap { entries, .. } | Kind::FlowMap(entries) => {
                &entries
                    .iter()
                    .find(|entry| entry.key == *step)
                    .unwrap()
                    .value
            }
            Kind::BlockSeq { items, .. } => &items[step.parse::<usize>().unwrap()].value,
            Kind::FlowSeq(items) => &items[step.parse::<usize>().unwrap()],
            _ => panic!("{step}: not a collection"),
        };
    }
    node
}

fn text_at<'t>(text: &'t str, path: &[&str]) -> &'t str {
    let root = parse(text).unwrap();
    &text[at(&root, path).span.clone()]
}

#[test]
fn block_collections_and_their_scalars() {
    let text = "\
# a comment
a: 1   # trailing
b:
  - x
  - 'y z'  # c
  -   key: \"v\\\"w\"
      other: |
        line one

        line two
      next: plain
        continued
  -
    nested: true
c:
- indentless
d: >-
  folded
e:
f: {g: [1, 2], h: 'i, j'}
";
    assert_eq!(text_at(text, &["a"]), "1");
    assert_eq!(text_at(text, &["b", "0"]), "x");
    assert_eq!(text_at(text, &["b", "1"]), "'y z'");
    assert_eq!(text_at(text, &["b", "2", "key"]), "\"v\\\"w\"");
    assert_eq!(
        text_at(text, &["b", "2", "other"]),
        "|\n        line one\n\n        line two"
    );
    assert_eq!(
        text_at(text, &["b", "2", "next"]),
        "plain\n        continued"
    );
    assert_eq!(text_at(text, &["b", "3", "nested"]), "true");
    assert_eq!(text_at(text, &["c", "0"]), "indentless");
    assert_eq!(text_at(text, &["d"]), ">-\n  folded");
    assert_eq!(text_at(text, &["e"]), "");
    assert_eq!(text_at(text, &["f", "g", "1"]), "2");
    assert_eq!(text_at(text, &["f", "h"]), "'i, j'");
    let root = parse(text).unwrap();
    let Kind::BlockSeq { column, items } = &at(&root, &["b"]).kind else {
        panic!("b is a block sequence");
    };
    assert_eq!(*column, 2);
    assert_eq!(&text[items[2].dash..items[2].dash + 1], "-");
    let Kind::BlockMap { column, .. } = &at(&root, &["b", "2"]).kind else {
        panic!("b[2] is a block mapping");
    };
    assert_eq!(*column, 6);
}

#[test]
fn keys_are_read_as_a_reader_reads_them() {
    let text = "\"quoted: key\": 1\n'single': 2\nplain key: 3\n";
    let root = parse(text).unwrap();
    let Kind::BlockMap { entries, .. } = &root.kind else {
        panic!("a mapping");
    };
    let keys: Vec<&str> = entries.iter().map(|entry| entry.key.as_str()).collect();
    assert_eq!(keys, ["quoted: key", "single", "plain key"]);
}

#[test]
fn crlf_line_ends_are_not_part_of_a_node() {
    let text = "a:\r\n  - one\r\n  - 'two'\r\nb: {c: d}\r\n";
    assert_eq!(text_at(text, &["a", "0"]), "one");
    assert_eq!(text_at(text, &["a", "1"]), "'two'");
    assert_eq!(text_at(text, &["b", "c"]), "d");
}

#[test]
fn a_document_marker_and_anchors_are_read() {
    let text = "---\na: &x {b: 1}\nc: *x\nd: !!str 5\n...\n";
    assert_eq!(text_at(text, &["a", "b"]), "1");
    assert_eq!(text_at(text, &["c"]), "*x");
    assert_eq!(text_at(text, &["d"]), "!!str 5");
}

#[test]
fn what_is_not_read_is_an_error_naming_the_line() {
    for (text, line) in [
        ("a: 1\n? b\n: 2\n", 2),
        ("a: 1\n---\nb: 2\n", 2),
        ("a: [b: c]\n", 1),
        ("a: 'open\n", 1),
    ] {
        let error = parse(text).unwrap_err();
        assert_eq!(error.line, line, "{text:?}: {error}");
    }
}

#[test]
fn a_deeply_nested_text_is_an_error_not_a_stack_overflow() {
    let deep = format!("a: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    let error = parse(&deep).unwrap_err();
    assert!(error.what.contains("nested this deep"), "{error}");
    let deep = "- ".repeat(50_000) + "x\n";
    assert!(parse(&deep).is_err());
}
