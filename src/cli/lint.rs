//! `graft lint`: check policy files and print every finding.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;

use crate::policy::{self, Finding, Severity};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One finding per line:
    /// `file[:line][: warning][: policy NAME][: field.path]: message[ (hint: ...)]`.
    #[default]
    Text,
    /// A JSON object with every finding, for tools.
    Json,
}

/// Check policy files and report every problem.
///
/// Exit codes: 0 no errors, 1 findings (errors; warnings too with --strict), 2 usage error.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  graft lint\n  graft lint policies/ extra-policy.yaml --format json"
)]
pub struct Args {
    /// Policy files or directories (non-recursive).
    #[arg(default_value = "policies")]
    pub paths: Vec<PathBuf>,
    /// Output format: `text`, one finding a line, or `json` for tools.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Treat warnings as findings that fail the run.
    #[arg(long)]
    pub strict: bool,
    /// A deployed MutatingWebhookConfiguration (YAML or JSON, e.g. `kubectl get
    /// mutatingwebhookconfiguration graft -o yaml`): warn about requests a policy matches
    /// that it never sends to graft.
    #[arg(long, value_name = "FILE")]
    pub webhook_config: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    for path in &args.paths {
        if !path.exists() {
            anyhow::bail!("{}: no such file or directory", path.display());
        }
    }
    let mut report = lint(&args.paths);
    if let Some(file) = &args.webhook_config {
        let text = std::fs::read_to_string(file)
            .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        let name = super::input::input_name(file);
        let objects = crate::k8s::objects::read_objects_in(&name, &text)?;
        let rules = crate::manifests::webhook::deployed_rules(&objects);
        if rules.is_empty() {
            anyhow::bail!(
                "{}: no MutatingWebhookConfiguration rules found",
                file.display()
            );
        }
        report.findings.extend(coverage(&args.paths, file, &rules));
    }
    match args.format {
        Format::Text => print_text(&report)?,
        Format::Json => super::stdout::Stdout::lock().json_pretty(&report.to_json())?,
    }
    Ok(report.exit_code(args.strict))
}

/// Lints `paths` and prints the findings as text: the shared path of `graft lint` and
/// `graft serve --lint`.
pub fn lint_paths(paths: &[PathBuf]) -> anyhow::Result<ExitCode> {
    if let Some(missing) = paths.iter().find(|p| !p.exists()) {
        say!("error: {}: no such file or directory", missing.display());
        return Ok(ExitCode::from(super::EXIT_USAGE));
    }
    let report = lint(paths);
    print_text(&report)?;
    Ok(report.exit_code(false))
}

/// The findings of one lint run.
#[derive(Debug)]
pub struct Report {
    pub findings: Vec<Finding>,
    /// Policies loaded; `None` when errors kept the set from loading.
    pub policies: Option<usize>,
}

impl Report {
    fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }

    pub fn exit_code(&self, strict: bool) -> ExitCode {
        let failing = self.count(Severity::Error)
            + if strict {
                self.count(Severity::Warning)
            } else {
                0
            };
        if failing == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "findings": self.findings,
            "errors": self.count(Severity::Error),
            "warnings": self.count(Severity::Warning),
            "policies": self.policies,
        })
    }
}

pub fn lint(paths: &[PathBuf]) -> Report {
    let mut report = match policy::load(paths) {
        Ok(loaded) => Report {
            policies: Some(loaded.set.len()),
            findings: loaded.warnings,
        },
        Err(findings) => Report {
            findings: findings.0,
            policies: None,
        },
    };
    for dir in paths.iter().filter(|path| path.is_dir()) {
        report
            .findings
            .extend(super::kustomization::unlisted_policy_files(dir));
    }
    report
}

/// Warnings for what the policies match but the deployed configuration never sends.
fn coverage(
    paths: &[PathBuf],
    file: &std::path::Path,
    rules: &[crate::manifests::webhook::DeployedRule],
) -> Vec<Finding> {
    let Ok(loaded) = policy::load(paths) else {
        return Vec::new();
    };
    let mut findings = Vec::new();
    for compiled in loaded.set.policies() {
        let operations: Vec<&str> = if compiled.matcher.operations.is_empty() {
            vec!["*"]
        } else {
            compiled
                .matcher
                .operations
                .iter()
                .map(|op| op.as_str())
                .collect()
        };
        for (i, rule) in compiled.matcher.resources.iter().enumerate() {
            for operation in &operations {
                let request = crate::manifests::webhook::Request {
                    group: rule.group.as_deref(),
                    version: rule.version.as_deref(),
                    resource: &rule.resource,
                    subresource: rule.subresource.as_deref(),
                    operation,
                };
                let sent = if *operation == "*" {
                    ["CREATE", "UPDATE", "DELETE", "CONNECT"].iter().any(|op| {
                        crate::manifests::webhook::sends(
                            rules,
                            crate::manifests::webhook::Request {
                                operation: op,
                                ..request
                            },
                        )
                    })
                } else {
                    crate::manifests::webhook::sends(rules, request)
                };
                if !sent {
                    let what = match &rule.subresource {
                        Some(sub) => format!("{}/{sub}", rule.resource),
                        None => rule.resource.clone(),
                    };
                    findings.push(
                        Finding::warning(
                            &compiled.file,
                            format!("{} never sends {operation} of {what} to graft, so this policy cannot apply to it", file.display()),
                        )
                        .in_policy(compiled.name.clone())
                        .at_field(format!("spec.match.resources[{i}]"))
                        .with_hint("regenerate it with graft webhook-config"),
                    );
                }
            }
        }
    }
    findings
}

fn print_text(report: &Report) -> Result<(), super::stdout::StdoutError> {
    let mut stdout = super::stdout::Stdout::lock();
    for finding in &report.findings {
        stdout.line(finding)?;
    }
    let errors = report.count(Severity::Error);
    let warnings = report.count(Severity::Warning);
    let warnings = counted(warnings, "warning", "warnings");
    match report.policies {
        Some(policies) if errors == 0 => {
            say!("{} OK, {warnings}", counted(policies, "policy", "policies"));
        }
        _ => say!("{}, {warnings}", counted(errors, "error", "errors")),
    }
    Ok(())
}

/// `1 policy`, `2 policies`.
pub fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
