//! Policies: the YAML model, loading from files, validation and compilation into a
//! [`PolicySet`].

pub mod admission_policy;
pub mod compile;
pub mod compiled;
pub mod findings;
pub mod load;
pub mod model;
mod set;
mod unknown_fields;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub use compiled::{CompiledPolicy, Operation};
pub use findings::{Finding, Findings, Severity};
pub use set::{PolicySet, Reads, Route};

/// A loaded set and its non-fatal findings (warnings).
#[derive(Debug)]
pub struct Loaded {
    pub set: PolicySet,
    pub warnings: Vec<Finding>,
}

/// Loads every policy from the given files and directories: all of them, or findings.
///
/// Unknown fields, unknown apiVersion or kind, missing or duplicate names, invalid
/// paths, regexes and expressions are errors; nothing is loaded when any error exists.
pub fn load(paths: &[PathBuf]) -> Result<Loaded, Findings> {
    let mut findings = Vec::new();
    let sources = load::read_sources(paths, &mut findings);
    compile_sources(&sources, findings)
}

/// Loads policies from text already in memory, as if read from `file`: no I/O. The
/// entry point for fuzzing and property tests; [`load`] reads files and calls it.
pub fn load_str(file: &Path, text: &str) -> Result<Loaded, Findings> {
    let source = load::Source {
        path: file.to_path_buf(),
        text: text.to_string(),
    };
    compile_sources(std::slice::from_ref(&source), Vec::new())
}

fn compile_sources(
    sources: &[load::Source],
    mut findings: Vec<Finding>,
) -> Result<Loaded, Findings> {
    let mut parsed = Vec::new();
    let mut admission_policies = Vec::new();
    let mut bindings = Vec::new();
    for source in sources {
        for document in load::parse_source(source, &mut findings) {
            match document {
                load::Parsed::Mutation(document) => parsed.push(*document),
                load::Parsed::AdmissionPolicy(document) => admission_policies.push(document),
                load::Parsed::Binding(document) => bindings.push(document),
            }
        }
    }
    let mut first_seen: HashMap<&str, &load::ParsedDocument> = HashMap::new();
    let mut compiled = Vec::new();
    for document in &parsed {
        let name = document.document.metadata.name.as_str();
        if let Some(first) = first_seen.get(name) {
            findings.push(duplicate_name(
                (&document.file, document.first_line),
                name,
                first,
                "also defined at",
                "policy names must be unique across all files",
            ));
            continue;
        }
        first_seen.insert(name, document);
        compile::check_mode(document, &mut findings);
        if let Some(policy) = compile::compile(document, &mut findings) {
            compiled.push(policy);
        }
    }
    let admission =
        admission_policy::load::compile_all(&admission_policies, &bindings, &mut findings);
    // One name, one policy, whichever its dialect: logs, metrics and `graft explain`
    // name policies by name alone.
    for policy in &admission {
        if let Some(first) = first_seen.get(policy.name.as_str()) {
            findings.push(duplicate_name(
                (&policy.file, policy.first_line),
                &policy.name,
                first,
                "a MutationPolicy of this name is defined at",
                "policy names must be unique across all files and both kinds",
            ));
        }
    }
    if findings.iter().any(Finding::is_error) {
        return Err(Findings(findings));
    }
    let revision = revision_of(sources);
    Ok(Loaded {
        set: PolicySet::new(compiled, admission, revision),
        warnings: findings,
    })
}

/// Convenience for one path.
pub fn load_path(path: &Path) -> Result<Loaded, Findings> {
    load(&[path.to_path_buf()])
}

/// `sha256:` and the first 12 hex digits of the hash of every file name and content.
fn revision_of(sources: &[load::Source]) -> String {
    let mut hasher = Sha256::new();
    for source in sources {
        let name = source
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        hasher.update((name.len() as u64).to_le_bytes());
        hasher.update(name.as_bytes());
        hasher.update((source.text.len() as u64).to_le_bytes());
        hasher.update(source.text.as_bytes());
    }
    let digest = hasher.finalize();
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The finding for the policy at `at` named `name`, which the one at `first` already is.
fn duplicate_name(
    at: (&Path, usize),
    name: &str,
    first: &load::ParsedDocument,
    defined: &str,
    hint: &str,
) -> Finding {
    Finding::error(
        at.0,
        format!(
            "duplicate policy name: {defined} {}:{}",
            first.file.display(),
            first.first_line
        ),
    )
    .at_line(Some(at.1))
    .in_policy(name)
    .at_field("metadata.name")
    .with_hint(hint)
}

/// The webhook rules that cover exactly what the policy set can match: one per
/// resource rule of each policy's `spec.match`, and one per pod controller of each policy
/// with `podControllers`.
pub fn webhook_rules(set: &PolicySet) -> Vec<crate::manifests::webhook::PolicyRule> {
    let mut rules = Vec::new();
    for policy in set.policies() {
        let operations: Vec<String> = if policy.matcher.operations.is_empty() {
            vec!["*".to_string()]
        } else {
            policy
                .matcher
                .operations
                .iter()
                .map(|op| op.as_str().to_string())
                .collect()
        };
        for rule in &policy.matcher.resources {
            rules.push(crate::manifests::webhook::PolicyRule {
                policy: policy.name.clone(),
                group: rule.group.clone().unwrap_or_else(|| "*".to_string()),
                version: rule.version.clone().unwrap_or_else(|| "*".to_string()),
                resource: rule.resource.clone(),
                subresource: rule.subresource.clone(),
                operations: operations.clone(),
            });
        }
        if policy.pod_controllers {
            for controller in &crate::k8s::pod_controllers::POD_CONTROLLERS {
                rules.push(crate::manifests::webhook::PolicyRule {
                    policy: policy.name.clone(),
                    group: controller.group.to_string(),
                    version: "*".to_string(),
                    resource: controller.resource.to_string(),
                    subresource: None,
                    operations: operations.clone(),
                });
            }
        }
    }
    rules.extend(admission_policy_rules(set));
    rules
}

/// The rules of the MutatingAdmissionPolicies a binding names: their `matchConstraints`'
/// resource rules (a binding's `matchResources` only narrows them); `*` is the
/// operations MAP runs on, never DELETE.
fn admission_policy_rules(set: &PolicySet) -> Vec<crate::manifests::webhook::PolicyRule> {
    let mut rules = Vec::new();
    for policy in set.admission_policies() {
        if policy.bindings.is_empty() {
            continue;
        }
        for rule in &policy.match_constraints.resource_rules {
            let operations: Vec<String> = match &rule.operations {
                None => [Operation::Create, Operation::Update, Operation::Connect]
                    .iter()
                    .map(|op| op.as_str().to_string())
                    .collect(),
                // Validation refuses DELETE, as the apiserver does.
                Some(operations) => operations
                    .iter()
                    .map(|op| op.as_str().to_string())
                    .collect(),
            };
            let any = vec!["*".to_string()];
            for group in rule.api_groups.as_ref().unwrap_or(&any) {
                for version in rule.api_versions.as_ref().unwrap_or(&any) {
                    for (resource, subresource) in &rule.resources {
                        rules.push(crate::manifests::webhook::PolicyRule {
                            policy: policy.name.clone(),
                            group: group.clone(),
                            version: version.clone(),
                            resource: resource.clone(),
                            subresource: (!subresource.is_empty()).then(|| subresource.clone()),
                            operations: operations.clone(),
                        });
                    }
                }
            }
        }
    }
    rules
}
