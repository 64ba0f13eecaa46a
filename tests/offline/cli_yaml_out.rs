//! `graft apply -o yaml` read back by kubectl, whose YAML reader (sigs.k8s.io/yaml over
//! go-yaml v2) resolves plain scalars by YAML 1.1: what it reads must be what `-o json`
//! prints. Needs `kubectl` on PATH; `kubectl label --local` reads a file without a cluster.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use crate::support::repo;
use serde_json::{Map, Value, json};

const POLICIES: &str = "tests/fixtures/policies/";

fn run(program: &str, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(program)
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| {
            panic!("cannot run {program}: {error}; these tests need it on PATH")
        });
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).unwrap();
    drop(input);
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn graft_apply(output: &str, object: &[u8]) -> Vec<u8> {
    run(
        env!("CARGO_BIN_EXE_graft"),
        &["apply", "--policies", POLICIES, "-o", output, "-"],
        object,
    )
    .stdout
}

/// The object kubectl reads from `yaml`, without the label `kubectl label` needs to add.
fn kubectl_reads(yaml: &[u8]) -> Value {
    let output = run(
        "kubectl",
        &[
            "label",
            "--local",
            "-f",
            "-",
            "-o",
            "json",
            "graft-yaml-probe=1",
        ],
        yaml,
    );
    let mut object: Value = serde_json::from_slice(&output.stdout).unwrap();
    let metadata = object["metadata"].as_object_mut().unwrap();
    let labels = metadata["labels"].as_object_mut().unwrap();
    labels.remove("graft-yaml-probe");
    if labels.is_empty() {
        metadata.remove("labels");
    }
    object
}

/// `object` through `graft apply -o yaml` and kubectl equals it through `-o json`.
fn assert_kubectl_reads_what_graft_wrote(object: &[u8]) -> String {
    let yaml = graft_apply("yaml", object);
    let expected: Value = serde_json::from_slice(&graft_apply("json", object)).unwrap();
    let text = String::from_utf8(yaml.clone()).unwrap();
    assert_eq!(kubectl_reads(&yaml), expected, "kubectl read\n{text}");
    text
}

#[test]
fn the_reported_pod_keeps_its_strings() {
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n  annotations: {count: \"1_000\"}\nspec:\n  containers:\n  - name: c\n    image: nginx\n    env: [{value: \"<b>\", name: \"on\"}]\n";
    let text = assert_kubectl_reads_what_graft_wrote(pod.as_bytes());
    assert!(text.contains("count: \"1_000\"\n"), "{text}");
    assert!(text.contains("name: \"on\"\n"), "{text}");
}

/// Strings YAML 1.1 or 1.2 reads as another type when plain, strings that need quoting
/// for their syntax, and ordinary ones.
const STRINGS: &[&str] = &[
    "y",
    "Y",
    "yes",
    "YES",
    "yEs",
    "n",
    "N",
    "no",
    "No",
    "on",
    "On",
    "ON",
    "off",
    "OFF",
    "true",
    "True",
    "false",
    "FALSE",
    "~",
    "null",
    "Null",
    "NULL",
    "",
    "0",
    "1",
    "+1",
    "-1",
    "08",
    "017",
    "1_000",
    "1__0",
    "-1_000",
    "0b1010",
    "0B11",
    "-0b1010",
    "0o17",
    "0O17",
    "0x1F",
    "0X1f",
    "0x_ff",
    "1.5",
    "1.",
    ".5",
    "1e3",
    "1E3",
    "1e+3",
    "1.5e-3",
    "1_000.5",
    "1e_3",
    ".",
    "1.2.3",
    "...",
    ".inf",
    "+.inf",
    "-.Inf",
    ".nan",
    ".NaN",
    "+Inf",
    "-infinity",
    "1:20",
    "190:20:30.15",
    "2001-12-14",
    "2001-12-14t21:59:43.10-05:00",
    "2001-12-14 21:59:43.10 -5",
    "<<",
    "=",
    "-",
    "- a",
    "--- a",
    "?",
    "? a",
    ":",
    ":a",
    "[a]",
    "{a}",
    "#a",
    "&a",
    "*a",
    "!a",
    "|",
    "|a",
    ">",
    ">a",
    "'a",
    "\"a",
    "%a",
    "@a",
    "`a",
    "a #b",
    "a: b",
    "a:",
    " a",
    "a ",
    "\ta",
    "a\tb",
    "a\rb",
    "a\u{1}b",
    "a\u{7F}b",
    "a\u{85}b",
    "a\u{2028}b",
    "\u{FEFF}a",
    "a\\b",
    "nginx:1.25.3",
    "http://example.com/a#b",
    "128Mi",
    "500m",
    "v1.2.3",
    ".dockerconfigjson",
    "<b>",
    "a>",
    "a|",
    "a#b",
    "a:b",
    "a,b",
    "a[0]",
    "a-b",
    "a b",
    "yess",
    "nulls",
    "0xg",
    "1-2",
    "1e",
    "_1",
    "日本",
    "café",
    "😀",
    "line\nbreak",
    "final\nnewline\n",
    "two final\nnewlines\n\n",
    " leading\nspace",
    "\nleading newline",
    "trailing \nspace",
    "crlf\r\nline",
    "set -e\n  on\n\n1_000",
];

#[test]
fn every_kind_of_string_keeps_its_type_as_a_value_a_key_and_an_item() {
    let mut data = Map::new();
    for (index, text) in STRINGS.iter().enumerate() {
        data.insert(format!("value-{index}"), json!(text));
        data.insert((*text).to_owned(), json!(index.to_string()));
    }
    let long_key = "k".repeat(200);
    let config_map = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "strings", "annotations": {"on": "off", "count": "1_000"}},
        "data": data,
        "extra": {
            "items": STRINGS,
            "nested": [[STRINGS[0], ["1_000", {"on": "0x1F"}]], {}, [], {"a": {"b": []}}],
            "scalars": [1, -2, 1.5, 1e300, true, false, null],
            &long_key: {"list": ["on", {&long_key: "off"}]},
        },
    });
    assert_kubectl_reads_what_graft_wrote(escaped_json(&config_map).as_bytes());
}

/// `value` as JSON with the characters a YAML reader refuses raw escaped: graft reads its
/// input as YAML, whose double-quoted strings take JSON's `\u` escapes.
fn escaped_json(value: &Value) -> String {
    serde_json::to_string(value)
        .unwrap()
        .chars()
        .map(|c| match c {
            '\u{7F}'..='\u{9F}' | '\u{2028}' | '\u{2029}' | '\u{FEFF}' => {
                format!("\\u{:04X}", u32::from(c))
            }
            c => c.to_string(),
        })
        .collect()
}
