//! Reading command inputs: a file path or `-` for standard input.

use std::io::Read;
use std::path::Path;

use anyhow::Context;

/// Reads a file, or standard input for `-`.
pub fn read_input(path: &Path) -> anyhow::Result<Vec<u8>> {
    if path.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .context("reading standard input")?;
        return Ok(bytes);
    }
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// Loads a policy set or explains why not, printing every finding.
pub fn load_policies(paths: &[std::path::PathBuf]) -> anyhow::Result<crate::policy::PolicySet> {
    match crate::policy::load(paths) {
        Ok(loaded) => {
            for warning in &loaded.warnings {
                eprintln!("{warning}");
            }
            Ok(loaded.set)
        }
        Err(findings) => {
            for finding in &findings.0 {
                eprintln!("{finding}");
            }
            anyhow::bail!(
                "the policy set has {} problem(s); run graft lint",
                findings.0.len()
            )
        }
    }
}

/// The namespace source of an offline command: the Namespace objects in `file`, or none
/// (a policy that needs namespace data then fails, saying to pass `--namespaces`).
/// `input` is the command's other input, which may not be standard input as well.
pub fn namespace_source(
    file: Option<&Path>,
    input: Option<&Path>,
) -> anyhow::Result<Box<dyn crate::namespaces::NamespaceSource>> {
    use crate::namespaces::{NamespaceMap, NoNamespaces, read_namespaces};
    let stdin = |path: Option<&Path>| path.is_some_and(|path| path.as_os_str() == "-");
    if stdin(file) && stdin(input) {
        anyhow::bail!(
            "--namespaces and the input cannot both be standard input (-): give one of them as a file"
        );
    }
    let Some(file) = file else {
        return Ok(Box::new(NoNamespaces {
            hint: "pass the Namespace objects with --namespaces FILE",
        }));
    };
    let text = String::from_utf8(read_input(file)?)
        .with_context(|| format!("{}: not UTF-8 text", file.display()))?;
    let namespaces = read_namespaces(&text)
        .with_context(|| format!("reading namespaces from {}", file.display()))?;
    Ok(Box::new(NamespaceMap::new(
        namespaces,
        "the --namespaces file",
    )))
}
