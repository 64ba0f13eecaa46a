//! `graft apply`: mutate objects offline and print the result.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;

use super::input::{load_policies, namespace_source, read_input};
use crate::admission;
use crate::engine::{self, Outcome};
use crate::offline::{self, RequestOptions};

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
    /// Policy files or directories.
    #[arg(long, default_value = "policies")]
    pub policies: Vec<PathBuf>,
    /// CREATE, UPDATE, DELETE or CONNECT.
    #[arg(long, default_value = "CREATE")]
    pub operation: String,
    /// The request namespace (default: the object's, else `default`).
    #[arg(long)]
    pub namespace: Option<String>,
    /// RESOURCE or RESOURCE/SUBRESOURCE (default: derived from the object's kind).
    #[arg(long)]
    pub resource: Option<String>,
    /// Namespace objects (YAML or JSON; several documents or `kind: List`) for policies
    /// that use `namespaceSelector` or `namespaceObject`.
    #[arg(long, value_name = "FILE")]
    pub namespaces: Option<PathBuf>,
    #[arg(short, long, value_enum, default_value_t = Output::Yaml)]
    pub output: Output,
    /// YAML or JSON objects (several documents, or `kind: List`); `-` for standard input.
    pub file: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let set = load_policies(&args.policies)?;
    let namespaces = namespace_source(args.namespaces.as_deref(), Some(&args.file))?;
    let text = String::from_utf8(read_input(&args.file)?)?;
    let objects = offline::read_objects(&text)?;
    let options = RequestOptions {
        operation: args.operation.clone(),
        namespace: args.namespace.clone(),
        resource: args.resource.clone(),
        old_object: None,
    };
    let mut stdout = std::io::stdout().lock();
    let mut denied = false;
    for (index, object) in objects.into_iter().enumerate() {
        let request =
            offline::request_for(object.clone(), &options, &format!("graft-apply-{index}"));
        let namespace = admission::resolve_namespace(&request, &set, namespaces.as_ref());
        let evaluation = engine::evaluate(&request, &namespace, &set);
        for warning in &evaluation.warnings {
            eprintln!("warning: {warning}");
        }
        if let Outcome::Denied { message } = &evaluation.outcome {
            eprintln!("denied: {message}");
            denied = true;
            continue;
        }
        let mutated = evaluation.mutated.unwrap_or(object);
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
