//! How the parse reads a request's objects: built whole, built without
//! `metadata.managedFields`, or only checked. What is not built is still read with the
//! checks building it would make, so the same bodies are refused either way.

use std::fmt;

use serde::Deserializer;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::k8s::json_text::Plain;
use crate::policy::Reads;

/// How to read one object: built (whole, or without `metadata.managedFields`), or only
/// checked (`None` where a `Build` is optional).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Build {
    pub managed_fields: bool,
}

impl Build {
    /// How to read `object`, for what the candidate policies can see (`None`: there are
    /// none).
    pub fn object(reads: Option<Reads>) -> Option<Build> {
        reads.map(|reads| Build {
            managed_fields: reads.managed_fields,
        })
    }

    /// How to read `oldObject`. Without an object (DELETE) the old object is what
    /// policies match on, and an expression reading `oldObject` may still read all of
    /// it; otherwise it is built only when an expression reads it.
    pub fn old_object(reads: Option<Reads>, has_object: bool) -> Option<Build> {
        match reads {
            None => None,
            Some(reads) if !has_object => Some(Build {
                managed_fields: reads.managed_fields || reads.old_object,
            }),
            Some(reads) if reads.old_object => Some(Build {
                managed_fields: true,
            }),
            Some(_) => None,
        }
    }

    /// An object built whole, reduced to what this way of reading it would have built.
    pub fn trim(self, mut object: Value) -> Value {
        if !self.managed_fields
            && let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
        {
            metadata.shift_remove("managedFields");
        }
        object
    }
}

impl<'de> DeserializeSeed<'de> for Build {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        if self.managed_fields {
            Plain.deserialize(deserializer)
        } else {
            Level::Root.deserialize(deserializer)
        }
    }
}

/// A value read and dropped, through `deserialize_any` so that the parser's recursion
/// limit and number parsing apply (serde's `IgnoredAny` skips iteratively and unchecked).
#[derive(Clone, Copy)]
pub(super) struct Checked;

impl<'de> DeserializeSeed<'de> for Checked {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Checked {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any valid JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Checked)?.is_some() {
            map.next_value_seed(Checked)?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Checked)?.is_some() {}
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

/// Where the build is: at the object, or in its `metadata`.
#[derive(Clone, Copy)]
enum Level {
    Root,
    Metadata,
}

impl<'de> DeserializeSeed<'de> for Level {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// Builds what [`Plain`] builds (every key as written), except `metadata.managedFields`,
/// which is only checked.
impl<'de> Visitor<'de> for Level {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any valid JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut values = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = match (self, key.as_str()) {
                (Level::Root, "metadata") => map.next_value_seed(Level::Metadata)?,
                (Level::Metadata, "managedFields") => {
                    map.next_value_seed(Checked)?;
                    continue;
                }
                _ => map.next_value_seed(Plain)?,
            };
            values.insert(key, value);
        }
        Ok(Value::Object(values))
    }

    // Below the object's top and its metadata, values are built as plain JSON.
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Value, A::Error> {
        Plain.visit_seq(seq)
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Value, E> {
        Plain.visit_bool(value)
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Value, E> {
        Plain.visit_i64(value)
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Value, E> {
        Plain.visit_u64(value)
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        Plain.visit_f64(value)
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
        Plain.visit_str(value)
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Value, E> {
        Plain.visit_string(value)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Plain.visit_unit()
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Plain.visit_none()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Plain.visit_some(deserializer)
    }
}

/// `null` as `None`, anything else through the inner seed, as `Option<T>` deserializes.
pub(super) struct Optional<S>(pub S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Optional<S> {
    type Value = Option<S::Value>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, S: DeserializeSeed<'de>> Visitor<'de> for Optional<S> {
    type Value = Option<S::Value>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a value or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        self.0.deserialize(deserializer).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn built(build: Build, text: &str) -> Result<Value, serde_json::Error> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let value = build.deserialize(&mut deserializer)?;
        deserializer.end()?;
        Ok(value)
    }

    fn checked(text: &str) -> Result<(), serde_json::Error> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        Checked.deserialize(&mut deserializer)?;
        deserializer.end()
    }

    const LEAN: Build = Build {
        managed_fields: false,
    };

    #[test]
    fn managed_fields_are_left_out_and_nothing_else() {
        let object = json!({
            "kind": "Pod",
            "metadata": {"name": "a", "managedFields": [{"manager": "m", "fieldsV1": {"f:x": {}}}], "labels": {"b": "c"}},
            "spec": {"managedFields": 1, "n": [1, 2.5, -3, null, true, "s\u{e9}"]},
        });
        let mut expected = object.clone();
        expected["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        let parsed = built(LEAN, &object.to_string()).unwrap();
        assert_eq!(parsed, expected);
        // The key order is kept, and trimming the whole object gives the same.
        assert_eq!(parsed.to_string(), expected.to_string());
        assert_eq!(LEAN.trim(object.clone()).to_string(), expected.to_string());
        let whole = Build {
            managed_fields: true,
        };
        assert_eq!(built(whole, &object.to_string()).unwrap(), object);
        assert_eq!(whole.trim(object.clone()), object);
    }

    #[test]
    fn values_that_are_not_objects_parse_as_values() {
        for text in [
            "[1, {\"metadata\": 2}]",
            "\"s\"",
            "null",
            "{\"metadata\": [1]}",
        ] {
            let plain = serde_json::from_str::<Value>(text).unwrap();
            assert_eq!(built(LEAN, text).unwrap(), plain, "{text}");
            assert_eq!(LEAN.trim(plain.clone()), plain, "{text}");
        }
    }

    #[test]
    fn invalid_json_is_refused_even_where_it_is_not_built() {
        for text in [
            "{\"metadata\": {\"managedFields\": [1,}}",
            "{\"metadata\": {}} x",
            "{\"a\": 1e400}",
            "{\"metadata\": {\"managedFields\": [1e400]}}",
            "{\"metadata\": {\"managedFields\": \"\\ud800\"}}",
        ] {
            assert!(built(LEAN, text).is_err(), "{text}");
            assert!(checked(text).is_err(), "{text}");
        }
    }

    #[test]
    fn nesting_beyond_the_recursion_limit_is_refused_where_it_is_not_built() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let text = format!("{{\"metadata\": {{\"managedFields\": {deep}}}}}");
        assert!(built(LEAN, &text).is_err());
        assert!(checked(&deep).is_err());
        assert!(checked("[[1, {\"a\": [true, null, \"s\"]}]]").is_ok());
    }

    #[test]
    fn the_old_object_is_built_as_far_as_policies_can_see_it() {
        let reads = |managed_fields, old_object| {
            Some(Reads {
                managed_fields,
                old_object,
                ..Reads::default()
            })
        };
        let whole = Some(Build {
            managed_fields: true,
        });
        // No candidate: neither object.
        assert_eq!(Build::object(None), None);
        assert_eq!(Build::old_object(None, false), None);
        // With an object, the old one only when an expression reads it, then whole.
        assert_eq!(Build::old_object(reads(false, false), true), None);
        assert_eq!(Build::old_object(reads(true, false), true), None);
        assert_eq!(Build::old_object(reads(false, true), true), whole);
        // Without one (DELETE), the old object is what policies see.
        assert_eq!(Build::old_object(reads(false, false), false), Some(LEAN));
        assert_eq!(Build::old_object(reads(false, true), false), whole);
        assert_eq!(Build::old_object(reads(true, false), false), whole);
        assert_eq!(Build::object(reads(false, true)), Some(LEAN));
        assert_eq!(Build::object(reads(true, false)), whole);
    }
}
