//! The committed JSON Schema is exactly what `graft schema` generates from the model.

use crate::support::cli::{graft, success_stdout};
use crate::support::repo;
use std::process::Command;

fn generated() -> String {
    success_stdout(graft(&repo(), &["schema"]))
}

#[test]
fn committed_schema_is_current() {
    let committed = std::fs::read_to_string(repo().join("schema/mutationpolicy.schema.json"))
        .expect("schema/mutationpolicy.schema.json");
    assert!(
        generated() == committed,
        "schema/mutationpolicy.schema.json is stale; regenerate it with\n  \
         graft schema --out schema/mutationpolicy.schema.json"
    );
}

#[test]
fn schema_is_2020_12_with_id_and_title() {
    let schema: serde_json::Value = serde_json::from_str(&generated()).expect("JSON");
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(
        schema["$id"],
        "https://graft.dev/schema/mutationpolicy.schema.json"
    );
    assert_eq!(schema["title"], "MutationPolicy");
    // The document's own shape, not an empty schema.
    let required: Vec<&str> = schema["required"]
        .as_array()
        .expect("required")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    for field in ["apiVersion", "kind", "metadata", "spec"] {
        assert!(required.contains(&field), "{field} is required");
    }
    assert_eq!(schema["additionalProperties"], false);
}

#[test]
fn out_writes_the_same_text() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let out = scratch.path().join("schema.json");
    let status = Command::new(env!("CARGO_BIN_EXE_graft"))
        .args(["schema", "--out"])
        .arg(&out)
        .status()
        .expect("run graft schema --out");
    assert!(status.success());
    assert_eq!(std::fs::read_to_string(out).expect("read"), generated());
}
