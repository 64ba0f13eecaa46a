//! A MutatingAdmissionPolicy mutation's result, as kube-apiserver reads it: an
//! ApplyConfiguration's `Object{...}` as the JSON tree of its fields, a JSONPatch's list
//! of `JSONPatch{...}` as operations, each value converted as cel-go converts it to a
//! `google.protobuf.Value` (`mutating/patch/json_patch.go`, `smd.go`), with the
//! apiserver's messages.
//!
//! Before either, the names of `Object` values are checked against the fields they are
//! under (`CheckTypeNamesMatchFieldPathNames`): below `Object.spec`, the value of `x` must
//! be an `Object.spec.x`, through lists and maps.

use cel::common::types::{
    CelBool, CelBytes, CelDouble, CelDuration, CelInt, CelString, CelStruct, CelTimestamp, CelUInt,
    Kind,
};
use cel::common::value::Val;

use super::structs::{JSON_PATCH, JsonPatch, OBJECT};
use crate::k8s::json_patch_v4::Operation;
use crate::tree::{Map, Tree};

/// The largest integer a double holds exactly (2^53 - 1): cel-go writes larger ones, and
/// larger uints, as JSON strings.
const MAX_JSON_SAFE: i64 = (1 << 53) - 1;

/// How a value becomes JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rules {
    /// A JSONPatch's `value`: `ConvertToNative(*structpb.Value)`.
    Patch,
    /// Inside an `Object` (an ApplyConfiguration, or a JSONPatch's `Object` value): the
    /// fields' Go values. `exact` keeps ints as they are (an ApplyConfiguration's map goes
    /// to the merge as is); otherwise they pass through a double (`structpb.NewStruct`).
    Object { exact: bool },
}

/// Kubernetes' `type mismatch: ...` for `Object` values named otherwise than the path of
/// fields they are under; `None` when every name matches.
pub fn name_mismatches(value: &dyn Val) -> Option<String> {
    let root = value.downcast_ref::<CelStruct>()?;
    let mut path = root.name().to_owned();
    let mut errors = Vec::new();
    names(value, &mut path, &mut errors);
    (!errors.is_empty()).then(|| format!("type mismatch: {}", errors.join("\n")))
}

fn names(value: &dyn Val, path: &mut String, errors: &mut Vec<String>) {
    match value.get_type().kind() {
        Kind::List | Kind::Map => {
            let Some(iterable) = value.as_iterable() else {
                return;
            };
            let is_map = value.get_type().kind() == Kind::Map;
            let mut items = iterable.iter();
            while let Some(item) = items.next() {
                if is_map {
                    if let Some(Ok(inner)) = value.as_indexer().map(|indexer| indexer.get(item)) {
                        names(inner.as_ref(), path, errors);
                    }
                } else {
                    names(item, path, errors);
                }
            }
        }
        _ => {
            let Some(object) = value.downcast_ref::<CelStruct>() else {
                return;
            };
            if object.name() == JSON_PATCH {
                return;
            }
            if object.name() != path {
                errors.push(format!(
                    "unexpected type name {}, expected {}, which matches field name path from \
                     root Object type",
                    go_quote(object.name()),
                    go_quote(path)
                ));
            }
            for (field, inner) in object.field_values() {
                let length = path.len();
                path.push('.');
                path.push_str(&field);
                names(inner.as_ref(), path, errors);
                path.truncate(length);
            }
        }
    }
}

fn go_quote(text: &str) -> String {
    crate::k8s::go_text::quote(text)
}

/// An ApplyConfiguration's result: an `Object` value (named exactly `Object`) whose names
/// match its fields, as the JSON tree of its fields.
pub fn apply_configuration(value: &dyn Val) -> Result<Tree<'static>, String> {
    let object = value
        .downcast_ref::<CelStruct>()
        .filter(|object| object.name() == OBJECT)
        .ok_or_else(|| {
            format!(
                "unsupported return type from ApplyConfiguration expression: {}",
                value.get_type().name()
            )
        })?;
    if let Some(mismatches) = name_mismatches(value) {
        return Err(mismatches);
    }
    fields(object, Rules::Object { exact: true })
}

/// The fields of an `Object` value as a JSON object, in the order of their names.
fn fields(object: &CelStruct<'_>, rules: Rules) -> Result<Tree<'static>, String> {
    let mut map = Map::new();
    for (field, value) in object.field_values() {
        let converted = json(value.as_ref(), rules)
            .map_err(|e| format!("fail to convert field {}: {e}", go_quote(&field)))?;
        map.insert(field, converted);
    }
    Ok(Tree::from(map))
}

/// A JSONPatch's result: a list of `JSONPatch` values, as operations.
pub fn json_patch(value: &dyn Val) -> Result<Vec<Operation<'static>>, String> {
    if value.get_type().kind() != Kind::List {
        return Err("type mismatch: JSONPatchType.expression should evaluate to array".to_owned());
    }
    let iterable = value
        .as_iterable()
        .ok_or("type mismatch: JSONPatchType.expression should evaluate to array")?;
    let mut operations = Vec::new();
    let mut items = iterable.iter();
    while let Some(item) = items.next() {
        let patch = JsonPatch::of_val(item).ok_or_else(|| {
            format!(
                "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch: \
                 got element of {}",
                item.get_type().name()
            )
        })?;
        let from = JsonPatch::text(patch, "from");
        let value = match patch.field_value("value") {
            Some(value) => {
                if let Some(mismatches) = name_mismatches(value) {
                    return Err(mismatches);
                }
                Some(json(value, Rules::Patch).map_err(|e| {
                    format!(
                        "JSONPath valueExpression evaluated to a type that could not marshal to \
                         JSON: {e}"
                    )
                })?)
            }
            None => None,
        };
        operations.push(Operation {
            op: JsonPatch::text(patch, "op").to_owned(),
            path: JsonPatch::text(patch, "path").to_owned(),
            from: (!from.is_empty()).then(|| from.to_owned()),
            value,
        });
    }
    Ok(operations)
}

/// A value as JSON, by `rules`.
fn json(value: &dyn Val, rules: Rules) -> Result<Tree<'static>, String> {
    let type_name = value.get_type().name();
    let unsupported = || match rules {
        Rules::Patch => {
            format!("type conversion error from '{type_name}' to 'google.protobuf.Value'")
        }
        Rules::Object { .. } => format!(
            "proto: invalid type: {}",
            super::structs::go_type_name(value)
        ),
    };
    Ok(match value.get_type().kind() {
        Kind::NullType => Tree::Null,
        Kind::Boolean => Tree::Bool(
            *value
                .downcast_ref::<CelBool>()
                .ok_or_else(unsupported)?
                .inner(),
        ),
        Kind::String => Tree::from(
            value
                .downcast_ref::<CelString>()
                .ok_or_else(unsupported)?
                .inner()
                .to_owned(),
        ),
        Kind::Bytes => {
            let bytes = value.downcast_ref::<CelBytes>().ok_or_else(unsupported)?;
            Tree::from(base64_simd::STANDARD.encode_to_string(bytes.inner()))
        }
        Kind::Int => {
            let i = *value
                .downcast_ref::<CelInt>()
                .ok_or_else(unsupported)?
                .inner();
            match rules {
                Rules::Patch if !(-MAX_JSON_SAFE..=MAX_JSON_SAFE).contains(&i) => {
                    Tree::from(i.to_string())
                }
                // `structpb.NewStruct` holds every number as a double.
                Rules::Object { exact: false } => Tree::from((i as f64) as i64),
                _ => Tree::from(i),
            }
        }
        Kind::UInt => {
            let u = *value
                .downcast_ref::<CelUInt>()
                .ok_or_else(unsupported)?
                .inner();
            match rules {
                Rules::Patch if u > MAX_JSON_SAFE as u64 => Tree::from(u.to_string()),
                Rules::Object { exact: false } => {
                    Tree::Number(serde_json::Number::from((u as f64) as u64))
                }
                _ => Tree::Number(serde_json::Number::from(u)),
            }
        }
        Kind::Double => number(
            *value
                .downcast_ref::<CelDouble>()
                .ok_or_else(unsupported)?
                .inner(),
        )?,
        Kind::Timestamp if rules == Rules::Patch => Tree::from(super::format::timestamp(
            value
                .downcast_ref::<CelTimestamp>()
                .ok_or_else(unsupported)?,
        )),
        Kind::Duration if rules == Rules::Patch => Tree::from(super::format::duration(
            value
                .downcast_ref::<CelDuration>()
                .ok_or_else(unsupported)?,
        )),
        Kind::List => {
            let iterable = value.as_iterable().ok_or_else(unsupported)?;
            let mut items = iterable.iter();
            let mut list = Vec::new();
            while let Some(item) = items.next() {
                list.push(json(item, rules)?);
            }
            Tree::from(list)
        }
        Kind::Map => {
            let (Some(iterable), Some(indexer)) = (value.as_iterable(), value.as_indexer()) else {
                return Err(unsupported());
            };
            let mut keys = iterable.iter();
            let mut entries = Vec::new();
            while let Some(key) = keys.next() {
                let Some(name) = key.downcast_ref::<CelString>() else {
                    return Err(match rules {
                        Rules::Patch => format!(
                            "type conversion error from '{}' to 'string'",
                            key.get_type().name()
                        ),
                        Rules::Object { .. } => format!(
                            "map key {} is of type {}, not string",
                            go_quote(&super::format::interpolate("%s", &[key]).unwrap_or_default()),
                            super::structs::go_type_name(key)
                        ),
                    });
                };
                let item = indexer.get(key).map_err(|e| e.to_string())?;
                entries.push((name.inner().to_owned(), json(item.as_ref(), rules)?));
            }
            // Go's maps have no order, and encoding/json sorts their keys.
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let mut map = Map::with_capacity(entries.len());
            for (key, item) in entries {
                map.insert(key, item);
            }
            Tree::from(map)
        }
        Kind::Struct => match value.downcast_ref::<CelStruct>() {
            Some(object) if object.name() != JSON_PATCH => {
                let exact = matches!(rules, Rules::Object { exact: true });
                fields(object, Rules::Object { exact })?
            }
            _ => return Err(unsupported()),
        },
        _ => return Err(unsupported()),
    })
}

/// A double as a JSON number; NaN and the infinities have none.
fn number(f: f64) -> Result<Tree<'static>, String> {
    serde_json::Number::from_f64(f)
        .map(Tree::Number)
        .ok_or_else(|| {
            format!(
                "json: unsupported value: {}",
                crate::k8s::go_text::float_v(f)
            )
        })
}

/// cel-go's message for an error of the `cel` crate, where the two word it differently.
pub fn cel_go_message(error: &cel::ExecutionError) -> String {
    use cel::objects::Value;
    match error {
        cel::ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        cel::ExecutionError::NoSuchOverload(_)
        | cel::ExecutionError::UnsupportedBinaryOperator(..)
        | cel::ExecutionError::UnexpectedType { .. }
        | cel::ExecutionError::ValuesNotComparable(..)
        | cel::ExecutionError::UnsupportedIndex(..)
        | cel::ExecutionError::UnsupportedKeyType(_) => "no such overload".to_owned(),
        cel::ExecutionError::DivisionByZero(_) => "division by zero".to_owned(),
        cel::ExecutionError::RemainderByZero(_) => "modulus by zero".to_owned(),
        cel::ExecutionError::Overflow(_, left, _) => match left {
            Value::UInt(_) => "unsigned integer overflow",
            Value::Timestamp(_) => "timestamp overflow",
            Value::Duration(_) => "duration overflow",
            _ => "integer overflow",
        }
        .to_owned(),
        cel::ExecutionError::IndexOutOfBounds(index) => match index {
            Value::Int(i) => format!("index out of range: {i}"),
            other => format!("index out of range: {other:?}"),
        },
        cel::ExecutionError::UndeclaredReference(name) if name.starts_with("authorizer") => {
            "graft does not evaluate authorizer checks yet: the authorizer cannot be read"
                .to_owned()
        }
        cel::ExecutionError::UndeclaredReference(name) => format!("no such attribute: {name}"),
        cel::ExecutionError::FunctionError { function, message } => {
            match function.as_str() {
                // The crate says why a string does not convert; cel-go only that it does not.
                "int" | "uint" | "double" | "bool"
                    if message.contains("parse") || message.contains("conversion") =>
                {
                    format!("type conversion error from 'string' to '{function}'")
                }
                _ => message.clone(),
            }
        }
        other => other.to_string(),
    }
}
