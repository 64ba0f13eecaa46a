//! A MutatingAdmissionPolicy's ApplyConfiguration merged into the object as
//! kube-apiserver v1.36.2 merges it (`ApplyStructuredMergeDiff`,
//! `admission/plugin/policy/mutating/patch/smd.go`), with structured-merge-diff v6's
//! validation and merge:
//!
//! 1. the patch is validated against the kind's type: fields not declared, values of the
//!    wrong type, list items without keys, keys twice ([`ApplyError::InvalidPatch`]);
//! 2. the patch may set no atomic list, map or struct, even to an empty or unchanged
//!    value; only the patch is walked, into declared fields and list items
//!    ([`ApplyError::AtomicPaths`]);
//! 3. the live object is validated, keys twice allowed ([`ApplyError::InvalidObject`]);
//! 4. the two merge: the patch's scalars and atomic values replace the live ones, maps
//!    and structs merge key by key, sets and keyed lists item by item in SMD's order;
//!    nothing is ever removed.
//!
//! This is not server-side apply: no field manager, no conflicts. The result shares every
//! subtree of the live object the patch does not change, and keeps its maps' order.

mod atom;
mod keys;
mod merge;
mod validate;

#[cfg(test)]
mod properties;
#[cfg(test)]
mod smd_tests;
#[cfg(test)]
mod tests;

use std::fmt;

use atom::atom;
use validate::Duplicates;
pub use validate::Nulls;

use crate::k8s::schema::TypeRef;
use crate::tree::Tree;

/// Why an ApplyConfiguration could not be merged. The message is the apiserver's, after
/// `policy 'P' with binding 'B' denied request: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The patch does not fit the kind's schema.
    #[error("error applying patch: failed to convert patch object to typed object: {0}")]
    InvalidPatch(ValidationErrors),
    /// The patch sets atomic lists, maps or structs, at these paths.
    #[error(
        "error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}",
        .0.join(", ")
    )]
    AtomicPaths(Vec<String>),
    /// The live object does not fit the kind's schema.
    #[error("error applying patch: failed to convert original object to typed object: {0}")]
    InvalidObject(ValidationErrors),
}

/// One problem SMD's validation found, at a path it writes as `.spec.containers[name="a"]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Every problem found, written as SMD writes them: one alone, several as `errors:` and a
/// line each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationErrors(pub Vec<ValidationError>);

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "{one}"),
            errors => {
                f.write_str("errors:")?;
                for error in errors {
                    write!(f, "\n  {error}")?;
                }
                Ok(())
            }
        }
    }
}

/// What is known of the live object's conformance to its schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Live {
    /// The object as the apiserver decoded it into its type: it conforms, and SMD's
    /// validation of it (the walk of the whole object) would find nothing.
    Decoded,
    /// Anything else (graft's own policies wrote it, or a file gave it): validated.
    Unchecked,
}

/// The object an ApplyConfiguration makes of `live`: `patch` is the configuration's value
/// with `apiVersion` and `kind` set to the object's, and `root` the type of that kind;
/// `nulls` what the patch's nulls are (a CEL result's, or JSON's in SMD's own tests).
pub fn apply<'t>(
    live: &Tree<'t>,
    live_is: Live,
    patch: &Tree<'t>,
    root: TypeRef<'_>,
    nulls: Nulls,
) -> Result<Tree<'t>, ApplyError> {
    let errors = validate::validate(patch, root, Duplicates::Refused, nulls);
    if !errors.is_empty() {
        return Err(ApplyError::InvalidPatch(ValidationErrors(errors)));
    }
    let mut atomics = Vec::new();
    find_atomics(patch, root, &mut String::new(), &mut atomics);
    if !atomics.is_empty() {
        return Err(ApplyError::AtomicPaths(atomics));
    }
    if live_is == Live::Unchecked {
        let errors = validate::validate(live, root, Duplicates::Allowed, Nulls::Json);
        if !errors.is_empty() {
            return Err(ApplyError::InvalidObject(ValidationErrors(errors)));
        }
    }
    Ok(merge::merge(Some(live), patch, root))
}

/// The paths of the atomic lists, maps and structs `value` sets (`findAtomics`): a map
/// where the type has an atomic map side, a list where it has an atomic list side, even
/// empty; then the declared fields of a map and every item of a list, by index. Values
/// of granular maps and fields a struct does not declare are not looked into, so an
/// atomic value there is replaced by the merge without complaint.
fn find_atomics(value: &Tree<'_>, ty: TypeRef<'_>, path: &mut String, found: &mut Vec<String>) {
    let atom = atom(ty);
    match value.resolved() {
        Tree::Map(entries) => {
            let Some(map) = atom.map else { return };
            if map.atomic {
                found.push(path.clone());
            }
            for (key, item) in entries.iter() {
                if let Some(field) = map.field(key) {
                    let at = path.len();
                    path.push('.');
                    path.push_str(key);
                    find_atomics(item, field, path, found);
                    path.truncate(at);
                }
            }
        }
        Tree::List(items) => {
            let Some(list) = atom.list else { return };
            if matches!(list.relationship, atom::ListRelationship::Atomic) {
                found.push(path.clone());
            }
            for (index, item) in items.iter().enumerate() {
                let at = path.len();
                path.push_str(&format!("[{index}]"));
                find_atomics(item, list.element, path, found);
                path.truncate(at);
            }
        }
        _ => {}
    }
}
