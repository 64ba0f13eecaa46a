//! Kubernetes objects from YAML or JSON text, as `kubectl` reads files: several
//! documents, and the items of a `kind: List`. Used by the offline commands for their
//! objects and by the Namespace file reader (`--namespaces FILE`).

use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum ObjectsError {
    #[error("document {index}: {source}")]
    Yaml {
        index: usize,
        source: serde_yaml::Error,
    },
    #[error(
        "document {index}: not an object (a Kubernetes object is a map with apiVersion and kind)"
    )]
    NotAnObject { index: usize },
}

/// Reads objects from YAML or JSON text: several documents, and `kind: List` items.
pub fn read_objects(text: &str) -> Result<Vec<Value>, ObjectsError> {
    let mut objects = Vec::new();
    for (index, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value: Value =
            serde::Deserialize::deserialize(document).map_err(|source| ObjectsError::Yaml {
                index: index + 1,
                source,
            })?;
        match value {
            Value::Null => {}
            Value::Object(ref map) if map.get("kind").and_then(Value::as_str) == Some("List") => {
                if let Some(Value::Array(items)) = map.get("items") {
                    objects.extend(items.iter().cloned());
                }
            }
            Value::Object(_) => objects.push(value),
            _ => return Err(ObjectsError::NotAnObject { index: index + 1 }),
        }
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lists_and_documents() {
        let text = "apiVersion: v1\nkind: List\nitems:\n- {kind: Pod}\n- {kind: Pod}\n---\n{\"kind\": \"Node\"}\n---\n";
        assert_eq!(read_objects(text).unwrap().len(), 3);
        assert!(matches!(
            read_objects("- a\n"),
            Err(ObjectsError::NotAnObject { index: 1 })
        ));
    }
}
