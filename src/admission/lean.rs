//! The parse of an AdmissionReview: the request's fields first, with `object` and
//! `oldObject` kept as raw JSON (checked, not built); then the objects as the caller
//! says. The server's path ([`parse_lean`]) first tries [`super::one_pass`], the same
//! in one pass over a body in the apiserver's field order. It builds only what the
//! candidate policies can see: nothing when no policy is a candidate, `oldObject` only
//! when an expression reads it (or when it is what policies see, at DELETE), and the
//! object without `metadata.managedFields` unless a policy can see that
//! ([`crate::policy::PolicySet::candidate_reads`]). [`parse`] builds both whole, for the
//! commands that show the objects.
//!
//! What is not built is still read through, and refused where building it would
//! refuse it, so both answer alike (tests compare them).

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};

use super::one_pass::Decision;
use super::{
    AdmissionRequest, BadReview, Review, Reviewed, answer, candidate_reads, checked, one_pass,
    resolve,
};
use crate::namespaces::{NamespaceData, NamespaceSource};
use crate::policy::{PolicySet, Reads};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IncomingRaw<'a> {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(borrow)]
    request: Option<AdmissionRequest<&'a RawValue>>,
}

/// Parses and answers one review body as [`super::review`] does, building only the
/// parts of the objects the candidate policies can see. `review.request.object` (and
/// `evaluation.mutated`) may lack `metadata.managedFields`, and the objects are `None`
/// when no policy is a candidate: use [`super::review`] where the objects matter. The
/// request's namespace is looked up in `namespaces` only when a candidate policy needs
/// its data.
pub fn review_lean(
    body: &[u8],
    policies: &PolicySet,
    namespaces: &dyn NamespaceSource,
) -> Result<Reviewed, BadReview> {
    let (review, namespace) = parse_lean(body, policies, namespaces)?;
    Ok(answer(review, &namespace, policies))
}

/// The parse half of [`review_lean`], for callers that want to know which request they
/// hold before evaluating it (the server names it in its logs first): the review, and
/// its namespace's data as far as a candidate policy needs it.
pub fn parse_lean(
    body: &[u8],
    policies: &PolicySet,
    namespaces: &dyn NamespaceSource,
) -> Result<(Review, NamespaceData), BadReview> {
    let text = utf8(body)?;
    let mut decide_here = |request: &AdmissionRequest| decide(request, policies, namespaces);
    if let Some(parsed) = one_pass::parse(text, &mut decide_here) {
        return Ok(parsed);
    }
    parse_with(text, |raw| decide(raw, policies, namespaces))
}

/// What the candidate policies of a request can see, and its namespace's data as far
/// as they need it: decided from the fields that route the request.
fn decide<O>(
    request: &AdmissionRequest<O>,
    policies: &PolicySet,
    namespaces: &dyn NamespaceSource,
) -> Decision {
    let reads = candidate_reads(request, policies);
    (reads, resolve(request, reads, namespaces))
}

/// Parses an AdmissionReview body with both objects built whole, for callers that show
/// or keep the objects (`graft apply`, `graft test`).
pub fn parse(body: &[u8]) -> Result<Review, BadReview> {
    let everything = Reads {
        managed_fields: true,
        old_object: true,
        ..Reads::default()
    };
    let text = utf8(body)?;
    Ok(parse_with(text, |_| (Some(everything), NamespaceData::NotLookedUp))?.0)
}

/// The body as text. simdutf8 only says whether the body is valid; for a body that is
/// not, core's check says where, for the error.
fn utf8(body: &[u8]) -> Result<&str, std::str::Utf8Error> {
    simdutf8::basic::from_utf8(body).or_else(|_| std::str::from_utf8(body))
}

/// The two-pass parse: the envelope, then the objects as `what` says (`None`: neither).
fn parse_with(
    text: &str,
    what: impl FnOnce(&AdmissionRequest<&RawValue>) -> (Option<Reads>, NamespaceData),
) -> Result<(Review, NamespaceData), BadReview> {
    let incoming: IncomingRaw<'_> = serde_json::from_str(text)?;
    let raw = checked(&incoming.api_version, incoming.kind, incoming.request)?;
    if raw.uid.is_empty() {
        return Err(BadReview::MissingUid);
    }
    let (reads, namespace) = what(&raw);
    let (object, old_object) = match reads {
        None => (None, None),
        Some(reads) => build_objects(raw.object, raw.old_object, reads)?,
    };
    // What is not built is still checked as the full parse would check it.
    for (raw, built, field) in [
        (raw.object, object.is_some(), "object"),
        (raw.old_object, old_object.is_some(), "oldObject"),
    ] {
        if let (Some(raw), false) = (raw, built) {
            check(raw.get()).map_err(|error| BadReview::Object { field, error })?;
        }
    }
    let request = raw.with_objects(object, old_object);
    let review = Review {
        api_version: incoming.api_version,
        request,
    };
    Ok((review, namespace))
}

type Objects = (Option<Value>, Option<Value>);

fn build_objects(
    object: Option<&RawValue>,
    old_object: Option<&RawValue>,
    reads: Reads,
) -> Result<Objects, BadReview> {
    let build = |raw: &RawValue, field: &'static str, without_managed_fields: bool| {
        let parsed = if without_managed_fields {
            object_without_managed_fields(raw.get())
        } else {
            serde_json::from_str(raw.get())
        };
        parsed.map_err(|error| BadReview::Object { field, error })
    };
    let object = object
        .map(|raw| build(raw, "object", !reads.managed_fields))
        .transpose()?;
    let old_object = match old_object {
        // Without an object (DELETE) the old object is the document policies match on;
        // an expression reading `oldObject` may still read all of it.
        Some(raw) if object.is_none() => Some(build(
            raw,
            "oldObject",
            !reads.managed_fields && !reads.old_object,
        )?),
        Some(raw) if reads.old_object => Some(build(raw, "oldObject", false)?),
        _ => None,
    };
    Ok((object, old_object))
}

/// Parses an object as `serde_json` does, leaving out `metadata.managedFields` (which
/// is still checked as the full parse would check it).
fn object_without_managed_fields(json: &str) -> Result<Value, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(json);
    let value = Level::Root.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// Checks `json` as building a `Value` from it would (syntax, UTF-8, escapes, numbers
/// in range, nesting within serde_json's recursion limit) without building anything.
fn check(json: &str) -> Result<(), serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(json);
    Checked.deserialize(&mut deserializer)?;
    deserializer.end()
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

/// Where the parse is: at the object, in its `metadata`, or anywhere else (a `Value`).
#[derive(Clone, Copy)]
pub(super) enum Level {
    Root,
    Metadata,
}

impl<'de> DeserializeSeed<'de> for Level {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// Builds what `serde_json::Value`'s own visitor builds, except under the two levels.
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
                _ => map.next_value::<Value>()?,
            };
            values.insert(key, value);
        }
        Ok(Value::Object(values))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut values = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(value) = seq.next_element::<Value>()? {
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

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
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
        Value::deserialize(deserializer)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
        let parsed = object_without_managed_fields(&object.to_string()).unwrap();
        assert_eq!(parsed, expected);
        // The key order is kept.
        assert_eq!(parsed.to_string(), expected.to_string());
    }

    #[test]
    fn values_that_are_not_objects_parse_as_values() {
        for text in [
            "[1, {\"metadata\": 2}]",
            "\"s\"",
            "null",
            "{\"metadata\": [1]}",
        ] {
            assert_eq!(
                object_without_managed_fields(text).unwrap(),
                serde_json::from_str::<Value>(text).unwrap(),
                "{text}"
            );
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
            assert!(object_without_managed_fields(text).is_err(), "{text}");
        }
    }

    #[test]
    fn nesting_beyond_the_recursion_limit_is_refused_where_it_is_not_built() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let text = format!("{{\"metadata\": {{\"managedFields\": {deep}}}}}");
        assert!(object_without_managed_fields(&text).is_err());
        assert!(check(&deep).is_err());
        assert!(check("[[1, {\"a\": [true, null, \"s\"]}]]").is_ok());
    }
}
