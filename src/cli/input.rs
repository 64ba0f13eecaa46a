//! Reading command inputs: a file path or `-` for standard input.
//!
//! The commands that evaluate objects or reviews (`apply`, `explain`, `review`) take their
//! inputs alike: any number of files, `-` among them for standard input, and standard input
//! when no file is given, so that they sit at the end of a pipe as they are.

use std::io::{IsTerminal as _, Read};
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::policy::Operation;

/// The name of standard input among a command's files.
const STDIN: &str = "-";

fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == STDIN
}

/// The files a command reads, in order: those given, or standard input when none is.
/// Standard input can be read only once, so `-` may be given once.
pub fn input_files(files: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    if files.is_empty() {
        return Ok(vec![PathBuf::from(STDIN)]);
    }
    if files.iter().filter(|file| is_stdin(file)).count() > 1 {
        anyhow::bail!("standard input (-) is given more than once: it can be read only once");
    }
    Ok(files.to_vec())
}

/// The one of `files` (as [`input_files`] returns them) that is standard input, if any:
/// for [`namespace_source`] and [`param_objects`], which may not read it as well.
pub fn stdin_input(files: &[PathBuf]) -> Option<&Path> {
    files
        .iter()
        .map(PathBuf::as_path)
        .find(|file| is_stdin(file))
}

/// Reads a file, or standard input for `-`.
pub fn read_input(path: &Path) -> anyhow::Result<Vec<u8>> {
    if is_stdin(path) {
        let stdin = std::io::stdin();
        // Without a file, a command run by hand waits on the terminal for input that may
        // never come; saying so beats a silent hang.
        if stdin.is_terminal() {
            say!("note: reading standard input; end it with Ctrl-D, or give a file");
        }
        let mut bytes = Vec::new();
        stdin
            .lock()
            .read_to_end(&mut bytes)
            .context("reading standard input")?;
        return Ok(bytes);
    }
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// How an input is named in messages: its path, or `<stdin>` for `-`.
pub fn input_name(path: &Path) -> String {
    if is_stdin(path) {
        return "<stdin>".to_string();
    }
    path.display().to_string()
}

/// Loads a policy set or explains why not, printing every finding.
pub fn load_policies(paths: &[PathBuf]) -> anyhow::Result<crate::policy::PolicySet> {
    match crate::policy::load(paths) {
        Ok(loaded) => {
            for warning in &loaded.warnings {
                say!("{warning}");
            }
            Ok(loaded.set)
        }
        Err(findings) => {
            for finding in &findings.0 {
                say!("{finding}");
            }
            anyhow::bail!(
                "the policy set has {} problem(s); run graft lint",
                findings.0.len()
            )
        }
    }
}

/// The namespace source of an offline command: the Namespace objects in `file`, or none
/// (a policy that needs namespace data then fails, saying to pass `--namespaces`).
/// `input` is the command's input that reads standard input ([`stdin_input`]), if any:
/// standard input cannot be read twice.
pub fn namespace_source(
    file: Option<&Path>,
    input: Option<&Path>,
) -> anyhow::Result<Box<dyn crate::namespaces::NamespaceSource>> {
    use crate::namespaces::{NamespaceMap, NoNamespaces, read_namespaces};
    let stdin = |path: Option<&Path>| path.is_some_and(is_stdin);
    if stdin(file) && stdin(input) {
        anyhow::bail!(
            "--namespaces and the input cannot both be standard input (-, or no input file): give one of them as a file"
        );
    }
    let Some(file) = file else {
        return Ok(Box::new(NoNamespaces {
            hint: "pass the Namespace objects with --namespaces FILE",
        }));
    };
    let text = String::from_utf8(read_input(file)?)
        .with_context(|| format!("{}: not UTF-8 text", file.display()))?;
    let namespaces = read_namespaces(&text)
        .with_context(|| format!("reading namespaces from {}", file.display()))?;
    Ok(Box::new(NamespaceMap::new(
        namespaces,
        "the --namespaces file",
    )))
}

/// The parameter objects of an offline command: those in `file`, or none (a binding
/// whose `paramRef` finds nothing then acts on its `parameterNotFoundAction`). `input` is
/// as for [`namespace_source`].
pub fn param_objects(
    file: Option<&Path>,
    input: Option<&Path>,
) -> anyhow::Result<crate::params::ParamObjects> {
    let stdin = |path: Option<&Path>| path.is_some_and(is_stdin);
    if stdin(file) && stdin(input) {
        anyhow::bail!(
            "--params and the input cannot both be standard input (-, or no input file): give one of them as a file"
        );
    }
    let Some(file) = file else {
        return Ok(crate::params::ParamObjects::default());
    };
    let text = String::from_utf8(read_input(file)?)
        .with_context(|| format!("{}: not UTF-8 text", file.display()))?;
    crate::params::read_params(&text)
        .with_context(|| format!("reading parameter objects from {}", file.display()))
}

/// The input of the commands that evaluate plain objects (`apply`, `explain`): the
/// policies, the objects, and how to turn each object into an admission request.
#[derive(Debug, clap::Args)]
pub struct ObjectInput {
    /// Policy files or directories.
    #[arg(long, default_value = "policies")]
    pub policies: Vec<PathBuf>,
    /// The request's operation. At DELETE the request carries only the old object,
    /// which the webhook cannot change.
    #[arg(long, value_enum, ignore_case = true, default_value_t = Operation::Create)]
    pub operation: Operation,
    /// The request namespace (default: the object's, else `default`; none for
    /// cluster-scoped kinds).
    #[arg(long)]
    pub namespace: Option<String>,
    /// RESOURCE or RESOURCE/SUBRESOURCE (default: derived from the object's kind).
    #[arg(long)]
    pub resource: Option<String>,
    /// Namespace objects (YAML or JSON; several documents or `kind: List`) for policies
    /// that use `namespaceSelector` or `namespaceObject`.
    #[arg(long, value_name = "FILE")]
    pub namespaces: Option<PathBuf>,
    /// Parameter objects (YAML or JSON, any kind) for MutatingAdmissionPolicy bindings
    /// with a `paramRef`.
    #[arg(long, value_name = "FILE")]
    pub params: Option<PathBuf>,
    /// Files of YAML or JSON objects (several documents, or `kind: List`); `-` for
    /// standard input, which is also read when no file is given.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

// Clap offers and checks exactly the operations a policy can match.
impl clap::ValueEnum for Operation {
    fn value_variants<'a>() -> &'a [Self] {
        &Operation::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.as_str()))
    }
}

/// What [`ObjectInput`] reads: the policy set, the namespace source and one admission
/// request per object.
pub struct Requests {
    pub set: crate::policy::PolicySet,
    pub namespaces: Box<dyn crate::namespaces::NamespaceSource>,
    pub params: crate::params::ParamObjects,
    pub requests: Vec<crate::admission::AdmissionRequest<'static>>,
}

impl Requests {
    /// Where the reviews of these requests find namespaces and parameter objects.
    pub fn cluster_source(&self) -> crate::admission::ClusterSource<'_> {
        crate::admission::ClusterSource {
            namespaces: self.namespaces.as_ref(),
            params: &self.params,
        }
    }
}

impl ObjectInput {
    /// Loads the policies and the namespaces and reads the objects. An AdmissionReview
    /// among them is taken as the request it carries (as `graft review` would), not as an
    /// object; every other object's request gets the uid `uid_prefix-INDEX`.
    pub fn read(&self, uid_prefix: &str) -> anyhow::Result<Requests> {
        let files = input_files(&self.files)?;
        let set = load_policies(&self.policies)?;
        let namespaces = namespace_source(self.namespaces.as_deref(), stdin_input(&files))?;
        let params = param_objects(self.params.as_deref(), stdin_input(&files))?;
        let options = crate::admission::offline::RequestOptions {
            operation: self.operation.as_str().to_string(),
            namespace: self.namespace.clone(),
            resource: self.resource.clone(),
            old_object: None,
        };
        let mut requests = Vec::new();
        for file in &files {
            let name = input_name(file);
            let text = String::from_utf8(read_input(file)?)
                .with_context(|| format!("{name}: not UTF-8 text"))?;
            let objects = crate::k8s::objects::read_objects_in(&name, &text)?;
            // Nothing to evaluate is a mistake (a wrong file, an empty pipe), not a success.
            if objects.is_empty() {
                anyhow::bail!(
                    "{name}: holds no object (only comments, empty documents or an empty kind: List)"
                );
            }
            for (at, object) in objects.into_iter().enumerate() {
                if object.get("kind").and_then(serde_json::Value::as_str) == Some("AdmissionReview")
                {
                    let body = serde_json::to_vec(&object)?;
                    let review = crate::admission::read_request(&body)
                        .with_context(|| format!("{name}: object {}", at + 1))?;
                    requests.push(review.request.into_owned());
                } else {
                    // Numbered across the files, so no two requests share a uid.
                    let uid = format!("{uid_prefix}-{}", requests.len());
                    requests.push(crate::admission::offline::request_for(
                        object, &options, &uid,
                    ));
                }
            }
        }
        Ok(Requests {
            set,
            namespaces,
            params,
            requests,
        })
    }
}
