//! `graft test --update`: rewrites the `expect` block of each failing case to what the
//! policies now do, in place in the suite's text, so the rest of the file (other cases,
//! comments, layout) stays as the team wrote it. A team that edits the shipped example
//! policies refreshes their golden output with one command and reviews the diff.
//!
//! The new block keeps the old one's shape: a case that checked `patch` gets the new
//! patch, one that checked `object` (or `objectFile`, rewritten in place) the new object,
//! `applied` and `warnings` the new lists; an outcome that changed kind (allowed to
//! denied, or back) says the new kind.

use std::path::Path;

use anyhow::Context;
use serde_json::{Map, Value};

use super::test::Expect;

/// What a case's request actually gave.
#[derive(Debug, Clone)]
pub struct Actual {
    /// The denial message, when the request was denied.
    pub denied: Option<String>,
    /// The object after the policies (the original when nothing changed).
    pub object: Value,
    pub patch: Value,
    pub applied: Vec<String>,
    pub warnings: Vec<String>,
}

/// The expectation `actual` meets, in the shape of `old`. An `objectFile` is rewritten
/// with the new object (`base` is the suite's directory).
pub fn new_expect(
    old: &Expect,
    actual: &Actual,
    base: &Path,
) -> anyhow::Result<Map<String, Value>> {
    let mut expect = Map::new();
    if old.applied.is_some() {
        expect.insert("applied".into(), Value::from(actual.applied.clone()));
    }
    match &actual.denied {
        Some(message) => {
            expect.insert("denied".into(), Value::from(message.clone()));
        }
        None => {
            let patch_empty = actual.patch.as_array().is_none_or(Vec::is_empty);
            if old.unchanged && patch_empty {
                expect.insert("unchanged".into(), Value::Bool(true));
            }
            if old.object.is_some() {
                expect.insert("object".into(), actual.object.clone());
            }
            if let Some(file) = &old.object_file {
                write_object(&base.join(file), &actual.object)?;
                expect.insert("objectFile".into(), Value::from(file.display().to_string()));
            }
            let had_object = old.object.is_some() || old.object_file.is_some();
            if old.patch.is_some() || (!had_object && !patch_empty) {
                expect.insert("patch".into(), actual.patch.clone());
            } else if expect.is_empty() && patch_empty {
                expect.insert("unchanged".into(), Value::Bool(true));
            }
        }
    }
    if !old.warnings.is_empty() {
        expect.insert("warnings".into(), Value::from(actual.warnings.clone()));
    }
    Ok(expect)
}

fn write_object(path: &Path, object: &Value) -> anyhow::Result<()> {
    let text = if path.extension().is_some_and(|ext| ext == "json") {
        let mut text = serde_json::to_string_pretty(object)?;
        text.push('\n');
        text
    } else {
        serde_yaml::to_string(object)?
    };
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// `text` with the `expect` block of the case named `case` replaced by `expect`.
pub fn replace_expect(
    text: &str,
    case: &str,
    expect: &Map<String, Value>,
) -> Result<String, String> {
    let lines: Vec<&str> = text.lines().collect();
    let (item_start, item_end, key_indent) =
        find_case(&lines, case).ok_or_else(|| not_found(text, case))?;
    let expect_line = (item_start..item_end)
        .find(|&at| {
            let line = lines[at];
            let content = line.trim_start().trim_start_matches("- ");
            indent_of(line, at == item_start) == key_indent && content.starts_with("expect:")
        })
        .ok_or_else(|| format!("case {case:?} has no expect block at its own indentation"))?;
    // The block: the expect line and what is indented below it; trailing blank and
    // comment lines belong to what follows.
    let mut end = expect_line + 1;
    let mut last = expect_line + 1;
    while end < item_end {
        let line = lines[end];
        let content = line.trim();
        if !content.is_empty() && !content.starts_with('#') {
            if indent_of(line, false) <= key_indent {
                break;
            }
            last = end + 1;
        }
        end += 1;
    }
    let prefix =
        &lines[expect_line][..lines[expect_line].len() - lines[expect_line].trim_start().len()];
    let dash = if lines[expect_line].trim_start().starts_with("- ") {
        "- "
    } else {
        ""
    };
    let rendered =
        serde_yaml::to_string(&Value::Object(expect.clone())).map_err(|error| error.to_string())?;
    let inner = " ".repeat(key_indent + 2);
    let mut out: Vec<String> = lines[..expect_line].iter().map(|l| l.to_string()).collect();
    out.push(format!("{prefix}{dash}expect:"));
    out.extend(rendered.lines().map(|line| format!("{inner}{line}")));
    out.extend(lines[last..].iter().map(|l| l.to_string()));
    let mut joined = out.join("\n");
    if text.ends_with('\n') {
        joined.push('\n');
    }
    check_rewrite(text, &joined, case, expect)?;
    Ok(joined)
}

/// Why the case's block-style item was not found: the case exists but is written in
/// another style, or it is not there.
fn not_found(text: &str, case: &str) -> String {
    let written = parsed_cases(text).is_ok_and(|cases| {
        cases
            .iter()
            .any(|item| item.get("name") == Some(&Value::from(case)))
    });
    if written {
        format!(
            "case {case:?} is not written in block style, so --update cannot rewrite its expect block in place \
             (a flow-style case, `- {{name: ..., expect: {{...}}}}`, would have to be rewritten whole, \
             losing its layout); write it as a block item, `- name: ...` with `object:` and `expect:` \
             on lines of their own, and run --update again"
        )
    } else {
        format!("case {case:?} not found in the text")
    }
}

/// The rewrite is an edit of lines, so it is checked on the parsed documents: the same
/// suite with only this case's expectation changed, and to `expect`. An edit that
/// touched anything else (a case the line scan took for this one) is refused rather
/// than written.
fn check_rewrite(
    before: &str,
    after: &str,
    case: &str,
    expect: &Map<String, Value>,
) -> Result<(), String> {
    let parse = |text: &str| serde_yaml::from_str::<Value>(text).map_err(|error| error.to_string());
    let mut wanted = parse(before)?;
    let mut matched = 0;
    if let Some(cases) = wanted
        .pointer_mut("/spec/cases")
        .and_then(Value::as_array_mut)
    {
        for item in cases {
            if item.get("name") == Some(&Value::from(case))
                && let Some(item) = item.as_object_mut()
            {
                item.insert("expect".into(), Value::Object(expect.clone()));
                matched += 1;
            }
        }
    }
    let rewritten = parse(after).map_err(|error| {
        format!("rewriting case {case:?} would leave the suite unreadable ({error}); the file is left as it was")
    })?;
    if matched != 1 || rewritten != wanted {
        return Err(format!(
            "rewriting case {case:?} would change more than its expect block; the file is left as it was"
        ));
    }
    Ok(())
}

/// The items of the suite's `spec.cases`, parsed.
fn parsed_cases(text: &str) -> Result<Vec<Value>, String> {
    let suite = serde_yaml::from_str::<Value>(text).map_err(|error| error.to_string())?;
    Ok(suite
        .pointer("/spec/cases")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default())
}

/// The column where a line's key starts: after its indentation, and after `- ` on the
/// first line of a list item.
fn indent_of(line: &str, item_line: bool) -> usize {
    let spaces = line.len() - line.trim_start().len();
    if item_line && line.trim_start().starts_with("- ") {
        spaces + 2
    } else {
        spaces
    }
}

/// The line range of the `cases` item named `case`, and the column of its keys.
fn find_case(lines: &[&str], case: &str) -> Option<(usize, usize, usize)> {
    let cases = lines
        .iter()
        .position(|line| line.trim_start().starts_with("cases:"))?;
    let cases_indent = indent_of(lines[cases], false);
    let mut items = Vec::new();
    let mut end = lines.len();
    for (at, line) in lines.iter().enumerate().skip(cases + 1) {
        let content = line.trim();
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        let indent = indent_of(line, false);
        if indent <= cases_indent && !(indent == cases_indent && content.starts_with("- ")) {
            end = at;
            break;
        }
        if content.starts_with("- ") && items.first().is_none_or(|&(_, first)| indent == first) {
            items.push((at, indent));
        }
    }
    for (index, &(start, dash)) in items.iter().enumerate() {
        let item_end = items.get(index + 1).map_or(end, |&(next, _)| next);
        let key_indent = dash + 2;
        let named = (start..item_end).any(|at| {
            let line = lines[at];
            indent_of(line, at == start) == key_indent
                && line
                    .trim_start()
                    .trim_start_matches("- ")
                    .strip_prefix("name:")
                    .and_then(|value| serde_yaml::from_str::<String>(value.trim()).ok())
                    .is_some_and(|name| name == case)
        });
        if named {
            return Some((start, item_end, key_indent));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const SUITE: &str = "\
apiVersion: graft.dev/v1alpha1
kind: PolicyTest
metadata:
  name: s
spec:
  policies: [p.yaml]
  cases:
    # The first case.
    - name: first
      object: {kind: Pod}
      expect:
        # old comment inside the block
        patch:
          - {op: add, path: /a, value: 1}

    # The second case keeps its comment.
    - name: \"second: quoted\"
      expect: {unchanged: true}
      object: {kind: Pod}
";

    fn map(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn only_the_expect_block_of_the_named_case_changes() {
        let patch = map(json!({"patch": [{"op": "add", "path": "/b", "value": 2}]}));
        let updated = replace_expect(SUITE, "first", &patch).unwrap();
        assert_eq!(
            updated,
            SUITE.replace(
                "      expect:\n        # old comment inside the block\n        patch:\n          - {op: add, path: /a, value: 1}\n",
                "      expect:\n        patch:\n        - op: add\n          path: /b\n          value: 2\n"
            )
        );
        let updated =
            replace_expect(SUITE, "second: quoted", &map(json!({"denied": "no"}))).unwrap();
        assert!(
            updated.ends_with("    - name: \"second: quoted\"\n      expect:\n        denied: no\n      object: {kind: Pod}\n"),
            "{updated}"
        );
        assert!(updated.contains("    # The second case keeps its comment.\n"));
        assert!(replace_expect(SUITE, "third", &patch).is_err());
    }

    #[test]
    fn a_rewrite_that_is_not_exactly_the_named_cases_expectation_is_refused() {
        let patch = map(json!({"unchanged": true}));
        // Two items the line scan cannot tell apart: it finds the first only.
        let twice = SUITE.replace("\"second: quoted\"", "first");
        let error = replace_expect(&twice, "first", &patch).unwrap_err();
        assert!(
            error.contains("would change more than its expect block"),
            "{error}"
        );
        let flow = SUITE.replace(
            "    - name: first\n      object: {kind: Pod}\n      expect:\n        # old comment inside the block\n        patch:\n          - {op: add, path: /a, value: 1}\n",
            "    - {name: first, object: {kind: Pod}, expect: {unchanged: true}}\n",
        );
        assert_ne!(flow, SUITE);
        let error = replace_expect(&flow, "first", &patch).unwrap_err();
        assert!(error.contains("is not written in block style"), "{error}");
    }

    #[test]
    fn the_new_expectation_keeps_the_old_shape() {
        let actual = Actual {
            denied: None,
            object: json!({"kind": "Pod", "a": 1}),
            patch: json!([{"op": "add", "path": "/a", "value": 1}]),
            applied: vec!["p".into()],
            warnings: vec!["w".into()],
        };
        let old = Expect {
            unchanged: true,
            applied: Some(vec![]),
            ..Expect::default()
        };
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            Value::Object(new_expect(&old, &actual, dir.path()).unwrap()),
            json!({"applied": ["p"], "patch": [{"op": "add", "path": "/a", "value": 1}]})
        );
        let old = Expect {
            object: Some(json!({})),
            warnings: vec!["x".into()],
            ..Expect::default()
        };
        assert_eq!(
            Value::Object(new_expect(&old, &actual, dir.path()).unwrap()),
            json!({"object": {"kind": "Pod", "a": 1}, "warnings": ["w"]})
        );
        let denied = Actual {
            denied: Some("graft: policy p: no".into()),
            ..actual
        };
        assert_eq!(
            Value::Object(new_expect(&old, &denied, dir.path()).unwrap()),
            json!({"denied": "graft: policy p: no", "warnings": ["w"]})
        );
    }
}
