//! What one answered review asks the events task to record, and the names Kubernetes
//! needs for it. Pure: built from what the review already holds, on the review's thread,
//! as one small owned value, so handing it over costs no more than a few string copies.

use crate::admission::{AdmissionRequest, Reviewed};
use crate::engine::Outcome;

/// The longest note the Events API accepts, in bytes.
pub const NOTE_LIMIT: usize = 1024;

/// The longest Event name (a DNS subdomain).
const NAME_LIMIT: usize = 253;

/// Why graft records an Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// A policy changed the object.
    Mutated,
    /// A `failurePolicy: Fail` policy failed, so graft denied the object.
    Denied,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Mutated => "Mutated",
            Reason::Denied => "Denied",
        }
    }

    /// The Event's `type`: a denial is something to look at, a mutation is not.
    pub fn event_type(self) -> &'static str {
        match self {
            Reason::Mutated => "Normal",
            Reason::Denied => "Warning",
        }
    }
}

/// The object an Event is about, as an ObjectReference names it.
///
/// At CREATE the object has no uid yet (the apiserver assigns it after admission), and
/// an object created with `generateName` has no name either: `name` is then the
/// `generateName` prefix as the request carries it (`web-7d9f8-`), and `uid` is `None`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Regarding {
    /// `v1`, `apps/v1`: the request's kind's group and version.
    pub api_version: String,
    pub kind: String,
    /// `None` for a cluster-scoped object (its Events go to `default`, as client-go's do).
    pub namespace: Option<String>,
    pub name: String,
    pub uid: Option<String>,
}

/// One thing to record: why, about what, and the human-readable note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub reason: Reason,
    pub regarding: Regarding,
    pub note: String,
}

/// The notice for an answered review: `Denied` with the denial message, `Mutated` with
/// the policies that changed the object and the patch size, nothing for a review that
/// changed nothing. A dry run records nothing: it must leave no trace.
pub fn notice(reviewed: &Reviewed) -> Option<Notice> {
    let request = &reviewed.review.request;
    if request.dry_run == Some(true) {
        return None;
    }
    let evaluation = &reviewed.evaluation;
    let (reason, note) = match &evaluation.outcome {
        Outcome::Denied { message, .. } => (Reason::Denied, message.clone()),
        Outcome::Allowed if evaluation.patch.0.is_empty() => return None,
        Outcome::Allowed => {
            let policies: Vec<&str> = evaluation.applied().collect();
            let operations = evaluation.patch.0.len();
            let plural = if operations == 1 { "" } else { "s" };
            (
                Reason::Mutated,
                format!(
                    "mutated by {}: {operations} patch operation{plural}",
                    policies.join(", ")
                ),
            )
        }
    };
    Some(Notice {
        reason,
        regarding: regarding(request)?,
        note: truncate(note, NOTE_LIMIT),
    })
}

/// The reference for the request's object; `None` when it has neither a name nor a
/// `generateName`, which the apiserver never sends.
fn regarding(request: &AdmissionRequest<'_>) -> Option<Regarding> {
    // Field by field, the object's and else the old object's: a PUT may leave out
    // `metadata.uid`, which the apiserver fills in from the stored object only after
    // admission.
    let metadata = |field: &str| {
        [request.object.as_ref(), request.old_object.as_ref()]
            .into_iter()
            .flatten()
            .find_map(|object| object.pointer(&format!("/metadata/{field}"))?.as_str())
            .filter(|value| !value.is_empty())
            .map(str::to_string)
    };
    let name = request
        .name
        .clone()
        .filter(|name| !name.is_empty())
        .or_else(|| metadata("name"))
        .or_else(|| metadata("generateName"))?;
    let kind = &request.kind;
    let api_version = if kind.group.is_empty() {
        kind.version.clone()
    } else {
        format!("{}/{}", kind.group, kind.version)
    };
    Some(Regarding {
        api_version,
        kind: kind.kind.clone(),
        namespace: request.namespace.clone().filter(|ns| !ns.is_empty()),
        name,
        uid: metadata("uid"),
    })
}

/// A name for a new Event about `regarding`: the object's name (or its `generateName`
/// prefix, which ends in `-` and so is no valid name on its own) and the time in
/// nanoseconds in hex, as client-go names Events. Always a valid DNS subdomain.
pub fn event_name(regarding: &Regarding, unix_nanos: i64) -> String {
    let suffix = format!(".{unix_nanos:x}");
    let lowered: String = regarding
        .name
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-' | '.') => c,
            _ => '-',
        })
        .take(NAME_LIMIT - suffix.len())
        .collect();
    // Each dot-separated label must start and end with a letter or digit.
    let labels: Vec<&str> = lowered
        .split('.')
        .map(|label| label.trim_matches('-'))
        .filter(|label| !label.is_empty())
        .collect();
    let mut base = labels.join(".");
    if base.is_empty() {
        base.push_str("graft");
    }
    base + &suffix
}

/// `text` cut to at most `limit` bytes on a character boundary, marked with `…` when cut.
fn truncate(mut text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push('…');
    text
}

#[cfg(test)]
#[path = "notice_tests.rs"]
mod tests;
