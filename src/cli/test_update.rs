//! `graft test --update`: sets the `expect` block of each failing case to what the
//! policies now do, editing the suite's text in place: only what differs between the old
//! and the new expectation is rewritten (a changed word in a patch is one changed line),
//! and the rest of the file (other cases, comments, flow style, indentation, line ends)
//! stays byte for byte as the team wrote it. A team that edits the shipped example
//! policies refreshes their golden output with one command and reviews a small diff.
//!
//! The new expectation keeps the old one's shape: a case that checked `patch` gets the
//! new patch, one that checked `object` (or `objectFile`, rewritten in place) the new
//! object, `applied` and `warnings` the new lists; an outcome that changed kind (allowed
//! to denied, or back) says the new kind. A case with no `expect` gets one: the patch,
//! `unchanged: true` or the denial, and the warnings.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::test::Expect;
use super::yaml_edit::{self, Editor, Place};
use super::yaml_layout::{self, Kind, Node};
use super::yaml_out;

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

/// A case's new expectation.
#[derive(Debug, Clone)]
pub struct NewExpect {
    pub expect: Map<String, Value>,
    /// The `objectFile` the expectation names (relative to the suite), and the object it
    /// must now hold. Written only by `--update`: a plain `graft test` that rewrote it
    /// would pass on its next run whatever the policies did.
    pub object_file: Option<(PathBuf, Value)>,
}

/// The expectation `actual` meets, in the shape of `old` (`None`: the case has none).
pub fn new_expect(old: Option<&Expect>, actual: &Actual) -> NewExpect {
    let Some(old) = old else {
        return NewExpect {
            expect: first_expect(actual),
            object_file: None,
        };
    };
    let mut object_file = None;
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
                object_file = Some((file.clone(), actual.object.clone()));
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
    NewExpect {
        expect,
        object_file,
    }
}

/// The expectation of a case that had none: the denial, the patch, or no change, and
/// the warnings (a policy that failed under `failurePolicy: Ignore` says so in one).
fn first_expect(actual: &Actual) -> Map<String, Value> {
    let mut expect = Map::new();
    match &actual.denied {
        Some(message) => {
            expect.insert("denied".into(), Value::from(message.clone()));
        }
        None if actual.patch.as_array().is_none_or(Vec::is_empty) => {
            expect.insert("unchanged".into(), Value::Bool(true));
        }
        None => {
            expect.insert("patch".into(), actual.patch.clone());
        }
    }
    if !actual.warnings.is_empty() {
        expect.insert("warnings".into(), Value::from(actual.warnings.clone()));
    }
    expect
}

/// The text of an `objectFile` (at `path`) that holds `object`: a YAML file edited in
/// place where only what differs changes, as a suite is; a JSON file, or a YAML one
/// that cannot be edited so, written anew.
pub fn object_file_text(path: &Path, object: &Value) -> anyhow::Result<String> {
    if path.extension().is_some_and(|ext| ext == "json") {
        let mut text = serde_json::to_string_pretty(object)?;
        text.push('\n');
        return Ok(text);
    }
    let old_text = std::fs::read_to_string(path).unwrap_or_default();
    let edited = serde_yaml::from_str::<Value>(&old_text)
        .ok()
        .and_then(|old| yaml_edit::rewrite_document(&old_text, &old, object).ok());
    match edited {
        Some(text) => Ok(text),
        None => Ok(yaml_out::to_string(object)?),
    }
}

/// A case's new expectation: the case's name, and its new `expect`.
pub type Update = (String, Map<String, Value>);

/// `text` with the `expect` of each case in `updates` set to its new expectation, and
/// every other byte as it was. The edited text is read back and must be the suite with
/// exactly those expectations changed; if not, nothing is written and the error says
/// why.
pub fn rewrite(text: &str, updates: &[Update]) -> Result<String, String> {
    let suite: Value = serde_yaml::from_str(text).map_err(|error| error.to_string())?;
    let root = yaml_layout::parse(text).map_err(|error| {
        format!("--update cannot edit this file in place: its YAML is not read at {error}; the file is left as it was")
    })?;
    let cases = suite
        .pointer("/spec/cases")
        .and_then(Value::as_array)
        .ok_or("the suite has no spec.cases list")?;
    let items = case_nodes(&root).filter(|items| items.len() == cases.len()).ok_or(
        "--update cannot find where spec.cases is written in the file; the file is left as it was",
    )?;
    let mut editor = Editor::new(text, &root);
    for (case, expect) in updates {
        let index = cases
            .iter()
            .position(|item| item.get("name") == Some(&Value::from(case.as_str())))
            .ok_or_else(|| format!("case {case:?} not found in the text"))?;
        let item = items[index];
        let new = Value::Object(expect.clone());
        let edited = match (item.entry("expect"), cases[index].get("expect")) {
            (Some(entry), Some(old)) => {
                let place = match item.kind {
                    Kind::BlockMap { column, .. } => Place::Value {
                        key_column: column,
                        colon_end: entry.colon_end,
                    },
                    _ => Place::Flow,
                };
                editor.change(&entry.value, place, old, &new)
            }
            (None, None) => editor.add_entry(item, "expect", &new),
            _ => {
                return Err(format!(
                    "case {case:?}: its expect block was not found in the text"
                ));
            }
        };
        edited.map_err(|error| {
            format!("case {case:?}: its expect block cannot be edited in place: {error}")
        })?;
    }
    let after = editor.finish().map_err(|error| error.to_string())?;
    check_rewrite(text, &after, updates)?;
    Ok(after)
}

/// The nodes of the suite's `spec.cases` items.
fn case_nodes(root: &Node) -> Option<Vec<&Node>> {
    let cases = &root.entry("spec")?.value.entry("cases")?.value;
    match &cases.kind {
        Kind::BlockSeq { items, .. } => Some(items.iter().map(|item| &item.value).collect()),
        Kind::FlowSeq(items) => Some(items.iter().collect()),
        _ => None,
    }
}

/// The rewrite is an edit of text, so it is checked on the parsed documents: the same
/// suite with only these cases' expectations changed, and to `updates`. An edit that
/// touched anything else is refused rather than written.
fn check_rewrite(before: &str, after: &str, updates: &[Update]) -> Result<(), String> {
    let parse = |text: &str| serde_yaml::from_str::<Value>(text).map_err(|error| error.to_string());
    let mut wanted = parse(before)?;
    if let Some(cases) = wanted
        .pointer_mut("/spec/cases")
        .and_then(Value::as_array_mut)
    {
        for (case, expect) in updates {
            for item in cases.iter_mut() {
                if item.get("name") == Some(&Value::from(case.as_str()))
                    && let Some(item) = item.as_object_mut()
                {
                    item.insert("expect".into(), Value::Object(expect.clone()));
                }
            }
        }
    }
    let rewritten = parse(after).map_err(|error| {
        format!("rewriting the expectations would leave the suite unreadable ({error}); the file is left as it was")
    })?;
    if rewritten != wanted {
        return Err(
            "rewriting the expectations would change more than their expect blocks; the file is left as it was"
                .into(),
        );
    }
    Ok(())
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

    fn update(case: &str, expect: Value) -> Update {
        (case.to_string(), expect.as_object().cloned().unwrap())
    }

    #[test]
    fn only_what_differs_in_the_named_cases_expectation_changes() {
        let patch = update(
            "first",
            json!({"patch": [{"op": "add", "path": "/b", "value": 2}]}),
        );
        assert_eq!(
            rewrite(SUITE, std::slice::from_ref(&patch)).unwrap(),
            SUITE.replace(
                "{op: add, path: /a, value: 1}",
                "{op: add, path: /b, value: 2}"
            )
        );
        let denied = update("second: quoted", json!({"denied": "no"}));
        assert_eq!(
            rewrite(SUITE, std::slice::from_ref(&denied)).unwrap(),
            SUITE.replace("expect: {unchanged: true}", "expect: {denied: \"no\"}")
        );
        // Both at once.
        assert_eq!(
            rewrite(SUITE, &[patch.clone(), denied]).unwrap(),
            SUITE
                .replace(
                    "{op: add, path: /a, value: 1}",
                    "{op: add, path: /b, value: 2}"
                )
                .replace("expect: {unchanged: true}", "expect: {denied: \"no\"}")
        );
        let error = rewrite(SUITE, &[update("third", json!({"unchanged": true}))]).unwrap_err();
        assert!(error.contains("case \"third\" not found"), "{error}");
    }

    #[test]
    fn a_case_without_an_expectation_gets_one_after_its_last_key() {
        let block = SUITE.replace(
            "      expect:\n        # old comment inside the block\n        patch:\n          - {op: add, path: /a, value: 1}\n",
            "",
        );
        let updated = rewrite(&block, &[update("first", json!({"unchanged": true}))]).unwrap();
        assert_eq!(
            updated,
            SUITE.replace(
                "      expect:\n        # old comment inside the block\n        patch:\n          - {op: add, path: /a, value: 1}\n",
                "      expect:\n        unchanged: true\n",
            )
        );
        let flow = SUITE.replace(
            "    - name: \"second: quoted\"\n      expect: {unchanged: true}\n      object: {kind: Pod}\n",
            "    - {name: flow, object: {kind: Pod}}\n",
        );
        let updated = rewrite(&flow, &[update("flow", json!({"unchanged": true}))]).unwrap();
        assert!(
            updated
                .ends_with("    - {name: flow, object: {kind: Pod}, expect: {unchanged: true}}\n"),
            "{updated}"
        );
    }

    #[test]
    fn a_rewrite_that_is_not_exactly_the_named_cases_expectation_is_refused() {
        // Two items of one name: the edit finds the first only, and reading the result
        // back finds the second unchanged.
        let twice = SUITE.replace("\"second: quoted\"", "first");
        let error = rewrite(&twice, &[update("first", json!({"denied": "no"}))]).unwrap_err();
        assert!(
            error.contains("would change more than their expect blocks"),
            "{error}"
        );
        // A layout that is not read is named, and nothing is edited on a guess.
        let explicit = SUITE.replace("metadata:\n  name: s\n", "metadata:\n  ? name\n  : s\n");
        let error = rewrite(&explicit, &[update("first", json!({"unchanged": true}))]).unwrap_err();
        assert!(
            error.contains("cannot edit this file in place: its YAML is not read at line 4"),
            "{error}"
        );
    }

    /// Every suite the repository ships is read, and each of its cases' expectations can
    /// be rewritten in place, whatever layout its authors chose.
    #[test]
    fn every_shipped_suite_can_be_rewritten_case_by_case() {
        let mut files = Vec::new();
        let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/policies")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|ext| ext == "yaml") {
                    files.push(path);
                }
            }
        }
        let mut rewritten = 0;
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let Ok(suite) = serde_yaml::from_str::<Value>(&text) else {
                continue;
            };
            if suite.get("kind") != Some(&json!("PolicyTest")) {
                continue;
            }
            for (index, case) in suite["spec"]["cases"]
                .as_array()
                .unwrap()
                .iter()
                .enumerate()
            {
                let name = case["name"].as_str().unwrap();
                // Alternately a scalar and a list in place of each expectation.
                let expect = if index % 2 == 0 {
                    json!({"unchanged": true})
                } else {
                    json!({"patch": [{"op": "add", "path": "/a", "value": "it's [\"x\"]"}]})
                };
                rewrite(&text, &[update(name, expect)])
                    .unwrap_or_else(|error| panic!("{}: {name}: {error}", file.display()));
                rewritten += 1;
            }
        }
        assert!(rewritten > 50, "{rewritten}");
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
        assert_eq!(
            Value::Object(new_expect(Some(&old), &actual).expect),
            json!({"applied": ["p"], "patch": [{"op": "add", "path": "/a", "value": 1}]})
        );
        let old = Expect {
            object: Some(json!({})),
            warnings: vec!["x".into()],
            ..Expect::default()
        };
        assert_eq!(
            Value::Object(new_expect(Some(&old), &actual).expect),
            json!({"object": {"kind": "Pod", "a": 1}, "warnings": ["w"]})
        );
        let denied = Actual {
            denied: Some("graft: policy p: no".into()),
            ..actual
        };
        assert_eq!(
            Value::Object(new_expect(Some(&old), &denied).expect),
            json!({"denied": "graft: policy p: no", "warnings": ["w"]})
        );
        // A case that had none gets the outcome and the warnings.
        assert_eq!(
            Value::Object(new_expect(None, &denied).expect),
            json!({"denied": "graft: policy p: no", "warnings": ["w"]})
        );
        let unchanged = Actual {
            denied: None,
            patch: json!([]),
            warnings: vec![],
            ..denied.clone()
        };
        assert_eq!(
            Value::Object(new_expect(None, &unchanged).expect),
            json!({"unchanged": true})
        );
        let patched = Actual {
            patch: json!([{"op": "add", "path": "/a", "value": 1}]),
            ..unchanged
        };
        assert_eq!(
            Value::Object(new_expect(None, &patched).expect),
            json!({"patch": [{"op": "add", "path": "/a", "value": 1}]})
        );
    }
}
