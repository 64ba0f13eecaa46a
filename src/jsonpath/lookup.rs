//! Key lookups in the small maps Kubernetes objects are made of.
//!
//! `serde_json`'s ordered map hashes every key it is asked for with SipHash; with
//! hundreds of candidate policies each looking up `metadata`, `labels` and one label,
//! that hashing was most of what a non-matching policy cost. A Kubernetes map rarely
//! has more than a dozen keys, and comparing that many short strings is cheaper than
//! hashing one.

use serde_json::{Map, Value};

/// Maps up to this size are searched in order instead of by hash.
const LINEAR_UP_TO: usize = 12;

/// `map.get(key)`, without hashing when the map is small.
pub fn field<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    if map.len() > LINEAR_UP_TO {
        return map.get(key);
    }
    map.iter()
        .find_map(|(name, value)| (name == key).then_some(value))
}

/// `value[key]` when `value` is a map.
pub fn child<'v>(value: &'v Value, key: &str) -> Option<&'v Value> {
    field(value.as_object()?, key)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn small_and_large_maps_answer_as_get() {
        let small = json!({"a": 1, "b": 2});
        let large: Map<String, Value> = (0..40).map(|i| (format!("k{i}"), json!(i))).collect();
        for key in ["a", "b", "c", ""] {
            assert_eq!(child(&small, key), small.get(key));
        }
        for key in ["k0", "k39", "k40"] {
            assert_eq!(field(&large, key), large.get(key));
        }
        assert_eq!(child(&json!([1]), "a"), None);
    }
}
