//! `graft apply`: mutate objects offline and print the result.

use std::process::ExitCode;

use clap::ValueEnum;

use super::input::ObjectInput;
use crate::admission;
use crate::engine::Outcome;
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
/// A denial prints its reason on standard error and exits 1. At DELETE the request carries
/// only the old object, which no webhook can change: it is printed unchanged (an empty
/// patch), with a note on standard error.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  graft apply --policies policies/ --namespace dynamo-system pod.yaml\n  kubectl get pod web-0 -o yaml | graft apply -o patch    (no file: standard input)\n  graft apply pod.yaml - < more-pods.yaml\n  graft apply --operation UPDATE --resource nodes/status node.json\n  graft apply --namespaces namespaces.yaml pod.yaml"
)]
pub struct Args {
    #[command(flatten)]
    pub input: ObjectInput,
    /// What to print for each object: the mutated object (YAML or JSON) or the patch.
    #[arg(short, long, value_enum, default_value_t = Output::Yaml)]
    pub output: Output,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let input = args.input.read("graft-apply")?;
    let mut stdout = super::stdout::Stdout::lock();
    let mut denied = false;
    let mut noted_delete = false;
    for request in &input.requests {
        let source = input.cluster_source();
        let evaluation = admission::offline::evaluate(request, &input.set, source);
        for warning in &evaluation.warnings {
            say!("warning: {warning}");
        }
        if let Outcome::Denied { message, .. } = &evaluation.outcome {
            say!("denied: {message}");
            denied = true;
            continue;
        }
        // The object as the policies left it: the request's when nothing changed.
        let mutated = match &evaluation.object {
            Some(object) => object.to_value(),
            None => {
                // Printing `null` read as if the policies had emptied the object.
                if !std::mem::replace(&mut noted_delete, true) {
                    say!(
                        "note: graft does not mutate at {}: the request carries only the old object, printed unchanged",
                        request.operation
                    );
                }
                request
                    .old_object
                    .as_ref()
                    .map(Tree::to_value)
                    .unwrap_or_default()
            }
        };
        match args.output {
            Output::Yaml => {
                stdout.write(format!("---\n{}", super::yaml_out::to_string(&mutated)?))?;
            }
            Output::Json => stdout.json_pretty(&mutated)?,
            Output::Patch => stdout.json_line(&evaluation.patch)?,
        }
    }
    Ok(if denied {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
