//! The `graft` command line: one file per subcommand, each with its own `Args` and `run`.

/// A line to standard error, as `eprintln!` writes it, without `eprintln!`'s panic when
/// standard error is gone (`graft apply … 2>&1 | head -1`): there is nowhere left to say
/// anything, and the run's status still says how it went.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod apply;
pub mod certs;
pub mod completions;
pub mod explain;
pub mod init;
pub mod input;
mod kustomization;
pub mod lint;
pub mod notices;
pub mod review;
pub mod schema;
pub mod serve;
mod stdout;
pub mod test;
mod test_update;
pub mod webhook_config;
mod yaml_edit;
mod yaml_layout;
mod yaml_out;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "graft",
    version,
    about = "Kubernetes mutating admission webhook driven by declarative YAML policies"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
/// The subcommands. Each is described by its `Args`' own doc comment (the first
/// paragraph in `graft --help`, all of it in `graft SUBCOMMAND --help`); a doc comment here
/// would replace it.
pub enum Command {
    /// Serve AdmissionReviews over HTTPS.
    Serve(serve::Args),
    Lint(lint::Args),
    Apply(apply::Args),
    Review(review::Args),
    Explain(explain::Args),
    Test(test::Args),
    Certs(certs::Args),
    WebhookConfig(webhook_config::Args),
    Init(init::Args),
    Schema(schema::Args),
    /// Notices to chat and HTTP sinks: `graft notices test --sink NAME`.
    Notices(notices::Args),
    /// Print the shell completion script (`source <(graft completions bash)`).
    Completions(completions::Args),
}

/// Exit code for a usage error (bad flags, unreadable input), as clap uses.
pub const EXIT_USAGE: u8 = 2;

/// Exit code when standard output's reader went away: a shell's for a process killed by
/// SIGPIPE.
const EXIT_BROKEN_PIPE: u8 = 128 + 13;

/// Parses the command line and runs the subcommand.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Lint(args) => lint::run(args),
        Command::Apply(args) => apply::run(args),
        Command::Review(args) => review::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Test(args) => test::run(args),
        Command::Certs(args) => certs::run(args),
        Command::WebhookConfig(args) => webhook_config::run(args),
        Command::Init(args) => init::run(args),
        Command::Schema(args) => schema::run(args),
        Command::Notices(args) => notices::run(args),
        Command::Completions(args) => completions::run(args),
    };
    match result {
        Ok(code) => code,
        // The reader stopped reading (`graft lint | head`), as readers may: nothing to
        // report, but the status a process killed by SIGPIPE has (128 + 13), as other
        // tools end: the run did not finish, so whatever it would have found (lint's
        // findings, a failed test) must not read as success under `set -o pipefail`.
        Err(error) if stdout::is_broken_pipe(&error) => ExitCode::from(EXIT_BROKEN_PIPE),
        Err(error) => {
            say!("error: {}", describe(&error));
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// The error and its causes, each said once: many errors already name their cause in
/// their own message ("cannot read x: No such file or directory").
pub fn describe(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_is_said_once() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        #[derive(Debug, thiserror::Error)]
        #[error("cannot read x: {source}")]
        struct Naming {
            #[source]
            source: std::io::Error,
        }
        let error = anyhow::Error::new(Naming { source: io() });
        assert_eq!(describe(&error), "cannot read x: no such file");
        let error = anyhow::Error::new(io()).context("loading the policies");
        assert_eq!(describe(&error), "loading the policies: no such file");
    }
}
