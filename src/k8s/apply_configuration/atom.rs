//! A table type as structured-merge-diff sees it: an "atom" with up to three sides, a
//! scalar, a list and a map, of which the value at hand picks one (`deduce`). Typed
//! fields have one side; `any`, `int-or-string` and `any-atomic`, whose schemas have no
//! `type`, have all three (kube-openapi's `schemaconv`, `__untyped_deduced_` and
//! `__untyped_atomic_`).

use crate::k8s::schema::{ListKey, ListKind, Scalar, Shape, StructType, TypeRef};
use crate::tree::Tree;

/// The sides of a type.
#[derive(Clone, Copy)]
pub(super) struct Atom<'s> {
    pub scalar: Option<ScalarKind>,
    pub list: Option<ListAtom<'s>>,
    pub map: Option<MapAtom<'s>>,
}

/// SMD's scalar types: what `validateScalar` checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ScalarKind {
    String,
    Numeric,
    Boolean,
    /// Any scalar (`untyped`).
    Untyped,
}

#[derive(Clone, Copy)]
pub(super) struct ListAtom<'s> {
    pub element: TypeRef<'s>,
    pub relationship: ListRelationship<'s>,
}

/// How a list's items relate: replaced together, or each identified by a key.
#[derive(Clone, Copy)]
pub(super) enum ListRelationship<'s> {
    Atomic,
    /// A set: scalar items, each its own key.
    Set,
    /// Map items keyed by these fields.
    Keyed(&'s [ListKey]),
}

#[derive(Clone, Copy)]
pub(super) struct MapAtom<'s> {
    /// The declared fields, for a struct.
    pub fields: Option<StructType<'s>>,
    /// The type of a key that is not a declared field; `None`: such a key is refused.
    pub element: Option<TypeRef<'s>>,
    pub atomic: bool,
}

/// Which side of an atom a value takes, in the order SMD's `handleAtom` tries them.
#[derive(Clone, Copy)]
pub(super) enum Side<'s> {
    Map(MapAtom<'s>),
    Scalar(ScalarKind),
    List(ListAtom<'s>),
}

impl<'s> MapAtom<'s> {
    /// The type of a declared field.
    pub fn field(&self, key: &str) -> Option<TypeRef<'s>> {
        self.fields.and_then(|fields| fields.field(key))
    }

    /// The type of the value of `key`: its field's, or the map's element type.
    pub fn value_type(&self, key: &str) -> Option<TypeRef<'s>> {
        self.field(key).or(self.element)
    }
}

/// The value's kind, as SMD's `IsMap`/`IsList`/scalar tests see it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Null,
    Scalar,
    List,
    Map,
}

pub(super) fn kind(value: &Tree<'_>) -> Kind {
    match value.resolved() {
        Tree::Null => Kind::Null,
        Tree::Bool(_) | Tree::Number(_) | Tree::String(_) => Kind::Scalar,
        Tree::List(_) => Kind::List,
        // A text node resolves to a map or a list.
        Tree::Map(_) | Tree::Text(_) => Kind::Map,
    }
}

/// The atom of a table type.
pub(super) fn atom(ty: TypeRef<'_>) -> Atom<'_> {
    let schema = ty.schema();
    let only_scalar = |kind| Atom {
        scalar: Some(kind),
        list: None,
        map: None,
    };
    match ty.shape() {
        Shape::Scalar(Scalar::String | Scalar::Byte) => only_scalar(ScalarKind::String),
        Shape::Scalar(Scalar::DateTime | Scalar::Quantity) => only_scalar(ScalarKind::Untyped),
        Shape::Scalar(Scalar::Integer | Scalar::Int32 | Scalar::Number) => {
            only_scalar(ScalarKind::Numeric)
        }
        Shape::Scalar(Scalar::Boolean) => only_scalar(ScalarKind::Boolean),
        Shape::Scalar(scalar @ (Scalar::Any | Scalar::IntOrString | Scalar::AnyAtomic)) => {
            // Lists of either are atomic lists of `any-atomic`; maps of `any` merge by key
            // into `any` values, maps of `any-atomic` are atomic.
            let atomic = scalar == Scalar::AnyAtomic;
            let any_atomic = schema.scalar(Scalar::AnyAtomic);
            Atom {
                scalar: Some(ScalarKind::Untyped),
                list: Some(ListAtom {
                    element: any_atomic,
                    relationship: ListRelationship::Atomic,
                }),
                map: Some(MapAtom {
                    fields: None,
                    element: Some(if atomic {
                        any_atomic
                    } else {
                        schema.scalar(Scalar::Any)
                    }),
                    atomic,
                }),
            }
        }
        Shape::Struct(fields) => Atom {
            scalar: None,
            list: None,
            map: Some(MapAtom {
                fields: Some(fields),
                element: fields.unknown_field(),
                atomic: fields.is_atomic(),
            }),
        },
        Shape::List(list) => Atom {
            scalar: None,
            list: Some(ListAtom {
                element: list.element(),
                relationship: match list.kind() {
                    ListKind::Atomic => ListRelationship::Atomic,
                    ListKind::Set => ListRelationship::Set,
                    ListKind::Map(keys) => ListRelationship::Keyed(keys),
                },
            }),
            map: None,
        },
        Shape::Map(map) => Atom {
            scalar: None,
            list: None,
            map: Some(MapAtom {
                fields: None,
                element: Some(map.element()),
                atomic: map.is_atomic(),
            }),
        },
    }
}

impl<'s> Atom<'s> {
    /// The side SMD handles `value` with (`deduceAtom`, then `handleAtom`): the side of
    /// the value's kind when the atom has one, otherwise (a null, or a value of a kind
    /// the type does not take) the first of map, scalar, list the atom has.
    pub fn side(&self, value: &Tree<'_>) -> Option<Side<'s>> {
        let deduced = match kind(value) {
            Kind::Scalar => self.scalar.map(Side::Scalar),
            Kind::List => self.list.map(Side::List),
            Kind::Map => self.map.map(Side::Map),
            Kind::Null => None,
        };
        deduced.or_else(|| {
            self.map
                .map(Side::Map)
                .or(self.scalar.map(Side::Scalar))
                .or(self.list.map(Side::List))
        })
    }
}
