//! `graft notices test`: one sample message to one sink of a notices file, so a team
//! can check the wiring (URL, secret, signature, egress) before a review needs it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::server::notices::{self, config, message::Notice};

/// Notices to chat and HTTP sinks (`graft serve --notices`).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: NoticesCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum NoticesCommand {
    /// Send one sample notice to a sink and say whether it was accepted.
    #[command(
        after_help = "Examples:\n  graft notices test --sink team-chat --notices /etc/graft/notices/notices.yaml"
    )]
    Test(TestArgs),
}

#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// The sink's name in the notices file.
    #[arg(long)]
    pub sink: String,
    /// The notices file, as `graft serve --notices` reads it.
    #[arg(long, value_name = "FILE")]
    pub notices: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let NoticesCommand::Test(args) = args.command;
    let file = config::load(&args.notices)?;
    let Some(sink) = file.sinks.iter().find(|sink| sink.name == args.sink) else {
        let names: Vec<&str> = file.sinks.iter().map(|sink| sink.name.as_str()).collect();
        anyhow::bail!(
            "no sink {:?} in {} (sinks: {})",
            args.sink,
            args.notices.display(),
            names.join(", ")
        );
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    let sent = runtime.block_on(async {
        tokio::time::timeout(sink.timeout(), notices::send(sink, &Notice::sample())).await
    });
    match sent {
        Ok(Ok(())) => {
            super::stdout::print(format!("sent a sample notice to {}\n", sink.name))?;
            Ok(ExitCode::SUCCESS)
        }
        Ok(Err(error)) => Err(anyhow::Error::new(error))
            .with_context(|| format!("cannot send a notice to {}", sink.name)),
        Err(_) => anyhow::bail!(
            "cannot send a notice to {}: no answer within {} s",
            sink.name,
            sink.timeout().as_secs()
        ),
    }
}
