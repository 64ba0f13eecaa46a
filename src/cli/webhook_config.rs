//! `graft webhook-config` (placeholder).

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("graft webhook-config is not implemented yet")
}
