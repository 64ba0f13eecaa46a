//! The fields of an object that its kind does not declare, as the apiserver's strict
//! decoding reports them when it decodes a MutatingAdmissionPolicy's JSONPatch result
//! into the typed object (`strict decoding error: unknown field "spec.foo"`): every one,
//! in the order the object has them, paths written as Go's decoder writes them
//! (`spec.containers[1].ports[0].containerPortZ`).

use super::{Shape, TypeRef};
use crate::tree::Tree;

/// The undeclared fields of `value`, a value of `ty`.
pub fn unknown_fields(value: &Tree<'_>, ty: TypeRef<'_>) -> Vec<String> {
    let mut found = Vec::new();
    walk(value, ty, &mut String::new(), &mut found);
    found
}

fn walk(value: &Tree<'_>, ty: TypeRef<'_>, path: &mut String, found: &mut Vec<String>) {
    match (value.resolved(), ty.shape()) {
        (Tree::Map(map), Shape::Struct(fields)) => {
            for (key, child) in map.iter() {
                let start = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                match fields.field(key) {
                    Some(field) => walk(child, field, path, found),
                    None if fields.preserves_unknown() => {}
                    None => found.push(path.clone()),
                }
                path.truncate(start);
            }
        }
        (Tree::List(items), Shape::List(list)) => {
            for (index, item) in items.iter().enumerate() {
                let start = path.len();
                path.push_str(&format!("[{index}]"));
                walk(item, list.element(), path, found);
                path.truncate(start);
            }
        }
        (Tree::Map(map), Shape::Map(values)) => {
            for (key, child) in map.iter() {
                let start = path.len();
                path.push_str(&format!("[{key}]"));
                walk(child, values.element(), path, found);
                path.truncate(start);
            }
        }
        // Scalars, free-form values, and values of the wrong shape (which decoding reports
        // otherwise) have no fields to check.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_undeclared_field_is_named_by_its_path() {
        let schema = super::super::builtin().expect("the table parses");
        let pod = schema.kind("", "v1", "Pod").expect("Pod");
        let object = Tree::from(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"any": "key"}, "bogus": 1},
            "spec": {
                "containers": [
                    {"name": "a", "image": "x"},
                    {"name": "b", "ports": [{"containerPortZ": 80}]},
                ],
                "bogusField": true,
            },
        }));
        assert_eq!(
            unknown_fields(&object, pod),
            [
                "metadata.bogus",
                "spec.containers[1].ports[0].containerPortZ",
                "spec.bogusField",
            ]
        );
    }
}
