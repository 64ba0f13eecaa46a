//! The values a MutatingAdmissionPolicy's mutations build: `Object{...}`,
//! `Object.<path>{...}` (any name under `Object`, any field) and
//! `JSONPatch{op, path, from, value}`, and `jsonpatch.escapeKey`.
//!
//! The `cel` crate evaluates a struct literal only for a type registered under that exact
//! name, and ignores `?` on its fields. The names are unbounded (`Object.spec.template`),
//! and graft's environment is one, shared and immutable; so each literal is rewritten at
//! load ([`rewrite`]) into a call, `@graft_struct('Object.spec', {'f': v, ?'g': w})`,
//! whose map literal gives `?` fields their meaning (a field without a value is left
//! out). The call builds:
//!
//! - for `Object...`, a `CelStruct` of that name: `.f` and `has(.f)` read its fields, two
//!   are equal when their names and fields are, and one without fields is a zero value,
//!   as Kubernetes' `ObjectVal`;
//! - for `JSONPatch`, a [`JsonPatch`]: `op`, `path` and `from` are strings (`""` when not
//!   given), `value` any value, and `has()` of a string field is true when it is not
//!   empty, as Kubernetes' `JSONPatchVal`. `has(x.op)` (`path`, `from`, `value`) is
//!   rewritten to `@graft_has(x, 'op')`, since `has()` and `.op` both ask the same
//!   indexer; on anything else it answers as `has()` does.

use std::sync::Arc;

use cel::ExecutionError;
use cel::common::ast::{
    CallExpr, EntryExpr, Expr, IdedEntryExpr, IdedExpr, LiteralValue, MapEntryExpr, MapExpr,
};
use cel::common::traits::{Indexer, Zeroer};
use cel::common::types::{
    CelBool, CelMap, CelOptional, CelString, CelStruct, DYN_TYPE, Kind, MAP_TYPE, STRING_TYPE, Type,
};
use cel::common::value::{Builtin, BuiltinRef, CowVal, Val};

use super::functions::{Overload, arity, fail, string_arg};
use super::walk::{self, Rewrite};

type CelResult<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

/// The function a patch type's literal is rewritten to; `@` keeps it out of CEL source.
pub const STRUCT: &str = "@graft_struct";
/// The function `has()` of a JSONPatch field is rewritten to.
pub const HAS: &str = "@graft_has";

/// The name of a JSONPatch value's type.
pub const JSON_PATCH: &str = "JSONPatch";
/// The name of an ApplyConfiguration's root type.
pub const OBJECT: &str = "Object";

/// The fields a JSONPatch has.
const PATCH_FIELDS: [&str; 4] = ["op", "path", "from", "value"];

/// `name` (a struct literal's type, a leading `.` dropped) when it is one of the patch
/// types: `Object`, a name under it, or `JSONPatch`.
pub fn patch_type(name: &str) -> Option<&str> {
    let name = name.strip_prefix('.').unwrap_or(name);
    (name == OBJECT || name.starts_with("Object.") || name == JSON_PATCH).then_some(name)
}

/// The overloads CEL source can call.
pub fn overloads() -> Vec<Overload> {
    vec![Overload::function(
        "jsonpatch.escapeKey",
        "string_jsonpatch_escapeKey",
        vec![STRING_TYPE],
        escape_key,
    )]
}

/// The functions the rewrites call.
pub fn internal_overloads() -> Vec<Overload> {
    vec![
        Overload::function(
            STRUCT,
            "graft_struct_string_map",
            vec![STRING_TYPE, MAP_TYPE],
            make,
        ),
        Overload::function(
            HAS,
            "graft_has_dyn_string",
            vec![DYN_TYPE, STRING_TYPE],
            has,
        ),
    ]
}

/// `root` with its patch type literals and `has()` of JSONPatch fields rewritten.
pub fn rewrite(root: &IdedExpr) -> IdedExpr {
    let mut node = root.clone();
    let mut rewriter = Rewriter {
        next_id: super::paths::max_id(root) + 1,
        shadowed: Vec::new(),
    };
    rewriter.visit(&mut node);
    node
}

struct Rewriter {
    next_id: u64,
    shadowed: Vec<String>,
}

impl Rewriter {
    fn literal(&mut self, value: &str) -> IdedExpr {
        self.next_id += 1;
        IdedExpr {
            id: self.next_id,
            expr: Expr::Literal(LiteralValue::String(value.to_owned().into())),
        }
    }
}

impl Rewrite for Rewriter {
    fn visit(&mut self, node: &mut IdedExpr) {
        walk::children(self, node);
        match &mut node.expr {
            Expr::Struct(s) => {
                let Some(name) = patch_type(&s.type_name).map(str::to_owned) else {
                    return;
                };
                let entries: Vec<IdedEntryExpr> = std::mem::take(&mut s.entries)
                    .into_iter()
                    .map(|entry| match entry.expr {
                        EntryExpr::StructField(field) => IdedEntryExpr {
                            id: entry.id,
                            expr: EntryExpr::MapEntry(MapEntryExpr {
                                key: self.literal(&field.field),
                                value: field.value,
                                optional: field.optional,
                            }),
                        },
                        map_entry => IdedEntryExpr {
                            id: entry.id,
                            expr: map_entry,
                        },
                    })
                    .collect();
                self.next_id += 1;
                let map = IdedExpr {
                    id: self.next_id,
                    expr: Expr::Map(MapExpr { entries }),
                };
                let name = self.literal(&name);
                node.expr = Expr::Call(CallExpr {
                    func_name: STRUCT.to_owned(),
                    target: None,
                    args: vec![name, map],
                });
            }
            Expr::Select(select)
                if select.test && PATCH_FIELDS.contains(&select.field.as_str()) =>
            {
                let field = self.literal(&select.field);
                let operand = std::mem::take(&mut *select.operand);
                node.expr = Expr::Call(CallExpr {
                    func_name: HAS.to_owned(),
                    target: None,
                    args: vec![operand, field],
                });
            }
            _ => {}
        }
    }

    fn shadowed(&mut self) -> &mut Vec<String> {
        &mut self.shadowed
    }
}

/// `jsonpatch.escapeKey(s)`: `~` as `~0` and `/` as `~1`, for a key in a JSON Pointer.
fn escape_key<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    const NAME: &str = "jsonpatch.escapeKey";
    let [key] = arity::<1>(NAME, &args)?;
    let escaped = string_arg(NAME, key)?.replace('~', "~0").replace('/', "~1");
    Ok(CowVal::owned(CelString::from(escaped)))
}

/// The Go type Kubernetes names in its messages for a CEL value (`value.Value()`'s).
pub fn go_type_name(value: &dyn Val) -> &'static str {
    match value.get_type().kind() {
        Kind::Boolean => "bool",
        Kind::Int => "int64",
        Kind::UInt => "uint64",
        Kind::Double => "float64",
        Kind::String => "string",
        Kind::Bytes => "[]uint8",
        Kind::NullType => "structpb.NullValue",
        Kind::List => "[]ref.Val",
        Kind::Map => "map[ref.Val]ref.Val",
        Kind::Timestamp => "time.Time",
        Kind::Duration => "time.Duration",
        _ => "ref.Val",
    }
}

/// `@graft_struct(name, fields)`.
fn make<'b, 'v>(mut args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let fields = args
        .pop()
        .ok_or_else(|| ExecutionError::invalid_argument_count(2, 0))?;
    let name = args
        .pop()
        .ok_or_else(|| ExecutionError::invalid_argument_count(2, 1))?;
    let name = string_arg(STRUCT, name.as_ref())?.to_owned();
    // The map literal the rewrite built: its values are moved, not copied.
    let entries = match fields {
        CowVal::Owned(map) => match map.into_builtin() {
            Some(Builtin::Map(map)) => map.into_inner(),
            _ => return Err(fail(STRUCT, "expected the fields' map")),
        },
        CowVal::Borrowed(map) => match map.downcast_ref::<CelMap>() {
            Some(map) => map
                .inner()
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            None => return Err(fail(STRUCT, "expected the fields' map")),
        },
    };
    let mut value = CelStruct::new(name);
    for (key, field) in entries {
        let cel::common::types::CelMapKey::String(key) = key else {
            return Err(fail(STRUCT, "a field name must be a string"));
        };
        value.add_field_value(key.inner().to_owned(), CowVal::Owned(field));
    }
    if value.name() == JSON_PATCH {
        return JsonPatch::of(value).map(CowVal::owned);
    }
    Ok(CowVal::owned(value))
}

/// `@graft_has(x, f)`: `has(x.f)`, with a JSONPatch's own presence rules.
fn has<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let [operand, field] = arity::<2>(HAS, &args)?;
    let field = string_arg(HAS, field)?;
    let key = CelString::from(field);
    let no_such_key = || ExecutionError::NoSuchKey(Arc::new(field.to_owned()));
    if let Some(patch) = JsonPatch::of_val(operand) {
        return Ok(CowVal::owned(CelBool::from(patch.is_set(field))));
    }
    // What the interpreter's `has()` does.
    let present = match operand.downcast_ref::<CelOptional>() {
        Some(optional) => match optional.option() {
            None => false,
            Some(inner) => inner
                .as_indexer()
                .ok_or_else(no_such_key)?
                .get(&key)
                .is_ok(),
        },
        None => {
            let indexer = operand.as_indexer().ok_or_else(|| {
                ExecutionError::no_such_overload(
                    "_._",
                    vec![operand.get_type().name().to_owned(), "string".to_owned()],
                )
            })?;
            match indexer.get(&key) {
                Ok(_) => true,
                Err(ExecutionError::NoSuchKey(_)) => false,
                Err(error) => return Err(error),
            }
        }
    };
    Ok(CowVal::owned(CelBool::from(present)))
}

/// A `JSONPatch{...}` value: a struct named `JSONPatch` whose fields are among `op`,
/// `path`, `from` (strings) and `value`. It is a `CelStruct` to what converts values (so
/// the result of an expression is read the same way for both patch types), with
/// Kubernetes' reading of its fields.
#[derive(Debug, Clone)]
pub struct JsonPatch<'v>(CelStruct<'v>);

impl<'v> JsonPatch<'v> {
    /// Checks the fields as Kubernetes' `JSONPatchType.Val` does.
    fn of(value: CelStruct<'v>) -> Result<JsonPatch<'v>, ExecutionError> {
        for (name, field) in value.field_values() {
            match name.as_str() {
                "op" | "path" | "from" => {
                    if field.downcast_ref::<CelString>().is_none() {
                        return Err(fail(
                            JSON_PATCH,
                            format!(
                                "unexpected type {} for JSONPatchType '{name}' field",
                                go_type_name(field.as_ref())
                            ),
                        ));
                    }
                }
                "value" => {}
                other => {
                    return Err(fail(
                        JSON_PATCH,
                        format!("unexpected JSONPatchType field: {other}"),
                    ));
                }
            }
        }
        Ok(JsonPatch(value))
    }

    /// The JSONPatch a value is, whether a `JsonPatch` or the `CelStruct` it hands out.
    pub fn of_val<'a>(value: &'a dyn Val) -> Option<&'a CelStruct<'a>> {
        value
            .downcast_ref::<CelStruct>()
            .filter(|s| s.name() == JSON_PATCH)
    }

    /// A string field, `""` when not given.
    pub fn text<'a>(value: &'a CelStruct<'_>, field: &str) -> &'a str {
        value
            .field_value(field)
            .and_then(|v| v.downcast_ref::<CelString>())
            .map_or("", |s| s.inner())
    }
}

trait PatchFields {
    fn is_set(&self, field: &str) -> bool;
}

impl PatchFields for CelStruct<'_> {
    /// `has()` of a JSONPatch field: a string one when it is not empty.
    fn is_set(&self, field: &str) -> bool {
        match field {
            "value" => self.field_value(field).is_some(),
            _ => !JsonPatch::text(self, field).is_empty(),
        }
    }
}

impl<'v> Val for JsonPatch<'v> {
    fn get_type(&self) -> &Type {
        self.0.get_type()
    }

    fn cel_type() -> &'static Type {
        &DYN_TYPE
    }

    fn as_indexer<'b, 'w>(&'b self) -> Option<&'b (dyn Indexer + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn into_indexer<'w>(self: Box<Self>) -> Option<Box<dyn Indexer + 'w>>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        Some(self)
    }

    /// `op`, `path`, `from` and `value` compared, an absent `value` equal only to another.
    fn equals(&self, other: &dyn Val) -> bool {
        let Some(other) = JsonPatch::of_val(other) else {
            return false;
        };
        ["op", "path", "from"]
            .iter()
            .all(|field| JsonPatch::text(&self.0, field) == JsonPatch::text(other, field))
            && match (self.0.field_value("value"), other.field_value("value")) {
                (Some(a), Some(b)) => a.equals(b),
                (None, None) => true,
                _ => false,
            }
    }

    fn clone_as_boxed<'w>(&self) -> Box<dyn Val + 'w>
    where
        Self: 'w,
    {
        Box::new(self.clone())
    }

    fn as_builtin<'b, 'w>(&'b self) -> BuiltinRef<'b, 'w>
    where
        Self: 'w,
    {
        BuiltinRef::Struct(&self.0)
    }

    fn into_builtin<'w>(self: Box<Self>) -> Option<Builtin<'w>>
    where
        Self: 'w,
    {
        Some(Builtin::Struct(self.0))
    }
}

impl Indexer for JsonPatch<'_> {
    fn get<'b, 'w>(&'b self, key: &dyn Val) -> Result<CowVal<'b, 'w>, ExecutionError>
    where
        Self: 'w,
    {
        let field = key
            .downcast_ref::<CelString>()
            .map(|s| s.inner())
            .filter(|f| PATCH_FIELDS.contains(f))
            .ok_or_else(|| {
                let shown = key.downcast_ref::<CelString>().map_or_else(
                    || key.get_type().name().to_owned(),
                    |s| s.inner().to_owned(),
                );
                fail(JSON_PATCH, format!("unsupported indexer: {shown}"))
            })?;
        match field {
            "value" => self
                .0
                .field_value(field)
                .map(CowVal::Borrowed)
                .ok_or_else(|| ExecutionError::NoSuchKey(Arc::new(field.to_owned()))),
            _ => Ok(CowVal::owned(CelString::from(
                JsonPatch::text(&self.0, field).to_owned(),
            ))),
        }
    }

    fn steal<'w>(self: Box<Self>, key: &dyn Val) -> Result<Box<dyn Val + 'w>, ExecutionError>
    where
        Self: 'w,
    {
        self.get(key).map(CowVal::into_owned)
    }
}

impl Zeroer for JsonPatch<'_> {
    fn is_zero_value(&self) -> bool {
        self.0.field_values().is_empty()
    }
}

/// A copy of an `Object` or `JSONPatch` value that owns everything (`super::convert`).
pub fn to_static(value: &CelStruct<'_>) -> Option<Box<dyn Val + 'static>> {
    let mut copy = CelStruct::new(value.name().to_owned());
    for (field, inner) in value.field_values() {
        copy.add_field_value(
            field,
            CowVal::Owned(super::convert::to_static(inner.as_ref())?),
        );
    }
    Some(if copy.name() == JSON_PATCH {
        Box::new(JsonPatch(copy))
    } else {
        Box::new(copy)
    })
}
