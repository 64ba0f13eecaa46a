//! What of a request a compiled policy can read or write, so the server parses no more
//! of a review than the candidate policies can see, and looks up the request's
//! namespace only for policies that need it.
//!
//! Two parts of a review are large and rarely looked at: `metadata.managedFields` (a
//! third of a pod as the apiserver sends it) and `oldObject` (the whole previous object
//! on every UPDATE). The answers here are conservative: anything the analysis cannot
//! follow (a descendant or wildcard path, `object` handed whole to a function, a
//! computed fragment merged at the root) counts as reading everything.

use json_patch::PatchOperation;
use serde_json::Value;

use super::compiled::{CompiledPolicy, Conditions, MutationKind, ValueSource};
use crate::jsonpath::JsonPath;

const MANAGED_FIELDS: [&str; 2] = ["metadata", "managedFields"];

impl CompiledPolicy {
    /// Whether the policy can read or write `metadata.managedFields` of the object.
    pub fn sees_managed_fields(&self) -> bool {
        let parts = self.needs.object_parts;
        let cel = self.needs.object && (parts.is_all() || parts.includes_whole("metadata"));
        cel || conditions_see(&self.matcher)
            || self.exclude.as_ref().is_some_and(conditions_see)
            || self.mutations.iter().any(|m| match &m.foreach {
                // The mutation's paths are below the elements, so it sees no more than they do.
                Some(foreach) => path_sees(&foreach.path),
                None => mutation_sees(&m.kind),
            })
    }

    /// Whether an expression of the policy refers to `oldObject`.
    pub fn reads_old_object(&self) -> bool {
        self.needs.old_object
    }

    /// Whether the policy can need the data of the request's namespace: a non-empty
    /// `namespaceSelector` (in `match` or `exclude`), or an expression reading
    /// `namespaceObject`.
    pub fn needs_namespace(&self) -> bool {
        let selects = |conditions: &Conditions| {
            conditions
                .namespace_selector
                .as_ref()
                .is_some_and(|requirements| !requirements.is_empty())
        };
        self.needs.namespace_object
            || selects(&self.matcher)
            || self.exclude.as_ref().is_some_and(selects)
    }
}

fn conditions_see(conditions: &Conditions) -> bool {
    conditions.fields.iter().any(|test| path_sees(&test.path))
}

fn mutation_sees(kind: &MutationKind) -> bool {
    match kind {
        MutationKind::Set { path, .. }
        | MutationKind::Append { path, .. }
        | MutationKind::Remove { path } => path_sees(path),
        MutationKind::Merge { path, value, .. } => {
            let keys: Vec<&str> = match path {
                None => Vec::new(),
                Some(path) if !is_plain(path) => return true,
                Some(path) => path.leading_keys().collect(),
            };
            match remaining(&keys) {
                Remaining::Away => false,
                Remaining::Below(rest) => fragment_may_hold(value, rest),
            }
        }
        MutationKind::JsonPatch(patch) => patch.0.iter().any(operation_sees),
    }
}

/// Where a location stands relative to `metadata.managedFields`.
enum Remaining<'k> {
    /// Beside it: nothing under the location is managedFields.
    Away,
    /// Above it (or at it): these keys below the location lead to it.
    Below(&'k [&'k str]),
}

fn remaining(keys: &[&str]) -> Remaining<'static> {
    for (key, wanted) in keys.iter().zip(MANAGED_FIELDS) {
        if *key != wanted {
            return Remaining::Away;
        }
    }
    Remaining::Below(&MANAGED_FIELDS[keys.len().min(MANAGED_FIELDS.len())..])
}

/// A path made of object keys only (`$` included).
fn is_plain(path: &JsonPath) -> bool {
    path.leading_keys().count() == path.segment_count()
}

/// Whether a path may select a value at, above or under `metadata.managedFields`.
fn path_sees(path: &JsonPath) -> bool {
    let keys: Vec<&str> = path.leading_keys().collect();
    // A path that stops at or above managedFields selects a value that includes it.
    matches!(remaining(&keys), Remaining::Below(_))
}

/// Whether a raw JSON Patch operation reads or writes at, above or under managedFields.
fn operation_sees(operation: &PatchOperation) -> bool {
    let (path, from) = match operation {
        PatchOperation::Add(op) => (&op.path, None),
        PatchOperation::Remove(op) => (&op.path, None),
        PatchOperation::Replace(op) => (&op.path, None),
        PatchOperation::Move(op) => (&op.path, Some(&op.from)),
        PatchOperation::Copy(op) => (&op.path, Some(&op.from)),
        PatchOperation::Test(op) => (&op.path, None),
    };
    std::iter::once(path).chain(from).any(|pointer| {
        let tokens: Vec<String> = pointer
            .tokens()
            .map(|token| token.decoded().into_owned())
            .collect();
        let keys: Vec<&str> = tokens.iter().map(String::as_str).collect();
        matches!(remaining(&keys), Remaining::Below(_))
    })
}

/// Whether merging `value` may write under `rest` (keys below the merge location).
fn fragment_may_hold(value: &ValueSource, rest: &[&str]) -> bool {
    match value {
        ValueSource::Literal(literal) => literal_may_hold(literal, rest),
        ValueSource::Template(template) => template.may_hold(rest),
    }
}

fn literal_may_hold(value: &Value, rest: &[&str]) -> bool {
    let Some((first, deeper)) = rest.split_first() else {
        return true;
    };
    match value {
        Value::Object(map) => map
            .get(*first)
            .is_some_and(|inner| literal_may_hold(inner, deeper)),
        // A merge of anything but a map replaces the location, and what was there.
        _ => true,
    }
}
