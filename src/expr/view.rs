//! CEL values that read the request's JSON in place.
//!
//! A binding such as `object` is handed to CEL as a [`MapView`] (or a [`ListView`])
//! over the JSON rather than converted whole: an expression reads a few fields of a
//! large object, and converting all of it, then dropping it, used to be most of an
//! evaluation's cost.
//!
//! A view turns into a real `CelMap` or `CelList` one level at a time, the first time
//! anything looks inside it: the entries of that level are scalars (strings borrowed
//! from the JSON) and views of the nested maps and lists, which stay unconverted until
//! they are looked into in turn. The converted level is what the view hands out when
//! cel asks for its built-in form ([`Val::as_builtin`]), which cel does on every field
//! selection, on equality with a map or list, and in functions that take a map or list.
//! Every operation therefore behaves exactly as on the fully converted value, and a
//! subtree nothing looks into costs one small allocation at most.
//!
//! Reading one field needs no converted level: a chain of field selections on a
//! binding, `object.metadata.labels`, is answered as a whole (the interpreter first asks
//! for the dotted name, and [`Node::path`] follows it down the JSON); a chain with optional
//! steps or indexes, `object.metadata.?annotations['a']`, is followed the same way
//! (`super::paths`); and a map's indexer finds a string key in the JSON, which is how
//! graft's functions (`podOrdinal`, `annotationJSON`) read the object they are given.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, OnceLock};

use crate::tree::{Map, Tree};
use cel::ExecutionError;
use cel::common::traits::{Adder, Container, Indexer, Iterable, Sizer, Zeroer};
use cel::common::types::{
    CelBool, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, LIST_TYPE, MAP_TYPE, Type,
};
use cel::common::value::{Builtin, BuiltinRef, CowVal, Val};

use super::convert;

/// `value` as a CEL value: a view for a map or a list, the converted scalar otherwise.
/// Strings are borrowed from `value`.
pub fn view<'a>(value: &'a Tree<'a>) -> Box<dyn Val + 'a> {
    match value {
        Tree::Map(_) => Box::new(MapView::new(value)),
        Tree::List(_) => Box::new(ListView::new(value)),
        // A text node stays text until something looks inside: a map's level holds a
        // view of each value, and most levels are converted to read one of them.
        Tree::Text(text) if text.as_str().starts_with('{') => Box::new(MapView::new(value)),
        Tree::Text(_) => Box::new(ListView::new(value)),
        Tree::Null => Box::new(CelNull),
        Tree::Bool(b) => Box::new(CelBool::from(*b)),
        Tree::Number(n) => convert::number_to_val(n),
        Tree::String(s) => Box::new(CelString::from(&**s)),
    }
}

/// A JSON value as CEL, kept by its kind so that a field path can be followed down
/// maps without going through cel: see [`Node::path`].
#[derive(Debug)]
pub enum Node<'a> {
    Map(MapView<'a>),
    List(ListView<'a>),
    Scalar(Box<dyn Val + 'a>),
}

impl<'a> Node<'a> {
    /// `value` as a node: a view for a map or a list.
    pub fn of(value: &'a Tree<'a>) -> Node<'a> {
        match value {
            Tree::Map(_) => Node::Map(MapView::new(value)),
            Tree::List(_) => Node::List(ListView::new(value)),
            Tree::Text(text) if text.as_str().starts_with('{') => Node::Map(MapView::new(value)),
            Tree::Text(_) => Node::List(ListView::new(value)),
            scalar => Node::Scalar(view(scalar)),
        }
    }

    /// The node as the CEL value it stands for.
    pub fn as_val(&self) -> &(dyn Val + 'a) {
        match self {
            Node::Map(map) => map,
            Node::List(list) => list,
            Node::Scalar(value) => value.as_ref(),
        }
    }

    /// The node at `fields` below this one, each a field of a map, or `None` when one
    /// is missing or not below a map.
    ///
    /// The interpreter asks for `object.metadata.labels` as a whole name before it
    /// selects `metadata` on `object` and `labels` on that; answering it here reads
    /// the JSON in place, where selecting would convert `object`'s and `metadata`'s
    /// levels. The answer is the value the selections would give.
    pub fn path<'p>(&self, fields: impl Iterator<Item = &'p str>) -> Option<&Node<'a>> {
        let mut node = self;
        for field in fields {
            let Node::Map(map) = node else {
                return None;
            };
            node = map.field(field)?;
        }
        Some(node)
    }
}

/// A JSON object seen as a CEL `map` with string keys.
#[derive(Debug)]
pub struct MapView<'a> {
    /// A map, or a text node of one, built when first looked into.
    source: &'a Tree<'a>,
    /// This level, converted on first use.
    level: OnceLock<CelMap<'a>>,
    /// The fields read in place ([`Node::path`], the indexer), in the order of `fields`,
    /// each made on first use.
    nodes: OnceLock<Box<[OnceLock<Node<'a>>]>>,
}

impl<'a> MapView<'a> {
    fn new(source: &'a Tree<'a>) -> MapView<'a> {
        MapView {
            source,
            level: OnceLock::new(),
            nodes: OnceLock::new(),
        }
    }

    /// The field `key`, read in place: found as the tree's map finds it (a scan of a
    /// small map, its key index in a large one), its node made on first use.
    pub fn field(&self, key: &str) -> Option<&Node<'a>> {
        let fields = self.fields();
        let index = fields.position(key)?;
        let (_, value) = fields.entries().get(index)?;
        let nodes = self
            .nodes
            .get_or_init(|| fields.iter().map(|_| OnceLock::new()).collect());
        Some(nodes.get(index)?.get_or_init(|| Node::of(value)))
    }

    fn fields(&self) -> &'a Map<'a> {
        static EMPTY: LazyLock<Map<'static>> = LazyLock::new(Map::new);
        self.source.as_map().unwrap_or(&EMPTY)
    }

    fn level(&self) -> &CelMap<'a> {
        self.level.get_or_init(|| map_level(self.fields()))
    }

    fn into_level(self) -> CelMap<'a> {
        let fields = self.fields();
        self.level.into_inner().unwrap_or_else(|| map_level(fields))
    }
}

/// A comprehension over an object's map walks its keys in the object's order. cel's own
/// map walks them in its hash map's order, which is random per process: `labels.map(k,
/// k)` would differ between replicas, and so would a patch made from it.
impl<'a> Iterable for MapView<'a> {
    fn iter<'b, 'v>(&'b self) -> Box<dyn cel::common::traits::Iterator<'b, 'v> + 'b>
    where
        Self: 'v,
    {
        Box::new(KeysInOrder {
            fields: self.fields().entries().iter(),
            level: self.level(),
        })
    }
}

/// The keys of a map view in the object's order, lent from its converted level.
struct KeysInOrder<'b, 'a> {
    fields: std::slice::Iter<'a, (Cow<'a, str>, Tree<'a>)>,
    level: &'b CelMap<'a>,
}

impl<'b, 'a: 'v, 'v> cel::common::traits::Iterator<'b, 'v> for KeysInOrder<'b, 'a> {
    fn next(&mut self) -> Option<&'b (dyn Val + 'v)> {
        let (key, _) = self.fields.next()?;
        let key = CelMapKey::String(CelString::from(&**key));
        let (stored, _) = self.level.inner().get_key_value(&key)?;
        Some(stored.inner())
    }
}

fn map_level<'a>(fields: &'a Map<'a>) -> CelMap<'a> {
    let mut map = HashMap::with_capacity(fields.len());
    for (key, value) in fields.iter() {
        map.insert(CelMapKey::String(CelString::from(key)), view(value));
    }
    CelMap::from(map)
}

impl<'a> Val for MapView<'a> {
    fn get_type(&self) -> &Type {
        <Self as Val>::cel_type()
    }

    fn cel_type() -> &'static Type {
        &MAP_TYPE
    }

    fn as_container(&self) -> Option<&dyn Container> {
        Some(self)
    }

    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }

    fn into_indexer<'v>(self: Box<Self>) -> Option<Box<dyn Indexer + 'v>>
    where
        Self: 'v,
    {
        Some(Box::new(self.into_level()))
    }

    fn as_iterable<'b, 'v>(&'b self) -> Option<&'b (dyn Iterable + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        Some(self)
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        Some(self)
    }

    fn equals(&self, other: &dyn Val) -> bool {
        self.level().equals(other)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(MapView::new(self.source))
    }

    fn as_builtin<'b, 'v>(&'b self) -> BuiltinRef<'b, 'v>
    where
        Self: 'v,
    {
        BuiltinRef::Map(self.level())
    }

    fn into_builtin<'v>(self: Box<Self>) -> Option<Builtin<'v>>
    where
        Self: 'v,
    {
        Some(Builtin::Map(self.into_level()))
    }
}

impl<'a> Indexer for MapView<'a> {
    /// A string key is read in place; anything else is left to the converted level, for
    /// its numeric fallbacks and errors.
    fn get<'b, 'v>(&'b self, key: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        match key.downcast_ref::<CelString>() {
            Some(name) => match self.field(name.inner()) {
                Some(node) => Ok(CowVal::Borrowed(node.as_val())),
                // What the converted map says of a missing string key.
                None => Err(ExecutionError::NoSuchKey(Arc::new(name.inner().to_owned()))),
            },
            None => self.level().get(key),
        }
    }

    fn steal<'v>(self: Box<Self>, key: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        Box::new(self.into_level()).steal(key)
    }
}

impl Container for MapView<'_> {
    /// A string key is looked up in the JSON; any other key is left to the converted
    /// map, for its numeric fallbacks and errors.
    fn contains(&self, key: &dyn Val) -> Result<bool, ExecutionError> {
        match key.downcast_ref::<CelString>() {
            Some(key) => Ok(self.fields().contains_key(key.inner())),
            None => self
                .level()
                .as_container()
                .map_or(Ok(false), |map| map.contains(key)),
        }
    }
}

impl Sizer for MapView<'_> {
    fn size(&self) -> CelInt {
        len(self.fields().len())
    }
}

impl Zeroer for MapView<'_> {
    fn is_zero_value(&self) -> bool {
        self.fields().is_empty()
    }
}

/// A JSON array seen as a CEL `list`.
#[derive(Debug)]
pub struct ListView<'a> {
    /// A list, or a text node of one, built when first looked into.
    source: &'a Tree<'a>,
    /// The elements, converted on first use.
    level: OnceLock<CelList<'a>>,
    /// The items read in place ([`ListView::item`]), each made on first use.
    nodes: OnceLock<Box<[OnceLock<Node<'a>>]>>,
}

impl<'a> ListView<'a> {
    fn new(source: &'a Tree<'a>) -> ListView<'a> {
        ListView {
            source,
            level: OnceLock::new(),
            nodes: OnceLock::new(),
        }
    }

    /// The item at `index`, read in place, its node made on first use.
    pub fn item(&self, index: usize) -> Option<&Node<'a>> {
        let items = self.items();
        let value = items.get(index)?;
        let nodes = self
            .nodes
            .get_or_init(|| items.iter().map(|_| OnceLock::new()).collect());
        Some(nodes.get(index)?.get_or_init(|| Node::of(value)))
    }

    fn items(&self) -> &'a [Tree<'a>] {
        self.source.as_list().map_or(&[], Vec::as_slice)
    }

    fn level(&self) -> &CelList<'a> {
        self.level.get_or_init(|| list_level(self.items()))
    }

    fn into_level(self) -> CelList<'a> {
        let items = self.items();
        self.level.into_inner().unwrap_or_else(|| list_level(items))
    }
}

fn list_level<'a>(items: &'a [Tree<'a>]) -> CelList<'a> {
    CelList::from(items.iter().map(view).collect::<Vec<_>>())
}

impl<'a> Val for ListView<'a> {
    fn get_type(&self) -> &Type {
        <Self as Val>::cel_type()
    }

    fn cel_type() -> &'static Type {
        &LIST_TYPE
    }

    fn as_adder<'b, 'v>(&'b self) -> Option<&'b (dyn Adder + 'v)>
    where
        Self: 'v,
    {
        self.level().as_adder()
    }

    fn as_container(&self) -> Option<&dyn Container> {
        self.level().as_container()
    }

    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        self.level().as_indexer()
    }

    fn into_indexer<'v>(self: Box<Self>) -> Option<Box<dyn Indexer + 'v>>
    where
        Self: 'v,
    {
        Some(Box::new(self.into_level()))
    }

    fn as_iterable<'b, 'v>(&'b self) -> Option<&'b (dyn Iterable + 'v)>
    where
        Self: 'v,
    {
        self.level().as_iterable()
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        Some(self)
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        Some(self)
    }

    fn equals(&self, other: &dyn Val) -> bool {
        self.level().equals(other)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(ListView::new(self.source))
    }

    fn as_builtin<'b, 'v>(&'b self) -> BuiltinRef<'b, 'v>
    where
        Self: 'v,
    {
        BuiltinRef::List(self.level())
    }

    fn into_builtin<'v>(self: Box<Self>) -> Option<Builtin<'v>>
    where
        Self: 'v,
    {
        Some(Builtin::List(self.into_level()))
    }
}

impl Sizer for ListView<'_> {
    fn size(&self) -> CelInt {
        len(self.items().len())
    }
}

impl Zeroer for ListView<'_> {
    fn is_zero_value(&self) -> bool {
        self.items().is_empty()
    }
}

/// A length as CEL's `int`, as the built-in containers report it.
fn len(n: usize) -> CelInt {
    CelInt::from(i64::try_from(n).unwrap_or(i64::MAX))
}
