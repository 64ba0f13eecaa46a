//! `graft explain`: for each object, what every policy did to it and, for each policy
//! that did not apply, the first of its conditions that did not hold.

use std::process::ExitCode;

use clap::ValueEnum;
use serde_json::{Value, json};

use super::input::ObjectInput;
use crate::admission::{self, AdmissionRequest};
use crate::engine::explain::{Explanation, PolicyExplanation, Verdict, explain};
use crate::engine::{Outcome, PolicyResult};
use crate::tree::{Operation, Tree};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One line per policy, its patch operations indented under it.
    #[default]
    Text,
    /// One JSON document per object.
    Json,
}

/// Say what every policy did to objects, or which condition kept it out.
///
/// For every policy: whether it applied and the patch it made, or the first condition
/// that did not hold, or why it failed.
///
/// The evaluation is the server's, so what is reported as applied is what the webhook
/// does. Exits 0 whatever the policies decide.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  graft explain pod.yaml\n  kubectl get pod web-0 -o yaml | graft explain --namespaces namespaces.yaml\n  graft explain --operation UPDATE --resource nodes/status node.json\n  graft explain review.json    (an AdmissionReview, as the apiserver sent it)"
)]
pub struct Args {
    #[command(flatten)]
    pub input: ObjectInput,
    /// Output format: `text` to read, `json` (one document per object) for tools.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let input = args.input.read("graft-explain")?;
    let mut stdout = super::stdout::Stdout::lock();
    for request in &input.requests {
        let source = input.cluster_source();
        let route = input.set.route(request);
        let cluster = admission::resolve(request, route, source);
        let explanation = explain(request, route, &cluster, &input.set);
        match args.format {
            Format::Text => stdout.write(text(request, &explanation))?,
            Format::Json => stdout.json_pretty(&json(request, &explanation))?,
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `Pod dynamo/worker-0 (CREATE core/v1/pods): allowed, 2 patch operations`, then a
/// line per policy.
fn text(request: &AdmissionRequest, explanation: &Explanation) -> String {
    let evaluation = &explanation.evaluation;
    let decision = match &evaluation.outcome {
        Outcome::Allowed => match evaluation.patch.0.len() {
            0 => "allowed, unchanged".to_string(),
            1 => "allowed, 1 patch operation".to_string(),
            n => format!("allowed, {n} patch operations"),
        },
        Outcome::Denied { message, .. } => format!("denied: {message}"),
    };
    let mut out = format!(
        "{} ({} {}): {decision}\n",
        object_name(request),
        request.operation,
        resource(request)
    );
    for policy in &explanation.policies {
        out.push_str(&format!(
            "  {}: {}",
            heading(policy),
            policy.verdict.label()
        ));
        match &policy.verdict {
            Verdict::NotMatched { condition } => out.push_str(&format!(": {condition}\n")),
            Verdict::Matched(PolicyResult::Ignored(failure) | PolicyResult::Failed(failure)) => {
                out.push_str(&format!(": {failure}\n"));
            }
            Verdict::Applied { patch } | Verdict::Matched(PolicyResult::Audited { patch }) => {
                out.push('\n');
                for operation in &patch.0 {
                    out.push_str(&format!("      {}\n", patch_line(operation)));
                }
            }
            Verdict::Matched(PolicyResult::Unchanged | PolicyResult::Applied) => out.push('\n'),
        }
    }
    for warning in &evaluation.warnings {
        out.push_str(&format!("  warning: {warning}\n"));
    }
    for note in &explanation.notes {
        out.push_str(&format!("  note: {note}\n"));
    }
    out
}

/// The policy's name; a MutatingAdmissionPolicy's with the binding (and parameter
/// object) it ran through, since one policy runs once per binding and parameter:
/// `add-team (binding add-team-a, param team-a/defaults)`.
fn heading(policy: &PolicyExplanation) -> String {
    match (&policy.binding, &policy.param) {
        (Some(binding), Some(param)) => {
            format!("{} (binding {binding}, param {param})", policy.policy)
        }
        (Some(binding), None) => format!("{} (binding {binding})", policy.policy),
        (None, _) => policy.policy.clone(),
    }
}

fn json(request: &AdmissionRequest, explanation: &Explanation) -> Value {
    let evaluation = &explanation.evaluation;
    let (decision, message) = match &evaluation.outcome {
        Outcome::Allowed => ("allowed", None),
        Outcome::Denied { message, .. } => ("denied", Some(message.as_str())),
    };
    let policies: Vec<Value> = explanation
        .policies
        .iter()
        .map(|policy| {
            let mut entry = json!({
                "policy": policy.policy,
                "kind": policy.dialect.as_str(),
                "file": policy.file,
                "result": policy.verdict.label(),
            });
            if let Some(binding) = &policy.binding {
                entry["binding"] = json!(binding);
            }
            if let Some(param) = &policy.param {
                entry["param"] = json!(param);
            }
            match &policy.verdict {
                Verdict::NotMatched { condition } => entry["condition"] = json!(condition),
                Verdict::Matched(
                    PolicyResult::Ignored(failure) | PolicyResult::Failed(failure),
                ) => {
                    entry["reason"] = json!(failure.to_string());
                }
                Verdict::Applied { patch } | Verdict::Matched(PolicyResult::Audited { patch }) => {
                    entry["patch"] = json!(patch);
                }
                Verdict::Matched(PolicyResult::Unchanged | PolicyResult::Applied) => {}
            }
            entry
        })
        .collect();
    json!({
        "object": object_name(request),
        "operation": request.operation,
        "resource": resource(request),
        "decision": decision,
        "message": message,
        "patch": evaluation.patch,
        "warnings": evaluation.warnings,
        "notes": explanation.notes,
        "policies": policies,
    })
}

/// `Kind namespace/name`, the name being `generateName*` when the object has none yet.
fn object_name(request: &AdmissionRequest) -> String {
    let object = request.subject();
    let metadata = |key: &str| {
        object
            .and_then(|o| o.pointer(&format!("/metadata/{key}")))
            .and_then(Tree::as_str)
    };
    let name = match (
        request.name.as_deref(),
        metadata("name"),
        metadata("generateName"),
    ) {
        (Some(name), _, _) if !name.is_empty() => name.to_string(),
        (_, Some(name), _) if !name.is_empty() => name.to_string(),
        (_, _, Some(prefix)) => format!("{prefix}*"),
        _ => "(unnamed)".to_string(),
    };
    match request.namespace.as_deref().filter(|n| !n.is_empty()) {
        Some(namespace) => format!("{} {namespace}/{name}", request.kind.kind),
        None => format!("{} {name}", request.kind.kind),
    }
}

fn resource(request: &AdmissionRequest) -> String {
    let group = if request.resource.group.is_empty() {
        "core"
    } else {
        &request.resource.group
    };
    let mut text = format!(
        "{group}/{}/{}",
        request.resource.version, request.resource.resource
    );
    if let Some(sub) = request.sub_resource.as_deref().filter(|s| !s.is_empty()) {
        text.push('/');
        text.push_str(sub);
    }
    text
}

/// `add /metadata/labels/app = "web"`, `remove /spec/x`: the operations a diff writes.
fn patch_line(operation: &Operation<'_>) -> String {
    match operation {
        Operation::Add { path, value } => format!("add {path} = {value}"),
        Operation::Replace { path, value } => format!("replace {path} = {value}"),
        Operation::Remove { path } => format!("remove {path}"),
    }
}
