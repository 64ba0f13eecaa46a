//! Key lookups in the small maps Kubernetes objects are made of.
//!
//! `serde_json`'s ordered map hashes every key it is asked for with SipHash; with
//! hundreds of candidate policies each looking up `metadata`, `labels` and one label,
//! that hashing was most of what a non-matching policy cost. A Kubernetes map rarely
//! has more than a few dozen keys (a pod's `spec` has about sixteen), and comparing
//! that many short strings, most of which differ in length, is cheaper than hashing
//! one. The engine's object is a tree (`crate::tree`), whose maps do this themselves;
//! what still reads a `serde_json::Map` (the Multus annotation) looks keys up here.

use serde_json::{Map, Value};

/// Maps up to this size are searched in order instead of by hash.
const LINEAR_UP_TO: usize = 32;

/// `map.get(key)`, without hashing when the map is small.
pub fn field<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    if map.len() > LINEAR_UP_TO {
        return map.get(key);
    }
    map.iter()
        .find_map(|(name, value)| (name == key).then_some(value))
}

/// `map.get_mut(key)`, without hashing when the map is small.
pub fn field_mut<'v>(map: &'v mut Map<String, Value>, key: &str) -> Option<&'v mut Value> {
    if map.len() > LINEAR_UP_TO {
        return map.get_mut(key);
    }
    map.iter_mut()
        .find_map(|(name, value)| (name == key).then_some(value))
}

/// `value[key]` when `value` is a map.
pub fn child<'v>(value: &'v Value, key: &str) -> Option<&'v Value> {
    field(value.as_object()?, key)
}

/// `value[key]` when `value` is a map, to change.
pub fn child_mut<'v>(value: &'v mut Value, key: &str) -> Option<&'v mut Value> {
    field_mut(value.as_object_mut()?, key)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn small_and_large_maps_answer_as_get() {
        let small = json!({"a": 1, "b": 2});
        let large: Map<String, Value> = (0..40).map(|i| (format!("k{i}"), json!(i))).collect();
        let mut small_mut = small.clone();
        let mut large_mut = large.clone();
        for key in ["a", "b", "c", ""] {
            assert_eq!(child(&small, key), small.get(key));
            assert_eq!(
                child_mut(&mut small_mut, key).cloned(),
                small.get(key).cloned()
            );
        }
        for key in ["k0", "k39", "k40"] {
            assert_eq!(field(&large, key), large.get(key));
            assert_eq!(
                field_mut(&mut large_mut, key).cloned(),
                large.get(key).cloned()
            );
        }
        assert_eq!(child(&json!([1]), "a"), None);
        assert_eq!(child_mut(&mut json!([1]), "a"), None);
    }
}
