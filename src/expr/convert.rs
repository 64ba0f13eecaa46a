//! Conversions between JSON values and CEL values.
//!
//! JSON to CEL converts whole values that own their strings (`variables`,
//! `element`, decoded JSON), their maps walked in the JSON's order; the request's
//! JSON is read in place through [`super::view`] instead. CEL to JSON
//! sorts map keys (CEL maps are unordered, graft's output must be
//! deterministic) and bounds the result's size.

use std::borrow::Cow;
use std::collections::HashMap;

use cel::common::traits::{Container, Indexer, Iterable, Sizer, Zeroer};
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelOptional, CelString,
    CelUInt, DYN_TYPE, Kind, LIST_TYPE, MAP_TYPE, Type,
};
use cel::common::value::{Builtin, BuiltinRef, StaticVal, Val};
use serde_json::Number;

use super::ExprError;
use crate::k8s::MAX_STRING_BYTES;
use crate::tree::{Map, Tree};

/// Deeper values are refused instead of risking the stack. Kubernetes objects
/// stay far shallower, and serde_json refuses to parse beyond 128 levels.
pub const MAX_DEPTH: usize = 256;

/// JSON to CEL, copying strings, for values the evaluation does not outlive.
pub fn json_to_owned_val(value: &Tree<'_>) -> Result<Box<dyn Val + 'static>, ExprError> {
    to_val(value, 0)
}

fn to_val(value: &Tree<'_>, depth: usize) -> Result<Box<dyn Val + 'static>, ExprError> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    Ok(match value.resolved() {
        // A resolved tree is no text: `null` only keeps the match whole.
        Tree::Null | Tree::Text(_) => Box::new(CelNull),
        Tree::Bool(b) => Box::new(CelBool::from(*b)),
        Tree::Number(n) => number_to_val(n),
        Tree::String(s) => Box::new(CelString::from(s.to_string())),
        Tree::List(items) => Box::new(CelList::from(
            items
                .iter()
                .map(|item| to_val(item, depth + 1))
                .collect::<Result<Vec<_>, _>>()?,
        )),
        Tree::Map(fields) => {
            let mut map = OrderedMap::with_capacity(fields.len());
            for (key, item) in fields.iter() {
                let key = CelMapKey::String(CelString::from(key.to_owned()));
                map.insert(key, to_val(item, depth + 1)?);
            }
            Box::new(map)
        }
    })
}

/// A map that walks its keys in the order they were inserted: one converted from JSON
/// (a variable, decoded JSON, a function's result), in the JSON's order, or one a
/// comprehension builds (`transformMap`), in the order it iterated. cel's own map walks
/// its keys in its hash map's order, which is random per process; this one walks them
/// as the views of the object do, so what an expression builds by iterating it is the
/// same on every replica. Everything else is cel's map's.
#[derive(Debug, Clone, Default)]
pub struct OrderedMap<'v> {
    map: CelMap<'v>,
    keys: Vec<CelMapKey<'v>>,
}

impl<'v> OrderedMap<'v> {
    fn with_capacity(capacity: usize) -> OrderedMap<'v> {
        OrderedMap {
            map: CelMap::from(HashMap::with_capacity(capacity)),
            keys: Vec::with_capacity(capacity),
        }
    }

    /// Adds an entry; `false`, changing nothing, when the map has the key already.
    pub fn insert(&mut self, key: CelMapKey<'v>, value: Box<dyn Val + 'v>) -> bool {
        let mut entries = std::mem::take(&mut self.map).into_inner();
        let added = match entries.entry(key.clone()) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(vacant) => {
                vacant.insert(value);
                self.keys.push(key);
                true
            }
        };
        self.map = CelMap::from(entries);
        added
    }

    /// The entries, in order.
    pub fn into_entries(self) -> Vec<(CelMapKey<'v>, Box<dyn Val + 'v>)> {
        let mut entries = self.map.into_inner();
        self.keys
            .into_iter()
            .filter_map(|key| entries.remove_entry(&key))
            .collect()
    }
}

impl<'v> Val for OrderedMap<'v> {
    fn get_type(&self) -> &Type {
        <Self as Val>::cel_type()
    }

    fn cel_type() -> &'static Type {
        &MAP_TYPE
    }

    fn as_container(&self) -> Option<&dyn Container> {
        self.map.as_container()
    }

    fn as_indexer<'b, 'w>(&'b self) -> Option<&'b (dyn Indexer + 'w)>
    where
        Self: 'w,
    {
        self.map.as_indexer()
    }

    fn into_indexer<'w>(self: Box<Self>) -> Option<Box<dyn Indexer + 'w>>
    where
        Self: 'w,
    {
        Some(Box::new(self.map))
    }

    fn as_iterable<'b, 'w>(&'b self) -> Option<&'b (dyn Iterable + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        self.map.as_sizer()
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        self.map.as_zeroer()
    }

    fn equals(&self, other: &dyn Val) -> bool {
        self.map.equals(other)
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
        BuiltinRef::Map(&self.map)
    }

    fn into_builtin<'w>(self: Box<Self>) -> Option<Builtin<'w>>
    where
        Self: 'w,
    {
        Some(Builtin::Map(self.map))
    }
}

impl<'v> Iterable for OrderedMap<'v> {
    fn iter<'b, 'w>(&'b self) -> Box<dyn cel::common::traits::Iterator<'b, 'w> + 'b>
    where
        Self: 'w,
    {
        Box::new(KeysInOrder(self.keys.iter()))
    }
}

struct KeysInOrder<'b, 'v>(std::slice::Iter<'b, CelMapKey<'v>>);

impl<'b, 'v: 'w, 'w> cel::common::traits::Iterator<'b, 'w> for KeysInOrder<'b, 'v> {
    fn next(&mut self) -> Option<&'b (dyn Val + 'w)> {
        self.0.next().map(|key| key.inner())
    }
}

/// A JSON number as CEL: `int` when it fits, else `uint`, else `double`.
pub(super) fn number_to_val<'o>(n: &Number) -> Box<dyn Val + 'o> {
    if let Some(i) = n.as_i64() {
        Box::new(CelInt::from(i))
    } else if let Some(u) = n.as_u64() {
        Box::new(CelUInt::from(u))
    } else {
        // Without arbitrary_precision every serde_json number is one of the three.
        Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN)))
    }
}

/// A folded argument of a graft function that converts that argument to JSON on entry,
/// converted once when the policy loads ([`super::fold`]). It keeps the argument's CEL
/// type, so the function's overload still matches; it is only ever that argument, and
/// only [`argument_json`] reads it.
#[derive(Debug)]
pub struct JsonArgument {
    json: Tree<'static>,
    ty: &'static Type,
}

impl JsonArgument {
    /// `value` converted as [`val_to_json`] converts it, for a list or a map; `None`
    /// for anything else or a value that has no JSON form.
    pub fn of(value: &dyn Val) -> Option<JsonArgument> {
        let ty = match value.get_type().kind() {
            Kind::List => &LIST_TYPE,
            Kind::Map => &MAP_TYPE,
            _ => return None,
        };
        let json = val_to_json(value).ok()?;
        Some(JsonArgument { json, ty })
    }
}

impl Val for JsonArgument {
    fn get_type(&self) -> &Type {
        self.ty
    }

    fn cel_type() -> &'static Type {
        &DYN_TYPE
    }

    fn equals(&self, other: &dyn Val) -> bool {
        other
            .downcast_ref::<JsonArgument>()
            .is_some_and(|other| other.json == self.json)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(JsonArgument {
            json: self.json.clone(),
            ty: self.ty,
        })
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

impl StaticVal for JsonArgument {}

/// [`val_to_json`] for an argument that may have been converted at load: borrowed from
/// the policy when it was, so a call copies nothing the function does not keep.
pub fn argument_json(value: &dyn Val) -> Result<Cow<'_, Tree<'static>>, ExprError> {
    match value.downcast_ref::<JsonArgument>() {
        Some(argument) => Ok(Cow::Borrowed(&argument.json)),
        None => val_to_json(value).map(Cow::Owned),
    }
}

/// CEL to JSON. Map keys are sorted and stringified; an optional becomes its
/// value or null; bytes, durations, timestamps and types have no JSON form.
pub fn val_to_json(value: &dyn Val) -> Result<Tree<'static>, ExprError> {
    let mut budget = MAX_STRING_BYTES;
    to_json(value, 0, &mut budget)
}

/// Every value spends roughly its serialized size from `budget`, so a result
/// bigger than the string cap is refused before it is built in full.
fn to_json(value: &dyn Val, depth: usize, budget: &mut usize) -> Result<Tree<'static>, ExprError> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    let ty = value.get_type();
    let spend = |budget: &mut usize, n: usize| {
        *budget = budget.checked_sub(n).ok_or_else(too_large)?;
        Ok::<(), ExprError>(())
    };
    let unsupported = || ExprError::Evaluate(format!("a {} value has no JSON form", ty.name()));
    match ty.kind() {
        Kind::NullType => {
            spend(budget, 4)?;
            Ok(Tree::Null)
        }
        Kind::Boolean => {
            spend(budget, 5)?;
            let b = value.downcast_ref::<CelBool>().ok_or_else(unsupported)?;
            Ok(Tree::Bool(*b.inner()))
        }
        Kind::Int => {
            spend(budget, 20)?;
            let i = value.downcast_ref::<CelInt>().ok_or_else(unsupported)?;
            Ok(Tree::from(*i.inner()))
        }
        Kind::UInt => {
            spend(budget, 20)?;
            let u = value.downcast_ref::<CelUInt>().ok_or_else(unsupported)?;
            Ok(Tree::Number(Number::from(*u.inner())))
        }
        Kind::Double => {
            spend(budget, 24)?;
            let d = *value
                .downcast_ref::<CelDouble>()
                .ok_or_else(unsupported)?
                .inner();
            Number::from_f64(d)
                .map(Tree::Number)
                .ok_or_else(|| ExprError::Evaluate(format!("the double {d} has no JSON form")))
        }
        Kind::String => {
            let s = value.downcast_ref::<CelString>().ok_or_else(unsupported)?;
            spend(budget, s.inner().len() + 2)?;
            Ok(Tree::from(s.inner().to_owned()))
        }
        Kind::List => {
            let list = value.downcast_ref::<CelList>().ok_or_else(unsupported)?;
            spend(budget, 2)?;
            list.inner()
                .iter()
                .map(|item| {
                    spend(budget, 1)?;
                    to_json(item.as_ref(), depth + 1, budget)
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Tree::from)
        }
        Kind::Map => {
            let map = value.downcast_ref::<CelMap>().ok_or_else(unsupported)?;
            spend(budget, 2)?;
            let mut entries = map
                .inner()
                .iter()
                .map(|(key, item)| Ok((key_to_string(key)?, item)))
                .collect::<Result<Vec<_>, ExprError>>()?;
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let mut object = Map::with_capacity(entries.len());
            for (key, item) in entries {
                spend(budget, key.len() + 4)?;
                let item = to_json(item.as_ref(), depth + 1, budget)?;
                if object.insert(key.clone(), item).is_some() {
                    return Err(ExprError::Evaluate(format!(
                        "the map has two keys that both read '{key}' in JSON"
                    )));
                }
            }
            Ok(Tree::from(object))
        }
        Kind::Opaque => match value.downcast_ref::<CelOptional>() {
            Some(optional) => match optional.option() {
                Some(inner) => to_json(inner, depth + 1, budget),
                None => Ok(Tree::Null),
            },
            None => Err(unsupported()),
        },
        _ => Err(unsupported()),
    }
}

fn key_to_string(key: &CelMapKey<'_>) -> Result<String, ExprError> {
    Ok(match key {
        CelMapKey::String(s) => s.inner().to_owned(),
        CelMapKey::Int(i) => i.inner().to_string(),
        CelMapKey::UInt(u) => u.inner().to_string(),
        CelMapKey::Bool(b) => b.inner().to_string(),
    })
}

fn too_deep() -> ExprError {
    ExprError::Evaluate(format!("value is nested deeper than {MAX_DEPTH} levels"))
}

fn too_large() -> ExprError {
    ExprError::Evaluate(format!("result is larger than {MAX_STRING_BYTES} bytes"))
}

/// Compact JSON text. Keys come out sorted because every value handed here
/// was built by [`val_to_json`], which inserts them in order.
pub fn to_json_string(value: &Tree<'_>) -> Result<String, ExprError> {
    let text = serde_json::to_string(value)
        .map_err(|e| ExprError::Evaluate(format!("cannot encode JSON: {e}")))?;
    if text.len() > MAX_STRING_BYTES {
        return Err(too_large());
    }
    Ok(text)
}

/// A copy of `value` that owns everything, of the same CEL type (a map's keys in the
/// order it walks them): how a MutatingAdmissionPolicy's variable keeps its value for
/// the evaluations that read it after the one that computed it. `None` for a value of a
/// type this does not know.
pub fn to_static(value: &dyn Val) -> Option<Box<dyn Val + 'static>> {
    use cel::common::types::{CelBytes, CelDuration, CelTimestamp, CelType};
    Some(match value.get_type().kind() {
        Kind::NullType => Box::new(CelNull),
        Kind::Boolean => Box::new(CelBool::from(*value.downcast_ref::<CelBool>()?.inner())),
        Kind::Int => Box::new(CelInt::from(*value.downcast_ref::<CelInt>()?.inner())),
        Kind::UInt => Box::new(CelUInt::from(*value.downcast_ref::<CelUInt>()?.inner())),
        Kind::Double => Box::new(CelDouble::from(*value.downcast_ref::<CelDouble>()?.inner())),
        Kind::String => Box::new(CelString::from(
            value.downcast_ref::<CelString>()?.inner().to_owned(),
        )),
        Kind::Bytes => Box::new(CelBytes::from(
            value.downcast_ref::<CelBytes>()?.inner().to_vec(),
        )),
        Kind::Duration => Box::new(*value.downcast_ref::<CelDuration>()?),
        Kind::Timestamp => Box::new(value.downcast_ref::<CelTimestamp>()?.clone()),
        Kind::Type => Box::new(value.downcast_ref::<CelType>()?.clone()),
        Kind::List => {
            let mut items = value.as_iterable()?.iter();
            let mut list = Vec::new();
            while let Some(item) = items.next() {
                list.push(to_static(item)?);
            }
            Box::new(CelList::from(list))
        }
        Kind::Map => {
            let indexer = value.as_indexer()?;
            let mut keys = value.as_iterable()?.iter();
            let mut map = OrderedMap::default();
            while let Some(key) = keys.next() {
                let item = to_static(indexer.get(key).ok()?.as_ref())?;
                let key = CelMapKey::try_from(to_static(key)?).ok()?;
                map.insert(key, item);
            }
            Box::new(map)
        }
        _ => {
            if let Some(optional) = value.downcast_ref::<CelOptional>() {
                return Some(Box::new(match optional.option() {
                    Some(inner) => CelOptional::of(to_static(inner)?),
                    None => CelOptional::none(),
                }));
            }
            if let Some(object) = value.downcast_ref::<cel::common::types::CelStruct>() {
                return super::structs::to_static(object);
            }
            static_copy(value.as_any()?)?
        }
    })
}

/// A copy of a value of one of graft's own types, which own what they hold.
fn static_copy(value: &dyn std::any::Any) -> Option<Box<dyn Val + 'static>> {
    fn copy<T: Val + Clone + 'static>(value: &dyn std::any::Any) -> Option<Box<dyn Val + 'static>> {
        value
            .downcast_ref::<T>()
            .map(|v| Box::new(v.clone()) as Box<dyn Val>)
    }
    copy::<super::quantities::Quantity>(value)
        .or_else(|| copy::<super::net::Ip>(value))
        .or_else(|| copy::<super::net::Cidr>(value))
        .or_else(|| copy::<super::urls::Url>(value))
        .or_else(|| copy::<super::semver::Semver>(value))
        .or_else(|| copy::<super::formats::NamedFormat>(value))
}
