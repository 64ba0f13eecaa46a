//! `graft test`: run policy test suites.
//!
//! A suite is a YAML document of `kind: PolicyTest`. Each case gives an input (an
//! object, or a whole AdmissionReview) and what must come out (the mutated object, no
//! change, or a denial). Every case also checks convergence: evaluating the policies
//! again on their own output must give an empty patch.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;

use super::input::load_policies;
use crate::admission::offline::{self, RequestOptions};
use crate::admission::{self, AdmissionRequest};
use crate::engine::{Evaluation, Outcome, PolicyResult};
use crate::k8s::objects::read_objects;
use crate::namespaces::{self, NamespaceMap, NamespaceSource, NoNamespaces};
use crate::params::{NoParams, ParamObjects, ParamSource};
use crate::policy::PolicySet;
use crate::tree::Tree;

use super::test_update;

/// Run policy test suites (`kind: PolicyTest` YAML files).
///
/// Exit codes: 0 every case passed, 1 a case failed, 2 usage error.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  graft test\n  graft test tests/policies/multus-networks.yaml\n  graft test --namespaces namespaces.yaml my-suites/"
)]
pub struct Args {
    /// Namespace objects (YAML or JSON; several documents or `kind: List`) for the
    /// suites that list none of their own (`spec.namespaces`, `spec.namespacesFile`).
    #[arg(long, value_name = "FILE")]
    pub namespaces: Option<PathBuf>,
    /// Parameter objects (YAML or JSON, any kind) for the suites that list none of their
    /// own (`spec.params`, `spec.paramsFile`).
    #[arg(long, value_name = "FILE")]
    pub params: Option<PathBuf>,
    /// On your machine, not in CI: set the `expect` block of each failing case (and an
    /// `objectFile` it names) to what the policies now do, and say which cases changed.
    /// Only what differs is rewritten, in place; the rest of the file stays byte for
    /// byte. A case whose policies do not converge, or whose patch does not apply, is
    /// not rewritten: that is a policy bug, not an outdated expectation. Review the
    /// change (`git diff`) before committing it. Refused when the environment variable
    /// CI is set, since a CI run that rewrites its expectations passes whatever the
    /// policies do; --force overrides.
    #[arg(long)]
    pub update: bool,
    /// Run --update even though CI is set.
    #[arg(long, requires = "update")]
    pub force: bool,
    /// Suite files, or directories searched recursively (each file once, links
    /// followed) for *.yaml suites.
    #[arg(default_value = "tests/policies")]
    pub paths: Vec<PathBuf>,
}

/// One suite file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Suite {
    pub api_version: String,
    pub kind: String,
    pub metadata: SuiteMetadata,
    pub spec: SuiteSpec,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteMetadata {
    pub name: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SuiteSpec {
    /// Policy files or directories, relative to the suite file.
    pub policies: Vec<PathBuf>,
    /// Namespace objects the cases' requests are in, for policies that use
    /// `namespaceSelector` or `namespaceObject`.
    #[serde(default)]
    pub namespaces: Vec<Value>,
    /// More Namespace objects, from a YAML or JSON file relative to the suite (several
    /// documents or `kind: List`).
    #[serde(default)]
    pub namespaces_file: Option<PathBuf>,
    /// Parameter objects (any kind) for MutatingAdmissionPolicy bindings with a
    /// `paramRef`.
    #[serde(default)]
    pub params: Vec<Value>,
    /// More parameter objects, from a YAML or JSON file relative to the suite.
    #[serde(default)]
    pub params_file: Option<PathBuf>,
    pub cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Case {
    pub name: String,
    /// CREATE by default.
    #[serde(default)]
    pub operation: String,
    #[serde(default)]
    pub namespace: Option<String>,
    /// `RESOURCE` or `RESOURCE/SUBRESOURCE`; derived from the kind by default.
    #[serde(default)]
    pub resource: Option<String>,
    /// The object, inline.
    #[serde(default)]
    pub object: Option<Value>,
    /// The object, from a YAML or JSON file relative to the suite.
    #[serde(default)]
    pub object_file: Option<PathBuf>,
    #[serde(default)]
    pub old_object: Option<Value>,
    /// A whole AdmissionReview file (relative to the suite), instead of an object.
    #[serde(default)]
    pub review_file: Option<PathBuf>,
    /// What must come out. A case without one fails, and `--update` gives it one.
    #[serde(default)]
    pub expect: Option<Expect>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expect {
    /// The whole mutated object.
    #[serde(default)]
    pub object: Option<Value>,
    #[serde(default)]
    pub object_file: Option<PathBuf>,
    /// No change at all: no patch.
    #[serde(default)]
    pub unchanged: bool,
    /// A denial whose message contains this text.
    #[serde(default)]
    pub denied: Option<String>,
    /// Warnings that must appear (each a substring of some warning).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Exactly these policies changed the object, in order.
    #[serde(default)]
    pub applied: Option<Vec<String>>,
    /// Exactly this RFC 6902 patch.
    #[serde(default)]
    pub patch: Option<Value>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.update && !args.force {
        refuse_update_in_ci(std::env::var_os("CI"))?;
    }
    let files = suite_files(&args.paths)?;
    if files.is_empty() {
        bail!("no test suites found in {:?}", args.paths);
    }
    let shared = Shared {
        namespaces: match &args.namespaces {
            Some(path) => Some(super::input::namespace_source(Some(path), None)?),
            None => None,
        },
        params: match &args.params {
            Some(path) => Some(super::input::param_objects(Some(path), None)?),
            None => None,
        },
    };
    let (mut passed, mut failed, mut updated) = (0usize, 0usize, 0usize);
    let mut suites = std::collections::BTreeSet::new();
    let file_count = files.len();
    let mut stdout = super::stdout::Stdout::lock();
    for file in files {
        let results = run_suite_file_with(&file, &shared)?;
        suites.extend(results.iter().map(|result| result.suite.clone()));
        // The file is rewritten before anything about it is reported, so an UPDATED line
        // never claims a change that a failing rewrite, or a stdout that fails while the
        // file's lines are printed, leaves unwritten.
        if args.update {
            for (path, text) in updated_files(&file, &results)? {
                std::fs::write(&path, text)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
        for result in results {
            if let Some(note) = &result.note {
                stdout.line(format_args!(
                    "NOTE {}: {}: {note}",
                    result.suite, result.case
                ))?;
            }
            match (result.failure, result.update) {
                (None, _) => {
                    passed += 1;
                    stdout.line(format_args!("PASS {}: {}", result.suite, result.case))?;
                }
                (Some(failure), Some(_)) if args.update => {
                    updated += 1;
                    // What was wrong is what changed: the reviewer sees an `unchanged`
                    // case that now expects a patch here, not only in the diff.
                    stdout.line(format_args!(
                        "UPDATED {}: {}\n{}",
                        result.suite,
                        result.case,
                        indent(&failure)
                    ))?;
                }
                (Some(failure), _) => {
                    failed += 1;
                    stdout.line(format_args!(
                        "FAIL {}: {}\n{}",
                        result.suite,
                        result.case,
                        indent(&failure)
                    ))?;
                }
            }
        }
    }
    if args.update {
        stdout.line(format_args!(
            "{} rewritten to what the policies now do",
            super::lint::counted(updated, "case", "cases")
        ))?;
    }
    stdout.line(format_args!(
        "{} in {}",
        super::lint::counted(suites.len(), "suite", "suites"),
        super::lint::counted(file_count, "file", "files")
    ))?;
    // Alone on the last line, the form test runners and CI read.
    stdout.line(format_args!("{passed} passed, {failed} failed"))?;
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `--update` rewrites expectations to whatever the policies do, so a CI job that runs
/// it passes any change, including the one the suite exists to catch. CI systems set
/// `CI` (to `true`, or `1`); `--force` is for the rare job that means it.
fn refuse_update_in_ci(ci: Option<std::ffi::OsString>) -> anyhow::Result<()> {
    let Some(value) = ci.filter(|value| !value.is_empty()) else {
        return Ok(());
    };
    bail!(
        "--update is refused because the environment variable CI is set (CI={}): in CI it \
         would rewrite every failing expectation to what the policies now do and pass, \
         hiding the change the suites exist to catch. Run `graft test` in CI; run \
         `graft test --update` on your machine and review the diff. To run it here \
         anyway, add --force.",
        value.to_string_lossy()
    )
}

/// The files `--update` writes for one suite file, each with its new text: the
/// `objectFile`s failing cases expect, then the suite with their `expect` blocks
/// rewritten. Nothing when no case has a new expectation. Every text is computed before
/// any is written, so a suite that cannot be edited leaves its object files as they were.
fn updated_files(file: &Path, results: &[CaseResult]) -> anyhow::Result<Vec<(PathBuf, String)>> {
    let base = file.parent().unwrap_or(Path::new("."));
    let mut updates = Vec::new();
    let mut objects: Vec<(PathBuf, &Value, &str)> = Vec::new();
    for result in results {
        let (Some(_), Some(update)) = (&result.failure, &result.update) else {
            continue;
        };
        updates.push((result.case.clone(), update.expect.clone()));
        let Some((path, object)) = &update.object_file else {
            continue;
        };
        let path = base.join(path);
        match objects.iter().find(|(seen, _, _)| *seen == path) {
            Some((_, other, case)) if *other != object => bail!(
                "{}: cases {case:?} and {:?} expect different objects in objectFile {}; give each its own file",
                file.display(),
                result.case,
                path.display()
            ),
            Some(_) => {}
            None => objects.push((path, object, &result.case)),
        }
    }
    if updates.is_empty() {
        return Ok(Vec::new());
    }
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let suite = test_update::rewrite(&text, &updates)
        .map_err(|reason| anyhow::anyhow!("{}: {reason}", file.display()))?;
    let mut files = Vec::new();
    for (path, object, _) in objects {
        let text = test_update::object_file_text(&path, object)?;
        files.push((path, text));
    }
    files.push((file.to_path_buf(), suite));
    Ok(files)
}

/// The outcome of one case.
#[derive(Debug)]
pub struct CaseResult {
    pub suite: String,
    pub case: String,
    /// `None` when the case passed; otherwise a readable explanation with a diff.
    pub failure: Option<String>,
    /// For a failing case whose only problem is its expectation: the one it would pass.
    pub update: Option<test_update::NewExpect>,
    /// Worth saying, passed or not: a second review would change the object again
    /// (only MutatingAdmissionPolicies may do that; MAP does not require convergence).
    pub note: Option<String>,
}

/// The namespaces and parameter objects given on the command line, for the suites that
/// list none of their own.
#[derive(Default)]
pub struct Shared {
    pub namespaces: Option<Box<dyn NamespaceSource>>,
    pub params: Option<ParamObjects>,
}

/// Runs every case of one suite file; `shared` holds the namespaces and parameter
/// objects of a suite that lists none of its own.
pub fn run_suite_file_with(file: &Path, shared: &Shared) -> anyhow::Result<Vec<CaseResult>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let suite: Suite =
        serde_yaml::from_str(&text).with_context(|| format!("parsing {}", file.display()))?;
    if suite.kind != "PolicyTest" || suite.api_version != crate::policy::model::API_VERSION {
        bail!(
            "{}: expected apiVersion {} and kind PolicyTest, found apiVersion {:?} and kind {:?}",
            file.display(),
            crate::policy::model::API_VERSION,
            suite.api_version,
            suite.kind
        );
    }
    let base = file.parent().unwrap_or(Path::new("."));
    let policy_paths: Vec<PathBuf> = suite.spec.policies.iter().map(|p| base.join(p)).collect();
    let set = load_policies(&policy_paths)
        .with_context(|| format!("{}: spec.policies", file.display()))?;
    let own = suite_namespaces(&suite.spec, base)
        .with_context(|| format!("{}: spec.namespaces", file.display()))?;
    check_cases(&suite.spec.cases).with_context(|| format!("{}: spec.cases", file.display()))?;
    let own_params = suite_params(&suite.spec, base)
        .with_context(|| format!("{}: spec.params", file.display()))?;
    let params: &dyn ParamSource = match (&own_params, &shared.params) {
        (Some(own), _) => own,
        (None, Some(shared)) => shared,
        (None, None) => &NoParams,
    };
    let namespaces: &dyn NamespaceSource = match (&own, shared.namespaces.as_deref()) {
        (None, Some(shared)) => shared,
        (Some(own), _) => own,
        (None, None) => &NoNamespaces {
            hint: "list the Namespace objects under the suite's spec.namespaces, or pass --namespaces FILE",
        },
    };
    suite
        .spec
        .cases
        .iter()
        .map(|case| {
            let source = admission::ClusterSource { namespaces, params };
            let outcome = run_case(case, base, &set, source)
                .with_context(|| format!("{}: case {:?}", file.display(), case.name))?;
            Ok(CaseResult {
                suite: suite.metadata.name.clone(),
                case: case.name.clone(),
                failure: outcome.failure,
                update: outcome.update,
                note: outcome.note,
            })
        })
        .collect()
}

/// A suite that tests nothing would pass, and results and `--update` find a case by its
/// name, so a suite needs cases and each its own name.
fn check_cases(cases: &[Case]) -> anyhow::Result<()> {
    if cases.is_empty() {
        bail!("the suite has no cases; a suite that tests nothing would pass");
    }
    let mut names = std::collections::HashSet::new();
    for case in cases {
        if !names.insert(case.name.as_str()) {
            bail!(
                "two cases are named {:?}; give each case its own name (the report and --update tell cases apart by name)",
                case.name
            );
        }
    }
    Ok(())
}

/// The suite's own namespaces, inline and from `namespacesFile`; `None` when it lists
/// none.
fn suite_namespaces(spec: &SuiteSpec, base: &Path) -> anyhow::Result<Option<NamespaceMap>> {
    let Some(list) = suite_objects(&spec.namespaces, spec.namespaces_file.as_deref(), base)? else {
        return Ok(None);
    };
    let namespaces = namespaces::read_namespaces(&list)?;
    Ok(Some(NamespaceMap::new(
        namespaces,
        "the suite's namespaces",
    )))
}

/// The suite's own parameter objects, inline and from `paramsFile`; `None` when it lists
/// none.
fn suite_params(spec: &SuiteSpec, base: &Path) -> anyhow::Result<Option<ParamObjects>> {
    let Some(list) = suite_objects(&spec.params, spec.params_file.as_deref(), base)? else {
        return Ok(None);
    };
    Ok(Some(crate::params::read_params(&list)?))
}

/// Objects a suite lists inline and in a file relative to it, as one `kind: List` text,
/// so that both are checked alike (an object given twice across the two is an error);
/// `None` when it lists none.
fn suite_objects(
    inline: &[Value],
    file: Option<&Path>,
    base: &Path,
) -> anyhow::Result<Option<String>> {
    if inline.is_empty() && file.is_none() {
        return Ok(None);
    }
    let mut objects = inline.to_vec();
    if let Some(path) = file {
        let path = base.join(path);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        objects.extend(read_objects(&text).with_context(|| format!("reading {}", path.display()))?);
    }
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects});
    Ok(Some(serde_json::to_string(&list)?))
}

/// The failure of a case (`None` when it passed), and the expectation it would pass.
struct CaseOutcome {
    failure: Option<String>,
    update: Option<test_update::NewExpect>,
    note: Option<String>,
}

fn run_case(
    case: &Case,
    base: &Path,
    set: &PolicySet,
    source: admission::ClusterSource<'_>,
) -> anyhow::Result<CaseOutcome> {
    let request = case_request(case, base)?;
    let original = request.object.as_ref().map(Tree::to_value);
    // The evaluation, and the invariants every evaluation holds (checked last, so that a
    // case whose only problems are its expectations can have them rewritten).
    let checked = admission::check::check(&request, set, source);
    let note = checked.second_review.as_ref().map(|patch| {
        format!(
            "a second review would change the object again ({}): the MutatingAdmissionPolicies \
             do not converge, which MAP allows; with reinvocationPolicy IfNeeded the apiserver \
             runs them at most twice",
            super::lint::counted(patch.0.len(), "patch operation", "patch operations")
        )
    });
    let evaluation = checked.evaluation;
    // Converted to JSON once: the expectations, the patch check and an update read it.
    let mutated = evaluation.mutated();
    // The object as the policies left it.
    let object = mutated.as_ref().or(original.as_ref());
    let mut problems = Vec::new();
    match &case.expect {
        Some(expect) => check_expect(expect, base, &evaluation, object, &mut problems)?,
        None => problems.push(format!(
            "the case has no expect block, so it cannot pass; the policies give {}. \
             `graft test --update` (on your machine) records that as its expectation",
            what_came_out(&evaluation)?
        )),
    }
    let expectation_problems = problems.len();
    problems.extend(checked.problems);
    if problems.is_empty() {
        return Ok(CaseOutcome {
            failure: None,
            update: None,
            note,
        });
    }
    // Only a case whose policies behave (the patch applies, a second pass is empty)
    // gets a new expectation.
    let update = if problems.len() == expectation_problems {
        let actual = test_update::Actual {
            denied: match &evaluation.outcome {
                Outcome::Denied { message, .. } => Some(message.clone()),
                Outcome::Allowed => None,
            },
            object: object.cloned().unwrap_or(Value::Null),
            patch: serde_json::to_value(&evaluation.patch)?,
            applied: evaluation.applied().map(str::to_string).collect(),
            warnings: evaluation.warnings.clone(),
        };
        Some(test_update::new_expect(case.expect.as_ref(), &actual))
    } else {
        None
    };
    policy_failures(&evaluation, &mut problems);
    // A diff ends its lines; the next problem starts on the line after, not one later.
    let problems: Vec<&str> = problems
        .iter()
        .map(|problem| problem.trim_end_matches('\n'))
        .collect();
    Ok(CaseOutcome {
        failure: Some(problems.join("\n")),
        update,
        note,
    })
}

fn case_request(case: &Case, base: &Path) -> anyhow::Result<AdmissionRequest<'static>> {
    if let Some(review_file) = &case.review_file {
        let body = std::fs::read(base.join(review_file))
            .with_context(|| format!("reading {}", review_file.display()))?;
        return Ok(admission::read_request(&body)?.request.into_owned());
    }
    let object = match (&case.object, &case.object_file) {
        (Some(object), None) => object.clone(),
        (None, Some(path)) => read_single_object(&base.join(path))?,
        _ => bail!("give exactly one of object, objectFile, reviewFile"),
    };
    let options = RequestOptions {
        operation: case.operation.clone(),
        namespace: case.namespace.clone(),
        resource: case.resource.clone(),
        old_object: case.old_object.clone(),
    };
    Ok(offline::request_for(object, &options, "graft-test"))
}

fn read_single_object(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut objects = read_objects(&text)?;
    if objects.len() != 1 {
        bail!(
            "{}: expected one object, found {}",
            path.display(),
            objects.len()
        );
    }
    Ok(objects.remove(0))
}

/// What the policies did, in a few words: the denial, the patch, or no change.
fn what_came_out(evaluation: &Evaluation<'_>) -> anyhow::Result<String> {
    Ok(match &evaluation.outcome {
        Outcome::Denied { message, .. } => format!("a denial: {message}"),
        Outcome::Allowed if evaluation.patch.0.is_empty() => "no change".to_string(),
        Outcome::Allowed => format!("the patch {}", serde_json::to_string(&evaluation.patch)?),
    })
}

/// The problems of the evaluation against what the case expects.
fn check_expect(
    expect: &Expect,
    base: &Path,
    evaluation: &Evaluation<'_>,
    object: Option<&Value>,
    problems: &mut Vec<String>,
) -> anyhow::Result<()> {
    check_outcome(expect, base, evaluation, object, problems)?;
    for expected in &expect.warnings {
        if !evaluation.warnings.iter().any(|w| w.contains(expected)) {
            problems.push(format!(
                "no warning contains {expected:?}; warnings: {:?}",
                evaluation.warnings
            ));
        }
    }
    if let Some(expected) = &expect.patch {
        let actual = serde_json::to_value(&evaluation.patch)?;
        if &actual != expected {
            problems.push(format!(
                "patch differs (- expected, + actual):\n{}",
                diff(expected, &actual)
            ));
        }
    }
    if let Some(expected) = &expect.applied {
        let applied: Vec<&str> = evaluation.applied().collect();
        if applied != expected.iter().map(String::as_str).collect::<Vec<_>>() {
            problems.push(format!(
                "applied policies: expected {expected:?}, got {applied:?}"
            ));
        }
    }
    Ok(())
}

/// Why each policy that failed did, next to the problems it explains: a policy skipped
/// under `failurePolicy: Ignore` shows in the diff only as a change that is missing
/// (`+[]`), and its warning is cut short. A failure the problems already quote in full
/// (a denial's message) is not repeated.
fn policy_failures(evaluation: &Evaluation<'_>, problems: &mut Vec<String>) {
    let said = problems.join("\n");
    let mut failures = Vec::new();
    for report in &evaluation.policies {
        let (failure, what) = match &report.result {
            PolicyResult::Ignored(failure) => {
                (failure, "failed and was skipped (failurePolicy: Ignore)")
            }
            PolicyResult::Failed(failure) => {
                (failure, "failed, denying the request (failurePolicy: Fail)")
            }
            _ => continue,
        };
        if said.contains(&failure.reason) {
            continue;
        }
        let name = match (&report.binding, &report.param) {
            (Some(binding), Some(param)) => {
                format!("{} (binding {binding}, param {param})", report.policy)
            }
            (Some(binding), None) => format!("{} (binding {binding})", report.policy),
            (None, _) => report.policy.clone(),
        };
        failures.push(format!("policy {name} {what}: {failure}"));
    }
    problems.extend(failures);
}

fn check_outcome(
    expect: &Expect,
    base: &Path,
    evaluation: &Evaluation<'_>,
    object: Option<&Value>,
    problems: &mut Vec<String>,
) -> anyhow::Result<()> {
    match (&evaluation.outcome, &expect.denied) {
        (Outcome::Denied { message, .. }, Some(expected)) => {
            if !message.contains(expected.as_str()) {
                problems.push(format!(
                    "denied with {message:?}, which does not contain {expected:?}"
                ));
            }
            return Ok(());
        }
        (Outcome::Denied { message, .. }, None) => {
            problems.push(format!("unexpected denial: {message}"));
            return Ok(());
        }
        (Outcome::Allowed, Some(expected)) => {
            problems.push(format!(
                "expected a denial containing {expected:?}, but the request was allowed"
            ));
            return Ok(());
        }
        (Outcome::Allowed, None) => {}
    }
    let expected_object = match (&expect.object, &expect.object_file) {
        (Some(object), None) => Some(object.clone()),
        (None, Some(path)) => Some(read_single_object(&base.join(path))?),
        (None, None) => None,
        (Some(_), Some(_)) => bail!("give at most one of expect.object and expect.objectFile"),
    };
    if expect.unchanged && !evaluation.patch.0.is_empty() {
        problems.push(format!(
            "expected no change, got patch {}",
            serde_json::to_string(&evaluation.patch).unwrap_or_default()
        ));
    }
    if let Some(expected) = expected_object {
        let actual = object.unwrap_or(&Value::Null);
        if *actual != expected {
            problems.push(format!(
                "object differs (- expected, + actual):\n{}",
                diff(&expected, actual)
            ));
        }
    }
    let says_something = expect.unchanged
        || expect.object.is_some()
        || expect.object_file.is_some()
        || expect.patch.is_some()
        || expect.applied.is_some()
        || !expect.warnings.is_empty();
    if !says_something {
        bail!(
            "expect needs at least one of object, objectFile, patch, unchanged, denied, warnings, applied"
        );
    }
    Ok(())
}

/// A line diff of the two values as YAML, keys sorted (the comparison ignores key order,
/// so the diff does too), then, for each long string that differs, where it differs.
fn diff(expected: &Value, actual: &Value) -> String {
    let expected_text = serde_yaml::to_string(&sorted(expected)).unwrap_or_default();
    let actual_text = serde_yaml::to_string(&sorted(actual)).unwrap_or_default();
    let mut out = similar::TextDiff::from_lines(&expected_text, &actual_text)
        .unified_diff()
        .context_radius(3)
        .to_string();
    let mut strings = Vec::new();
    differing_strings(expected, actual, &mut String::from("$"), &mut strings);
    for (path, expected, actual) in strings {
        out.push_str(&string_difference(&path, &expected, &actual));
    }
    out
}

/// Strings longer than this are pointed into when they differ: a one-line diff of a
/// 400-character annotation does not show where it differs.
const LONG_STRING: usize = 60;

/// The value with every map's keys in order.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|key| (key.clone(), sorted(&map[key])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The long strings at the same place in both values that differ, with their path.
fn differing_strings(
    expected: &Value,
    actual: &Value,
    path: &mut String,
    found: &mut Vec<(String, String, String)>,
) {
    match (expected, actual) {
        (Value::String(e), Value::String(a))
            if e != a && (e.chars().count() > LONG_STRING || a.chars().count() > LONG_STRING) =>
        {
            found.push((path.clone(), e.clone(), a.clone()));
        }
        (Value::Object(e), Value::Object(a)) => {
            for (key, value) in e {
                if let Some(other) = a.get(key) {
                    let len = path.len();
                    path.push_str(&format!("[{key:?}]"));
                    differing_strings(value, other, path, found);
                    path.truncate(len);
                }
            }
        }
        (Value::Array(e), Value::Array(a)) => {
            for (index, (value, other)) in e.iter().zip(a).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{index}]"));
                differing_strings(value, other, path, found);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// Where two strings first differ, with a little of each around that point.
fn string_difference(path: &str, expected: &str, actual: &str) -> String {
    let expected: Vec<char> = expected.chars().collect();
    let actual: Vec<char> = actual.chars().collect();
    let at = expected
        .iter()
        .zip(&actual)
        .take_while(|(e, a)| e == a)
        .count();
    let window = |chars: &[char]| {
        let start = at.saturating_sub(20);
        let end = (at + 40).min(chars.len());
        let text: String = chars[start.min(chars.len())..end].iter().collect();
        let before = if start > 0 { "…" } else { "" };
        let after = if end < chars.len() { "…" } else { "" };
        format!("{before}{text}{after}")
    };
    format!(
        "{path}: the strings differ from character {}:\n  - {}\n  + {}\n",
        at + 1,
        window(&expected),
        window(&actual)
    )
}

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("    {line}\n")).collect()
}

/// The suite files under `paths`, each real file once however many paths or links lead
/// to it, in the order they are first reached.
fn suite_files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut walk = Walk::default();
    for path in paths {
        if path.is_dir() {
            walk.directory(path)?;
        } else if path.is_file() {
            walk.file(path, true)?;
        } else {
            bail!("{}: no such file or directory", path.display());
        }
    }
    Ok(walk.files)
}

/// A walk of the suite directories. Directories and files are known by their canonical
/// paths: a symbolic link back up the tree (`ln -s .. dir/up`) would otherwise be
/// followed until the path grew too long, running the same suites again at each level.
#[derive(Default)]
struct Walk {
    seen: std::collections::HashSet<PathBuf>,
    files: Vec<PathBuf>,
}

impl Walk {
    /// Whether `path` is reached for the first time.
    fn first_visit(&mut self, path: &Path) -> anyhow::Result<bool> {
        let real =
            std::fs::canonicalize(path).with_context(|| format!("resolving {}", path.display()))?;
        Ok(self.seen.insert(real))
    }

    /// `given`: named on the command line, so a suite whatever it holds.
    fn file(&mut self, path: &Path, given: bool) -> anyhow::Result<()> {
        if (given || is_suite(path)) && self.first_visit(path)? {
            self.files.push(path.to_path_buf());
        }
        Ok(())
    }

    fn directory(&mut self, dir: &Path) -> anyhow::Result<()> {
        if !self.first_visit(dir)? {
            return Ok(());
        }
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .collect();
        entries.sort();
        for entry in entries {
            let hidden = entry
                .file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with('.'));
            if hidden {
                continue;
            }
            if entry.is_dir() {
                self.directory(&entry)?;
            } else {
                self.file(&entry, false)?;
            }
        }
        Ok(())
    }
}

/// A YAML file with a document of `kind: PolicyTest`, or of graft's apiVersion with a
/// kind other than MutationPolicy: a suite whose kind is mistyped is then refused with
/// the reason instead of skipped, which would pass a run that tested nothing. Read from
/// the parsed documents, so quotes and comments do not change the answer. A file that
/// is not YAML at all is a suite when its text names either, for the same reason.
fn is_suite(path: &Path) -> bool {
    let yaml = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
    if !yaml {
        return false;
    }
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    for document in serde_yaml::Deserializer::from_str(&text) {
        match serde_yaml::Value::deserialize(document) {
            Ok(document) if declares_suite(&document) => return true,
            Ok(_) => {}
            Err(_) => return text.contains("PolicyTest") || text.contains("graft.dev/"),
        }
    }
    false
}

fn declares_suite(document: &serde_yaml::Value) -> bool {
    let field = |name: &str| document.get(name).and_then(serde_yaml::Value::as_str);
    let kind = field("kind");
    kind == Some("PolicyTest")
        || (field("apiVersion").is_some_and(|version| version.starts_with("graft.dev/"))
            && kind != Some(crate::policy::model::KIND))
}

#[cfg(test)]
mod diff_tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn key_order_is_not_a_difference() {
        let expected = json!({"b": 1, "a": {"y": 2, "x": 3}});
        let actual = json!({"a": {"x": 3, "y": 2}, "b": 1});
        assert_eq!(expected, actual);
        assert_eq!(diff(&expected, &actual), "");
    }

    #[test]
    fn a_long_string_is_pointed_into_where_it_differs() {
        let networks = |second: &str| {
            format!(
                r#"[{{"name":"roce-net-1","namespace":"dynamo-system","interface":"net1"}},{{"name":"{second}","namespace":"dynamo-system","interface":"net2"}}]"#
            )
        };
        let expected = json!({"metadata": {"annotations": {"k8s.v1.cni.cncf.io/networks": networks("roce-net-2")}}});
        let actual = json!({"metadata": {"annotations": {"k8s.v1.cni.cncf.io/networks": networks("roce-net-9")}}});
        let text = diff(&expected, &actual);
        assert!(
            text.contains(concat!(
                r#"$["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]: "#,
                "the strings differ from character 89:\n",
                r#"  - …},{"name":"roce-net-2","namespace":"dynamo-system","interfac…"#,
                "\n",
                r#"  + …},{"name":"roce-net-9","namespace":"dynamo-system","interfac…"#,
                "\n"
            )),
            "{text}"
        );
    }
}
