//! Reading policy sources: files and directories -> parsed documents, or findings.
//!
//! A directory is read non-recursively; entries whose names start with `.` (a mounted
//! ConfigMap's `..data` and `..2026_…` directories) are skipped, and every visible
//! `*.yaml`, `*.yml` and `*.json` file is read through its visible path, so a kubelet
//! symlink swap is seen as a whole. Such an entry that cannot be read (a broken symlink)
//! is an error, as a file named on the command line would be.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use super::admission_policy::model::{
    AdmissionPolicyDocument, BINDING_KIND, BindingDocument, GROUP, POLICY_KIND, VERSIONS,
};
use super::findings::Finding;
use super::model::{API_VERSION, KIND, PolicyDocument};

/// One source file's text, kept for the revision hash and for locating findings.
#[derive(Debug, Clone)]
pub struct Source {
    pub path: PathBuf,
    pub text: String,
}

/// One parsed document and where it came from.
#[derive(Debug, Clone)]
pub struct Located<T> {
    pub file: PathBuf,
    /// 1-based line of the document's first line in the file.
    pub first_line: usize,
    /// The document's own text, for locating compile findings.
    pub text: String,
    pub document: T,
}

/// A parsed graft `MutationPolicy`.
pub type ParsedDocument = Located<PolicyDocument>;

/// A parsed document of either dialect.
#[derive(Debug, Clone)]
pub enum Parsed {
    /// graft's own `MutationPolicy` (boxed: it is the largest by far).
    Mutation(Box<ParsedDocument>),
    /// Kubernetes' `MutatingAdmissionPolicy`.
    AdmissionPolicy(Located<AdmissionPolicyDocument>),
    /// Kubernetes' `MutatingAdmissionPolicyBinding`.
    Binding(Located<BindingDocument>),
}

/// Which kind of document a header names.
enum Dialect {
    Mutation,
    AdmissionPolicy,
    Binding,
}

impl Dialect {
    fn of(header: &Header) -> Option<Dialect> {
        if header.api_version == API_VERSION && header.kind == KIND {
            return Some(Dialect::Mutation);
        }
        let version = header.api_version.strip_prefix(GROUP)?.strip_prefix('/')?;
        if !VERSIONS.contains(&version) {
            return None;
        }
        match header.kind.as_str() {
            POLICY_KIND => Some(Dialect::AdmissionPolicy),
            BINDING_KIND => Some(Dialect::Binding),
            _ => None,
        }
    }
}

/// Reads every policy file named by `paths` (files, or directories of files).
pub fn read_sources(paths: &[PathBuf], findings: &mut Vec<Finding>) -> Vec<Source> {
    let mut sources = Vec::new();
    for path in paths {
        let metadata = match std::fs::metadata(path) {
            Ok(metadata) => metadata,
            Err(error) => {
                findings.push(Finding::error(path, format!("cannot read: {error}")));
                continue;
            }
        };
        if metadata.is_dir() {
            read_directory(path, &mut sources, findings);
        } else {
            read_file(path, &mut sources, findings);
        }
    }
    sources
}

fn read_directory(dir: &Path, sources: &mut Vec<Source>, findings: &mut Vec<Finding>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => {
            findings.push(Finding::error(
                dir,
                format!("cannot read directory: {error}"),
            ));
            return;
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|entry| is_policy_file_name(&entry.file_name().to_string_lossy()))
        .map(|entry| entry.path())
        .collect();
    files.sort();
    for file in files {
        match std::fs::metadata(&file) {
            Ok(metadata) if metadata.is_file() => read_file(&file, sources, findings),
            Ok(_) => {}
            // A policy that cannot be read must fail the set, not leave it out unnoticed:
            // a symlink whose target is gone is a policy missing from what gets served.
            Err(error) => findings.push(Finding::error(&file, unreadable(&file, &error))),
        }
    }
}

/// Why an entry that looks like a policy file cannot be read, naming a broken symlink's
/// target.
fn unreadable(path: &Path, error: &std::io::Error) -> String {
    match std::fs::read_link(path) {
        Ok(target) if error.kind() == std::io::ErrorKind::NotFound => format!(
            "broken symlink: its target {} does not exist",
            target.display()
        ),
        _ => format!("cannot read: {error}"),
    }
}

/// Whether a directory entry is read as a policy file.
pub fn is_policy_file_name(name: &str) -> bool {
    !name.starts_with('.')
        && (name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json"))
}

fn read_file(path: &Path, sources: &mut Vec<Source>, findings: &mut Vec<Finding>) {
    match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => sources.push(Source {
                path: path.to_path_buf(),
                text,
            }),
            Err(_) => findings.push(Finding::error(path, "file is not valid UTF-8")),
        },
        Err(error) => findings.push(Finding::error(path, format!("cannot read: {error}"))),
    }
}

/// Splits a source into YAML documents and parses each: a graft `MutationPolicy`, or a
/// Kubernetes `MutatingAdmissionPolicy` or `MutatingAdmissionPolicyBinding`.
pub fn parse_source(source: &Source, findings: &mut Vec<Finding>) -> Vec<Parsed> {
    let mut documents = Vec::new();
    for chunk in split_documents(&source.text) {
        if let Some(document) = parse_document(&source.path, &chunk, findings) {
            documents.push(document);
        }
    }
    documents
}

/// A document's text and its first line in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Chunk {
    first_line: usize,
    text: String,
}

/// Splits a YAML stream into its documents, dropping those that hold only comments or
/// blanks. A document's text starts on the `---` line when content follows the marker on
/// that line (`--- {apiVersion: ...}`) or when directives (`%YAML 1.2`) precede it, and
/// keeps them: libyaml then reads the document as the stream had it, and its lines stay the
/// file's. A byte-order mark, which kubectl strips, is not content.
fn split_documents(text: &str) -> Vec<Chunk> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut chunks = Vec::new();
    let mut current = String::new();
    let mut first_line = 1;
    // Directives belong to the document the next `---` starts, so that marker does not
    // split.
    let mut directives = false;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_end();
        if line.starts_with('%') && !has_content(&current) {
            if !directives {
                // Comments above the first directive are not part of any document.
                current.clear();
                first_line = index + 1;
                directives = true;
            }
        } else if let Some(rest) = after_marker(trimmed, "---") {
            if !std::mem::take(&mut directives) {
                chunks.push(Chunk {
                    first_line,
                    text: std::mem::take(&mut current),
                });
                if is_comment_or_blank(rest) {
                    first_line = index + 2;
                    continue;
                }
                first_line = index + 1;
            }
        } else if after_marker(trimmed, "...").is_some() {
            chunks.push(Chunk {
                first_line,
                text: std::mem::take(&mut current),
            });
            first_line = index + 2;
            directives = false;
            continue;
        }
        current.push_str(line);
        current.push('\n');
    }
    chunks.push(Chunk {
        first_line,
        text: current,
    });
    chunks.retain(|chunk| has_content(&chunk.text));
    chunks
}

/// What follows a document marker (`---`, `...`) that starts `line`: the marker must
/// stand alone or be followed by whitespace (`---x` is content).
fn after_marker<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(marker)?;
    (rest.is_empty() || rest.starts_with([' ', '\t'])).then_some(rest)
}

fn is_comment_or_blank(text: &str) -> bool {
    let text = text.trim();
    text.is_empty() || text.starts_with('#')
}

/// Whether a document's text holds a node: a line besides comments, blanks, directives
/// and a bare `---`.
fn has_content(text: &str) -> bool {
    text.lines().any(|line| {
        let bare_marker = after_marker(line.trim_end(), "---").is_some_and(is_comment_or_blank);
        !(is_comment_or_blank(line) || line.starts_with('%') || bare_marker)
    })
}

fn parse_document(file: &Path, chunk: &Chunk, findings: &mut Vec<Finding>) -> Option<Parsed> {
    let line_of = |location: Option<serde_yaml::Location>| {
        location.map(|location| chunk.first_line + location.line() - 1)
    };
    // A first, untyped pass gives syntax errors with their line, and lets the
    // apiVersion/kind check speak before unknown-field errors would.
    let value: serde_yaml::Value = match serde_yaml::from_str(&chunk.text) {
        Ok(value) => value,
        Err(error) => {
            findings.push(
                Finding::error(file, format!("invalid YAML: {}", strip_location(&error)))
                    .at_line(line_of(error.location()).or(Some(chunk.first_line))),
            );
            return None;
        }
    };
    let header = Header::read(&value);
    let line = |needle: &str| locate(chunk, needle);
    let Some(dialect) = Dialect::of(&header) else {
        let graft_version = header.api_version == API_VERSION;
        let (field, got) = if !graft_version && !header.api_version.starts_with(GROUP) {
            ("apiVersion", header.api_version.clone())
        } else {
            ("kind", header.kind.clone())
        };
        findings.push(
            Finding::error(
                file,
                format!(
                    "unsupported {field} {got:?}: expected apiVersion {API_VERSION} and kind \
                     {KIND}, or apiVersion {GROUP}/v1 and kind {POLICY_KIND} or {BINDING_KIND}"
                ),
            )
            .at_line(line(field).or(Some(chunk.first_line)))
            .in_policy(header.name.clone())
            .at_field(field),
        );
        return None;
    };
    match dialect {
        Dialect::Mutation => {
            if header.name.is_empty() {
                findings.push(
                    Finding::error(file, "missing metadata.name")
                        .at_line(line("metadata").or(Some(chunk.first_line)))
                        .at_field("metadata.name")
                        .with_hint(
                            "every policy needs a unique name; it appears in logs, metrics and \
                             warnings",
                        ),
                );
                return None;
            }
            deserialize(file, chunk, &header, &value, findings, UNKNOWN_FIELD_HINT)
                .map(|document| Parsed::Mutation(Box::new(document)))
        }
        // The apiserver's validation says what is missing (`metadata.name: Required value`).
        Dialect::AdmissionPolicy => deserialize(
            file,
            chunk,
            &header,
            &value,
            findings,
            ADMISSION_UNKNOWN_FIELD_HINT,
        )
        .map(Parsed::AdmissionPolicy),
        Dialect::Binding => deserialize(
            file,
            chunk,
            &header,
            &value,
            findings,
            ADMISSION_UNKNOWN_FIELD_HINT,
        )
        .map(Parsed::Binding),
    }
}

/// The document as `T`, or findings: every unknown field of a graft policy at once (from
/// its JSON Schema), else the one serde stopped at.
fn deserialize<T: DeserializeOwned>(
    file: &Path,
    chunk: &Chunk,
    header: &Header,
    value: &serde_yaml::Value,
    findings: &mut Vec<Finding>,
    unknown_hint: &str,
) -> Option<Located<T>> {
    let line = |needle: &str| locate(chunk, needle);
    let deserializer = serde_yaml::Deserializer::from_str(&chunk.text);
    match serde_path_to_error::deserialize::<_, T>(deserializer) {
        Ok(document) => Some(Located {
            file: file.to_path_buf(),
            first_line: chunk.first_line,
            text: chunk.text.clone(),
            document,
        }),
        Err(error)
            if error.inner().to_string().contains("unknown field")
                && unknown_hint == UNKNOWN_FIELD_HINT =>
        {
            // Every unknown field at once, not only the one serde stopped at.
            let unknown = serde_json::to_value(value)
                .map(|document| super::unknown_fields::unknown_fields(&document))
                .unwrap_or_default();
            if unknown.is_empty() {
                findings.push(deserialize_finding(
                    file,
                    chunk,
                    header,
                    &error,
                    unknown_hint,
                ));
            }
            for field in unknown {
                findings.push(
                    Finding::error(file, field.message())
                        .at_line(
                            locate_field(&chunk.text, chunk.first_line, &field.field)
                                .or_else(|| line(&field.key)),
                        )
                        .in_policy(header.name.clone())
                        .at_field(field.field)
                        .with_hint(UNKNOWN_FIELD_HINT),
                );
            }
            None
        }
        Err(error) => {
            findings.push(deserialize_finding(
                file,
                chunk,
                header,
                &error,
                unknown_hint,
            ));
            None
        }
    }
}

const UNKNOWN_FIELD_HINT: &str = "check the spelling against schema/mutationpolicy.schema.json";
const ADMISSION_UNKNOWN_FIELD_HINT: &str =
    "check the spelling against the admissionregistration.k8s.io/v1 API reference";

/// The finding for the error serde stopped at.
fn deserialize_finding(
    file: &Path,
    chunk: &Chunk,
    header: &Header,
    error: &serde_path_to_error::Error<serde_yaml::Error>,
    unknown_hint: &str,
) -> Finding {
    let line_of = |location: Option<serde_yaml::Location>| {
        location.map(|location| chunk.first_line + location.line() - 1)
    };
    let line = |needle: &str| locate(chunk, needle);
    let field = yaml_field_path(&error.path().to_string());
    let inner = error.inner();
    let last_key = field
        .rsplit(['.', '['])
        .next()
        .unwrap_or_default()
        .to_string();
    let at = line_of(inner.location())
        .or_else(|| locate_field(&chunk.text, chunk.first_line, &field))
        .or_else(|| line(&last_key));
    let message = strip_location(inner);
    // serde_yaml already prefixes some messages with the path.
    let message = match message.split_once(": ") {
        Some((prefix, rest)) if !prefix.contains(' ') && field.starts_with(prefix) => {
            rest.to_string()
        }
        _ => message,
    };
    let mut finding = Finding::error(file, message)
        .at_line(at)
        .in_policy(header.name.clone())
        .at_field(field);
    if inner.to_string().contains("unknown field") {
        finding = finding.with_hint(unknown_hint);
    }
    finding
}

/// The identifying fields of a document, read leniently before full parsing.
struct Header {
    api_version: String,
    kind: String,
    name: String,
}

impl Header {
    fn read(value: &serde_yaml::Value) -> Header {
        let text = |v: Option<&serde_yaml::Value>| {
            v.and_then(serde_yaml::Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Header {
            api_version: text(value.get("apiVersion")),
            kind: text(value.get("kind")),
            name: text(value.get("metadata").and_then(|m| m.get("name"))),
        }
    }
}

/// serde_path_to_error writes the document root as `.`.
fn yaml_field_path(path: &str) -> String {
    if path == "." {
        return String::new();
    }
    path.to_string()
}

/// serde_yaml appends "at line L column C"; the finding carries the line itself.
fn strip_location(error: &serde_yaml::Error) -> String {
    let text = error.to_string();
    match text.find(" at line ") {
        Some(index) => text[..index].to_string(),
        None => text,
    }
}

/// The 1-based file line of the first line in the chunk that mentions `needle` as a key
/// or a value, for findings found after parsing.
pub fn locate_in(text: &str, first_line: usize, needle: &str) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    let key = format!("{needle}:");
    let found = text
        .lines()
        .position(|line| {
            let line = line.trim_start().trim_start_matches("- ");
            line.starts_with(&key)
        })
        .or_else(|| text.lines().position(|line| line.contains(needle)))?;
    Some(first_line + found)
}

/// The 1-based file line where `field` (`spec.mutations[1].set.path`) is written,
/// found by following keys and list items through block-style YAML indentation;
/// the deepest line reached when the rest is in flow style or absent.
pub fn locate_field(text: &str, first_line: usize, field: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let mut position = 0;
    let mut parent_indent: Option<usize> = None;
    let mut found = None;
    for segment in field_segments(field) {
        let step = match segment {
            FieldSegment::Key(key) => find_key(&lines, position, parent_indent, key),
            FieldSegment::Index(index) => find_item(&lines, position, parent_indent, index),
        };
        let Some((line, indent, next)) = step else {
            break;
        };
        found = Some(first_line + line);
        position = next;
        parent_indent = Some(indent);
    }
    found
}

enum FieldSegment<'a> {
    Key(&'a str),
    Index(usize),
}

fn field_segments(field: &str) -> Vec<FieldSegment<'_>> {
    let mut segments = Vec::new();
    for part in field.split('.') {
        let (key, indices) = part
            .split_once('[')
            .map_or((part, ""), |(k, rest)| (k, rest));
        if !key.is_empty() {
            segments.push(FieldSegment::Key(key));
        }
        for index in indices.split('[') {
            if let Some(Ok(n)) = index.strip_suffix(']').map(str::parse) {
                segments.push(FieldSegment::Index(n));
            } else if !index.is_empty() {
                break;
            }
        }
    }
    segments
}

/// Column and text of a line's content, after its indentation and any `- ` markers.
fn content(line: &str) -> (usize, &str) {
    let mut column = line.len() - line.trim_start().len();
    let mut rest = line.trim_start();
    while let Some(after) = rest.strip_prefix("- ") {
        let trimmed = after.trim_start();
        column += rest.len() - trimmed.len();
        rest = trimmed;
    }
    (column, rest)
}

fn is_blank(line: &str) -> bool {
    let trimmed = line.trim();
    trimmed.is_empty() || trimmed.starts_with('#')
}

/// (line, key column, next search position) of `key:` inside the parent block.
fn find_key(
    lines: &[&str],
    from: usize,
    parent: Option<usize>,
    key: &str,
) -> Option<(usize, usize, usize)> {
    let mut first = true;
    for (i, line) in lines.iter().enumerate().skip(from) {
        if is_blank(line) {
            continue;
        }
        let (column, text) = content(line);
        let inside = parent.is_none_or(|p| column > p);
        if !inside && !first {
            return None;
        }
        first = false;
        if !inside {
            continue;
        }
        let bare = text.strip_prefix(key).is_some_and(|r| r.starts_with(':'));
        let quoted = text
            .strip_prefix(&format!("\"{key}\""))
            .is_some_and(|r| r.starts_with(':'));
        if bare || quoted {
            return Some((i, column, i + 1));
        }
    }
    None
}

/// (line, item column, next search position) of the `index`-th `- ` item of the block.
fn find_item(
    lines: &[&str],
    from: usize,
    parent: Option<usize>,
    index: usize,
) -> Option<(usize, usize, usize)> {
    let mut seen = 0;
    let mut item_column = None;
    for (i, line) in lines.iter().enumerate().skip(from) {
        if is_blank(line) {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        if parent.is_some_and(|p| indent < p)
            || (parent == Some(indent) && !line.trim_start().starts_with("- "))
        {
            return None;
        }
        if !line.trim_start().starts_with("- ") || item_column.is_some_and(|c| indent != c) {
            continue;
        }
        item_column.get_or_insert(indent);
        if seen == index {
            // Keys of the item sit right of the dash; search resumes on this line.
            return Some((i, indent, i));
        }
        seen += 1;
    }
    None
}

fn locate(chunk: &Chunk, needle: &str) -> Option<usize> {
    locate_in(&chunk.text, chunk.first_line, needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_documents_and_keeps_line_numbers() {
        let text = "# header\n---\na: 1\n---\n# only a comment\n---\nb: 2\n";
        let chunks = split_documents(text);
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].first_line, 3);
        assert_eq!(chunks[0].text, "a: 1\n");
        assert_eq!(chunks[1].first_line, 7);
    }

    #[test]
    fn a_document_may_start_on_its_marker_line() {
        let text = "# two\n--- {a: 1}\n--- # none\n--- |\n  text\n---\n...\n";
        let chunks = split_documents(text);
        let chunks: Vec<(usize, &str)> = chunks
            .iter()
            .map(|chunk| (chunk.first_line, chunk.text.as_str()))
            .collect();
        assert_eq!(chunks, [(2, "--- {a: 1}\n"), (4, "--- |\n  text\n")]);
        assert_eq!(split_documents("---x: 1\n")[0].text, "---x: 1\n");
    }

    #[test]
    fn directives_and_a_byte_order_mark_stay_out_of_the_way() {
        let text = "\u{feff}# c\n%YAML 1.2\n%TAG ! tag:x,2026:\n---\na: 1\n...\n%YAML 1.2\n---\n";
        let chunks = split_documents(text);
        assert_eq!(chunks.len(), 1, "{chunks:?}");
        assert_eq!(chunks[0].first_line, 2);
        assert_eq!(chunks[0].text, "%YAML 1.2\n%TAG ! tag:x,2026:\n---\na: 1\n");
        let value: serde_yaml::Value = serde_yaml::from_str(&chunks[0].text).unwrap();
        assert_eq!(value["a"], 1);
    }

    #[test]
    fn skips_dot_entries_and_other_extensions() {
        assert!(is_policy_file_name("a.yaml"));
        assert!(is_policy_file_name("a.yml"));
        assert!(is_policy_file_name("a.json"));
        assert!(!is_policy_file_name("..data"));
        assert!(!is_policy_file_name(".hidden.yaml"));
        assert!(!is_policy_file_name("README.md"));
    }

    #[test]
    fn locates_fields_by_path() {
        let text = "spec:\n  match:\n    resources: [pods]\n  mutations:\n    - set:\n        path: a\n    - remove:\n        path: b\n      when: x\n";
        let at = |field| locate_field(text, 10, field);
        assert_eq!(at("spec.match.resources"), Some(12));
        assert_eq!(at("spec.mutations[0]"), Some(14));
        assert_eq!(at("spec.mutations[1].remove.path"), Some(17));
        assert_eq!(at("spec.mutations[1].when"), Some(18));
        assert_eq!(at("spec.mutations[0].set.path"), Some(15));
        assert_eq!(at("spec.match.resources[0]"), Some(12));
    }

    #[test]
    fn field_paths_use_yaml_names() {
        assert_eq!(
            yaml_field_path("spec.match.resources"),
            "spec.match.resources"
        );
        assert_eq!(yaml_field_path("."), "");
    }
}
