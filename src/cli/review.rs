//! `graft review`: answer one AdmissionReview exactly as the server would.

use std::path::PathBuf;
use std::process::ExitCode;

use super::input::{
    input_files, input_name, load_policies, namespace_source, param_objects, read_input,
    stdin_input,
};
use crate::admission::{self, BadReview};

/// Answer AdmissionReviews exactly as the server would.
///
/// Reads AdmissionReviews (v1 or v1beta1) and prints each response review exactly as
/// `graft serve` sends it, on one line: same apiVersion, uid echoed, base64 patch.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  graft review --policies policies/ review.json\n  graft review < review.json    (no file: standard input)\n  graft review --namespaces namespaces.yaml review.json\n  graft review review.json | jq -r .response.patch | base64 -d | jq ."
)]
pub struct Args {
    /// Policy files or directories.
    #[arg(long, default_value = "policies")]
    pub policies: Vec<PathBuf>,
    /// Namespace objects (YAML or JSON; several documents or `kind: List`) for policies
    /// that use `namespaceSelector` or `namespaceObject`.
    #[arg(long, value_name = "FILE")]
    pub namespaces: Option<PathBuf>,
    /// Parameter objects (YAML or JSON, any kind) for MutatingAdmissionPolicy bindings
    /// with a `paramRef`.
    #[arg(long, value_name = "FILE")]
    pub params: Option<PathBuf>,
    /// Files of one AdmissionReview in JSON each; `-` for standard input, which is also
    /// read when no file is given.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let files = input_files(&args.files)?;
    let set = load_policies(&args.policies)?;
    let namespaces = namespace_source(args.namespaces.as_deref(), stdin_input(&files))?;
    let params = param_objects(args.params.as_deref(), stdin_input(&files))?;
    let source = admission::ClusterSource {
        namespaces: namespaces.as_ref(),
        params: &params,
    };
    for file in &files {
        let body = read_input(file)?;
        // The server's path, so the two answer alike; its errors speak of a body, which
        // here is a file to name.
        let reviewed = admission::review(&body, &set, source).map_err(|error| {
            let name = input_name(file);
            let text = error.to_string();
            match &error {
                admission::ReviewError::Internal(_) => anyhow::anyhow!("{name}: {text}"),
                admission::ReviewError::Bad(error) => bad_review(&name, error),
            }
        })?;
        let mut json = reviewed.to_json()?;
        json.push(b'\n');
        super::stdout::print(json)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A body that is not a review, named by its file: serde_json ends its message with where
/// it is; the file's name leads with it instead, as a compiler's error does.
fn bad_review(name: &str, error: &BadReview) -> anyhow::Error {
    let text = error.to_string();
    match error {
        BadReview::Json(json) | BadReview::Object { error: json, .. } => {
            let (line, column) = (json.line(), json.column());
            let text = text.replacen(&format!(" at line {line} column {column}"), "", 1);
            anyhow::anyhow!("{name}:{line}:{column}: {text}")
        }
        _ => anyhow::anyhow!("{name}: {text}"),
    }
}
