//! `graft apply`: mutate objects offline and print the result.

use std::io::Write;
use std::process::ExitCode;

use clap::ValueEnum;

use super::input::ObjectInput;
use crate::admission;
use crate::engine::{self, Outcome};
use crate::tree::Tree;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// The mutated objects as YAML documents.
    #[default]
    Yaml,
    /// The mutated objects as JSON.
    Json,
    /// The RFC 6902 patch for each object.
    Patch,
}

/// Mutate objects offline, as the webhook would, and print them.
///
/// A denial prints its reason on standard error and exits 1.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  graft apply --policies policies/ --namespace dynamo-system pod.yaml\n  kubectl get pod web-0 -o yaml | graft apply -o patch -\n  graft apply --operation UPDATE --resource nodes/status node.json\n  graft apply --namespaces namespaces.yaml pod.yaml"
)]
pub struct Args {
    #[command(flatten)]
    pub input: ObjectInput,
    #[arg(short, long, value_enum, default_value_t = Output::Yaml)]
    pub output: Output,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let input = args.input.read("graft-apply")?;
    let mut stdout = std::io::stdout().lock();
    let mut denied = false;
    for request in input.requests {
        let namespace =
            admission::resolve_namespace(&request, &input.set, input.namespaces.as_ref());
        let evaluation = engine::evaluate(&request, &namespace, &input.set);
        for warning in &evaluation.warnings {
            eprintln!("warning: {warning}");
        }
        if let Outcome::Denied { message } = &evaluation.outcome {
            eprintln!("denied: {message}");
            denied = true;
            continue;
        }
        // The object as the policies left it: the request's when nothing changed.
        let mutated = evaluation
            .object
            .as_ref()
            .map(Tree::to_value)
            .unwrap_or_default();
        match args.output {
            Output::Yaml => {
                writeln!(stdout, "---")?;
                stdout.write_all(super::yaml_out::to_string(&mutated)?.as_bytes())?;
            }
            Output::Json => {
                serde_json::to_writer_pretty(&mut stdout, &mutated)?;
                writeln!(stdout)?;
            }
            Output::Patch => {
                serde_json::to_writer(&mut stdout, &evaluation.patch)?;
                writeln!(stdout)?;
            }
        }
    }
    Ok(if denied {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
