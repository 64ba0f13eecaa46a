//! `graft lint` (placeholder).

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("graft lint is not implemented yet")
}

// TEMPORARY (branch `server`): `graft serve --lint` calls this; the real lint replaces it
// at merge with the same name and signature.
/// Loads the policies at `paths`; prints findings and returns 1 if the set is invalid.
pub fn lint_paths(paths: &[std::path::PathBuf]) -> ExitCode {
    match crate::policy::load(paths) {
        Ok(loaded) => {
            for warning in &loaded.warnings {
                eprintln!("{warning}");
            }
            ExitCode::SUCCESS
        }
        Err(findings) => {
            for finding in &findings.0 {
                eprintln!("{finding}");
            }
            ExitCode::FAILURE
        }
    }
}
