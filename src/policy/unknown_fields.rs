//! Every unknown field of a policy document, not only the first: serde stops at the
//! first one, so a document with four typos would take four lint runs. The document is
//! walked against the JSON Schema generated from the model (the same one
//! `schema/mutationpolicy.schema.json` holds), so the two cannot disagree.

use std::sync::LazyLock;

use serde_json::{Map, Value};

use super::model::PolicyDocument;

static SCHEMA: LazyLock<Value> = LazyLock::new(|| schemars::schema_for!(PolicyDocument).to_value());

/// A key the schema does not allow where it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownField {
    /// Where it is written, e.g. `spec.mutations[0].set.pth`.
    pub field: String,
    pub key: String,
    /// The keys allowed there, in the schema's order.
    pub expected: Vec<String>,
}

impl UnknownField {
    /// The message serde gives for the first unknown field, for every one.
    pub fn message(&self) -> String {
        let quoted: Vec<String> = self.expected.iter().map(|key| format!("`{key}`")).collect();
        let expected = match quoted.as_slice() {
            [] => "there are no fields".to_string(),
            [one] => format!("expected {one}"),
            [a, b] => format!("expected {a} or {b}"),
            many => format!("expected one of {}", many.join(", ")),
        };
        format!("unknown field `{}`, {expected}", self.key)
    }
}

/// The unknown fields of `document`, in document order.
pub fn unknown_fields(document: &Value) -> Vec<UnknownField> {
    let mut found = Vec::new();
    walk(document, &SCHEMA, &mut String::new(), &mut found);
    found
}

fn definition(schema: &Value) -> &Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => reference
            .strip_prefix("#/$defs/")
            .and_then(|name| SCHEMA.get("$defs")?.get(name))
            .unwrap_or(schema),
        None => schema,
    }
}

/// The alternative of `schema` that describes a value like `value` (an object or a list).
fn alternative<'s>(schema: &'s Value, value: &Value) -> &'s Value {
    let schema = definition(schema);
    let Some(alternatives) = ["anyOf", "oneOf"]
        .iter()
        .find_map(|key| schema.get(*key).and_then(Value::as_array))
    else {
        return schema;
    };
    alternatives
        .iter()
        .map(definition)
        .find(|candidate| match value {
            Value::Object(_) => candidate.get("properties").is_some(),
            Value::Array(_) => candidate.get("items").is_some(),
            _ => false,
        })
        .unwrap_or(schema)
}

fn walk(value: &Value, schema: &Value, path: &mut String, found: &mut Vec<UnknownField>) {
    let schema = alternative(schema, value);
    match value {
        Value::Object(map) => walk_object(map, schema, path, found),
        Value::Array(items) => {
            let Some(item_schema) = schema.get("items") else {
                return;
            };
            for (index, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{index}]"));
                walk(item, item_schema, path, found);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

fn walk_object(
    map: &Map<String, Value>,
    schema: &Value,
    path: &mut String,
    found: &mut Vec<UnknownField>,
) {
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties");
    for (key, value) in map {
        let len = path.len();
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
        match (properties.and_then(|p| p.get(key)), additional) {
            (Some(property), _) => walk(value, property, path, found),
            (None, Some(Value::Bool(false))) => found.push(UnknownField {
                field: path.clone(),
                key: key.clone(),
                expected: properties
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default(),
            }),
            (None, Some(values @ Value::Object(_))) => walk(value, values, path, found),
            (None, _) => {}
        }
        path.truncate(len);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_unknown_field_is_found_with_what_was_expected() {
        let document = json!({
            "apiVersion": "graft.dev/v1alpha1",
            "kind": "MutationPolicy",
            "metadata": {"name": "p", "labls": {}},
            "spec": {
                "match": {"resources": ["pods"], "operation": ["CREATE"]},
                "params": {"anything": {"goes": 1}},
                "mutations": [
                    {"set": {"pth": "$.a", "value": 1}},
                    {"merge": {"value": {"free": "form"}}, "whne": "true"}
                ]
            }
        });
        let found = unknown_fields(&document);
        let fields: Vec<&str> = found.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "metadata.labls",
                "spec.match.operation",
                "spec.mutations[0].set.pth",
                "spec.mutations[1].whne"
            ]
        );
        assert_eq!(
            found[2].message(),
            "unknown field `pth`, expected one of `path`, `value`, `ifAbsent`"
        );
    }

    #[test]
    fn a_valid_document_has_none() {
        let document = json!({
            "apiVersion": "graft.dev/v1alpha1",
            "kind": "MutationPolicy",
            "metadata": {"name": "p"},
            "spec": {
                "match": {"resources": ["pods"], "labelSelector": {"matchLabels": {"a": "b"}}},
                "mutations": [{"jsonPatch": [{"op": "add", "path": "/a", "value": {"x": 1}}]}]
            }
        });
        assert_eq!(unknown_fields(&document), Vec::new());
    }
}
