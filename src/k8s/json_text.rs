//! JSON text from a request (a review body, an annotation) read as plain JSON: every key
//! as written, under one recursion limit for the whole text.
//!
//! `serde_json::Value`'s own visitor does not quite do that. With serde_json's
//! `raw_value` feature (which graft uses), it reads a map whose first key is
//! `$serde_json::private::RawValue` as the JSON text in that key's string: the value
//! graft would see is not the object the apiserver holds (its patch would be computed
//! against another shape), and each such string is parsed with a fresh recursion limit,
//! so a few kilobytes of them nest deep enough to overflow a thread's stack. Anything
//! may hold such a key (a custom resource that keeps unknown fields, an annotation).

use std::fmt;

use serde::Deserializer;
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// The JSON type of `value`, with its article (`an object`, `a list`, `null`), as errors
/// name what they found: never the value itself, which may be the object's contents,
/// and reasons are logged.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// `text` as a `Value`, every key as written.
pub fn parse(text: &str) -> Result<Value, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = Plain.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// A JSON value built as written. Nested values go through the same seed, so the
/// deserializer's recursion limit counts every level.
#[derive(Clone, Copy, Debug)]
pub struct Plain;

impl<'de> DeserializeSeed<'de> for Plain {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Plain {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any valid JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut values = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(Plain)?;
            values.insert(key, value);
        }
        Ok(Value::Object(values))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut values = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(value) = seq.next_element_seed(Plain)? {
            values.push(value);
        }
        Ok(Value::Array(values))
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        Plain.deserialize(deserializer)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const RAW_KEY: &str = "$serde_json::private::RawValue";

    #[test]
    fn plain_json_reads_as_serde_json_reads_it() {
        for text in [
            r#"{"b": 1, "a": [true, null, -2, 2.5, 18446744073709551615, "s\u00e9\n"], "c": {}}"#,
            "[]",
            "\"s\"",
            "1e300",
            "null",
        ] {
            let plain = parse(text).unwrap();
            assert_eq!(
                plain,
                serde_json::from_str::<Value>(text).unwrap(),
                "{text}"
            );
            // The key order is kept too.
            assert_eq!(
                plain.to_string(),
                serde_json::from_str::<Value>(text).unwrap().to_string()
            );
        }
    }

    #[test]
    fn serde_jsons_raw_value_key_is_a_key_like_any_other() {
        let text = json!({"spec": {RAW_KEY: "{\"replaced\": true}"}}).to_string();
        // What `Value`'s own visitor makes of it, which is not what the text says.
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            json!({"spec": {"replaced": true}})
        );
        assert_eq!(
            parse(&text).unwrap(),
            json!({"spec": {RAW_KEY: "{\"replaced\": true}"}})
        );
        assert_eq!(
            parse(&json!({RAW_KEY: 5}).to_string()).unwrap(),
            json!({RAW_KEY: 5})
        );
    }

    #[test]
    fn one_recursion_limit_for_the_whole_text() {
        // Each level hides the next in a string, which `Value`'s visitor parses with a
        // fresh limit, down to the innermost value; here the text is read as written.
        let mut text = "1".to_string();
        for _ in 0..6 {
            text = json!({RAW_KEY: text}).to_string();
        }
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), json!(1));
        let value = parse(&text).unwrap();
        assert!(value[RAW_KEY].is_string(), "{value}");
        let deep = format!("{}{}", "[".repeat(129), "]".repeat(129));
        assert!(parse(&deep).is_err());
        let invalid = ["{\"a\": 1e400}", "[1,]", "{\"a\": \"\\ud800\"}", "1 2"];
        for text in invalid {
            assert!(parse(text).is_err(), "{text}");
        }
    }
}
