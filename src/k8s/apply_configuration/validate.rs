//! SMD's validation of a value against its type (`typed/validate.go`), with its messages
//! and paths: the patch with duplicate list keys refused, the live object with them
//! allowed.
//!
//! Go walks a map in its random order and stops at the first undeclared field, so which
//! errors a map with several problems reports varies from run to run there; here the map
//! is walked in its JSON order.

use std::collections::HashSet;

use super::ValidationError;
use super::atom::{Kind, ListAtom, ListRelationship, MapAtom, ScalarKind, Side, atom, kind};
use super::keys::item_key;
use crate::k8s::go_text::{type_name, value_sharp_v, value_v};
use crate::k8s::schema::TypeRef;
use crate::tree::Tree;

/// `%v` of SMD's value holding a `structpb.NullValue`, whose `String()` is its name.
const CEL_NULL_V: &str = "&{NULL_VALUE}";

/// Whether a set or keyed list may hold one key twice.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Duplicates {
    Refused,
    Allowed,
}

/// What a null in the value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nulls {
    /// JSON's null, Go's nil: every type's value (a map, a list or a scalar left unset).
    Json,
    /// CEL's null, which the apiserver converts into Go's `structpb.NullValue` (the enum
    /// `NULL_VALUE`, 0): no type's value, refused wherever it is. Every null of an
    /// ApplyConfiguration's result is one, whether the expression wrote `null` or copied a
    /// field of `object` that was null.
    Cel,
}

/// Every error SMD finds in `value` as a `ty`, in its order.
pub(super) fn validate(
    value: &Tree<'_>,
    ty: TypeRef<'_>,
    duplicates: Duplicates,
    nulls: Nulls,
) -> Vec<ValidationError> {
    let mut walker = Walker {
        nulls,
        duplicates,
        path: String::new(),
        errors: Vec::new(),
    };
    walker.value(value, ty);
    walker.errors
}

struct Walker {
    nulls: Nulls,
    duplicates: Duplicates,
    /// The path of the value being walked, as SMD writes it.
    path: String,
    errors: Vec<ValidationError>,
}

impl Walker {
    fn error(&mut self, message: String) {
        self.errors.push(ValidationError {
            path: self.path.clone(),
            message,
        });
    }

    fn value(&mut self, value: &Tree<'_>, ty: TypeRef<'_>) {
        // A text node of the live object is the apiserver's own serialization of what
        // no policy changed (graft builds a text before it edits it), so it conforms;
        // reading it would build it for nothing.
        if matches!(value, Tree::Text(_)) && self.duplicates == Duplicates::Allowed {
            return;
        }
        match atom(ty).side(value) {
            Some(Side::Map(map)) => self.map(value, map),
            Some(Side::Scalar(scalar)) => self.scalar(value, scalar),
            Some(Side::List(list)) => self.list(value, list),
            None => {}
        }
    }

    /// `validateScalar`: null is every scalar.
    fn scalar(&mut self, value: &Tree<'_>, scalar: ScalarKind) {
        let value = value.resolved();
        let wrong = match (scalar, value) {
            (_, Tree::Null) if self.nulls == Nulls::Json => None,
            // `%T`, `%#v` and `%v` of a `structpb.NullValue`.
            (ScalarKind::Numeric, Tree::Null) => {
                Some("expected numeric (int or float), got structpb.NullValue".to_string())
            }
            (ScalarKind::String, Tree::Null) => {
                Some("expected string, got &value.valueUnstructured{Value:0}".to_string())
            }
            (ScalarKind::Boolean, Tree::Null) => {
                Some(format!("expected boolean, got {CEL_NULL_V}"))
            }
            (ScalarKind::Untyped, Tree::Null) => {
                Some(format!("expected any scalar, got {CEL_NULL_V}"))
            }
            (ScalarKind::Numeric, Tree::Number(_))
            | (ScalarKind::String, Tree::String(_))
            | (ScalarKind::Boolean, Tree::Bool(_)) => None,
            (ScalarKind::Untyped, _) if kind(value) == Kind::Scalar => None,
            (ScalarKind::Numeric, _) => Some(format!(
                "expected numeric (int or float), got {}",
                type_name(value)
            )),
            (ScalarKind::String, _) => {
                Some(format!("expected string, got {}", value_sharp_v(value)))
            }
            (ScalarKind::Boolean, _) => Some(format!("expected boolean, got {}", value_v(value))),
            (ScalarKind::Untyped, _) => {
                Some(format!("expected any scalar, got {}", value_v(value)))
            }
        };
        if let Some(message) = wrong {
            self.error(message);
        }
    }

    fn map(&mut self, value: &Tree<'_>, map: MapAtom<'_>) {
        let entries = match value.resolved() {
            Tree::Null if self.nulls == Nulls::Json => return,
            Tree::Null => return self.error(format!("expected map, got {CEL_NULL_V}")),
            Tree::Map(entries) => entries,
            other => return self.error(format!("expected map, got {}", value_v(other))),
        };
        for (key, item) in entries.iter() {
            let at = self.path.len();
            self.path.push('.');
            self.path.push_str(key);
            let Some(ty) = map.value_type(key) else {
                self.error("field not declared in schema".to_string());
                self.path.truncate(at);
                // SMD stops walking a map at its first undeclared field.
                return;
            };
            self.value(item, ty);
            self.path.truncate(at);
        }
    }

    fn list(&mut self, value: &Tree<'_>, list: ListAtom<'_>) {
        let items = match value.resolved() {
            Tree::Null if self.nulls == Nulls::Json => return,
            Tree::Null => return self.error(format!("expected list, got {CEL_NULL_V}")),
            Tree::List(items) => items,
            other => return self.error(format!("expected list, got {}", value_v(other))),
        };
        let mut seen = HashSet::new();
        for (index, item) in items.iter().enumerate() {
            let at = self.path.len();
            if matches!(list.relationship, ListRelationship::Atomic) {
                self.path.push_str(&format!("[{index}]"));
            } else if self.nulls == Nulls::Cel
                && matches!(item.resolved(), Tree::Null)
                && matches!(list.relationship, ListRelationship::Keyed(_))
            {
                // A `structpb.NullValue` is not SMD's null: to a keyed list, an item that
                // is not a map.
                return self.error(format!(
                    "element {index}: associative list with keys may not have non-map elements"
                ));
            } else {
                let key = match item_key(&list, item) {
                    Ok(key) => key,
                    Err(reason) => {
                        // Without a key SMD cannot name the item's path, and stops.
                        return self.error(format!("element {index}: {reason}"));
                    }
                };
                if !seen.insert(key.canon()) && self.duplicates == Duplicates::Refused {
                    self.error(format!("duplicate entries for key {key}"));
                }
                self.path.push_str(&key.to_string());
            }
            self.value(item, list.element);
            self.path.truncate(at);
        }
    }
}
