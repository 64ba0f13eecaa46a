//! `graft completions SHELL`: the shell completion script for `graft`, generated from
//! the same clap definitions the command line parses with, so it never goes stale.

use std::process::ExitCode;

use clap::CommandFactory;
use clap_complete::Shell;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: Shell,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut command = super::Cli::command();
    // clap_complete panics when its writer fails, so the script is written in memory and
    // printed by graft, whose write errors are returned.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "graft", &mut script);
    super::stdout::print(script)?;
    Ok(ExitCode::SUCCESS)
}
