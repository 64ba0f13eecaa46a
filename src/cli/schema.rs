//! `graft schema`: the JSON Schema (draft 2020-12) of a MutationPolicy document.
//!
//! Generated from [`PolicyDocument`] so the schema can never drift from what the loader
//! accepts; `schema/mutationpolicy.schema.json` is this output, committed for editors
//! (`# yaml-language-server: $schema=...`), and a test keeps the two equal.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::policy::model::PolicyDocument;

/// The schema's `$id`: where the committed file is published.
pub const SCHEMA_ID: &str = "https://graft.dev/schema/mutationpolicy.schema.json";

/// Print the JSON Schema (2020-12) of MutationPolicy, for editors and CI.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  graft schema --out schema/mutationpolicy.schema.json")]
pub struct Args {
    /// Write the schema to this file instead of stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let text = schema_text()?;
    match args.out {
        Some(path) => std::fs::write(&path, text)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => super::stdout::print(text)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The schema as a JSON value, with `$id` and `title` set.
pub fn policy_schema() -> serde_json::Value {
    let mut schema = schemars::schema_for!(PolicyDocument).to_value();
    if let Some(object) = schema.as_object_mut() {
        // `$schema` first, then `$id`, as people expect to read them.
        let rest = std::mem::take(object);
        let mut ordered = serde_json::Map::new();
        if let Some(dialect) = rest.get("$schema") {
            ordered.insert("$schema".to_string(), dialect.clone());
        }
        ordered.insert("$id".to_string(), SCHEMA_ID.into());
        ordered.insert("title".to_string(), "MutationPolicy".into());
        for (key, value) in rest {
            ordered.entry(key).or_insert(value);
        }
        *object = ordered;
    }
    schema
}

/// The schema as pretty JSON with a trailing newline, exactly as committed.
pub fn schema_text() -> anyhow::Result<String> {
    let mut text = serde_json::to_string_pretty(&policy_schema())?;
    text.push('\n');
    Ok(text)
}
