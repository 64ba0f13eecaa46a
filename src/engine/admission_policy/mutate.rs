//! One mutation of a MutatingAdmissionPolicy applied to the object, as the apiserver's
//! patchers apply it (`mutating/patch/smd.go`, `json_patch.go`): an ApplyConfiguration
//! merged with structured-merge-diff's rules by the kind's schema, or a JSONPatch applied
//! with evanphx/json-patch v4's, then decoded strictly.

use crate::k8s::admission_request::GroupVersionKind;
use crate::k8s::apply_configuration;
use crate::k8s::json_patch_v4::{self, Applied, Operation};
use crate::k8s::schema::{self, TypeRef};
use crate::tree::{Map, Tree};

/// Why a mutation did not apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MutationError {
    /// A policy error, decided by the policy's failurePolicy: the apiserver's message.
    Policy(String),
    /// The request fails whatever the failurePolicy: the apiserver answers with this
    /// status (a JSONPatch whose result does not decode is a 500).
    Status { code: u16, message: String },
}

/// The schema of the request's kind; `None` for a kind graft has no schema for (a custom
/// resource).
pub fn schema_of(kind: &GroupVersionKind) -> Option<TypeRef<'static>> {
    schema::builtin()
        .ok()?
        .kind(&kind.group, &kind.version, &kind.kind)
}

/// Merges an ApplyConfiguration's value into `object`. The value's `apiVersion` and
/// `kind` are the object's, whatever it says, as the apiserver sets them.
pub fn apply_configuration<'t>(
    object: &Tree<'t>,
    object_is: apply_configuration::Live,
    value: Tree<'static>,
    kind: &GroupVersionKind,
) -> Result<Tree<'t>, MutationError> {
    let Some(root) = schema_of(kind) else {
        return Err(MutationError::Policy(format!(
            "graft has no schema for kind {}: an ApplyConfiguration merges by the kind's schema, \
             which graft has for the built-in kinds of Kubernetes v1.36 only; use a JSONPatch",
            kind.go_string()
        )));
    };
    let mut patch = match value {
        Tree::Map(map) => Map::clone(&map),
        other => {
            return Err(MutationError::Policy(format!(
                "unsupported return type from ApplyConfiguration expression: {}",
                other.type_name()
            )));
        }
    };
    patch.insert("apiVersion", Tree::from(kind.api_version()));
    patch.insert("kind", Tree::from(kind.kind.clone()));
    apply_configuration::apply(
        object,
        object_is,
        &Tree::from(patch),
        root,
        apply_configuration::Nulls::Cel,
    )
    .map_err(|error| MutationError::Policy(error.to_string()))
}

/// Applies a JSONPatch's operations to `object`: a failed `test` leaves the object as it
/// is (the whole mutation is a no-op); the result of a kind graft has a schema for must
/// decode strictly, as the apiserver decodes it, or the request fails with a 500.
pub fn json_patch<'t>(
    object: &Tree<'t>,
    operations: &[Operation<'t>],
    kind: &GroupVersionKind,
) -> Result<Tree<'t>, MutationError> {
    let patched = match json_patch_v4::apply(object, operations) {
        Ok(Applied::Patched(patched)) => patched,
        Ok(Applied::TestFailed { .. }) => return Ok(object.clone()),
        Err(json_patch_v4::Error::Internal(error)) => {
            return Err(MutationError::Status {
                code: 500,
                message: format!("Internal error occurred: {error}"),
            });
        }
        Err(error) => return Err(MutationError::Policy(format!("JSON Patch: {error}"))),
    };
    if let Some(root) = schema_of(kind) {
        let unknown = schema::unknown_fields(&patched, root);
        if !unknown.is_empty() {
            let fields: Vec<String> = unknown
                .iter()
                .map(|field| format!("unknown field {}", crate::k8s::go_text::quote(field)))
                .collect();
            return Err(MutationError::Status {
                code: 500,
                message: format!(
                    "Internal error occurred: strict decoding error: {}",
                    fields.join(", ")
                ),
            });
        }
    }
    Ok(patched)
}
