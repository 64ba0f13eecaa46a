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
