//! The shapes of the Kubernetes built-in kinds, as kube-apiserver v1.36.2 reads them when
//! it runs a MutatingAdmissionPolicy: each kind's fields and their types, and how
//! structured-merge-diff merges each list, map and struct (atomic or granular, a set, a
//! list of maps keyed by some of their fields).
//!
//! The table is `schema/kubernetes/v1.36.json` (its README describes the format and how
//! to regenerate it), embedded in the binary and parsed once, on first use, into vectors
//! that refer to each other by index: a lookup follows indices, and the only string
//! comparisons are of the field names a caller asks for (a binary search in the struct's
//! sorted fields). A table that does not parse is a bug in graft, which the tests catch;
//! [`builtin`] returns the error rather than panicking all the same.

mod decode;
mod kinds;
mod load;
mod strict;
#[cfg(test)]
mod tests;

use std::sync::LazyLock;

use crate::tree::Tree;

pub use decode::{Problem, ProblemKind, Reached, Step, Strings, describe, follow, problems};
pub use kinds::ResourceKind;
pub use load::SchemaError;
pub use strict::unknown_fields;

/// The table, as checked in.
const BUILTIN_TABLE: &str = include_str!("../../../schema/kubernetes/v1.36.json");

static BUILTIN: LazyLock<Result<Schema, SchemaError>> =
    LazyLock::new(|| Schema::parse(BUILTIN_TABLE));

/// The schema of the Kubernetes v1.36.2 built-in kinds, parsed on the first call.
pub fn builtin() -> Result<&'static Schema, &'static SchemaError> {
    BUILTIN.as_ref()
}

/// A parsed table: kinds, and the struct, list and map types they are made of.
#[derive(Debug)]
pub struct Schema {
    source: String,
    /// Sorted by (group, version, kind), for a binary search that allocates nothing.
    kinds: Vec<KindEntry>,
    structs: Vec<StructDef>,
    lists: Vec<ListDef>,
    maps: Vec<MapDef>,
}

/// A type as the table's vectors hold it: a scalar, or an index into them. A struct's
/// atomicity is here, not in its definition, because a field may override the struct's
/// own (`claimRef`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Ty {
    Scalar(Scalar),
    Struct { index: u32, atomic: bool },
    List(u32),
    Map(u32),
}

/// The table's scalar types, and the three that hold any JSON value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scalar {
    /// A string.
    String,
    /// A base64 string (`format: byte`).
    Byte,
    /// An RFC 3339 timestamp (`Time`, `MicroTime`); any scalar to SMD.
    DateTime,
    /// An integer (int64, or no format).
    Integer,
    /// An integer the apiserver decodes into an int32 (SMD does not check the range).
    Int32,
    /// A floating-point number.
    Number,
    /// A boolean.
    Boolean,
    /// `IntOrString`: an integer or a string, though SMD takes any JSON value as for
    /// [`Scalar::Any`] (its schema has no `type`).
    IntOrString,
    /// `resource.Quantity`: a string or a number; any scalar to SMD.
    Quantity,
    /// Any JSON value: maps merge key by key (their values again `Any`), lists are
    /// atomic, scalars replace (SMD's `__untyped_deduced_`).
    Any,
    /// Any JSON value, always replaced whole (`RawExtension`; SMD's `__untyped_atomic_`).
    AnyAtomic,
}

/// A kind of the table, and its type.
#[derive(Debug)]
struct KindEntry {
    group: Box<str>,
    version: Box<str>,
    kind: Box<str>,
    ty: Ty,
}

impl KindEntry {
    fn key(&self) -> (&str, &str, &str) {
        (&self.group, &self.version, &self.kind)
    }
}

#[derive(Debug)]
struct StructDef {
    name: Box<str>,
    /// Sorted by name, for a binary search.
    fields: Vec<(Box<str>, Ty)>,
    required: Vec<Box<str>>,
    preserve_unknown: bool,
    embedded: bool,
}

#[derive(Debug)]
struct ListDef {
    element: Ty,
    kind: ListDefKind,
}

#[derive(Debug)]
enum ListDefKind {
    Atomic,
    Set,
    Map(Vec<ListKey>),
}

#[derive(Debug)]
struct MapDef {
    element: Ty,
    atomic: bool,
}

/// A key field of a list of maps, and the value an item that omits it is keyed by.
pub struct ListKey {
    name: Box<str>,
    default: Option<Tree<'static>>,
}

impl ListKey {
    /// The field's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The field's OpenAPI default, which keys an item that omits the field (`protocol:
    /// TCP` of a container port); `None` when it has none, and the key then leaves it out.
    pub fn default(&self) -> Option<&Tree<'static>> {
        self.default.as_ref()
    }
}

impl Schema {
    /// Parses a table in the format of `schema/kubernetes/v1.36.json`.
    pub fn parse(text: &str) -> Result<Schema, SchemaError> {
        load::parse(text)
    }

    /// Where the table came from (its `source`).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The type of a kind; the core group is `""`.
    pub fn kind(&self, group: &str, version: &str, kind: &str) -> Option<TypeRef<'_>> {
        let at = self
            .kinds
            .binary_search_by(|entry| entry.key().cmp(&(group, version, kind)))
            .ok()?;
        Some(self.at(self.kinds[at].ty))
    }

    /// The number of kinds the table knows.
    pub fn kind_count(&self) -> usize {
        self.kinds.len()
    }

    /// The number of struct types the table defines.
    pub fn struct_count(&self) -> usize {
        self.structs.len()
    }

    /// A scalar type of this schema, such as [`Scalar::Any`] for an unknown field.
    pub fn scalar(&self, scalar: Scalar) -> TypeRef<'_> {
        self.at(Ty::Scalar(scalar))
    }

    fn at(&self, ty: Ty) -> TypeRef<'_> {
        TypeRef { schema: self, ty }
    }
}

/// A type of a [`Schema`]: a copyable handle whose [`TypeRef::shape`] says what it is.
#[derive(Clone, Copy)]
pub struct TypeRef<'s> {
    schema: &'s Schema,
    ty: Ty,
}

/// Handles are equal when they are one type of one schema.
impl PartialEq for TypeRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.schema, other.schema) && self.ty == other.ty
    }
}

impl Eq for TypeRef<'_> {}

impl std::fmt::Debug for TypeRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.shape() {
            Shape::Scalar(scalar) => write!(f, "{scalar:?}"),
            Shape::Struct(s) => write!(
                f,
                "{}{}",
                s.name(),
                if s.is_atomic() { " (atomic)" } else { "" }
            ),
            Shape::List(list) => write!(f, "list of {:?} ({:?})", list.element(), list.kind()),
            Shape::Map(map) => {
                let atomic = if map.is_atomic() {
                    "atomic"
                } else {
                    "granular"
                };
                write!(f, "map of {:?} ({atomic})", map.element())
            }
        }
    }
}

/// What a type is.
#[derive(Clone, Copy, Debug)]
pub enum Shape<'s> {
    Scalar(Scalar),
    Struct(StructType<'s>),
    List(ListType<'s>),
    Map(MapType<'s>),
}

impl<'s> TypeRef<'s> {
    /// The type's shape, resolved.
    pub fn shape(self) -> Shape<'s> {
        let schema = self.schema;
        match self.ty {
            Ty::Scalar(scalar) => Shape::Scalar(scalar),
            Ty::Struct { index, atomic } => Shape::Struct(StructType {
                schema,
                def: &schema.structs[index as usize],
                atomic,
            }),
            Ty::List(index) => Shape::List(ListType {
                schema,
                def: &schema.lists[index as usize],
            }),
            Ty::Map(index) => Shape::Map(MapType {
                schema,
                def: &schema.maps[index as usize],
            }),
        }
    }

    /// The schema the type is of.
    pub fn schema(self) -> &'s Schema {
        self.schema
    }
}

/// A struct: named fields, each of its own type.
#[derive(Clone, Copy)]
pub struct StructType<'s> {
    schema: &'s Schema,
    def: &'s StructDef,
    atomic: bool,
}

impl std::fmt::Debug for StructType<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.def.name)
    }
}

impl<'s> StructType<'s> {
    /// The type's name in the table (`core.v1.PodSpec`).
    pub fn name(&self) -> &'s str {
        &self.def.name
    }

    /// The type of field `name`, when the struct declares it.
    pub fn field(&self, name: &str) -> Option<TypeRef<'s>> {
        let fields = &self.def.fields;
        let at = fields
            .binary_search_by(|(field, _)| (**field).cmp(name))
            .ok()?;
        Some(self.schema.at(fields[at].1))
    }

    /// The declared fields, sorted by name.
    pub fn fields(&self) -> impl ExactSizeIterator<Item = (&'s str, TypeRef<'s>)> + '_ {
        self.def
            .fields
            .iter()
            .map(|(name, ty)| (&**name, self.schema.at(*ty)))
    }

    /// Whether the struct is replaced whole by a merge (`x-kubernetes-map-type: atomic`,
    /// or the field's own override).
    pub fn is_atomic(&self) -> bool {
        self.atomic
    }

    /// Whether fields it does not declare are accepted (as [`Scalar::Any`]).
    pub fn preserves_unknown(&self) -> bool {
        self.def.preserve_unknown
    }

    /// The type of a field the struct does not declare: [`Scalar::Any`] when it
    /// preserves unknown fields, `None` (the field is refused) otherwise.
    pub fn unknown_field(&self) -> Option<TypeRef<'s>> {
        self.def
            .preserve_unknown
            .then(|| self.schema.scalar(Scalar::Any))
    }

    /// The fields the spec marks required, sorted.
    pub fn required(&self) -> impl ExactSizeIterator<Item = &'s str> + '_ {
        self.def.required.iter().map(|name| &**name)
    }

    /// Whether the spec marks the struct an embedded resource (SMD ignores it).
    pub fn is_embedded(&self) -> bool {
        self.def.embedded
    }
}

/// A list.
#[derive(Clone, Copy)]
pub struct ListType<'s> {
    schema: &'s Schema,
    def: &'s ListDef,
}

impl std::fmt::Debug for ListType<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "list of {:?} ({:?})", self.element(), self.kind())
    }
}

/// How a merge treats a list's items.
#[derive(Clone, Copy, Debug)]
pub enum ListKind<'s> {
    /// Replaced whole.
    Atomic,
    /// Scalars, each at most once, merged as a set.
    Set,
    /// Maps identified by their key fields, merged item by item.
    Map(&'s [ListKey]),
}

impl<'s> ListType<'s> {
    /// The type of the items.
    pub fn element(&self) -> TypeRef<'s> {
        self.schema.at(self.def.element)
    }

    /// Atomic, a set, or a map keyed by some fields of its items.
    pub fn kind(&self) -> ListKind<'s> {
        match &self.def.kind {
            ListDefKind::Atomic => ListKind::Atomic,
            ListDefKind::Set => ListKind::Set,
            ListDefKind::Map(keys) => ListKind::Map(keys),
        }
    }
}

/// A map from strings to values of one type (`additionalProperties`).
#[derive(Clone, Copy)]
pub struct MapType<'s> {
    schema: &'s Schema,
    def: &'s MapDef,
}

impl std::fmt::Debug for MapType<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let atomic = if self.is_atomic() {
            "atomic"
        } else {
            "granular"
        };
        write!(f, "map of {:?} ({atomic})", self.element())
    }
}

impl<'s> MapType<'s> {
    /// The type of the values.
    pub fn element(&self) -> TypeRef<'s> {
        self.schema.at(self.def.element)
    }

    /// Whether the map is replaced whole (`nodeSelector`) rather than merged by key.
    pub fn is_atomic(&self) -> bool {
        self.def.atomic
    }
}

impl std::fmt::Debug for ListKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.default {
            Some(default) => write!(f, "{} (default {})", self.name, default.to_value()),
            None => f.write_str(&self.name),
        }
    }
}
