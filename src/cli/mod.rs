//! The `graft` command line: one file per subcommand, each with its own `Args` and `run`.

pub mod apply;
pub mod certs;
pub mod input;
pub mod lint;
pub mod review;
pub mod schema;
pub mod serve;
pub mod test;
pub mod webhook_config;
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
pub enum Command {
    /// Serve AdmissionReviews over HTTPS.
    Serve(serve::Args),
    /// Check policy files and report every problem.
    Lint(lint::Args),
    /// Mutate objects offline and print the result.
    Apply(apply::Args),
    /// Answer one AdmissionReview exactly as the server would.
    Review(review::Args),
    /// Run policy test suites.
    Test(test::Args),
    /// Generate a CA and a serving certificate for the webhook Service.
    Certs(certs::Args),
    /// Render the MutatingWebhookConfiguration the policy set needs.
    WebhookConfig(webhook_config::Args),
    /// Print the JSON Schema of MutationPolicy.
    Schema(schema::Args),
}

/// Exit code for a usage error (bad flags, unreadable input), as clap uses.
pub const EXIT_USAGE: u8 = 2;

/// Parses the command line and runs the subcommand.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Lint(args) => lint::run(args),
        Command::Apply(args) => apply::run(args),
        Command::Review(args) => review::run(args),
        Command::Test(args) => test::run(args),
        Command::Certs(args) => certs::run(args),
        Command::WebhookConfig(args) => webhook_config::run(args),
        Command::Schema(args) => schema::run(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
