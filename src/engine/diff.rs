//! The RFC 6902 diff of two JSON values: the patch `json_patch::diff` gives, operation
//! for operation, without its cost on the subtrees that did not change.
//!
//! `json_patch::diff` walks every key of both trees, pushing each onto a JSON Pointer
//! and looking it up by hash on the other side, even where the two sides are equal: a
//! third of a review went there for a pod whose containers list a sidecar merge
//! changed. This walk is the same recursion in the same order, with two shortcuts that
//! do not change its output: a subtree that is plainly equal (same keys in the same
//! order, equal values) is skipped before its key is pushed, and the keys of two maps
//! are paired by position while they agree, so a lookup by hash happens only where the
//! order differs. A property test (`tests/properties.rs`) holds the patches equal.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation, ReplaceOperation};
use serde_json::{Map, Value};

use crate::jsonpath::lookup::field;

/// Appends to `patch` the operations turning `left` into `right`, their paths under `at`.
pub fn diff_into(left: &Value, right: &Value, at: &mut PointerBuf, patch: &mut Patch) {
    match (left, right) {
        (Value::Object(left), Value::Object(right)) => diff_maps(left, right, at, patch),
        (Value::Array(left), Value::Array(right)) => diff_lists(left, right, at, patch),
        _ if left == right => {}
        _ => patch.0.push(PatchOperation::Replace(ReplaceOperation {
            path: at.clone(),
            value: right.clone(),
        })),
    }
}

/// Whether `left` and `right` are equal, decided without hashing when maps list their
/// keys in the same order (they almost always do: one is the other, partly edited).
fn plainly_equal(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Object(l), Value::Object(r)) => {
            l.len() == r.len()
                && (l
                    .iter()
                    .zip(r.iter())
                    .all(|((lk, lv), (rk, rv))| lk == rk && plainly_equal(lv, rv))
                    // Same entries in another order: equal all the same.
                    || l == r)
        }
        (Value::Array(l), Value::Array(r)) => {
            l.len() == r.len() && l.iter().zip(r).all(|(lv, rv)| plainly_equal(lv, rv))
        }
        _ => left == right,
    }
}

fn diff_lists(left: &[Value], right: &[Value], at: &mut PointerBuf, patch: &mut Patch) {
    // As json_patch: pairs by index, then removes (each at the same shifted index) or adds.
    let paired = left.len().min(right.len());
    for (index, (l, r)) in left.iter().zip(right).enumerate() {
        if !plainly_equal(l, r) {
            at.push_back(index);
            diff_into(l, r, at, patch);
            at.pop_back();
        }
    }
    for _ in paired..left.len() {
        at.push_back(paired);
        patch
            .0
            .push(PatchOperation::Remove(RemoveOperation { path: at.clone() }));
        at.pop_back();
    }
    for (index, r) in right.iter().enumerate().skip(paired) {
        at.push_back(index);
        patch.0.push(PatchOperation::Add(AddOperation {
            path: at.clone(),
            value: r.clone(),
        }));
        at.pop_back();
    }
}

fn diff_maps(
    left: &Map<String, Value>,
    right: &Map<String, Value>,
    at: &mut PointerBuf,
    patch: &mut Patch,
) {
    // As json_patch: the right map's keys in order (changes and adds), then the left
    // map's keys that the right one lacks (removes).
    let mut in_step = left.iter();
    let mut stepping = true;
    let mut paired_in_step = 0;
    for (key, r) in right {
        let l = match in_step.next() {
            Some((left_key, l)) if stepping && left_key == key => {
                paired_in_step += 1;
                Some(l)
            }
            _ => {
                stepping = false;
                field(left, key)
            }
        };
        match l {
            Some(l) if plainly_equal(l, r) => {}
            Some(l) => {
                at.push_back(key.as_str());
                diff_into(l, r, at, patch);
                at.pop_back();
            }
            None => {
                at.push_back(key.as_str());
                patch.0.push(PatchOperation::Add(AddOperation {
                    path: at.clone(),
                    value: r.clone(),
                }));
                at.pop_back();
            }
        }
    }
    // Every left key was paired with an equal right key: nothing was removed.
    if paired_in_step == left.len() {
        return;
    }
    for key in left.keys() {
        if field(right, key).is_none() {
            at.push_back(key.as_str());
            patch
                .0
                .push(PatchOperation::Remove(RemoveOperation { path: at.clone() }));
            at.pop_back();
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(left: Value, right: Value) {
        let mut patch = Patch(Vec::new());
        diff_into(&left, &right, &mut PointerBuf::new(), &mut patch);
        assert_eq!(patch, json_patch::diff(&left, &right), "{left} -> {right}");
    }

    #[test]
    fn same_operations_as_json_patch() {
        let cases = [
            (json!({"a": 1}), json!({"a": 1})),
            (json!({"a": 1, "b": 2}), json!({"b": 2, "a": 1})),
            (json!({"a": 1, "b": 2}), json!({"b": 3, "c": 1})),
            (json!({"a": {"x/y": 1, "~": 2}}), json!({"a": {"x/y": 2}})),
            (json!([1, 2, 3]), json!([1])),
            (json!([1]), json!([0, 1, 2])),
            (
                json!([{"n": 1}, {"n": 2}]),
                json!([{"n": 1}, {"n": 3}, {"n": 4}]),
            ),
            (
                json!({"a": [1, {"b": null}]}),
                json!({"a": [1, {"b": false}]}),
            ),
            (json!({"a": 1}), json!([1])),
            (json!(1), json!(1.0)),
            (json!({"k": 1, "l": 2, "m": 3}), json!({"k": 1, "m": 3})),
            (json!({"k": 1, "m": 3}), json!({"m": 3, "k": 1, "l": 2})),
            (json!({}), json!({"a": {}})),
            (json!(null), json!({"a": 1})),
        ];
        for (left, right) in cases {
            check(left.clone(), right.clone());
            check(right, left);
        }
    }

    #[test]
    fn paths_start_under_the_given_pointer() {
        let mut patch = Patch(Vec::new());
        let mut at = PointerBuf::new();
        at.push_back("spec");
        diff_into(&json!([1]), &json!([1, 2]), &mut at, &mut patch);
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            json!([{"op": "add", "path": "/spec/1", "value": 2}])
        );
        assert_eq!(at.as_str(), "/spec");
    }

    /// Small alphabets, so the two sides share keys, values and list prefixes.
    fn value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (0..3i64).prop_map(Value::from),
            Just(json!(1.0)),
            prop::sample::select(vec!["a", "b/c", "~"]).prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(
                    (prop::sample::select(vec!["k", "l", "m/n", "~o"]), inner),
                    0..4
                )
                .prop_map(|entries| Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect()
                )),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn always_the_json_patch_diff(left in value(), right in value()) {
            let mut patch = Patch(Vec::new());
            diff_into(&left, &right, &mut PointerBuf::new(), &mut patch);
            proptest::prop_assert_eq!(patch, json_patch::diff(&left, &right));
        }
    }
}
