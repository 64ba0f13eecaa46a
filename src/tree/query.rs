//! jsonpath-rust's view of a tree, so that compiled JSONPath queries a tree as it
//! queries a `serde_json::Value`.

use std::borrow::Cow;

use jsonpath_rust::query::queryable::Queryable;

use super::Tree;

impl Queryable for Tree<'_> {
    fn get(&self, key: &str) -> Option<&Self> {
        Tree::get(self, key)
    }

    fn as_array(&self) -> Option<&Vec<Self>> {
        self.as_list()
    }

    fn as_object(&self) -> Option<Vec<(&str, &Self)>> {
        self.as_map().map(|map| map.iter().collect())
    }

    fn as_str(&self) -> Option<&str> {
        Tree::as_str(self)
    }

    fn as_i64(&self) -> Option<i64> {
        Tree::as_i64(self)
    }

    fn as_f64(&self) -> Option<f64> {
        Tree::as_f64(self)
    }

    fn as_bool(&self) -> Option<bool> {
        Tree::as_bool(self)
    }

    fn null() -> Self {
        Tree::Null
    }

    /// The functions jsonpath-rust gives `serde_json::Value` (`in`, `nin`, `none_of`,
    /// `any_of`, `subset_of`), computed by it on the arguments' JSON, so that a query
    /// gives the same answer on either.
    fn extension_custom(name: &str, args: Vec<Cow<Self>>) -> Self {
        let args = args.iter().map(|arg| Cow::Owned(arg.to_value())).collect();
        Tree::from(serde_json::Value::extension_custom(name, args))
    }
}
