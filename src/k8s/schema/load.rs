//! Reading a table into [`Schema`]: every type name resolved to an index once, here, so
//! that no lookup after it compares type names.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use serde_json::Value;

use super::{KindEntry, ListDef, ListDefKind, ListKey, MapDef, Scalar, Schema, StructDef, Ty};
use crate::tree::Tree;

/// The format this reader understands.
const FORMAT: u64 = 1;

/// Why a table could not be read. The built-in table always reads (a test holds to
/// it), so any of these is a bug in graft or in the table's generator.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("the schema table is not a table of format {FORMAT}: {0}")]
    Json(#[from] serde_json::Error),
    #[error("the schema table has format {0}; graft reads format {FORMAT}")]
    Format(u64),
    #[error("{at}: refers to type {name}, which the table does not define")]
    UnknownType { at: String, name: String },
    #[error("{at}: {problem}")]
    Invalid { at: String, problem: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TableDoc {
    format: u64,
    source: String,
    kinds: BTreeMap<String, String>,
    types: BTreeMap<String, TypeDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TypeDoc {
    fields: BTreeMap<String, Value>,
    #[serde(default)]
    map_type: Option<String>,
    #[serde(default)]
    required: Vec<String>,
    #[serde(default)]
    preserve_unknown: bool,
    #[serde(default)]
    embedded: bool,
}

pub(super) fn parse(text: &str) -> Result<Schema, SchemaError> {
    let doc: TableDoc = serde_json::from_str(text)?;
    if doc.format != FORMAT {
        return Err(SchemaError::Format(doc.format));
    }
    // Every struct gets its index before any field refers to it: types refer to each
    // other in cycles (JSONSchemaProps).
    let indices: HashMap<&str, u32> = doc
        .types
        .keys()
        .enumerate()
        .map(|(index, name)| Ok((name.as_str(), index_u32(index, name)?)))
        .collect::<Result<_, SchemaError>>()?;
    let mut builder = Builder {
        docs: &doc.types,
        by_index: doc.types.values().collect(),
        indices: &indices,
        lists: Vec::new(),
        maps: Vec::new(),
    };
    let mut structs = Vec::with_capacity(doc.types.len());
    for (name, ty) in &doc.types {
        structs.push(builder.build_struct(name, ty)?);
    }
    let mut kinds = Vec::with_capacity(doc.kinds.len());
    for (key, name) in &doc.kinds {
        let ty = builder.named(name, key)?;
        let (api_version, kind) = key.rsplit_once('/').ok_or_else(|| SchemaError::Invalid {
            at: key.clone(),
            problem: "a kind is written GROUP/VERSION/KIND or VERSION/KIND".to_string(),
        })?;
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        kinds.push(KindEntry {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            ty,
        });
    }
    kinds.sort_by(|a, b| a.key().cmp(&b.key()));
    Ok(Schema {
        source: doc.source,
        kinds,
        structs,
        lists: builder.lists,
        maps: builder.maps,
    })
}

fn index_u32(index: usize, at: &str) -> Result<u32, SchemaError> {
    u32::try_from(index).map_err(|_| SchemaError::Invalid {
        at: at.to_string(),
        problem: "too many types".to_string(),
    })
}

fn invalid(at: &str, problem: impl Into<String>) -> SchemaError {
    SchemaError::Invalid {
        at: at.to_string(),
        problem: problem.into(),
    }
}

struct Builder<'d> {
    docs: &'d BTreeMap<String, TypeDoc>,
    /// The structs in index order.
    by_index: Vec<&'d TypeDoc>,
    indices: &'d HashMap<&'d str, u32>,
    lists: Vec<ListDef>,
    maps: Vec<MapDef>,
}

impl Builder<'_> {
    fn build_struct(&mut self, name: &str, doc: &TypeDoc) -> Result<StructDef, SchemaError> {
        // The struct's own atomicity goes into every reference to it (`named`); here it
        // is only checked.
        map_type(doc.map_type.as_deref(), name, false)?;
        // A BTreeMap iterates in key order: the fields come out sorted, as the binary
        // search needs them.
        let mut fields = Vec::with_capacity(doc.fields.len());
        for (field, expr) in &doc.fields {
            let at = format!("{name}.{field}");
            fields.push((field.as_str().into(), self.expr(expr, &at)?));
        }
        let mut required: Vec<Box<str>> = doc.required.iter().map(|r| r.as_str().into()).collect();
        required.sort();
        Ok(StructDef {
            name: name.into(),
            fields,
            required,
            preserve_unknown: doc.preserve_unknown,
            embedded: doc.embedded,
        })
    }

    /// A struct referred to by name, with its own atomicity.
    fn named(&self, name: &str, at: &str) -> Result<Ty, SchemaError> {
        let (Some(&index), Some(doc)) = (self.indices.get(name), self.docs.get(name)) else {
            return Err(SchemaError::UnknownType {
                at: at.to_string(),
                name: name.to_string(),
            });
        };
        let atomic = map_type(doc.map_type.as_deref(), name, false)?;
        Ok(Ty::Struct { index, atomic })
    }

    /// The type a TYPEEXPR describes.
    fn expr(&mut self, expr: &Value, at: &str) -> Result<Ty, SchemaError> {
        match expr {
            Value::String(name) => match scalar(name) {
                Some(scalar) => Ok(Ty::Scalar(scalar)),
                None => self.named(name, at),
            },
            Value::Object(form) if form.contains_key("ref") => {
                only(form, &["ref", "mapType"], at)?;
                let name = string(form.get("ref"), "ref", at)?;
                let Ty::Struct { index, .. } = self.named(name, at)? else {
                    return Err(invalid(at, "ref names no struct"));
                };
                let atomic =
                    map_type(Some(string(form.get("mapType"), "mapType", at)?), at, false)?;
                Ok(Ty::Struct { index, atomic })
            }
            Value::Object(form) if form.contains_key("list") => {
                only(form, &["list", "listType", "keys", "keyDefaults"], at)?;
                let element = self.expr(&form["list"], &format!("{at}[]"))?;
                let kind = match string(form.get("listType"), "listType", at)? {
                    "atomic" => ListDefKind::Atomic,
                    "set" => ListDefKind::Set,
                    "map" => ListDefKind::Map(self.keys(form, element, at)?),
                    other => return Err(invalid(at, format!("unknown listType {other:?}"))),
                };
                if !matches!(kind, ListDefKind::Map(_))
                    && (form.contains_key("keys") || form.contains_key("keyDefaults"))
                {
                    return Err(invalid(at, "keys on a list that is not a map"));
                }
                let index = index_u32(self.lists.len(), at)?;
                self.lists.push(ListDef { element, kind });
                Ok(Ty::List(index))
            }
            Value::Object(form) if form.contains_key("map") => {
                only(form, &["map", "mapType"], at)?;
                let element = self.expr(&form["map"], &format!("{at}{{}}"))?;
                let atomic =
                    map_type(Some(string(form.get("mapType"), "mapType", at)?), at, false)?;
                let index = index_u32(self.maps.len(), at)?;
                self.maps.push(MapDef { element, atomic });
                Ok(Ty::Map(index))
            }
            other => Err(invalid(at, format!("not a type expression: {other}"))),
        }
    }

    /// The key fields of a list of maps, each a field of the item struct.
    fn keys(
        &self,
        form: &serde_json::Map<String, Value>,
        element: Ty,
        at: &str,
    ) -> Result<Vec<ListKey>, SchemaError> {
        let Ty::Struct { index, .. } = element else {
            return Err(invalid(at, "a map list of items that are not structs"));
        };
        let item = self
            .by_index
            .get(index as usize)
            .ok_or_else(|| invalid(at, "item type out of range"))?;
        let Some(Value::Array(names)) = form.get("keys") else {
            return Err(invalid(at, "a map list without keys"));
        };
        let defaults = match form.get("keyDefaults") {
            None => None,
            Some(Value::Object(defaults)) => Some(defaults),
            Some(_) => return Err(invalid(at, "keyDefaults is not an object")),
        };
        if names.is_empty() {
            return Err(invalid(at, "a map list without keys"));
        }
        let mut keys = Vec::with_capacity(names.len());
        for name in names {
            let Value::String(name) = name else {
                return Err(invalid(at, "a key that is not a string"));
            };
            if !item.fields.contains_key(name) {
                return Err(invalid(
                    at,
                    format!("key {name} is not a field of the items"),
                ));
            }
            let default = defaults.and_then(|d| d.get(name)).map(Tree::from);
            keys.push(ListKey {
                name: name.as_str().into(),
                default,
            });
        }
        if let Some(defaults) = defaults
            && let Some(stray) = defaults.keys().find(|d| !names.iter().any(|n| n == *d))
        {
            return Err(invalid(
                at,
                format!("a default for {stray}, which is no key"),
            ));
        }
        Ok(keys)
    }
}

fn scalar(name: &str) -> Option<Scalar> {
    Some(match name {
        "string" => Scalar::String,
        "byte" => Scalar::Byte,
        "date-time" => Scalar::DateTime,
        "integer" => Scalar::Integer,
        "int32" => Scalar::Int32,
        "number" => Scalar::Number,
        "boolean" => Scalar::Boolean,
        "int-or-string" => Scalar::IntOrString,
        "quantity" => Scalar::Quantity,
        "any" => Scalar::Any,
        "any-atomic" => Scalar::AnyAtomic,
        _ => return None,
    })
}

/// Whether a `mapType` says atomic; `default` when there is none.
fn map_type(map_type: Option<&str>, at: &str, default: bool) -> Result<bool, SchemaError> {
    match map_type {
        None => Ok(default),
        Some("atomic") => Ok(true),
        Some("granular") => Ok(false),
        Some(other) => Err(invalid(at, format!("unknown mapType {other:?}"))),
    }
}

fn string<'v>(value: Option<&'v Value>, what: &str, at: &str) -> Result<&'v str, SchemaError> {
    match value {
        Some(Value::String(s)) => Ok(s),
        _ => Err(invalid(at, format!("{what} is not a string"))),
    }
}

/// Refuses members a form does not have: a typo in the generator must not pass unseen.
fn only(
    form: &serde_json::Map<String, Value>,
    members: &[&str],
    at: &str,
) -> Result<(), SchemaError> {
    match form.keys().find(|key| !members.contains(&key.as_str())) {
        Some(key) => Err(invalid(at, format!("unknown member {key:?}"))),
        None => Ok(()),
    }
}
